package gguf

// iq4nlValues are IQ4_NL's and IQ4_XS's 16 non-linear levels (ggml's kvalues_iq4nl): a 4-bit
// quant q stands for iq4nlValues[q] times its block's scale.
var iq4nlValues = [16]int8{-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113}

// mxfp4Values are MXFP4's 16 E2M1 levels doubled (ggml's kvalues_mxfp4): a 4-bit quant q stands
// for mxfp4Values[q] times half its block's power-of-two scale (e8m0ToF32Half).
var mxfp4Values = [16]int8{0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12}

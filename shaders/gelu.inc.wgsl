// gelu is ggml's GELU of a gate as its f16 table gives it (GGML_GELU_FP16): the gate rounded to
// f16 and the GELU of that rounded to f16, 0 at -10 and below, the gate itself at 10 and
// above; with GELU_TABLE (CPUMath) from llama.cpp's table itself, which the including kernel
// binds as gelu_t.

//#include f16_round.inc

fn gelu(x: f32) -> f32 {
    if (x <= -10.0) {
        return 0.0;
    }
    if (x >= 10.0) {
        return x;
    }
#ifdef GELU_TABLE
    let hb = f16_bits(x);
    return unpack2x16float(gelu_t[hb / 2u] >> (16u * (hb % 2u))).x;
#else
    let h = f16_round(x);
    return f16_round(0.5 * h * (1.0 + tanh(0.7978845608028654 * h * (1.0 + 0.044715 * h * h))));
#endif
}

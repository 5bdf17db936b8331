// Rounds matmul activations the way llama.cpp's CPU backend feeds them to its dot products
// (ggml's vec_dot_type of the weight), so quantized models give llama.cpp's exact outputs:
//   Q8_0: blocks of 32 scaled by d = amax / 127 (stored as f16), values round(x * 127 / amax)
//         (for Q4_0, Q5_0, Q8_0 weights); with SUMS (Q8_1, for Q4_1 and Q5_1) also each
//         block's f16(d * sum q), which those dot products multiply by the weight's minimum;
//   Q8_K: blocks of 256 scaled by 1 / iscale, iscale = -127 / (the value of largest magnitude)
//         (for the K-quants);
//   F16, BF16: each value rounded to half or bfloat16 precision.
// The output is the dequantized activation in f32: out = d * q.

struct Params {
    k: u32,      // row length
    n_rows: u32, // rows (tokens)
    x_row0: u32, // first row of x to read; out rows start at 0
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;
#ifdef SUMS
@group(0) @binding(3) var<storage, read_write> sums: array<f32>; // (n_rows, k / 32)
#endif

//#include f16_round.inc

#ifdef Q8_K
const BLOCK: u32 = 256u;
#else
#ifdef Q8_0
const BLOCK: u32 = 32u;
#else
const BLOCK: u32 = 4u;
#endif
#endif

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let blocks = p.k / BLOCK;
    let i = gid.x + gid.y * nwg.x * 64u;
    if (i >= blocks * p.n_rows) {
        return;
    }
    let row = i / blocks;
    let src = (p.x_row0 + row) * p.k + (i % blocks) * BLOCK;
    let dst = row * p.k + (i % blocks) * BLOCK;
#ifdef Q8_0
    var amax = 0.0;
    for (var j = 0u; j < BLOCK; j++) {
        amax = max(amax, abs(x[src + j]));
    }
    let d = amax / 127.0;
    var id = 0.0;
    if (amax != 0.0) {
        id = 127.0 / amax;
    }
    var sum = 0.0;
    for (var j = 0u; j < BLOCK; j++) {
        let q = round(x[src + j] * id);
        out[dst + j] = f16_round(d) * q;
        sum += q;
    }
#ifdef SUMS
    sums[i] = f16_round(d * sum);
#endif
#endif
#ifdef Q8_K
    var amax = 0.0;
    var mx = 0.0;
    for (var j = 0u; j < BLOCK; j++) {
        let v = x[src + j];
        if (abs(v) > amax) {
            amax = abs(v);
            mx = v;
        }
    }
    if (amax == 0.0) {
        for (var j = 0u; j < BLOCK; j++) {
            out[dst + j] = 0.0;
        }
        return;
    }
    let iscale = -127.0 / mx;
    let d = 1.0 / iscale;
    for (var j = 0u; j < BLOCK; j++) {
        out[dst + j] = d * min(127.0, round(iscale * x[src + j]));
    }
#endif
#ifdef F16
    for (var j = 0u; j < BLOCK; j++) {
        out[dst + j] = f16_round(x[src + j]);
    }
#endif
#ifdef BF16
    for (var j = 0u; j < BLOCK; j++) {
        // Round to nearest even on the 16 dropped bits, as ggml's fp32_to_bf16 does.
        let b = bitcast<u32>(x[src + j]);
        out[dst + j] = bitcast<f32>((b + 0x7FFFu + ((b >> 16u) & 1u)) & 0xFFFF0000u);
    }
#endif
}

// Mixture-of-Experts elementwise steps over the assignments' rows (assignment a = token·k +
// slot), one invocation per element, no loops but the combine's k.
//
// Default (gpu.MoECombine): out[t, i] (+)= sum over slots j of weights[t k + j] * y[t k + j, i],
// in llama.cpp's order (build_moe_ffn: each expert output times its weight, ggml_mul, then the k
// views added in slot order, ((w0 y0 + w1 y1) + w2 y2) ..., the residual added after the sum).
// ADD_ID (gpu.AddID): y[a, col + i] += bias[ids[a], i], ggml's add_id (per-expert biases).

struct Params {
    n_tok: u32,    // combine: tokens; ADD_ID: assignments
    k: u32,        // combine: slots per token
    width: u32,    // row length of the sum (combine) or of the bias (ADD_ID)
    y_stride: u32, // ADD_ID: row length of y
    y_col: u32,    // ADD_ID: y's first column
}

@group(0) @binding(0) var<uniform> p: Params;
#ifdef ADD_ID
@group(0) @binding(1) var<storage, read_write> y: array<f32>;     // (n_tok, y_stride)
@group(0) @binding(2) var<storage, read> bias: array<f32>;        // (experts, width)
@group(0) @binding(3) var<storage, read> ids: array<u32>;         // (n_tok)
#else
@group(0) @binding(1) var<storage, read> y: array<f32>;           // (n_tok k, width)
@group(0) @binding(2) var<storage, read> weights: array<f32>;     // (n_tok k)
@group(0) @binding(3) var<storage, read_write> out: array<f32>;   // (n_tok, width)
#endif

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * 64u;
    if (i >= p.n_tok * p.width) {
        return;
    }
    let t = i / p.width;
    let c = i % p.width;
#ifdef ADD_ID
    let o = t * p.y_stride + p.y_col + c;
    y[o] = y[o] + bias[ids[t] * p.width + c];
#else
    let a0 = t * p.k;
    var s = weights[a0] * y[a0 * p.width + c];
    for (var j = 1u; j < p.k; j++) {
        let v = weights[a0 + j] * y[(a0 + j) * p.width + c];
        s = s + v;
    }
#ifdef ADD
    out[i] = s + out[i];
#else
    out[i] = s;
#endif
#endif
}

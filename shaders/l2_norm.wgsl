// ggml's l2_norm over head vectors in place (gpu.L2Norm): Gated DeltaNet's q and k heads,
// each x * 1/max(||x||, eps), ||x|| = sqrtf of the sum of squares summed as in double and
// rounded to f32 (norm_sum.inc), as ggml_compute_forward_l2_norm_f32.
// One invocation per (row, head); loops: 2 head_dim.

//#include norm_sum.inc

struct Params {
    rows: u32,
    heads: u32,    // head vectors per row
    head_dim: u32,
    stride: u32,   // floats per row of x
    col: u32,      // column of head 0
    eps: f32,
    zero: u32,    // 0: ns_zero (norm_sum.inc)
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> x: array<f32>; // (rows, stride)

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    ns_zero = p.zero;
    let i = gid.x + gid.y * nwg.x * 64u;
    if (i >= p.rows * p.heads) {
        return;
    }
    let base = (i / p.heads) * p.stride + p.col + (i % p.heads) * p.head_dim;
    var sum = vec2<f32>(0.0, 0.0);
    for (var e = 0u; e < p.head_dim; e++) {
        let v = x[base + e];
        sum = ns_add(sum, v * v);
    }
    let scale = 1.0 / max(sqrt(ns_value(sum)), p.eps);
    for (var e = 0u; e < p.head_dim; e++) {
        x[base + e] = x[base + e] * scale;
    }
}

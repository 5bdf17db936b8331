// qwen35's gated RMSNorm (llama.cpp's build_norm_gated, gpu.GatedRMSNorm) over head vectors in
// place: each head vector v of o becomes ((v * s) * w) * silu(z), s = 1/sqrt(mean(v^2) + eps),
// in f32 in ggml's order (rms_norm, then ggml_mul by the weight, then ggml_mul by ggml_silu of
// the gate's head, each head a row of ggml_vec_silu_f32: ggml_math.inc's silu_row); the
// squares summed as in double (norm_sum.inc).
// One invocation per (row, head); loops: 2 head_dim.

//#include norm_sum.inc
//#include ggml_math.inc

struct Params {
    rows: u32,
    heads: u32,
    head_dim: u32,
    o_stride: u32,  // floats per row of o
    o_col: u32,     // column of head 0
    o_head: u32,    // floats from one head to the next
    z_stride: u32,
    z_col: u32,
    z_head: u32,
    eps: f32,
    zero: u32,    // 0: ns_zero (norm_sum.inc)
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> o: array<f32>; // (rows, o_stride)
@group(0) @binding(2) var<storage, read> z: array<f32>;       // (rows, z_stride)
@group(0) @binding(3) var<storage, read> w: array<f32>;       // (head_dim), shared by the heads

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    ns_zero = p.zero;
    let i = gid.x + gid.y * nwg.x * 64u;
    if (i >= p.rows * p.heads) {
        return;
    }
    let t = i / p.heads;
    let h = i % p.heads;
    let ob = t * p.o_stride + p.o_col + h * p.o_head;
    let zb = t * p.z_stride + p.z_col + h * p.z_head;
    var sum = vec2<f32>(0.0, 0.0);
    for (var e = 0u; e < p.head_dim; e++) {
        let v = o[ob + e];
        sum = ns_add(sum, v * v);
    }
    let scale = 1.0 / sqrt(ns_div(sum, f32(p.head_dim)) + p.eps);
    for (var e = 0u; e < p.head_dim; e++) {
        let g = z[zb + e];
        o[ob + e] = ((o[ob + e] * scale) * w[e]) * silu_row(g, e, p.head_dim);
    }
}

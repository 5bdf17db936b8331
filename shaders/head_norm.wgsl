// Per-head RMSNorm of the query and key heads in the fused qkv rows (Qwen3's and Gemma 3's
// QK-norm), in place, before RoPE: every head vector of head_dim values is scaled to unit RMS
// (plus eps) and multiplied by q_norm (query heads) or k_norm (key heads). With v_heads, the
// value heads are normalised too, with no weight (Gemma 4's ggml_rms_norm of its values);
// otherwise they are left alone. One invocation per head vector.

//#include norm_sum.inc

struct Params {
    n_tokens: u32,
    n_head: u32,
    n_kv_head: u32,
    head_dim: u32,
    eps: f32,
    zero: u32,    // 0: ns_zero (norm_sum.inc)
    v_heads: u32, // n_kv_head to normalise the value heads, else 0
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> qkv: array<f32>; // (n_tokens, n_head + 2 n_kv_head, head_dim)
@group(0) @binding(2) var<storage, read> q_norm: array<f32>;    // (head_dim)
@group(0) @binding(3) var<storage, read> k_norm: array<f32>;    // (head_dim)

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    ns_zero = p.zero;
    let heads = p.n_head + p.n_kv_head + p.v_heads;
    let i = gid.x + gid.y * nwg.x * 64u;
    if (i >= p.n_tokens * heads) {
        return;
    }
    let t = i / heads;
    let slot = i % heads;
    let base = (t * (p.n_head + 2u * p.n_kv_head) + slot) * p.head_dim;
    var ss = vec2<f32>(0.0, 0.0);
    for (var e = 0u; e < p.head_dim; e++) {
        let v = qkv[base + e];
        ss = ns_add(ss, v * v);
    }
    let scale = 1.0 / sqrt(ns_div(ss, f32(p.head_dim)) + p.eps);
    if (slot >= p.n_head + p.n_kv_head) {
        for (var e = 0u; e < p.head_dim; e++) {
            qkv[base + e] = qkv[base + e] * scale;
        }
        return;
    }
    for (var e = 0u; e < p.head_dim; e++) {
        var w = k_norm[e];
        if (slot < p.n_head) {
            w = q_norm[e];
        }
        qkv[base + e] = (qkv[base + e] * scale) * w;
    }
}

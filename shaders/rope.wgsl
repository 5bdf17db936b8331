// Rotary position embedding, llama ("normal") style: pairs (x[2i], x[2i+1]) of the first n_rot
// dimensions of every head rotate by pos * freq_base^(-2i/n_rot); the rest pass through.
// Without defines it rotates x in place. TO_CACHE: reads src and writes the rotated rows into
// the KV cache at row pos[t] (the key write fused into RoPE).

struct Params {
    n_tokens: u32,
    n_heads: u32,
    head_dim: u32,
    n_rot: u32,
    freq_base: f32,
}

@group(0) @binding(0) var<uniform> p: Params;
#ifdef TO_CACHE
@group(0) @binding(1) var<storage, read> src: array<f32>;       // (n_tokens, n_heads, head_dim)
@group(0) @binding(2) var<storage, read> pos: array<u32>;       // (n_tokens)
@group(0) @binding(3) var<storage, read_write> dst: array<f32>; // (n_ctx, n_heads, head_dim)
#else
@group(0) @binding(1) var<storage, read_write> dst: array<f32>; // (n_tokens, n_heads, head_dim)
@group(0) @binding(2) var<storage, read> pos: array<u32>;       // (n_tokens)
#endif

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    // One invocation per pair of dimensions.
    let half_d = p.head_dim / 2u;
    let i = gid.x + gid.y * nwg.x * 64u;
    if (i >= p.n_tokens * p.n_heads * half_d) {
        return;
    }
    let t = i / (p.n_heads * half_d);
    let rem = i % (p.n_heads * half_d);
    let h = rem / half_d;
    let j = rem % half_d;
    let src_off = (t * p.n_heads + h) * p.head_dim + 2u * j;
#ifdef TO_CACHE
    let dst_off = (pos[t] * p.n_heads + h) * p.head_dim + 2u * j;
    let x0 = src[src_off];
    let x1 = src[src_off + 1u];
#else
    let dst_off = src_off;
    let x0 = dst[src_off];
    let x1 = dst[src_off + 1u];
#endif
    if (2u * j >= p.n_rot) {
        dst[dst_off] = x0;
        dst[dst_off + 1u] = x1;
        return;
    }
    let theta = f32(pos[t]) * pow(p.freq_base, -f32(2u * j) / f32(p.n_rot));
    let c = cos(theta);
    let s = sin(theta);
    dst[dst_off] = x0 * c - x1 * s;
    dst[dst_off + 1u] = x0 * s + x1 * c;
}

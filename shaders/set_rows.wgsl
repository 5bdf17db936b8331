// Scatter rows into the KV cache: dst[pos[t], :] = src[t, :] (the value-cache write).

struct Params {
    width: u32,
    n_tokens: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> src: array<f32>;       // (n_tokens, width)
@group(0) @binding(2) var<storage, read> pos: array<u32>;       // (n_tokens)
@group(0) @binding(3) var<storage, read_write> dst: array<f32>; // (n_ctx, width)

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * 64u;
    if (i >= p.width * p.n_tokens) {
        return;
    }
    let t = i / p.width;
    let c = i % p.width;
    dst[pos[t] * p.width + c] = src[i];
}

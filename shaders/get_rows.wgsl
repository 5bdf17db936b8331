// Embedding lookup: out[t, :] = weight[ids[t], :], dequantized to f32.
// Defines: W_F16 (weights are packed f16 pairs; n_embd even).

struct Params {
    n_embd: u32,
    n_tokens: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
#ifdef W_F16
@group(0) @binding(1) var<storage, read> w: array<u32>;        // (n_vocab, n_embd) f16 pairs
#else
@group(0) @binding(1) var<storage, read> w: array<f32>;        // (n_vocab, n_embd)
#endif
@group(0) @binding(2) var<storage, read> ids: array<u32>;      // (n_tokens)
@group(0) @binding(3) var<storage, read_write> out: array<f32>; // (n_tokens, n_embd)

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * 64u;
    if (i >= p.n_embd * p.n_tokens) {
        return;
    }
    let t = i / p.n_embd;
    let c = i % p.n_embd;
    let idx = ids[t] * p.n_embd + c;
#ifdef W_F16
    let pair = unpack2x16float(w[idx / 2u]);
    out[i] = select(pair.x, pair.y, (idx & 1u) == 1u);
#else
    out[i] = w[idx];
#endif
}

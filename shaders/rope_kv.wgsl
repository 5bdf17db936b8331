// The step between the QKV projection and attention, in one dispatch: each row of qkv holds
// [q (n_head x head_dim) | k (n_kv_head x head_dim) | v (n_kv_head x head_dim)] for one token.
// Rotary position embedding (llama's "normal" RoPE: adjacent pairs of the first n_rot
// dimensions of a head turn by pos * freq_base^(-2i/n_rot)) is applied to q in place and to k
// on its way into the KV cache at row pos[t]; v is copied into the cache unchanged.
// Define KV_F16 stores the cache as f16 pairs (one u32 per pair), else f32.

struct Params {
    n_tokens: u32,
    n_head: u32,
    n_kv_head: u32,
    head_dim: u32,
    n_rot: u32,
    freq_base: f32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> qkv: array<f32>; // (n_tokens, n_head + 2 n_kv_head, head_dim)
@group(0) @binding(2) var<storage, read> pos: array<u32>;       // (n_tokens)
#ifdef KV_F16
@group(0) @binding(3) var<storage, read_write> kc: array<u32>;  // (n_ctx, n_kv_head, head_dim / 2)
@group(0) @binding(4) var<storage, read_write> vc: array<u32>;
#else
@group(0) @binding(3) var<storage, read_write> kc: array<f32>;  // (n_ctx, n_kv_head, head_dim)
@group(0) @binding(4) var<storage, read_write> vc: array<f32>;
#endif

fn store_pair(is_k: bool, off: u32, v: vec2<f32>) {
#ifdef KV_F16
    if (is_k) {
        kc[off / 2u] = pack2x16float(v);
    } else {
        vc[off / 2u] = pack2x16float(v);
    }
#else
    if (is_k) {
        kc[off] = v.x;
        kc[off + 1u] = v.y;
    } else {
        vc[off] = v.x;
        vc[off + 1u] = v.y;
    }
#endif
}

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    // One invocation per pair of dimensions of every head slot of every token.
    let half_d = p.head_dim / 2u;
    let slots = p.n_head + 2u * p.n_kv_head;
    let i = gid.x + gid.y * nwg.x * 64u;
    if (i >= p.n_tokens * slots * half_d) {
        return;
    }
    let t = i / (slots * half_d);
    let slot = (i / half_d) % slots;
    let j = i % half_d;
    let src = (t * slots + slot) * p.head_dim + 2u * j;
    var v = vec2<f32>(qkv[src], qkv[src + 1u]);
    let is_v = slot >= p.n_head + p.n_kv_head;
    if (!is_v && 2u * j < p.n_rot) {
        let theta = f32(pos[t]) * pow(p.freq_base, -f32(2u * j) / f32(p.n_rot));
        let c = cos(theta);
        let s = sin(theta);
        v = vec2<f32>(v.x * c - v.y * s, v.x * s + v.y * c);
    }
    if (slot < p.n_head) {
        qkv[src] = v.x;
        qkv[src + 1u] = v.y;
        return;
    }
    let kvh = select(slot - p.n_head, slot - p.n_head - p.n_kv_head, is_v);
    store_pair(!is_v, (pos[t] * p.n_kv_head + kvh) * p.head_dim + 2u * j, v);
}

// Split-K attention for decoding at long contexts: one query token's keys are cut into n_split
// ranges, one workgroup each, so the cache is read by n_head * n_split workgroups instead of
// n_head. Pass 1 (default) writes each range's running max m, sum l and unnormalised output;
// pass 2 (define MERGE) rescales and combines them, with define SINKS counting per-head attention
// sinks (gpt-oss) in the sum. Define KV_F16 reads an f16 cache.

struct Params {
    n_tokens: u32,
    n_head: u32,
    n_kv_head: u32,
    head_dim: u32, // at most 256, even
    scale: f32,
    q_stride: u32,
    n_split: u32,
    chunk: u32,    // keys per split
    softcap: f32,  // > 0: scores become softcap * tanh(score / softcap) (Gemma 2)
    window: u32,   // > 0: a token sees only the last `window` positions (sliding window)
    all_keys: u32, // > 0: not causal: every token sees keys 0 .. all_keys-1 (BERT)
    page_bits: u32,// cache addressing (kv_row.inc)
    key_lo: u32,   // unused here (the row-per-thread kernel's chunks)
    key_hi: u32,
    last: u32,
}

const WG: u32 = 64u;
const MAXD: u32 = 256u;
const NEG: f32 = -3.0e38;

@group(0) @binding(0) var<uniform> p: Params;


#ifdef MERGE
@group(0) @binding(1) var<storage, read> part: array<f32>;       // (n_tokens, n_head, n_split, head_dim + 2)
@group(0) @binding(2) var<storage, read_write> out: array<f32>;  // (n_tokens, n_head, head_dim)
#ifdef SINKS
@group(0) @binding(3) var<storage, read> sinks: array<f32>;      // (n_head): gpu.AttnParams.Sinks
#endif

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let h = wg.x;
    let t = wg.y;
    let d = p.head_dim;
    let base = (t * p.n_head + h) * p.n_split * (d + 2u);
    var m = NEG;
    for (var s = 0u; s < p.n_split; s++) {
        m = max(m, part[base + s * (d + 2u)]);
    }
#ifdef SINKS
    // The sink is one more score in the max and the sum, with no value.
    let sink = sinks[h];
    m = max(m, sink);
#endif
    var l = 0.0;
    for (var s = 0u; s < p.n_split; s++) {
        let o = base + s * (d + 2u);
        l += part[o + 1u] * exp(part[o] - m);
    }
#ifdef SINKS
    l += exp(sink - m);
#endif
    for (var dim = lid.x; dim < d; dim += WG) {
        var acc = 0.0;
        for (var s = 0u; s < p.n_split; s++) {
            let o = base + s * (d + 2u);
            acc += part[o + 2u + dim] * exp(part[o] - m);
        }
        out[(t * p.n_head + h) * d + dim] = acc / l;
    }
}
#else
@group(0) @binding(1) var<storage, read> q: array<f32>;          // (n_tokens, q_stride)
#ifdef KV_F16
@group(0) @binding(2) var<storage, read> kc: array<u32>;         // (n_ctx, n_kv_head, head_dim / 2)
@group(0) @binding(3) var<storage, read> vc: array<u32>;
#else
@group(0) @binding(2) var<storage, read> kc: array<f32>;         // (n_ctx, n_kv_head, head_dim)
@group(0) @binding(3) var<storage, read> vc: array<f32>;
#endif
@group(0) @binding(4) var<storage, read> pos: array<u32>;        // positions, then cache addressing (kv_row.inc)
@group(0) @binding(5) var<storage, read_write> part: array<f32>; // (n_tokens, n_head, n_split, head_dim + 2)

//#include attention.inc

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let h = wg.x;
    let split = wg.y;
    let t = wg.z;
    let d = p.head_dim;
    load_q(t * p.q_stride + h * d, lid.x);
    let start = max(split * p.chunk, first_key(pos[t]));
    let r = attend(h / (p.n_head / p.n_kv_head), t, start, min((split + 1u) * p.chunk, key_end(t)), lid.x);
    let o = ((t * p.n_head + h) * p.n_split + split) * (d + 2u);
    if (lid.x == 0u) {
        part[o] = r.m;
        part[o + 1u] = r.l;
    }
    for (var a = 0u; a < 4u; a++) {
        let dim = lid.x + a * WG;
        if (dim < d) {
            part[o + 2u + dim] = r.acc[a];
        }
    }
}
#endif

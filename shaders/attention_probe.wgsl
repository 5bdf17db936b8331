// Attention weights of one query head of one batch row, for a debug view: out[j] =
// softmax_j(capped(q . k_j * scale)) over the keys the row attends to (causal up to its
// position, or all_keys; attention.inc's first_key and key_end), 0 for rows before a sliding
// window's start. It reads what the attention kernels read, through the same code: q from the
// fused qkv rows, the cache through kv_row.inc (contiguous or paged), f32 or, with KV_F16, f16
// pairs, query head h on kv head h / (n_head / n_kv_head). With define SINKS the head's attention
// sink (gpt-oss) counts in the softmax's sum, as in the attention kernels.
//
// One workgroup: each invocation takes every WG-th key, storing its score in out and keeping a
// running max and sum; a tree reduction merges those, and a second pass turns the stored
// scores into weights. Per invocation that is about keys / WG * (head_dim / 2 + 3) loop
// iterations (gpu.AttentionProbe keeps it under llvmpipe's loopBudget).

struct Params {
    n_tokens: u32,
    n_head: u32,
    n_kv_head: u32,
    head_dim: u32, // at most 256, even
    scale: f32,
    q_stride: u32, // floats per token row of q
    softcap: f32,  // > 0: scores become softcap * tanh(score / softcap)
    window: u32,   // > 0: the row sees only the last `window` positions
    all_keys: u32, // > 0: not causal: the row sees keys 0 .. all_keys-1
    page_bits: u32,// cache addressing (kv_row.inc)
    row: u32,      // the batch row whose query is probed
    head: u32,     // its query head
}

@group(0) @binding(0) var<uniform> p: Params;

@group(0) @binding(1) var<storage, read> q: array<f32>;         // (n_tokens, q_stride), heads first
#ifdef KV_F16
@group(0) @binding(2) var<storage, read> kc: array<u32>;        // (n_ctx, n_kv_head, head_dim / 2)
#else
@group(0) @binding(2) var<storage, read> kc: array<f32>;        // (n_ctx, n_kv_head, head_dim)
#endif
@group(0) @binding(3) var<storage, read> pos: array<u32>;       // positions, then cache addressing (kv_row.inc)
@group(0) @binding(4) var<storage, read_write> out: array<f32>; // (key_end) weights
#ifdef SINKS
@group(0) @binding(5) var<storage, read> sinks: array<f32>;     // (n_head): gpu.AttnParams.Sinks
#endif
// attention.inc's value readers name `vc`; the probe never calls them, so this binding is not
// part of its layout.
#ifdef KV_F16
@group(0) @binding(6) var<storage, read> vc: array<u32>;
#else
@group(0) @binding(6) var<storage, read> vc: array<f32>;
#endif

const WG: u32 = 256u;
const MAXD: u32 = 256u;
const NEG: f32 = -3.0e38;
//#include attention.inc

var<workgroup> red_m: array<f32, WG>;
var<workgroup> red_l: array<f32, WG>;

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_id) lid3: vec3<u32>) {
    let lid = lid3.x;
    let t = p.row;
    let d = p.head_dim;
    load_q(t * p.q_stride + p.head * d, lid); // into attention.inc's qs
    let kvh = p.head / (p.n_head / p.n_kv_head);
    let kv_stride = p.n_kv_head * d;
    let start = first_key(pos[t]);
    let end = key_end(t);
    for (var j = lid; j < start; j += WG) {
        out[j] = 0.0;
    }
    var m = NEG;
    var l = 0.0;
    for (var j = start + lid; j < end; j += WG) {
        let k_off = kv_row(t, j) * kv_stride + kvh * d;
        var dot = 0.0;
        for (var i = 0u; i < d; i += 2u) {
            let kv = k_pair(k_off + i);
            dot += qs[i] * kv.x + qs[i + 1u] * kv.y;
        }
        let s = capped(dot * p.scale);
        out[j] = s;
        if (s > m) {
            l = l * exp(m - s) + 1.0;
            m = s;
        } else {
            l += exp(s - m);
        }
    }
    red_m[lid] = m;
    red_l[lid] = l;
    workgroupBarrier();
    for (var half = WG / 2u; half > 0u; half /= 2u) {
        if (lid < half) {
            let m2 = red_m[lid + half];
            let mm = max(m, m2);
            l = l * exp(m - mm) + red_l[lid + half] * exp(m2 - mm);
            m = mm;
            red_m[lid] = m;
            red_l[lid] = l;
        }
        workgroupBarrier();
    }
#ifdef SINKS
    // The head's sink takes its share of the softmax (the weights then sum to less than 1).
    let sk = sink_step(red_m[0], red_l[0], sinks[p.head]);
    let mx = sk.x;
    let inv = 1.0 / sk.y;
#else
    let mx = red_m[0];
    let inv = 1.0 / red_l[0];
#endif
    // Each invocation rescales the scores it stored itself: no barrier needed on out.
    for (var j = start + lid; j < end; j += WG) {
        out[j] = exp(out[j] - mx) * inv;
    }
}

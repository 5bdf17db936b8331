// Split-K attention for decoding at long contexts: one query token's keys are cut into n_split
// ranges, one workgroup each, so the cache is read by n_head * n_split workgroups instead of
// n_head. Pass 1 (default) writes each range's running max m, sum l and unnormalised output;
// pass 2 (define MERGE) rescales and combines them. Define KV_F16 reads an f16 cache.

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
}

const WG: u32 = 64u;
const MAXD: u32 = 256u;
const NEG: f32 = -3.0e38;

@group(0) @binding(0) var<uniform> p: Params;

// first_key is the earliest cache row token position `at` attends to.
fn first_key(at: u32) -> u32 {
    if (p.window == 0u || at + 1u <= p.window) {
        return 0u;
    }
    return at + 1u - p.window;
}


fn capped(s: f32) -> f32 {
    if (p.softcap > 0.0) {
        return p.softcap * tanh(s / p.softcap);
    }
    return s;
}

#ifdef MERGE
@group(0) @binding(1) var<storage, read> part: array<f32>;       // (n_tokens, n_head, n_split, head_dim + 2)
@group(0) @binding(2) var<storage, read_write> out: array<f32>;  // (n_tokens, n_head, head_dim)

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
    var l = 0.0;
    for (var s = 0u; s < p.n_split; s++) {
        let o = base + s * (d + 2u);
        l += part[o + 1u] * exp(part[o] - m);
    }
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
@group(0) @binding(4) var<storage, read> pos: array<u32>;        // (n_tokens)
@group(0) @binding(5) var<storage, read_write> part: array<f32>; // (n_tokens, n_head, n_split, head_dim + 2)

var<workgroup> qs: array<f32, MAXD>;

// key_end is one past the last cache row token t attends to.
fn key_end(t: u32) -> u32 {
    if (p.all_keys > 0u) {
        return p.all_keys;
    }
    return pos[t] + 1u;
}
var<workgroup> scores: array<f32, WG>;

fn k_pair(off: u32) -> vec2<f32> {
#ifdef KV_F16
    return unpack2x16float(kc[off / 2u]);
#else
    return vec2<f32>(kc[off], kc[off + 1u]);
#endif
}

fn v_at(off: u32) -> f32 {
#ifdef KV_F16
    let pair = unpack2x16float(vc[off / 2u]);
    return select(pair.x, pair.y, (off & 1u) == 1u);
#else
    return vc[off];
#endif
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let h = wg.x;
    let split = wg.y;
    let t = wg.z;
    let d = p.head_dim;
    let kvh = h / (p.n_head / p.n_kv_head);
    let q_off = t * p.q_stride + h * d;
    for (var i = lid.x; i < d; i += WG) {
        qs[i] = q[q_off + i];
    }
    workgroupBarrier();

    let n_keys = key_end(t);
    let start = max(split * p.chunk, first_key(pos[t]));
    let end = min((split + 1u) * p.chunk, n_keys);
    let kv_stride = p.n_kv_head * d;
    var m = NEG;
    var l = 0.0;
    var acc: array<f32, 4>;
    for (var j0 = start; j0 < end; j0 += WG) {
        let j = j0 + lid.x;
        var s = NEG;
        if (j < end) {
            let k_off = j * kv_stride + kvh * d;
            var dot = 0.0;
            for (var i = 0u; i < d; i += 2u) {
                let kv = k_pair(k_off + i);
                dot += qs[i] * kv.x + qs[i + 1u] * kv.y;
            }
            s = capped(dot * p.scale);
        }
        scores[lid.x] = s;
        workgroupBarrier();
        let count = min(WG, end - j0);
        var cmax = NEG;
        for (var i = 0u; i < count; i++) {
            cmax = max(cmax, scores[i]);
        }
        let m_new = max(m, cmax);
        let corr = exp(m - m_new);
        l *= corr;
        for (var a = 0u; a < 4u; a++) {
            acc[a] *= corr;
        }
        for (var i = 0u; i < count; i++) {
            let pr = exp(scores[i] - m_new);
            l += pr;
            let v_off = (j0 + i) * kv_stride + kvh * d;
            for (var a = 0u; a < 4u; a++) {
                let dim = lid.x + a * WG;
                if (dim < d) {
                    acc[a] += pr * v_at(v_off + dim);
                }
            }
        }
        m = m_new;
        workgroupBarrier();
    }
    let o = ((t * p.n_head + h) * p.n_split + split) * (d + 2u);
    if (lid.x == 0u) {
        part[o] = m;
        part[o + 1u] = l;
    }
    for (var a = 0u; a < 4u; a++) {
        let dim = lid.x + a * WG;
        if (dim < d) {
            part[o + 2u + dim] = acc[a];
        }
    }
}
#endif

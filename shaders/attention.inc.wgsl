// Attention code shared by the attention kernels. The including kernel declares the Params
// `p` (with n_tokens, head_dim, scale, softcap, window, all_keys, page_bits), the bindings `kc`,
// `vc` (f32, or u32 f16 pairs with KV_F16), `pos`, and the constants WG, MAXD and NEG; with
// SINKS, also `sinks` (one f32 per query head).

//#include kv_row.inc
//#include ggml_math.inc

// first_key is the earliest cache row token position `at` attends to (sliding window).
fn first_key(at: u32) -> u32 {
    if (p.window == 0u || at + 1u <= p.window) {
        return 0u;
    }
    return at + 1u - p.window;
}

// key_end is one past the last cache row token t attends to: causal, or all keys (BERT).
fn key_end(t: u32) -> u32 {
    if (p.all_keys > 0u) {
        return p.all_keys;
    }
    return pos[t] + 1u;
}

#ifdef SINKS
// sink_step folds an attention sink (gpt-oss: a virtual key whose score is s, counted in the
// softmax's denominator but carrying no value) into a running softmax of max m and sum l,
// after all the real keys, as llama.cpp's flash attention does: it returns the new max and sum
// and the factor the unnormalised output must be multiplied by (1 unless s is a new max).
fn sink_step(m: f32, l: f32, s: f32) -> vec3<f32> {
    if (s > m) {
        let ms = exp_c(m - s);
        // S = S*ms + vs, which GCC leaves unfused here (unlike in the loop over the keys:
        // checked against llama.cpp's library, gpu.TestAttentionIsGGMLs).
        return vec3<f32>(s, ns_keep(ns_keep(l * ms) + 1.0), ms);
    }
    return vec3<f32>(m, l + exp_c(s - m), 1.0);
}
#endif

// capped soft-caps a score (Gemma 2).
fn capped(s: f32) -> f32 {
    if (p.softcap > 0.0) {
        return p.softcap * tanh(s / p.softcap);
    }
    return s;
}

// k_pair, v_pair, k_at and v_at read the cache in either format; offsets are in elements, a
// pair's even.
fn k_pair(off: u32) -> vec2<f32> {
#ifdef KV_F16
    return unpack2x16float(kc[off / 2u]);
#else
    return vec2<f32>(kc[off], kc[off + 1u]);
#endif
}

fn v_pair(off: u32) -> vec2<f32> {
#ifdef KV_F16
    return unpack2x16float(vc[off / 2u]);
#else
    return vec2<f32>(vc[off], vc[off + 1u]);
#endif
}

fn k_at(off: u32) -> f32 {
#ifdef KV_F16
    let pair = unpack2x16float(kc[off / 2u]);
    return select(pair.x, pair.y, (off & 1u) == 1u);
#else
    return kc[off];
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

// The cooperative path: one workgroup per (head, token); q in workgroup memory, keys 64 at
// a time, each invocation owning output dimensions lid, lid + 64, ... (MAXD / WG of them).
var<workgroup> qs: array<f32, MAXD>;
var<workgroup> scores: array<f32, WG>;

// Partial is a running softmax over some keys: max score m, sum l, unnormalised output.
struct Partial {
    m: f32,
    l: f32,
    acc: array<f32, 4>,
}

// load_q copies the query head at q_off into workgroup memory; all invocations call it.
fn load_q(q_off: u32, lid: u32) {
    for (var i = lid; i < p.head_dim; i += WG) {
        qs[i] = q[q_off + i];
    }
    workgroupBarrier();
}

// attend runs the online softmax over positions start..end of token t's sequence for kv head
// kvh; every invocation of the workgroup must call it with the same range.
fn attend(kvh: u32, t: u32, start: u32, end: u32, lid: u32) -> Partial {
    let d = p.head_dim;
    let kv_stride = p.n_kv_head * d;
    var r: Partial;
    r.m = NEG;
    for (var j0 = start; j0 < end; j0 += WG) {
        let j = j0 + lid;
        var s = NEG;
        if (j < end) {
            let k_off = kv_row(t, j) * kv_stride + kvh * d;
            var dot = 0.0;
            for (var i = 0u; i < d; i += 2u) {
                let kv = k_pair(k_off + i);
                dot += qs[i] * kv.x + qs[i + 1u] * kv.y;
            }
            s = capped(dot * p.scale);
        }
        scores[lid] = s;
        workgroupBarrier();
        let count = min(WG, end - j0);
        var cmax = NEG;
        for (var i = 0u; i < count; i++) {
            cmax = max(cmax, scores[i]);
        }
        let m_new = max(r.m, cmax);
        let corr = exp(r.m - m_new);
        r.l *= corr;
        for (var a = 0u; a < 4u; a++) {
            r.acc[a] *= corr;
        }
        for (var i = 0u; i < count; i++) {
            let pr = exp(scores[i] - m_new);
            r.l += pr;
            let v_off = kv_row(t, j0 + i) * kv_stride + kvh * d;
            for (var a = 0u; a < 4u; a++) {
                let dim = lid + a * WG;
                if (dim < d) {
                    r.acc[a] += pr * v_at(v_off + dim);
                }
            }
        }
        r.m = m_new;
        workgroupBarrier();
    }
    return r;
}

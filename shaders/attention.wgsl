// Causal attention over the GPU-resident KV cache with grouped-query heads:
// out[t, h, :] = softmax_j(q[t, h, :] . k[j, h / group, :] * scale) v[j, h / group, :] for the
// cache rows of its sequence up to position pos[t] (pos also says where those rows are:
// kv_row.inc). One workgroup per (head, token); keys are processed 64 at a time
// with an online (running max) softmax, so any context length fits in fixed workgroup memory.
// q is read from the fused qkv rows (row stride q_stride floats). Define KV_F16 reads an f16
// cache (pairs packed in u32); define SINKS adds per-head attention sinks (attention_io.inc).

//#include attention_io.inc
#ifdef CHUNKED
// ROW_PER_THREAD over long key ranges: llvmpipe stops an invocation's loops after 65535
// iterations in all, so the keys run as several dispatches, each invocation carrying its
// running max, sum and output (exactly as the loop holds them) from one to the next.
@group(0) @binding(6) var<storage, read_write> state: array<f32>; // (n_tokens, n_head, ceil(head_dim / 4), 6)
#endif
#ifdef PRESCORED
// Decoding at long contexts: each key's score, computed once for all of a head's invocations
// by attention_scores.wgsl (the same arithmetic as k_dot below), instead of once per group of
// four dimensions; the loop then costs a read per key, so no chunks are needed either.
@group(0) @binding(6) var<storage, read> key_scores: array<f32>; // (n_tokens, n_head, score_stride)
#endif

const WG: u32 = 64u;
const MAXD: u32 = 256u;
const NEG: f32 = -3.0e38;
//#include attention.inc
//#include attention_f16.inc

#ifdef ROW_PER_THREAD
// One invocation per (token, head, group of 4 dimensions), no barriers: each recomputes the
// scores it needs, which is cheaper on CPU adapters than sharing them through workgroup memory.
// A head_dim of 4n + 2 ends in a half group, whose upper two lanes repeat the lower two and are
// not stored (so CPU adapters never fall back to the cooperative kernel, whose loops would run
// past llvmpipe's limit at long contexts).
// Keys are taken one at a time in order, as llama.cpp's CPU flash attention does; with an f16
// cache it also rounds as that does (q to f16, the running output kept in f16), so results
// match llama.cpp's to the last bit that matters for greedy decoding.
@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    ns_zero = p.zero;
    let d = p.head_dim;
    let groups = (d + 3u) / 4u;
    let idx = gid.x + gid.y * nwg.x * WG;
    if (idx >= p.n_tokens * p.n_head * groups) {
        return;
    }
    let g = idx % groups;
    let h = (idx / groups) % p.n_head;
    let t = idx / (groups * p.n_head);
    let kvh = h / (p.n_head / p.n_kv_head);
    let q_off = t * p.q_stride + h * d;
    let kv_stride = p.n_kv_head * d;
    var m = NEG;
    var l = 0.0;
    var acc = vec4<f32>(0.0);
    var j0 = first_key(pos[t]);
    var n_keys = key_end(t);
#ifndef PRESCORED
    load_qh(q_off);
#endif
#ifdef CHUNKED
    let so = idx * 6u;
    if (p.key_lo > 0u) {
        m = state[so];
        l = state[so + 1u];
        acc = vec4<f32>(state[so + 2u], state[so + 3u], state[so + 4u], state[so + 5u]);
    }
    j0 = max(j0, p.key_lo);
    n_keys = min(n_keys, p.key_hi);
#endif
    // In a half group (head_dim 4n + 2) lanes z, w reread x, y and are not stored.
    let dim0 = 4u * g;
    let zw = select(2u, 0u, dim0 + 2u >= d);
    for (var j = j0; j < n_keys; j++) {
        let off = kv_row(t, j) * kv_stride + kvh * d;
#ifdef PRESCORED
        let s = key_scores[(t * p.n_head + h) * p.score_stride + j];
#else
        let s = capped(k_dot(off) * p.scale);
#endif
        var ms = 1.0;
        var vs = 1.0;
        if (s > m) {
            ms = exp_c(m - s);
            m = s;
            acc = acc16(acc * ms);
        } else {
            vs = exp_c(s - m);
        }
        let vo = off + dim0; // even: a pair's offset
        acc = acc16(fma4(vec4<f32>(v_pair(vo), v_pair(vo + zw)), vec4<f32>(vs), acc));
        l = fma1(l, ms, vs); // S = S*ms + vs, which GCC fuses
    }
#ifdef CHUNKED
    if (p.last == 0u) {
        state[so] = m;
        state[so + 1u] = l;
        state[so + 2u] = acc.x;
        state[so + 3u] = acc.y;
        state[so + 4u] = acc.z;
        state[so + 5u] = acc.w;
        return;
    }
#endif
#ifdef SINKS
    // The sink, once (in the last chunk), after all the keys; like llama.cpp, which applies it
    // to the output once back in f32, the rescale is not rounded to f16.
    let sk = sink_step(m, l, sinks[h]);
    l = sk.y;
    acc *= sk.z;
#endif
    let o = (t * p.n_head + h) * d + dim0;
    // As llama.cpp: the output times S_inv = 1/S, not divided by S (a last bit apart, which the
    // 8-bit rounding of the next product's input can turn into a visible difference).
    let inv = 1.0 / l;
    out[o] = acc.x * inv;
    out[o + 1u] = acc.y * inv;
    if (dim0 + 2u < d) {
        out[o + 2u] = acc.z * inv;
        out[o + 3u] = acc.w * inv;
    }
}
#else
@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let h = wg.x;
    let t = wg.y;
    let d = p.head_dim;
    load_q(t * p.q_stride + h * d, lid.x);
#ifdef SINKS
    var r = attend(h / (p.n_head / p.n_kv_head), t, first_key(pos[t]), key_end(t), lid.x);
    let sk = sink_step(r.m, r.l, sinks[h]);
    r.l = sk.y;
    for (var a = 0u; a < 4u; a++) {
        r.acc[a] *= sk.z;
    }
#else
    let r = attend(h / (p.n_head / p.n_kv_head), t, first_key(pos[t]), key_end(t), lid.x);
#endif
    for (var a = 0u; a < 4u; a++) {
        let dim = lid.x + a * WG;
        if (dim < d) {
            out[(t * p.n_head + h) * d + dim] = r.acc[a] / r.l;
        }
    }
}
#endif

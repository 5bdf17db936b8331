// Causal attention on CPU adapters (prompts, and decode with wide heads: gpu.attnLanes), one
// invocation per (token, head), neighbouring invocations taking neighbouring tokens of one
// head: a workgroup is a block of RWG tokens and one head (grid x: token blocks, y: heads),
// so every key and value the block reads has an address all its invocations share. On
// lavapipe such a load is one scalar load, while a load whose address differs per invocation
// is a bounds-checked load per invocation; the head-major barrier-free kernel (attention.wgsl)
// pays that for every key element.
// The whole head is held per invocation (HEAD_DIM, a constant of the variant, so the loops
// over dimensions unroll). Each token computes exactly what attention.wgsl's barrier-free
// kernel computes for it, in the same order (keys one at a time, q rounded to f16 once and the
// running output kept in f16 with an f16 cache, as llama.cpp's CPU flash attention), so the two
// agree to the bit. The block's tokens are taken per sequence (a prompt's block has one): each
// pass reads the keys of the sequence of its first token not yet taken, over the union of
// the key ranges of the block's tokens in it, and each token skips the keys outside its own.

//#include attention_io.inc

const WG: u32 = 64u; // attention.inc's cooperative helpers, unused here
const MAXD: u32 = 256u;
const NEG: f32 = -3.0e38;
const RWG: u32 = 8u;                      // tokens per workgroup: one of lavapipe's 8-wide SIMD batches
const NV: u32 = (HEAD_DIM + 3u) / 4u;     // groups of 4 dimensions, the last maybe half
//#include attention.inc
//#include attention_f16.inc


// seq is the cache addressing word of token t (kv_row.inc): equal for the tokens of one sequence.
fn seq(t: u32) -> u32 {
    return pos[p.n_tokens + t];
}

// first_seen reports whether token i is the first of the block (from t0) of its sequence.
fn first_seen(t0: u32, i: u32) -> bool {
    let s = seq(i);
    for (var k = t0; k < i; k++) {
        if (seq(k) == s) {
            return false;
        }
    }
    return true;
}

@compute @workgroup_size(RWG)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    let t0 = wg.x * RWG;
    let h = wg.y;
    let end = min(t0 + RWG, p.n_tokens);
    let t = min(t0 + li, end - 1u); // invocations past the prompt redo its last token, unstored
    let kvh = h / (p.n_head / p.n_kv_head);
    let kv_stride = p.n_kv_head * HEAD_DIM;
    ns_zero = p.zero;
    load_qh(t * p.q_stride + h * HEAD_DIM);
    let my_seq = seq(t);
    let my_lo = first_key(pos[t]);
    let my_hi = key_end(t);
    var m = NEG;
    var l = 0.0;
    var acc: array<vec4<f32>, NV>;
    var lead = t0;
    while (lead < end) {
        let lead_seq = seq(lead);
        // The keys any of this sequence's tokens in the block attend to.
        var lo = 0xFFFFFFFFu;
        var hi = 0u;
        for (var i = lead; i < end; i++) {
            if (seq(i) == lead_seq) {
                lo = min(lo, first_key(pos[i]));
                hi = max(hi, key_end(i));
            }
        }
        let mine = my_seq == lead_seq;
        for (var j = lo; j < hi; j++) {
            if (mine && j >= my_lo && j < my_hi) {
                let off = kv_row(lead, j) * kv_stride + kvh * HEAD_DIM;
                let s = capped(k_dot(off) * p.scale);
                var ms = 1.0;
                var vs = 1.0;
                if (s > m) {
                    ms = exp_c(m - s);
                    m = s;
                    for (var a = 0u; a < NV; a++) {
                        acc[a] = acc16(acc[a] * ms);
                    }
                } else {
                    vs = exp_c(s - m);
                }
                for (var a = 0u; a < NV; a++) {
                    // A half group (head_dim 4n + 2) rereads its two dimensions in z, w.
                    let dim0 = 4u * a;
                    let xy = v_pair(off + dim0);
                    let zw = v_pair(off + select(dim0 + 2u, dim0, dim0 + 2u >= HEAD_DIM));
                    acc[a] = acc16(fma4(vec4<f32>(xy, zw), vec4<f32>(vs), acc[a]));
                }
                l = fma1(l, ms, vs); // S = S*ms + vs, which GCC fuses
            }
        }
        // The next pass: the block's next token of a sequence not yet taken.
        var next = lead + 1u;
        while (next < end && !first_seen(t0, next)) {
            next++;
        }
        lead = next;
    }
#ifdef SINKS
    // The sink after all the keys, the rescale in f32 (attention.wgsl's barrier-free kernel).
    let sk = sink_step(m, l, sinks[h]);
    l = sk.y;
    for (var a = 0u; a < NV; a++) {
        acc[a] *= sk.z;
    }
#endif
    if (t0 + li < end) {
        let inv = 1.0 / l; // llama.cpp's S_inv (attention.wgsl)
        for (var a = 0u; a < NV; a++) {
            let dim0 = 4u * a;
            let o = (t * p.n_head + h) * HEAD_DIM + dim0;
            out[o] = acc[a].x * inv;
            out[o + 1u] = acc[a].y * inv;
            if (dim0 + 2u < HEAD_DIM) {
                out[o + 2u] = acc[a].z * inv;
                out[o + 3u] = acc[a].w * inv;
            }
        }
    }
}

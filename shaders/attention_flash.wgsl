// Flash attention for prompts on GPUs: one workgroup per (head, block of BQ query tokens) reads
// each tile of BK keys (then values) once into workgroup memory for all the block's queries,
// with an online (running max) softmax, so no n x n scores buffer exists and the cache is read
// once per block instead of once per token. Four invocations share a query, each holding every
// fourth of its dimensions (q and the running output) in registers. The block's queries are
// taken per sequence (tokens of several sequences may share a block, each group reading its own
// cache rows). Same Params and bindings as attention.wgsl, whose helpers (attention.inc) it
// shares; head_dim at most MAXDF. Define KV_F16 reads an f16 cache (pairs packed in u32).

//#include attention_io.inc

const WG: u32 = 64u;
const MAXD: u32 = 256u;
const BQ: u32 = 16u;    // queries per workgroup
const BK: u32 = 16u;    // keys per tile
const QL: u32 = 4u;     // invocations per query
const MAXDF: u32 = 128u;
const ND: u32 = 32u;    // MAXDF / QL: dimensions an invocation holds
const NEG: f32 = -3.0e38;

//#include attention.inc

var<workgroup> tile: array<f32, 2048>;      // BK * MAXDF: keys, then values
var<workgroup> red: array<f32, 1024>;       // BQ * BK * QL: partial dots, then scores
var<workgroup> group_base: u32;             // the sequence of the group being processed
var<workgroup> group_lo: u32;               // its keys: group_lo .. group_hi - 1
var<workgroup> group_hi: u32;
var<workgroup> group_ref: u32;              // a token of the group, for kv_row

// load_tile fills the tile with cache rows j0 .. j0 + nk - 1 (keys, or values) of kv head kvh
// in token ref_t's sequence, zeros past nk; every invocation takes part.
fn load_tile(values: bool, ref_t: u32, j0: u32, nk: u32, kvh: u32, li: u32) {
    let d = p.head_dim;
    for (var e = li; e < BK * d; e += WG) {
        let kk = e / d;
        var v = 0.0;
        if (kk < nk) {
            let off = kv_row(ref_t, j0 + kk) * p.n_kv_head * d + kvh * d + e % d;
            if (values) {
                v = v_at(off);
            } else {
                v = k_at(off);
            }
        }
        tile[kk * MAXDF + e % d] = v;
    }
}

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    let h = wg.x;
    let t0 = wg.y * BQ;
    let d = p.head_dim;
    let kvh = h / (p.n_head / p.n_kv_head);
    let qi = li / QL;   // this invocation's query in the block
    let lane = li % QL; // its dimensions: lane, lane + QL, ...
    let t = t0 + qi;
    let live = t < p.n_tokens;
    let nblock = min(BQ, p.n_tokens - t0);

    var qv: array<f32, ND>;
    var acc: array<f32, ND>;
    for (var i = 0u; i < ND; i++) {
        let dim = lane + QL * i;
        if (live && dim < d) {
            qv[i] = q[t * p.q_stride + h * d + dim];
        }
    }
    var m = NEG;
    var l = 0.0;
    var my_base = 0u;
    var my_lo = 0u;
    var my_hi = 0u;
    if (live) {
        my_base = pos[p.n_tokens + t];
        my_lo = first_key(pos[t]);
        my_hi = key_end(t);
    }

    // Group g is the g-th sequence among the block's queries, in order of first appearance:
    // blocks of one sequence, the usual case, need one pass.
    for (var g = 0u; g < BQ; g++) {
        if (li == 0u) {
            var next = nblock;
            var k = 0u;
            for (var i = 0u; i < nblock && next == nblock; i++) {
                let b = pos[p.n_tokens + t0 + i];
                var seen = false;
                for (var j = 0u; j < i; j++) {
                    seen = seen || pos[p.n_tokens + t0 + j] == b;
                }
                if (!seen) {
                    if (k == g) {
                        next = i;
                    }
                    k += 1u;
                }
            }
            var lo = 0xffffffffu;
            var hi = 0u;
            if (next < nblock) {
                let b = pos[p.n_tokens + t0 + next];
                for (var i = next; i < nblock; i++) {
                    if (pos[p.n_tokens + t0 + i] == b) {
                        lo = min(lo, first_key(pos[t0 + i]));
                        hi = max(hi, key_end(t0 + i));
                    }
                }
                group_base = b;
                group_ref = t0 + next;
            }
            group_lo = lo;
            group_hi = hi;
        }
        let hi = workgroupUniformLoad(&group_hi);
        if (hi == 0u) {
            break;
        }
        let lo = workgroupUniformLoad(&group_lo);
        let ref_t = workgroupUniformLoad(&group_ref);
        let mine = live && my_base == workgroupUniformLoad(&group_base);
        for (var j0 = lo; j0 < hi; j0 += BK) {
            let nk = min(BK, hi - j0);
            load_tile(false, ref_t, j0, nk, kvh, li);
            workgroupBarrier();
            for (var kk = 0u; kk < BK; kk++) {
                var s = 0.0;
                for (var i = 0u; i < ND; i++) {
                    let dim = lane + QL * i;
                    if (dim < d) {
                        s += qv[i] * tile[kk * MAXDF + dim];
                    }
                }
                red[(qi * BK + kk) * QL + lane] = s;
            }
            workgroupBarrier();
            // Scores: each invocation finishes BK / QL of its query's keys, masked to the keys
            // this query sees; values of the tile replace its keys meanwhile.
            for (var c = 0u; c < BK / QL; c++) {
                let kk = lane + QL * c;
                let o = (qi * BK + kk) * QL;
                var s = NEG;
                let j = j0 + kk;
                if (mine && kk < nk && j >= my_lo && j < my_hi) {
                    s = capped((red[o] + red[o + 1u] + red[o + 2u] + red[o + 3u]) * p.scale);
                }
                red[o] = s;
            }
            workgroupBarrier();
            load_tile(true, ref_t, j0, nk, kvh, li);
            workgroupBarrier();
            var cmax = NEG;
            for (var kk = 0u; kk < BK; kk++) {
                cmax = max(cmax, red[(qi * BK + kk) * QL]);
            }
            if (cmax > NEG) {
                let m_new = max(m, cmax);
                let corr = exp(m - m_new);
                l *= corr;
                for (var i = 0u; i < ND; i++) {
                    acc[i] *= corr;
                }
                for (var kk = 0u; kk < BK; kk++) {
                    let s = red[(qi * BK + kk) * QL];
                    if (s > NEG) {
                        let pr = exp(s - m_new);
                        l += pr;
                        for (var i = 0u; i < ND; i++) {
                            acc[i] += pr * tile[kk * MAXDF + lane + QL * i];
                        }
                    }
                }
                m = m_new;
            }
            workgroupBarrier();
        }
    }
    if (live) {
        for (var i = 0u; i < ND; i++) {
            let dim = lane + QL * i;
            if (dim < d) {
                out[(t * p.n_head + h) * d + dim] = acc[i] / l;
            }
        }
    }
}

// Flash attention for prompts on GPUs: one workgroup per (head, block of BQ query tokens) reads
// each tile of BK keys (then values) once into workgroup memory for all the block's queries,
// with an online (running max) softmax, so no n x n scores buffer exists and the cache is read
// once per block instead of once per token. Sixteen invocations share a query, each holding
// every sixteenth of its dimensions (q and the running output: 8 values, as two named vectors,
// since a GPU compiler may keep an indexed array in local memory, which made this kernel 10x
// slower on an H100). The block's queries are
// taken per sequence (tokens of several sequences may share a block, each group reading its own
// cache rows). Same Params and bindings as attention.wgsl, whose helpers (attention.inc) it
// shares; head_dim at most MAXDF. Define KV_F16 reads an f16 cache (pairs packed in u32), SINKS
// adds per-head attention sinks.

//#include attention_io.inc

const WG: u32 = 256u;
const MAXD: u32 = 256u;
const BQ: u32 = 16u;    // queries per workgroup
const BK: u32 = 8u;     // keys per tile
const QL: u32 = 16u;    // invocations per query
const MAXDF: u32 = 128u;// 8 dimensions of each of QL invocations
const NEG: f32 = -3.0e38;

//#include attention.inc

var<workgroup> tile: array<f32, 1024>;      // BK * MAXDF: keys, then values
var<workgroup> red: array<f32, 2048>;       // BQ * BK * QL: partial dots
var<workgroup> sc: array<f32, 128>;         // BQ * BK: scores
var<workgroup> group_base: u32;             // the sequence of the group being processed
var<workgroup> group_lo: u32;               // its keys: group_lo .. group_hi - 1
var<workgroup> group_hi: u32;
var<workgroup> group_ref: u32;              // a token of the group, for kv_row

// load_tile fills the tile with cache rows j0 .. j0 + nk - 1 (keys, or values) of kv head kvh
// in token ref_t's sequence, zeros past nk and past the head's dimensions (which the products
// read, times zero); every invocation takes part.
fn load_tile(values: bool, ref_t: u32, j0: u32, nk: u32, kvh: u32, li: u32) {
    let d = p.head_dim;
    for (var e = li; e < BK * MAXDF; e += WG) {
        let kk = e / MAXDF;
        let dim = e % MAXDF;
        var v = 0.0;
        if (kk < nk && dim < d) {
            let off = kv_row(ref_t, j0 + kk) * p.n_kv_head * d + kvh * d + dim;
            if (values) {
                v = v_at(off);
            } else {
                v = k_at(off);
            }
        }
        tile[e] = v;
    }
}

@compute @workgroup_size(256)
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

    // This invocation's dimensions: lane + QL * i, i < 4 in lo and 4 <= i < 8 in hi.
    var q_lo = vec4<f32>(0.0);
    var q_hi = vec4<f32>(0.0);
    if (live) {
        q_lo = q_dims(t * p.q_stride + h * d, lane);
        q_hi = q_dims(t * p.q_stride + h * d, lane + 4u * QL);
    }
    var acc_lo = vec4<f32>(0.0);
    var acc_hi = vec4<f32>(0.0);
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
        // Loaded before the test: && short-circuits, and a barrier must be reached by every
        // invocation (a GPU with wide subgroups otherwise reads another group's values).
        let base = workgroupUniformLoad(&group_base);
        let mine = live && my_base == base;
        for (var j0 = lo; j0 < hi; j0 += BK) {
            let nk = min(BK, hi - j0);
            load_tile(false, ref_t, j0, nk, kvh, li);
            workgroupBarrier();
            for (var kk = 0u; kk < BK; kk++) {
                red[(qi * BK + kk) * QL + lane] = dot(q_lo, tile_dims(kk, lane)) + dot(q_hi, tile_dims(kk, lane + 4u * QL));
            }
            workgroupBarrier();
            // Scores: the first BK invocations of a query each finish one of its keys, masked
            // to the keys this query sees; values of the tile replace its keys meanwhile.
            if (lane < BK) {
                let kk = lane;
                var s = NEG;
                let j = j0 + kk;
                if (mine && kk < nk && j >= my_lo && j < my_hi) {
                    var dot_sum = 0.0;
                    for (var i = 0u; i < QL; i++) {
                        dot_sum += red[(qi * BK + kk) * QL + i];
                    }
                    s = capped(dot_sum * p.scale);
                }
                sc[qi * BK + kk] = s;
            }
            workgroupBarrier();
            load_tile(true, ref_t, j0, nk, kvh, li);
            workgroupBarrier();
            var cmax = NEG;
            for (var kk = 0u; kk < BK; kk++) {
                cmax = max(cmax, sc[qi * BK + kk]);
            }
            if (cmax > NEG) {
                let m_new = max(m, cmax);
                let corr = exp(m - m_new);
                l *= corr;
                acc_lo *= corr;
                acc_hi *= corr;
                for (var kk = 0u; kk < BK; kk++) {
                    let s = sc[qi * BK + kk];
                    if (s > NEG) {
                        let pr = exp(s - m_new);
                        l += pr;
                        acc_lo += pr * tile_dims(kk, lane);
                        acc_hi += pr * tile_dims(kk, lane + 4u * QL);
                    }
                }
                m = m_new;
            }
            workgroupBarrier();
        }
    }
#ifdef SINKS
    // The sink after all the keys; every invocation of a query holds the same m and l.
    let sk = sink_step(m, l, sinks[h]);
    l = sk.y;
    acc_lo *= sk.z;
    acc_hi *= sk.z;
#endif
    if (live) {
        let o = (t * p.n_head + h) * d;
        for (var i = 0u; i < 4u; i++) {
            let dim = lane + QL * i;
            if (dim < d) {
                out[o + dim] = acc_lo[i] / l;
            }
            if (dim + 4u * QL < d) {
                out[o + dim + 4u * QL] = acc_hi[i] / l;
            }
        }
    }
}

// q_dims reads the query's dimensions first, first + QL, first + 2 QL, first + 3 QL (those
// past the head's end as 0) from row offset o.
fn q_dims(o: u32, first: u32) -> vec4<f32> {
    var v = vec4<f32>(0.0);
    for (var i = 0u; i < 4u; i++) {
        let dim = first + QL * i;
        if (dim < p.head_dim) {
            v[i] = q[o + dim];
        }
    }
    return v;
}

// tile_dims reads the same four dimensions of tile row kk (past the head's end: zeros, never
// written).
fn tile_dims(kk: u32, first: u32) -> vec4<f32> {
    let o = kk * MAXDF + first;
    return vec4<f32>(tile[o], tile[o + QL], tile[o + 2u * QL], tile[o + 3u * QL]);
}

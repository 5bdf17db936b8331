// The gated delta rule of Gated DeltaNet layers (gpu.DeltaNet): ggml's gated_delta_net as
// ggml_compute_forward_gated_delta_net_f32 computes it (K = 1), for a batch of tokens of
// several sequences, each continuing from the state in its slot, which it updates in place.
//
// Per sequence s (seqs[3s .. 3s+2]: its first batch row, its token count n, its state slot),
// value head h and token, with q and k of key head h % h_k (ggml's tiled broadcast), and the
// head's state matrix M (DIM x DIM, M[j][i] = S[i][j], row j over the key dimension i):
//
//   M[j][i] *= exp(g)                          (KDA: exp(g[i]), a gate per key dimension)
//   delta[j] = (v[j] - sum_i M[j][i] k[i]) * beta
//   M[j][i] += k[i] * delta[j]
//   o[j]     = (sum_i M[j][i] q[i]) * scale     (scale = 1/sqrt(DIM), as the op applies it)
//
// Every invocation owns the columns j it computes, so tokens run one after another inside it
// with its part of the state in private memory, read once and written once per dispatch. The dispatch takes
// tokens lo .. hi-1 of each sequence (CPU adapters split long batches over dispatches to keep
// an invocation's loops within llvmpipe's budget).
//
// Default (CPU adapters): one invocation per 4 columns j0 .. j0+3 of a head, no barriers, the
// columns side by side in vec4s so each k[i] and q[i] is loaded once for the four (each
// column's sums still run over i in order); grid x h_v * ceil(DIM/4) / 32, z sequences.
// Loops: 2 DIM per dispatch, 2 DIM + 1 per token.
// COOP (GPUs): a workgroup of 64 takes COLS columns of one head, LANES invocations a column,
// each holding the key dimensions i = lane + LANES r; the two sums per token are reduced over
// a column's lanes through workgroup memory (two barriers a token) or, with SUBGROUPS, by
// subgroup shuffles (lanes i ^ 1, i ^ 2, within a subgroup of at least 4). Grid x DIM / COLS,
// y h_v, z sequences. Loops: 2 R per dispatch, 2 R + 1 per token (R = DIM / LANES).

//#include ggml_math.inc

struct Params {
    h_k: u32,      // key heads (q and k)
    h_v: u32,      // value heads (v, g, beta, the state, out)
    stride: u32,   // floats per row of qkv
    q_col: u32,    // column of q's head 0 in a row of qkv
    k_col: u32,
    v_col: u32,
    lo: u32,       // the dispatch's tokens of each sequence: lo .. hi-1
    hi: u32,
    scale: f32,    // 1/sqrt(DIM)
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> qkv: array<f32>;         // (rows, stride)
@group(0) @binding(2) var<storage, read> g: array<f32>;           // (rows, h_v) or KDA (rows, h_v, DIM)
@group(0) @binding(3) var<storage, read> beta: array<f32>;        // (rows, h_v)
@group(0) @binding(4) var<storage, read_write> state: array<f32>; // (slots, h_v, DIM j, DIM i)
@group(0) @binding(5) var<storage, read_write> out: array<f32>;   // (rows, h_v, DIM)
@group(0) @binding(6) var<storage, read> seqs: array<u32>;        // (sequences, 3)

#ifdef COOP
const LANES: u32 = 4u;
const COLS: u32 = 16u; // 64 / LANES
#ifndef SUBGROUPS
var<workgroup> red_a: array<f32, 64>;
var<workgroup> red_b: array<f32, 64>;
#endif
const R: u32 = (DIM + LANES - 1u) / LANES; // key dimensions an invocation holds

// The sums of a column's LANES partial sums, the same in each of its lanes: (a0 + a1) +
// (a2 + a3), in either order of the operands. Every invocation of the workgroup calls them.
#ifdef SUBGROUPS
fn column_sum_a(v: f32, li: u32) -> f32 {
    let a = v + subgroupShuffleXor(v, 1u);
    return a + subgroupShuffleXor(a, 2u);
}

fn column_sum_b(v: f32, li: u32) -> f32 {
    return column_sum_a(v, li);
}
#else
// Two arrays, so one barrier each is enough: a token's reads of red_a are done before anyone
// passes its red_b barrier, and its reads of red_b before the next token's red_a barrier.
fn column_sum_a(v: f32, li: u32) -> f32 {
    red_a[li] = v;
    workgroupBarrier();
    let b = li & ~3u;
    return (red_a[b] + red_a[b + 1u]) + (red_a[b + 2u] + red_a[b + 3u]);
}

fn column_sum_b(v: f32, li: u32) -> f32 {
    red_b[li] = v;
    workgroupBarrier();
    let b = li & ~3u;
    return (red_b[b] + red_b[b + 1u]) + (red_b[b + 2u] + red_b[b + 3u]);
}
#endif

// column runs the recurrence for column j of head h of sequence seq over the dispatch's
// tokens, lane's key dimensions of it. live is false for the lanes past the last column,
// which take part in the sums only.
fn column(seq: u32, h: u32, j: u32, lane: u32, live: bool, li: u32) {
    let first = seqs[3u * seq];
    let n = seqs[3u * seq + 1u];
    let slot = seqs[3u * seq + 2u];
    let t_end = min(n, p.hi);
    let kh = h % p.h_k;
    let sb = ((slot * p.h_v + h) * DIM + j) * DIM;
    var m: array<f32, R>;
    if (p.lo < t_end && live) {
        for (var r = 0u; r < R; r++) {
            let i = lane + r * LANES;
            if (i < DIM) {
                m[r] = state[sb + i];
            }
        }
    }
    for (var t = p.lo; t < t_end; t++) {
        let row = first + t;
        let qb = row * p.stride + p.q_col + kh * DIM;
        let kb = row * p.stride + p.k_col + kh * DIM;
        let gh = row * p.h_v + h;
        let bt = beta[gh];
#ifndef KDA
        let eg = exp_c(g[gh]);
#endif
        // Decay, and the state's product with k.
        var sk = 0.0;
        for (var r = 0u; r < R; r++) {
            let i = lane + r * LANES;
            if (i < DIM) {
#ifdef KDA
                let eg = exp_c(g[gh * DIM + i]);
#endif
                let d = m[r] * eg;
                m[r] = d;
                sk += d * qkv[kb + i];
            }
        }
        sk = column_sum_a(sk, li);
        var vj = 0.0;
        if (live) {
            vj = qkv[row * p.stride + p.v_col + h * DIM + j];
        }
        let delta = (vj - sk) * bt;
        // The delta update, and the output's product with q.
        var o = 0.0;
        for (var r = 0u; r < R; r++) {
            let i = lane + r * LANES;
            if (i < DIM) {
                let u = m[r] + qkv[kb + i] * delta;
                m[r] = u;
                o += u * qkv[qb + i];
            }
        }
        o = column_sum_b(o, li);
        if (live && lane == 0u) {
            out[gh * DIM + j] = o * p.scale;
        }
    }
    if (p.lo < t_end && live) {
        for (var r = 0u; r < R; r++) {
            let i = lane + r * LANES;
            if (i < DIM) {
                state[sb + i] = m[r];
            }
        }
    }
}

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    ns_zero = u32(p.h_v == 0u); // never 1 where any invocation works (ggml_math.inc)
    let j = wg.x * COLS + li / LANES;
    column(wg.z, wg.y, j, li % LANES, j < DIM, li);
}
#else
// load reads state[at], or 0 for a column past the head's last.
fn load(at: u32, live: bool) -> f32 {
    if (live) {
        return state[at];
    }
    return 0.0;
}

// value reads qkv[at], or 0 for a column past the head's last.
fn value(at: u32, live: bool) -> f32 {
    if (live) {
        return qkv[at];
    }
    return 0.0;
}

// WHOLE is the key dimensions ggml_vec_dot_f32 takes in runs of 32 (x86, AVX2: four registers
// of 8 lanes, one fused multiply-add per element into lane i % 32); the rest it adds one by
// one to the folded lanes, fused as well (GCC contracts its scalar x * y + sum).
const WHOLE: u32 = DIM & ~31u;

// fold_lanes is GGML_F32_VEC_REDUCE of the 32 lanes: registers 0 + 2 and 1 + 3, those two
// added, the 8 lanes halved to 4 and then added in neighbouring pairs.
fn fold_lanes(lane: ptr<function, array<vec4<f32>, 32>>) -> vec4<f32> {
    var half: array<vec4<f32>, 4>;
    for (var i = 0u; i < 4u; i++) {
        let lo = keep4((*lane)[i] + (*lane)[16u + i]) + keep4((*lane)[8u + i] + (*lane)[24u + i]);
        let hi = keep4((*lane)[4u + i] + (*lane)[20u + i]) + keep4((*lane)[12u + i] + (*lane)[28u + i]);
        half[i] = keep4(keep4(lo) + keep4(hi));
    }
    return keep4(half[0] + half[1]) + keep4(half[2] + half[3]);
}

// dot_step adds a * b, element i of a ggml_vec_dot_f32 over DIM, to its sum: fused into lane
// i % 32 in the runs of 32; at the first element after them the lanes are folded into acc,
// and that element and the rest are fused into acc one by one.
fn dot_step(lane: ptr<function, array<vec4<f32>, 32>>, acc: ptr<function, vec4<f32>>, i: u32, a: vec4<f32>, b: vec4<f32>) {
    if (i < WHOLE) {
        (*lane)[i % 32u] = fma4(a, b, (*lane)[i % 32u]);
        return;
    }
    if (i == WHOLE) {
        *acc = fold_lanes(lane);
    }
    *acc = fma4(a, b, *acc);
}

// dot_sum is the sum dot_step built over all DIM elements: the lanes' fold where DIM is a
// whole number of runs (no element after them folded it), else acc.
fn dot_sum(lane: ptr<function, array<vec4<f32>, 32>>, acc: vec4<f32>) -> vec4<f32> {
    if (WHOLE == DIM) {
        return fold_lanes(lane);
    }
    return acc;
}

// columns runs the recurrence for columns j0 .. j0+3 of head h of sequence seq over the
// dispatch's tokens: component c of m[i] is M[j0 + c][i].
fn columns(seq: u32, h: u32, j0: u32) {
    let first = seqs[3u * seq];
    let n = seqs[3u * seq + 1u];
    let slot = seqs[3u * seq + 2u];
    let t_end = min(n, p.hi);
    if (p.lo >= t_end) {
        return;
    }
    let kh = h % p.h_k;
    let live = vec4<bool>(j0 < DIM, j0 + 1u < DIM, j0 + 2u < DIM, j0 + 3u < DIM);
    let sb = ((slot * p.h_v + h) * DIM + j0) * DIM; // column j0 + c at sb + c DIM
    var m: array<vec4<f32>, DIM>;
    for (var i = 0u; i < DIM; i++) {
        m[i] = vec4<f32>(load(sb + i, live.x), load(sb + DIM + i, live.y), load(sb + 2u * DIM + i, live.z),
                         load(sb + 3u * DIM + i, live.w));
    }
    for (var t = p.lo; t < t_end; t++) {
        let row = first + t;
        let qb = row * p.stride + p.q_col + kh * DIM;
        let kb = row * p.stride + p.k_col + kh * DIM;
        let gh = row * p.h_v + h;
        let bt = beta[gh];
#ifndef KDA
        let eg = exp_c(g[gh]);
#endif
        // Decay, and the state's product with k (in ggml_vec_dot_f32's order: dot_step).
        // (Initialised explicitly: naga zeroes a bare var once per call, not per iteration.)
        var lane = array<vec4<f32>, 32>();
        var sk = vec4<f32>(0.0);
        for (var i = 0u; i < DIM; i++) {
#ifdef KDA
            let eg = exp_c(g[gh * DIM + i]);
#endif
            let d = m[i] * eg;
            m[i] = d;
            dot_step(&lane, &sk, i, d, vec4<f32>(qkv[kb + i]));
        }
        sk = dot_sum(&lane, sk);
        let vb = row * p.stride + p.v_col + h * DIM + j0;
        let vj = vec4<f32>(value(vb, live.x), value(vb + 1u, live.y), value(vb + 2u, live.z), value(vb + 3u, live.w));
        let delta = (vj - sk) * bt;
        // The delta update (ggml_vec_mad_f32: fused), and the output's product with q.
        lane = array<vec4<f32>, 32>();
        var o = vec4<f32>(0.0);
        for (var i = 0u; i < DIM; i++) {
            let u = fma4(vec4<f32>(qkv[kb + i]), delta, m[i]);
            m[i] = u;
            dot_step(&lane, &o, i, u, vec4<f32>(qkv[qb + i]));
        }
        o = dot_sum(&lane, o);
        o *= p.scale;
        let ob = gh * DIM + j0;
        out[ob] = o.x;
        if (live.y) {
            out[ob + 1u] = o.y;
        }
        if (live.z) {
            out[ob + 2u] = o.z;
        }
        if (live.w) {
            out[ob + 3u] = o.w;
        }
    }
    for (var i = 0u; i < DIM; i++) {
        state[sb + i] = m[i].x;
        if (live.y) {
            state[sb + DIM + i] = m[i].y;
        }
        if (live.z) {
            state[sb + 2u * DIM + i] = m[i].z;
        }
        if (live.w) {
            state[sb + 3u * DIM + i] = m[i].w;
        }
    }
}

const GROUPS: u32 = (DIM + 3u) / 4u; // invocations per head

// 32 invocations a workgroup (gpu's deltaNetCPUWorkgroup), so that a decode step's few
// invocations still spread over a CPU adapter's cores.
@compute @workgroup_size(32)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(workgroup_id) wg: vec3<u32>) {
    ns_zero = u32(p.h_v == 0u); // never 1 where any invocation works (ggml_math.inc)
    let idx = gid.x;
    if (idx >= p.h_v * GROUPS) {
        return;
    }
    columns(wg.z, idx / GROUPS, 4u * (idx % GROUPS));
}
#endif

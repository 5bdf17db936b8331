// Mixture-of-Experts routing (gpu.MoERoute), as llama.cpp's build_moe_ffn computes it from a
// token's router logits (n_exp f32; LOGIT_BIAS: plus the router's bias, as ggml_add adds it):
//   probs   = softmax(logits) | sigmoid(logits) | logits (SOFTMAX_WEIGHT) | sqrt(softplus(logits))
//   chosen  = the k largest of probs (+ bias, exp_probs_b, for choosing only: BIAS), largest
//             first, ties to the lower expert (ggml_argsort_top_k's order: its CPU sort is an
//             insertion sort at up to 16 experts, its GPU top-k kernels break ties so)
//   weights = probs[chosen]; under SOFTMAX_WEIGHT (gpt-oss) the softmax of those k; divided by
//             their sum clamped below at sum_min when norm; times scale
// ids[t k + j] (u32) and weights[t k + j] (f32) are slot j's. Softmaxes are ggml's soft_max:
// exp(x - max) (ggml_v_expf in runs of 8, expf after them: ggml_math.inc's exp_row) times
// (float)(1 / sum), the sum taken in double (norm_sum.inc's pairs) of each run's 8 values
// folded as hsum_float_8 folds them and of the rest one by one; sigmoid is 1 / (1 + expf(-x));
// the normalising sum is ggml_sum_rows', in double.
// One invocation per token, no barriers. Picking slot j scans the experts for the best one
// ranked after slot j - 1's (the order is total: value, then index), so nothing is marked and
// no array is kept. Loops per invocation: 2 n_exp (softmax) + k n_exp + 5 k at most.

struct Params {
    n_tok: u32,
    n_exp: u32,
    k: u32,
    gating: u32,  // 1 softmax, 2 sigmoid, 3 softmax over the chosen logits, 4 sqrt(softplus)
    norm: u32,    // 1: normalise the chosen weights
    scale: f32,   // multiplies the weights (1: none)
    sum_min: f32, // the floor of the normalising sum
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> logits: array<f32>;      // (n_tok, n_exp)
@group(0) @binding(2) var<storage, read_write> ids: array<u32>;   // (n_tok, k)
@group(0) @binding(3) var<storage, read_write> wts: array<f32>;   // (n_tok, k)
#ifdef BIAS
@group(0) @binding(4) var<storage, read> bias: array<f32>;        // (n_exp)
#ifdef LOGIT_BIAS
@group(0) @binding(5) var<storage, read> lbias: array<f32>;       // (n_exp)
#endif
#else
#ifdef LOGIT_BIAS
@group(0) @binding(4) var<storage, read> lbias: array<f32>;
#endif
#endif

const NONE: u32 = 0xFFFFFFFFu;

//#include ggml_math.inc

// soft_inv is ggml_vec_soft_max_f32's sum of exp(x - m) over a softmax's n inputs x
// (soft_in: the logits from at, or the chosen weights from at), then (float)(1 / sum).
fn soft_inv(at: u32, from_logits: bool, n: u32, m: f32) -> f32 {
    var sum = vec2<f32>(0.0, 0.0);
    let whole = n & ~7u;
    for (var e0 = 0u; e0 < whole; e0 += 8u) {
        var v: array<f32, 8>;
        for (var i = 0u; i < 8u; i++) {
            v[i] = exp_v(soft_in(at, from_logits, e0 + i) - m);
        }
        let h = ns_keep(ns_keep(ns_keep(v[0] + v[4]) + ns_keep(v[2] + v[6])) + ns_keep(ns_keep(v[1] + v[5]) + ns_keep(v[3] + v[7])));
        sum = ns_add(sum, h);
    }
    for (var e = whole; e < n; e++) {
        sum = ns_add(sum, exp_c(soft_in(at, from_logits, e) - m));
    }
    // 1 / (hi + lo) rounded once: the quotient of hi corrected by its remainder.
    let q = ns_keep(1.0 / sum.x);
    let qs = ns_split(q);
    let hs = ns_split(sum.x);
    let prod = ns_keep(q * sum.x);
    let err = ns_keep(ns_keep(ns_keep(ns_keep(qs.x * hs.x) - prod) + ns_keep(qs.x * hs.y)) + ns_keep(qs.y * hs.x)) + ns_keep(qs.y * hs.y);
    let r = ns_keep(ns_keep(ns_keep(1.0 - prod) - err) - ns_keep(q * sum.y));
    return q + r / sum.x;
}

// logit is element i of the logits (row-major, n_exp a row), with the router's bias when it
// has one.
fn logit(i: u32) -> f32 {
#ifdef LOGIT_BIAS
    return logits[i] + lbias[i % p.n_exp];
#else
    return logits[i];
#endif
}

// soft_in is value i of a softmax's input: logits[at + i], or the chosen weight wts[at + i].
fn soft_in(at: u32, from_logits: bool, i: u32) -> f32 {
    if (from_logits) {
        return logit(at + i);
    }
    return wts[at + i];
}

// The softmax's maximum and 1 / sum of the token's row (gating 1).
var<private> mx: f32;
var<private> inv: f32;

// prob is expert e's gating probability from the row starting at row.
fn prob(row: u32, e: u32) -> f32 {
    let l = logit(row + e);
    switch (p.gating) {
        case 2u: {
            return sigmoid_c(l);
        }
        case 3u: {
            return l;
        }
        case 4u: {
            return sqrt(select(log_c(1.0 + exp_c(l)), l, l > 20.0));
        }
        default: {
            return exp_row(l - mx, e, p.n_exp) * inv;
        }
    }
}

// sel is the value expert e is chosen by.
fn sel(row: u32, e: u32) -> f32 {
#ifdef BIAS
    return prob(row, e) + bias[e];
#else
    return prob(row, e);
#endif
}

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    ns_zero = u32(p.n_exp == 0u); // never 1 where any invocation works (ggml_math.inc)
    let t = gid.x + gid.y * nwg.x * 64u;
    if (t >= p.n_tok) {
        return;
    }
    let row = t * p.n_exp;
    if (p.gating != 2u && p.gating != 3u && p.gating != 4u) {
        mx = logit(row);
        for (var e = 1u; e < p.n_exp; e++) {
            mx = max(mx, logit(row + e));
        }
        inv = soft_inv(row, true, p.n_exp, mx);
    }
    let o = t * p.k;
    var pv = 0.0;
    var pe = NONE;
    for (var j = 0u; j < p.k; j++) {
        var bv = 0.0;
        var be = NONE;
        for (var e = 0u; e < p.n_exp; e++) {
            let v = sel(row, e);
            let after = pe == NONE || v < pv || (v == pv && e > pe);
            if (after && (be == NONE || v > bv)) {
                bv = v;
                be = e;
            }
        }
        ids[o + j] = be;
        wts[o + j] = prob(row, be);
        pv = bv;
        pe = be;
    }
    if (p.gating == 3u) {
        var m = wts[o];
        for (var j = 1u; j < p.k; j++) {
            m = max(m, wts[o + j]);
        }
        let is = soft_inv(o, false, p.k, m);
        for (var j = 0u; j < p.k; j++) {
            wts[o + j] = exp_row(wts[o + j] - m, j, p.k) * is;
        }
    }
    if (p.norm != 0u) {
        var sd = vec2<f32>(0.0, 0.0);
        for (var j = 0u; j < p.k; j++) {
            sd = ns_add(sd, wts[o + j]);
        }
        let s = max(ns_value(sd), p.sum_min);
        for (var j = 0u; j < p.k; j++) {
            wts[o + j] = wts[o + j] / s;
        }
    }
    for (var j = 0u; j < p.k; j++) {
        wts[o + j] = wts[o + j] * p.scale;
    }
}

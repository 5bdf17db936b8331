// Mixture-of-Experts routing (gpu.MoERoute), as llama.cpp's build_moe_ffn computes it from a
// token's router logits (n_exp f32):
//   probs   = softmax(logits) | sigmoid(logits) | logits (SOFTMAX_WEIGHT) | sqrt(softplus(logits))
//   chosen  = the k largest of probs (+ bias, exp_probs_b, for choosing only: BIAS), largest
//             first, ties to the lower expert (ggml_argsort_top_k's order: its CPU sort is an
//             insertion sort at up to 16 experts, its GPU top-k kernels break ties so)
//   weights = probs[chosen]; under SOFTMAX_WEIGHT (gpt-oss) the softmax of those k; divided by
//             their sum clamped below at sum_min when norm; times scale
// ids[t k + j] (u32) and weights[t k + j] (f32) are slot j's. Softmaxes are ggml's:
// exp(x - max) * (1 / sum).
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
#endif

const NONE: u32 = 0xFFFFFFFFu;

// The softmax's maximum and 1 / sum of the token's row (gating 1).
var<private> mx: f32;
var<private> inv: f32;

// prob is expert e's gating probability from the row starting at row.
fn prob(row: u32, e: u32) -> f32 {
    let l = logits[row + e];
    switch (p.gating) {
        case 2u: {
            return 1.0 / (1.0 + exp(-l));
        }
        case 3u: {
            return l;
        }
        case 4u: {
            return sqrt(select(log(1.0 + exp(l)), l, l > 20.0));
        }
        default: {
            return exp(l - mx) * inv;
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
    let t = gid.x + gid.y * nwg.x * 64u;
    if (t >= p.n_tok) {
        return;
    }
    let row = t * p.n_exp;
    if (p.gating != 2u && p.gating != 3u && p.gating != 4u) {
        mx = logits[row];
        for (var e = 1u; e < p.n_exp; e++) {
            mx = max(mx, logits[row + e]);
        }
        var sum = 0.0;
        for (var e = 0u; e < p.n_exp; e++) {
            sum += exp(logits[row + e] - mx);
        }
        inv = 1.0 / sum;
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
        var s = 0.0;
        for (var j = 0u; j < p.k; j++) {
            s += exp(wts[o + j] - m);
        }
        let is = 1.0 / s;
        for (var j = 0u; j < p.k; j++) {
            wts[o + j] = exp(wts[o + j] - m) * is;
        }
    }
    if (p.norm != 0u) {
        var s = 0.0;
        for (var j = 0u; j < p.k; j++) {
            s += wts[o + j];
        }
        s = max(s, p.sum_min);
        for (var j = 0u; j < p.k; j++) {
            wts[o + j] = wts[o + j] / s;
        }
    }
    for (var j = 0u; j < p.k; j++) {
        wts[o + j] = wts[o + j] * p.scale;
    }
}

// RMSNorm with the weight multiply fused: out[r, :] = (x[r, :] * s) * w, s = 1/sqrt(mean(x[r, :]^2)
// + eps), in llama.cpp's roundings (ggml_compute_forward_rms_norm_f32, then ggml_mul): the
// squares summed as in double (norm_sum.inc), the mean rounded to f32, s = 1.0f/sqrtf(...).
// One workgroup of WG (a define, a power of two) invocations per row. LORA_A also writes the
// normalised row's LoRA products t[r, j] = sum_i A[j, i] * out[r, i] (j < rank), for the
// projection that reads out to add its adapter's B·t in its epilogue; with ACT_F16 (ACT_BF16)
// out is rounded to halves (bfloat16) for the product and so is t, as llama.cpp rounds a half
// (bfloat16) weight's activations.
// LORA_RES first adds to each row of x, in place, the previous projection's adapter term that
// was left for it (attn_output's or ffn_down's, whose input pin the norm does not otherwise
// read): x[r, res_col + c] += res_scale * sum_j RB[c, j] * (sum_i RA[j, i] * pin[r, i]), with
// RES_F16 (RES_BF16) the rounding of that adapter's type. So a residual projection's adapter
// costs no dispatch of its own. ADD_OUT adds the normalised row to out (a post-norm into the
// residual stream), each value rounded before the add as a separate add would take it.

struct Params {
    n: u32,     // row length
    rows: u32,
    eps: f32,
    rank: u32,  // LORA_A: A's rows
    res_k: u32, // LORA_RES: pin's row length, RA's rows and RB's rows of res_rank
    res_rank: u32,
    res_col: u32,
    res_width: u32,
    res_scale: f32,
    zero: u32,    // 0: ns_zero (norm_sum.inc)
}

@group(0) @binding(0) var<uniform> p: Params;
#ifdef LORA_RES
@group(0) @binding(1) var<storage, read_write> x: array<f32>;   // (rows, n), the term added
#else
@group(0) @binding(1) var<storage, read> x: array<f32>;         // (rows, n)
#endif
@group(0) @binding(2) var<storage, read> w: array<f32>;         // (n)
@group(0) @binding(3) var<storage, read_write> out: array<f32>; // (rows, n)

#ifdef LORA_A
@group(0) @binding(4) var<storage, read> a: array<f32>;        // (rank, n)
@group(0) @binding(5) var<storage, read_write> t: array<f32>;  // (rows, rank)
#ifdef LORA_RES
@group(0) @binding(6) var<storage, read> pin: array<f32>;      // (rows, res_k)
@group(0) @binding(7) var<storage, read> ra: array<f32>;       // (res_rank, res_k)
@group(0) @binding(8) var<storage, read> rb: array<f32>;       // (res_width, res_rank)
#endif
#else
#ifdef LORA_RES
@group(0) @binding(4) var<storage, read> pin: array<f32>;
@group(0) @binding(5) var<storage, read> ra: array<f32>;
@group(0) @binding(6) var<storage, read> rb: array<f32>;
#endif
#endif
//#include f16_round.inc
//#include norm_sum.inc
#ifdef LORA_RES
var<workgroup> rt: array<f32, 64>; // the row's RA·pin
#endif

// act_res rounds the residual adapter's products' inputs as its type asks.
fn act_res(v: f32) -> f32 {
#ifdef RES_F16
    return f16_round(v);
#else
#ifdef RES_BF16
    return bf16_round(v);
#else
    return v;
#endif
#endif
}

var<workgroup> partial: array<vec2<f32>, WG>;

// act rounds a LoRA product's input as the adapter's type asks.
fn act(v: f32) -> f32 {
#ifdef ACT_F16
    return f16_round(v);
#else
#ifdef ACT_BF16
    return bf16_round(v);
#else
    return v;
#endif
#endif
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_id) lid: vec3<u32>) {
    ns_zero = p.zero;
    let row = wg.x + wg.y * nwg.x;
    if (row >= p.rows) {
        return;
    }
    let base = row * p.n;
#ifdef LORA_RES
    for (var j = lid.x; j < p.res_rank; j += WG) {
        var q = 0.0;
        for (var i = 0u; i < p.res_k; i++) {
            q += act_res(pin[row * p.res_k + i]) * ra[j * p.res_k + i];
        }
        rt[j] = act_res(q);
    }
    workgroupBarrier();
    for (var c = lid.x; c < p.res_width; c += WG) {
        var q = 0.0;
        for (var j = 0u; j < p.res_rank; j++) {
            q += rb[c * p.res_rank + j] * rt[j];
        }
        x[base + p.res_col + c] += p.res_scale * q;
    }
    storageBarrier();
#endif
    var s = vec2<f32>(0.0, 0.0);
    for (var i = lid.x; i < p.n; i += WG) {
        let v = x[base + i];
        s = ns_add(s, v * v);
    }
    partial[lid.x] = s;
    workgroupBarrier();
    for (var stride = WG / 2u; stride > 0u; stride /= 2u) {
        if (lid.x < stride) {
            partial[lid.x] = ns_merge(partial[lid.x], partial[lid.x + stride]);
        }
        workgroupBarrier();
    }
    let scale = 1.0 / sqrt(ns_div(partial[0], f32(p.n)) + p.eps);
    for (var i = lid.x; i < p.n; i += WG) {
#ifdef ADD_OUT
        out[base + i] += ns_keep((x[base + i] * scale) * w[i]);
#else
        out[base + i] = (x[base + i] * scale) * w[i];
#endif
    }
#ifdef LORA_A
    storageBarrier(); // the row written, for every invocation
    for (var j = lid.x; j < p.rank; j += WG) {
        var s = 0.0;
        for (var i = 0u; i < p.n; i++) {
            s += act(out[base + i]) * a[j * p.n + i];
        }
        t[row * p.rank + j] = act(s);
    }
#endif
}

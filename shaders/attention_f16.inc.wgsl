// The rounding the barrier-free attention kernels apply with an f16 cache (define KV_F16), as
// llama.cpp's CPU flash attention does: the query rounded to f16 once (q16), the running
// output kept in f16 (acc16). Without KV_F16 both leave values as they are.

//#include f16_round.inc
//#include norm_sum.inc

fn q16(v: f32) -> f32 {
#ifdef KV_F16
    return f16_round(v);
#else
    return v;
#endif
}

fn acc16(v: vec4<f32>) -> vec4<f32> {
#ifdef KV_F16
    return f16_round4(v);
#else
    return v;
#endif
}

// The query head of a barrier-free kernel's invocation, rounded once (q16) for all the keys it
// meets; load_qh fills it.
var<private> qh: array<vec2<f32>, 128>; // MAXD / 2

fn load_qh(q_off: u32) {
    for (var i = 0u; i < p.head_dim; i += 2u) {
        qh[i / 2u] = vec2<f32>(q16(q[q_off + i]), q16(q[q_off + i + 1u]));
    }
}

// k_dot is qh . k for the key at k_off as llama.cpp's CPU flash attention takes it
// (ggml_vec_dot_f16, ggml_vec_dot_f32 on AVX2): each run of 32 dimensions into 32 lanes, each
// lane summing its products over the runs (fused), the lanes folded as GGML_F32x8_REDUCE does
// (four sums of 8 lanes pairwise, then 8 lanes to 1 by halves and neighbours), the dimensions
// past the last whole run added to that in double (norm_sum.inc's pair; ns_zero must be set).
// With an f16 cache every product is exact in f32, so only the order of the sums matters; with
// an f32 cache llama.cpp's fused multiply-adds can differ in the last bit from WGSL's fma, which
// some drivers round twice (lavapipe does).
fn k_dot(k_off: u32) -> f32 {
    let d = p.head_dim;
    let whole = d & ~31u;
    var lane: array<f32, 32>;
    for (var c = 0u; c < whole; c += 32u) {
        for (var e = 0u; e < 32u; e += 2u) {
            let kv = k_pair(k_off + c + e);
            let qv = qh[(c + e) / 2u];
            lane[e] = fma(qv.x, kv.x, lane[e]);
            lane[e + 1u] = fma(qv.y, kv.y, lane[e + 1u]);
        }
    }
    var sum = vec2<f32>(0.0, 0.0);
    if (whole > 0u) {
        var half: array<f32, 4>;
        for (var i = 0u; i < 4u; i++) {
            let lo = (lane[i] + lane[16u + i]) + (lane[8u + i] + lane[24u + i]);
            let hi = (lane[4u + i] + lane[20u + i]) + (lane[12u + i] + lane[28u + i]);
            half[i] = lo + hi;
        }
        sum.x = (half[0] + half[1]) + (half[2] + half[3]);
    }
    for (var i = whole; i < d; i += 2u) {
        let kv = k_pair(k_off + i);
        let qv = qh[i / 2u];
        sum = ns_add(sum, qv.x * kv.x);
        sum = ns_add(sum, qv.y * kv.y);
    }
    return ns_value(sum);
}

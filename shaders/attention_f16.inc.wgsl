// The rounding the barrier-free attention kernels apply with an f16 cache (define KV_F16), as
// llama.cpp's CPU flash attention does: the query rounded to f16 once (q16), the running
// output kept in f16 (acc16). Without KV_F16 both leave values as they are.

//#include f16_round.inc

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

// The parameters and bindings of the attention kernels over the cache (attention.wgsl,
// attention_flash.wgsl, attention_lanes.wgsl: gpu.AttnParams.params and bindAttn).

struct Params {
    n_tokens: u32,
    n_head: u32,
    n_kv_head: u32,
    head_dim: u32, // at most 256, even
    scale: f32,
    q_stride: u32, // floats per token row of q
    softcap: f32,  // > 0: scores become softcap * tanh(score / softcap) (Gemma 2)
    window: u32,   // > 0: a token sees only the last `window` positions (sliding window)
    all_keys: u32, // > 0: not causal: every token sees keys 0 .. all_keys-1 (BERT)
    page_bits: u32,// cache addressing (kv_row.inc)
    key_lo: u32,   // CHUNKED: this dispatch's keys are key_lo .. key_hi-1
    key_hi: u32,
    last: u32,     // CHUNKED: > 0 for the last chunk, which writes out
    score_stride: u32, // PRESCORED: floats per (token, head) row of the scores
    zero: u32,     // 0: ns_zero (norm_sum.inc) for the barrier-free kernels' sums
}

@group(0) @binding(0) var<uniform> p: Params;

@group(0) @binding(1) var<storage, read> q: array<f32>;         // (n_tokens, q_stride), heads first
#ifdef KV_F16
@group(0) @binding(2) var<storage, read> kc: array<u32>;        // (n_ctx, n_kv_head, head_dim / 2)
@group(0) @binding(3) var<storage, read> vc: array<u32>;
#else
@group(0) @binding(2) var<storage, read> kc: array<f32>;        // (n_ctx, n_kv_head, head_dim)
@group(0) @binding(3) var<storage, read> vc: array<f32>;
#endif
@group(0) @binding(4) var<storage, read> pos: array<u32>;       // positions, then cache addressing (kv_row.inc)
@group(0) @binding(5) var<storage, read_write> out: array<f32>; // (n_tokens, n_head, head_dim)
#ifdef SINKS
// Attention sinks (gpu.AttnParams.Sinks), one score per query head: the binding after the
// kernel's others (SINKS7: after CHUNKED's state or PRESCORED's scores in attention.wgsl).
#ifdef SINKS7
@group(0) @binding(7) var<storage, read> sinks: array<f32>;     // (n_head)
#else
@group(0) @binding(6) var<storage, read> sinks: array<f32>;     // (n_head)
#endif
#endif

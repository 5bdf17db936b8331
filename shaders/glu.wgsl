// Gated linear unit of the FFN over the fused gate|up projection:
// out[t, i] = act(gu[t, i]) * gu[t, n + i], act SiLU (llama, Qwen, Phi-3) or, with GELU, ggml's
// tanh-approximated GELU (Gemma).

struct Params {
    n: u32,        // FFN width
    n_tokens: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> gu: array<f32>;         // (n_tokens, 2 n)
@group(0) @binding(2) var<storage, read_write> out: array<f32>;  // (n_tokens, n)

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * 64u;
    if (i >= p.n * p.n_tokens) {
        return;
    }
    let t = i / p.n;
    let c = i % p.n;
    let g = gu[t * 2u * p.n + c];
#ifdef GELU
    let a = 0.5 * g * (1.0 + tanh(0.7978845608028654 * g * (1.0 + 0.044715 * g * g)));
#else
    let a = g / (1.0 + exp(-g));
#endif
    out[i] = a * gu[t * 2u * p.n + p.n + c];
}

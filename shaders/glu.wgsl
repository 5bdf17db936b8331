// Gated linear unit of the FFN over the fused gate|up projection:
// out[t, i] = act(gu[t, i]) * gu[t, n + i], act SiLU (llama, Qwen, Phi-3) or, with GELU, ggml's
// tanh-approximated GELU (Gemma) as its CPU backend's geglu takes it (GGML_GELU_FP16): from a
// table of halves, the gate rounded to f16 and the GELU of that rounded to f16 (0 at -10 and
// below, the gate itself at 10 and above). SiLU is ggml_vec_swiglu_f32's (ggml_math.inc's
// silu_row); swiglu_oai's exp is expf (exp_c).

//#include ggml_math.inc

struct Params {
    n: u32,        // FFN width
    n_tokens: u32,
#ifdef OAI
    alpha: f32,    // OAI: swiglu_oai's sigmoid slope (gpt-oss: 1.702)
    limit: f32,    // OAI: its clamp (gpt-oss: 7)
#endif
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> gu: array<f32>;         // (n_tokens, 2 n)
@group(0) @binding(2) var<storage, read_write> out: array<f32>;  // (n_tokens, n)
#ifdef GELU
#ifdef GELU_TABLE
// GELU_TABLE (CPUMath): llama.cpp's table itself (gpu.GELUTable), two halves a word.
@group(0) @binding(3) var<storage, read> gelu_t: array<u32>;
#endif
//#include gelu.inc
#endif

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    ns_zero = u32(p.n == 0u); // never 1 where any invocation works (ggml_math.inc)
    let i = gid.x + gid.y * nwg.x * 64u;
    if (i >= p.n * p.n_tokens) {
        return;
    }
    let t = i / p.n;
    let c = i % p.n;
    let g = gu[t * 2u * p.n + c];
#ifdef OAI
    // ggml's swiglu_oai as its CPU backend computes it: the gate clamped above at limit, the
    // linear half to +-limit, out = g * sigmoid(alpha * g) * (u + 1).
    let xg = min(g, p.limit);
    let a = xg / (1.0 + exp_c(p.alpha * (-xg)));
    out[i] = a * (clamp(gu[t * 2u * p.n + p.n + c], -p.limit, p.limit) + 1.0);
#else
#ifdef GELU
    let a = gelu(g);
#else
    let a = silu_row(g, c, p.n);
#endif
    out[i] = a * gu[t * 2u * p.n + p.n + c];
#endif
}

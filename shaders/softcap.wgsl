// Soft-capping, in place: x = tanh(x * inv) * cap (the final logits of Gemma 2 and 4), in
// llama.cpp's three steps (ggml_scale by inv = 1/cap rounded to f32, ggml_tanh, ggml_scale by
// cap); with CPU_MATH the tanh is the C library's (ggml_math.inc's tanh_c).

//#include ggml_math.inc

struct Params {
    n: u32,
    cap: f32,
    inv: f32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> x: array<f32>; // (n)

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * 64u;
    if (i >= p.n) {
        return;
    }
    ns_zero = u32(p.n == 0u); // 0 wherever an invocation works (ggml_math.inc)
    x[i] = ns_keep(tanh_c(ns_keep(x[i] * p.inv)) * p.cap);
}

// Scaling in place, in f32: x = x * s (ggml_mul by a one-value tensor: Gemma 4's
// layer_output_scale, applied to the residual stream after each block); with WEIGHTS, then
// times the row's weight at its column, x = (x * s) * w[i % row] (ggml_scale, then ggml_mul by
// a vector: Gemma 4's router input).

struct Params {
    n: u32,
    s: f32,
    row: u32, // WEIGHTS: the rows' length
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> x: array<f32>; // (n)
#ifdef WEIGHTS
@group(0) @binding(2) var<storage, read> w: array<f32>;       // (row)
#endif

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * 64u;
    if (i >= p.n) {
        return;
    }
#ifdef WEIGHTS
    x[i] = (x[i] * p.s) * w[i % p.row];
#else
    x[i] = x[i] * p.s;
#endif
}

// Scaling in place, in f32: x = x * s (ggml_mul by a one-value tensor: Gemma 4's
// layer_output_scale, applied to the residual stream after each block).

struct Params {
    n: u32,
    s: f32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> x: array<f32>; // (n)

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * 64u;
    if (i >= p.n) {
        return;
    }
    x[i] = x[i] * p.s;
}

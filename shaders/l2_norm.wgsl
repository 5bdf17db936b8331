// ggml's l2_norm over head vectors in place (gpu.L2Norm): Gated DeltaNet's q and k heads,
// each x * 1/max(||x||, eps), ||x|| = sqrt(sum x^2) summed in f32 (ggml sums in double).
// One invocation per (row, head); loops: 2 head_dim.

struct Params {
    rows: u32,
    heads: u32,    // head vectors per row
    head_dim: u32,
    stride: u32,   // floats per row of x
    col: u32,      // column of head 0
    eps: f32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> x: array<f32>; // (rows, stride)

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * 64u;
    if (i >= p.rows * p.heads) {
        return;
    }
    let base = (i / p.heads) * p.stride + p.col + (i % p.heads) * p.head_dim;
    var sum = 0.0;
    for (var e = 0u; e < p.head_dim; e++) {
        let v = x[base + e];
        sum += v * v;
    }
    let scale = 1.0 / max(sqrt(sum), p.eps);
    for (var e = 0u; e < p.head_dim; e++) {
        x[base + e] = x[base + e] * scale;
    }
}

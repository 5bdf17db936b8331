// 2D average pooling of a square grid of rows (a vision encoder's patches, gemma3's projector):
// x holds g x g rows of n values, row by row; out gets (g/s) x (g/s) rows, each the mean of an
// s x s block (kernel = stride = s), in the same order.

struct Params {
    n: u32, // values per row
    g: u32, // the input grid's side
    s: u32, // the pooling kernel's side
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;         // (g*g, n)
@group(0) @binding(2) var<storage, read_write> out: array<f32>; // ((g/s)*(g/s), n)

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * 64u;
    let og = p.g / p.s;
    if (i >= og * og * p.n) {
        return;
    }
    let col = i % p.n;
    let cell = i / p.n;
    let y0 = cell / og * p.s;
    let x0 = cell % og * p.s;
    var sum = 0.0;
    for (var dy = 0u; dy < p.s; dy++) {
        for (var dx = 0u; dx < p.s; dx++) {
            sum += x[((y0 + dy) * p.g + x0 + dx) * p.n + col];
        }
    }
    out[i] = sum / f32(p.s * p.s);
}

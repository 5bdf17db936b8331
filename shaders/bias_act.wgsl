// Adds a bias row to every row of y in place (BERT's projections), then, with GELU, applies
// ggml's tanh-approximated GELU: y[t, c] = act(y[t, c] + b[c]).

struct Params {
    n: u32,      // row length
    n_rows: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> y: array<f32>; // (n_rows, n)
@group(0) @binding(2) var<storage, read> b: array<f32>;       // (n)

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * 64u;
    if (i >= p.n * p.n_rows) {
        return;
    }
    var v = y[i] + b[i % p.n];
#ifdef GELU
    v = 0.5 * v * (1.0 + tanh(0.7978845608028654 * v * (1.0 + 0.044715 * v * v)));
#endif
    y[i] = v;
}

// Adds a bias row to every row of y in place (BERT's projections), then, with GELU, applies
// ggml's tanh-approximated GELU: y[t, c] = act(y[t, c] + b[c]). GELU_F16 is that GELU as
// llama.cpp's CPU backend computes it, from a table of halves: the input rounded to f16, the
// output the f16 value, 0 at -10 and below, the input itself at 10 and above. GELU_QUICK_F16
// is CLIP's quick GELU, x * sigmoid(1.702 x), through llama.cpp's CPU table of halves alike
// (with no clamping: the table covers every half).

struct Params {
    n: u32,      // row length
    n_rows: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> y: array<f32>; // (n_rows, n)
@group(0) @binding(2) var<storage, read> b: array<f32>;       // (n)

//#include f16_round.inc

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
#ifdef GELU_F16
    if (v <= -10.0) {
        v = 0.0;
    } else if (v < 10.0) {
        let h = f16_round(v);
        // 0.5 (1 + tanh(u)) as the logistic 1 / (1 + exp(-2u)): the same value without the
        // cancellation of 1 + tanh(u) near -1, where the f16 rounding that follows would
        // magnify the driver's error
        let u = 0.7978845608028654 * h * (1.0 + 0.044715 * h * h);
        v = f16_round(h / (1.0 + exp(-2.0 * u)));
    }
#endif
#ifdef GELU_QUICK_F16
    let hq = f16_round(v);
    v = f16_round(hq / (1.0 + exp(-1.702 * hq)));
#endif
    y[i] = v;
}

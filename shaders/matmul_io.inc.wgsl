// The parameters, bindings and output of CPU adapters' and GPUs' matrix-vector kernels
// (matvec.wgsl, matmul_rows.wgsl; gpu.MatMulAt): weight w, activations x (f32 rows, or with
// XPACK one of act_quant's PACKED layouts), output y, and with XSUM the Q8_1 block sums xs.

struct Params {
    k: u32,       // row length (input features)
    n: u32,       // rows of this weight (chunk)
    n_tok: u32,   // tokens (at most MAXT in matvec's cooperative kernel)
    x_row0: u32,  // first row of x to read
    y_row0: u32,  // first row of y to write
    y_stride: u32,// row length of y (all rows of the whole weight)
    y_col0: u32,  // column of y for weight row 0 (a chunk of a split weight)
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> w: array<u32>;            // (n, k) packed blocks
#ifdef XPACK
@group(0) @binding(2) var<storage, read> x: array<u32>;            // act_quant's PACKED rows
#else
@group(0) @binding(2) var<storage, read> x: array<vec4<f32>>;      // (x_row0 + n_tok, k)
#endif
@group(0) @binding(3) var<storage, read_write> y: array<f32>;      // (y_row0 + n_tok, y_stride)
#ifdef XSUM
@group(0) @binding(4) var<storage, read> xs: array<f32>;           // (x_row0 + n_tok, k / 32)
#endif

// The kernels that take tokens in groups, one per grid z slice, set tok0 to the slice's first
// token and nt to its token count.
var<private> tok0: u32 = 0u;
var<private> nt: u32 = 0u;

// store writes (ADD: adds) v as token tok0 + t's output for weight row row.
fn store(t: u32, row: u32, v: f32) {
    let o = (p.y_row0 + tok0 + t) * p.y_stride + p.y_col0 + row;
#ifdef ADD
    y[o] += v;
#else
    y[o] = v;
#endif
}

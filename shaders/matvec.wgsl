// Fused dequantize + matrix-vector product for decode and small batches:
// y[y_row0 + t, y_col0 + r] (+)= sum_k x[x_row0 + t, k] * W[r, k] for t < n_tok <= MAXT.
// The weight is read once for all tokens and accumulated in f32. W is any type of
// dequant.inc (define T_<TYPE>), rows of k elements, k a multiple of the block size.
// Variants: ADD accumulates into y (the residual add fused into the projection epilogue);
// ROW_PER_THREAD gives each invocation whole rows and no workgroup barriers, what CPU adapters
// such as lavapipe run fastest; otherwise a 64-wide workgroup shares each row and reduces.
// XSUM (Q4_1, Q5_1): x holds Q8_1-rounded activations and xs their per-32 block sums as
// llama.cpp's Q8_1 stores them (f16 of d * sum q); the block minimum multiplies that sum, as
// in ggml_vec_dot_q4_1_q8_1, instead of every activation.

struct Params {
    k: u32,       // row length (input features)
    n: u32,       // rows of this weight (chunk)
    n_tok: u32,   // tokens, at most MAXT
    x_row0: u32,  // first row of x to read
    y_row0: u32,  // first row of y to write
    y_stride: u32,// row length of y (all rows of the whole weight)
    y_col0: u32,  // column of y for weight row 0 (a chunk of a split weight)
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> w: array<u32>;            // (n, k) packed blocks
@group(0) @binding(2) var<storage, read> x: array<vec4<f32>>;      // (x_row0 + n_tok, k)
@group(0) @binding(3) var<storage, read_write> y: array<f32>;      // (y_row0 + n_tok, y_stride)
#ifdef XSUM
@group(0) @binding(4) var<storage, read> xs: array<f32>;           // (x_row0 + n_tok, k / 32)
#endif

//#include dequant.inc

const WG: u32 = 64u;
const MAXT: u32 = 8u;

fn store(t: u32, row: u32, v: f32) {
    let o = (p.y_row0 + t) * p.y_stride + p.y_col0 + row;
#ifdef ADD
    y[o] += v;
#else
    y[o] = v;
#endif
}

#ifdef ROW_PER_THREAD
@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let row = gid.x + gid.y * nwg.x * WG;
    if (row >= p.n) {
        return;
    }
    let k4 = p.k / 4u;
    let nb = p.k / BS;
    let base0 = row * nb * BW;
    var acc: array<f32, MAXT>;
    for (var b = 0u; b < nb; b++) {
        let base = base0 + b * BW;
        for (var j = 0u; j < BS; j += 4u) {
#ifdef XSUM
            let wv = dq4_scaled(base, j);
#else
            let wv = dq4(base, j);
#endif
            let xi = (b * BS + j) / 4u;
            for (var t = 0u; t < p.n_tok; t++) {
                acc[t] += dot(wv, x[(p.x_row0 + t) * k4 + xi]);
            }
        }
#ifdef XSUM
        let mn = block_min(base);
        for (var t = 0u; t < p.n_tok; t++) {
            acc[t] += mn * xs[(p.x_row0 + t) * nb + b];
        }
#endif
    }
    for (var t = 0u; t < p.n_tok; t++) {
        store(t, row, acc[t]);
    }
}
#else
var<workgroup> partial: array<f32, 512>; // WG * MAXT

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_id) lid: vec3<u32>) {
    let row = wg.x + wg.y * nwg.x;
    if (row >= p.n) {
        return;
    }
    let k4 = p.k / 4u;
    let base0 = row * (p.k / BS) * BW;
    var acc: array<f32, MAXT>;
    // Neighbouring invocations take neighbouring 4-element groups, so their loads coalesce.
    for (var c = lid.x; c < k4; c += WG) {
        let e = 4u * c;
        let base = base0 + (e / BS) * BW;
#ifdef XSUM
        let wv = dq4_scaled(base, e % BS);
        if (e % BS == 0u) {
            let mn = block_min(base);
            for (var t = 0u; t < p.n_tok; t++) {
                acc[t] += mn * xs[(p.x_row0 + t) * (p.k / BS) + e / BS];
            }
        }
#else
        let wv = dq4(base, e % BS);
#endif
        for (var t = 0u; t < p.n_tok; t++) {
            acc[t] += dot(wv, x[(p.x_row0 + t) * k4 + c]);
        }
    }
    for (var t = 0u; t < p.n_tok; t++) {
        partial[t * WG + lid.x] = acc[t];
    }
    workgroupBarrier();
    for (var stride = WG / 2u; stride > 0u; stride /= 2u) {
        if (lid.x < stride) {
            for (var t = 0u; t < p.n_tok; t++) {
                partial[t * WG + lid.x] += partial[t * WG + lid.x + stride];
            }
        }
        workgroupBarrier();
    }
    if (lid.x < p.n_tok) {
        store(lid.x, row, partial[lid.x * WG]);
    }
}
#endif

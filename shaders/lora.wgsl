// A LoRA group's whole term for a few tokens in one dispatch (decode):
// y[t, y_col + r] += scale * sum_j B[r, j] * (sum_i A[j, i] * x[x_row0 + t, i]).
// Each workgroup first computes every token's rank-wide A·x into workgroup memory (a few
// hundred products, recomputed by each workgroup rather than stored and read back), then 64
// rows of B·(A·x); ONE_GROUP (CPU adapters, where workgroups cost more than the arithmetic)
// takes every row in one workgroup, computing A·x once. With ACT_F16 (ACT_BF16) the products'
// inputs, x and then A·x, are rounded to halves (bfloat16) as llama.cpp rounds a half
// (bfloat16) weight's activations; A and B are f32 copies of the adapter's values. At most
// MAXT tokens and MAXR rank.

const MAXT: u32 = 8u;
const MAXR: u32 = 64u;

struct Params {
    k: u32,       // A's row length (the input's width)
    rank: u32,    // A's rows, B's row length
    out: u32,     // B's rows
    n_tok: u32,
    x_row0: u32,
    y_stride: u32,
    y_col: u32,
    scale: f32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;       // (x_row0 + n_tok, k)
@group(0) @binding(2) var<storage, read> a: array<f32>;       // (rank, k)
@group(0) @binding(3) var<storage, read> b: array<f32>;       // (out, rank)
@group(0) @binding(4) var<storage, read_write> y: array<f32>; // (n_tok, y_stride)

var<workgroup> t: array<f32, 512>; // MAXT * MAXR: each token's A·x

//#include f16_round.inc

// act rounds a product's input as the adapter's type asks.
fn act(v: f32) -> f32 {
#ifdef ACT_F16
    return f16_round(v);
#else
#ifdef ACT_BF16
    return bf16_round(v);
#else
    return v;
#endif
#endif
}

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32, @builtin(num_workgroups) nwg: vec3<u32>) {
    for (var idx = lid; idx < p.n_tok * p.rank; idx += 64u) {
        let tok = idx / p.rank;
        let j = idx % p.rank;
        let xo = (p.x_row0 + tok) * p.k;
        let ao = j * p.k;
        var s = 0.0;
        for (var i = 0u; i < p.k; i++) {
            s += act(x[xo + i]) * a[ao + i];
        }
        t[tok * MAXR + j] = act(s);
    }
    workgroupBarrier();
#ifdef ONE_GROUP
    for (var row = lid; row < p.out; row += 64u) {
        add_row(row);
    }
#else
    let row = (wid.x + wid.y * nwg.x) * 64u + lid;
    if (row < p.out) {
        add_row(row);
    }
#endif
}

// add_row adds B's row row times each token's A·x into y.
fn add_row(row: u32) {
    let bo = row * p.rank;
    for (var tok = 0u; tok < p.n_tok; tok++) {
        var s = 0.0;
        for (var j = 0u; j < p.rank; j++) {
            s += b[bo + j] * t[tok * MAXR + j];
        }
        y[tok * p.y_stride + p.y_col + row] += p.scale * s;
    }
}

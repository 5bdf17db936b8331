// Tiled matrix-matrix product for prompt processing: y[t, r] = sum_k x[x_row0 + t, k] * W[r, k].
// Each 16x16 workgroup computes a tile of 16 rows by 16 tokens, staging 16-wide slices of W
// and x in workgroup memory. Defines: W_F16 (packed f16 pairs), ADD (accumulate into y).

struct Params {
    k: u32,
    n: u32,
    t: u32,
    x_row0: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
#ifdef W_F16
@group(0) @binding(1) var<storage, read> w: array<u32>;       // (n, k) f16 pairs
#else
@group(0) @binding(1) var<storage, read> w: array<f32>;       // (n, k)
#endif
@group(0) @binding(2) var<storage, read> x: array<f32>;       // (x_row0 + t, k)
@group(0) @binding(3) var<storage, read_write> y: array<f32>; // (t, n)

const TILE: u32 = 16u;
var<workgroup> ws: array<array<f32, 16>, 16>; // [row][kk]
var<workgroup> xs: array<array<f32, 16>, 16>; // [token][kk]

fn load_w(idx: u32) -> f32 {
#ifdef W_F16
    let pair = unpack2x16float(w[idx / 2u]);
    return select(pair.x, pair.y, (idx & 1u) == 1u);
#else
    return w[idx];
#endif
}

@compute @workgroup_size(16, 16)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let r0 = wg.x * TILE;
    let t0 = wg.y * TILE;
    let r = r0 + lid.x;
    let t = t0 + lid.y;
    var acc = 0.0;
    for (var k0 = 0u; k0 < p.k; k0 += TILE) {
        // Thread (lx, ly) loads W[r0 + ly, k0 + lx] and x[t0 + ly, k0 + lx].
        let kk = k0 + lid.x;
        let wr = r0 + lid.y;
        let xt = t0 + lid.y;
        var wv = 0.0;
        if (wr < p.n && kk < p.k) {
            wv = load_w(wr * p.k + kk);
        }
        var xv = 0.0;
        if (xt < p.t && kk < p.k) {
            xv = x[(p.x_row0 + xt) * p.k + kk];
        }
        ws[lid.y][lid.x] = wv;
        xs[lid.y][lid.x] = xv;
        workgroupBarrier();
        for (var j = 0u; j < TILE; j++) {
            acc += ws[lid.x][j] * xs[lid.y][j];
        }
        workgroupBarrier();
    }
    if (r < p.n && t < p.t) {
        let o = t * p.n + r;
#ifdef ADD
        y[o] += acc;
#else
        y[o] = acc;
#endif
    }
}

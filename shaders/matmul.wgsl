// Tiled dequantize + matrix-matrix product for prompt processing on GPUs:
// y[y_row0 + t, y_col0 + r] (+)= sum_k x[x_row0 + t, k] * W[r, k]. A 16x16 workgroup computes a
// 64-row by 64-token tile, each invocation a 4x4 register block (rows lx + 16i, tokens
// ly + 16j, so neighbouring invocations read neighbouring workgroup-memory words). Every
// 16-wide slice of k, each invocation dequantizes one 4-element group of the weight tile into
// workgroup memory (T_<TYPE> from dequant.inc), so the tile is dequantized once for 64 tokens,
// and copies one group of the activation tile beside it; 16 products then take 8 loads.
// Variants: ADD accumulates into y; F16_MATH (adapters with shader-f16) keeps both tiles in
// half precision, halving workgroup memory traffic, and takes each 4-element product in half
// precision, accumulated in f32 (as the matrix-vector kernel's F16_MATH).

#ifdef F16_MATH
enable f16;
alias tile_t = vec4<f16>;
#else
alias tile_t = vec4<f32>;
#endif

struct Params {
    k: u32,
    n: u32,
    n_tok: u32,
    x_row0: u32,
    y_row0: u32,
    y_stride: u32,
    y_col0: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> w: array<u32>;            // (n, k) packed blocks
@group(0) @binding(2) var<storage, read> x: array<vec4<f32>>;      // (x_row0 + n_tok, k)
@group(0) @binding(3) var<storage, read_write> y: array<f32>;      // (y_row0 + n_tok, y_stride)

//#include dequant.inc

const TM: u32 = 64u; // rows per tile
const TN: u32 = 64u; // tokens per tile
const TK: u32 = 16u; // k per step
const K4: u32 = 4u;  // TK / 4: 4-element groups per tile row
var<workgroup> ws: array<tile_t, 256>; // [row][k/4]: TM * K4
var<workgroup> xs: array<tile_t, 256>; // [token][k/4]: TN * K4

@compute @workgroup_size(16, 16)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let r0 = wg.x * TM;
    let t0 = wg.y * TN;
    let flat = lid.y * 16u + lid.x;
    let k4 = p.k / 4u;
    let nb = p.k / BS;
    // This invocation's group of each tile: row (or token) flat / 4, k group flat % 4.
    let lr = flat / K4;
    let lk = 4u * (flat % K4);
    var acc: array<array<f32, 4>, 4>; // [row i][token j]
    for (var k0 = 0u; k0 < p.k; k0 += TK) {
        let kk = k0 + lk;
        var wv = vec4<f32>(0.0);
        if (r0 + lr < p.n && kk < p.k) {
            wv = dq4((r0 + lr) * nb * BW + (kk / BS) * BW, kk % BS);
        }
        ws[flat] = tile_t(wv);
        var xv = vec4<f32>(0.0);
        if (t0 + lr < p.n_tok && kk < p.k) {
            xv = x[(p.x_row0 + t0 + lr) * k4 + kk / 4u];
        }
        xs[flat] = tile_t(xv);
        workgroupBarrier();
        for (var q = 0u; q < K4; q++) {
            var wr: array<tile_t, 4>;
            var xr: array<tile_t, 4>;
            for (var i = 0u; i < 4u; i++) {
                wr[i] = ws[(lid.x + 16u * i) * K4 + q];
                xr[i] = xs[(lid.y + 16u * i) * K4 + q];
            }
            for (var i = 0u; i < 4u; i++) {
                for (var j = 0u; j < 4u; j++) {
                    acc[i][j] += f32(dot(wr[i], xr[j]));
                }
            }
        }
        workgroupBarrier();
    }
    for (var i = 0u; i < 4u; i++) {
        let r = r0 + lid.x + 16u * i;
        for (var j = 0u; j < 4u; j++) {
            let t = t0 + lid.y + 16u * j;
            if (r < p.n && t < p.n_tok) {
                let o = (p.y_row0 + t) * p.y_stride + p.y_col0 + r;
#ifdef ADD
                y[o] += acc[i][j];
#else
                y[o] = acc[i][j];
#endif
            }
        }
    }
}

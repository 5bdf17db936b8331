// Tiled dequantize + matrix-matrix product for prompt processing:
// y[y_row0 + t, y_col0 + r] (+)= sum_k x[x_row0 + t, k] * W[r, k]. A 16x16 workgroup computes a
// 32-row by 32-token tile, each invocation a 2x2 register tile; every 16-wide slice of k, the
// weight tile is dequantized once into workgroup memory (4 elements per load, T_<TYPE> from
// dequant.inc) and the activation tile copied beside it. Variant ADD accumulates into y.

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

const TM: u32 = 32u; // rows per tile
const TN: u32 = 32u; // tokens per tile
const TK: u32 = 16u; // k per step
var<workgroup> ws: array<vec4<f32>, 128>; // [row][k/4]: TM * TK / 4
var<workgroup> xs: array<vec4<f32>, 128>; // [token][k/4]

@compute @workgroup_size(16, 16)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let r0 = wg.x * TM;
    let t0 = wg.y * TN;
    let flat = lid.y * 16u + lid.x;
    let k4 = p.k / 4u;
    let nb = p.k / BS;
    var acc = array<f32, 4>(0.0, 0.0, 0.0, 0.0); // (row 2*lx + i, token 2*ly + j) at 2*i + j
    for (var k0 = 0u; k0 < p.k; k0 += TK) {
        // Invocations 0..127 dequantize the weight tile, 128..255 copy the activation tile.
        let slot = flat % 128u;
        let rr = slot / 4u;
        let kk = k0 + 4u * (slot % 4u);
        if (flat < 128u) {
            var v = vec4<f32>(0.0);
            if (r0 + rr < p.n && kk < p.k) {
                v = dq4((r0 + rr) * nb * BW + (kk / BS) * BW, kk % BS);
            }
            ws[slot] = v;
        } else {
            var v = vec4<f32>(0.0);
            if (t0 + rr < p.n_tok && kk < p.k) {
                v = x[(p.x_row0 + t0 + rr) * k4 + kk / 4u];
            }
            xs[slot] = v;
        }
        workgroupBarrier();
        for (var q = 0u; q < TK / 4u; q++) {
            let w0 = ws[(2u * lid.x) * 4u + q];
            let w1 = ws[(2u * lid.x + 1u) * 4u + q];
            let x0 = xs[(2u * lid.y) * 4u + q];
            let x1 = xs[(2u * lid.y + 1u) * 4u + q];
            acc[0] += dot(w0, x0);
            acc[1] += dot(w0, x1);
            acc[2] += dot(w1, x0);
            acc[3] += dot(w1, x1);
        }
        workgroupBarrier();
    }
    for (var i = 0u; i < 2u; i++) {
        for (var j = 0u; j < 2u; j++) {
            let r = r0 + 2u * lid.x + i;
            let t = t0 + 2u * lid.y + j;
            if (r < p.n && t < p.n_tok) {
                let o = (p.y_row0 + t) * p.y_stride + p.y_col0 + r;
#ifdef ADD
                y[o] += acc[2u * i + j];
#else
                y[o] = acc[2u * i + j];
#endif
            }
        }
    }
}

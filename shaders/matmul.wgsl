// Tiled dequantize + matrix-matrix product for prompt processing on GPUs:
// y[y_row0 + t, y_col0 + r] (+)= sum_k x[x_row0 + t, k] * W[r, k]. A 16x16 workgroup computes a
// 64-row by 64-token tile, each invocation a 4x4 register block (rows lx + 16i, tokens
// ly + 16j, so neighbouring invocations read neighbouring workgroup-memory words). Every
// 32-wide slice of k, each invocation dequantizes two 4-element groups of the weight tile into
// workgroup memory (T_<TYPE> from dequant.inc), so the tile is dequantized once for 64 tokens,
// and copies two groups of the activation tile beside it; 16 products then take 8 loads.
// Variants: ADD accumulates into y; SCALED multiplies the products by p.scale first (a LoRA
// pair's term); F16_MATH (adapters with shader-f16) keeps both tiles in
// half precision, halving workgroup memory traffic, and takes each 4-element product in half
// precision, accumulated in f32 (the tiles are what llama.cpp's Vulkan mul_mm keeps in f16).

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
    scale: f32, // SCALED: the products are multiplied by it (a LoRA pair's scale)
    lora_rank: u32, // unused here (matmul_io.inc's LORA_B epilogue)
    lora_col: u32,
    lora_width: u32,
    lora_scale: f32,
#ifdef ID
    // ID (gpu.MatMulID for batches): as matmul_io.inc's. Grid y slice s takes the tile of
    // slot s of gpu.MoEGroup's plan (moe), up to 64 assignments of one expert.
    e0: u32,
    n_exp: u32,
    x_per: u32,
    n_assign: u32,
    plan_tiles: u32,
    plan_list: u32,
    plan_slots: u32,
#endif
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> w: array<u32>;            // (n, k) packed blocks
@group(0) @binding(2) var<storage, read> x: array<vec4<f32>>;      // (x_row0 + n_tok, k)
@group(0) @binding(3) var<storage, read_write> y: array<f32>;      // (y_row0 + n_tok, y_stride)
#ifdef ID
@group(0) @binding(4) var<storage, read> moe: array<u32>;          // gpu.MoEGroup's plan
#endif

//#include dequant.inc
#ifdef ID
//#include moe_tile.inc
#endif

const TM: u32 = 64u; // rows per tile
const TN: u32 = 64u; // tokens per tile
const TK: u32 = 32u; // k per step
const K4: u32 = 8u;  // TK / 4: 4-element groups per tile row
// The tiles are stored k-group major, [k/4][row or token], a row of TM + 1 (so the groups that
// neighbouring invocations store in one step fall in different banks): the products then read
// neighbouring words for neighbouring invocations, where a row-major tile read words 64 bytes
// apart and served a warp's reads eight at a time on an H100.
const TS: u32 = TM + 1u;
var<workgroup> ws: array<tile_t, 520>; // K4 * TS
var<workgroup> xs: array<tile_t, 520>;

@compute @workgroup_size(16, 16)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let r0 = wg.x * TM;
    let t0 = wg.y * TN;
    let flat = lid.y * 16u + lid.x;
    let k4 = p.k / 4u;
    let nb = p.k / BS;
#ifdef ID
    let mt = moe_tile(wg.y); // the tile's expert rows and assignments (moe_tile.inc)
    if (mt.cnt == 0u) {
        return;
    }
    let w0 = mt.w0;
    let first = mt.first;
    let cnt = mt.cnt;
#endif
    // The 4 x 4 block as four vectors (row i, tokens 0..3), not an array: a GPU compiler may
    // keep a dynamically indexed array in local memory.
    var a0 = vec4<f32>(0.0);
    var a1 = vec4<f32>(0.0);
    var a2 = vec4<f32>(0.0);
    var a3 = vec4<f32>(0.0);
    for (var k0 = 0u; k0 < p.k; k0 += TK) {
        // Each invocation fills two groups of each tile: row (or token) g / K4, k group g % K4,
        // so neighbouring invocations read neighbouring weight bytes and activations.
        for (var h = 0u; h < 2u; h++) {
            let g = flat + 256u * h;
            let lr = g / K4;
            let lq = g % K4;
            let kk = k0 + 4u * lq;
            var wv = vec4<f32>(0.0);
            if (r0 + lr < p.n && kk < p.k) {
#ifdef ID
                wv = dq4(w0 + (r0 + lr) * nb * BW + (kk / BS) * BW, kk % BS);
#else
                wv = dq4((r0 + lr) * nb * BW + (kk / BS) * BW, kk % BS);
#endif
            }
            ws[lq * TS + lr] = tile_t(wv);
            var xv = vec4<f32>(0.0);
#ifdef ID
            if (lr < cnt && kk < p.k) {
                xv = x[(p.x_row0 + moe[first + lr] / p.x_per) * k4 + kk / 4u];
            }
#else
            if (t0 + lr < p.n_tok && kk < p.k) {
                xv = x[(p.x_row0 + t0 + lr) * k4 + kk / 4u];
            }
#endif
            xs[lq * TS + lr] = tile_t(xv);
        }
        workgroupBarrier();
        for (var q = 0u; q < K4; q++) {
            let w0 = ws[q * TS + lid.x];
            let w1 = ws[q * TS + lid.x + 16u];
            let w2 = ws[q * TS + lid.x + 32u];
            let w3 = ws[q * TS + lid.x + 48u];
            let x0 = xs[q * TS + lid.y];
            let x1 = xs[q * TS + lid.y + 16u];
            let x2 = xs[q * TS + lid.y + 32u];
            let x3 = xs[q * TS + lid.y + 48u];
            a0 += vec4<f32>(f32(dot(w0, x0)), f32(dot(w0, x1)), f32(dot(w0, x2)), f32(dot(w0, x3)));
            a1 += vec4<f32>(f32(dot(w1, x0)), f32(dot(w1, x1)), f32(dot(w1, x2)), f32(dot(w1, x3)));
            a2 += vec4<f32>(f32(dot(w2, x0)), f32(dot(w2, x1)), f32(dot(w2, x2)), f32(dot(w2, x3)));
            a3 += vec4<f32>(f32(dot(w3, x0)), f32(dot(w3, x1)), f32(dot(w3, x2)), f32(dot(w3, x3)));
        }
        workgroupBarrier();
    }
    let acc = array<vec4<f32>, 4>(a0, a1, a2, a3);
    for (var i = 0u; i < 4u; i++) {
        let r = r0 + lid.x + 16u * i;
        for (var j = 0u; j < 4u; j++) {
#ifdef ID
            let t = lid.y + 16u * j;
            if (r < p.n && t < cnt) {
                let o = (p.y_row0 + moe[first + t]) * p.y_stride + p.y_col0 + r;
#else
            let t = t0 + lid.y + 16u * j;
            if (r < p.n && t < p.n_tok) {
                let o = (p.y_row0 + t) * p.y_stride + p.y_col0 + r;
#endif
#ifdef SCALED
                let v = p.scale * acc[i][j];
#else
                let v = acc[i][j];
#endif
#ifdef ADD
                y[o] += v;
#else
                y[o] = v;
#endif
            }
        }
    }
}

// Tiled integer-dot matrix product for prompts on GPUs (gpu.Device.IntDot, llama.cpp's mmq):
// y[y_row0 + t, y_col0 + r] (+)= sum_k x[x_row0 + t, k] * W[r, k] for any integer-block type
// (T_<TYPE>; SUPER_TYPE for the superblock ones) against activations that act_quant rounded
// to the weight's Q8 partner and packed (XPACK_Q8, XB its block). A 16x16 workgroup computes a
// 64-row by 64-token tile, each invocation a 4x4 register block (rows lx + 16i, tokens
// ly + 16j). Every 32 elements of k, invocations 0-63 decode a weight row's block into int8
// words and its scales (q8_block.inc) and invocations 64-127 copy a token's activation words,
// scale and quarter sums into workgroup memory; each invocation then takes its 16 products as
// dot4I8Packed sums over both halves, exact integers, scaled into f32 once per block. XSUM
// (Q4_1, Q5_1): the minimum multiplies Q8_1's rounded block sums xs, as llama.cpp's does.
// ADD and SCALED are matmul_io.inc's epilogues (no LORA_B). ID (gpu.MatMulID for batches):
// grid y slice s takes the tile of slot s of gpu.MoEGroup's plan (moe), up to 64 assignments
// of one expert, as matmul.wgsl's ID does.

//#include matmul_io.inc
//#include dequant.inc
#ifdef SUPER_TYPE
//#include super_lanes.inc
#endif
#ifdef ID
//#include moe_tile.inc
#endif
//#include q8_block.inc

const TM: u32 = 64u; // rows per tile
const TN: u32 = 64u; // tokens per tile
// The word tiles are k-word major, [word][row or token], a row of TM + 1 words (neighbouring
// invocations' stores fall in different banks).
const TS: u32 = TM + 1u;
var<workgroup> wq: array<u32, 520>; // 8 * TS: the weight rows' int8 words
var<workgroup> wd: array<vec2<f32>, 64>; // each row's halves' scales
var<workgroup> wm: array<vec4<f32>, 64>; // each row's quarters' offsets
var<workgroup> xq: array<u32, 520>; // the tokens' int8 words
var<workgroup> xd: array<f32, 64>; // each token's block scale
var<workgroup> xsum: array<vec4<f32>, 64>; // each token's quarters' sums (times its scale)

@compute @workgroup_size(16, 16)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let r0 = wg.x * TM;
    let flat = lid.y * 16u + lid.x;
    let nb = p.k / BS;
#ifdef ID
    let mt = moe_tile(wg.y); // the tile's expert rows and assignments (moe_tile.inc)
    if (mt.cnt == 0u) {
        return;
    }
    let w0 = mt.w0;
    let first = mt.first;
    nt = mt.cnt;
#else
    let w0 = 0u;
    tok0 = wg.y * TN;
    nt = min(TN, p.n_tok - tok0);
#endif
    var a0 = vec4<f32>(0.0);
    var a1 = vec4<f32>(0.0);
    var a2 = vec4<f32>(0.0);
    var a3 = vec4<f32>(0.0);
    for (var k0 = 0u; k0 < p.k; k0 += 32u) {
        if (flat < TM) {
            let r = r0 + flat;
            var blk = Q8Block(); // rows past the weight: zeros
            if (r < p.n) {
                blk = q8_block(w0 + (r * nb + k0 / BS) * BW, k0 % BS);
            }
            for (var k = 0u; k < 8u; k++) {
                wq[k * TS + flat] = blk.q[k];
            }
            wd[flat] = blk.d;
            wm[flat] = blk.m;
        } else if (flat < TM + TN) {
            let tl = flat - TM;
            var s = vec4<i32>(0);
            var d = 0.0;
            var sums = vec4<f32>(0.0);
            if (tl < nt) {
#ifdef ID
                let xr = p.x_row0 + moe[first + tl] / p.x_per;
#else
                let xr = p.x_row0 + tok0 + tl;
#endif
                let at = act_at(xr, k0 / XB);
                d = act_scale(at);
                for (var k = 0u; k < 8u; k++) {
                    let v = x[at + 1u + (k0 % XB) / 4u + k];
                    xq[k * TS + tl] = v;
                    s[k / 2u] += dot4I8Packed(v, 0x01010101u);
                }
#ifdef XSUM
                // Q4_1 and Q5_1: Q8_1's rounded block sum, which the minimum multiplies
                // (q8_block's m is the same in every quarter).
                sums = vec4<f32>(xs[xr * (p.k / 32u) + k0 / 32u], 0.0, 0.0, 0.0);
#else
                sums = d * vec4<f32>(s);
#endif
            } else {
                for (var k = 0u; k < 8u; k++) {
                    xq[k * TS + tl] = 0u;
                }
            }
            xd[tl] = d;
            xsum[tl] = sums;
        }
        workgroupBarrier();
        // The 4 x 4 block's integer sums over each half, then scaled.
        var lo = array<vec4<i32>, 4>(); // initialised: naga zeroes a bare var once per call
        var hi = array<vec4<i32>, 4>();
        for (var k = 0u; k < 8u; k++) {
            let x4 = vec4<u32>(xq[k * TS + lid.y], xq[k * TS + lid.y + 16u], xq[k * TS + lid.y + 32u], xq[k * TS + lid.y + 48u]);
            for (var i = 0u; i < 4u; i++) {
                let wv = wq[k * TS + lid.x + 16u * i];
                let s = vec4<i32>(dot4I8Packed(wv, x4.x), dot4I8Packed(wv, x4.y), dot4I8Packed(wv, x4.z), dot4I8Packed(wv, x4.w));
                if (k < 4u) {
                    lo[i] += s;
                } else {
                    hi[i] += s;
                }
            }
        }
        let dx = vec4<f32>(xd[lid.y], xd[lid.y + 16u], xd[lid.y + 32u], xd[lid.y + 48u]);
        let xsv = array<vec4<f32>, 4>(xsum[lid.y], xsum[lid.y + 16u], xsum[lid.y + 32u], xsum[lid.y + 48u]);
        for (var i = 0u; i < 4u; i++) {
            let r = lid.x + 16u * i;
            let d = wd[r];
            let m = wm[r];
            let v = dx * (d.x * vec4<f32>(lo[i]) + d.y * vec4<f32>(hi[i])) +
                    vec4<f32>(dot(m, xsv[0]), dot(m, xsv[1]), dot(m, xsv[2]), dot(m, xsv[3]));
            switch i {
                case 0u: { a0 += v; }
                case 1u: { a1 += v; }
                case 2u: { a2 += v; }
                default: { a3 += v; }
            }
        }
        workgroupBarrier();
    }
    let acc = array<vec4<f32>, 4>(a0, a1, a2, a3);
    for (var i = 0u; i < 4u; i++) {
        let r = r0 + lid.x + 16u * i;
        for (var j = 0u; j < 4u; j++) {
            let t = lid.y + 16u * j;
            if (r < p.n && t < nt) {
#ifdef ID
                let o = (p.y_row0 + moe[first + t]) * p.y_stride + p.y_col0 + r;
#ifdef ADD
                y[o] += acc[i][j];
#else
                y[o] = acc[i][j];
#endif
#else
                store(t, r, acc[i][j]);
#endif
            }
        }
    }
}

// CPU adapters' matrix products in llama.cpp's own CPU order (x86 with AVX2 and FMA), so a
// model's products are llama.cpp's bit for bit: matvec.wgsl's sums differ from them in the
// last bits, and the next 8-bit activation rounding amplifies that step after step (0.14 apart
// in llama.cpp's probabilities after 30 tokens of the shared random qwen35, Q8_0).
// y[y_row0 + t, y_col0 + r] (+)= sum_k x[x_row0 + t, k] * W[r, k], for
//   T_Q8_0, T_Q5_0, T_Q4_1, T_Q5_1 (x: act_quant's PACKED Q8_0 rows, XPACK_Q8, XB = 32; for
//          Q4_1 and Q5_1 with XSUM the Q8_1 block sums): ggml_vec_dot_q8_0_q8_0 (q5_0_q8_0,
//          q4_1_q8_1, q5_1_q8_1) and llamafile's tinyBLAS_Q0_AVX alike, none repacked on x86:
//          per 32-block the int8 products (Q5_0's q - 16; Q4_1's and Q5_1's unsigned q, their
//          minimum times the block sum fused into a scalar sum added at the end) summed in 8 lanes
//          of 4 (dot4I8Packed: exact integers), each lane accumulated over the blocks as
//          fma(d_w * d_x, lane, acc), the lanes folded as hsum_float_8 folds them:
//          ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7));
//   T_F32 (x: f32 rows) with VDOT (one token, mul_mat_id, shapes tinyBLAS refuses):
//          ggml_vec_dot_f32: 32 lanes (four registers of 8), element i fused into lane
//          i % 32, folded by GGML_F32_VEC_REDUCE, then the last k % 32 added in order (as
//          rounded products in fours, the last k % 4 fused: GCC's code for its loop);
//   T_F32 without VDOT (batches: llamafile's tinyBLAS): 8 lanes over the whole row, folded as
//          hsum_float_8.
// Each invocation takes one row of W and LANES tokens: a group of tokens per grid z slice, or
// with ID one assignment (LANES 1, matmul_io.inc's id_assign) or with ID_TILE a tile of up to
// 8 of one expert (LANES 8, id_tile). ADD, SCALED and LORA_B are matmul_io.inc's epilogues.
// The fused multiply-adds are ggml_math.inc's fma4 and fma1 (CPU_MATH: emulated, as WGSL's
// fma may round twice, and lavapipe's does).

//#include matmul_io.inc
//#include dequant.inc
//#include ggml_math.inc
#ifdef SUPER
//#include super_lanes.inc
#endif

const RWG: u32 = 32u;

// LANES (a define, 1, 2, 4 or 8): the tokens an invocation takes.

#ifdef T_F32
// wv4 is the weight's 4 floats from word i.
fn wv4(i: u32) -> vec4<f32> {
    return bitcast<vec4<f32>>(vec4<u32>(w[i], w[i + 1u], w[i + 2u], w[i + 3u]));
}

// fold32 is GGML_F32_VEC_REDUCE of 32 lanes (lane 4 a + c in l[a].c): registers 0 + 2 and
// 1 + 3, those two added, the 8 lanes halved to 4 and then added in neighbouring pairs.
fn fold32(l: array<vec4<f32>, 8>) -> f32 {
    let lo = keep4(keep4(l[0] + l[4]) + keep4(l[2] + l[6]));
    let hi = keep4(keep4(l[1] + l[5]) + keep4(l[3] + l[7]));
    let h = keep4(lo + hi);
    return ns_keep(h.x + h.y) + ns_keep(h.z + h.w);
}
#endif

#ifdef SUPER
// i8x4 is the four int8 of a packed activation word, lowest byte first.
fn i8x4(v: u32) -> vec4<i32> {
    return bitcast<vec4<i32>>(vec4<u32>(v) << vec4<u32>(24u, 16u, 8u, 0u)) >> vec4<u32>(24u);
}

// half_sums is the activations' sums over the two 16-element halves of the 32-block whose
// words start at xw (Q8_K's bsums).
fn half_sums(xw: u32) -> vec2<i32> {
    var s = vec2<i32>(0);
    for (var k = 0u; k < 4u; k++) {
        s += vec2<i32>(dot4I8Packed(x[xw + k], 0x01010101u), dot4I8Packed(x[xw + 4u + k], 0x01010101u));
    }
    return s;
}

// fold8 is hsum_float_8 of lanes 0-3 in lo and 4-7 in hi.
fn fold8(lo: vec4<f32>, hi: vec4<f32>) -> f32 {
    let v = lo + hi;
    return ns_keep(ns_keep(v.x + v.z) + ns_keep(v.y + v.w));
}

// lanes_f is integer lanes l0 .. l0 + 3 as floats.
fn lanes_f(il: array<i32, 8>, l0: u32) -> vec4<f32> {
    return vec4<f32>(vec4<i32>(il[l0], il[l0 + 1u], il[l0 + 2u], il[l0 + 3u]));
}

// super_rows is the SUPER product of row (its blocks from base0) with the invocation's tokens:
// per superblock each token's 8 integer lanes (lane l: the places 4l .. 4l + 3 of every
// 32-block, sup_int times the int8 activations), fused into its float lanes with d_w·d_x after
// the type's block terms (SUP_COEF: Q2_K's minimums' lanes before, Q4_K's into 4 lanes of
// their own (two 32-blocks each, folded and added at the end), Q5_K's into a scalar sum,
// Q6_K's offset off the lanes, IQ1_S's deltas into a scalar sum; IQ1_M's delta lanes beside).
fn super_rows(row: u32, base0: u32, nb: u32) {
    var lo = array<vec4<f32>, LANES>();
    var hi = array<vec4<f32>, LANES>();
    var summs = array<f32, LANES>();
#ifdef T_Q4_K
    var acc_min = array<vec4<f32>, LANES>(); // a lane per 64 elements
#endif
#ifdef T_IQ1_M
    var lo2 = array<vec4<f32>, LANES>();
    var hi2 = array<vec4<f32>, LANES>();
#endif
    for (var b = 0u; b < nb; b++) {
        let base = base0 + b * BW;
        var il = array<array<i32, 8>, LANES>();
#ifdef T_IQ1_M
        var dl = array<array<i32, 8>, LANES>();
#endif
        for (var j = 0u; j < BS; j += 4u) {
            let l = (j % 32u) / 4u;
            let wv = sup_int(base, j);
#ifdef T_IQ1_M
            let dv = sup_delta(base, j);
#endif
            for (var t = 0u; t < LANES; t++) {
                let xv = i8x4(x[act_at(xrow(t), b) + 1u + j / 4u]);
                il[t][l] += dot(wv, xv);
#ifdef T_IQ1_M
                dl[t][l] += dv * (xv.x + xv.y + xv.z + xv.w);
#endif
            }
        }
        let dw = sup_d(base);
        for (var t = 0u; t < LANES; t++) {
            let at = act_at(xrow(t), b);
            let xd = act_scale(at);
            let d = vec4<f32>(dw * xd);
#ifdef SUP_COEF
            var bl: array<i32, 8>;
            var bsum = 0;
            for (var l = 0u; l < 8u; l++) {
                bl[l] = dot(vec2<i32>(sup_coef(base, 2u * l), sup_coef(base, 2u * l + 1u)), half_sums(at + 1u + 8u * l));
                bsum += bl[l];
            }
#ifdef T_Q2_K
            let dmin = vec4<f32>(-(xd * sup_dmin(base)));
            lo[t] = fma4(dmin, lanes_f(bl, 0u), lo[t]);
            hi[t] = fma4(dmin, lanes_f(bl, 4u), hi[t]);
#endif
#ifdef T_Q4_K
            let pairs = vec4<i32>(bl[0] + bl[1], bl[2] + bl[3], bl[4] + bl[5], bl[6] + bl[7]);
            acc_min[t] = fma4(vec4<f32>(-(xd * sup_dmin(base))), vec4<f32>(pairs), acc_min[t]);
#endif
#ifdef T_Q5_K
            summs[t] = fma1(-(xd * sup_dmin(base)), f32(bsum), summs[t]);
#endif
#ifdef T_Q6_K
            for (var l = 0u; l < 8u; l++) {
                il[t][l] -= 32 * bl[l];
            }
#endif
#ifdef T_IQ1_S
            summs[t] = fma1(d.x, f32(bsum), summs[t]);
#endif
#endif
            lo[t] = fma4(d, lanes_f(il[t], 0u), lo[t]);
            hi[t] = fma4(d, lanes_f(il[t], 4u), hi[t]);
#ifdef T_IQ1_M
            lo2[t] = fma4(d, lanes_f(dl[t], 0u), lo2[t]);
            hi2[t] = fma4(d, lanes_f(dl[t], 4u), hi2[t]);
#endif
        }
    }
    for (var t = 0u; t < LANES; t++) {
        if (row < p.n && t < nt) {
            var sum = SUP_TAIL * fold8(lo[t], hi[t]);
#ifdef T_Q4_K
            let m = acc_min[t];
            sum = ns_keep(sum + ns_keep(ns_keep(m.x + m.z) + ns_keep(m.y + m.w)));
#endif
#ifdef T_Q5_K
            sum = ns_keep(sum + summs[t]);
#endif
#ifdef T_IQ1_S
            sum = ns_keep(sum + 0.125 * summs[t]);
#endif
#ifdef T_IQ1_M
            sum = ns_keep(sum + 0.125 * fold8(lo2[t], hi2[t]));
#endif
            store(t, row, sum);
        }
    }
}
#else
#ifdef REPACK8
#ifndef T_Q4_K
// repack_isum is the exact integer sum of the 32-block at base with the packed activation
// block at word at: Q4_0's q - 8, IQ4_NL's and MXFP4's int8 levels.
fn repack_isum(base: u32, at: u32) -> i32 {
#ifdef T_Q4_0
    return nib_idot(base + 1u, 0u, at) - 8 * idot_xsum(at);
#endif
#ifdef T_IQ4_NL
    return lut_idot(IQ4NL_LEVELS, base + 1u, at + 1u);
#endif
#ifdef T_MXFP4
    return lut_idot(MXFP4_LEVELS, base + 1u, at + 1u);
#endif
}
#endif

// repack_rows is the REPACK8 product of row (its blocks from base0) with the invocation's
// tokens, in the order of the gemv and gemm llama.cpp's x86 build runs on weights it repacks
// eight rows to a block: one float chain an output, each block's exact integer sum fused in
// as fma(sum, d_w·d_x, acc). Q4_K sums its minimums in a second chain, subtracted at the end,
// and fuses every 64 elements for the tokens its gemm takes (the first n_tok - n_tok % 4;
// none with GEMV_ONLY), every superblock for the others.
fn repack_rows(row: u32, base0: u32, nb: u32) {
    var acc = array<f32, LANES>();
    var acc_min = array<f32, LANES>();
    for (var b = 0u; b < nb; b++) {
        let base = base0 + b * BW;
        for (var t = 0u; t < LANES; t++) {
            let at = act_at(xrow(t), b);
            let dx = act_scale(at);
#ifdef T_Q4_K
            let dm = unpack2x16float(w[base]);
            var gemm = false;
#ifndef GEMV_ONLY
            gemm = tok0 + t < p.n_tok - p.n_tok % 4u;
#endif
            var s = vec2<i32>(0);
            for (var c = 0u; c < 4u; c++) {
                s += k_isums(base, at, base + 4u, 0u, c);
                if (gemm || c == 3u) {
                    acc[t] = fma1(f32(s.x), dm.x * dx, acc[t]);
                    acc_min[t] = fma1(f32(s.y), dm.y * dx, acc_min[t]);
                    s = vec2<i32>(0);
                }
            }
#else
#ifdef T_MXFP4
            let dw = sb_params(base, 0u).x;
#else
            let dw = f16lo(w[base]);
#endif
            acc[t] = fma1(f32(repack_isum(base, at)), dw * dx, acc[t]);
#endif
        }
    }
    for (var t = 0u; t < LANES; t++) {
        if (row < p.n && t < nt) {
            store(t, row, ns_keep(acc[t] - acc_min[t]));
        }
    }
}
#else
#ifdef XPACK_Q8
// nibble_word is lane l's four 4-bit values (elements 4l .. 4l + 3) of the 16 quant bytes at
// word qs, one to a byte: low nibbles for l < 4, high ones after.
fn nibble_word(qs: u32, l: u32) -> u32 {
    return (w[qs + l % 4u] >> (4u * (l / 4u))) & 0x0F0F0F0Fu;
}

// high_bits is lane l's four fifth bits (bits 4l .. 4l + 3 of qh), one to a byte (0 or 1).
fn high_bits(qh: u32, l: u32) -> u32 {
    let h4 = (qh >> (4u * l)) & 0xFu;
    return (h4 & 1u) | ((h4 & 2u) << 7u) | ((h4 & 4u) << 14u) | ((h4 & 8u) << 21u);
}

// lane_word is lane l's four int8 values of the block at base, lowest first: Q8_0's bytes;
// Q5_0's q - 16 as ggml builds them (a nibble with 0xF0 or'ed in where its fifth bit is clear,
// bytes_from_bits_32's andnot); Q4_1's and Q5_1's unsigned q (their fifth bit as 16).
fn lane_word(base: u32, l: u32) -> u32 {
#ifdef T_Q8_0
    return w[base + 1u + l];
#endif
#ifdef T_Q5_0
    return nibble_word(base + 2u, l) | ((high_bits(w[base + 1u], l) ^ 0x01010101u) * 0xF0u);
#endif
#ifdef T_Q4_1
    return nibble_word(base + 1u, l);
#endif
#ifdef T_Q5_1
    return nibble_word(base + 2u, l) | (high_bits(w[base + 1u], l) << 4u);
#endif
}

// int8_words is lanes l0 .. l0 + 3's words (lane_word).
fn int8_words(base: u32, l0: u32) -> vec4<u32> {
    return vec4<u32>(lane_word(base, l0), lane_word(base, l0 + 1u), lane_word(base, l0 + 2u), lane_word(base, l0 + 3u));
}

// lanes4 is the 4 lane sums of words w0.. (4 int8 each) with the activation words x[xo..].
fn lanes4(wv: vec4<u32>, xo: u32) -> vec4<f32> {
    return vec4<f32>(vec4<i32>(dot4I8Packed(wv.x, x[xo]), dot4I8Packed(wv.y, x[xo + 1u]),
                               dot4I8Packed(wv.z, x[xo + 2u]), dot4I8Packed(wv.w, x[xo + 3u])));
}
#endif
#endif
#endif

@compute @workgroup_size(RWG)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) li: u32,
        @builtin(num_workgroups) nwg: vec3<u32>) {
    // A zero the compiler cannot see (a row of y is never 0 wide), for ggml_math.inc.
    ns_zero = u32(p.y_stride == 0u);
    let row = (wg.x + wg.y * nwg.x) * RWG + li;
    let nb = p.k / BS;
#ifdef ID
#ifdef ID_TILE
    if (!id_tile(wg.z)) {
        return;
    }
#else
    if (!id_assign(wg.z)) {
        return;
    }
#endif
    let base0 = id_w0 + min(row, p.n - 1u) * nb * BW;
#else
    tok0 = wg.z * LANES;
    nt = min(LANES, p.n_tok - tok0);
    let base0 = min(row, p.n - 1u) * nb * BW;
#endif
#ifdef SUPER
    super_rows(row, base0, nb);
#else
#ifdef REPACK8
    repack_rows(row, base0, nb);
#else
#ifdef XPACK_Q8
    // Lanes 0-3 and 4-7 of each token's sums.
    var lo = array<vec4<f32>, LANES>();
    var hi = array<vec4<f32>, LANES>();
#ifdef XSUM
    var summs = array<f32, LANES>();
#endif
    for (var b = 0u; b < nb; b++) {
        let base = base0 + b * BW;
        let dw = f16lo(w[base]);
        let wl = int8_words(base, 0u);
        let wh = int8_words(base, 4u);
        for (var t = 0u; t < LANES; t++) {
            let at = act_at(xrow(t), b);
            let d = vec4<f32>(dw * act_scale(at)); // exact: two f16 significands
            lo[t] = fma4(d, lanes4(wl, at + 1u), lo[t]);
            hi[t] = fma4(d, lanes4(wh, at + 5u), hi[t]);
#ifdef XSUM
            summs[t] = fma1(f16hi(w[base]), xs[xrow(t) * nb + b], summs[t]);
#endif
        }
    }
    for (var t = 0u; t < LANES; t++) {
        if (row < p.n && t < nt) {
            let v = lo[t] + hi[t];
            var sum = ns_keep(ns_keep(v.x + v.z) + ns_keep(v.y + v.w));
#ifdef XSUM
            sum = ns_keep(sum + summs[t]);
#endif
            store(t, row, sum);
        }
    }
#else
#ifdef VDOT
    // Lane 4 a + c of token t's 32 is lane[t][a].c.
    var lane = array<array<vec4<f32>, 8>, LANES>();
    let whole = p.k & ~31u;
    for (var i = 0u; i < whole / 4u; i++) {
        let wv = wv4(base0 + 4u * i);
        for (var t = 0u; t < LANES; t++) {
            lane[t][i % 8u] = fma4(wv, x[xrow(t) * (p.k / 4u) + i], lane[t][i % 8u]);
        }
    }
    for (var t = 0u; t < LANES; t++) {
        if (row < p.n && t < nt) {
            var s = fold32(lane[t]);
            // The leftovers as GCC compiles ggml's loop: in fours, each product rounded then
            // added in order; the last k % 4 fused.
            let fours = whole + ((p.k - whole) & ~3u);
            for (var i = whole; i < p.k; i++) {
                let wv = bitcast<f32>(w[base0 + i]);
                let xv = x[(xrow(t) * p.k + i) / 4u][i % 4u];
                if (i < fours) {
                    s = ns_keep(s + ns_keep(wv * xv));
                } else {
                    s = fma1(wv, xv, s);
                }
            }
            store(t, row, s);
        }
    }
#else
    var lo = array<vec4<f32>, LANES>();
    var hi = array<vec4<f32>, LANES>();
    for (var i = 0u; i < p.k / 8u; i++) {
        let wl = wv4(base0 + 8u * i);
        let wh = wv4(base0 + 8u * i + 4u);
        for (var t = 0u; t < LANES; t++) {
            let xo = xrow(t) * (p.k / 4u) + 2u * i;
            lo[t] = fma4(wl, x[xo], lo[t]);
            hi[t] = fma4(wh, x[xo + 1u], hi[t]);
        }
    }
    for (var t = 0u; t < LANES; t++) {
        if (row < p.n && t < nt) {
            let v = lo[t] + hi[t];
            store(t, row, ns_keep(ns_keep(v.x + v.z) + ns_keep(v.y + v.w)));
        }
    }
#endif
#endif
#endif
#endif
}

// The integer terms of 256-element superblocks as llama.cpp's x86 AVX2 vec_dots multiply them
// (matvec_lanes.wgsl's SUPER: the K-quants and IQ types it does not repack), built on
// dequant.inc's decoders: each sub-block's scale is passed to sb_q4 as an integer, so the
// decoded values are exact integer products of scale and quant.
//   sup_d(base): the weight's scale d;
//   sup_q(base, j): elements j .. j + 3 (j a multiple of 4) as int8 quants, as the kernel
//                   multiplies them with the activations (Q6_K's unsigned: its offset is
//                   SUP_COEF's), and sup_int(base, j) the same times their sub-block scales;
//   sup_coef(base, k) (SUP_COEF): the coefficient of the activations' 16-element sum k (Q8_K's
//                     bsums): Q2_K's, Q4_K's and Q5_K's minimums, Q6_K's scales, IQ1_S's
//                     delta signs times scales;
//   sup_delta(base, j) (IQ1_M): IQ1_M's delta sign times scale for elements j .. j + 3;
//   SUP_TAIL: what the lanes' fold is multiplied by (the IQ2 types' 1/8, IQ3_XXS's 1/4).

#ifdef T_Q2_K
const SUP_TAIL: f32 = 1.0;
fn sup_d(base: u32) -> f32 {
    return f16lo(w[base + 20u]);
}
fn sup_dmin(base: u32) -> f32 {
    return f16hi(w[base + 20u]);
}
fn sup_scale(base: u32, j: u32) -> i32 {
    return i32(byte_at(base, j / 16u) & 0xFu);
}
fn sup_coef(base: u32, k: u32) -> i32 {
    return i32(byte_at(base, k) >> 4u);
}
#endif

#ifdef T_Q3_K
const SUP_TAIL: f32 = 1.0;
fn sup_d(base: u32) -> f32 {
    return f16lo(w[base + 27u]);
}
fn sup_scale(base: u32, j: u32) -> i32 {
    let s = j / 16u;
    let g = s / 4u;
    let b = s % 4u;
    let low = (w[base + 24u + g % 2u] >> (8u * b + 4u * (g / 2u))) & 0xFu;
    let top = (w[base + 26u] >> (8u * b + 2u * g)) & 3u;
    return i32(low | (top << 4u)) - 32;
}
#endif

#ifdef SUP_SCALE_MIN
// Q4_K's and Q5_K's header: d, dmin and the 6-bit scale and minimum of each 32 elements.
const SUP_TAIL: f32 = 1.0;
fn sup_d(base: u32) -> f32 {
    return f16lo(w[base]);
}
fn sup_dmin(base: u32) -> f32 {
    return f16hi(w[base]);
}
fn sup_scale(base: u32, j: u32) -> i32 {
    return i32(scale_min_of(hdr(base).yzw, j / 32u).x);
}
fn sup_coef(base: u32, k: u32) -> i32 {
    return i32(scale_min_of(hdr(base).yzw, k / 2u).y);
}
#endif

#ifdef T_Q6_K
const SUP_TAIL: f32 = 1.0;
fn sup_d(base: u32) -> f32 {
    return f16lo(w[base + 52u]);
}
fn sup_scale(base: u32, j: u32) -> i32 {
    return sup_coef(base, j / 16u);
}
fn sup_coef(base: u32, k: u32) -> i32 {
    return bitcast<i32>(w[base + 48u + k / 4u] << (24u - 8u * (k % 4u))) >> 24u;
}
#endif

#ifdef T_IQ2_XXS
const SUP_TAIL: f32 = 0.125;
fn sup_scale(base: u32, j: u32) -> i32 {
    return i32(2u * (w[base + 2u + 2u * (j / 32u)] >> 28u) + 1u);
}
#endif

#ifdef T_IQ2_XS
const SUP_TAIL: f32 = 0.125;
fn sup_scale(base: u32, j: u32) -> i32 {
    return i32(2u * ((w[base + 17u + j / 128u] >> (4u * ((j / 16u) % 8u))) & 0xFu) + 1u);
}
#endif

#ifdef T_IQ2_S
const SUP_TAIL: f32 = 0.125;
fn sup_scale(base: u32, j: u32) -> i32 {
    return i32(2u * ((w[base + 19u + j / 128u] >> (4u * ((j / 16u) % 8u))) & 0xFu) + 1u);
}
#endif

#ifdef T_IQ3_XXS
const SUP_TAIL: f32 = 0.25;
fn sup_scale(base: u32, j: u32) -> i32 {
    return i32(2u * (w[base + 17u + j / 32u] >> 28u) + 1u);
}
#endif

#ifdef T_IQ3_S
const SUP_TAIL: f32 = 1.0;
fn sup_scale(base: u32, j: u32) -> i32 {
    return i32(2u * ((w[base + 27u] >> (4u * (j / 32u))) & 0xFu) + 1u);
}
#endif

#ifdef T_IQ4_XS
const SUP_TAIL: f32 = 1.0;
fn sup_scale(base: u32, j: u32) -> i32 {
    let ib = j / 32u;
    let ls = ((w[base + 1u] >> (4u * ib)) & 0xFu) | (((w[base] >> (16u + 2u * ib)) & 3u) << 4u);
    return i32(ls) - 32;
}
#endif

#ifdef T_IQ1_S
const SUP_TAIL: f32 = 1.0;
fn sup_scale(base: u32, j: u32) -> i32 {
    return i32(2u * ((iq1s_qh(base, j / 32u) >> 12u) & 7u) + 1u);
}
fn sup_coef(base: u32, k: u32) -> i32 {
    return select(1, -1, iq1s_qh(base, k / 2u) >= 0x8000u) * sup_scale(base, 16u * k);
}
#endif

#ifdef T_IQ1_M
const SUP_TAIL: f32 = 1.0;
fn sup_d(base: u32) -> f32 {
    let s0 = w[base + 12u];
    let s1 = w[base + 13u];
    return f16lo(((s0 >> 12u) & 0xFu) | ((s0 >> 24u) & 0xF0u) | ((s1 >> 4u) & 0xF00u) | ((s1 >> 16u) & 0xF000u));
}
fn sup_scale(base: u32, j: u32) -> i32 {
    let ib = j / 32u;
    let sc = select(w[base + 12u], w[base + 13u], ib >= 4u) >> (16u * ((ib / 2u) % 2u)); // scales[ib / 2]
    return i32(2u * ((sc >> (6u * (ib % 2u) + 3u * ((j / 16u) % 2u))) & 7u) + 1u);
}
fn sup_q(base: u32, j: u32) -> vec4<i32> {
    let g = j / 8u;
    let idx = byte_at(base, g) | (((byte_at(base + 8u, g / 2u) >> (4u * (g % 2u))) & 7u) << 8u);
    return vec4<i32>(iq1_grid4(idx, (j / 4u) % 2u));
}
fn sup_delta(base: u32, j: u32) -> i32 {
    let g = j / 8u;
    let nib = byte_at(base + 8u, g / 2u) >> (4u * (g % 2u));
    return select(1, -1, (nib & 8u) != 0u) * sup_scale(base, j);
}
#else
#ifndef T_Q2_K
#ifndef T_Q3_K
#ifndef SUP_SCALE_MIN
#ifndef T_Q6_K
// The IQ types' d: the block's first f16.
fn sup_d(base: u32) -> f32 {
    return f16lo(w[base]);
}
#endif
#endif
#endif
#endif

fn sup_q(base: u32, j: u32) -> vec4<i32> {
    let v = vec4<i32>(sb_q4(base, j, vec2<f32>(1.0, 0.0)));
#ifdef T_Q6_K
    return v + 32; // the kernel's unsigned quants: q - 32 + 32
#else
    return v;
#endif
}
#endif

fn sup_int(base: u32, j: u32) -> vec4<i32> {
    return sup_scale(base, j) * sup_q(base, j);
}

#ifdef IDOT_GRID
// idot_block (dequant.inc's, for GPUs' integer dot products) of the grid IQ types against the
// packed Q8_K block at word at: each word's int8 quants (sup_q) times the activations', an
// exact integer sum with the words' scales, scaled once; IQ1's deltas as the activations'
// sums times their signed scales.
fn idot_block(base: u32, at: u32, xsum: f32) -> f32 {
    var s = 0;
    var ds = 0;
    for (var j = 0u; j < 256u; j += 4u) {
        let xw = x[at + 1u + j / 4u];
        s += sup_scale(base, j) * dot4I8Packed(pack_i8(sup_q(base, j)), xw);
#ifdef T_IQ1_M
        ds += sup_delta(base, j) * dot4I8Packed(0x01010101u, xw);
#endif
#ifdef T_IQ1_S
        ds += sup_coef(base, j / 16u) * dot4I8Packed(0x01010101u, xw);
#endif
    }
    return sup_d(base) * bitcast<f32>(x[at]) * (SUP_TAIL * f32(s) + 0.125 * f32(ds));
}
#endif

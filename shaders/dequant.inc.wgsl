// Block decoders shared by the weight kernels. The including kernel declares `w: array<u32>`
// holding the weight in gpu.Pack's layout: ggml's blocks, each padded to whole u32 words
// (Q4_0, Q5_0, Q8_0 and the IQ types but IQ4_XS and IQ1_M: two bytes after the f16 scale;
// MXFP4: three after its scale byte; Q3_K, Q6_K: two bytes at the end) so every field is
// word-aligned. One define T_<TYPE> selects the type and provides:
//   BS   elements per block
//   BW   u32 words per packed block
//   SB   elements per sub-block: the elements that share one sb_params
//   sb_params(base, j0): the parameters (scale, and minimum or offset) of the sub-block
//                 holding element j0, which sb_q4 takes
//   sb_q4(base, j, sp): elements j..j+3 (j a multiple of 4) of that sub-block
//   dq4(base, j): elements j..j+3 (j a multiple of 4) of the block starting at word base,
//                 dequantized exactly as llama.cpp's dequantize_row_* computes them.
// Types whose blocks hold several sub-blocks (Q4_K, Q5_K, Q6_K; the define HDR) also provide
// Hdr, hdr(base) and sb_params_of(h, j0): the block's scale words loaded once, then each
// sub-block's parameters from them, as sb_params(base, j0) gives them.
// The IQ types IQ2_*, IQ3_* and IQ1_* look their quants up in a grid of points (package
// gguf/iqgrid) that gpu.Pack appends to every weight buffer: with GRID, grid_at(i) reads word i
// of it, GRID_WORDS words before the end of w (so no kernel needs a binding for it).

fn f16lo(v: u32) -> f32 {
    return unpack2x16float(v).x;
}

fn f16hi(v: u32) -> f32 {
    return unpack2x16float(v).y;
}

// bytes4 splits a word into its four bytes, lowest first.
fn bytes4(v: u32) -> vec4<u32> {
    return (vec4<u32>(v) >> vec4<u32>(0u, 8u, 16u, 24u)) & vec4<u32>(0xFFu);
}

// byte_at returns byte k of the words starting at base.
fn byte_at(base: u32, k: u32) -> u32 {
    return (w[base + k / 4u] >> (8u * (k % 4u))) & 0xFFu;
}

#ifdef T_F32
const BS: u32 = 4u;
const BW: u32 = 4u;
const SB: u32 = 4u;
fn sb_params(base: u32, j0: u32) -> vec2<f32> {
    return vec2<f32>(0.0);
}
fn sb_q4(base: u32, j: u32, sp: vec2<f32>) -> vec4<f32> {
    return bitcast<vec4<f32>>(vec4<u32>(w[base], w[base + 1u], w[base + 2u], w[base + 3u]));
}
#endif

#ifdef T_F16
const BS: u32 = 4u;
const BW: u32 = 2u;
const SB: u32 = 4u;
fn sb_params(base: u32, j0: u32) -> vec2<f32> {
    return vec2<f32>(0.0);
}
fn sb_q4(base: u32, j: u32, sp: vec2<f32>) -> vec4<f32> {
    return vec4<f32>(unpack2x16float(w[base]), unpack2x16float(w[base + 1u]));
}
#endif

#ifdef T_BF16
const BS: u32 = 4u;
const BW: u32 = 2u;
const SB: u32 = 4u;
fn sb_params(base: u32, j0: u32) -> vec2<f32> {
    return vec2<f32>(0.0);
}
fn sb_q4(base: u32, j: u32, sp: vec2<f32>) -> vec4<f32> {
    let a = w[base];
    let b = w[base + 1u];
    return bitcast<vec4<f32>>(vec4<u32>(a << 16u, a & 0xFFFF0000u, b << 16u, b & 0xFFFF0000u));
}
#endif

#ifdef T_Q8_0
// block_q8_0 { f16 d; pad; i8 qs[32] }: y = d * q
const BS: u32 = 32u;
const BW: u32 = 9u;
const SB: u32 = 32u;
fn sb_params(base: u32, j0: u32) -> vec2<f32> {
    return vec2<f32>(f16lo(w[base]), 0.0);
}
fn sb_q4(base: u32, j: u32, sp: vec2<f32>) -> vec4<f32> {
    let q = vec4<i32>(bitcast<i32>(w[base + 1u + j / 4u])) << vec4<u32>(24u, 16u, 8u, 0u);
    return sp.x * vec4<f32>(q >> vec4<u32>(24u));
}
#ifdef IDOT
// idot_block is the block's product with the Q8 activation block at word at of x (packed: its
// scale, then four int8 a word): an exact integer sum, scaled once (ggml_vec_dot_q8_0_q8_0).
fn idot_block(base: u32, at: u32, xsum: f32) -> f32 {
    var s = 0;
    for (var k = 0u; k < 8u; k++) {
        s += dot4I8Packed(w[base + 1u + k], x[at + 1u + k]);
    }
    return f16lo(w[base]) * bitcast<f32>(x[at]) * f32(s);
}
#endif
#endif

// nibbles4 is elements j..j+3 of a 32-element block whose 16 quant bytes start at word qw:
// element l < 16 is the low nibble of byte l, 16 + l the high nibble.
fn nibbles4(qw: u32, j: u32) -> vec4<u32> {
    return (bytes4(w[qw + (j % 16u) / 4u]) >> vec4<u32>(select(0u, 4u, j >= 16u))) & vec4<u32>(0xFu);
}

#ifdef IDOT
// nib_idot is the integer dot product of a 32-element block of nibbles (16 quant bytes from
// word qs: element l < 16 the low nibble of byte l, 16 + l its high one), each with its fifth
// bit from qh (bit e for element e; 0 for the 4-bit types), with the packed activation block
// at word at of x.
fn nib_idot(qs: u32, qh: u32, at: u32) -> i32 {
    var s = 0;
    for (var k = 0u; k < 4u; k++) {
        let q = w[qs + k];
        s += dot4I8Packed((q & 0x0F0F0F0Fu) | spread5(qh >> (4u * k)), x[at + 1u + k]) +
             dot4I8Packed(((q >> 4u) & 0x0F0F0F0Fu) | spread5(qh >> (16u + 4u * k)), x[at + 5u + k]);
    }
    return s;
}

// lut_idot is nib_idot's 4-bit case with each nibble looked up in levels (lut16_word: the
// int8 tables of IQ4_NL and MXFP4), against the activation words from xw.
fn lut_idot(levels: vec4<u32>, qs: u32, xw: u32) -> i32 {
    var s = 0;
    for (var k = 0u; k < 4u; k++) {
        let q = w[qs + k];
        s += dot4I8Packed(lut16_word(levels, q & 0x0F0F0F0Fu), x[xw + k]) +
             dot4I8Packed(lut16_word(levels, (q >> 4u) & 0x0F0F0F0Fu), x[xw + 4u + k]);
    }
    return s;
}

// idot_xsum is the sum of the 32 int8 activations of the packed block at word at of x.
fn idot_xsum(at: u32) -> i32 {
    var s = 0;
    for (var k = 0u; k < 8u; k++) {
        s += dot4I8Packed(0x01010101u, x[at + 1u + k]);
    }
    return s;
}

// spread5 moves bits 0..3 of b to bit 4 of bytes 0..3: four elements' fifth bits.
fn spread5(b: u32) -> u32 {
    return ((b & 1u) << 4u) | ((b & 2u) << 11u) | ((b & 4u) << 18u) | ((b & 8u) << 25u);
}
#endif

// high4 is the fifth bits of elements j..j+3 from a 32-bit mask (bit e for element e).
fn high4(qh: u32, j: u32) -> vec4<u32> {
    return ((vec4<u32>(qh) >> (vec4<u32>(0u, 1u, 2u, 3u) + j)) & vec4<u32>(1u)) << vec4<u32>(4u);
}

#ifdef T_Q4_0
// block_q4_0 { f16 d; pad; u8 qs[16] }: y = (q - 8) * d
const BS: u32 = 32u;
const BW: u32 = 5u;
const SB: u32 = 32u;
fn sb_params(base: u32, j0: u32) -> vec2<f32> {
    return vec2<f32>(f16lo(w[base]), 0.0);
}
fn sb_q4(base: u32, j: u32, sp: vec2<f32>) -> vec4<f32> {
    return (vec4<f32>(nibbles4(base + 1u, j)) - 8.0) * sp.x;
}
#ifdef IDOT
// idot_block (see T_Q8_0's): the nibbles' sum (nib_idot), the offset 8 off as 8 times the
// activations' sum.
fn idot_block(base: u32, at: u32, xsum: f32) -> f32 {
    return f16lo(w[base]) * bitcast<f32>(x[at]) * f32(nib_idot(base + 1u, 0u, at) - 8 * idot_xsum(at));
}
#endif
#endif

#ifdef T_Q4_1
// block_q4_1 { f16 d, m; u8 qs[16] }: y = d * q + m
const BS: u32 = 32u;
const BW: u32 = 5u;
const SB: u32 = 32u;
fn sb_params(base: u32, j0: u32) -> vec2<f32> {
    return unpack2x16float(w[base]);
}
fn sb_q4(base: u32, j: u32, sp: vec2<f32>) -> vec4<f32> {
    return sp.x * vec4<f32>(nibbles4(base + 1u, j)) + sp.y;
}
#ifdef IDOT
// idot_block (see T_Q4_0's): d·d_x·Σq·q_x plus the minimum times the activations' rounded
// block sum (xsum, Q8_1's s), as ggml_vec_dot_q4_1_q8_1.
fn idot_block(base: u32, at: u32, xsum: f32) -> f32 {
    let dm = unpack2x16float(w[base]);
    return dm.x * bitcast<f32>(x[at]) * f32(nib_idot(base + 1u, 0u, at)) + dm.y * xsum;
}
#endif
#endif

#ifdef T_Q5_0
// block_q5_0 { f16 d; pad; u32 qh; u8 qs[16] }: bit e of qh is element e's fifth bit;
// y = (q - 16) * d
const BS: u32 = 32u;
const BW: u32 = 6u;
const SB: u32 = 32u;
fn sb_params(base: u32, j0: u32) -> vec2<f32> {
    return vec2<f32>(f16lo(w[base]), 0.0);
}
fn sb_q4(base: u32, j: u32, sp: vec2<f32>) -> vec4<f32> {
    return (vec4<f32>(nibbles4(base + 2u, j) | high4(w[base + 1u], j)) - 16.0) * sp.x;
}
#ifdef IDOT
// idot_block (see T_Q4_0's): each nibble gets its fifth bit from qh (spread5), offset 16.
fn idot_block(base: u32, at: u32, xsum: f32) -> f32 {
    return f16lo(w[base]) * bitcast<f32>(x[at]) * f32(nib_idot(base + 2u, w[base + 1u], at) - 16 * idot_xsum(at));
}
#endif
#endif

#ifdef T_Q5_1
// block_q5_1 { f16 d, m; u32 qh; u8 qs[16] }: y = d * q + m
const BS: u32 = 32u;
const BW: u32 = 6u;
const SB: u32 = 32u;
fn sb_params(base: u32, j0: u32) -> vec2<f32> {
    return unpack2x16float(w[base]);
}
fn sb_q4(base: u32, j: u32, sp: vec2<f32>) -> vec4<f32> {
    return sp.x * vec4<f32>(nibbles4(base + 2u, j) | high4(w[base + 1u], j)) + sp.y;
}
#ifdef IDOT
// idot_block (see T_Q5_0's and T_Q4_1's).
fn idot_block(base: u32, at: u32, xsum: f32) -> f32 {
    let dm = unpack2x16float(w[base]);
    return dm.x * bitcast<f32>(x[at]) * f32(nib_idot(base + 2u, w[base + 1u], at)) + dm.y * xsum;
}
#endif
#endif

#ifdef T_Q2_K
// block_q2_K { u8 scales[16]; u8 qs[64]; f16 d, dmin }: per 16 elements a 4-bit scale and
// 4-bit min; y = (d * (sc & 15)) * q - dmin * (sc >> 4)
const BS: u32 = 256u;
const BW: u32 = 21u;
const SB: u32 = 16u;
fn sb_params(base: u32, j0: u32) -> vec2<f32> {
    let r = j0 % 128u;
    let sc = byte_at(base, 8u * (j0 / 128u) + 2u * (r / 32u) + (r % 32u) / 16u);
    let dm = unpack2x16float(w[base + 20u]);
    return vec2<f32>(dm.x * f32(sc & 0xFu), dm.y * f32(sc >> 4u));
}
fn sb_q4(base: u32, j: u32, sp: vec2<f32>) -> vec4<f32> {
    let r = j % 128u;
    let qbyte = 32u * (j / 128u) + 16u * ((r % 32u) / 16u) + r % 16u;
    let q = (bytes4(w[base + 4u + qbyte / 4u]) >> vec4<u32>(2u * (r / 32u))) & vec4<u32>(3u);
    return sp.x * vec4<f32>(q) - sp.y;
}
#endif

#ifdef T_Q3_K
// block_q3_K { u8 hmask[32]; u8 qs[64]; u8 scales[12]; f16 d; pad }: 2 low bits in qs, the
// third (inverted) in hmask, 6-bit signed scales packed in 12 bytes;
// y = (d * (sc - 32)) * (q - (hbit ? 0 : 4))
const BS: u32 = 256u;
const BW: u32 = 28u;
const SB: u32 = 16u;
fn sb_params(base: u32, j0: u32) -> vec2<f32> {
    let r = j0 % 128u;
    let s = 8u * (j0 / 128u) + 2u * (r / 32u) + (r % 32u) / 16u;
    let g = s / 4u;
    let b = s % 4u;
    let low = (w[base + 24u + g % 2u] >> (8u * b + 4u * (g / 2u))) & 0xFu;
    let top = (w[base + 26u] >> (8u * b + 2u * g)) & 3u;
    return vec2<f32>(f16lo(w[base + 27u]) * f32(i32(low | (top << 4u)) - 32), 0.0);
}
fn sb_q4(base: u32, j: u32, sp: vec2<f32>) -> vec4<f32> {
    let n = j / 128u;
    let r = j % 128u;
    let jj = r / 32u;
    let l = r % 32u; // 16 * half + l within the 32 bytes of this 128-element half
    let q = (bytes4(w[base + 8u + (32u * n + l) / 4u]) >> vec4<u32>(2u * jj)) & vec4<u32>(3u);
    let h = (bytes4(w[base + l / 4u]) >> vec4<u32>(4u * n + jj)) & vec4<u32>(1u);
    return sp.x * (vec4<f32>(q) - 4.0 * vec4<f32>(vec4<u32>(1u) - h));
}
#endif

#ifdef K_SCALES
// scale_min_of returns the 6-bit scale and min number `is` of a Q4_K/Q5_K block (ggml's
// get_scale_min_k4) from its 12 scale bytes, the words base+1..base+3 of the block, loaded
// once for the block's 8 pairs (hdr).
fn scale_min_of(h: vec3<u32>, is: u32) -> vec2<f32> {
    if (is < 4u) {
        return vec2<f32>(f32(word_byte(h, is) & 63u), f32(word_byte(h, is + 4u) & 63u));
    }
    let sc = (word_byte(h, is + 4u) & 0xFu) | ((word_byte(h, is - 4u) >> 6u) << 4u);
    let m = (word_byte(h, is + 4u) >> 4u) | ((word_byte(h, is) >> 6u) << 4u);
    return vec2<f32>(f32(sc), f32(m));
}

// word_byte is byte k of three words.
fn word_byte(h: vec3<u32>, k: u32) -> u32 {
    return (h[k / 4u] >> (8u * (k % 4u))) & 0xFFu;
}

// k_params is the sub-block's d * sc and dmin * m.
fn k_params(base: u32, j0: u32) -> vec2<f32> {
    return sb_params_of(hdr(base), j0);
}

// A Q4_K/Q5_K block's header (HDR): its first four words, d and dmin, then the scale words.
alias Hdr = vec4<u32>;

fn hdr(base: u32) -> Hdr {
    return vec4<u32>(w[base], w[base + 1u], w[base + 2u], w[base + 3u]);
}

fn sb_params_of(h: Hdr, j0: u32) -> vec2<f32> {
    let sm = scale_min_of(h.yzw, 2u * (j0 / 64u) + (j0 % 64u) / 32u);
    let dm = unpack2x16float(h.x);
    return vec2<f32>(dm.x * sm.x, dm.y * sm.y);
}
#endif

#ifdef T_Q4_K
#ifdef BLOCK_DOT
fn block_dot(base: array<u32, R>, xb: u32) -> array<f32, R> {
    var sum = array<f32, R>();
    // Each row's d, dmin and scale words, loaded once.
    var dm: array<vec2<f32>, R>;
    var sw: array<vec3<u32>, R>;
    for (var r = 0u; r < R; r++) {
        let h = hdr(base[r]);
        dm[r] = unpack2x16float(h.x);
        sw[r] = h.yzw;
    }
    for (var c = 0u; c < 4u; c++) {
        // 64 elements: the low nibbles of 32 bytes, then their high nibbles.
        var lo = array<vec4<f32>, R>();
        var hi = array<vec4<f32>, R>();
        var xl = vec4<f32>(0.0);
        var xh = vec4<f32>(0.0);
        for (var i = 0u; i < 8u; i++) {
            let x0 = xload(xb + 16u * c + i);
            let x1 = xload(xb + 16u * c + 8u + i);
            for (var r = 0u; r < R; r++) {
                let b = bytes4(w[base[r] + 4u + 8u * c + i]);
                lo[r] = fma(vec4<f32>(b & vec4<u32>(0xFu)), x0, lo[r]);
                hi[r] = fma(vec4<f32>(b >> vec4<u32>(4u)), x1, hi[r]);
            }
            xl += x0;
            xh += x1;
        }
        let one = vec4<f32>(1.0);
        for (var r = 0u; r < R; r++) {
            let s0 = scale_min_of(sw[r], 2u * c);
            let s1 = scale_min_of(sw[r], 2u * c + 1u);
            sum[r] += dm[r].x * s0.x * dot(lo[r], one) - dm[r].y * s0.y * dot(xl, one);
            sum[r] += dm[r].x * s1.x * dot(hi[r], one) - dm[r].y * s1.y * dot(xh, one);
        }
    }
    return sum;
}
#endif
#ifdef CHUNK_DOT
// chunk_dot is the dot product of chunk u (of 8) of the Q4_K block at word base with the
// activations from x[xb..] (vec4 index, the block's first element): the 16 quant bytes
// 16u .. 16u + 15, whose low nibbles are elements 64c + 16(u % 2) .. + 15 and high nibbles the
// same + 32 (c = u / 2), with the two sub-blocks' scales applied to partial sums, as block_dot.
// For GPUs' cooperative kernel: 32 weights an invocation reads its block header for, where a
// 4-element group a step read it for 4. The including kernel provides xload(i).
fn chunk_dot(base: u32, u: u32, xb: u32) -> f32 {
    let h = hdr(base);
    let dm = unpack2x16float(h.x);
    let c = u / 2u;
    let s0 = scale_min_of(h.yzw, 2u * c);
    let s1 = scale_min_of(h.yzw, 2u * c + 1u);
    let q0 = base + 4u + 4u * u;
    let xl0 = xb + 16u * c + 4u * (u % 2u);
    var lo = vec4<f32>(0.0);
    var hi = vec4<f32>(0.0);
    var xl = vec4<f32>(0.0);
    var xh = vec4<f32>(0.0);
    for (var i = 0u; i < 4u; i++) {
        let b = bytes4(w[q0 + i]);
        let x0 = xload(xl0 + i);
        let x1 = xload(xl0 + 8u + i);
        lo = fma(vec4<f32>(b & vec4<u32>(0xFu)), x0, lo);
        hi = fma(vec4<f32>(b >> vec4<u32>(4u)), x1, hi);
        xl += x0;
        xh += x1;
    }
    let one = vec4<f32>(1.0);
    return dm.x * s0.x * dot(lo, one) - dm.y * s0.y * dot(xl, one)
         + dm.x * s1.x * dot(hi, one) - dm.y * s1.y * dot(xh, one);
}
#endif
// block_q4_K { f16 d, dmin; u8 scales[12]; u8 qs[128] }: per 32 elements a 6-bit scale and min;
// y = (d * sc) * q - dmin * m
const BS: u32 = 256u;
const BW: u32 = 36u;
const SB: u32 = 32u;
fn sb_params(base: u32, j0: u32) -> vec2<f32> {
    return k_params(base, j0);
}
fn sb_q4(base: u32, j: u32, sp: vec2<f32>) -> vec4<f32> {
    let qbyte = 32u * (j / 64u) + j % 32u;
    let q = (bytes4(w[base + 4u + qbyte / 4u]) >> vec4<u32>(4u * ((j % 64u) / 32u))) & vec4<u32>(0xFu);
    return sp.x * vec4<f32>(q) - sp.y;
}
#endif

#ifdef T_Q5_K
// block_q5_K { f16 d, dmin; u8 scales[12]; u8 qh[32]; u8 qs[128] }: as Q4_K with a fifth bit
// per element in qh
const BS: u32 = 256u;
const BW: u32 = 44u;
const SB: u32 = 32u;
fn sb_params(base: u32, j0: u32) -> vec2<f32> {
    return k_params(base, j0);
}
fn sb_q4(base: u32, j: u32, sp: vec2<f32>) -> vec4<f32> {
    let c = j / 64u;
    let hi = (j % 64u) / 32u;
    let l = j % 32u;
    let lo = (bytes4(w[base + 12u + (32u * c + l) / 4u]) >> vec4<u32>(4u * hi)) & vec4<u32>(0xFu);
    let h = (bytes4(w[base + 4u + l / 4u]) >> vec4<u32>(2u * c + hi)) & vec4<u32>(1u);
    return sp.x * vec4<f32>(lo + 16u * h) - sp.y;
}
#endif

#ifdef T_Q6_K
#ifdef BLOCK_DOT
fn block_dot(base: array<u32, R>, xb: u32) -> array<f32, R> {
    var sum = array<f32, R>();
    // Each row's d and 16 scale bytes, loaded once.
    var h: array<Hdr, R>;
    for (var r = 0u; r < R; r++) {
        h[r] = hdr(base[r]);
    }
    for (var n = 0u; n < 2u; n++) {
        // 128 elements: element l + 32 k (k = 0..3) takes a nibble of ql[l] or ql[l + 32]
        // and bits 2k of qh[l], with scale 16-group l / 16 + 2 k.
        for (var g = 0u; g < 2u; g++) {
            var a = array<array<vec4<f32>, 4>, R>();
            for (var i = 0u; i < 4u; i++) {
                let l4 = 4u * g + i; // word index of l within the 32 bytes
                let xo = xb + 32u * n + l4;
                let x0 = xload(xo);
                let x1 = xload(xo + 8u);
                let x2 = xload(xo + 16u);
                let x3 = xload(xo + 24u);
                for (var r = 0u; r < R; r++) {
                    let q0 = bytes4(w[base[r] + 16u * n + l4]);
                    let q1 = bytes4(w[base[r] + 16u * n + 8u + l4]);
                    let h = bytes4(w[base[r] + 32u + 8u * n + l4]);
                    let v0 = vec4<f32>((q0 & vec4<u32>(0xFu)) | ((h & vec4<u32>(3u)) << vec4<u32>(4u))) - 32.0;
                    let v1 = vec4<f32>((q1 & vec4<u32>(0xFu)) | (((h >> vec4<u32>(2u)) & vec4<u32>(3u)) << vec4<u32>(4u))) - 32.0;
                    let v2 = vec4<f32>((q0 >> vec4<u32>(4u)) | (((h >> vec4<u32>(4u)) & vec4<u32>(3u)) << vec4<u32>(4u))) - 32.0;
                    let v3 = vec4<f32>((q1 >> vec4<u32>(4u)) | ((h >> vec4<u32>(6u)) << vec4<u32>(4u))) - 32.0;
                    a[r][0] = fma(v0, x0, a[r][0]);
                    a[r][1] = fma(v1, x1, a[r][1]);
                    a[r][2] = fma(v2, x2, a[r][2]);
                    a[r][3] = fma(v3, x3, a[r][3]);
                }
            }
            let one = vec4<f32>(1.0);
            for (var r = 0u; r < R; r++) {
                for (var k = 0u; k < 4u; k++) {
                    let s = 8u * n + g + 2u * k;
                    let sc = bitcast<i32>(h[r].scales[s / 4u] << (24u - 8u * (s % 4u))) >> 24u;
                    sum[r] += h[r].d * f32(sc) * dot(a[r][k], one);
                }
            }
        }
    }
    return sum;
}
#endif
// block_q6_K { u8 ql[128]; u8 qh[64]; i8 scales[16]; f16 d; pad }: 4 low bits in ql, 2 high in
// qh; y = (d * sc) * (q - 32)
const BS: u32 = 256u;
const BW: u32 = 53u;
const SB: u32 = 16u;
fn sb_params(base: u32, j0: u32) -> vec2<f32> {
    return sb_params_of(hdr(base), j0);
}

// A Q6_K block's header (HDR): its 16 scale bytes and d.
struct Hdr {
    scales: vec4<u32>,
    d: f32,
}

fn hdr(base: u32) -> Hdr {
    return Hdr(vec4<u32>(w[base + 48u], w[base + 49u], w[base + 50u], w[base + 51u]), f16lo(w[base + 52u]));
}

fn sb_params_of(h: Hdr, j0: u32) -> vec2<f32> {
    let r = j0 % 128u;
    let s = 8u * (j0 / 128u) + (r % 32u) / 16u + 2u * (r / 32u);
    let sc = bitcast<i32>(h.scales[s / 4u] << (24u - 8u * (s % 4u))) >> 24u;
    return vec2<f32>(h.d * f32(sc), 0.0);
}
fn sb_q4(base: u32, j: u32, sp: vec2<f32>) -> vec4<f32> {
    let n = j / 128u;
    let r = j % 128u;
    let quarter = r / 32u;
    let l = r % 32u;
    let qlbyte = 64u * n + l + 32u * (quarter % 2u);
    let lo = (bytes4(w[base + qlbyte / 4u]) >> vec4<u32>(4u * (quarter / 2u))) & vec4<u32>(0xFu);
    let hi = (bytes4(w[base + 32u + (32u * n + l) / 4u]) >> vec4<u32>(2u * quarter)) & vec4<u32>(3u);
    return sp.x * (vec4<f32>(lo | (hi << vec4<u32>(4u))) - 32.0);
}
#endif

// ---- The IQ types and MXFP4 (gpu.Pack pads them as the comments say; the grids are
// gpu/iqgrid.go's). Each element is computed in llama.cpp's dequantize_row_* order.

// lut16 looks the nibbles q up in a table of 16 int8 levels packed four a word (t.x holds
// levels 0-3, lowest byte first): a word picked by selects, the byte by shifts, so no array
// is indexed dynamically (which naga would copy into every invocation's private memory).
fn lut16(t: vec4<u32>, q: vec4<u32>) -> vec4<f32> {
    let odd = (q & vec4<u32>(4u)) != vec4<u32>(0u);
    let lo = select(vec4<u32>(t.x), vec4<u32>(t.y), odd);
    let hi = select(vec4<u32>(t.z), vec4<u32>(t.w), odd);
    let word = select(lo, hi, q >= vec4<u32>(8u));
    let top = word << ((vec4<u32>(3u) - (q & vec4<u32>(3u))) * 8u); // the byte in the top bits
    return vec4<f32>(bitcast<vec4<i32>>(top) >> vec4<u32>(24u));
}

// ggml's kvalues_iq4nl (-127, -104, ..., 113) and kvalues_mxfp4 (0, 1, 2, 3, 4, 6, 8, 12 and
// their negatives), packed for lut16.
const IQ4NL_LEVELS = vec4<u32>(0xBFAD9881u, 0xF6EADDCFu, 0x26190D01u, 0x71594535u);
const MXFP4_LEVELS = vec4<u32>(0x03020100u, 0x0C080604u, 0xFDFEFF00u, 0xF4F8FAFCu);

#ifdef IDOT
// pack_i8 packs four values of -128 .. 127 as int8, the first lowest.
fn pack_i8(v: vec4<i32>) -> u32 {
    let u = bitcast<vec4<u32>>(v) & vec4<u32>(0xFFu);
    return u.x | (u.y << 8u) | (u.z << 16u) | (u.w << 24u);
}

// lut16_word packs, as four int8, the bytes of levels (lut16's table) at the four indices
// (0..15) that q holds one a byte.
fn lut16_word(levels: vec4<u32>, q: u32) -> u32 {
    var out = 0u;
    for (var e = 0u; e < 4u; e++) {
        let i = (q >> (8u * e)) & 0xFu;
        out |= ((levels[i / 4u] >> (8u * (i % 4u))) & 0xFFu) << (8u * e);
    }
    return out;
}
#endif

// ksigns is ggml's ksigns_iq2xs[code]: the 7 sign bits of a code and their parity as the eighth.
fn ksigns(code: u32) -> u32 {
    return code | ((countOneBits(code) & 1u) << 7u);
}

// signed4 negates the elements of v whose bits (0 to 3) of s are set.
fn signed4(v: vec4<f32>, s: u32) -> vec4<f32> {
    return select(v, -v, ((vec4<u32>(s) >> vec4<u32>(0u, 1u, 2u, 3u)) & vec4<u32>(1u)) != vec4<u32>(0u));
}

// grid4 is the four magnitudes of a grid word, one byte each.
fn grid4(g: u32) -> vec4<f32> {
    return vec4<f32>(bytes4(g));
}

#ifdef GRID
// grid_at is word i of the type's lookup grid, which gpu.Pack puts after the blocks of every
// weight buffer (GRID_WORDS words: weightDefines).
fn grid_at(i: u32) -> u32 {
    return w[arrayLength(&w) - GRID_WORDS + i];
}

// iq1_grid4 is elements 4 half .. 4 half + 3 of point idx of IQ1_S's grid (-1, 0 or 1; two
// bits each, plus one, 16 bits a point, two points a word).
fn iq1_grid4(idx: u32, half: u32) -> vec4<f32> {
    let b = grid_at(idx / 2u) >> (16u * (idx % 2u) + 8u * half);
    return vec4<f32>((vec4<u32>(b) >> vec4<u32>(0u, 2u, 4u, 6u)) & vec4<u32>(3u)) - 1.0;
}
#endif

// iq2_scale is the 2-bit types' db for a 4-bit scale s: d * (0.5 + s) * 0.25.
fn iq2_scale(d: f32, s: u32) -> f32 {
    return d * (0.5 + f32(s)) * 0.25;
}

#ifdef T_IQ4_NL
// block_iq4_nl { f16 d; pad; u8 qs[16] }: y = d * kvalues_iq4nl[q]
const BS: u32 = 32u;
const BW: u32 = 5u;
const SB: u32 = 32u;
fn sb_params(base: u32, j0: u32) -> vec2<f32> {
    return vec2<f32>(f16lo(w[base]), 0.0);
}
fn sb_q4(base: u32, j: u32, sp: vec2<f32>) -> vec4<f32> {
    return sp.x * lut16(IQ4NL_LEVELS, nibbles4(base + 1u, j));
}
#endif

#ifdef T_MXFP4
// block_mxfp4 { u8 e; pad[3]; u8 qs[16] }: y = kvalues_mxfp4[q] * 2^(e - 128) (ggml's
// ggml_e8m0_to_fp32_half; subnormal for e < 2)
const BS: u32 = 32u;
const BW: u32 = 5u;
const SB: u32 = 32u;
fn sb_params(base: u32, j0: u32) -> vec2<f32> {
    let e = w[base] & 0xFFu;
    return vec2<f32>(bitcast<f32>(select((e - 1u) << 23u, 0x00200000u << e, e < 2u)), 0.0);
}
fn sb_q4(base: u32, j: u32, sp: vec2<f32>) -> vec4<f32> {
    return lut16(MXFP4_LEVELS, nibbles4(base + 1u, j)) * sp.x;
}
#endif

#ifdef T_IQ4_XS
// block_iq4_xs { f16 d; u16 scales_h; u8 scales_l[4]; u8 qs[128] } (whole words): per 32
// elements a 6-bit scale ls (4 low bits in scales_l, 2 high in scales_h) and 16 quant bytes as
// IQ4_NL's; y = (d * (ls - 32)) * kvalues_iq4nl[q]
const BS: u32 = 256u;
const BW: u32 = 34u;
const SB: u32 = 32u;
fn sb_params(base: u32, j0: u32) -> vec2<f32> {
    let ib = j0 / 32u;
    let h = w[base];
    let ls = ((w[base + 1u] >> (4u * ib)) & 0xFu) | (((h >> (16u + 2u * ib)) & 3u) << 4u);
    return vec2<f32>(f16lo(h) * f32(i32(ls) - 32), 0.0);
}
fn sb_q4(base: u32, j: u32, sp: vec2<f32>) -> vec4<f32> {
    return sp.x * lut16(IQ4NL_LEVELS, nibbles4(base + 2u + 4u * (j / 32u), j % 32u));
}
#endif

#ifdef T_IQ2_XXS
// block_iq2_xxs { f16 d; pad; per 32 elements two words: 4 grid indices (a byte per 8
// elements), then four 7-bit sign codes (per 8 elements, ksigns) and a 4-bit scale s in the
// top bits }: y = (d * (0.5 + s) * 0.25) * grid * sign
const BS: u32 = 256u;
const BW: u32 = 17u;
const SB: u32 = 32u;
fn sb_params(base: u32, j0: u32) -> vec2<f32> {
    return vec2<f32>(iq2_scale(f16lo(w[base]), w[base + 2u + 2u * (j0 / 32u)] >> 28u), 0.0);
}
fn sb_q4(base: u32, j: u32, sp: vec2<f32>) -> vec4<f32> {
    let q = base + 1u + 2u * (j / 32u);
    let l = (j % 32u) / 8u;
    let half = (j / 4u) % 2u;
    let idx = (w[q] >> (8u * l)) & 0xFFu;
    let signs = ksigns((w[q + 1u] >> (7u * l)) & 127u) >> (4u * half);
    return signed4(sp.x * grid4(grid_at(2u * idx + half)), signs);
}
#endif

#ifdef T_IQ2_XS
// block_iq2_xs { f16 d; pad; u16 qs[32]; u8 scales[8] }: per 8 elements a u16 of a 9-bit
// grid index and a 7-bit sign code (ksigns), per 16 elements a 4-bit scale s;
// y = (d * (0.5 + s) * 0.25) * grid * sign
const BS: u32 = 256u;
const BW: u32 = 19u;
const SB: u32 = 16u;
fn sb_params(base: u32, j0: u32) -> vec2<f32> {
    let s = (w[base + 17u + j0 / 128u] >> (4u * ((j0 / 16u) % 8u))) & 0xFu;
    return vec2<f32>(iq2_scale(f16lo(w[base]), s), 0.0);
}
fn sb_q4(base: u32, j: u32, sp: vec2<f32>) -> vec4<f32> {
    let g = j / 8u;
    let q = (w[base + 1u + g / 2u] >> (16u * (g % 2u))) & 0xFFFFu;
    let half = (j / 4u) % 2u;
    return signed4(sp.x * grid4(grid_at(2u * (q & 511u) + half)), ksigns(q >> 9u) >> (4u * half));
}
#endif

#ifdef T_IQ2_S
// block_iq2_s { f16 d; pad; u8 qs[32]; u8 signs[32]; u8 qh[8]; u8 scales[8] }: per 8
// elements a 10-bit grid index (a qs byte, 2 bits of qh) and a sign byte, per 16 elements a
// 4-bit scale s; y = (d * (0.5 + s) * 0.25) * grid * sign
const BS: u32 = 256u;
const BW: u32 = 21u;
const SB: u32 = 16u;
fn sb_params(base: u32, j0: u32) -> vec2<f32> {
    let s = (w[base + 19u + j0 / 128u] >> (4u * ((j0 / 16u) % 8u))) & 0xFu;
    return vec2<f32>(iq2_scale(f16lo(w[base]), s), 0.0);
}
fn sb_q4(base: u32, j: u32, sp: vec2<f32>) -> vec4<f32> {
    let g = j / 8u;
    let half = (j / 4u) % 2u;
    let high = (byte_at(base + 17u, g / 4u) >> (2u * (g % 4u))) & 3u;
    let idx = byte_at(base + 1u, g) | (high << 8u);
    return signed4(sp.x * grid4(grid_at(2u * idx + half)), byte_at(base + 9u, g) >> (4u * half));
}
#endif

#ifdef T_IQ3_XXS
// block_iq3_xxs { f16 d; pad; u8 qs[64]; u32 aux[8] }: per 4 elements an 8-bit grid index,
// per 32 elements a word of four 7-bit sign codes (per 8 elements, ksigns) and a 4-bit scale
// s in the top bits; y = (d * (0.5 + s) * 0.5) * grid * sign
const BS: u32 = 256u;
const BW: u32 = 25u;
const SB: u32 = 32u;
fn sb_params(base: u32, j0: u32) -> vec2<f32> {
    let s = w[base + 17u + j0 / 32u] >> 28u;
    return vec2<f32>(f16lo(w[base]) * (0.5 + f32(s)) * 0.5, 0.0);
}
fn sb_q4(base: u32, j: u32, sp: vec2<f32>) -> vec4<f32> {
    let g = j / 4u;
    let code = (w[base + 17u + j / 32u] >> (7u * ((j % 32u) / 8u))) & 127u;
    return signed4(sp.x * grid4(grid_at(byte_at(base + 1u, g))), ksigns(code) >> (4u * (g % 2u)));
}
#endif

#ifdef T_IQ3_S
// block_iq3_s { f16 d; pad; u8 qs[64]; u8 qh[8]; u8 signs[32]; u8 scales[4] }: per 4
// elements a 9-bit grid index (a qs byte, a bit of qh), a sign bit per element, per 32
// elements a 4-bit scale s; y = (d * (1 + 2 s)) * grid * sign
const BS: u32 = 256u;
const BW: u32 = 28u;
const SB: u32 = 32u;
fn sb_params(base: u32, j0: u32) -> vec2<f32> {
    let s = (w[base + 27u] >> (4u * (j0 / 32u))) & 0xFu;
    return vec2<f32>(f16lo(w[base]) * f32(1u + 2u * s), 0.0);
}
fn sb_q4(base: u32, j: u32, sp: vec2<f32>) -> vec4<f32> {
    let g = j / 4u;
    let high = (byte_at(base + 17u, j / 32u) >> (g % 8u)) & 1u;
    let idx = byte_at(base + 1u, g) | (high << 8u);
    return signed4(sp.x * grid4(grid_at(idx)), byte_at(base + 19u, g / 2u) >> (4u * (g % 2u)));
}
#endif

#ifdef T_IQ1_S
// block_iq1_s { f16 d; pad; u8 qs[32]; u16 qh[8] }: per 8 elements an 11-bit grid index (a
// qs byte, 3 bits of qh), per 32 elements a qh: the high index bits, a 3-bit scale s (bits
// 12-14) and the sign of delta = ±1/8 (bit 15); y = (d * (2 s + 1)) * (grid + delta)
const BS: u32 = 256u;
const BW: u32 = 13u;
const SB: u32 = 32u;
fn iq1s_qh(base: u32, ib: u32) -> u32 {
    return (w[base + 9u + ib / 2u] >> (16u * (ib % 2u))) & 0xFFFFu;
}
fn sb_params(base: u32, j0: u32) -> vec2<f32> {
    let qh = iq1s_qh(base, j0 / 32u);
    return vec2<f32>(f16lo(w[base]) * f32(2u * ((qh >> 12u) & 7u) + 1u), select(0.125, -0.125, qh >= 0x8000u));
}
fn sb_q4(base: u32, j: u32, sp: vec2<f32>) -> vec4<f32> {
    let g = j / 8u;
    let idx = byte_at(base + 1u, g) | (((iq1s_qh(base, g / 4u) >> (3u * (g % 4u))) & 7u) << 8u);
    return sp.x * (iq1_grid4(idx, (j / 4u) % 2u) + sp.y);
}
#endif

#ifdef T_IQ1_M
// block_iq1_m { u8 qs[32]; u8 qh[16]; u16 scales[4] } (whole words): per 8 elements an
// 11-bit grid index (a qs byte, 3 bits of a qh nibble) and the sign of delta = ±1/8 (the
// nibble's top bit), per 16 elements a 3-bit scale s (four a u16, in bits 0-11), d an f16
// made of the four u16s' top nibbles; y = (d * (2 s + 1)) * (grid + delta)
const BS: u32 = 256u;
const BW: u32 = 14u;
const SB: u32 = 16u;
fn sb_params(base: u32, j0: u32) -> vec2<f32> {
    let s0 = w[base + 12u];
    let s1 = w[base + 13u];
    let d = f16lo(((s0 >> 12u) & 0xFu) | ((s0 >> 24u) & 0xF0u) | ((s1 >> 4u) & 0xF00u) | ((s1 >> 16u) & 0xF000u));
    let ib = j0 / 32u;
    let sc = select(s0, s1, ib >= 4u) >> (16u * ((ib / 2u) % 2u)); // scales[ib / 2]
    let s = (sc >> (6u * (ib % 2u) + 3u * ((j0 / 16u) % 2u))) & 7u;
    return vec2<f32>(d * f32(2u * s + 1u), 0.0);
}
fn sb_q4(base: u32, j: u32, sp: vec2<f32>) -> vec4<f32> {
    let g = j / 8u;
    let nib = byte_at(base + 8u, g / 2u) >> (4u * (g % 2u));
    let idx = byte_at(base, g) | ((nib & 7u) << 8u);
    return sp.x * (iq1_grid4(idx, (j / 4u) % 2u) + select(0.125, -0.125, (nib & 8u) != 0u));
}
#endif

fn dq4(base: u32, j: u32) -> vec4<f32> {
    return sb_q4(base, j, sb_params(base, j));
}

// With BLOCK_DOT, Q4_K and Q6_K also provide block_dot(base, xb): the dot products of the blocks
// starting at words base[0..R] (R rows) with the activations x[xb..] (vec4 index), ordered for
// CPU adapters: each activation loaded once for the R rows, each quant word once for all the
// elements it holds, scales applied to partial sums. The including kernel provides the constant
// R and xload(i) for the vec4 at index i.

#ifdef IDOT
#ifdef K_SCALES
// k_idot is idot_block (see T_Q8_0's) of a Q4_K or Q5_K block against a packed Q8_K block: per
// 32-element sub-block its 6-bit scale times the integer sum, and its minimum times the
// activations' sum, as ggml_vec_dot_q4_K_q8_K: d·d_x·Σ sc·Σq·q_x − dmin·d_x·Σ m·Σq_x. The
// quant bytes start at word qs: group c's 32 hold elements 64c.. in their low nibbles and
// 64c + 32.. in their high ones. Q5_K's fifth bits start at word qh (0: none), bit 2c (low
// nibbles) or 2c + 1 (high ones) of byte l.
fn k_idot(base: u32, at: u32, qs: u32, qh: u32) -> f32 {
    var sums = vec2<i32>(0);
    for (var c = 0u; c < 4u; c++) {
        sums += k_isums(base, at, qs, qh, c);
    }
    let dm = unpack2x16float(w[base]);
    let dx = bitcast<f32>(x[at]);
    return dm.x * dx * f32(sums.x) - dm.y * dx * f32(sums.y);
}

// k_isums is group c's (elements 64c .. 64c + 63) part of k_idot's two integer sums: the
// scales times the quants' sums, and the minimums times the activations' sums.
fn k_isums(base: u32, at: u32, qs: u32, qh: u32, c: u32) -> vec2<i32> {
    var lo = 0;
    var hi = 0;
    var xl = 0;
    var xh = 0;
    for (var i = 0u; i < 8u; i++) {
        let q = w[qs + 8u * c + i];
        var b5 = vec2<u32>(0u);
        if (qh != 0u) {
            let hb = w[qh + i];
            b5 = vec2<u32>((hb >> (2u * c)) & 0x01010101u, (hb >> (2u * c + 1u)) & 0x01010101u) << vec2<u32>(4u);
        }
        let x0 = x[at + 1u + 16u * c + i];
        let x1 = x[at + 9u + 16u * c + i];
        lo += dot4I8Packed((q & 0x0F0F0F0Fu) | b5.x, x0);
        hi += dot4I8Packed(((q >> 4u) & 0x0F0F0F0Fu) | b5.y, x1);
        xl += dot4I8Packed(0x01010101u, x0);
        xh += dot4I8Packed(0x01010101u, x1);
    }
    let sw = vec3<u32>(w[base + 1u], w[base + 2u], w[base + 3u]);
    let s0 = vec2<i32>(scale_min_of(sw, 2u * c));
    let s1 = vec2<i32>(scale_min_of(sw, 2u * c + 1u));
    return vec2<i32>(s0.x * lo + s1.x * hi, s0.y * xl + s1.y * xh);
}
#endif

#ifdef T_Q4_K
fn idot_block(base: u32, at: u32, xsum: f32) -> f32 {
    return k_idot(base, at, base + 4u, 0u);
}
#endif

#ifdef T_Q6_K
// idot_block (see T_Q8_0's) of a Q6_K block against a packed Q8_K block: each 16-element
// group's int8 scale times its integer sum, the offset 32 off as 32 times the activations' sum
// (ggml_vec_dot_q6_K_q8_K). Of each half n, ql word i (bytes 4i..) and i + 8 hold the low
// nibbles of elements 128n + 4i.. and + 32, their high nibbles + 64 and + 96; qh word i
// their two high bits, in bit pairs 0, 2, 4, 6.
fn idot_block(base: u32, at: u32, xsum: f32) -> f32 {
    let h = hdr(base);
    var sumi = 0;
    for (var n = 0u; n < 2u; n++) {
        for (var i = 0u; i < 8u; i++) {
            let w1 = w[base + 16u * n + i];
            let w2 = w[base + 16u * n + 8u + i];
            let hb = w[base + 32u + 8u * n + i];
            let u = array<u32, 4>(
                (w1 & 0x0F0F0F0Fu) | ((hb & 0x03030303u) << 4u),
                (w2 & 0x0F0F0F0Fu) | (((hb >> 2u) & 0x03030303u) << 4u),
                ((w1 >> 4u) & 0x0F0F0F0Fu) | (((hb >> 4u) & 0x03030303u) << 4u),
                ((w2 >> 4u) & 0x0F0F0F0Fu) | (((hb >> 6u) & 0x03030303u) << 4u));
            for (var k = 0u; k < 4u; k++) {
                let e = 128u * n + 32u * k + 4u * i; // the group's first element
                let xw = x[at + 1u + e / 4u];
                let sc = (bitcast<i32>(h.scales[e / 64u] >> (8u * (e / 16u % 4u))) << 24u) >> 24u;
                sumi += sc * (dot4I8Packed(u[k], xw) - 32 * dot4I8Packed(0x01010101u, xw));
            }
        }
    }
    return h.d * bitcast<f32>(x[at]) * f32(sumi);
}
#endif
#ifdef T_Q5_K
fn idot_block(base: u32, at: u32, xsum: f32) -> f32 {
    return k_idot(base, at, base + 12u, base + 4u);
}
#endif

#ifdef T_Q2_K
// idot_block (see T_Q4_K's) of a Q2_K block: 2-bit quants, per 16 elements a 4-bit scale and
// a 4-bit minimum (ggml_vec_dot_q2_K_q8_K). Element 128n + 32jj + 16half + l is bits 2jj of
// quant byte 32n + 16half + l, sub-block 8n + 2jj + half.
fn idot_block(base: u32, at: u32, xsum: f32) -> f32 {
    var sumi = 0;
    var mins = 0;
    for (var n = 0u; n < 2u; n++) {
        for (var jj = 0u; jj < 4u; jj++) {
            for (var half = 0u; half < 2u; half++) {
                let s = 8u * n + 2u * jj + half;
                let sc = (w[base + s / 4u] >> (8u * (s % 4u))) & 0xFFu;
                var qs = 0;
                var xs = 0;
                for (var i = 0u; i < 4u; i++) {
                    let q = (w[base + 4u + 8u * n + 4u * half + i] >> (2u * jj)) & 0x03030303u;
                    let xw = x[at + 1u + 32u * n + 8u * jj + 4u * half + i];
                    qs += dot4I8Packed(q, xw);
                    xs += dot4I8Packed(0x01010101u, xw);
                }
                sumi += i32(sc & 0xFu) * qs;
                mins += i32(sc >> 4u) * xs;
            }
        }
    }
    let dm = unpack2x16float(w[base + 20u]);
    let dx = bitcast<f32>(x[at]);
    return dm.x * dx * f32(sumi) - dm.y * dx * f32(mins);
}
#endif

#ifdef T_Q3_K
// idot_block (see T_Q4_K's) of a Q3_K block: 2 low bits in qs and the third in hmask make
// u = q + 4h, the value u - 4; per 16 elements a 6-bit signed scale (ggml_vec_dot_q3_K_q8_K).
fn idot_block(base: u32, at: u32, xsum: f32) -> f32 {
    var sumi = 0;
    for (var n = 0u; n < 2u; n++) {
        for (var jj = 0u; jj < 4u; jj++) {
            for (var i = 0u; i < 8u; i++) {
                let q = (w[base + 8u + 8u * n + i] >> (2u * jj)) & 0x03030303u;
                let hb = (w[base + i] >> (4u * n + jj)) & 0x01010101u;
                let xw = x[at + 1u + 32u * n + 8u * jj + i];
                let s = 8u * n + 2u * jj + i / 4u;
                let g = s / 4u;
                let b = s % 4u;
                let low = (w[base + 24u + g % 2u] >> (8u * b + 4u * (g / 2u))) & 0xFu;
                let top = (w[base + 26u] >> (8u * b + 2u * g)) & 3u;
                let sc = i32(low | (top << 4u)) - 32;
                sumi += sc * (dot4I8Packed(q | (hb << 2u), xw) - 4 * dot4I8Packed(0x01010101u, xw));
            }
        }
    }
    return f16lo(w[base + 27u]) * bitcast<f32>(x[at]) * f32(sumi);
}
#endif

#ifdef T_IQ4_NL
// idot_block (see T_Q4_0's) of an IQ4_NL block: each nibble looked up in kvalues_iq4nl (int8).
fn idot_block(base: u32, at: u32, xsum: f32) -> f32 {
    return f16lo(w[base]) * bitcast<f32>(x[at]) * f32(lut_idot(IQ4NL_LEVELS, base + 1u, at + 1u));
}
#endif

#ifdef T_MXFP4
// idot_block (see T_IQ4_NL's) of an MXFP4 block: kvalues_mxfp4 (doubled, int8) times the
// halved power of two, as ggml_vec_dot_mxfp4_q8_0.
fn idot_block(base: u32, at: u32, xsum: f32) -> f32 {
    return sb_params(base, 0u).x * bitcast<f32>(x[at]) * f32(lut_idot(MXFP4_LEVELS, base + 1u, at + 1u));
}
#endif

#ifdef T_IQ4_XS
// idot_block (see T_IQ4_NL's and T_Q4_K's) of an IQ4_XS block against a packed Q8_K block:
// per 32-element sub-block its 6-bit scale less 32 times the sub-block's integer sum.
fn idot_block(base: u32, at: u32, xsum: f32) -> f32 {
    let h = w[base];
    var sumi = 0;
    for (var ib = 0u; ib < 8u; ib++) {
        let ls = ((w[base + 1u] >> (4u * ib)) & 0xFu) | (((h >> (16u + 2u * ib)) & 3u) << 4u);
        sumi += (i32(ls) - 32) * lut_idot(IQ4NL_LEVELS, base + 2u + 4u * ib, at + 1u + 8u * ib);
    }
    return f16lo(h) * bitcast<f32>(x[at]) * f32(sumi);
}
#endif

#endif

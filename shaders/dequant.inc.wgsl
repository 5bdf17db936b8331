// Block decoders shared by the weight kernels. The including kernel declares `w: array<u32>`
// holding the weight in gpu.Pack's layout: ggml's blocks, each padded to whole u32 words
// (Q4_0, Q5_0, Q8_0: two bytes after the f16 scale; Q3_K, Q6_K: two bytes at the end) so every
// field is word-aligned. One define T_<TYPE> selects the type and provides:
//   BS   elements per block
//   BW   u32 words per packed block
//   dq4(base, j): elements j..j+3 (j a multiple of 4) of the block starting at word base,
//                 dequantized exactly as llama.cpp's dequantize_row_* computes them.
// Types whose blocks hold several sub-blocks (Q4_K, Q5_K, Q6_K; the define HDR) also provide
// Hdr, hdr(base) and sb_params_of(h, j0): the block's scale words loaded once, then each
// sub-block's parameters from them, as sb_params(base, j0) gives them.

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
#endif

// nibbles4 is elements j..j+3 of a 32-element block whose 16 quant bytes start at word qw:
// element l < 16 is the low nibble of byte l, 16 + l the high nibble.
fn nibbles4(qw: u32, j: u32) -> vec4<u32> {
    return (bytes4(w[qw + (j % 16u) / 4u]) >> vec4<u32>(select(0u, 4u, j >= 16u))) & vec4<u32>(0xFu);
}

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

fn dq4(base: u32, j: u32) -> vec4<f32> {
    return sb_q4(base, j, sb_params(base, j));
}

// With BLOCK_DOT, Q4_K and Q6_K also provide block_dot(base, xb): the dot products of the blocks
// starting at words base[0..R] (R rows) with the activations x[xb..] (vec4 index), ordered for
// CPU adapters: each activation loaded once for the R rows, each quant word once for all the
// elements it holds, scales applied to partial sums. The including kernel provides the constant
// R and xload(i) for the vec4 at index i.

// A weight's 32-element blocks as GPUs' integer-dot tiles take them (matmul_q8.wgsl): eight
// words of int8 quants (element 4k + i in byte i of word k) and what turns their integer
// products with Q8 activations into floats: value = d[half] * q + m[quarter], so that
//   Σ value·x = d_x · (d.x·Σ_lo q·q_x + d.y·Σ_hi q·q_x + Σ_quarter m·Σ q_x),
// halves of 16 elements, quarters of 8 (the finest any type's minimum or offset varies:
// IQ1_M's delta). q8_block(base, j0) decodes elements j0 .. j0 + 31 of the block at word base.
// The superblock types take super_lanes.inc's decoders (SUPER_TYPE).

struct Q8Block {
    q: array<u32, 8>,
    d: vec2<f32>,
    m: vec4<f32>,
}

#ifdef SUPER_TYPE
fn q8_block(base: u32, j0: u32) -> Q8Block {
    var b: Q8Block;
    for (var k = 0u; k < 8u; k++) {
        b.q[k] = pack_i8(sup_q(base, j0 + 4u * k));
    }
    let d = sup_d(base);
    b.d = d * SUP_TAIL * vec2<f32>(f32(sup_scale(base, j0)), f32(sup_scale(base, j0 + 16u)));
    b.m = vec4<f32>(0.0);
#ifdef SUP_COEF
    let c = vec2<f32>(f32(sup_coef(base, j0 / 16u)), f32(sup_coef(base, j0 / 16u + 1u)));
#ifdef T_Q6_K
    let m = -32.0 * d * c; // its quants unsigned (sup_q): the offset 32 off
#else
#ifdef T_IQ1_S
    let m = 0.125 * d * c; // the delta's sign times the scale
#else
    let m = -sup_dmin(base) * c; // the minimums (Q2_K, Q4_K, Q5_K)
#endif
#endif
    b.m = vec4<f32>(m.x, m.x, m.y, m.y);
#endif
#ifdef T_IQ1_M
    for (var h = 0u; h < 4u; h++) {
        b.m[h] = 0.125 * d * f32(sup_delta(base, j0 + 8u * h));
    }
#endif
    return b;
}
#else
// nibble_words is the 16 quant bytes from word qs as eight words of 4-bit values (elements
// 0-15 the low nibbles, 16-31 the high ones), each with its fifth bit from qh (bit e for
// element e; 0 for the 4-bit types).
fn nibble_words(qs: u32, qh: u32) -> array<u32, 8> {
    var q: array<u32, 8>;
    for (var k = 0u; k < 4u; k++) {
        let v = w[qs + k];
        q[k] = (v & 0x0F0F0F0Fu) | spread5(qh >> (4u * k));
        q[4u + k] = ((v >> 4u) & 0x0F0F0F0Fu) | spread5(qh >> (16u + 4u * k));
    }
    return q;
}

fn q8_block(base: u32, j0: u32) -> Q8Block {
    var b: Q8Block;
#ifdef T_Q8_0
    for (var k = 0u; k < 8u; k++) {
        b.q[k] = w[base + 1u + k];
    }
    b.d = vec2<f32>(f16lo(w[base]));
    b.m = vec4<f32>(0.0);
#endif
#ifdef T_Q4_0
    b.q = nibble_words(base + 1u, 0u);
    b.d = vec2<f32>(f16lo(w[base]));
    b.m = vec4<f32>(-8.0 * b.d.x);
#endif
#ifdef T_Q4_1
    b.q = nibble_words(base + 1u, 0u);
    let dm = unpack2x16float(w[base]);
    b.d = vec2<f32>(dm.x);
    b.m = vec4<f32>(dm.y);
#endif
#ifdef T_Q5_0
    b.q = nibble_words(base + 2u, w[base + 1u]);
    b.d = vec2<f32>(f16lo(w[base]));
    b.m = vec4<f32>(-16.0 * b.d.x);
#endif
#ifdef T_Q5_1
    b.q = nibble_words(base + 2u, w[base + 1u]);
    let dm = unpack2x16float(w[base]);
    b.d = vec2<f32>(dm.x);
    b.m = vec4<f32>(dm.y);
#endif
#ifdef T_IQ4_NL
    let nib = nibble_words(base + 1u, 0u);
    for (var k = 0u; k < 8u; k++) {
        b.q[k] = lut16_word(IQ4NL_LEVELS, nib[k]);
    }
    b.d = vec2<f32>(f16lo(w[base]));
    b.m = vec4<f32>(0.0);
#endif
#ifdef T_MXFP4
    let nib = nibble_words(base + 1u, 0u);
    for (var k = 0u; k < 8u; k++) {
        b.q[k] = lut16_word(MXFP4_LEVELS, nib[k]);
    }
    b.d = vec2<f32>(sb_params(base, 0u).x);
    b.m = vec4<f32>(0.0);
#endif
    return b;
}
#endif

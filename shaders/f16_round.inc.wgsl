// f32 -> f16 rounding to nearest, ties to even, as ggml's GGML_FP32_TO_FP16 (F16C) rounds.
// WGSL leaves pack2x16float's rounding to the driver, and drivers differ: Mesa 25's lavapipe
// rounds toward zero, which moves every f16 activation, KV row and Q8 block scale by up to an
// ulp and takes greedy output off llama.cpp's. So the half's bits are computed here.

fn f16_bits(v: f32) -> u32 {
    let b = bitcast<u32>(v);
    let sign = (b >> 16u) & 0x8000u;
    let a = b & 0x7FFFFFFFu;
    if (a > 0x7F800000u) {
        return sign | 0x7E00u; // NaN stays a (quiet) NaN
    }
    if (a >= 0x477FF000u) {
        return sign | 0x7C00u; // 65520 and above round to infinity
    }
    if (a < 0x38800000u) {
        // Below the smallest normal half (2^-14): a multiple of 2^-24. Scaling by 2^24 is
        // exact, and WGSL's round() breaks ties to even.
        return sign | u32(round(bitcast<f32>(a) * 16777216.0));
    }
    // Normal: drop 13 mantissa bits rounding to nearest even (a carry moves into the
    // exponent, as it should), then rebias the exponent from 127 to 15.
    let r = a + 0xFFFu + ((a >> 13u) & 1u);
    return sign | ((r - 0x38000000u) >> 13u);
}

// pack_f16 packs two values as pack2x16float does, rounding to nearest even.
fn pack_f16(v: vec2<f32>) -> u32 {
    return f16_bits(v.x) | (f16_bits(v.y) << 16u);
}

// f16_round is v rounded to the nearest half (ties to even), back in f32.
fn f16_round(v: f32) -> f32 {
    return unpack2x16float(f16_bits(v)).x;
}

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

// f16_round4 is v rounded to the nearest half (ties to even), back in f32, without branches
// (CPU adapters run both sides of a branch that their SIMD lanes take differently): a normal
// half is the f32 with 13 mantissa bits rounded off, a subnormal one a multiple of 2^-24.
fn f16_round4(v: vec4<f32>) -> vec4<f32> {
    let b = bitcast<vec4<u32>>(v);
    let a = b & vec4<u32>(0x7FFFFFFFu);
    let sign = b & vec4<u32>(0x80000000u);
    let normal = sign | ((a + 0xFFFu + ((a >> vec4<u32>(13u)) & vec4<u32>(1u))) & vec4<u32>(0xFFFFE000u));
    let sub = sign | bitcast<vec4<u32>>(round(bitcast<vec4<f32>>(a) * 16777216.0) * 5.9604644775390625e-8);
    var r = select(normal, sub, a < vec4<u32>(0x38800000u));
    r = select(r, sign | vec4<u32>(0x7F800000u), a >= vec4<u32>(0x477FF000u)); // 65520 and up: infinity
    return select(bitcast<vec4<f32>>(r), v, a > vec4<u32>(0x7F800000u));      // NaN stays NaN
}

// f16_round is f16_round4 of one value.
fn f16_round(v: f32) -> f32 {
    return f16_round4(vec4<f32>(v)).x;
}

// bf16_round rounds to nearest even on the 16 dropped bits, as ggml's fp32_to_bf16 does.
fn bf16_round(v: f32) -> f32 {
    let b = bitcast<u32>(v);
    return bitcast<f32>((b + 0x7FFFu + ((b >> 16u) & 1u)) & 0xFFFF0000u);
}

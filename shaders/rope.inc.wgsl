// RoPE angles shared by the kernels that rotate keys. The including kernel declares Params `p`
// (with n_rot, freq_base, freq_scale, ext_factor, corr_lo, corr_hi) and, with FACTORS, the
// binding `factors` (one divisor per rotated pair).

// rope_theta is the unscaled angle of frequency i at position at.
fn rope_theta(at: f32, i: u32) -> f32 {
    let th = at * pow(p.freq_base, -f32(2u * i) / f32(p.n_rot));
#ifdef FACTORS
    return th / factors[i];
#else
    return th;
#endif
}

// turn_reduce returns th less the nearest multiple of 2 pi, in [-pi, pi]. GPUs' sin and cos
// reduce large angles with one f32 multiply by 1 / (2 pi), off by 1e-3 radians at position
// 8000; here 2 pi is split (Cody-Waite) into 6.28125, whose multiples are exact below 2^16
// turns, and the remainder, so the reduction loses no more than the angle's own rounding.
fn turn_reduce(th: f32) -> f32 {
    let k = round(th * 0.15915494);
    return (th - k * 6.28125) - k * 1.9353072e-3;
}

// rope_turn turns v by the angle of frequency i at position at, as ggml's rope_yarn does (with
// ext_factor 0 it is plain, linearly scaled RoPE), scaling by attn_factor. The angle is linear
// in the position, so turning by a position difference moves a rotated key to a new position.
fn rope_turn(v: vec2<f32>, at: f32, i: u32, attn_factor: f32) -> vec2<f32> {
    let extrap = rope_theta(at, i);
    var th = p.freq_scale * extrap;
    var mscale = attn_factor;
    if (p.ext_factor != 0.0) {
        let y = (f32(i) - p.corr_lo) / max(0.001, p.corr_hi - p.corr_lo);
        let ramp = (1.0 - min(1.0, max(0.0, y))) * p.ext_factor;
        th = th * (1.0 - ramp) + extrap * ramp;
        mscale *= 1.0 + 0.1 * log(1.0 / p.freq_scale);
    }
    let r = turn_reduce(th);
    let c = cos(r) * mscale;
    let s = sin(r) * mscale;
    return vec2<f32>(v.x * c - v.y * s, v.x * s + v.y * c);
}

// RoPE angles shared by the kernels that rotate keys. The including kernel declares Params `p`
// (with n_rot, freq_base, freq_scale, ext_factor, corr_lo, corr_hi, theta_scale) and, with
// FACTORS, the binding `factors` (one divisor per rotated pair). With CPU_MATH it sets
// ns_zero and the turn is ggml's own arithmetic (rope_turn_ggml).

//#include ggml_math.inc

#ifdef MROPE
// mrope_section is the position component (0..3) pair i turns by: ggml's sector of i.
fn mrope_section(i: u32) -> u32 {
    let s = i % (p.sect0 + p.sect1 + p.sect2 + p.sect3);
#ifdef IMROPE
    // IMROPE (with MROPE) is ggml's interleaved M-RoPE (GGML_ROPE_TYPE_IMROPE: Qwen3-VL,
    // qwen35): the sectors cycle t, h, w, each component over its first 3 sect of them, as
    // ggml_mrope_cache_init tests them (h, then w, then t; e for the rest).
    if (s % 3u == 1u && s < 3u * p.sect1) {
        return 1u;
    }
    if (s % 3u == 2u && s < 3u * p.sect2) {
        return 2u;
    }
    if (s % 3u == 0u && s < 3u * p.sect0) {
        return 0u;
    }
    return 3u;
#else
    if (s < p.sect0) {
        return 0u;
    }
    if (s < p.sect0 + p.sect1) {
        return 1u;
    }
    if (s < p.sect0 + p.sect1 + p.sect2) {
        return 2u;
    }
    return 3u;
#endif
}

// mrope_exponent is pair i's frequency index and the dimensions its angles spread over: i
// and n_rot, or in vision mode i from its section's start and n_rot / 2.
fn mrope_exponent(i: u32) -> vec2<f32> {
    if (p.mrope_vision == 0u) {
        return vec2<f32>(f32(i), f32(p.n_rot));
    }
    let s = i % (p.sect0 + p.sect1 + p.sect2 + p.sect3);
    var start = 0u;
    if (s >= p.sect0 + p.sect1 + p.sect2) {
        start = p.sect0 + p.sect1 + p.sect2;
    } else if (s >= p.sect0 + p.sect1) {
        start = p.sect0 + p.sect1;
    } else if (s >= p.sect0) {
        start = p.sect0;
    }
    return vec2<f32>(f32(s - start), f32(p.n_rot / 2u));
}
#endif

// rope_theta is the unscaled angle of frequency i at position at.
fn rope_theta(at: f32, i: u32) -> f32 {
#ifdef MROPE
    let e = mrope_exponent(i);
    let th = at * pow(p.freq_base, -2.0 * e.x / e.y);
#else
    let th = at * pow(p.freq_base, -f32(2u * i) / f32(p.n_rot));
#endif
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
#ifdef CPU_MATH
#ifdef MROPE
    if (p.mrope_vision == 0u) {
        return rope_turn_ggml(v, at, i, attn_factor);
    }
#else
    return rope_turn_ggml(v, at, i, attn_factor);
#endif
#endif
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

#ifdef CPU_MATH
// rope_turn_ggml is rope_turn as ggml's CPU rope computes it: the angle from the position
// multiplied by theta_scale (the host's powf(freq_base, -2 / n_rot)) once per pair before i,
// each product rounded (ggml_rope_cache_init's theta *= theta_scale), divided by the pair's
// factor; sinf and cosf (sincos_c); and the turn's x0 cos - x1 sin and x0 sin + x1 cos with
// their first products fused, as GCC contracts them.
fn rope_turn_ggml(v: vec2<f32>, at: f32, i: u32, attn_factor: f32) -> vec2<f32> {
    var extrap = at;
    for (var j = 0u; j < i; j++) {
        extrap = ns_keep(extrap * p.theta_scale);
    }
#ifdef FACTORS
    extrap = extrap / factors[i];
#endif
    var th = ns_keep(p.freq_scale * extrap);
    var mscale = attn_factor;
    if (p.ext_factor != 0.0) {
        let y = (f32(i) - p.corr_lo) / max(0.001, p.corr_hi - p.corr_lo);
        let ramp = (1.0 - min(1.0, max(0.0, y))) * p.ext_factor;
        th = fma1(th, 1.0 - ramp, ns_keep(extrap * ramp));
        mscale *= fma1(0.1, log_c(1.0 / p.freq_scale), 1.0);
    }
    let sc = sincos_c(th);
    let c = ns_keep(sc.y * mscale);
    let s = ns_keep(sc.x * mscale);
    return vec2<f32>(fma1(v.x, c, -ns_keep(v.y * s)), fma1(v.x, s, ns_keep(v.y * c)));
}
#endif

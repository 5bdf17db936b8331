// llama.cpp's CPU arithmetic for exp and the functions made of it, reproduced on CPU adapters
// (kernels built with CPU_MATH), so a model's activations come out as llama.cpp's bit for bit
// instead of some ulps apart (lavapipe's exp differs from the correctly rounded value on 83% of
// inputs, by up to 18 ulps, and the 8-bit rounding of the next product's input amplifies such
// differences). llama.cpp takes exp two ways (x86 with AVX2 and FMA):
//   exp_v, ggml_v_expf: its vector exp (silu, swiglu and soft_max in runs of 8), a polynomial
//          in f32 with fused multiply-adds, reproduced operation by operation;
//   exp_c, the C library's expf (everything scalar: flash attention, sigmoid, the delta
//          rule's gates): glibc's is correctly rounded in all but the rarest cases, so this
//          is exp computed to about 45 bits in pairs of floats and rounded once; log_c
//          and sincos_c likewise for logf (softplus) and sinf and cosf.
// And fma1 and fma4: a fused multiply-add rounded once, which GCC makes of llama.cpp's scalar
// a * b + c (ggml's CPU code builds as GNU C/C++, where contraction is on) as its vector code
// does explicitly. Without CPU_MATH (GPUs) all are WGSL's exp and fma. A kernel that calls these sets norm_sum.inc's
// ns_zero from its uniforms first.

//#include norm_sum.inc

// keep4 is ns_keep of a vector.
fn keep4(v: vec4<f32>) -> vec4<f32> {
    return bitcast<vec4<f32>>(bitcast<vec4<u32>>(v) ^ vec4<u32>(ns_zero));
}

#ifdef CPU_MATH
// fma1 is a * b + c rounded once (x86's vfmadd): Dekker's exact product p + e (Veltkamp's
// splits, norm_sum.inc's ns_split), then the exact sum of c, p and e rounded once (sum3).
fn fma1(a: f32, b: f32, c: f32) -> f32 {
    let as_ = ns_split(a);
    let bs = ns_split(b);
    let p = ns_keep(a * b);
    let e = ns_keep(ns_keep(ns_keep(ns_keep(as_.x * bs.x) - p) + ns_keep(as_.x * bs.y)) + ns_keep(as_.y * bs.x)) + ns_keep(as_.y * bs.y);
    return sum3(vec4<f32>(c), vec4<f32>(p), vec4<f32>(e)).x;
}

// sum3 is c + p + e rounded once: Knuth's exact sums give r + w + v with r the sum rounded
// and w, v what it dropped; w + v is then rounded to odd (its last bit set where it is
// inexact), so that r + it is never a false tie and rounds as the exact sum does (Boldo and
// Melquiond's round-to-odd). (A plain s + (t + e) rounds twice: on lavapipe it gave one of a
// 512x128 F32 product's 4608 sums an ulp off, gpu.TestMatMulF32LaneOrder.)
fn sum3(c: vec4<f32>, p: vec4<f32>, e: vec4<f32>) -> vec4<f32> {
    let st = two_sum4(c, p);
    let uv = two_sum4(st[1], e);
    let rw = two_sum4(st[0], uv[0]);
    let zz = two_sum4(rw[1], uv[1]);
    let zb = bitcast<vec4<u32>>(zz[0]);
    // Toward the dropped part: away from zero where it has z's sign, else toward zero.
    let step = select(vec4<u32>(0xFFFFFFFFu), vec4<u32>(1u), (zz[1] > vec4<f32>(0.0)) == (zz[0] > vec4<f32>(0.0)));
    let odd = select(zb, zb + step, (zz[1] != vec4<f32>(0.0)) & ((zb & vec4<u32>(1u)) == vec4<u32>(0u)));
    return rw[0] + keep4(bitcast<vec4<f32>>(odd));
}

// two_sum4 is Knuth's exact sum of each component: the rounded sum and its error.
fn two_sum4(a: vec4<f32>, b: vec4<f32>) -> array<vec4<f32>, 2> {
    let s = keep4(a + b);
    let bb = keep4(s - a);
    return array<vec4<f32>, 2>(s, keep4(a - keep4(s - bb)) + keep4(b - bb));
}

// split4 is ns_split of each component.
fn split4(a: vec4<f32>) -> array<vec4<f32>, 2> {
    let c = keep4(4097.0 * a);
    let h = keep4(c - keep4(c - a));
    return array<vec4<f32>, 2>(h, keep4(a - h));
}

// fma4 is fma1 of each component.
fn fma4(a: vec4<f32>, b: vec4<f32>, c: vec4<f32>) -> vec4<f32> {
    let as_ = split4(a);
    let bs = split4(b);
    let p = keep4(a * b);
    let e = keep4(keep4(keep4(keep4(as_[0] * bs[0]) - p) + keep4(as_[0] * bs[1])) + keep4(as_[1] * bs[0])) + keep4(as_[1] * bs[1]);
    return sum3(c, p, e);
}

// exp_v is ggml_v_expf (ggml-cpu/vec.h, the AVX2 variant) of one lane.
fn exp_v(x: f32) -> f32 {
    let r = 12582912.0; // 0x1.8p23
    let z = ns_keep(fma1(x, 1.4426950216293335, r)); // 0x1.715476p+0
    let n = ns_keep(z - r);
    let b = fma1(-n, 1.428606765330187e-06, fma1(-n, 0.693145751953125, x)); // 0x1.7f7d1cp-20, 0x1.62e4p-1
    let e = bitcast<u32>(z) << 23u;
    let k = bitcast<f32>(e + bitcast<u32>(1.0));
    let u = ns_keep(b * b);
    let j = fma1(fma1(fma1(0.008247390389442444, b, 0.04189976677298546), u,
                      fma1(0.16668395698070526, b, 0.4999912679195404)),
                 u, ns_keep(0.9999994039535522 * b)); // 0x1.0e4020p-7, 0x1.573e2ep-5, 0x1.555e66p-3, 0x1.fffdb6p-2, 0x1.ffffecp-1
    // fma(j, k, k) and fma(s2, j, s2) below: k and s2 are powers of two (bare exponents), so
    // each is (j + 1) rounded once and scaled exactly (Veltkamp's split of k could overflow).
    if (abs(n) <= 126.0) {
        if (n == -126.0) { // at the subnormal range: (j + 1) 2^-126 rounded once
            let j1 = two_sum(j, 1.0);
            return scale2(j1.x, j1.y, -126);
        }
        return ns_keep(j + 1.0) * k;
    }
    let g = select(0u, 0x82000000u, n <= 0.0);
    let s1 = bitcast<f32>(g + 0x7f000000u);
    let s2 = bitcast<f32>(e - g);
    if (abs(n) > 192.0) {
        return ns_keep(s1 * s1);
    }
    return ns_keep(ns_keep(ns_keep(j + 1.0) * s2) * s1);
}

// EXP_T[i] is 2^(i/32) as a pair of floats (hi + lo).
const EXP_T = array<vec2<f32>, 32>(
    vec2<f32>(1.0, 0.0), vec2<f32>(1.0218971967697144, -4.811559861650494e-08),
    vec2<f32>(1.0442737340927124, 4.8334701574503924e-08), vec2<f32>(1.0671404600143433, -5.9337519786595294e-08),
    vec2<f32>(1.0905077457427979, -1.3077539939843064e-08), vec2<f32>(1.114386796951294, -5.435540018083884e-08),
    vec2<f32>(1.1387885808944702, 5.386222312608879e-08), vec2<f32>(1.1637248992919922, -4.051441493402308e-08),
    vec2<f32>(1.1892070770263672, 3.797635272917432e-08), vec2<f32>(1.215247392654419, -3.267394887984665e-08),
    vec2<f32>(1.2418577671051025, 4.496838101886169e-08), vec2<f32>(1.2690509557724, 1.419333317542737e-09),
    vec2<f32>(1.2968395948410034, -4.018999533172973e-08), vec2<f32>(1.3252366781234741, -3.496373324196611e-08),
    vec2<f32>(1.3542555570602417, -1.0123349269974824e-08), vec2<f32>(1.3839099407196045, -5.875577357983275e-08),
    vec2<f32>(1.4142135381698608, 2.4203234971764687e-08), vec2<f32>(1.4451807737350464, 3.324199937537742e-08),
    vec2<f32>(1.4768261909484863, -4.500898853621038e-08), vec2<f32>(1.5091644525527954, -2.4959373234878512e-08),
    vec2<f32>(1.5422108173370361, 8.070904833346049e-09), vec2<f32>(1.5759809017181396, -5.661025426206834e-08),
    vec2<f32>(1.610490322113037, 9.836217174097328e-09), vec2<f32>(1.6457555294036865, -5.124972091152813e-08),
    vec2<f32>(1.6817928552627563, -2.4755326677450284e-08), vec2<f32>(1.7186193466186523, -4.8496175963919086e-08),
    vec2<f32>(1.7562521696090698, -9.235770370707996e-09), vec2<f32>(1.7947090864181519, -1.141504490931311e-08),
    vec2<f32>(1.8340080976486206, -1.1239277952768134e-08), vec2<f32>(1.8741676807403564, -4.663005626071026e-08),
    vec2<f32>(1.9152065515518188, 9.845328108326612e-09), vec2<f32>(1.9571441411972046, -1.7021804410433106e-08));

// two_prod is a * b exactly, as a rounded product and its error (Dekker).
fn two_prod(a: f32, b: f32) -> vec2<f32> {
    let as_ = ns_split(a);
    let bs = ns_split(b);
    let p = ns_keep(a * b);
    let e = ns_keep(ns_keep(ns_keep(ns_keep(as_.x * bs.x) - p) + ns_keep(as_.x * bs.y)) + ns_keep(as_.y * bs.x)) + ns_keep(as_.y * bs.y);
    return vec2<f32>(p, e);
}

// two_sum is a + b exactly, as a rounded sum and its error (Knuth).
fn two_sum(a: f32, b: f32) -> vec2<f32> {
    let s = ns_keep(a + b);
    let bb = ns_keep(s - a);
    return vec2<f32>(s, ns_keep(a - ns_keep(s - bb)) + ns_keep(b - bb));
}

// exp_c is the C library's expf as glibc 2.36 computes it on x86-64 (e_expf.c): in double
// precision, z = x·32/ln2, k = z rounded to even, r = z - k and e^x = 2^(k/32)·2^(r/32) with
// 2^(r/32) taken from its own cubic, 1 + C2·r + C1·r^2 + C0·r^3, rounded to float once. The
// cubic's error stays in glibc's result (about 0.06% of floats are not the correctly rounded
// e^x), so this evaluates that cubic, not e^x: its doubles are pairs of floats here (z from
// x times 32/ln2 in three exact parts), which give glibc's float but where its double lies
// within about 2^-46 of a rounding boundary. Constants: glibc's own (__exp2f_data's
// invln2_scaled and poly_scaled, read from this machine's libm; EXP_T holds 2^(i/32)).
const EXPF_I0: f32 = 46.16624f; // 32/ln2 = I0 + I1 + I2 exactly (the floats 0x4238aa3b,
const EXPF_I1: f32 = 6.1630817e-07f; // 0x35257060 and 0xa8800000)
const EXPF_I2: f32 = -1.4210855e-14f;
const EXPF_C0: f32 = 1.6938359e-06f;
const EXPF_C1 = vec2<f32>(0.0002345981f, -6.830502e-12f);
const EXPF_C2 = vec2<f32>(0.02166085f, -5.5405604e-11f);

fn exp_c(x: f32) -> f32 {
    if (x > 88.72283172607422) {
        return bitcast<f32>(0x7f800000u); // overflows to infinity, as expf
    }
    if (x < -103.97207641601562) {
        return 0.0;
    }
    // z = x·32/ln2 = p0 + e0 + p1 + e1 + p2, the first four exact, k its nearest integer (ties
    // to even, the pair's tail deciding where p0 alone sits on a half).
    let z0 = two_prod(x, EXPF_I0);
    let z1 = two_prod(x, EXPF_I1);
    let p2 = ns_keep(x * EXPF_I2);
    var kf = round(z0.x);
    let tail = ns_keep(ns_keep(z0.y + z1.x) + ns_keep(z1.y + p2));
    if (abs(ns_keep(z0.x - kf)) == 0.5 && tail != 0.0) {
        kf = ns_keep(z0.x + select(-0.5, 0.5, tail > 0.0));
    }
    let k = i32(kf);
    // r = z - k in a pair: (p0 - k) exact, then the rest from the largest.
    let ra = two_sum(ns_keep(z0.x - kf), z0.y);
    let rb = two_sum(ra.x, z1.x);
    let r = two_sum(rb.x, ns_keep(ns_keep(ra.y + rb.y) + ns_keep(z1.y + p2)));
    // 2^(r/32) - 1 = r·(C2 + r·(C1 + r·C0)), each factor a pair where its rounding would show.
    let ci = two_sum(EXPF_C1.x, ns_keep(r.x * EXPF_C0));
    let ci_lo = ns_keep(ci.y + EXPF_C1.y);
    let rm = two_prod(r.x, ci.x);
    let cm = two_sum(EXPF_C2.x, rm.x);
    let cm_lo = ns_keep(ns_keep(cm.y + EXPF_C2.y) + ns_keep(ns_keep(rm.y + ns_keep(r.x * ci_lo)) + ns_keep(r.y * ci.x)));
    let q = two_prod(r.x, cm.x);
    let q_lo = ns_keep(ns_keep(q.y + ns_keep(r.x * cm_lo)) + ns_keep(r.y * cm.x));
    let pw = two_sum(1.0, q.x);
    let pw_lo = ns_keep(pw.y + q_lo);
    // 2^(i/32) (1 + (2^(r/32) - 1)), then 2^(k >> 5) and the one rounding.
    let t = EXP_T[u32(k & 31)];
    let s = two_prod(t.x, pw.x);
    let small = ns_keep(ns_keep(s.y + ns_keep(t.x * pw_lo)) + ns_keep(t.y * pw.x));
    return scale2(s.x, small, k >> 5u);
}

// tanh_c is the C library's tanhf as glibc 2.36 computes it (fdlibm's, in floats): for |x| of
// 1 and more 1 - 2/(expm1(2|x|) + 2), below it -t/(t + 2) with t = expm1(-2|x|), the sign
// restored; 1 from 22 on. (ggml_tanh calls it: Gemma's final soft-cap.) Each step rounded on its
// own, as glibc's C compiles without contraction (gpu.TestGGMLMath checks it against libm).
fn tanh_c(x: f32) -> f32 {
    let ix = bitcast<u32>(x) & 0x7fffffffu;
    var z: f32;
    if (ix >= 0x7f800000u) {
        return select(select(-1.0, 1.0, x > 0.0), x, x != x); // +-1, NaN as NaN
    }
    if (ix < 0x24000000u) {
        return ns_keep(x * ns_keep(1.0 + x));
    }
    if (ix >= 0x41b00000u) {
        z = 1.0;
    } else if (ix >= 0x3f800000u) {
        let t = expm1_c(ns_keep(2.0 * abs(x)));
        z = ns_keep(1.0 - ns_keep(2.0 / ns_keep(t + 2.0)));
    } else {
        let t = expm1_c(ns_keep(-2.0 * abs(x)));
        z = ns_keep(-t / ns_keep(t + 2.0));
    }
    return select(z, -z, bitcast<u32>(x) >= 0x80000000u);
}

// expm1_c is fdlibm's single-precision e^x - 1 as glibc 2.36 computes it, for tanh_c's
// arguments (|x| < 44): x reduced by k ln2 (ln2 in two parts), e^r - 1 from a rational
// approximation in r^2/2 with a correction term, 2^k applied to the exponent.
fn expm1_c(x_in: f32) -> f32 {
    var x = x_in;
    let hx = bitcast<u32>(x) & 0x7fffffffu;
    let neg = bitcast<u32>(x) >= 0x80000000u;
    if (hx >= 0x4195b844u) { // |x| >= 27 ln2
        if (!neg) {
            return bitcast<f32>(0x7f800000u);
        }
        return -1.0;
    }
    var k = 0;
    var c = 0.0;
    if (hx > 0x3eb17218u) { // |x| > ln2 / 2
        var hi: f32;
        var lo: f32;
        if (hx < 0x3f851592u) { // and < 1.5 ln2
            if (!neg) {
                hi = ns_keep(x - 6.9313812256e-01);
                lo = 9.0580006145e-06;
                k = 1;
            } else {
                hi = ns_keep(x + 6.9313812256e-01);
                lo = -9.0580006145e-06;
                k = -1;
            }
        } else {
            k = i32(ns_keep(ns_keep(1.4426950216e+00 * x) + select(0.5, -0.5, neg)));
            let t = f32(k);
            hi = ns_keep(x - ns_keep(t * 6.9313812256e-01));
            lo = ns_keep(t * 9.0580006145e-06);
        }
        x = ns_keep(hi - lo);
        c = ns_keep(ns_keep(hi - x) - lo);
    } else if (hx < 0x33000000u) { // |x| < 2^-25
        return x;
    }
    let hfx = ns_keep(0.5 * x);
    let hxs = ns_keep(x * hfx);
    var p = ns_keep(hxs * -2.0109921195e-07);
    p = ns_keep(hxs * ns_keep(4.0082177293e-06 + p));
    p = ns_keep(hxs * ns_keep(-7.9365076090e-05 + p));
    p = ns_keep(hxs * ns_keep(1.5873016091e-03 + p));
    p = ns_keep(hxs * ns_keep(-3.3333335072e-02 + p));
    let r1 = ns_keep(1.0 + p);
    let t = ns_keep(3.0 - ns_keep(r1 * hfx));
    var e = ns_keep(hxs * ns_keep(ns_keep(r1 - t) / ns_keep(6.0 - ns_keep(x * t))));
    if (k == 0) {
        return ns_keep(x - ns_keep(ns_keep(x * e) - hxs));
    }
    e = ns_keep(ns_keep(x * ns_keep(e - c)) - c);
    e = ns_keep(e - hxs);
    if (k == -1) {
        return ns_keep(ns_keep(0.5 * ns_keep(x - e)) - 0.5);
    }
    if (k == 1) {
        if (x < -0.25) {
            return ns_keep(-2.0 * ns_keep(e - ns_keep(x + 0.5)));
        }
        return ns_keep(1.0 + ns_keep(2.0 * ns_keep(x - e)));
    }
    if (k <= -2 || k > 56) {
        var y = ns_keep(1.0 - ns_keep(e - x));
        y = bitcast<f32>(bitcast<u32>(y) + (u32(k) << 23u));
        return ns_keep(y - 1.0);
    }
    var y: f32;
    if (k < 23) {
        let tk = bitcast<f32>(0x3f800000u - (0x1000000u >> u32(k))); // 1 - 2^-k
        y = ns_keep(tk - ns_keep(e - x));
    } else {
        let tk = bitcast<f32>(u32(0x7f - k) << 23u); // 2^-k
        y = ns_keep(x - ns_keep(e + tk));
        y = ns_keep(y + 1.0);
    }
    return bitcast<f32>(bitcast<u32>(y) + (u32(k) << 23u));
}

// scale2 is (hi + lo) 2^m rounded once (hi in [0.5, 2.5), lo below its last bit), for m from
// -160 to 128: in the subnormal range (and just above it, where the spacing is the same) as
// a whole multiple of 2^-149, (hi + lo) 2^(m + 149) rounded half to even, else hi + lo
// rounded and scaled exactly (in two steps where one factor would leave the exponent range).
fn scale2(hi: f32, lo: f32, m: i32) -> f32 {
    if (m > -126 || (m == -126 && hi >= 1.0)) {
        var v = hi + lo;
        var e = m;
        if (e > 127) {
            v = ns_keep(v * 2.0);
            e -= 1;
        }
        return v * bitcast<f32>(u32(e + 127) << 23u);
    }
    let q = m + 149;
    if (q < -2) {
        return 0.0;
    }
    let sc = bitcast<f32>(u32(q + 127) << 23u);
    let y = two_sum(ns_keep(hi * sc), ns_keep(lo * sc)); // lo may exceed hi's last bit
    var w = round(y.x);
    let f = ns_keep(ns_keep(y.x - w) + y.y);
    if (f > 0.5 || (f == 0.5 && (u32(w) & 1u) == 1u)) {
        w += 1.0;
    } else if (f < -0.5 || (f == -0.5 && (u32(w) & 1u) == 1u)) {
        w -= 1.0;
    }
    return ns_keep(w * bitcast<f32>(27u << 23u)) * bitcast<f32>(78u << 23u); // w 2^-100 2^-49: exact
}

// SIN_T[k] is sin(k pi / 64) as a pair of floats (hi + lo); cos(k pi / 64) is SIN_T[k + 32].
const SIN_T = array<vec2<f32>, 128>(
    vec2<f32>(0.0, 0.0), vec2<f32>(0.049067676067352295, -1.7399343077428853e-09),
    vec2<f32>(0.0980171412229538, -8.933931927579408e-10), vec2<f32>(0.1467304676771164, 6.778245520422388e-09),
    vec2<f32>(0.19509032368659973, -1.670471427850373e-09), vec2<f32>(0.24298018217086792, -2.267604104488896e-09),
    vec2<f32>(0.290284663438797, 1.3815665056426951e-08), vec2<f32>(0.3368898630142212, -9.622000973763534e-09),
    vec2<f32>(0.3826834261417389, 6.2233507236442165e-09), vec2<f32>(0.4275550842285156, 9.201766459909777e-09),
    vec2<f32>(0.4713967442512512, -7.425253745196869e-09), vec2<f32>(0.5141027569770813, -1.2783859304477119e-08),
    vec2<f32>(0.5555702447891235, -1.1769521357507529e-08), vec2<f32>(0.5956993103027344, -5.810301129116624e-09),
    vec2<f32>(0.6343932747840881, 9.37955757507325e-09), vec2<f32>(0.6715589761734009, -2.1326382437791835e-08),
    vec2<f32>(0.7071067690849304, 1.2101617485882343e-08), vec2<f32>(0.7409511208534241, 4.501535144640911e-09),
    vec2<f32>(0.7730104327201843, 2.0642552556182636e-08), vec2<f32>(0.803207516670227, 1.4810417781063734e-08),
    vec2<f32>(0.8314695954322815, 1.687026340846387e-08), vec2<f32>(0.8577286005020142, 9.498258179974073e-09),
    vec2<f32>(0.8819212913513184, -2.7002963420841297e-08), vec2<f32>(0.903989315032959, -2.1909515979245953e-08),
    vec2<f32>(0.9238795042037964, 2.830748968563057e-08), vec2<f32>(0.9415440559387207, 9.244300436250796e-09),
    vec2<f32>(0.9569403529167175, -1.7184508038781132e-08), vec2<f32>(0.9700312614440918, -8.249547711614014e-09),
    vec2<f32>(0.9807852506637573, 2.9739473106360492e-08), vec2<f32>(0.9891765117645264, -1.7997453527485163e-09),
    vec2<f32>(0.9951847195625305, 7.109666189109021e-09), vec2<f32>(0.9987954497337341, 6.471438052102485e-09),
    vec2<f32>(1.0, 0.0), vec2<f32>(0.9987954497337341, 6.471438052102485e-09),
    vec2<f32>(0.9951847195625305, 7.109666189109021e-09), vec2<f32>(0.9891765117645264, -1.7997453527485163e-09),
    vec2<f32>(0.9807852506637573, 2.9739473106360492e-08), vec2<f32>(0.9700312614440918, -8.249547711614014e-09),
    vec2<f32>(0.9569403529167175, -1.7184508038781132e-08), vec2<f32>(0.9415440559387207, 9.244300436250796e-09),
    vec2<f32>(0.9238795042037964, 2.830748968563057e-08), vec2<f32>(0.903989315032959, -2.1909515979245953e-08),
    vec2<f32>(0.8819212913513184, -2.7002963420841297e-08), vec2<f32>(0.8577286005020142, 9.498258179974073e-09),
    vec2<f32>(0.8314695954322815, 1.687026340846387e-08), vec2<f32>(0.803207516670227, 1.4810417781063734e-08),
    vec2<f32>(0.7730104327201843, 2.0642552556182636e-08), vec2<f32>(0.7409511208534241, 4.501535144640911e-09),
    vec2<f32>(0.7071067690849304, 1.2101617485882343e-08), vec2<f32>(0.6715589761734009, -2.1326382437791835e-08),
    vec2<f32>(0.6343932747840881, 9.37955757507325e-09), vec2<f32>(0.5956993103027344, -5.810301129116624e-09),
    vec2<f32>(0.5555702447891235, -1.1769521357507529e-08), vec2<f32>(0.5141027569770813, -1.2783859304477119e-08),
    vec2<f32>(0.4713967442512512, -7.425253745196869e-09), vec2<f32>(0.4275550842285156, 9.201766459909777e-09),
    vec2<f32>(0.3826834261417389, 6.2233507236442165e-09), vec2<f32>(0.3368898630142212, -9.622000973763534e-09),
    vec2<f32>(0.290284663438797, 1.3815665056426951e-08), vec2<f32>(0.24298018217086792, -2.267604104488896e-09),
    vec2<f32>(0.19509032368659973, -1.670471427850373e-09), vec2<f32>(0.1467304676771164, 6.778245520422388e-09),
    vec2<f32>(0.0980171412229538, -8.933931927579408e-10), vec2<f32>(0.049067676067352295, -1.7399343077428853e-09),
    vec2<f32>(0.0, 0.0), vec2<f32>(-0.049067676067352295, 1.7399343077428853e-09),
    vec2<f32>(-0.0980171412229538, 8.933931927579408e-10), vec2<f32>(-0.1467304676771164, -6.778245520422388e-09),
    vec2<f32>(-0.19509032368659973, 1.670471427850373e-09), vec2<f32>(-0.24298018217086792, 2.267604104488896e-09),
    vec2<f32>(-0.290284663438797, -1.3815665056426951e-08), vec2<f32>(-0.3368898630142212, 9.622000973763534e-09),
    vec2<f32>(-0.3826834261417389, -6.2233507236442165e-09), vec2<f32>(-0.4275550842285156, -9.201766459909777e-09),
    vec2<f32>(-0.4713967442512512, 7.425253745196869e-09), vec2<f32>(-0.5141027569770813, 1.2783859304477119e-08),
    vec2<f32>(-0.5555702447891235, 1.1769521357507529e-08), vec2<f32>(-0.5956993103027344, 5.810301129116624e-09),
    vec2<f32>(-0.6343932747840881, -9.37955757507325e-09), vec2<f32>(-0.6715589761734009, 2.1326382437791835e-08),
    vec2<f32>(-0.7071067690849304, -1.2101617485882343e-08), vec2<f32>(-0.7409511208534241, -4.501535144640911e-09),
    vec2<f32>(-0.7730104327201843, -2.0642552556182636e-08), vec2<f32>(-0.803207516670227, -1.4810417781063734e-08),
    vec2<f32>(-0.8314695954322815, -1.687026340846387e-08), vec2<f32>(-0.8577286005020142, -9.498258179974073e-09),
    vec2<f32>(-0.8819212913513184, 2.7002963420841297e-08), vec2<f32>(-0.903989315032959, 2.1909515979245953e-08),
    vec2<f32>(-0.9238795042037964, -2.830748968563057e-08), vec2<f32>(-0.9415440559387207, -9.244300436250796e-09),
    vec2<f32>(-0.9569403529167175, 1.7184508038781132e-08), vec2<f32>(-0.9700312614440918, 8.249547711614014e-09),
    vec2<f32>(-0.9807852506637573, -2.9739473106360492e-08), vec2<f32>(-0.9891765117645264, 1.7997453527485163e-09),
    vec2<f32>(-0.9951847195625305, -7.109666189109021e-09), vec2<f32>(-0.9987954497337341, -6.471438052102485e-09),
    vec2<f32>(-1.0, -0.0), vec2<f32>(-0.9987954497337341, -6.471438052102485e-09),
    vec2<f32>(-0.9951847195625305, -7.109666189109021e-09), vec2<f32>(-0.9891765117645264, 1.7997453527485163e-09),
    vec2<f32>(-0.9807852506637573, -2.9739473106360492e-08), vec2<f32>(-0.9700312614440918, 8.249547711614014e-09),
    vec2<f32>(-0.9569403529167175, 1.7184508038781132e-08), vec2<f32>(-0.9415440559387207, -9.244300436250796e-09),
    vec2<f32>(-0.9238795042037964, -2.830748968563057e-08), vec2<f32>(-0.903989315032959, 2.1909515979245953e-08),
    vec2<f32>(-0.8819212913513184, 2.7002963420841297e-08), vec2<f32>(-0.8577286005020142, -9.498258179974073e-09),
    vec2<f32>(-0.8314695954322815, -1.687026340846387e-08), vec2<f32>(-0.803207516670227, -1.4810417781063734e-08),
    vec2<f32>(-0.7730104327201843, -2.0642552556182636e-08), vec2<f32>(-0.7409511208534241, -4.501535144640911e-09),
    vec2<f32>(-0.7071067690849304, -1.2101617485882343e-08), vec2<f32>(-0.6715589761734009, 2.1326382437791835e-08),
    vec2<f32>(-0.6343932747840881, -9.37955757507325e-09), vec2<f32>(-0.5956993103027344, 5.810301129116624e-09),
    vec2<f32>(-0.5555702447891235, 1.1769521357507529e-08), vec2<f32>(-0.5141027569770813, 1.2783859304477119e-08),
    vec2<f32>(-0.4713967442512512, 7.425253745196869e-09), vec2<f32>(-0.4275550842285156, -9.201766459909777e-09),
    vec2<f32>(-0.3826834261417389, -6.2233507236442165e-09), vec2<f32>(-0.3368898630142212, 9.622000973763534e-09),
    vec2<f32>(-0.290284663438797, -1.3815665056426951e-08), vec2<f32>(-0.24298018217086792, 2.267604104488896e-09),
    vec2<f32>(-0.19509032368659973, 1.670471427850373e-09), vec2<f32>(-0.1467304676771164, -6.778245520422388e-09),
    vec2<f32>(-0.0980171412229538, 8.933931927579408e-10), vec2<f32>(-0.049067676067352295, 1.7399343077428853e-09));


// sincos_c is the C library's sinf and cosf of x (glibc's are correctly rounded but in rare
// cases): x = k pi/64 + r with |r| <= pi/128 (pi/64 in four parts, the first three of 8 bits so
// their products with k are exact to |x| of 3000; past it the reduction keeps f32 accuracy),
// sin and cos of r from their series in pairs of floats, and sin(x) = S cos r + C sin r,
// cos(x) = C cos r - S sin r with the table's S and C, each rounded once.
fn sincos_c(x: f32) -> vec2<f32> {
    let kf = round(ns_keep(x * 20.3718318939209)); // 64 / pi
    let a = ns_keep(x - ns_keep(kf * 0.049072265625));
    let b = two_sum(a, -ns_keep(kf * 1.5139579772949219e-05));
    let c = two_sum(b.x, -ns_keep(kf * -2.0023435354232788e-08));
    let rr = two_sum(c.x, ns_keep(ns_keep(b.y + c.y) - ns_keep(kf * 3.100292592095322e-11)));
    let rh = rr.x;
    let rl = rr.y;
    // sin r = rh + (rl - rh^3/6 + rh^5/120); cos r = (1 - rh^2/2) + (-rh rl + rh^4/24).
    let r2 = ns_keep(rh * rh);
    let sl = ns_keep(rl + ns_keep(ns_keep(rh * r2) * ns_keep(-0.16666667163372039794921875 + ns_keep(r2 * 0.0083333337679505348205566))));
    let q = two_prod(rh, rh);
    let ch = two_sum(1.0, -0.5 * q.x);
    let cl = ns_keep(ns_keep(ch.y - ns_keep(0.5 * q.y)) + ns_keep(ns_keep(-rh * rl) + ns_keep(ns_keep(r2 * r2) * 0.041666667908430099487304688)));
    let k = u32(i32(kf) & 127);
    let sk = SIN_T[k];
    let ck = SIN_T[(k + 32u) & 127u];
    return vec2<f32>(mul_add2(sk, vec2<f32>(ch.x, cl), ck, vec2<f32>(rh, sl)),
                     mul_add2(ck, vec2<f32>(ch.x, cl), -sk, vec2<f32>(rh, sl)));
}

// mul_add2 is a b + c d of pairs of floats (hi + lo), rounded once.
fn mul_add2(a: vec2<f32>, b: vec2<f32>, c: vec2<f32>, d: vec2<f32>) -> f32 {
    let p1 = two_prod(a.x, b.x);
    let p2 = two_prod(c.x, d.x);
    let s = two_sum(p1.x, p2.x);
    let small = ns_keep(ns_keep(ns_keep(s.y + p1.y) + p2.y) + ns_keep(ns_keep(ns_keep(a.x * b.y) + ns_keep(a.y * b.x)) + ns_keep(ns_keep(c.x * d.y) + ns_keep(c.y * d.x))));
    return s.x + small;
}

// log_c is the C library's logf of y > 0 as glibc 2.36 computes it on x86-64 (e_logf.c): y =
// 2^k z with z in [0x3f330000, 2·0x3f330000) in 16 bands, c a point of z's band (its 1/c and
// ln c tabulated), r = z/c - 1 = z·(1/c) - 1 and ln y = ln c + k ln2 + r + r^2 (A2 + A1 r +
// A0 r^2), in double precision, rounded to float once: its own cubic, whose error glibc's result
// keeps (0.07% of floats are not the correctly rounded ln y). Here in pairs of floats, so
// glibc's float but where its double lies within about 2^-46 of a rounding boundary. (The
// softplus of qwen35's gates.) Constants: glibc's own (__logf_data, read from this machine's
// libm), each double as a pair of floats.
const LOGF_T = array<vec4<f32>, 16>( // 1/c (hi, lo), ln c (hi, lo)
    vec4<f32>(1.3989072f, -2.2454302e-08f, -0.33569133f, -5.117452e-10f),
    vec4<f32>(1.3403141f, 3.9807233e-08f, -0.29290405f, -7.219311e-09f),
    vec4<f32>(1.2864323f, -5.6111237e-08f, -0.25187266f, 6.3581634e-10f),
    vec4<f32>(1.2367151f, -5.6926893e-08f, -0.21245869f, -3.0306986e-09f),
    vec4<f32>(1.1906977f, 4.6688264e-08f, -0.17453945f, -5.006707e-09f),
    vec4<f32>(1.1479821f, -1.8458273e-08f, -0.1380057f, -3.544308e-09f),
    vec4<f32>(1.1082251f, 3.7634223e-08f, -0.10275976f, -3.3870093e-09f),
    vec4<f32>(1.0711298f, -5.758342e-08f, -0.068713926f, 1.3086605e-09f),
    vec4<f32>(1.0364373f, 5.9517706e-09f, -0.03578914f, 8.289829e-10f),
    vec4<f32>(1.0f, 0.0f, 0.0f, 0.0f),
    vec4<f32>(0.949286f, -4.465401e-09f, 0.052045178f, -2.390381e-10f),
    vec4<f32>(0.89510494f, -1.8450628e-09f, 0.11081431f, 2.377585e-09f),
    vec4<f32>(0.8476822f, -1.5985368e-08f, 0.16524953f, -4.131188e-09f),
    vec4<f32>(0.8050315f, 6.764201e-09f, 0.21687388f, 6.11595e-09f),
    vec4<f32>(0.7664671f, 6.462924e-09f, 0.2659635f, 8.03446e-09f),
    vec4<f32>(0.7314286f, -1.9883135e-08f, 0.31275567f, -7.716408e-09f));
const LOGF_A0 = vec2<f32>(-0.2508934f, -8.121833e-09f);
const LOGF_A1 = vec2<f32>(0.33345675f, 1.1059618e-08f);
const LOGF_A2 = vec2<f32>(-0.49999976f, 1.3001211e-08f);
const LOGF_LN2 = vec3<f32>(0.69314575f, 1.4286068e-06f, 5.495604e-14f); // exactly ln2's double; k·x of the first exact

fn log_c(y: f32) -> f32 {
    var ix = bitcast<u32>(y);
    if (ix == 0x3f800000u) {
        return 0.0;
    }
    if (ix < 0x00800000u) { // subnormal: normalised, as glibc does
        if (ix == 0u) {
            return bitcast<f32>(0xff800000u);
        }
        ix = bitcast<u32>(y * 8388608.0) - (23u << 23u);
    }
    let tmp = ix - 0x3f330000u;
    let t = LOGF_T[(tmp >> 19u) % 16u];
    let kf = f32(bitcast<i32>(tmp) >> 23u);
    let z = bitcast<f32>(ix - (tmp & (0x1ffu << 23u)));
    // r = z·(1/c) - 1, exact but for z times 1/c's low part
    let zc = two_prod(z, t.x);
    let r = two_sum(ns_keep(zc.x - 1.0), ns_keep(zc.y + ns_keep(z * t.y)));
    // y0 = ln c + k ln2
    let k1 = two_prod(kf, LOGF_LN2.y);
    let a = two_sum(ns_keep(kf * LOGF_LN2.x), t.z);
    let y0 = two_sum(a.x, k1.x);
    let y0_lo = ns_keep(ns_keep(y0.y + ns_keep(a.y + t.w)) + ns_keep(k1.y + ns_keep(kf * LOGF_LN2.z)));
    // q = r^2 (A2 + A1 r + A0 r^2)
    let r2 = two_prod(r.x, r.x);
    let r2_lo = ns_keep(r2.y + ns_keep(2.0 * ns_keep(r.x * r.y)));
    let t1 = two_prod(LOGF_A1.x, r.x);
    let t1_lo = ns_keep(t1.y + ns_keep(ns_keep(LOGF_A1.x * r.y) + ns_keep(LOGF_A1.y * r.x)));
    let t2 = two_prod(LOGF_A0.x, r2.x);
    let t2_lo = ns_keep(t2.y + ns_keep(ns_keep(LOGF_A0.x * r2_lo) + ns_keep(LOGF_A0.y * r2.x)));
    let s1 = two_sum(LOGF_A2.x, t1.x);
    let s2 = two_sum(s1.x, t2.x);
    let pl = ns_keep(ns_keep(s2.y + s1.y) + ns_keep(LOGF_A2.y + ns_keep(t1_lo + t2_lo)));
    let q = two_prod(s2.x, r2.x);
    let q_lo = ns_keep(q.y + ns_keep(ns_keep(s2.x * r2_lo) + ns_keep(pl * r2.x)));
    // y0 + r + q, rounded once
    let u1 = two_sum(y0.x, r.x);
    let u2 = two_sum(u1.x, q.x);
    let lo = ns_keep(ns_keep(ns_keep(u1.y + u2.y) + ns_keep(y0_lo + r.y)) + q_lo);
    return ns_keep(u2.x + lo);
}
#else
fn log_c(y: f32) -> f32 {
    return log(y);
}

fn sincos_c(x: f32) -> vec2<f32> {
    return vec2<f32>(sin(x), cos(x));
}

fn fma1(a: f32, b: f32, c: f32) -> f32 {
    return fma(a, b, c);
}

fn fma4(a: vec4<f32>, b: vec4<f32>, c: vec4<f32>) -> vec4<f32> {
    return fma(a, b, c);
}

fn exp_v(x: f32) -> f32 {
    return exp(x);
}

fn exp_c(x: f32) -> f32 {
    return exp(x);
}

fn tanh_c(x: f32) -> f32 {
    return tanh(x);
}
#endif

// silu_v is ggml_v_silu: x / (1 + ggml_v_expf(0 - x)).
fn silu_v(x: f32) -> f32 {
    return x / (1.0 + exp_v(0.0 - x));
}

// silu_c is ggml_silu_f32, the scalar silu (the tails of rows that are not runs of 8).
fn silu_c(x: f32) -> f32 {
    return x / (1.0 + exp_c(-x));
}

// silu_row is ggml_vec_silu_f32's (and swiglu's) silu of element e of a row of n: ggml_v_silu
// in runs of 8 from the row's start, the scalar silu after them. (A branch, not select: each
// emulated exp is dozens of operations.)
fn silu_row(x: f32, e: u32, n: u32) -> f32 {
    if (e < (n & ~7u)) {
        return silu_v(x);
    }
    return silu_c(x);
}

// exp_row is ggml_vec_soft_max_f32's exp of element e of a row of n: ggml_v_expf in runs of
// 8, expf after them.
fn exp_row(x: f32, e: u32, n: u32) -> f32 {
    if (e < (n & ~7u)) {
        return exp_v(x);
    }
    return exp_c(x);
}

// sigmoid_c is ggml's sigmoid: 1 / (1 + expf(-x)).
fn sigmoid_c(x: f32) -> f32 {
    return 1.0 / (1.0 + exp_c(-x));
}

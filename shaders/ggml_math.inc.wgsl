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

// LOG_T[j] is ln(1 + j/128) as a pair of floats (hi + lo).
const LOG_T = array<vec2<f32>, 128>(
    vec2<f32>(0.0, 0.0), vec2<f32>(0.007782140281051397, 1.6100355770820585e-10),
    vec2<f32>(0.015504186972975731, -4.3701048335620385e-10), vec2<f32>(0.02316705882549286, 4.5604151011069405e-10),
    vec2<f32>(0.030771657824516296, 8.422373909411363e-10), vec2<f32>(0.03831886500120163, -6.990650280869204e-10),
    vec2<f32>(0.045809537172317505, -1.1410232758635175e-09), vec2<f32>(0.053244516253471375, -1.7346590830413788e-09),
    vec2<f32>(0.0606246218085289, 7.905942393804377e-12), vec2<f32>(0.06795065850019455, 3.4083131872364447e-09),
    vec2<f32>(0.0752234235405922, -2.303004675852094e-09), vec2<f32>(0.08244366943836212, -2.2728753601430896e-10),
    vec2<f32>(0.08961215615272522, 2.536961973831353e-09), vec2<f32>(0.09672962874174118, -2.283190081442399e-09),
    vec2<f32>(0.10379679501056671, -1.328923193710807e-09), vec2<f32>(0.11081436276435852, 3.575931550869882e-09),
    vec2<f32>(0.11778303235769272, 3.2986906539633765e-09), vec2<f32>(0.12470348179340363, -3.2924463155836747e-09),
    vec2<f32>(0.13157635927200317, -1.4832839401179854e-09), vec2<f32>(0.1384023278951645, -5.036045358508545e-09),
    vec2<f32>(0.14518201351165771, -3.6671599090709606e-09), vec2<f32>(0.151916041970253, 5.5588984804177954e-11),
    vec2<f32>(0.15860502421855927, 5.9580793632108e-09), vec2<f32>(0.16524957120418549, 1.6911216871307033e-09),
    vec2<f32>(0.1718502640724182, -7.145759095550375e-09), vec2<f32>(0.17840765416622162, 3.306596774166337e-09),
    vec2<f32>(0.18492233753204346, 9.619685048534166e-10), vec2<f32>(0.1913948506116867, 2.3879427324402513e-09),
    vec2<f32>(0.19782574474811554, -1.4181956720094036e-09), vec2<f32>(0.20421554148197174, -5.3280848483217014e-11),
    vec2<f32>(0.2105647623538971, 6.753452463925669e-09), vec2<f32>(0.21687394380569458, -5.505080391543515e-09),
    vec2<f32>(0.2231435477733612, 3.540848503291727e-09), vec2<f32>(0.22937409579753876, 5.2673070349840145e-09),
    vec2<f32>(0.23556606471538544, 6.597381307926753e-09), vec2<f32>(0.24171993136405945, 5.523085544467676e-09),
    vec2<f32>(0.2478361576795578, 6.225023607697722e-09), vec2<f32>(0.2539152204990387, -1.0518075299614793e-08),
    vec2<f32>(0.25995752215385437, 2.283071731667974e-09), vec2<f32>(0.2659635543823242, -5.885186116216801e-09),
    vec2<f32>(0.2719337046146393, 1.086900258684409e-08), vec2<f32>(0.27786844968795776, 1.315498487919342e-09),
    vec2<f32>(0.2837681770324707, -3.9018259734291405e-09), vec2<f32>(0.28963330388069153, -1.1297649038510826e-08),
    vec2<f32>(0.2954642176628113, -4.768975436775236e-09), vec2<f32>(0.3012613356113434, -5.033181427194222e-09),
    vec2<f32>(0.3070250451564789, -9.86156667437399e-09), vec2<f32>(0.3127557039260864, 6.077810255078475e-09),
    vec2<f32>(0.31845372915267944, 1.9658552563583953e-09), vec2<f32>(0.3241194784641266, -9.809914658376329e-09),
    vec2<f32>(0.3297532796859741, 6.686494025132106e-09), vec2<f32>(0.3353555500507355, -8.129597439676672e-09),
    vec2<f32>(0.3409265875816345, -6.110413286464222e-10), vec2<f32>(0.3464667797088623, -1.236265401161063e-08),
    vec2<f32>(0.3519764244556427, -1.2984645580971232e-09), vec2<f32>(0.35745587944984436, 9.471959216966752e-09),
    vec2<f32>(0.36290550231933594, -8.629967851447873e-09), vec2<f32>(0.3683255612850189, -1.2631126700135553e-10),
    vec2<f32>(0.37371641397476196, -4.181178070439273e-09), vec2<f32>(0.37907835841178894, -5.476819442407077e-09),
    vec2<f32>(0.38441169261932373, 6.291008158854083e-09), vec2<f32>(0.3897167444229126, 6.717112643883638e-09),
    vec2<f32>(0.3949938118457794, -3.604910370214043e-09), vec2<f32>(0.4002431631088257, 1.018186979173663e-09),
    vec2<f32>(0.40546509623527527, 1.1872889338349069e-08), vec2<f32>(0.41065993905067444, -1.4065405729013492e-08),
    vec2<f32>(0.4158279001712799, -5.027569027760137e-09), vec2<f32>(0.42096930742263794, -1.2778508029498425e-08),
    vec2<f32>(0.42608439922332764, -3.912427715135891e-09), vec2<f32>(0.4311734735965729, -8.778201276982145e-09),
    vec2<f32>(0.43623676896095276, -2.1860346866020564e-09), vec2<f32>(0.4412745535373688, 7.267506596519979e-09),
    vec2<f32>(0.4462870955467224, 7.081697006583454e-09), vec2<f32>(0.4512746334075928, 1.0731866062485551e-08),
    vec2<f32>(0.45623743534088135, -1.859293718986521e-09), vec2<f32>(0.46117570996284485, 5.159325411341342e-09),
    vec2<f32>(0.46608972549438477, 4.430214417538991e-09), vec2<f32>(0.4709797203540802, -5.135289082858208e-09),
    vec2<f32>(0.47584590315818787, 1.7117760542362248e-09), vec2<f32>(0.48068854212760925, -1.2781857350319115e-08),
    vec2<f32>(0.4855078160762787, -2.9457788985887134e-10), vec2<f32>(0.49030399322509766, -5.1799036171473745e-09),
    vec2<f32>(0.4950772523880005, 1.4409851090135817e-08), vec2<f32>(0.49982786178588867, 7.770561083475513e-09),
    vec2<f32>(0.5045560002326965, 1.0519698889766005e-08), vec2<f32>(0.5092619061470032, -4.357195049209395e-09),
    vec2<f32>(0.5139457583427429, -7.2405086370963545e-09), vec2<f32>(0.5186077356338501, 2.8574195454211804e-08),
    vec2<f32>(0.5232481360435486, 7.720998951299407e-09), vec2<f32>(0.5278670787811279, 1.0839714015276058e-08),
    vec2<f32>(0.5324648022651672, -3.39569550256158e-09), vec2<f32>(0.5370414853096008, -1.9412716767419624e-08),
    vec2<f32>(0.541597306728363, -2.4295617961911375e-08), vec2<f32>(0.5461324453353882, -7.73725261637992e-09),
    vec2<f32>(0.5506471395492554, -2.1596592958417204e-08), vec2<f32>(0.5551415085792542, -1.0387525284372146e-09),
    vec2<f32>(0.5596157908439636, -2.9085409636309123e-09), vec2<f32>(0.5640701651573181, -2.68725148799831e-08),
    vec2<f32>(0.5685047507286072, -1.5375938744455198e-08), vec2<f32>(0.5729197263717651, 2.71900209014575e-08),
    vec2<f32>(0.5773153901100159, -2.507519170080741e-08), vec2<f32>(0.5816917419433594, -2.3087369793728385e-09),
    vec2<f32>(0.5860490202903748, 2.4713203927717586e-08), vec2<f32>(0.5903874635696411, -1.6967463878359013e-08),
    vec2<f32>(0.5947071313858032, -2.363911022484899e-08), vec2<f32>(0.5990082025527954, -1.290671214349004e-08),
    vec2<f32>(0.603290855884552, -4.446467638530294e-09), vec2<f32>(0.6075552701950073, -1.9970466169638712e-08),
    vec2<f32>(0.6118015646934509, -2.358745732067291e-08), vec2<f32>(0.6160298585891724, 1.8626341358185527e-08),
    vec2<f32>(0.6202403903007507, 1.9451107391432743e-08), vec2<f32>(0.6244332790374756, 8.974417653462297e-09),
    vec2<f32>(0.6286086440086365, 1.5413737841640796e-08), vec2<f32>(0.6327666640281677, 5.5428701628557064e-09),
    vec2<f32>(0.6369074583053589, 3.931710512716791e-09), vec2<f32>(0.6410312056541443, -2.6233212935267147e-08),
    vec2<f32>(0.6451379656791687, -4.30558388941904e-09), vec2<f32>(0.6492279171943665, 2.9430744064029568e-08),
    vec2<f32>(0.6533012986183167, -2.660557107958539e-08), vec2<f32>(0.6573580503463745, 2.2361986040664306e-08),
    vec2<f32>(0.6613984704017639, 1.1843600766781037e-08), vec2<f32>(0.6654226183891296, 1.4155960847972437e-08),
    vec2<f32>(0.669430673122406, -1.9179775989641712e-08), vec2<f32>(0.6734226942062378, -1.899407031658029e-08),
    vec2<f32>(0.6773988008499146, 2.274189192519316e-08), vec2<f32>(0.6813592314720154, -6.6641123730448726e-09),
    vec2<f32>(0.6853039860725403, 1.702637852929456e-08), vec2<f32>(0.6892333030700684, -2.1831258578686175e-08));

// log_c is the C library's logf of y > 0 (glibc's is correctly rounded but on 0.07% of
// inputs): y = 2^e m, m = c (1 + r) with c = 1 + j/128 its first 7 fraction bits, so ln y =
// e ln2 + ln c + ln(1 + r), 0 <= r < 1/128, the series r - r^2/2 + r^3/3 - ... with r and r^2 in
// pairs of floats, the sum rounded once.
fn log_c(y: f32) -> f32 {
    var bits = bitcast<u32>(y);
    var e = i32(bits >> 23u) - 127;
    if ((bits >> 23u) == 0u) { // subnormal: scale by 2^24 first
        bits = bitcast<u32>(y * 16777216.0);
        e = i32(bits >> 23u) - 151;
    }
    let m = bitcast<f32>((bits & 0x007FFFFFu) | 0x3F800000u);
    let j = (bits >> 16u) & 127u;
    let c = 1.0 + f32(j) * 0.0078125;
    let num = ns_keep(m - c); // exact
    let rh = ns_keep(num / c);
    let pc = two_prod(rh, c);
    let rl = ns_keep(ns_keep(ns_keep(num - pc.x) - pc.y) / c);
    let q = two_prod(rh, rh); // r^2 = q + 2 rh rl
    // ln(1 + r) = rh + (rl - r^2/2 + r^3/3 - r^4/4 + r^5/5)
    let poly = ns_keep(ns_keep(rh * q.x) * ns_keep(0.3333333432674408 + ns_keep(rh * ns_keep(-0.25 + ns_keep(rh * 0.20000000298023224)))));
    let h = two_sum(rh, -0.5 * q.x);
    let lo1 = ns_keep(ns_keep(ns_keep(rl - ns_keep(0.5 * q.y)) - ns_keep(rh * rl)) + poly);
    let t = LOG_T[j];
    let ef = f32(e);
    let a = two_sum(ns_keep(ef * 0.693145751953125), t.x); // e ln2's high part is exact
    let b = two_sum(a.x, h.x);
    let small = ns_keep(ns_keep(ns_keep(a.y + b.y) + ns_keep(h.y + lo1)) + ns_keep(t.y + ns_keep(ef * 1.428606765330187e-06)));
    return b.x + small;
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

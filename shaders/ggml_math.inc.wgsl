// llama.cpp's CPU arithmetic for exp and the functions made of it, reproduced on CPU adapters
// (kernels built with CPU_MATH), so a model's activations come out as llama.cpp's bit for bit
// instead of some ulps apart (lavapipe's exp differs from the correctly rounded value on 83% of
// inputs, by up to 18 ulps, and the 8-bit rounding of the next product's input amplifies such
// differences). llama.cpp takes exp two ways (x86 with AVX2 and FMA):
//   exp_v, ggml_v_expf: its vector exp (silu, swiglu and soft_max in runs of 8), a polynomial
//          in f32 with fused multiply-adds, reproduced operation by operation;
//   exp_c, the C library's expf (everything scalar: flash attention, sigmoid, the delta
//          rule's gates): glibc's is correctly rounded in all but the rarest cases, so this
//          is exp computed to about 45 bits in pairs of floats and rounded once; sincos_c
//          likewise for sinf and cosf (RoPE).
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

// exp_c is the C library's expf: x = (32 m + i) ln2/32 + r with |r| <= ln2/64 (ln2/32 in three
// parts, the first two short enough that their products with 32 m + i are exact), e^x =
// 2^m 2^(i/32) e^r with e^r - 1 = r + r^2/2 + ... + r^6/720 (the next term is below 2^-58),
// each step carried in a pair of floats where its rounding would show, rounded once at the end.
fn exp_c(x: f32) -> f32 {
    if (x > 88.72283172607422) {
        return bitcast<f32>(0x7f800000u); // overflows to infinity, as expf
    }
    if (x < -103.97207641601562) {
        return 0.0;
    }
    let kf = round(ns_keep(x * 46.16624069213867)); // 32 / ln2
    let k = i32(kf);
    let r1 = ns_keep(x - ns_keep(kf * 0.02166748046875)); // ln2/32: 11 bits,
    let k2 = ns_keep(kf * -6.631016731262207e-06);      // 11 more,
    let k3 = ns_keep(kf * -5.952044412893542e-11);      // and the rest
    let rs = two_sum(r1, -k2);
    let rn = two_sum(rs.x, ns_keep(rs.y - k3)); // rl below rh's last bit, so r^3 needs rh alone
    let rh = rn.x;
    let rl = rn.y;
    // e^r - 1 = rh + rh^2/2 + (rl + rh rl + rh^3/6 + ... + rh^6/720), the tail small enough
    // for f32.
    let r2 = two_prod(rh, rh);
    let poly = ns_keep(0.16666667163372039794921875 + ns_keep(rh * ns_keep(0.041666667908430099487304688 + ns_keep(rh * ns_keep(0.0083333337679505348205566 + ns_keep(rh * 0.0013888889225199818611145))))));
    let tail = ns_keep(ns_keep(rl + ns_keep(r2.y * 0.5)) + ns_keep(rh * rl)) + ns_keep(rh * rh * rh * poly);
    let h = two_sum(rh, ns_keep(r2.x * 0.5));
    let em_hi = h.x;
    let em_lo = ns_keep(h.y + tail);
    // 2^(i/32) (1 + em) = T + T em.
    let t = EXP_T[u32(k & 31)];
    let p = two_prod(t.x, em_hi);
    let s = two_sum(t.x, p.x);
    let small = ns_keep(ns_keep(ns_keep(s.y + p.y) + ns_keep(t.x * em_lo)) + ns_keep(t.y + ns_keep(t.y * em_hi)));
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
#else
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

// sigmoid_c is ggml's sigmoid: 1 / (1 + expf(-x)).
fn sigmoid_c(x: f32) -> f32 {
    return 1.0 / (1.0 + exp_c(-x));
}

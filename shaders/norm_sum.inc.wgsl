// The sums of ggml's CPU norms (rms_norm, l2_norm, the gated norm): each square rounded to
// f32, summed in double (ggml_float), the mean or root taken from that. WGSL has no f64, so a
// sum is kept as a pair of floats, hi + lo (Knuth's two-sum keeps what each addition drops),
// and divided back to the nearest float: the norm's scale then matches llama.cpp's in all
// but the rarest ties, where a plain f32 sum would often differ in its last bits, and those
// bits decide the 8-bit rounding of the activations llama.cpp quantizes next.

//
// Compilers may treat float arithmetic as real arithmetic (SPIR-V without NoContraction: Mesa's
// NIR folds (a + b) - a to b), which would fold the two-sum's correction away, so each of its
// steps passes through ns_keep, an identity the compiler cannot see through: a kernel sets
// ns_zero to 0 from its uniforms (a zero field of its parameters) before summing.

var<private> ns_zero: u32;

// ns_keep is v, opaque to the compiler's algebra.
fn ns_keep(v: f32) -> f32 {
    return bitcast<f32>(bitcast<u32>(v) ^ ns_zero);
}

// ns_add adds the f32 b to the pair a.
fn ns_add(a: vec2<f32>, b: f32) -> vec2<f32> {
    let bk = ns_keep(b); // the square rounded to f32, not fused into the sum
    let s = ns_keep(a.x + bk);
    let bb = ns_keep(s - a.x);
    let e = ns_keep(a.x - ns_keep(s - bb)) + ns_keep(bk - bb);
    return vec2<f32>(s, a.y + e);
}

// ns_merge adds two pairs (a workgroup's partial sums).
fn ns_merge(a: vec2<f32>, b: vec2<f32>) -> vec2<f32> {
    let s = ns_add(a, b.x);
    return vec2<f32>(s.x, s.y + b.y);
}

// ns_split is Veltkamp's split of a into a high half of 12 bits and the rest, whose products
// with another split are exact in f32.
fn ns_split(a: f32) -> vec2<f32> {
    let c = ns_keep(4097.0 * a);
    let h = ns_keep(c - ns_keep(c - a));
    return vec2<f32>(h, ns_keep(a - h));
}

// ns_div is the pair divided by n, rounded to f32, as ggml's (float)(sum / n): the quotient of
// hi, corrected by the remainder of that division, hi - q·n exactly (Dekker's product: WGSL's
// fma may round twice), plus lo.
fn ns_div(a: vec2<f32>, n: f32) -> f32 {
    let q = ns_keep(a.x / n);
    let qs = ns_split(q);
    let nsp = ns_split(n);
    let prod = ns_keep(q * n);
    let err = ns_keep(ns_keep(ns_keep(ns_keep(qs.x * nsp.x) - prod) + ns_keep(qs.x * nsp.y)) + ns_keep(qs.y * nsp.x)) + ns_keep(qs.y * nsp.y);
    let r = ns_keep(ns_keep(a.x - prod) - err) + a.y;
    return q + r / n;
}

// ns_value is the pair rounded to f32.
fn ns_value(a: vec2<f32>) -> f32 {
    return a.x + a.y;
}

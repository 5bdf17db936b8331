// Rounds matmul activations the way llama.cpp's CPU backend feeds them to its dot products
// (ggml's vec_dot_type of the weight), so quantized models give llama.cpp's exact outputs:
//   Q8_0: blocks of 32 scaled by d = amax / 127 (stored as f16), values round(x * 127 / amax)
//         (for Q4_0, Q5_0, Q8_0 weights); with SUMS (Q8_1, for Q4_1 and Q5_1) also each
//         block's f16(d * sum q), which those dot products multiply by the weight's minimum;
//   Q8_K: blocks of 256 scaled by 1 / iscale, iscale = -127 / (the value of largest magnitude)
//         (for the K-quants);
//   F16, BF16: each value rounded to half or bfloat16 precision.
// The output is the dequantized activation in f32: out = d * q. PACKED (for CPU adapters'
// barrier-free matrix kernel, which then reads a quarter or half as many words, and for GPUs'
// integer dot products, COOP with the Q8 roundings only) writes instead
// per block of the Q8 roundings its scale d (f32 bits) and then its q, four int8 to a word,
// lowest first; for F16 and BF16, the rounded values' own 16 bits, two to a word. Either way
// the matrix kernel recomputes exactly the f32 values above.

// Fused inputs (COOP, GPUs, so a decode step has fewer dispatches): NORM rounds the RMS norm of
// x times nw as rms_norm.wgsl computes it (its WG of 256: the same sums in the same order, so
// the same floats); GLU (GLU_GELU) rounds the gated unit of x's fused gate|up rows (2k wide)
// as glu.wgsl computes it.
struct Params {
    k: u32,      // row length
    n_rows: u32, // rows (tokens)
    x_row0: u32, // first row of x to read; out rows start at 0
    eps: f32,    // NORM
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
#ifdef PACKED
@group(0) @binding(2) var<storage, read_write> out: array<u32>;
#else
@group(0) @binding(2) var<storage, read_write> out: array<f32>;
#endif
#ifdef SUMS
@group(0) @binding(3) var<storage, read_write> sums: array<f32>; // (n_rows, k / 32)
#ifdef NORM
@group(0) @binding(4) var<storage, read> nw: array<f32>;          // (k): the norm's weight
#endif
#else
#ifdef NORM
@group(0) @binding(3) var<storage, read> nw: array<f32>;
#endif
#endif

//#include f16_round.inc
#ifdef NORM
//#include norm_sum.inc
var<workgroup> partial: array<vec2<f32>, 256>;

// norm_scale is the RMS norm's scale of x's row (every invocation of the workgroup calls it).
fn norm_scale(li: u32, row: u32) -> f32 {
    var s = vec2<f32>(0.0, 0.0);
    for (var i = li; i < p.k; i += 256u) {
        let v = x[row * p.k + i];
        s = ns_add(s, v * v);
    }
    partial[li] = s;
    workgroupBarrier();
    for (var stride = 128u; stride > 0u; stride /= 2u) {
        if (li < stride) {
            partial[li] = ns_merge(partial[li], partial[li + stride]);
        }
        workgroupBarrier();
    }
    let scale = 1.0 / sqrt(ns_div(partial[0], f32(p.k)) + p.eps);
    workgroupBarrier(); // partial[0] read by all before the next row's sums
    return scale;
}
#endif
#ifdef GLU
//#include ggml_math.inc
#ifdef GLU_GELU
//#include gelu.inc
#endif
#endif

// BLOCK values share a scale; PACKED stores a block in WORDS words.
#ifdef Q8_K
const BLOCK: u32 = 256u;
const WORDS: u32 = 1u + BLOCK / 4u; // the scale, then four int8 to a word
#else
#ifdef Q8_0
const BLOCK: u32 = 32u;
const WORDS: u32 = 1u + BLOCK / 4u;
#else
const BLOCK: u32 = 4u;
const WORDS: u32 = BLOCK / 2u;      // F16, BF16: two 16-bit values to a word
#endif
#endif

#ifdef COOP
// The cooperative variant (GPUs): a workgroup of CW invocations takes CW consecutive values of
// a row, one each, and finds a block's largest magnitude (and Q8_1's sum) by a tree through
// workgroup memory, so every load is one coalesced row read instead of a serial walk through a
// block (64 us for one token of a 1B model on an H100). Same rounding, bit for bit: the tree
// keeps the left (earlier) value on a tie, as the serial loop keeps the first.
const CW: u32 = 256u; // a multiple of every BLOCK
var<workgroup> red: array<f32, CW>;

// block_max returns the value of largest magnitude (the first of equals) in v's block.
fn block_max(li: u32, v: f32) -> f32 {
    red[li] = v;
    for (var s = BLOCK / 2u; s > 0u; s /= 2u) {
        workgroupBarrier();
        if (li % BLOCK < s && abs(red[li + s]) > abs(red[li])) {
            red[li] = red[li + s];
        }
    }
    workgroupBarrier();
    let m = red[li - li % BLOCK];
    workgroupBarrier();
    return m;
}

// block_sum returns the sum of q over q's block (whole numbers: exact in any order).
fn block_sum(li: u32, q: f32) -> f32 {
    red[li] = q;
    for (var s = BLOCK / 2u; s > 0u; s /= 2u) {
        workgroupBarrier();
        if (li % BLOCK < s) {
            red[li] += red[li + s];
        }
    }
    workgroupBarrier();
    return red[li - li % BLOCK];
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) li: u32) {
    let segs = (p.k + CW - 1u) / CW;
    let seg = wg.x + wg.y * nwg.x;
    let row = seg / segs;
    let j = (seg % segs) * CW + li;
    // Every invocation reaches the barriers; a block lies wholly inside or past the row.
    let live = row < p.n_rows && j < p.k;
    var v = 0.0;
#ifdef NORM
    ns_zero = u32(p.k == 0u); // 0 wherever any invocation works (norm_sum.inc)
    let scale = norm_scale(li, p.x_row0 + min(row, p.n_rows - 1u));
    if (live) {
        v = (x[(p.x_row0 + row) * p.k + j] * scale) * nw[j];
    }
#else
#ifdef GLU
    ns_zero = u32(p.k == 0u); // ggml_math.inc's
    if (live) {
        let g = x[(p.x_row0 + row) * 2u * p.k + j];
#ifdef GLU_GELU
        let a = gelu(g);
#else
        let a = silu_row(g, j, p.k);
#endif
        v = a * x[(p.x_row0 + row) * 2u * p.k + p.k + j];
    }
#else
    if (live) {
        v = x[(p.x_row0 + row) * p.k + j];
    }
#endif
#endif
    var o = 0.0;
    var pq = 0.0; // PACKED: the Q8 value and its block's scale
    var pd = 0.0;
#ifdef Q8_0
    let amax = abs(block_max(li, v));
    var id = 0.0;
    if (amax != 0.0) {
        id = 127.0 / amax;
    }
    let q = round(v * id);
    o = f16_round(amax / 127.0) * q;
    pq = q;
    pd = f16_round(amax / 127.0);
#ifdef SUMS
    let sum = block_sum(li, q);
    if (live && li % BLOCK == 0u) {
        sums[(row * p.k + j) / BLOCK] = f16_round(amax / 127.0 * sum);
    }
#endif
#endif
#ifdef Q8_K
    let mx = block_max(li, v);
    if (mx != 0.0) {
        let iscale = -127.0 / mx;
        pq = min(127.0, round(iscale * v));
        pd = 1.0 / iscale;
        o = pd * pq;
    }
#endif
#ifdef F16
    o = f16_round(v);
#endif
#ifdef BF16
    o = bf16_round(v);
#endif
#ifdef PACKED
    // GPUs' integer dot products (Q8_0, Q8_1, Q8_K): four neighbouring invocations' q make a
    // word of the block, whose first invocation writes the scale, in the PACKED layout.
    workgroupBarrier(); // the block reductions above are done with red
    red[li] = pq;
    workgroupBarrier();
    if (live && li % 4u == 0u) {
        let dst = (row * p.k + j) / BLOCK * WORDS;
        if (j % BLOCK == 0u) {
            out[dst] = bitcast<u32>(pd);
        }
        var wd = 0u;
        for (var e = 0u; e < 4u; e++) {
            wd |= (bitcast<u32>(i32(red[li + e])) & 0xFFu) << (8u * e);
        }
        out[dst + 1u + j % BLOCK / 4u] = wd;
    }
#else
    if (live) {
        out[row * p.k + j] = o;
    }
#endif
}
#else
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let blocks = p.k / BLOCK;
    let i = gid.x + gid.y * nwg.x * 64u;
    if (i >= blocks * p.n_rows) {
        return;
    }
    let row = i / blocks;
    let src = (p.x_row0 + row) * p.k + (i % blocks) * BLOCK;
#ifdef PACKED
    let dst = i * WORDS;
#else
    let dst = row * p.k + (i % blocks) * BLOCK;
#endif
#ifdef Q8_0
    var amax = 0.0;
    for (var j = 0u; j < BLOCK; j++) {
        amax = max(amax, abs(x[src + j]));
    }
    let d = amax / 127.0;
    var id = 0.0;
    if (amax != 0.0) {
        id = 127.0 / amax;
    }
    var sum = 0.0;
    for (var j = 0u; j < BLOCK; j++) {
        let q = round(x[src + j] * id);
        put_q8(dst, j, f16_round(d), q);
        sum += q;
    }
#ifdef SUMS
    sums[i] = f16_round(d * sum);
#endif
#endif
#ifdef Q8_K
    var amax = 0.0;
    var mx = 0.0;
    for (var j = 0u; j < BLOCK; j++) {
        let v = x[src + j];
        if (abs(v) > amax) {
            amax = abs(v);
            mx = v;
        }
    }
    if (amax == 0.0) {
        for (var j = 0u; j < BLOCK; j++) {
            put_q8(dst, j, 0.0, 0.0);
        }
        return;
    }
    let iscale = -127.0 / mx;
    let d = 1.0 / iscale;
    for (var j = 0u; j < BLOCK; j++) {
        put_q8(dst, j, d, min(127.0, round(iscale * x[src + j])));
    }
#endif
#ifdef F16
    for (var j = 0u; j < BLOCK; j += 2u) {
        put_pair(dst, j, f16_round(x[src + j]), f16_round(x[src + j + 1u]));
    }
#endif
#ifdef BF16
    for (var j = 0u; j < BLOCK; j += 2u) {
        put_pair(dst, j, bf16_round(x[src + j]), bf16_round(x[src + j + 1u]));
    }
#endif
}

#endif

// put_q8 stores element j of a Q8 block at dst: d * q, or packed, d once and q as an int8 in
// its block's words (each word written whole when its fourth element arrives).
var<private> word: u32 = 0u;

fn put_q8(dst: u32, j: u32, d: f32, q: f32) {
#ifdef PACKED
    if (j == 0u) {
        out[dst] = bitcast<u32>(d);
    }
    word |= (bitcast<u32>(i32(q)) & 0xFFu) << (8u * (j % 4u));
    if (j % 4u == 3u) {
        out[dst + 1u + j / 4u] = word;
        word = 0u;
    }
#else
    out[dst + j] = d * q;
#endif
}

// put_pair stores elements j and j + 1 at dst, already rounded to 16 bits: as f32, or packed,
// their top (BF16) or half (F16) bits in one word.
fn put_pair(dst: u32, j: u32, a: f32, b: f32) {
#ifdef PACKED
#ifdef F16
    out[dst + j / 2u] = pack_f16(vec2<f32>(a, b));
#else
    out[dst + j / 2u] = (bitcast<u32>(a) >> 16u) | (bitcast<u32>(b) & 0xFFFF0000u);
#endif
#else
    out[dst + j] = a;
    out[dst + j + 1u] = b;
#endif
}

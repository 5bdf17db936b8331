// The short causal convolution of the recurrent layers (gpu.SSMConv): ggml's ssm_conv, a
// depthwise conv1d over the last D_CONV rows of each channel, for a batch of tokens of several
// sequences, each continuing from its conv state and leaving its last D_CONV - 1 rows there.
//
// For sequence s (seqs[3s .. 3s+2]: its first batch row, its token count n, its state slot)
// and channel c, ext is the slot's D_CONV - 1 state rows (oldest first) followed by the
// sequence's n input rows, and
//
//   out[first + t, c] = sum_{i < D_CONV} ext[t + i] * w[c * D_CONV + i]   (f32, ascending i)
//
// as ggml_compute_forward_ssm_conv_f32 sums it, each product rounded before it is added (the
// shared CPU build's output, checked on qwen35's first layer); SILU applies the ggml_silu llama.cpp's graphs
// put after it (a row of ggml_vec_silu_f32 per token: ggml_math.inc's silu_row). The state then holds ext[n .. n + D_CONV - 2].
//
// One invocation per channel, BLOCK tokens of one sequence (grid: x channels / 64, y token
// blocks, z sequences). Only block 0 touches the state: it reads it (tokens t < D_CONV - 1 are
// all in it, BLOCK >= D_CONV - 1) and then writes it, after its own reads, in ascending order,
// so when n < D_CONV - 1 the rows it keeps (at n + i > i) are read before they are replaced.
// Loops: D_CONV + (D_CONV - 1) + BLOCK (D_CONV + D_CONV - 1 + 1) + D_CONV - 1, 74 at D_CONV 4.

//#include ggml_math.inc

struct Params {
    channels: u32, // conv channels, the row length of out
    x_stride: u32, // floats per row of x
    x_col: u32,    // column of x's channel 0
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;           // (rows, x_stride)
@group(0) @binding(2) var<storage, read> w: array<f32>;           // (channels, D_CONV)
@group(0) @binding(3) var<storage, read_write> state: array<f32>; // (slots, channels, D_CONV - 1)
@group(0) @binding(4) var<storage, read_write> out: array<f32>;   // (rows, channels)
@group(0) @binding(5) var<storage, read> seqs: array<u32>;        // (sequences, 3)

const KS: u32 = D_CONV - 1u; // state rows per channel
const BLOCK: u32 = 8u;       // tokens per invocation (gpu's ssmConvBlock)

// ext reads row e of a channel's extended input: the state's rows, then the sequence's.
fn ext(first: u32, sbase: u32, c: u32, e: u32) -> f32 {
    if (e < KS) {
        return state[sbase + e];
    }
    return x[(first + e - KS) * p.x_stride + p.x_col + c];
}

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(workgroup_id) wg: vec3<u32>) {
    ns_zero = u32(p.channels == 0u); // never 1 where any invocation works (ggml_math.inc)
    let c = gid.x;
    let first = seqs[3u * wg.z];
    let n = seqs[3u * wg.z + 1u];
    let slot = seqs[3u * wg.z + 2u];
    let t0 = wg.y * BLOCK;
    if (c >= p.channels || t0 >= n) {
        return;
    }
    let t1 = min(t0 + BLOCK, n);
    let sbase = (slot * p.channels + c) * KS;
    var wc: array<f32, D_CONV>;
    for (var i = 0u; i < D_CONV; i++) {
        wc[i] = w[c * D_CONV + i];
    }
    // win holds ext[t .. t + D_CONV - 1] for the token t being computed.
    var win: array<f32, D_CONV>;
    for (var i = 0u; i < KS; i++) {
        win[i] = ext(first, sbase, c, t0 + i);
    }
    for (var t = t0; t < t1; t++) {
        win[KS] = x[(first + t) * p.x_stride + p.x_col + c];
        var sum = 0.0;
        for (var i = 0u; i < D_CONV; i++) {
            sum += ns_keep(win[i] * wc[i]); // the product rounded first: ggml's loop is not contracted
        }
#ifdef SILU
        sum = silu_row(sum, c, p.channels);
#endif
        out[(first + t) * p.channels + c] = sum;
        for (var i = 0u; i < KS; i++) {
            win[i] = win[i + 1u];
        }
    }
    if (wg.y == 0u) {
        for (var i = 0u; i < KS; i++) {
            state[sbase + i] = ext(first, sbase, c, n + i);
        }
    }
}

// Fused dequantize + matrix-vector product for decode and small batches:
// y[y_row0 + t, y_col0 + r] (+)= sum_k x[x_row0 + t, k] * W[r, k] for t < n_tok (at most
// MAXT in the cooperative kernel).
// The weight is read once for all tokens and accumulated in f32. W is any type of
// dequant.inc (define T_<TYPE>), rows of k elements, k a multiple of the block size.
// Variants: ADD accumulates into y (the residual add fused into the projection epilogue);
// SCALED multiplies the products by p.scale first (a LoRA pair's term);
// ROW_PER_THREAD gives each invocation whole rows and no workgroup barriers, what CPU adapters
// such as lavapipe run fastest (there for 1 to 4 tokens; matmul_rows.wgsl takes more);
// otherwise 64 invocations share each row and reduce, 4 rows to a workgroup.
// XSUM (Q4_1, Q5_1): x holds Q8_1-rounded activations and xs their per-32 block sums as
// llama.cpp's Q8_1 stores them (f16 of d * sum q); the block minimum multiplies that sum, as
// in ggml_vec_dot_q4_1_q8_1, instead of every activation.
// Products stay in f32 on every adapter: decode streams the weights once, so half-precision
// arithmetic saves no time, and on a real GPU it cost 1e-3 of relative error against llama.cpp.
// SUBGROUPS (adapters with subgroups, cooperative variant): the row sums are reduced with
// subgroupAdd and one barrier instead of a tree of barriers through workgroup memory. (wgpu's
// shader compiler takes subgroup operations without WGSL's `enable subgroups;`, which it does
// not parse yet, once the device has the feature.)

//#include matmul_io.inc
//#include dequant.inc
#ifdef IDOT_GRID
//#include super_lanes.inc
#endif

const WG: u32 = 64u;
const MAXT: u32 = 8u;

// Token lanes of the row-per-thread kernel: LANES2 and LANES4 are cumulative (LANES4 also
// defines LANES2), so a batch of 2 sequences does not pay for 4 lanes. (Batches of 5 tokens
// and more take matmul_rows.wgsl.)
#ifdef LANES4
const LANES: u32 = 4u;
#else
#ifdef LANES2
const LANES: u32 = 2u;
#else
const LANES: u32 = 1u;
#endif
#endif

// The row-per-thread kernel takes n_tok tokens (any number) in groups of LANES, one group per
// grid z slice (matmul_io.inc's tok0 and nt). One dispatch per weight chunk keeps a long
// prompt within a submit's dispatch limit. The cooperative kernel leaves tok0 at 0 (n_tok <=
// MAXT there).

#ifdef ROW_PER_THREAD
// Rows per invocation of the row-per-thread kernel: R4 and R2 (cumulative, as the lanes). Its
// rows share each activation load, which on lavapipe costs more than the quant words it meets
// (a load whose address every invocation shares is a bounds-checked scalar load there, and
// each row reads the same activations): 4 rows take Q4_K decode from 0.8 to 1.9 GB/s.
// Invocations per workgroup: 32 (four of lavapipe's 8-wide SIMD batches) keeps a 768-row
// weight at 4 rows per invocation in 6 workgroups, enough for every core.
const RWG: u32 = 32u;
#ifdef R4
const R: u32 = 4u;
#else
#ifdef R2
const R: u32 = 2u;
#else
const R: u32 = 1u;
#endif
#endif

// xv reads elements 4 xi .. 4 xi + 3 of activation row t (matmul_io.inc's xrow, act4).
fn xv(t: u32, xi: u32) -> vec4<f32> {
#ifdef XPACK_Q8
    let at = act_at(xrow(t), xi / (BS / 4u)); // the Q8 block holding it (XB = BS)
    return act4(at, act_scale(at), 4u * (xi % (BS / 4u)));
#else
    return act4(act_at(xrow(t), 0u), 1.0, 4u * xi);
#endif
}

// xload is dequant.inc's block_dot reader: token 0's activations.
fn xload(i: u32) -> vec4<f32> {
    return xv(0u, i);
}

// Invocation i of a workgroup takes rows i, i + RWG, ..., i + (R - 1) RWG of the workgroup's
// RWG * R; rows past n read the last row and are not stored. The loops over rows and lanes
// have constant bounds, so they unroll and the accumulators stay in registers. Each 4-element
// product is added to one running sum (and each block's minimum term after the block): this
// order keeps the near-tie greedy steps of llama.cpp's outputs on the same side.
@compute @workgroup_size(RWG)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) li: u32,
        @builtin(num_workgroups) nwg: vec3<u32>) {
    let row0 = (wg.x + wg.y * nwg.x) * RWG * R + li;
#ifdef ID
    // gpu.MatMulID for few tokens: grid z slice a is assignment a, one lane (LANES 1), its
    // expert's rows of the weight (matmul_io.inc's id_assign).
    if (!id_assign(wg.z)) {
        return;
    }
#else
    tok0 = wg.z * LANES;
    nt = min(LANES, p.n_tok - tok0);
#endif
    let nb = p.k / BS;
    var base0: array<u32, R>;
    for (var r = 0u; r < R; r++) {
#ifdef ID
        base0[r] = id_w0 + min(row0 + r * RWG, p.n - 1u) * nb * BW;
#else
        base0[r] = min(row0 + r * RWG, p.n - 1u) * nb * BW;
#endif
    }
    var acc = array<array<f32, LANES>, R>();
#ifdef BLOCK_DOT
    // One token: the type's own block loop (see dequant.inc's block_dot).
    for (var b = 0u; b < nb; b++) {
        var base: array<u32, R>;
        for (var r = 0u; r < R; r++) {
            base[r] = base0[r] + b * BW;
        }
        let s = block_dot(base, b * (BS / 4u));
        for (var r = 0u; r < R; r++) {
            acc[r][0] += s[r];
        }
    }
#else
    for (var b = 0u; b < nb; b++) {
        var base: array<u32, R>;
        for (var r = 0u; r < R; r++) {
            base[r] = base0[r] + b * BW;
        }
#ifdef XPACK_Q8
        // Each token's activation block for this weight block (XB = BS) and its scale, loaded
        // once for the block.
        var xb: array<u32, LANES>;
        var xd: array<f32, LANES>;
        for (var t = 0u; t < LANES; t++) {
            xb[t] = act_at(xrow(t), b);
            xd[t] = act_scale(xb[t]);
        }
#endif
#ifdef HDR
        var hw: array<Hdr, R>; // each row's block header, loaded once for its sub-blocks
        for (var r = 0u; r < R; r++) {
            hw[r] = hdr(base[r]);
        }
#endif
        // Scales decode once per sub-block; its SB/4 steps unroll.
        for (var j0 = 0u; j0 < BS; j0 += SB) {
            var sp: array<vec2<f32>, R>;
            for (var r = 0u; r < R; r++) {
#ifdef XSUM
                sp[r] = vec2<f32>(sb_params(base[r], j0).x, 0.0);
#else
#ifdef HDR
                sp[r] = sb_params_of(hw[r], j0);
#else
                sp[r] = sb_params(base[r], j0);
#endif
#endif
            }
            for (var jj = 0u; jj < SB; jj += 4u) {
                let xi = (b * BS + j0 + jj) / 4u;
                var xt: array<vec4<f32>, LANES>;
                for (var t = 0u; t < LANES; t++) {
#ifdef XPACK_Q8
                    xt[t] = act4(xb[t], xd[t], j0 + jj);
#else
                    xt[t] = xv(t, xi);
#endif
                }
                for (var r = 0u; r < R; r++) {
                    let wv = sb_q4(base[r], j0 + jj, sp[r]);
                    for (var t = 0u; t < LANES; t++) {
                        acc[r][t] += dot(wv, xt[t]);
                    }
                }
            }
        }
#ifdef XSUM
        for (var r = 0u; r < R; r++) {
            let mn = sb_params(base[r], 0u).y;
            for (var t = 0u; t < LANES; t++) {
                acc[r][t] += mn * xs[xrow(t) * nb + b];
            }
        }
#endif
    }
#endif
    for (var r = 0u; r < R; r++) {
        let row = row0 + r * RWG;
        for (var t = 0u; t < LANES; t++) {
            if (row < p.n && t < nt) {
                store(t, row, acc[r][t]);
            }
        }
    }
}
#else
// Cooperative variant: a 64 x 4 workgroup computes 4 rows, 64 invocations sharing each row.
#ifdef CHUNK_DOT
// xload is chunk_dot's reader: the activations of the token whose row starts at xrow_c.
var<private> xrow_c: u32;

fn xload(i: u32) -> vec4<f32> {
    return x[xrow_c + i];
}
#endif
const ROWS: u32 = 4u;
// ONE (decode, a single token): the token loops have the constant bound 1, so a GPU compiler
// keeps the one sum in a register instead of an array in local memory.
#ifdef ONE
const NT_MAX: u32 = 1u;
#else
const NT_MAX: u32 = MAXT;
#endif
var<workgroup> partial: array<f32, 2048>; // ROWS * MAXT * WG

#ifdef SUBGROUPS
// One-dimensional, as wgpu allows subgroup builtins only there; lid is the (64, 4) position.
@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) li: u32, @builtin(subgroup_size) sg_size: u32,
        @builtin(subgroup_invocation_id) sg_lane: u32) {
    let lid = vec2<u32>(li % WG, li / WG);
#else
@compute @workgroup_size(64, 4)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_id) lid: vec3<u32>) {
#endif
    let row = (wg.x + wg.y * nwg.x) * ROWS + lid.y;
#ifdef ID
    // gpu.MatMulID for few tokens (with ONE): grid z slice a is assignment a, its expert's rows
    // of the weight, its activation row lane_x[0] (matmul_io.inc's id_assign).
    let live = id_assign(wg.z) && row < p.n;
#else
    let live = row < p.n; // every invocation reaches the barriers, live or not
#endif
    let k4 = p.k / 4u;
#ifdef ID
    let base0 = id_w0 + row * (p.k / BS) * BW;
#else
    let base0 = row * (p.k / BS) * BW;
#endif
    let nt = min(p.n_tok, NT_MAX);
    var acc: array<f32, NT_MAX>;
#ifdef IDOT
    // Integer dot products (GPUs; the integer-block types, gpu.Device.IntDotFor, against Q8
    // activations packed by act_quant): each invocation takes whole blocks, neighbouring invocations neighbouring
    // blocks, and a block's products are exact int8 sums (dequant.inc's idot_block) scaled
    // once, as llama.cpp's vec_dot and its GPU mmvq kernels compute them.
    let nb = p.k / BS;
    for (var b = lid.x; live && b < nb; b += WG) {
        for (var t = 0u; t < nt; t++) {
#ifdef ID
            let xr = lane_x[0] + t;
#else
            let xr = p.x_row0 + t;
#endif
#ifdef XSUM
            let xsum = xs[xr * nb + b];
#else
            let xsum = 0.0;
#endif
            acc[t] += idot_block(base0 + b * BW, act_at(xr, b), xsum);
        }
    }
#else
#ifdef CHUNK_DOT
    // Q4_K: each invocation takes chunks of 32 weights (16 quant bytes, see chunk_dot),
    // neighbouring invocations neighbouring chunks.
    for (var ch = lid.x; live && ch < (p.k / BS) * 8u; ch += WG) {
        let b = ch / 8u;
        for (var t = 0u; t < nt; t++) {
#ifdef ID
            xrow_c = (lane_x[0] + t) * k4;
#else
            xrow_c = (p.x_row0 + t) * k4;
#endif
            acc[t] += chunk_dot(base0 + b * BW, ch % 8u, b * (BS / 4u));
        }
    }
#else
    // Neighbouring invocations take neighbouring 4-element groups, so their loads coalesce.
#ifndef XSUM
    // Four groups at once, WG apart: their weight loads are all in flight before the first
    // is used. One group at a time left a GPU's memory mostly idle (a few bytes in flight per
    // invocation), decode at 8% of an H100's copy bandwidth.
    // (Named variables, not arrays: a GPU compiler may keep a dynamically indexed array in
    // local memory.)
    var c = lid.x;
    for (; live && c + 3u * WG < k4; c += 4u * WG) {
        let w0 = dq4(base0 + (4u * c / BS) * BW, 4u * c % BS);
        let w1 = dq4(base0 + (4u * (c + WG) / BS) * BW, 4u * (c + WG) % BS);
        let w2 = dq4(base0 + (4u * (c + 2u * WG) / BS) * BW, 4u * (c + 2u * WG) % BS);
        let w3 = dq4(base0 + (4u * (c + 3u * WG) / BS) * BW, 4u * (c + 3u * WG) % BS);
        for (var t = 0u; t < nt; t++) {
#ifdef ID
            let xr = (lane_x[0] + t) * k4 + c;
#else
            let xr = (p.x_row0 + t) * k4 + c;
#endif
            acc[t] += dot(w0, x[xr]) + dot(w1, x[xr + WG]) + dot(w2, x[xr + 2u * WG]) + dot(w3, x[xr + 3u * WG]);
        }
    }
    for (; live && c < k4; c += WG) {
#else
    for (var c = lid.x; live && c < k4; c += WG) {
#endif
        let e = 4u * c;
        let base = base0 + (e / BS) * BW;
#ifdef XSUM
        let sp = sb_params(base, e % BS);
        let wv = sb_q4(base, e % BS, vec2<f32>(sp.x, 0.0));
        if (e % BS == 0u) {
            let mn = sp.y;
            for (var t = 0u; t < nt; t++) {
#ifdef ID
                acc[t] += mn * xs[(lane_x[0] + t) * (p.k / BS) + e / BS];
#else
                acc[t] += mn * xs[(p.x_row0 + t) * (p.k / BS) + e / BS];
#endif
            }
        }
#else
        let wv = dq4(base, e % BS);
#endif
        for (var t = 0u; t < nt; t++) {
#ifdef ID
            acc[t] += dot(wv, x[(lane_x[0] + t) * k4 + c]);
#else
            acc[t] += dot(wv, x[(p.x_row0 + t) * k4 + c]);
#endif
        }
    }
#endif
#endif
#ifdef SUBGROUPS
    // Each subgroup sums its lanes for each of the workgroup's rows (masked, as a subgroup may
    // be wider than a row), its first lane keeps the sums, and one invocation per row and token
    // adds its row's subgroup sums. Subgroups have 4 to 128 lanes, so at most 64 of them.
    let sg = li / sg_size;
    for (var t = 0u; t < nt; t++) {
        for (var r = 0u; r < ROWS; r++) {
            let s = subgroupAdd(select(0.0, acc[t], lid.y == r));
            if (sg_lane == 0u) {
                partial[(r * MAXT + t) * WG + sg] = s;
            }
        }
    }
    workgroupBarrier();
    if (live && lid.x < p.n_tok) {
        var sum = 0.0;
        for (var i = 0u; i < (WG * ROWS + sg_size - 1u) / sg_size; i++) {
            sum += partial[(lid.y * MAXT + lid.x) * WG + i];
        }
        store(lid.x, row, sum);
    }
#else
    let slot = lid.y * MAXT * WG;
    for (var t = 0u; t < nt; t++) {
        partial[slot + t * WG + lid.x] = acc[t];
    }
    workgroupBarrier();
    for (var stride = WG / 2u; stride > 0u; stride /= 2u) {
        if (lid.x < stride) {
            for (var t = 0u; t < nt; t++) {
                partial[slot + t * WG + lid.x] += partial[slot + t * WG + lid.x + stride];
            }
        }
        workgroupBarrier();
    }
    if (live && lid.x < p.n_tok) {
        store(lid.x, row, partial[slot + lid.x * WG]);
    }
#endif
}
#endif

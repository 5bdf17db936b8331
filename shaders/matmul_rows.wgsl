// CPU adapters' matrix product for batches (5 tokens and more): y[y_row0 + t, y_col0 + r] (+)=
// sum_k x[x_row0 + t, k] * W[r, k], each invocation 4 rows of W and 8 tokens, the tokens in
// two groups of four (quads). W is any type of dequant.inc; x is f32 rows or act_quant's
// PACKED layouts (XPACK_*), which give exactly the f32 values act_quant would have written.
// ADD accumulates into y; SCALED multiplies the products by p.scale first; XSUM (Q4_1, Q5_1) applies each block's minimum to the Q8_1 block
// sums in xs, as matvec does.
//
// Why it is shaped so: lavapipe runs 8 invocations as the lanes of one SIMD register, and it
// keeps a WGSL array that loops index in memory, every write to it masked: matvec's
// row-per-thread loop, the same tile held in arrays, spends most of its time there. Here every
// value is a named vector: a quad's activations for 4 elements are one mat4x4 (column t:
// token t's, the same for every invocation, so each word is one shared-address load, and
// shared by the 4 rows), a row's 4 weights one vec4 (one load per invocation, shared by the 8
// tokens), and each row-quad sum a vec4. On lavapipe this takes the 134M Q4_K_M model's
// prompt products about 1.5x faster than the array-held tile (BenchmarkMatMulPrompt).

//#include matmul_io.inc
//#include dequant.inc

// Invocations per workgroup: four of lavapipe's 8-wide SIMD batches.
const RWG: u32 = 32u;

// quad_at is where the 4 tokens of quad q have their activations for weight block b (in x's
// units); quad_d their Q8 block scales (1 for other activations).
fn quad_at(q: u32, b: u32) -> vec4<u32> {
    return vec4<u32>(act_at(xrow(4u * q), b), act_at(xrow(4u * q + 1u), b),
                     act_at(xrow(4u * q + 2u), b), act_at(xrow(4u * q + 3u), b));
}

fn quad_d(at: vec4<u32>) -> vec4<f32> {
    return vec4<f32>(act_scale(at.x), act_scale(at.y), act_scale(at.z), act_scale(at.w));
}

// acts is elements j .. j + 3 of the block (j a multiple of 4) for the quad's 4 tokens:
// column t is token t's.
fn acts(at: vec4<u32>, d: vec4<f32>, j: u32) -> mat4x4<f32> {
    return mat4x4<f32>(act4(at.x, d.x, j), act4(at.y, d.y, j), act4(at.z, d.z, j), act4(at.w, d.w, j));
}

#ifdef XSUM
// sums is the quad's Q8_1 block sums for block b.
fn sums(q: u32, b: u32) -> vec4<f32> {
    let nb = p.k / BS;
    return vec4<f32>(xs[xrow(4u * q) * nb + b], xs[xrow(4u * q + 1u) * nb + b],
                     xs[xrow(4u * q + 2u) * nb + b], xs[xrow(4u * q + 3u) * nb + b]);
}
#endif

// params is the sub-block's scale and minimum, from the block header where the type has one.
#ifdef HDR
fn params(h: Hdr, base: u32, j0: u32) -> vec2<f32> {
    return sb_params_of(h, j0);
}
#else
alias Hdr = u32;

fn hdr(base: u32) -> Hdr {
    return 0u;
}

fn params(h: Hdr, base: u32, j0: u32) -> vec2<f32> {
    return sb_params(base, j0);
}
#endif

// mac adds the row's products with the quad's tokens to a, each token's as dot() orders it:
// the arithmetic of matvec's row-per-thread loop, so a prompt's rows come out as its tokens
// one at a time do (bit for bit where both read the same activations).
fn mac(a: vec4<f32>, m: mat4x4<f32>, v: vec4<f32>) -> vec4<f32> {
    return a + vec4<f32>(dot(v, m[0]), dot(v, m[1]), dot(v, m[2]), dot(v, m[3]));
}

// store8 writes a row's sums with the 8 tokens of the slice (those of the batch: nt).
fn store8(row: u32, lo: vec4<f32>, hi: vec4<f32>) {
    if (row < p.n) {
        let v = array<f32, 8>(lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w);
        for (var t = 0u; t < nt; t++) {
            store(t, row, v[t]);
        }
    }
}

// A row's per-block state: its block's first word and header.
struct Row {
    base: u32,
    h: Hdr,
}

fn row_at(base0: u32, b: u32) -> Row {
    let base = base0 + b * BW;
    return Row(base, hdr(base));
}

// sub is the row's sub-block parameters (XSUM: the scale alone, the minimum going to the sums).
fn sub(r: Row, j0: u32) -> vec2<f32> {
#ifdef XSUM
    return vec2<f32>(params(r.h, r.base, j0).x, 0.0);
#else
    return params(r.h, r.base, j0);
#endif
}

// Invocation i of a workgroup takes rows i + RWG r (r < 4) of the workgroup's 4 RWG and the 8
// tokens of grid slice z; rows past n read the last row and are not stored.
@compute @workgroup_size(RWG)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) li: u32,
        @builtin(num_workgroups) nwg: vec3<u32>) {
    let row0 = (wg.x + wg.y * nwg.x) * 4u * RWG + li;
#ifdef ID
    // gpu.MatMulID for batches: grid z slice s takes the tile in slot s of gpu.MoEGroup's plan,
    // up to 8 assignments of one expert, whose rows of the weight each invocation reads once
    // for them (matmul_io.inc's id_tile); empty slots, or tiles of another chunk's experts,
    // return at once.
    if (!id_tile(wg.z)) {
        return;
    }
    let nb = p.k / BS;
    let base0 = id_w0 + min(row0, p.n - 1u) * nb * BW;
    let base1 = id_w0 + min(row0 + RWG, p.n - 1u) * nb * BW;
    let base2 = id_w0 + min(row0 + 2u * RWG, p.n - 1u) * nb * BW;
    let base3 = id_w0 + min(row0 + 3u * RWG, p.n - 1u) * nb * BW;
#else
    tok0 = wg.z * 8u; // grid z: a slice of 8 tokens each
    nt = min(8u, p.n_tok - tok0);
    let nb = p.k / BS;
    let base0 = min(row0, p.n - 1u) * nb * BW;
    let base1 = min(row0 + RWG, p.n - 1u) * nb * BW;
    let base2 = min(row0 + 2u * RWG, p.n - 1u) * nb * BW;
    let base3 = min(row0 + 3u * RWG, p.n - 1u) * nb * BW;
#endif
    // a<row><quad>: the sums of row r with the quad's 4 tokens.
    var a00 = vec4<f32>(0.0);
    var a01 = vec4<f32>(0.0);
    var a10 = vec4<f32>(0.0);
    var a11 = vec4<f32>(0.0);
    var a20 = vec4<f32>(0.0);
    var a21 = vec4<f32>(0.0);
    var a30 = vec4<f32>(0.0);
    var a31 = vec4<f32>(0.0);
    for (var b = 0u; b < nb; b++) {
        let r0 = row_at(base0, b);
        let r1 = row_at(base1, b);
        let r2 = row_at(base2, b);
        let r3 = row_at(base3, b);
        let at0 = quad_at(0u, b);
        let at1 = quad_at(1u, b);
        let d0 = quad_d(at0);
        let d1 = quad_d(at1);
        // Scales decode once per sub-block.
        for (var j0 = 0u; j0 < BS; j0 += SB) {
            let s0 = sub(r0, j0);
            let s1 = sub(r1, j0);
            let s2 = sub(r2, j0);
            let s3 = sub(r3, j0);
            for (var jj = 0u; jj < SB; jj += 4u) {
                let j = j0 + jj;
                let x0 = acts(at0, d0, j);
                let x1 = acts(at1, d1, j);
                let v0 = sb_q4(r0.base, j, s0);
                a00 = mac(a00, x0, v0);
                a01 = mac(a01, x1, v0);
                let v1 = sb_q4(r1.base, j, s1);
                a10 = mac(a10, x0, v1);
                a11 = mac(a11, x1, v1);
                let v2 = sb_q4(r2.base, j, s2);
                a20 = mac(a20, x0, v2);
                a21 = mac(a21, x1, v2);
                let v3 = sb_q4(r3.base, j, s3);
                a30 = mac(a30, x0, v3);
                a31 = mac(a31, x1, v3);
            }
        }
#ifdef XSUM
        let m0 = sums(0u, b);
        let m1 = sums(1u, b);
        a00 += sb_params(r0.base, 0u).y * m0;
        a01 += sb_params(r0.base, 0u).y * m1;
        a10 += sb_params(r1.base, 0u).y * m0;
        a11 += sb_params(r1.base, 0u).y * m1;
        a20 += sb_params(r2.base, 0u).y * m0;
        a21 += sb_params(r2.base, 0u).y * m1;
        a30 += sb_params(r3.base, 0u).y * m0;
        a31 += sb_params(r3.base, 0u).y * m1;
#endif
    }
    store8(row0, a00, a01);
    store8(row0 + RWG, a10, a11);
    store8(row0 + 2u * RWG, a20, a21);
    store8(row0 + 3u * RWG, a30, a31);
}

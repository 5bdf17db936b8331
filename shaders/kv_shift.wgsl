// Moves n_rows cached positions of one sequence, src0.. to dst0.. (dst0 < src0), in every kv
// head of one layer: values are copied, keys are turned by the RoPE angle of the distance
// (delta = dst0 - src0) so they read as if computed at their new positions. This is how the
// context shift and cache reuse keep a sequence's cache without recomputing it. Rows are found
// through pos as in the other cache kernels (kv_row.inc, with one "token": pos[0] unused,
// pos[1] the sequence's first row or page-table offset). The host splits moves longer than the
// distance into chunks of at most |delta| rows, so no chunk reads a row it overwrites.
// Define KV_F16 for an f16 cache, NEOX for GPT-NeoX pairing, FACTORS for frequency divisors.

struct Params {
    n_tokens: u32,   // 1: the pos layout of kv_row.inc
    n_kv_head: u32,
    head_dim: u32,
    n_rot: u32,
    freq_base: f32,
    freq_scale: f32,
    ext_factor: f32,
    attn_factor: f32, // set by the host so that the YaRN magnitude scale cancels: a pure turn
    corr_lo: f32,
    corr_hi: f32,
    page_bits: u32,
    n_rows: u32,
    src0: u32,
    dst0: u32,
    delta: i32,
    theta_scale: f32, // CPU_MATH: powf(freq_base, -2 / n_rot), ggml's factor between pairs
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> pos: array<u32>;
#ifdef KV_F16
@group(0) @binding(2) var<storage, read_write> kc: array<u32>;  // (n_ctx, n_kv_head, head_dim / 2)
@group(0) @binding(3) var<storage, read_write> vc: array<u32>;
#else
@group(0) @binding(2) var<storage, read_write> kc: array<f32>;  // (n_ctx, n_kv_head, head_dim)
@group(0) @binding(3) var<storage, read_write> vc: array<f32>;
#endif
#ifdef FACTORS
@group(0) @binding(4) var<storage, read> factors: array<f32>;   // (n_rot / 2)
#endif

//#include kv_row.inc
//#include rope.inc
//#include f16_round.inc

fn k_get(off: u32) -> vec2<f32> {
#ifdef KV_F16
    return unpack2x16float(kc[off / 2u]);
#else
    return vec2<f32>(kc[off], kc[off + 1u]);
#endif
}

fn k_put(off: u32, v: vec2<f32>) {
#ifdef KV_F16
    kc[off / 2u] = pack_f16(v);
#else
    kc[off] = v.x;
    kc[off + 1u] = v.y;
#endif
}

fn v_move(src: u32, dst: u32) {
#ifdef KV_F16
    vc[dst / 2u] = vc[src / 2u];
#else
    vc[dst] = vc[src];
    vc[dst + 1u] = vc[src + 1u];
#endif
}

fn turn(v: vec2<f32>, i: u32) -> vec2<f32> {
    return rope_turn(v, f32(p.delta), i, p.attn_factor);
}

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    ns_zero = u32(p.head_dim == 0u); // never 1 where any invocation works (ggml_math.inc)
    // One invocation per pair of dimensions of every kv head of every moved row.
    let half_d = p.head_dim / 2u;
    let i = gid.x + gid.y * nwg.x * 64u;
    if (i >= p.n_rows * p.n_kv_head * half_d) {
        return;
    }
    let r = i / (p.n_kv_head * half_d);
    let kvh = (i / half_d) % p.n_kv_head;
    let u = i % half_d;
    let src = (kv_row(0u, p.src0 + r) * p.n_kv_head + kvh) * p.head_dim;
    let dst = (kv_row(0u, p.dst0 + r) * p.n_kv_head + kvh) * p.head_dim;
    v_move(src + 2u * u, dst + 2u * u);
#ifdef NEOX
    let h = p.n_rot / 2u;
    if (u < p.n_rot / 4u) {
        let a = k_get(src + 2u * u);
        let b = k_get(src + 2u * u + h);
        let r0 = turn(vec2<f32>(a.x, b.x), 2u * u);
        let r1 = turn(vec2<f32>(a.y, b.y), 2u * u + 1u);
        k_put(dst + 2u * u, vec2<f32>(r0.x, r1.x));
        k_put(dst + 2u * u + h, vec2<f32>(r0.y, r1.y));
        return;
    }
    if (u < h) {
        return; // the second halves of the quads
    }
    k_put(dst + 2u * u, k_get(src + 2u * u));
#else
    var k = k_get(src + 2u * u);
    if (2u * u < p.n_rot) {
        k = turn(k, u);
    }
    k_put(dst + 2u * u, k);
#endif
}

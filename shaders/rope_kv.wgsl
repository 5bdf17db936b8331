// The step between the QKV projection and attention, in one dispatch: each row of qkv holds
// [q (n_head x head_dim) | k (n_kv_head x head_dim) | v (n_kv_head x head_dim)] for one token.
// Rotary position embedding (llama's "normal" RoPE: adjacent pairs of the first n_rot
// dimensions of a head turn by pos * freq_base^(-2i/n_rot)) is applied to q in place and to k
// on its way into the cache row holding position pos[t] of the token's sequence (kv_row.inc); v is
// copied into the cache unchanged.
// Define KV_F16 stores the cache as f16 pairs (one u32 per pair), else f32. NEOX pairs element
// j with j + n_rot/2 (GPT-NeoX style, n_rot a multiple of 4) instead of adjacent elements.
// BIAS adds the projection bias (one row of the qkv width) first; FACTORS divides each
// frequency's angle by its factor (ggml's freq_factors). The two are never combined.
// MROPE (with NEOX) is ggml's multi-section RoPE (Qwen2-VL): each token has four position
// components in mpos (t, h, w, e), and pair i turns by the component its section names (i
// modulo the sections' total: the first sect0 pairs t, the next sect1 h, then sect2 w, the
// rest e). With mrope_vision (ggml's vision mode, the ViT's 2D RoPE) the frequency index
// restarts at each section and the angles are spread over n_rot / 2 dimensions.

struct Params {
    n_tokens: u32,
    n_head: u32,
    n_kv_head: u32,
    head_dim: u32,
    n_rot: u32,
    freq_base: f32,
    freq_scale: f32, // linear RoPE scaling: positions are multiplied by it
    ext_factor: f32, // YaRN: > 0 blends extrapolated and interpolated angles per frequency
    attn_factor: f32,// YaRN: multiplies cos and sin
    corr_lo: f32,    // YaRN: the dimension range over which the blend ramps
    corr_hi: f32,
    page_bits: u32,  // cache addressing (kv_row.inc)
    sect0: u32,      // MROPE: the pairs of each section
    sect1: u32,
    sect2: u32,
    sect3: u32,
    mrope_vision: u32,
    theta_scale: f32, // CPU_MATH: powf(freq_base, -2 / n_rot), ggml's factor between pairs
    table_rows: u32,  // ROPE_TABLE: the positions the table holds
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> qkv: array<f32>; // (n_tokens, n_head + 2 n_kv_head, head_dim)
@group(0) @binding(2) var<storage, read> pos: array<u32>;       // positions, then cache addressing (kv_row.inc)
#ifdef KV_F16
@group(0) @binding(3) var<storage, read_write> kc: array<u32>;  // (n_ctx, n_kv_head, head_dim / 2)
@group(0) @binding(4) var<storage, read_write> vc: array<u32>;
#else
@group(0) @binding(3) var<storage, read_write> kc: array<f32>;  // (n_ctx, n_kv_head, head_dim)
@group(0) @binding(4) var<storage, read_write> vc: array<f32>;
#endif
#ifdef BIAS
@group(0) @binding(5) var<storage, read> bias: array<f32>;      // (n_head + 2 n_kv_head, head_dim)
#endif
#ifdef MROPE
#ifdef BIAS
@group(0) @binding(6) var<storage, read> mpos: array<i32>;      // (n_tokens, 4): t, h, w, e
#else
@group(0) @binding(5) var<storage, read> mpos: array<i32>;
#endif
#endif
#ifdef FACTORS
// Per-frequency divisors of the angle (Llama 3.1's rope_freqs), one per rotated pair.
@group(0) @binding(5) var<storage, read> factors: array<f32>;   // (n_rot / 2)
#endif
#ifdef ROPE_TABLE
// ROPE_TABLE (gpu.Rope.Table, with CPU_MATH): cos and sin of every pair at every position as
// llama.cpp's CPU rope takes them (its frequency factors in them), after the other bindings.
#ifdef BIAS
#ifdef MROPE
@group(0) @binding(7) var<storage, read> rope_t: array<vec2<f32>>; // (table_rows, n_rot / 2)
#else
@group(0) @binding(6) var<storage, read> rope_t: array<vec2<f32>>;
#endif
#else
#ifdef MROPE
@group(0) @binding(6) var<storage, read> rope_t: array<vec2<f32>>;
#else
@group(0) @binding(5) var<storage, read> rope_t: array<vec2<f32>>;
#endif
#endif

// rope_at turns v by pair i's angle at position at from the table (rope_turn past its rows),
// x0 cos - x1 sin and x0 sin + x1 cos with their first products fused, as GCC contracts them.
fn rope_at(v: vec2<f32>, at: u32, i: u32) -> vec2<f32> {
    if (at >= p.table_rows) {
        return rope_turn(v, f32(at), i, p.attn_factor);
    }
    let cs = rope_t[at * (p.n_rot / 2u) + i];
    return vec2<f32>(fma1(v.x, cs.x, -ns_keep(v.y * cs.y)), fma1(v.x, cs.y, ns_keep(v.y * cs.x)));
}
#endif

fn store_pair(is_k: bool, off: u32, v: vec2<f32>) {
#ifdef KV_F16
    if (is_k) {
        kc[off / 2u] = pack_f16(v);
    } else {
        vc[off / 2u] = pack_f16(v);
    }
#else
    if (is_k) {
        kc[off] = v.x;
        kc[off + 1u] = v.y;
    } else {
        vc[off] = v.x;
        vc[off + 1u] = v.y;
    }
#endif
}

//#include rope.inc
//#include f16_round.inc

// rotate turns v by the angle of frequency i at token t's position.
fn rotate(v: vec2<f32>, t: u32, i: u32) -> vec2<f32> {
#ifdef MROPE
    let at = mpos[4u * t + mrope_section(i)];
#else
    let at = pos[t];
#endif
#ifdef ROPE_TABLE
    return rope_at(v, u32(at), i);
#else
    return rope_turn(v, f32(at), i, p.attn_factor);
#endif
}

// load reads two adjacent values of a head slot, with the projection bias added (BIAS).
fn load(row: u32, slot: u32, e: u32) -> vec2<f32> {
    let o = (row * (p.n_head + 2u * p.n_kv_head) + slot) * p.head_dim + e;
    var v = vec2<f32>(qkv[o], qkv[o + 1u]);
#ifdef BIAS
    let b = slot * p.head_dim + e;
    v += vec2<f32>(bias[b], bias[b + 1u]);
#endif
    return v;
}

//#include kv_row.inc

// save writes two adjacent values back to q (in place) or into the cache row of position pos[t].
fn save(t: u32, slot: u32, e: u32, v: vec2<f32>) {
    if (slot < p.n_head) {
        let o = (t * (p.n_head + 2u * p.n_kv_head) + slot) * p.head_dim + e;
        qkv[o] = v.x;
        qkv[o + 1u] = v.y;
        return;
    }
    let is_v = slot >= p.n_head + p.n_kv_head;
    let kvh = select(slot - p.n_head, slot - p.n_head - p.n_kv_head, is_v);
    store_pair(!is_v, (kv_row(t, pos[t]) * p.n_kv_head + kvh) * p.head_dim + e, v);
}

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    ns_zero = u32(p.head_dim == 0u); // never 1 where any invocation works (ggml_math.inc)
    // One invocation per pair of dimensions of every head slot of every token; with NEOX the
    // first n_rot / 4 invocations of a head each take two pairs (a quad), so every rotated
    // element and its partner half a rotation away belong to one invocation.
    let half_d = p.head_dim / 2u;
    let slots = p.n_head + 2u * p.n_kv_head;
    let i = gid.x + gid.y * nwg.x * 64u;
    if (i >= p.n_tokens * slots * half_d) {
        return;
    }
    let t = i / (slots * half_d);
    let slot = (i / half_d) % slots;
    let u = i % half_d;
    let rot = slot < p.n_head + p.n_kv_head; // q and k rotate, v does not
#ifdef NEOX
    // GPT-NeoX style: element j pairs with j + n_rot / 2.
    let h = p.n_rot / 2u;
    if (u < p.n_rot / 4u) {
        let a = load(t, slot, 2u * u);
        let b = load(t, slot, 2u * u + h);
        var ya = a;
        var yb = b;
        if (rot) {
            let r0 = rotate(vec2<f32>(a.x, b.x), t, 2u * u);
            let r1 = rotate(vec2<f32>(a.y, b.y), t, 2u * u + 1u);
            ya = vec2<f32>(r0.x, r1.x);
            yb = vec2<f32>(r0.y, r1.y);
        }
        save(t, slot, 2u * u, ya);
        save(t, slot, 2u * u + h, yb);
        return;
    }
    if (u < h) {
        return; // the second halves of the quads
    }
    save(t, slot, 2u * u, load(t, slot, 2u * u));
#else
    var v = load(t, slot, 2u * u);
    if (rot && 2u * u < p.n_rot) {
        v = rotate(v, t, u);
    }
    save(t, slot, 2u * u, v);
#endif
}

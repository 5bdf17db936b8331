// The scores of barrier-free decoding at long contexts (gpu.Recorder.Attention with
// AttnParams.Scores): s = capped(q16(q) . k * scale) for each (token, head, key) the token
// sees, into scores[(t * n_head + h) * score_stride + j], for attention.wgsl's PRESCORED
// variant to take instead of recomputing them once per group of four output dimensions. The
// dot product is k_dot's (attention_f16.inc), so the outputs are the unprescored kernel's bit
// for bit. One invocation per score; its loops are head_dim / 2 at most.

//#include attention_io.inc
@group(0) @binding(6) var<storage, read_write> key_scores: array<f32>; // (n_tokens, n_head, score_stride)

const WG: u32 = 64u;
const MAXD: u32 = 256u;
const NEG: f32 = -3.0e38;
//#include attention.inc
//#include attention_f16.inc

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let idx = gid.x + gid.y * nwg.x * WG;
    let j = idx % p.score_stride;
    let th = idx / p.score_stride; // t * n_head + h
    if (th >= p.n_tokens * p.n_head) {
        return;
    }
    let t = th / p.n_head;
    let h = th % p.n_head;
    if (j < first_key(pos[t]) || j >= key_end(t)) {
        return;
    }
    ns_zero = p.zero;
    let d = p.head_dim;
    load_qh(t * p.q_stride + h * d);
    let off = kv_row(t, j) * p.n_kv_head * d + (h / (p.n_head / p.n_kv_head)) * d;
    key_scores[idx] = capped(k_dot(off) * p.scale);
}

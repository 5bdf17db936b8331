// Causal attention over the GPU-resident KV cache with grouped-query heads:
// out[t, h, :] = softmax_j(q[t, h, :] . k[j, h / group, :] * scale) v[j, h / group, :] for the
// cache rows j = 0 .. pos[t]. One workgroup per (head, token); keys are processed 64 at a time
// with an online (running max) softmax, so any context length fits in fixed workgroup memory.

struct Params {
    n_tokens: u32,
    n_head: u32,
    n_kv_head: u32,
    head_dim: u32, // at most 256
    scale: f32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> q: array<f32>;         // (n_tokens, n_head, head_dim)
@group(0) @binding(2) var<storage, read> kc: array<f32>;        // (n_ctx, n_kv_head, head_dim)
@group(0) @binding(3) var<storage, read> vc: array<f32>;        // (n_ctx, n_kv_head, head_dim)
@group(0) @binding(4) var<storage, read> pos: array<u32>;       // (n_tokens)
@group(0) @binding(5) var<storage, read_write> out: array<f32>; // (n_tokens, n_head, head_dim)

const WG: u32 = 64u;
const MAXD: u32 = 256u;
const NEG: f32 = -3.0e38;
var<workgroup> qs: array<f32, MAXD>;
var<workgroup> scores: array<f32, WG>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let h = wg.x;
    let t = wg.y;
    let d = p.head_dim;
    let kvh = h / (p.n_head / p.n_kv_head);
    let q_off = (t * p.n_head + h) * d;
    for (var i = lid.x; i < d; i += WG) {
        qs[i] = q[q_off + i];
    }
    workgroupBarrier();

    let n_keys = pos[t] + 1u;
    let kv_stride = p.n_kv_head * d;
    var m = NEG;
    var l = 0.0;
    var acc: array<f32, 4>; // dims lid.x, lid.x + 64, ... (MAXD / WG)
    for (var j0 = 0u; j0 < n_keys; j0 += WG) {
        let j = j0 + lid.x;
        var s = NEG;
        if (j < n_keys) {
            let k_off = j * kv_stride + kvh * d;
            var dot = 0.0;
            for (var i = 0u; i < d; i++) {
                dot += qs[i] * kc[k_off + i];
            }
            s = dot * p.scale;
        }
        scores[lid.x] = s;
        workgroupBarrier();
        let count = min(WG, n_keys - j0);
        var cmax = NEG;
        for (var i = 0u; i < count; i++) {
            cmax = max(cmax, scores[i]);
        }
        let m_new = max(m, cmax);
        let corr = exp(m - m_new);
        l *= corr;
        for (var a = 0u; a < 4u; a++) {
            acc[a] *= corr;
        }
        for (var i = 0u; i < count; i++) {
            let pr = exp(scores[i] - m_new);
            l += pr;
            let v_off = (j0 + i) * kv_stride + kvh * d;
            for (var a = 0u; a < 4u; a++) {
                let dim = lid.x + a * WG;
                if (dim < d) {
                    acc[a] += pr * vc[v_off + dim];
                }
            }
        }
        m = m_new;
        workgroupBarrier();
    }
    for (var a = 0u; a < 4u; a++) {
        let dim = lid.x + a * WG;
        if (dim < d) {
            out[q_off + dim] = acc[a] / l;
        }
    }
}

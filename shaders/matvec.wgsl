// Matrix-vector product for a few tokens: y[t, r] = sum_k x[x_row0 + t, k] * W[r, k]
// (ggml's mul_mat with W as src0). One workgroup per output row; the weight row is read once
// for all tokens. Defines: W_F16 (weights are packed f16 pairs), ADD (accumulate into y: the
// residual add fused into the projection epilogue), ROW_PER_THREAD (each invocation computes
// whole rows with no workgroup barriers: what CPU adapters such as lavapipe run fastest, where
// a barrier costs far more than a reduction saves). k must be even.

struct Params {
    k: u32,       // row length (input features)
    n: u32,       // rows (output features)
    t: u32,       // tokens, at most MAXT
    x_row0: u32,  // first row of x to read
    y_row0: u32,  // first row of y to write (a token group of a longer batch)
}

@group(0) @binding(0) var<uniform> p: Params;
#ifdef W_F16
@group(0) @binding(1) var<storage, read> w: array<u32>;       // (n, k) f16 pairs
#else
@group(0) @binding(1) var<storage, read> w: array<f32>;       // (n, k)
#endif
@group(0) @binding(2) var<storage, read> x: array<f32>;       // (x_row0 + t, k)
@group(0) @binding(3) var<storage, read_write> y: array<f32>; // (t, n)

const WG: u32 = 64u;
const MAXT: u32 = 8u;
var<workgroup> partial: array<f32, 512>; // WG * MAXT

fn load_w2(pair: u32) -> vec2<f32> {
#ifdef W_F16
    return unpack2x16float(w[pair]);
#else
    return vec2<f32>(w[2u * pair], w[2u * pair + 1u]);
#endif
}

#ifdef ROW_PER_THREAD
@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let row = gid.x + gid.y * nwg.x * WG;
    if (row >= p.n) {
        return;
    }
    let half_k = p.k / 2u;
    let wbase = row * half_k;
    var acc: array<f32, MAXT>;
    for (var i = 0u; i < half_k; i++) {
        let wv = load_w2(wbase + i);
        for (var t = 0u; t < p.t; t++) {
            let xb = (p.x_row0 + t) * p.k + 2u * i;
            acc[t] += wv.x * x[xb] + wv.y * x[xb + 1u];
        }
    }
    for (var t = 0u; t < p.t; t++) {
        let o = (p.y_row0 + t) * p.n + row;
#ifdef ADD
        y[o] += acc[t];
#else
        y[o] = acc[t];
#endif
    }
}
#else
@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_id) lid: vec3<u32>) {
    let row = wg.x + wg.y * nwg.x;
    if (row >= p.n) {
        return;
    }
    let half_k = p.k / 2u;
    let wbase = row * half_k;
    var acc: array<f32, MAXT>;
    for (var i = lid.x; i < half_k; i += WG) {
        let wv = load_w2(wbase + i);
        for (var t = 0u; t < p.t; t++) {
            let xb = (p.x_row0 + t) * p.k + 2u * i;
            acc[t] += wv.x * x[xb] + wv.y * x[xb + 1u];
        }
    }
    for (var t = 0u; t < p.t; t++) {
        partial[t * WG + lid.x] = acc[t];
    }
    workgroupBarrier();
    for (var stride = WG / 2u; stride > 0u; stride /= 2u) {
        if (lid.x < stride) {
            for (var t = 0u; t < p.t; t++) {
                partial[t * WG + lid.x] += partial[t * WG + lid.x + stride];
            }
        }
        workgroupBarrier();
    }
    if (lid.x < p.t) {
        let o = (p.y_row0 + lid.x) * p.n + row;
#ifdef ADD
        y[o] += partial[lid.x * WG];
#else
        y[o] = partial[lid.x * WG];
#endif
    }
}
#endif

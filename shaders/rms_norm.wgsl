// RMSNorm with the weight multiply fused: out[r, :] = x[r, :] / sqrt(mean(x[r, :]^2) + eps) * w.
// One workgroup of WG (a define, a power of two) invocations per row.

struct Params {
    n: u32,     // row length
    rows: u32,
    eps: f32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;         // (rows, n)
@group(0) @binding(2) var<storage, read> w: array<f32>;         // (n)
@group(0) @binding(3) var<storage, read_write> out: array<f32>; // (rows, n)

var<workgroup> partial: array<f32, WG>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_id) lid: vec3<u32>) {
    let row = wg.x + wg.y * nwg.x;
    if (row >= p.rows) {
        return;
    }
    let base = row * p.n;
    var s = 0.0;
    for (var i = lid.x; i < p.n; i += WG) {
        let v = x[base + i];
        s += v * v;
    }
    partial[lid.x] = s;
    workgroupBarrier();
    for (var stride = WG / 2u; stride > 0u; stride /= 2u) {
        if (lid.x < stride) {
            partial[lid.x] += partial[lid.x + stride];
        }
        workgroupBarrier();
    }
    let scale = inverseSqrt(partial[0] / f32(p.n) + p.eps);
    for (var i = lid.x; i < p.n; i += WG) {
        out[base + i] = x[base + i] * scale * w[i];
    }
}

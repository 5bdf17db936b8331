// LayerNorm with weight and bias (BERT): out[r, :] = (x[r, :] - mean) / sqrt(var + eps) * w + b,
// one workgroup per row.

struct Params {
    n: u32,     // row length
    rows: u32,
    eps: f32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;         // (rows, n)
@group(0) @binding(2) var<storage, read> w: array<f32>;         // (n)
@group(0) @binding(3) var<storage, read> b: array<f32>;         // (n)
@group(0) @binding(4) var<storage, read_write> out: array<f32>; // (rows, n)

const WG: u32 = 64u;
var<workgroup> partial: array<f32, WG>;

fn row_sum(v: f32, lid: u32) -> f32 {
    partial[lid] = v;
    workgroupBarrier();
    for (var stride = WG / 2u; stride > 0u; stride /= 2u) {
        if (lid < stride) {
            partial[lid] += partial[lid + stride];
        }
        workgroupBarrier();
    }
    let total = partial[0];
    workgroupBarrier();
    return total;
}

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
        s += x[base + i];
    }
    let mean = row_sum(s, lid.x) / f32(p.n);
    var ss = 0.0;
    for (var i = lid.x; i < p.n; i += WG) {
        let d = x[base + i] - mean;
        ss += d * d;
    }
    let scale = inverseSqrt(row_sum(ss, lid.x) / f32(p.n) + p.eps);
    for (var i = lid.x; i < p.n; i += WG) {
        out[base + i] = (x[base + i] - mean) * scale * w[i] + b[i];
    }
}

// RMSNorm with the weight multiply fused: out[r, :] = x[r, :] / sqrt(mean(x[r, :]^2) + eps) * w.
// One workgroup of WG (a define, a power of two) invocations per row. LORA_A also writes the
// normalised row's LoRA products t[r, j] = sum_i A[j, i] * out[r, i] (j < rank), for the
// projection that reads out to add its adapter's B·t in its epilogue; with ACT_F16 (ACT_BF16)
// out is rounded to halves (bfloat16) for the product and so is t, as llama.cpp rounds a half
// (bfloat16) weight's activations.

struct Params {
    n: u32,     // row length
    rows: u32,
    eps: f32,
    rank: u32,  // LORA_A: A's rows
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;         // (rows, n)
@group(0) @binding(2) var<storage, read> w: array<f32>;         // (n)
@group(0) @binding(3) var<storage, read_write> out: array<f32>; // (rows, n)

#ifdef LORA_A
@group(0) @binding(4) var<storage, read> a: array<f32>;        // (rank, n)
@group(0) @binding(5) var<storage, read_write> t: array<f32>;  // (rows, rank)
#endif
#ifdef ACT_F16
//#include f16_round.inc
#endif

var<workgroup> partial: array<f32, WG>;

// act rounds a LoRA product's input as the adapter's type asks.
fn act(v: f32) -> f32 {
#ifdef ACT_F16
    return unpack2x16float(f16_bits(v)).x;
#else
#ifdef ACT_BF16
    let u = bitcast<u32>(v);
    return bitcast<f32>((u + 0x7FFFu + ((u >> 16u) & 1u)) & 0xFFFF0000u);
#else
    return v;
#endif
#endif
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
#ifdef LORA_A
    storageBarrier(); // the row written, for every invocation
    for (var j = lid.x; j < p.rank; j += WG) {
        var s = 0.0;
        for (var i = 0u; i < p.n; i++) {
            s += act(out[base + i]) * a[j * p.n + i];
        }
        t[row * p.rank + j] = act(s);
    }
#endif
}

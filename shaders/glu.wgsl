// SiLU-gated linear unit of the llama FFN, in place: gate[i] = silu(gate[i]) * up[i].

struct Params {
    n: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> gate: array<f32>; // (n)
@group(0) @binding(2) var<storage, read> up: array<f32>;         // (n)

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * 64u;
    if (i >= p.n) {
        return;
    }
    let g = gate[i];
    gate[i] = g / (1.0 + exp(-g)) * up[i];
}

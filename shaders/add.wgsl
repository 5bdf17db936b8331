// Residual add, in place: a[i] += b[i]. BIAS first adds a bias repeating every width values
// (a projection's, gpt-oss's attn_output): a[i] += b[i] + bias[i % width], rounded as the two
// adds are, the projection's output with its bias, then the residual.

struct Params {
    n: u32,
    width: u32, // BIAS: the bias's length
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> a: array<f32>; // (n)
@group(0) @binding(2) var<storage, read> b: array<f32>;       // (n)
#ifdef BIAS
@group(0) @binding(3) var<storage, read> bias: array<f32>;    // (width)
#endif

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * 64u;
    if (i >= p.n) {
        return;
    }
#ifdef BIAS
    a[i] += b[i] + bias[i % p.width];
#else
    a[i] += b[i];
#endif
}

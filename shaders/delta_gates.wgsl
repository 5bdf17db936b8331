// The gates of qwen35's Gated DeltaNet (gpu.DeltaGates), per token and value head h from the
// projections alpha (ssm_alpha·x) and beta (ssm_beta·x), as ggml's ops compute them in f32:
// g = softplus(alpha + dt_bias[h]) * ssm_a[h], softplus(x) = x above 20, else log(1 + exp(x))
// (ggml's op_softplus: logf(1.0f + expf(x))), and beta = 1 / (1 + exp(-beta)) (ggml_sigmoid),
// expf and logf as ggml_math.inc's exp_c and log_c. One invocation per (row, head);
// no loops.

//#include ggml_math.inc

struct Params {
    rows: u32,
    heads: u32,
    a_stride: u32,  // floats per row of alpha
    a_col: u32,     // column of head 0
    a_head: u32,    // floats from one head to the next
    b_stride: u32,
    b_col: u32,
    b_head: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> alpha: array<f32>;          // (rows, a_stride)
@group(0) @binding(2) var<storage, read> beta_in: array<f32>;        // (rows, b_stride)
@group(0) @binding(3) var<storage, read> dt_bias: array<f32>;        // (heads)
@group(0) @binding(4) var<storage, read> ssm_a: array<f32>;          // (heads)
@group(0) @binding(5) var<storage, read_write> g: array<f32>;        // (rows, heads)
@group(0) @binding(6) var<storage, read_write> beta: array<f32>;     // (rows, heads)

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    ns_zero = u32(p.heads == 0u); // never 1 where any invocation works
    let i = gid.x + gid.y * nwg.x * 64u;
    if (i >= p.rows * p.heads) {
        return;
    }
    let t = i / p.heads;
    let h = i % p.heads;
    let x = alpha[t * p.a_stride + p.a_col + h * p.a_head] + dt_bias[h];
    var sp = x;
    if (x <= 20.0) {
        sp = log_c(1.0 + exp_c(x));
    }
    g[i] = sp * ssm_a[h];
    beta[i] = sigmoid_c(beta_in[t * p.b_stride + p.b_col + h * p.b_head]);
}

// The output gate of qwen35's gated attention (gpu.SigmoidGate), in place:
// o[t, h, e] *= 1 / (1 + expf(-gate[t, h, e])), ggml_sigmoid then ggml_mul in f32. Both operands
// are head vectors of rows, each with its own row stride, first column and head stride (the
// gate's heads interleave with q's in attn_q's output). One invocation per element; no loops.

//#include ggml_math.inc

struct Params {
    rows: u32,
    heads: u32,
    head_dim: u32,
    o_stride: u32,  // floats per row of o
    o_col: u32,     // column of head 0
    o_head: u32,    // floats from one head to the next
    g_stride: u32,
    g_col: u32,
    g_head: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> o: array<f32>; // (rows, o_stride)
@group(0) @binding(2) var<storage, read> gate: array<f32>;    // (rows, g_stride)

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    ns_zero = u32(p.head_dim == 0u); // never 1 where any invocation works
    let i = gid.x + gid.y * nwg.x * 64u;
    if (i >= p.rows * p.heads * p.head_dim) {
        return;
    }
    let e = i % p.head_dim;
    let h = (i / p.head_dim) % p.heads;
    let t = i / (p.head_dim * p.heads);
    let oi = t * p.o_stride + p.o_col + h * p.o_head + e;
    let s = sigmoid_c(gate[t * p.g_stride + p.g_col + h * p.g_head + e]);
    o[oi] = o[oi] * s;
}

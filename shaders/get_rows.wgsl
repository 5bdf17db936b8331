// Embedding lookup with dequantization: out[t, :] = W[ids[t], :] for the ids that fall in this
// weight chunk's rows [row0, row0 + n_rows) (a table larger than one binding is split in
// chunks, one dispatch each). W is any type of dequant.inc (define T_<TYPE>).

struct Params {
    n_embd: u32,
    n_tokens: u32,
    row0: u32,
    n_rows: u32,
    scale: f32, // multiplies the rows (Gemma scales embeddings by sqrt(n_embd))
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> w: array<u32>;              // (n_rows, n_embd) packed
@group(0) @binding(2) var<storage, read> ids: array<u32>;            // (n_tokens)
@group(0) @binding(3) var<storage, read_write> out: array<vec4<f32>>; // (n_tokens, n_embd)

//#include dequant.inc

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let n4 = p.n_embd / 4u;
    let i = gid.x + gid.y * nwg.x * 64u;
    if (i >= n4 * p.n_tokens) {
        return;
    }
    let t = i / n4;
    let e = 4u * (i % n4);
    let id = ids[t];
    if (id < p.row0 || id >= p.row0 + p.n_rows) {
        return;
    }
    let base = (id - p.row0) * (p.n_embd / BS) * BW + (e / BS) * BW;
    out[i] = dq4(base, e % BS) * p.scale;
}

// The parameters, bindings and output of CPU adapters' and GPUs' matrix-vector kernels
// (matvec.wgsl, matmul_rows.wgsl; gpu.MatMulAt): weight w, activations x (f32 rows, or with
// XPACK one of act_quant's PACKED layouts), output y, and with XSUM the Q8_1 block sums xs.

struct Params {
    k: u32,       // row length (input features)
    n: u32,       // rows of this weight (chunk)
    n_tok: u32,   // tokens (at most MAXT in matvec's cooperative kernel)
    x_row0: u32,  // first row of x to read
    y_row0: u32,  // first row of y to write
    y_stride: u32,// row length of y (all rows of the whole weight)
    y_col0: u32,  // column of y for weight row 0 (a chunk of a split weight)
    scale: f32,   // SCALED: the products are multiplied by it (a LoRA pair's scale)
    lora_rank: u32,   // LORA_B: the adapter's B (lora_width rows of lora_rank) and its scale,
    lora_col: u32,    // added over y's columns lora_col .. lora_col + lora_width - 1
    lora_width: u32,
    lora_scale: f32,
#ifdef ID
    // ID (gpu.MatMulID): rows of y are assignments (token·k + slot), each multiplying the
    // weight of its chosen expert; the weight holds experts of n rows each.
    e0: u32,         // the chunk's first expert
    n_exp: u32,      // experts in the chunk
    x_per: u32,      // assignments per activation row: k (a token's row feeds its k slots) or 1
    n_assign: u32,   // assignments
    plan_tiles: u32, // batches (matmul_rows): word offset of the plan's tile table,
    plan_list: u32,  // of its assignments grouped by expert
    plan_slots: u32, // and of its slot table (the tile each grid z slice takes)
#endif
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> w: array<u32>;            // (n, k) packed blocks
#ifdef XPACK
@group(0) @binding(2) var<storage, read> x: array<u32>;            // act_quant's PACKED rows
#else
@group(0) @binding(2) var<storage, read> x: array<vec4<f32>>;      // (x_row0 + n_tok, k)
#endif
@group(0) @binding(3) var<storage, read_write> y: array<f32>;      // (y_row0 + n_tok, y_stride)
#ifdef XSUM
@group(0) @binding(4) var<storage, read> xs: array<f32>;           // (x_row0 + n_tok, k / 32)
#endif
#ifdef ID
// The experts' routing: the matrix-vector kernels read each assignment's expert (u32, MoERoute's
// ids), matmul_rows the plan that gpu.MoEGroup made of them (tiles of one expert's assignments).
#ifdef XSUM
@group(0) @binding(5) var<storage, read> moe: array<u32>;
#else
@group(0) @binding(4) var<storage, read> moe: array<u32>;
#endif
#endif
#ifdef LORA_B
// A LoRA group's term in the epilogue: lb its B, lt each token's A·x (RMSNormLoRA's).
#ifdef XSUM
@group(0) @binding(5) var<storage, read> lb: array<f32>;           // (lora_width, lora_rank)
@group(0) @binding(6) var<storage, read> lt: array<f32>;           // (n_tok, lora_rank)
#else
@group(0) @binding(4) var<storage, read> lb: array<f32>;
@group(0) @binding(5) var<storage, read> lt: array<f32>;
#endif
#endif

// The kernels that take tokens in groups, one per grid z slice, set tok0 to the slice's first
// token and nt to its token count.
var<private> tok0: u32 = 0u;
var<private> nt: u32 = 0u;
#ifdef ID

// ID kernels: each token lane's activation row (lanes past the live ones repeat the last live
// one's) and output row, and the first word of the lanes' expert's rows in this chunk.
var<private> lane_x: array<u32, 8>;
var<private> lane_y: array<u32, 8>;
var<private> id_w0: u32;

// id_expert sets id_w0 for expert e and reports whether this chunk of the weight holds it.
fn id_expert(e: u32) -> bool {
    let inside = e >= p.e0 && e < p.e0 + p.n_exp;
    id_w0 = select(0u, (e - p.e0) * p.n * (p.k / BS) * BW, inside);
    return inside;
}

// id_assign sets up the matrix-vector kernels' one lane for assignment a (a grid z slice),
// reporting whether this chunk holds its expert.
fn id_assign(a: u32) -> bool {
    tok0 = 0u;
    nt = 1u;
    lane_x[0] = p.x_row0 + a / p.x_per;
    lane_y[0] = p.y_row0 + a;
    return id_expert(moe[a]);
}

// id_tile sets up matmul_rows' 8 lanes for the tile of grid z slice `slot` of the plan (up to
// 8 assignments of one expert), reporting whether the slice has a tile (the grid has room for
// the most a batch can have) whose expert this chunk holds.
fn id_tile(slot: u32) -> bool {
    let tile = moe[p.plan_slots + slot];
    if (tile == 0xFFFFFFFFu) {
        return false;
    }
    let o = p.plan_tiles + 3u * tile;
    let first = p.plan_list + moe[o + 1u];
    tok0 = 0u;
    nt = moe[o + 2u];
    for (var t = 0u; t < 8u; t++) {
        let a = moe[first + min(t, nt - 1u)];
        lane_x[t] = p.x_row0 + a / p.x_per;
        lane_y[t] = p.y_row0 + a;
    }
    return id_expert(moe[o]);
}
#endif

// store writes (ADD: adds) v (SCALED: times scale; LORA_B: plus the adapter's term) as token
// tok0 + t's output for weight row row.
fn store(t: u32, row: u32, v: f32) {
#ifdef ID
    let o = lane_y[t] * p.y_stride + p.y_col0 + row;
#else
    let o = (p.y_row0 + tok0 + t) * p.y_stride + p.y_col0 + row;
#endif
#ifdef SCALED
    var out = p.scale * v;
#else
    var out = v;
#endif
#ifdef LORA_B
    let c = p.y_col0 + row;
    if (c >= p.lora_col && c < p.lora_col + p.lora_width) {
        let bo = (c - p.lora_col) * p.lora_rank;
        let to = (tok0 + t) * p.lora_rank;
        var s = 0.0;
        for (var j = 0u; j < p.lora_rank; j++) {
            s += lb[bo + j] * lt[to + j];
        }
        out += p.lora_scale * s;
    }
#endif
#ifdef ADD
    y[o] += out;
#else
    y[o] = out;
#endif
}

// xrow is the activation row of token lane t, clamped to the last real token: lanes past the
// batch read valid memory and their sums are not stored.
fn xrow(t: u32) -> u32 {
#ifdef ID
    return lane_x[t];
#else
    return p.x_row0 + tok0 + min(t, nt - 1u);
#endif
}

// act_at is where activation row row's part for weight block b starts in x (in x's units).
fn act_at(row: u32, b: u32) -> u32 {
#ifdef XPACK_Q8
    // The Q8 block (its scale word, then four int8 a word) of the weight block: act_quant's
    // blocks are as long as the weight's (XB = BS: Q8_0 for 32-blocks, Q8_K for K-quants).
    return (row * (p.k / XB) + b) * (1u + XB / 4u);
#else
#ifdef XPACK
    return row * (p.k / 2u) + b * (BS / 2u); // two 16-bit values a word
#else
    return row * (p.k / 4u) + b * (BS / 4u);
#endif
#endif
}

// act_scale is the Q8 block scale of the activations at word at (act_at); 1 for the others.
fn act_scale(at: u32) -> f32 {
#ifdef XPACK_Q8
    return bitcast<f32>(x[at]);
#else
    return 1.0;
#endif
}

// act4 is elements j .. j + 3 (j a multiple of 4) of the block whose activations start at at
// (act_at), Q8 ones scaled by d (act_scale): packed rows (XPACK_*: act_quant's PACKED layouts)
// give exactly the f32 values act_quant would have written, from one word (and the block
// scale) or two instead of four.
fn act4(at: u32, d: f32, j: u32) -> vec4<f32> {
#ifdef XPACK_Q8
    let q = vec4<u32>(x[at + 1u + j / 4u]) << vec4<u32>(24u, 16u, 8u, 0u);
    return d * vec4<f32>(bitcast<vec4<i32>>(q) >> vec4<u32>(24u));
#else
#ifdef XPACK_F16
    let o = at + j / 2u;
    return vec4<f32>(unpack2x16float(x[o]), unpack2x16float(x[o + 1u]));
#else
#ifdef XPACK_BF16
    let o = at + j / 2u;
    let lo = vec2<u32>(x[o], x[o + 1u]);
    return bitcast<vec4<f32>>(vec4<u32>(lo.x << 16u, lo.x & 0xFFFF0000u, lo.y << 16u, lo.y & 0xFFFF0000u));
#else
    return x[at + j / 4u];
#endif
#endif
#endif
}

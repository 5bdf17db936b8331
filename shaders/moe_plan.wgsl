// Grouping of a Mixture-of-Experts batch's assignments by expert (gpu.MoEGroup), so the batch
// kernels of gpu.MatMulID (matmul_rows.wgsl, matmul.wgsl with ID) read each expert's weight
// rows once per tile of its assignments instead of once per assignment. Assignment a
// (token·k + slot) goes to expert ids[a]. The plan (u32 words) holds:
//   [0]                   the number of tiles; [1] the tile width, [2] n_assign, [3] n_exp
//   [4 .. 4 + n_exp)      each expert's assignment count (the default variant's output)
//   [tiles_off + 3 i ..]  tile i: its expert, the index of its first assignment in the list,
//                         and its count (1 .. tile width); tiles in expert order
//   [slots_off + s]       the tile grid slice s of the batch kernels takes, or NONE: the n
//                         tiles go to slices s = i·slots/n of the grid's slots (the most tiles
//                         a batch can have), spread over the whole grid. lavapipe hands each
//                         thread an equal run of a dispatch's workgroups: with the empty
//                         slices at the end, one thread was left most of the work.
//   [list_off ..]         the assignments, grouped by expert in expert order, each expert's
//                         in ascending order
// Two passes, one invocation per expert, no barriers (CPU adapters run them as they are): the
// default counts the expert's assignments and clears its share of the slots; PLACE sums the
// counts (before it: where its tiles and assignments go; all: the tile count), writes its
// tiles and their slots, and lists its assignments. Loops per invocation: n_assign +
// slots / n_exp + 1 (count); at most n_exp + n_assign / tile + 1 + n_assign (PLACE).
// (ggml's Vulkan count_experts counts the same way, a workgroup per expert scanning all ids.)

struct Params {
    n_assign: u32,
    n_exp: u32,
    tile: u32,      // assignments per tile: the batch kernel's token width
    tiles_off: u32, // word offset of the tile table
    list_off: u32,  // word offset of the assignment list
    slots: u32,     // the batch kernels' grid slices
    slots_off: u32, // word offset of the slot table
}

const COUNTS: u32 = 4u; // word offset of the counts
const NONE: u32 = 0xFFFFFFFFu;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> ids: array<u32>;         // (n_assign)
@group(0) @binding(2) var<storage, read_write> plan: array<u32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let e = gid.x + gid.y * nwg.x * 64u;
    if (e >= p.n_exp) {
        return;
    }
#ifdef PLACE
    var off = 0u;   // the expert's first place in the list
    var tile0 = 0u; // and in the tile table
    var tiles = 0u; // all experts' tiles
    for (var f = 0u; f < p.n_exp; f++) {
        let c = plan[COUNTS + f];
        let n = (c + p.tile - 1u) / p.tile;
        if (f < e) {
            off += c;
            tile0 += n;
        }
        tiles += n;
    }
    let c = plan[COUNTS + e];
    let n = (c + p.tile - 1u) / p.tile;
    for (var j = 0u; j < n; j++) {
        let o = p.tiles_off + 3u * (tile0 + j);
        plan[o] = e;
        plan[o + 1u] = off + j * p.tile;
        plan[o + 2u] = min(p.tile, c - j * p.tile);
        plan[p.slots_off + (tile0 + j) * p.slots / tiles] = tile0 + j;
    }
    if (e == p.n_exp - 1u) {
        plan[0] = tiles;
        plan[1] = p.tile;
        plan[2] = p.n_assign;
        plan[3] = p.n_exp;
    }
    var at = p.list_off + off;
    let end = at + c;
    for (var a = 0u; a < p.n_assign && at < end; a++) {
        if (ids[a] == e) {
            plan[at] = a;
            at++;
        }
    }
#else
    var c = 0u;
    for (var a = 0u; a < p.n_assign; a++) {
        c += select(0u, 1u, ids[a] == e);
    }
    plan[COUNTS + e] = c;
    for (var s = e; s < p.slots; s += p.n_exp) {
        plan[p.slots_off + s] = NONE;
    }
#endif
}

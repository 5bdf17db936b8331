// The tile a tiled kernel's grid y slice takes of gpu.MoEGroup's plan (ID: matmul.wgsl,
// matmul_q8.wgsl, whose Params and moe binding it reads): the first word of the tile's
// expert's rows in this chunk of the weight, its first assignment in the plan's list and its
// assignment count. An empty slot, or a tile of another chunk's expert, has no assignments
// here (cnt 0); the plan is read-only, so every invocation of a workgroup sees the same and
// they return together.

struct MoETile {
    w0: u32,
    first: u32,
    cnt: u32,
}

fn moe_tile(slice: u32) -> MoETile {
    let slot = moe[p.plan_slots + slice];
    if (slot == 0xFFFFFFFFu) {
        return MoETile(0u, 0u, 0u);
    }
    let tile = p.plan_tiles + 3u * slot;
    let ex = moe[tile];
    if (ex < p.e0 || ex >= p.e0 + p.n_exp) {
        return MoETile(0u, 0u, 0u);
    }
    return MoETile((ex - p.e0) * p.n * (p.k / BS) * BW, p.plan_list + moe[tile + 1u], moe[tile + 2u]);
}

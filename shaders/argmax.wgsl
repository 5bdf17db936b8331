// Greedy pick per row of logits: the index of the largest value (the first one on ties, as
// llama.cpp's greedy sampler) and its softmax probability 1 / sum_j exp(x_j - max), written to
// out as u32: ids at out[out0 + row], probabilities (f32 bits) at out[pout + out0 + row].
// Variants: ROW_PER_THREAD gives each invocation a whole row and no workgroup barriers (CPU
// adapters such as lavapipe); otherwise 64 invocations share a row and reduce.
// FEED (speculative drafting, several forward passes in one command buffer): the picked id
// also becomes row's token of the next single-token-per-sequence pass, ids[row], and its
// position and first cache row are written from plan (first drafted position of each row,
// then each row's base) as pos[row] = plan[row] + step, pos[rows + row] = plan[rows + row].
// FEED_MPOS also writes an M-RoPE model's positions of a text token: mpos[4 row ..] = (pos,
// pos, pos, 0).

struct Params {
    n: u32,     // row length (vocabulary)
    rows: u32,
    out0: u32,  // out index of row 0's id
    pout: u32,  // offset of the probabilities in out
    step: u32,  // FEED: position offset of the next pass
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;         // (rows, n)
@group(0) @binding(2) var<storage, read_write> out: array<u32>;
#ifdef FEED
@group(0) @binding(3) var<storage, read_write> ids: array<u32>; // (rows) next pass's tokens
@group(0) @binding(4) var<storage, read_write> pos: array<u32>; // (2 rows) positions, bases
@group(0) @binding(5) var<storage, read> plan: array<u32>;      // (2 rows)
#ifdef FEED_MPOS
@group(0) @binding(6) var<storage, read_write> mpos: array<u32>; // (rows, 4)
#endif
#endif

fn emit(row: u32, id: u32, prob: f32) {
    out[p.out0 + row] = id;
    out[p.pout + p.out0 + row] = bitcast<u32>(prob);
#ifdef FEED
    ids[row] = id;
    pos[row] = plan[row] + p.step;
    pos[p.rows + row] = plan[p.rows + row];
#ifdef FEED_MPOS
    mpos[4u * row] = plan[row] + p.step;
    mpos[4u * row + 1u] = plan[row] + p.step;
    mpos[4u * row + 2u] = plan[row] + p.step;
    mpos[4u * row + 3u] = 0u;
#endif
#endif
}

#ifdef ROW_PER_THREAD
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let row = gid.x + gid.y * nwg.x * 64u;
    if (row >= p.rows) {
        return;
    }
    let base = row * p.n;
    var best = x[base];
    var at = 0u;
    for (var i = 1u; i < p.n; i++) {
        let v = x[base + i];
        if (v > best) {
            best = v;
            at = i;
        }
    }
    var sum = 0.0;
    for (var i = 0u; i < p.n; i++) {
        sum += exp(x[base + i] - best);
    }
    emit(row, at, 1.0 / sum);
}
#else
const WG: u32 = 64u;
const NONE: u32 = 0xffffffffu;
var<workgroup> vals: array<f32, WG>;
var<workgroup> idxs: array<u32, WG>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_id) lid: vec3<u32>) {
    let row = wg.x + wg.y * nwg.x;
    if (row >= p.rows) {
        return;
    }
    let base = row * p.n;
    // Each invocation keeps the first maximum of its stride (it scans in increasing index
    // order); the reduction then prefers the smaller index on ties. Invocations past the row's
    // end keep an empty entry (index NONE), which never wins.
    var best = 0.0;
    var at = NONE;
    for (var i = lid.x; i < p.n; i += WG) {
        let v = x[base + i];
        if (at == NONE || v > best) {
            best = v;
            at = i;
        }
    }
    vals[lid.x] = best;
    idxs[lid.x] = at;
    workgroupBarrier();
    for (var stride = WG / 2u; stride > 0u; stride /= 2u) {
        if (lid.x < stride) {
            let v = vals[lid.x + stride];
            let j = idxs[lid.x + stride];
            let mine = idxs[lid.x];
            if (j != NONE && (mine == NONE || v > vals[lid.x] || (v == vals[lid.x] && j < mine))) {
                vals[lid.x] = v;
                idxs[lid.x] = j;
            }
        }
        workgroupBarrier();
    }
    let top = vals[0];
    let pick = idxs[0];
    workgroupBarrier();
    var sum = 0.0;
    for (var i = lid.x; i < p.n; i += WG) {
        sum += exp(x[base + i] - top);
    }
    vals[lid.x] = sum;
    workgroupBarrier();
    for (var stride = WG / 2u; stride > 0u; stride /= 2u) {
        if (lid.x < stride) {
            vals[lid.x] += vals[lid.x + stride];
        }
        workgroupBarrier();
    }
    if (lid.x == 0u) {
        emit(row, pick, 1.0 / vals[0]);
    }
}
#endif

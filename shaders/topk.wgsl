// Sampling candidates per row of logits: the k largest logits (k <= MAX_K; all n when the row
// is shorter) with their ids, ordered by descending logit and, on ties, ascending id (the order
// of a stable sort, and of the engine's sampler), plus the row's maximum and
// sum_j exp(x_j - max), from which the CPU gets exact full-softmax probabilities of the
// candidates. Row r's output starts at out[r * (2 + 2k)]: the maximum's f32 bits, the sum's,
// k ids, then the k candidates' logits (f32 bits); only the first min(k, n) entries are written.
// Logits are compared through orderKey, so -0 equals +0; NaN logits give unspecified picks.
//
// Variants. By default a workgroup of 256 shares a row: a radix select finds the k-th largest
// key, the candidates are gathered in id order and bitonic-sorted in workgroup memory.
// CPU adapters (lavapipe) get two barrier-free passes instead, because llvmpipe ends every
// invocation's loops after 65535 iterations in all (LP_MAX_TGSI_LOOP_ITERATIONS), which one
// invocation per 150k-token row would exceed: CHUNKS gives each invocation a span of a row and
// keeps its best k in a heap, writing them, laid out as the output, into a scratch buffer (out
// of CHUNKS, part of MERGE); MERGE then merges a row's sorted spans, one invocation per row.

struct Params {
    n: u32,      // row length (vocabulary)
    rows: u32,
    k: u32,      // candidates per row, 1..MAX_K
    span: u32,   // CHUNKS, MERGE: elements per span
    spans: u32,  // CHUNKS, MERGE: spans per row
}

@group(0) @binding(0) var<uniform> p: Params;
#ifdef MERGE
@group(0) @binding(1) var<storage, read> part: array<u32>;       // (rows, spans, 2 + 2k)
#else
@group(0) @binding(1) var<storage, read> x: array<f32>;          // (rows, n)
#endif
@group(0) @binding(2) var<storage, read_write> out: array<u32>;  // (rows [, spans], 2 + 2k)

const MAX_K: u32 = 256u;

// orderKey maps a logit to a u32 that orders as the logits do (larger logit, larger key), with
// -0 mapped as +0. It works on bits alone so no compiler folds the -0 case away.
fn orderKey(v: f32) -> u32 {
    var b = bitcast<u32>(v);
    if (b == 0x80000000u) {
        b = 0u;
    }
    if ((b & 0x80000000u) != 0u) {
        return ~b;
    }
    return b | 0x80000000u;
}

// before reports whether candidate (ka, ia) ranks ahead of (kb, ib): larger key, then lower id.
fn before(ka: u32, ia: u32, kb: u32, ib: u32) -> bool {
    return ka > kb || (ka == kb && ia < ib);
}

#ifdef CHUNKS
// The heap keeps the best k seen so far with the worst at the root.
var<private> hk: array<u32, MAX_K>;
var<private> hi: array<u32, MAX_K>;

fn swapHeap(a: u32, b: u32) {
    let k = hk[a];
    let i = hi[a];
    hk[a] = hk[b];
    hi[a] = hi[b];
    hk[b] = k;
    hi[b] = i;
}

// siftDown restores the heap below node start, among the first size entries.
fn siftDown(start: u32, size: u32) {
    var at = start;
    loop {
        var worst = at;
        let l = 2u * at + 1u;
        let r = l + 1u;
        if (l < size && before(hk[worst], hi[worst], hk[l], hi[l])) {
            worst = l;
        }
        if (r < size && before(hk[worst], hi[worst], hk[r], hi[r])) {
            worst = r;
        }
        if (worst == at) {
            break;
        }
        swapHeap(at, worst);
        at = worst;
    }
}

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let idx = gid.x + gid.y * nwg.x * 64u;
    if (idx >= p.rows * p.spans) {
        return;
    }
    let row = idx / p.spans;
    let lo = (idx % p.spans) * p.span;
    let stop = min(lo + p.span, p.n);
    let base = row * p.n;
    let k = min(p.k, stop - lo);
    var size = 0u;
    for (var i = lo; i < stop; i++) {
        let key = orderKey(x[base + i]);
        if (size < k) {
            var at = size;
            hk[at] = key;
            hi[at] = i;
            size++;
            while (at > 0u) {
                let parent = (at - 1u) / 2u;
                if (!before(hk[parent], hi[parent], hk[at], hi[at])) {
                    break;
                }
                swapHeap(at, parent);
                at = parent;
            }
        } else if (key > hk[0]) { // an equal key comes later in the row, so ranks behind
            hk[0] = key;
            hi[0] = i;
            siftDown(0u, k);
        }
    }
    // Heap sort: moving the worst to the back leaves the best first.
    for (var end = k - 1u; end > 0u; end--) {
        swapHeap(0u, end);
        siftDown(0u, end);
    }
    let top = x[base + hi[0]];
    var sum = 0.0;
    for (var i = lo; i < stop; i++) {
        sum += exp(x[base + i] - top);
    }
    let o = idx * (2u + 2u * p.k);
    out[o] = bitcast<u32>(top);
    out[o + 1u] = bitcast<u32>(sum);
    for (var j = 0u; j < k; j++) {
        out[o + 2u + j] = hi[j];
        out[o + 2u + p.k + j] = bitcast<u32>(x[base + hi[j]]);
    }
}
#endif

#ifdef MERGE
const MAX_SPANS: u32 = 256u;
var<private> next: array<u32, MAX_SPANS>; // each span's first candidate not yet taken

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let row = gid.x + gid.y * nwg.x * 64u;
    if (row >= p.rows) {
        return;
    }
    let stride = 2u + 2u * p.k;
    let first = row * p.spans * stride;
    var top = bitcast<f32>(part[first]);
    for (var c = 1u; c < p.spans; c++) {
        top = max(top, bitcast<f32>(part[first + c * stride]));
    }
    var sum = 0.0;
    for (var c = 0u; c < p.spans; c++) {
        let at = first + c * stride;
        sum += bitcast<f32>(part[at + 1u]) * exp(bitcast<f32>(part[at]) - top);
        next[c] = 0u;
    }
    let o = row * stride;
    out[o] = bitcast<u32>(top);
    out[o + 1u] = bitcast<u32>(sum);
    let k = min(p.k, p.n);
    for (var j = 0u; j < k; j++) {
        var best = 0u;
        var bestKey = 0u;
        var bestID = 0xffffffffu;
        for (var c = 0u; c < p.spans; c++) {
            let have = min(p.k, min(p.span, p.n - c * p.span));
            if (next[c] < have) {
                let at = first + c * stride;
                let id = part[at + 2u + next[c]];
                let key = orderKey(bitcast<f32>(part[at + 2u + p.k + next[c]]));
                if (bestID == 0xffffffffu || before(key, id, bestKey, bestID)) {
                    best = c;
                    bestKey = key;
                    bestID = id;
                }
            }
        }
        let at = first + best * stride;
        out[o + 2u + j] = bestID;
        out[o + 2u + p.k + j] = part[at + 2u + p.k + next[best]];
        next[best]++;
    }
}
#endif

#ifndef CHUNKS
#ifndef MERGE
const WG: u32 = 256u;
var<workgroup> hist: array<atomic<u32>, 256>;
var<workgroup> red: array<f32, WG>;
var<workgroup> scanG: array<u32, WG>;
var<workgroup> scanE: array<u32, WG>;
var<workgroup> ck: array<u32, MAX_K>; // gathered candidates' keys
var<workgroup> ci: array<u32, MAX_K>; // and ids
var<workgroup> sel: vec2<u32>;        // radix select: key prefix found, rank left within it

// reduceMax and reduceSum leave the workgroup's result in red[0]; callers barrier before
// writing red again.
fn reduceMax(t: u32, v: f32) -> f32 {
    red[t] = v;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s /= 2u) {
        if (t < s) {
            red[t] = max(red[t], red[t + s]);
        }
        workgroupBarrier();
    }
    let r = red[0];
    workgroupBarrier();
    return r;
}

fn reduceSum(t: u32, v: f32) -> f32 {
    red[t] = v;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s /= 2u) {
        if (t < s) {
            red[t] += red[t + s];
        }
        workgroupBarrier();
    }
    let r = red[0];
    workgroupBarrier();
    return r;
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_id) lid: vec3<u32>) {
    let row = wg.x + wg.y * nwg.x;
    if (row >= p.rows) {
        return;
    }
    let t = lid.x;
    let base = row * p.n;
    let k = min(p.k, p.n);
    let o = row * (2u + 2u * p.k);

    var m = x[base]; // every row has an element; an idle invocation must not add a smaller one
    for (var i = t; i < p.n; i += WG) {
        m = max(m, x[base + i]);
    }
    let top = reduceMax(t, m);
    var s = 0.0;
    for (var i = t; i < p.n; i += WG) {
        s += exp(x[base + i] - top);
    }
    let sum = reduceSum(t, s);
    if (t == 0u) {
        out[o] = bitcast<u32>(top);
        out[o + 1u] = bitcast<u32>(sum);
        sel = vec2<u32>(0u, k);
    }

    // Radix select, 8 bits at a time from the top: the key of the k-th best element, and how
    // many elements with exactly that key belong to the k best.
    var mask = 0u;
    for (var shift = 24i; shift >= 0i; shift -= 8i) {
        atomicStore(&hist[t], 0u);
        workgroupBarrier();
        let prefix = sel.x;
        for (var i = t; i < p.n; i += WG) {
            let key = orderKey(x[base + i]);
            if ((key & mask) == prefix) {
                atomicAdd(&hist[(key >> u32(shift)) & 255u], 1u);
            }
        }
        workgroupBarrier();
        if (t == 0u) {
            var need = sel.y;
            for (var d = 255i; d >= 0i; d--) {
                let c = atomicLoad(&hist[d]);
                if (need <= c) {
                    sel = vec2<u32>(prefix | (u32(d) << u32(shift)), need);
                    break;
                }
                need -= c;
            }
        }
        workgroupBarrier();
        mask |= 255u << u32(shift);
    }
    let kth = sel.x;
    let ties = sel.y;     // elements equal to kth that are taken: the lowest ids
    let greater = k - ties;

    // Gather in id order: each invocation takes a contiguous chunk, counts what it contributes
    // and learns from a prefix sum where to write.
    let chunk = (p.n + WG - 1u) / WG;
    let lo = min(t * chunk, p.n);
    let stop = min(lo + chunk, p.n);
    var g = 0u;
    var e = 0u;
    for (var i = lo; i < stop; i++) {
        let key = orderKey(x[base + i]);
        g += select(0u, 1u, key > kth);
        e += select(0u, 1u, key == kth);
    }
    scanG[t] = g;
    scanE[t] = e;
    workgroupBarrier();
    for (var off = 1u; off < WG; off *= 2u) {
        var a = 0u;
        var b = 0u;
        if (t >= off) {
            a = scanG[t - off];
            b = scanE[t - off];
        }
        workgroupBarrier();
        scanG[t] += a;
        scanE[t] += b;
        workgroupBarrier();
    }
    var gat = scanG[t] - g;
    var eat = scanE[t] - e;
    for (var i = lo; i < stop; i++) {
        let key = orderKey(x[base + i]);
        if (key > kth) {
            ck[gat] = key;
            ci[gat] = i;
            gat++;
        } else if (key == kth && eat < ties) {
            ck[greater + eat] = key;
            ci[greater + eat] = i;
            eat++;
        }
    }
    // Pad to a power of two with entries that rank last (key 0 is a NaN's).
    var size = 1u;
    while (size < k) {
        size *= 2u;
    }
    if (t >= k && t < size) {
        ck[t] = 0u;
        ci[t] = 0xffffffffu;
    }
    workgroupBarrier();

    // Bitonic sort into rank order.
    for (var block = 2u; block <= size; block *= 2u) {
        for (var stride = block / 2u; stride > 0u; stride /= 2u) {
            let q = t ^ stride;
            if (t < size && q > t) {
                let first = (t & block) == 0u; // this block sorts best first
                if (before(ck[q], ci[q], ck[t], ci[t]) == first) {
                    let kk = ck[t];
                    let ii = ci[t];
                    ck[t] = ck[q];
                    ci[t] = ci[q];
                    ck[q] = kk;
                    ci[q] = ii;
                }
            }
            workgroupBarrier();
        }
    }
    if (t < k) {
        let id = ci[t];
        out[o + 2u + t] = id;
        out[o + 2u + p.k + t] = bitcast<u32>(x[base + id]);
    }
}
#endif
#endif

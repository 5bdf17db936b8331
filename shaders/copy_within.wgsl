// Copies n words of a buffer from word src to word dst (ranges that do not overlap) inside a
// compute pass: WebGPU has no in-pass copy, and a buffer-to-buffer copy may not stay inside
// one buffer. Used for copy-on-write of shared KV cache pages.

struct Params {
    src: u32,
    dst: u32,
    n: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> buf: array<u32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * 64u;
    if (i < p.n) {
        buf[p.dst + i] = buf[p.src + i];
    }
}

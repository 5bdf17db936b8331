package exp

import (
	"testing"

	"github.com/wgpu-llama/wgpu-llama/gpu"
	"github.com/wgpu-llama/wgpu-llama/gpu/gputest"
)

const strided = `
struct Params { k: u32, n: u32, }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> w: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let row = gid.x;
    if (row >= p.n) { return; }
    let k4 = p.k / 4u;
    var acc = 0.0;
    for (var i = 0u; i < k4; i++) { acc += dot(w[row * k4 + i], x[i]); }
    y[row] = acc;
}`

// lanes read consecutive vec4s: invocation = (row, part of 64); part p reads chunks p, p+64...
const lanes = `
struct Params { k: u32, n: u32, }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> w: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let row = gid.x / 64u;
    let part = gid.x % 64u;
    if (row >= p.n) { return; }
    let k4 = p.k / 4u;
    var acc = 0.0;
    for (var i = part; i < k4; i += 64u) { acc += dot(w[row * k4 + i], x[i]); }
    y[row * 64u + part] = acc;
}`

func bench(b *testing.B, src string, groups uint32) {
	d := gputest.Device(b)
	const n, k = 2048, 2048
	p, err := d.Pipeline(gpu.PipelineKey{Kernel: "exp", Variant: src[len(src)-20:]}, gpu.PipelineSpec{
		Source: func() (string, error) { return src, nil }, Entry: "main",
		Bindings: []gpu.Access{gpu.ReadOnly, gpu.ReadOnly, gpu.ReadWrite}})
	if err != nil {
		b.Fatal(err)
	}
	w, _ := d.NewBuffer("w", n*k*4)
	x, _ := d.NewBuffer("x", k*4)
	y, _ := d.NewBuffer("y", n*64*4)
	b.SetBytes(n * k * 4)
	for i := 0; i < b.N; i++ {
		r, _ := d.Begin()
		r.Dispatch(p, gpu.Params(k, n), [3]uint32{groups, 1, 1}, w, x, y)
		if _, err := r.SubmitAndRead(y, 0, 4); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkStrided(b *testing.B) { bench(b, strided, 2048/64) }
func BenchmarkLanes(b *testing.B)   { bench(b, lanes, 2048) }

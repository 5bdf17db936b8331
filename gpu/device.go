package gpu

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/oliverbestmann/webgpu/wgpu"
)

// Limits are the adapter limits the kernels and buffer layout depend on.
type Limits struct {
	MaxStorageBufferBindingSize       uint64 // bytes one binding may span; dispatches check it
	MaxBufferSize                     uint64 // bytes one buffer may hold; allocation checks it
	MaxStorageBuffersPerShaderStage   uint32 // caps a kernel's storage bindings
	MaxComputeWorkgroupStorageSize    uint32 // bytes of var<workgroup> memory per workgroup
	MaxComputeInvocationsPerWorkgroup uint32 // largest workgroup a kernel may declare
	MaxComputeWorkgroupsPerDimension  uint32 // grid spills over into y beyond this
	MinStorageBufferOffsetAlignment   uint32 // bytes; storage binding offsets are multiples
	MinUniformBufferOffsetAlignment   uint32 // bytes; uniform binding offsets are multiples
}

// Features are the optional capabilities a kernel variant may use.
type Features struct {
	// ShaderF16 is WebGPU's shader-f16 (enabled on the device when the adapter has it); the
	// F16Math kernels need it, while the f16 KV cache packs halves into u32 and does not.
	ShaderF16 bool
	// Subgroups is WebGPU's subgroups feature (or wgpu-native's own name for it), enabled on
	// the device when the adapter has it; the SubgroupMath kernels use it.
	Subgroups bool
	// TimestampQuery lets a profile read each kernel's GPU time from timestamps written at
	// the start and end of its compute pass.
	TimestampQuery bool
}

// String lists the features present ("shader-f16, subgroups"), or "-" for none.
func (f Features) String() string {
	var names []string
	if f.ShaderF16 {
		names = append(names, "shader-f16")
	}
	if f.Subgroups {
		names = append(names, "subgroups")
	}
	if f.TimestampQuery {
		names = append(names, "timestamp-query")
	}
	if len(names) == 0 {
		return "-"
	}
	return strings.Join(names, ", ")
}

// Device is an opened adapter: the device, its queue, and the caches that make repeated
// forward passes allocate nothing.
type Device struct {
	// Info describes the adapter the device was opened on.
	Info AdapterInfo
	// Limits are the adapter's own limits, all requested for the device.
	Limits Limits
	// Features are the optional features the adapter offered and the device enabled.
	Features Features
	// BarrierFree selects kernel variants without workgroup barriers. Set for CPU adapters
	// (lavapipe runs a barrier as a context switch of every invocation); tests flip it to
	// cover both families on one adapter.
	BarrierFree bool
	// CPUMath makes a CPU adapter reproduce llama.cpp's CPU backend (x86, AVX2 and FMA) bit
	// for bit instead of some ulps apart: kernels built with its arithmetic for exp and what
	// is made of it (shaders/ggml_math.inc: ggml's vector exp, the C library's expf, fused
	// multiply-adds rounded once), and F32, Q8_0, Q5_0, Q4_1 and Q5_1 products in its order
	// (matvec_lanes.wgsl), RoPE from the C library's sinf and cosf (Rope.Table). Off by
	// default (SetCPUMath): the emulated arithmetic takes F32 and Q8_0 prompts about 5x longer
	// on lavapipe. Tests that compare with llama.cpp turn it on.
	CPUMath bool
	// F16Math lets the prompt matmul tile and multiply in half precision (set when the adapter has
	// shader-f16 and is not a CPU adapter, where f16 is emulated and slower).
	F16Math bool
	// SubgroupMath lets GPU kernels reduce across a subgroup (subgroupAdd) instead of through
	// workgroup memory and barriers (set when the adapter has subgroups and is not a CPU
	// adapter, whose barrier-free kernels need no reductions).
	SubgroupMath bool
	// RowsPerInvocation, when 1, 2 or 4, fixes how many weight rows each invocation of the
	// barrier-free matrix-vector kernel (batches of up to 4 tokens) takes; 0 picks by the
	// weight's size (rowsPerInvocation).
	RowsPerInvocation int
	// TokenLanes lets barrier-free attention take the token-lane kernel (attention_lanes.wgsl)
	// where its loops fit llvmpipe's budget. Set for CPU adapters; tests clear it to reach the
	// head-major kernels it otherwise replaces.
	TokenLanes bool
	// MaxBinding is the largest buffer one weight chunk may use; it starts at the adapter's
	// maxStorageBufferBindingSize, and tests lower it to exercise split weights.
	MaxBinding uint64
	// Profile, when set, times every dispatch on its own (one submit each) by kernel family.
	Profile *Profile
	// IntDot lets GPUs' matrix-vector kernel multiply the integer-block weights (the legacy
	// types, the K-quants, the IQ types, MXFP4) by packed 8-bit activations with integer dot
	// products (dot4I8Packed; IntDotFor). Set for adapters that are not CPU adapters, whose
	// barrier-free kernels have their own.
	IntDot bool
	// IntDotTiles extends IntDot to prompts: matmul_q8.wgsl's integer-dot tiles instead of
	// matmul.wgsl's dequantized float tiles. Set with IntDot unless FloatPrefillEnv is.
	IntDotTiles bool
	// Checked compiles kernels with wgpu's runtime checks (storage accesses clamped, loops
	// bounded): set it before the first kernel (Open sets it from CheckedShadersEnv). Off,
	// kernels compile as trusted modules without them (trusted.go).
	Checked bool

	inst    *wgpu.Instance
	adapter *wgpu.Adapter
	dev     *wgpu.Device
	queue   *wgpu.Queue

	mu        sync.Mutex // guards pipelines (pipeline creation may come from tests in parallel)
	pipelines map[PipelineKey]*Pipeline
	layouts   map[string]*layout

	submits       atomic.Uint64
	created       [3]atomic.Uint64      // buffers, bind groups, pipelines made (Creations)
	live          atomic.Int64          // storage buffer bytes allocated and not released
	budget        atomic.Uint64         // SetBudget's limit on live; 0: none
	lost          atomic.Pointer[error] // why the device was lost (faults.go); nil while usable
	memory        uint64                // the adapter's memory as found at Open (0: unknown)
	memorySource  string
	staging       map[uint64]*wgpu.Buffer // readback buffers by size
	geluTable     *Buffer                 // GELUTable, uploaded on first use (geluTableBuffer)
	uniform       *wgpu.Buffer            // per-dispatch parameter slots
	bindGroups    map[bindKey]*wgpu.BindGroup
	paramsScratch []byte
	queries       *wgpu.QuerySet // a profile's timestamps, made on first use
}

// Open selects an adapter (index < 0: the best available, see Adapters) and creates a device
// with the adapter's own limits, so large models can bind as much as the hardware allows.
func Open(index int) (*Device, error) {
	inst := newInstance()
	list := inst.EnumerateAdapters(&wgpu.InstanceEnumerateAdapterOptons{Backends: backends})
	infos := make([]AdapterInfo, len(list))
	for i, a := range list {
		infos[i] = describe(i, a)
	}
	chosen, err := pick(infos, index)
	if err != nil {
		for _, a := range list {
			a.Release()
		}
		inst.Release()
		return nil, err
	}
	adapter := list[chosen]
	for i, a := range list {
		if i != chosen {
			a.Release()
		}
	}

	limits := adapter.GetLimits()
	var feats []wgpu.FeatureName
	f := infos[chosen].Features
	if f.ShaderF16 {
		feats = append(feats, wgpu.FeatureNameShaderF16)
	}
	if f.Subgroups {
		feats = append(feats, subgroupFeature(adapter))
	}
	if f.TimestampQuery {
		feats = append(feats, wgpu.FeatureNameTimestampQuery)
	}
	dev, err := adapter.RequestDevice(&wgpu.DeviceDescriptor{
		Label:            "wgpu-llama",
		RequiredFeatures: feats,
		RequiredLimits:   &limits,
	})
	if err != nil {
		adapter.Release()
		inst.Release()
		return nil, fmt.Errorf("gpu: request device on %s: %w", infos[chosen], err)
	}
	d := &Device{
		Info: infos[chosen],
		Limits: Limits{
			MaxStorageBufferBindingSize:       limits.MaxStorageBufferBindingSize,
			MaxBufferSize:                     limits.MaxBufferSize,
			MaxStorageBuffersPerShaderStage:   limits.MaxStorageBuffersPerShaderStage,
			MaxComputeWorkgroupStorageSize:    limits.MaxComputeWorkgroupStorageSize,
			MaxComputeInvocationsPerWorkgroup: limits.MaxComputeInvocationsPerWorkgroup,
			MaxComputeWorkgroupsPerDimension:  limits.MaxComputeWorkgroupsPerDimension,
			MinStorageBufferOffsetAlignment:   limits.MinStorageBufferOffsetAlignment,
			MinUniformBufferOffsetAlignment:   limits.MinUniformBufferOffsetAlignment,
		},
		Features:     f,
		BarrierFree:  infos[chosen].Type == "cpu",
		TokenLanes:   infos[chosen].Type == "cpu",
		IntDot:       infos[chosen].Type != "cpu",
		IntDotTiles:  infos[chosen].Type != "cpu" && os.Getenv(FloatPrefillEnv) == "",
		F16Math:      f.ShaderF16 && infos[chosen].Type != "cpu",
		SubgroupMath: f.Subgroups && infos[chosen].Type != "cpu",
		MaxBinding:   limits.MaxStorageBufferBindingSize,
		Checked:      checkedByDefault(),
		inst:         inst,
		adapter:      adapter,
		dev:          dev,
		queue:        dev.GetQueue(),
		pipelines:    map[PipelineKey]*Pipeline{},
		layouts:      map[string]*layout{},
		staging:      map[uint64]*wgpu.Buffer{},
		bindGroups:   map[bindKey]*wgpu.BindGroup{},
	}
	d.memory, d.memorySource = findMemory(d.Info)
	return d, nil
}

// Close releases the device and everything cached on it.
func (d *Device) Close() {
	if d == nil || d.dev == nil {
		return
	}
	for _, p := range d.pipelines {
		p.pipeline.Release()
	}
	for _, l := range d.layouts {
		l.pipeline.Release()
		l.group.Release()
	}
	for _, bg := range d.bindGroups {
		bg.Release()
	}
	if d.queries != nil {
		d.queries.Release()
	}
	if d.geluTable != nil {
		d.geluTable.Release()
	}
	if d.uniform != nil {
		d.uniform.Destroy()
		d.uniform.Release()
	}
	for _, b := range d.staging {
		b.Destroy()
		b.Release()
	}
	d.queue.Release()
	d.dev.Release()
	d.adapter.Release()
	d.inst.Release()
	d.dev = nil
}

// Submits counts queue submissions since the device opened; tests use it to check that a
// forward pass is one submit.
func (d *Device) Submits() uint64 { return d.submits.Load() }

// Creations counts what the device has made since it opened: buffers (storage, uniform and
// map-readable), bind groups and compute pipelines. Tests use it to check that a decode step
// makes none once the first steps made and cached what it needs.
type Creations struct{ Buffers, BindGroups, Pipelines uint64 }

// Creations returns the device's counts of what it has made.
func (d *Device) Creations() Creations {
	return Creations{Buffers: d.created[0].Load(), BindGroups: d.created[1].Load(), Pipelines: d.created[2].Load()}
}

// SetCPUMath turns CPUMath on (on a CPU adapter only: GPUs keep their own arithmetic) or off.
func (d *Device) SetCPUMath(on bool) {
	d.CPUMath = on && d.Info.Type == "cpu"
}

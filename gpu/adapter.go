// Package gpu is the only package that talks to WebGPU: adapter selection, the device and its
// limits, buffers, a pipeline cache, and a recorder that turns a forward pass into one command
// buffer and one queue submit.
package gpu

import (
	"errors"
	"fmt"
	"os"
	"sort"

	"github.com/oliverbestmann/webgpu/wgpu"
)

// ErrNoAdapter is returned when no Vulkan, Metal or DX12 adapter exists (for example a machine
// without a GPU driver and without Mesa's software Vulkan).
var ErrNoAdapter = errors.New("gpu: no WebGPU adapter found (install a Vulkan driver, e.g. mesa-vulkan-drivers for software Vulkan)")

// backends are the native APIs we run on; GL is left out because wgpu's GL backend lacks the
// compute features the kernels need and only adds a duplicate entry for the same device.
const backends = wgpu.InstanceBackend(1<<0 | 1<<2 | 1<<3) // Vulkan | Metal | DX12

// AdapterInfo describes one adapter as `wgpu-llama devices` lists it.
type AdapterInfo struct {
	Index   int    // position in the enumeration, as --device takes it
	Name    string // device name, e.g. "llvmpipe (LLVM 15.0.6, 256 bits)"
	Vendor  string // vendor name as the driver reports it; may be empty
	Driver  string // driver description, e.g. "Mesa 22.3.6 (LLVM 15.0.6)"
	Backend string // "vulkan", "metal", "d3d12"
	Type    string // "discrete", "integrated", "cpu", "unknown"
	// Features are the optional features the adapter offers that kernel variants use.
	Features Features

	rank int // selection preference: lower is better
}

// String describes the adapter in one line, as `devices` lists it.
func (a AdapterInfo) String() string {
	return fmt.Sprintf("#%d %s (%s, %s, driver %q)", a.Index, a.Name, a.Type, a.Backend, a.Driver)
}

func newInstance() *wgpu.Instance {
	return wgpu.CreateInstance(&wgpu.InstanceDescriptor{Backends: backends})
}

func describe(i int, a *wgpu.Adapter) AdapterInfo {
	info := a.GetInfo()
	ai := AdapterInfo{
		Index:  i,
		Name:   info.Device,
		Vendor: info.Vendor,
		Driver: info.Description,
		Features: Features{
			ShaderF16:      a.HasFeature(wgpu.FeatureNameShaderF16),
			Subgroups:      subgroupFeature(a) != 0,
			TimestampQuery: a.HasFeature(wgpu.FeatureNameTimestampQuery),
		},
	}
	switch info.BackendType {
	case wgpu.BackendTypeVulkan:
		ai.Backend = "vulkan"
	case wgpu.BackendTypeMetal:
		ai.Backend = "metal"
	case wgpu.BackendTypeD3D12:
		ai.Backend = "d3d12"
	default:
		ai.Backend = info.BackendType.String()
	}
	switch info.AdapterType {
	case wgpu.AdapterTypeDiscreteGPU:
		ai.Type, ai.rank = "discrete", 0
	case wgpu.AdapterTypeIntegratedGPU:
		ai.Type, ai.rank = "integrated", 1
	case wgpu.AdapterTypeCPU:
		ai.Type, ai.rank = "cpu", 3
	default:
		ai.Type, ai.rank = "unknown", 2
	}
	return ai
}

// Adapters lists every adapter the native backends offer, in enumeration order.
func Adapters() ([]AdapterInfo, error) {
	inst := newInstance()
	defer inst.Release()
	list := inst.EnumerateAdapters(&wgpu.InstanceEnumerateAdapterOptons{Backends: backends})
	out := make([]AdapterInfo, len(list))
	for i, a := range list {
		out[i] = describe(i, a)
		a.Release()
	}
	if len(out) == 0 {
		return nil, ErrNoAdapter
	}
	return out, nil
}

// pick returns the index of the adapter to use: the requested one when index >= 0, else the
// best by type (discrete, then integrated, then unknown, then CPU/software), ties by order.
func pick(infos []AdapterInfo, index int) (int, error) {
	if len(infos) == 0 {
		return 0, ErrNoAdapter
	}
	if index >= 0 {
		if index >= len(infos) {
			return 0, fmt.Errorf("gpu: --device %d out of range: %d adapter(s) found (see `wgpu-llama devices`)", index, len(infos))
		}
		return index, nil
	}
	order := make([]AdapterInfo, len(infos))
	copy(order, infos)
	sort.SliceStable(order, func(i, j int) bool { return order[i].rank < order[j].rank })
	return order[0].Index, nil
}

// lavapipeThreadsEnv is Mesa's software rasterizer thread count. With 0, lavapipe runs each
// dispatch inline in the submitting thread: about 2–4 µs a dispatch instead of ~50 µs through
// its thread pool, at the cost of using one core.
const lavapipeThreadsEnv = "LP_NUM_THREADS"

// PreferInlineSoftware asks a software (lavapipe) adapter opened after this call to run
// dispatches inline, which wins when the kernels are tiny (small models, where dispatch
// overhead dominates) and loses when they are large. It does nothing if the user has set
// LP_NUM_THREADS, and nothing on hardware adapters.
func PreferInlineSoftware() {
	if _, set := os.LookupEnv(lavapipeThreadsEnv); !set {
		os.Setenv(lavapipeThreadsEnv, "0")
	}
}

// subgroupFeature is the name under which an adapter offers subgroup operations, or 0. wgpu-native
// reports them as its native feature (lavapipe on Mesa 25, for one) rather than as WebGPU's
// standard "subgroups", and the device must be asked for the name the adapter gave.
func subgroupFeature(a *wgpu.Adapter) wgpu.FeatureName {
	for _, name := range []wgpu.FeatureName{wgpu.FeatureNameSubgroups, wgpu.NativeFeatureSubgroup} {
		if a.HasFeature(name) {
			return name
		}
	}
	return 0
}

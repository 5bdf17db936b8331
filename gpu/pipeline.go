package gpu

import (
	"fmt"
	"strings"

	"github.com/oliverbestmann/webgpu/wgpu"
)

// Access says how a kernel uses a storage binding.
type Access uint8

// Storage binding kinds.
const (
	ReadOnly Access = iota
	ReadWrite
)

// ParamsSize is the uniform slot each dispatch gets for its parameters (a WGSL struct of at
// most 64 u32/f32 fields at binding 0).
const ParamsSize = 256

// PipelineKey names one compiled kernel variant: the kernel family plus exactly what changes
// the generated code (weight type, fused epilogue, ...). It doubles as the pipeline's label.
type PipelineKey struct {
	Kernel  string // kernel family, the shaders/ file name without .wgsl
	Variant string // the preprocessor defines joined by commas; empty for the plain kernel
}

// String names the pipeline as logs and errors show it: the kernel, then its variant.
func (k PipelineKey) String() string {
	if k.Variant == "" {
		return k.Kernel
	}
	return k.Kernel + "/" + k.Variant
}

// PipelineSpec is everything needed to build a pipeline on a cache miss.
type PipelineSpec struct {
	// Source returns the WGSL; called only on a cache miss.
	Source func() (string, error)
	Entry  string // entry point function name in the WGSL
	// Bindings lists storage bindings 1..n; binding 0 is always the uniform parameter block.
	Bindings []Access
	// WorkgroupSize is recorded with the pipeline so the host sizes dispatches to match.
	WorkgroupSize uint32
	// BoundLoops keeps wgpu's loop bounding in an unchecked module (trusted.go), for the kernels
	// a compiler runs faster with it.
	BoundLoops bool
}

// Pipeline is a compiled compute kernel with its explicit bind-group layout.
type Pipeline struct {
	Key           PipelineKey // cache key, also the pipeline's label
	WorkgroupSize uint32      // from PipelineSpec, invocations per workgroup
	pipeline      *wgpu.ComputePipeline
	layout        *layout
	nbind         int
}

// layout is shared by every pipeline with the same binding signature.
type layout struct {
	group    *wgpu.BindGroupLayout
	pipeline *wgpu.PipelineLayout
}

func (d *Device) layoutFor(bindings []Access) (*layout, error) {
	var sig strings.Builder
	for _, b := range bindings {
		sig.WriteByte('0' + byte(b))
	}
	if l := d.layouts[sig.String()]; l != nil {
		return l, nil
	}
	entries := []wgpu.BindGroupLayoutEntry{{
		Binding:    0,
		Visibility: wgpu.ShaderStageCompute,
		Buffer:     wgpu.BufferBindingLayout{Type: wgpu.BufferBindingTypeUniform, HasDynamicOffset: true, MinBindingSize: ParamsSize},
	}}
	for i, b := range bindings {
		t := wgpu.BufferBindingTypeReadOnlyStorage
		if b == ReadWrite {
			t = wgpu.BufferBindingTypeStorage
		}
		entries = append(entries, wgpu.BindGroupLayoutEntry{
			Binding:    uint32(i + 1),
			Visibility: wgpu.ShaderStageCompute,
			Buffer:     wgpu.BufferBindingLayout{Type: t},
		})
	}
	group, err := d.dev.TryCreateBindGroupLayout(&wgpu.BindGroupLayoutDescriptor{Label: "bindings " + sig.String(), Entries: entries})
	if err != nil {
		return nil, fmt.Errorf("gpu: bind group layout %s: %w", sig.String(), err)
	}
	pl, err := d.dev.TryCreatePipelineLayout(&wgpu.PipelineLayoutDescriptor{BindGroupLayouts: []*wgpu.BindGroupLayout{group}})
	if err != nil {
		group.Release()
		return nil, fmt.Errorf("gpu: pipeline layout %s: %w", sig.String(), err)
	}
	l := &layout{group: group, pipeline: pl}
	d.layouts[sig.String()] = l
	return l, nil
}

// Pipeline returns the cached pipeline for key, compiling it from spec on the first request.
func (d *Device) Pipeline(key PipelineKey, spec PipelineSpec) (*Pipeline, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if p := d.pipelines[key]; p != nil {
		return p, nil
	}
	if len(spec.Bindings)+1 > int(d.Limits.MaxStorageBuffersPerShaderStage)+1 {
		return nil, fmt.Errorf("gpu: kernel %s needs %d storage buffers, adapter allows %d", key, len(spec.Bindings), d.Limits.MaxStorageBuffersPerShaderStage)
	}
	src, err := spec.Source()
	if err != nil {
		return nil, fmt.Errorf("gpu: kernel %s: %w", key, err)
	}
	mod, err := d.compileModule(key.String(), src, spec.BoundLoops)
	if err != nil {
		return nil, d.fault(fmt.Errorf("gpu: compile kernel %s: %w", key, err))
	}
	defer mod.Release()
	l, err := d.layoutFor(spec.Bindings)
	if err != nil {
		return nil, err
	}
	d.created[2].Add(1)
	pipe, err := d.dev.TryCreateComputePipeline(&wgpu.ComputePipelineDescriptor{
		Label:   key.String(),
		Layout:  l.pipeline,
		Compute: wgpu.ProgrammableStageDescriptor{Module: mod, EntryPoint: spec.Entry},
	})
	if err != nil {
		return nil, d.fault(fmt.Errorf("gpu: create pipeline %s: %w", key, err))
	}
	p := &Pipeline{Key: key, WorkgroupSize: spec.WorkgroupSize, pipeline: pipe, layout: l, nbind: len(spec.Bindings)}
	d.pipelines[key] = p
	return p, nil
}

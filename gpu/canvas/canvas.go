// Package canvas is a minimal 2D renderer for the desktop debug view: coloured and
// atlas-textured quads drawn by one WGSL render pipeline (shaders/canvas.wgsl) into an offscreen
// RGBA8 frame, which a window then gets by a texel-exact blit. It opens its own WebGPU device,
// apart from the engine's gpu.Device, so drawing the view never contends with or waits on the
// inference queue, and a window's surface can pick the adapter that can present to it.
package canvas

import (
	"encoding/binary"
	"errors"
	"fmt"
	"image"
	"math"

	"github.com/oliverbestmann/webgpu/wgpu"

	"github.com/wgpu-llama/wgpu-llama/shaders"
)

// ErrNoAdapter is returned (wrapped) when no WebGPU adapter exists, so callers and tests can
// tell a machine without a driver from a real failure.
var ErrNoAdapter = errors.New("canvas: no WebGPU adapter found")

// Color is a straight (not premultiplied) alpha colour with components in 0..1.
type Color struct{ R, G, B, A float32 }

// Quad is one axis-aligned rectangle to draw.
type Quad struct {
	X0, Y0, X1, Y1 float32 // pixels, origin top-left, x right, y down
	U0, V0, U1, V1 float32 // atlas texel coordinates in pixels (used when Textured)
	Color          Color
	Textured       bool // alpha *= the atlas coverage at (u,v), nearest sampling
}

// backends are the native APIs, as in package gpu: wgpu's GL backend would only add a
// duplicate entry for the same device.
const backends = wgpu.InstanceBackend(1<<0 | 1<<2 | 1<<3) // Vulkan | Metal | DX12

const (
	frameFormat = wgpu.TextureFormatRGBA8Unorm
	quadStride  = 13 * 4 // rect, uv, colour (vec4 each) and the textured flag, float32s
	minQuads    = 256    // initial instance buffer capacity
)

// Canvas draws frames of quads on its own WebGPU device, offscreen or into a window.
type Canvas struct {
	inst    *wgpu.Instance
	adapter *wgpu.Adapter
	dev     *wgpu.Device
	queue   *wgpu.Queue
	name    string
	maxDim  int

	width, height int

	quadPipe   *wgpu.RenderPipeline
	quadLayout *wgpu.BindGroupLayout
	quadGroup  *wgpu.BindGroup // uniform + atlas
	uniform    *wgpu.Buffer    // View{size}
	uniformBuf [16]byte

	atlas          *wgpu.Texture
	atlasView      *wgpu.TextureView
	atlasW, atlasH int

	frame     *wgpu.Texture // what Draw renders and Capture reads
	frameView *wgpu.TextureView

	instances *wgpu.Buffer // per-quad vertex data, grown by doubling
	instCap   uint64       // bytes
	scratch   []byte

	readback     *wgpu.Buffer // Capture's map-read buffer, grown as needed
	readbackSize uint64

	passAttach []wgpu.RenderPassColorAttachment
	passDesc   wgpu.RenderPassDescriptor

	win *window // nil offscreen
}

// NewOffscreen draws into a texture only (tests, headless screenshots).
func NewOffscreen(width, height int) (*Canvas, error) {
	inst := wgpu.CreateInstance(&wgpu.InstanceDescriptor{Backends: backends})
	adapter, err := inst.RequestAdapter(&wgpu.RequestAdapterOptions{})
	if err != nil || adapter == nil {
		inst.Release()
		return nil, fmt.Errorf("%w: %v", ErrNoAdapter, err)
	}
	c := &Canvas{inst: inst, adapter: adapter}
	if err := c.init(width, height); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// init opens the device on c.adapter and builds the quad pipeline and the first frame; a
// window's surface and blit are set up by the caller afterwards.
func (c *Canvas) init(width, height int) error {
	info := c.adapter.GetInfo()
	c.name = info.Device
	limits := c.adapter.GetLimits()
	c.maxDim = int(limits.MaxTextureDimension2D)
	dev, err := c.adapter.RequestDevice(&wgpu.DeviceDescriptor{
		Label: "wgpu-llama canvas",
		// The adapter's own limits: the default 8192 texture size is less than a HiDPI
		// display spanning two monitors may need.
		RequiredLimits: &limits,
	})
	if err != nil {
		return fmt.Errorf("canvas: request device on %s: %w", c.name, err)
	}
	c.dev = dev
	c.queue = dev.GetQueue()

	src, err := shaders.Source("canvas")
	if err != nil {
		return err
	}
	module, err := dev.TryCreateShaderModule(&wgpu.ShaderModuleDescriptor{
		Label: "canvas.wgsl", WGSLSource: &wgpu.ShaderSourceWGSL{Code: src},
	})
	if err != nil {
		return fmt.Errorf("canvas: compile canvas.wgsl: %w", err)
	}
	defer module.Release()
	if err := c.makeQuadPipeline(module); err != nil {
		return err
	}
	if c.uniform, err = dev.TryCreateBuffer(&wgpu.BufferDescriptor{
		Label: "canvas view", Size: 16, Usage: wgpu.BufferUsageUniform | wgpu.BufferUsageCopyDst,
	}); err != nil {
		return fmt.Errorf("canvas: create uniform buffer: %w", err)
	}
	if err := c.growInstances(minQuads * quadStride); err != nil {
		return err
	}
	// A one-texel empty atlas until SetAtlas, so the bind group is always complete and textured
	// quads without an atlas draw nothing.
	if err := c.SetAtlas(image.NewAlpha(image.Rect(0, 0, 1, 1))); err != nil {
		return err
	}
	c.passAttach = make([]wgpu.RenderPassColorAttachment, 1)
	c.passDesc = wgpu.RenderPassDescriptor{Label: "canvas quads", ColorAttachments: c.passAttach}
	if c.win != nil {
		if err := c.win.makeBlitPipeline(c, module); err != nil {
			return err
		}
	}
	return c.Resize(width, height)
}

func (c *Canvas) makeQuadPipeline(module *wgpu.ShaderModule) error {
	f4 := wgpu.VertexFormatFloat32x4
	pipe, err := c.dev.TryCreateRenderPipeline(&wgpu.RenderPipelineDescriptor{
		Label: "canvas quads",
		Vertex: wgpu.VertexState{
			Module: module, EntryPoint: "vs_quad",
			Buffers: []wgpu.VertexBufferLayout{{
				ArrayStride: quadStride,
				StepMode:    wgpu.VertexStepModeInstance,
				Attributes: []wgpu.VertexAttribute{
					{Format: f4, Offset: 0, ShaderLocation: 0},
					{Format: f4, Offset: 16, ShaderLocation: 1},
					{Format: f4, Offset: 32, ShaderLocation: 2},
					{Format: wgpu.VertexFormatFloat32, Offset: 48, ShaderLocation: 3},
				},
			}},
		},
		Primitive: wgpu.PrimitiveState{
			Topology: wgpu.PrimitiveTopologyTriangleList, FrontFace: wgpu.FrontFaceCCW, CullMode: wgpu.CullModeNone,
		},
		Multisample: wgpu.MultisampleState{Count: 1, Mask: 0xFFFFFFFF},
		Fragment: &wgpu.FragmentState{
			Module: module, EntryPoint: "fs_quad",
			Targets: []wgpu.ColorTargetState{{
				Format: frameFormat,
				// Straight-alpha "over": colour src*a + dst*(1-a); alpha a + dst*(1-a).
				Blend: &wgpu.BlendState{
					Color: wgpu.BlendComponent{
						Operation: wgpu.BlendOperationAdd,
						SrcFactor: wgpu.BlendFactorSrcAlpha, DstFactor: wgpu.BlendFactorOneMinusSrcAlpha,
					},
					Alpha: wgpu.BlendComponentOver,
				},
				WriteMask: wgpu.ColorWriteMaskAll,
			}},
		},
	})
	if err != nil {
		return fmt.Errorf("canvas: create quad pipeline: %w", err)
	}
	c.quadPipe = pipe
	c.quadLayout = pipe.GetBindGroupLayout(0)
	return nil
}

// growInstances makes the instance buffer hold at least size bytes, doubling so a frame that
// grows a little each time does not reallocate each time.
func (c *Canvas) growInstances(size uint64) error {
	if size <= c.instCap {
		return nil
	}
	newCap := max(c.instCap, minQuads*quadStride)
	for newCap < size {
		newCap *= 2
	}
	buf, err := c.dev.TryCreateBuffer(&wgpu.BufferDescriptor{
		Label: "canvas quads", Size: newCap, Usage: wgpu.BufferUsageVertex | wgpu.BufferUsageCopyDst,
	})
	if err != nil {
		return fmt.Errorf("canvas: create quad buffer of %d bytes: %w", newCap, err)
	}
	if c.instances != nil {
		c.instances.Destroy()
		c.instances.Release()
	}
	c.instances, c.instCap = buf, newCap
	if cap(c.scratch) < int(newCap) {
		c.scratch = make([]byte, 0, newCap)
	}
	return nil
}

// SetAtlas uploads the coverage atlas Textured quads sample (an R8 texture); an atlas of the
// same size as the last one is overwritten in place.
func (c *Canvas) SetAtlas(img *image.Alpha) error {
	if img == nil {
		return errors.New("canvas: SetAtlas: nil image")
	}
	r := img.Bounds()
	w, h := r.Dx(), r.Dy()
	if w <= 0 || h <= 0 || w > c.maxDim || h > c.maxDim {
		return fmt.Errorf("canvas: SetAtlas: %dx%d atlas outside 1..%d", w, h, c.maxDim)
	}
	if w != c.atlasW || h != c.atlasH {
		tex, err := c.dev.TryCreateTexture(&wgpu.TextureDescriptor{
			Label:         "canvas atlas",
			Usage:         wgpu.TextureUsageTextureBinding | wgpu.TextureUsageCopyDst,
			Dimension:     wgpu.TextureDimension2D,
			Size:          wgpu.Extent3D{Width: uint32(w), Height: uint32(h), DepthOrArrayLayers: 1},
			Format:        wgpu.TextureFormatR8Unorm,
			MipLevelCount: 1,
			SampleCount:   1,
		})
		if err != nil {
			return fmt.Errorf("canvas: create %dx%d atlas: %w", w, h, err)
		}
		view, err := tex.TryCreateView(nil)
		if err != nil {
			tex.Release()
			return fmt.Errorf("canvas: atlas view: %w", err)
		}
		releaseTexture(c.atlas, c.atlasView)
		c.atlas, c.atlasView, c.atlasW, c.atlasH = tex, view, w, h
		if err := c.makeQuadGroup(); err != nil {
			return err
		}
	}
	data := img.Pix[img.PixOffset(r.Min.X, r.Min.Y):]
	if need := (h-1)*img.Stride + w; len(data) < need {
		return fmt.Errorf("canvas: SetAtlas: %d pixel bytes, %dx%d stride %d needs %d", len(data), w, h, img.Stride, need)
	}
	err := c.queue.TryWriteTexture(c.atlas.AsImageCopy(), data,
		&wgpu.TexelCopyBufferLayout{BytesPerRow: uint32(img.Stride), RowsPerImage: uint32(h)},
		&wgpu.Extent3D{Width: uint32(w), Height: uint32(h), DepthOrArrayLayers: 1})
	if err != nil {
		return fmt.Errorf("canvas: upload atlas: %w", err)
	}
	return nil
}

func (c *Canvas) makeQuadGroup() error {
	g, err := c.dev.TryCreateBindGroup(&wgpu.BindGroupDescriptor{
		Label:  "canvas quads",
		Layout: c.quadLayout,
		Entries: []wgpu.BindGroupEntry{
			{Binding: 0, Buffer: c.uniform, Size: 16},
			{Binding: 1, TextureView: c.atlasView},
		},
	})
	if err != nil {
		return fmt.Errorf("canvas: quad bind group: %w", err)
	}
	if c.quadGroup != nil {
		c.quadGroup.Release()
	}
	c.quadGroup = g
	return nil
}

// Resize sets the framebuffer size in pixels, recreating the frame and reconfiguring a
// window's surface. A zero size (a minimised window) is allowed: Draw then draws nothing.
// After a resize the frame is transparent black until the next Draw.
func (c *Canvas) Resize(width, height int) error {
	if width < 0 || height < 0 || width > c.maxDim || height > c.maxDim {
		return fmt.Errorf("canvas: size %dx%d outside 0..%d", width, height, c.maxDim)
	}
	if width == c.width && height == c.height && (c.frame != nil || width == 0 || height == 0) {
		return nil
	}
	releaseTexture(c.frame, c.frameView)
	c.frame, c.frameView = nil, nil
	c.width, c.height = width, height
	if width == 0 || height == 0 {
		return nil
	}
	tex, err := c.dev.TryCreateTexture(&wgpu.TextureDescriptor{
		Label:         "canvas frame",
		Usage:         wgpu.TextureUsageRenderAttachment | wgpu.TextureUsageCopySrc | wgpu.TextureUsageTextureBinding,
		Dimension:     wgpu.TextureDimension2D,
		Size:          wgpu.Extent3D{Width: uint32(width), Height: uint32(height), DepthOrArrayLayers: 1},
		Format:        frameFormat,
		MipLevelCount: 1,
		SampleCount:   1,
	})
	if err != nil {
		return fmt.Errorf("canvas: create %dx%d frame: %w", width, height, err)
	}
	view, err := tex.TryCreateView(nil)
	if err != nil {
		tex.Release()
		return fmt.Errorf("canvas: frame view: %w", err)
	}
	c.frame, c.frameView = tex, view
	binary.LittleEndian.PutUint32(c.uniformBuf[0:], math.Float32bits(float32(width)))
	binary.LittleEndian.PutUint32(c.uniformBuf[4:], math.Float32bits(float32(height)))
	if err := c.queue.TryWriteBuffer(c.uniform, 0, c.uniformBuf[:]); err != nil {
		return fmt.Errorf("canvas: write view size: %w", err)
	}
	if c.win != nil {
		return c.win.resize(c)
	}
	return nil
}

// Size returns the framebuffer size in pixels.
func (c *Canvas) Size() (width, height int) { return c.width, c.height }

// AdapterName names the adapter the canvas draws on (e.g. "llvmpipe (LLVM 15.0.6, 256 bits)").
func (c *Canvas) AdapterName() string { return c.name }

// Draw renders one frame: clear, then the quads in order with alpha blending, and presents it
// (window). All quads go in one instanced draw call.
func (c *Canvas) Draw(clear Color, quads []Quad) error {
	if c.frame == nil {
		return nil // zero size
	}
	n := len(quads)
	if err := c.growInstances(uint64(n) * quadStride); err != nil {
		return err
	}
	b := c.scratch[:n*quadStride]
	for i := range quads {
		q := &quads[i]
		t := float32(0)
		if q.Textured {
			t = 1
		}
		o := b[i*quadStride : (i+1)*quadStride]
		for j, v := range [13]float32{q.X0, q.Y0, q.X1, q.Y1, q.U0, q.V0, q.U1, q.V1,
			q.Color.R, q.Color.G, q.Color.B, q.Color.A, t} {
			binary.LittleEndian.PutUint32(o[4*j:], math.Float32bits(v))
		}
	}
	if n > 0 {
		if err := c.queue.TryWriteBuffer(c.instances, 0, b); err != nil {
			return fmt.Errorf("canvas: upload quads: %w", err)
		}
	}

	enc, err := c.dev.TryCreateCommandEncoder(nil)
	if err != nil {
		return fmt.Errorf("canvas: command encoder: %w", err)
	}
	defer enc.Release()
	c.passAttach[0] = wgpu.RenderPassColorAttachment{
		View: c.frameView, LoadOp: wgpu.LoadOpClear, StoreOp: wgpu.StoreOpStore,
		ClearValue: wgpu.Color{R: float64(clear.R), G: float64(clear.G), B: float64(clear.B), A: float64(clear.A)},
	}
	pass, err := enc.TryBeginRenderPass(&c.passDesc)
	if err != nil {
		return fmt.Errorf("canvas: begin render pass: %w", err)
	}
	pass.SetPipeline(c.quadPipe)
	pass.SetBindGroup(0, c.quadGroup, nil)
	if n > 0 {
		pass.SetVertexBuffer(0, c.instances, 0, uint64(n)*quadStride)
		pass.Draw(6, uint32(n), 0, 0)
	}
	if err := pass.TryEnd(); err != nil {
		return fmt.Errorf("canvas: draw quads: %w", err)
	}

	var target *surfaceFrame
	if c.win != nil {
		if target, err = c.win.blit(c, enc); err != nil {
			return err
		}
	}
	cmd, err := enc.TryFinish(nil)
	if err != nil {
		target.release()
		return fmt.Errorf("canvas: finish frame: %w", err)
	}
	c.queue.Submit(cmd)
	cmd.Release()
	if target != nil {
		c.win.surface.Present()
		c.win.presented++
		target.release()
	}
	// Waiting for the frame makes Draw's time its whole cost, which a caller budgets against
	// other work on the same adapter, and keeps frames from piling up in the queue.
	c.dev.Poll(true, nil)
	return nil
}

// Capture returns the last drawn frame's pixels (exactly what Draw rendered), read back
// through a buffer whose rows are padded to WebGPU's 256-byte copy alignment.
func (c *Canvas) Capture() (*image.RGBA, error) {
	img := image.NewRGBA(image.Rect(0, 0, c.width, c.height))
	if c.frame == nil {
		return img, nil
	}
	w, h := c.width, c.height
	align := wgpu.CopyBytesPerRowAlignment
	stride := (w*4 + align - 1) / align * align
	size := uint64(stride * h)
	if c.readback == nil || c.readbackSize < size {
		buf, err := c.dev.TryCreateBuffer(&wgpu.BufferDescriptor{
			Label: "canvas readback", Size: size, Usage: wgpu.BufferUsageMapRead | wgpu.BufferUsageCopyDst,
		})
		if err != nil {
			return nil, fmt.Errorf("canvas: create readback buffer: %w", err)
		}
		if c.readback != nil {
			c.readback.Destroy()
			c.readback.Release()
		}
		c.readback, c.readbackSize = buf, size
	}
	enc, err := c.dev.TryCreateCommandEncoder(nil)
	if err != nil {
		return nil, fmt.Errorf("canvas: command encoder: %w", err)
	}
	defer enc.Release()
	if err := enc.TryCopyTextureToBuffer(c.frame.AsImageCopy(),
		&wgpu.TexelCopyBufferInfo{Buffer: c.readback, Layout: wgpu.TexelCopyBufferLayout{
			BytesPerRow: uint32(stride), RowsPerImage: uint32(h),
		}},
		&wgpu.Extent3D{Width: uint32(w), Height: uint32(h), DepthOrArrayLayers: 1}); err != nil {
		return nil, fmt.Errorf("canvas: copy frame: %w", err)
	}
	cmd, err := enc.TryFinish(nil)
	if err != nil {
		return nil, fmt.Errorf("canvas: finish capture: %w", err)
	}
	c.queue.Submit(cmd)
	cmd.Release()

	var status wgpu.MapAsyncStatus
	done := false
	if err := c.readback.TryMapAsync(wgpu.MapModeRead, 0, size, func(s wgpu.MapAsyncStatus) {
		status, done = s, true
	}); err != nil {
		return nil, fmt.Errorf("canvas: map readback: %w", err)
	}
	for !done {
		c.dev.Poll(true, nil)
	}
	if status != wgpu.MapAsyncStatusSuccess {
		return nil, fmt.Errorf("canvas: map readback: status %v", status)
	}
	data := c.readback.GetMappedRange(0, uint(size))
	for y := range h {
		copy(img.Pix[y*img.Stride:y*img.Stride+w*4], data[y*stride:])
	}
	if err := c.readback.TryUnmap(); err != nil {
		return nil, fmt.Errorf("canvas: unmap readback: %w", err)
	}
	return img, nil
}

// Close releases the device and everything made on it; the canvas is unusable afterwards.
func (c *Canvas) Close() {
	if c == nil {
		return
	}
	if c.win != nil {
		c.win.close()
	}
	releaseTexture(c.frame, c.frameView)
	releaseTexture(c.atlas, c.atlasView)
	c.frame, c.frameView, c.atlas, c.atlasView = nil, nil, nil, nil
	c.atlasW, c.atlasH = 0, 0
	for _, b := range []*wgpu.Buffer{c.instances, c.readback, c.uniform} {
		if b != nil {
			b.Destroy()
			b.Release()
		}
	}
	c.instances, c.readback, c.uniform = nil, nil, nil
	if c.quadGroup != nil {
		c.quadGroup.Release()
		c.quadGroup = nil
	}
	if c.quadLayout != nil {
		c.quadLayout.Release()
		c.quadLayout = nil
	}
	if c.quadPipe != nil {
		c.quadPipe.Release()
		c.quadPipe = nil
	}
	if c.queue != nil {
		c.queue.Release()
		c.queue = nil
	}
	if c.dev != nil {
		c.dev.Release()
		c.dev = nil
	}
	if c.adapter != nil {
		c.adapter.Release()
		c.adapter = nil
	}
	if c.inst != nil {
		c.inst.Release()
		c.inst = nil
	}
	c.width, c.height = 0, 0
}

func releaseTexture(t *wgpu.Texture, v *wgpu.TextureView) {
	if v != nil {
		v.Release()
	}
	if t != nil {
		t.Destroy()
		t.Release()
	}
}

package canvas

import (
	"fmt"
	"strings"

	"github.com/go-gl/glfw/v3.4/glfw"
	"github.com/oliverbestmann/webgpu/wgpu"
	"github.com/oliverbestmann/webgpu/wgpuglfw"
)

// window is a canvas's presentation side: the GLFW window's surface and the blit pipeline
// that copies the offscreen frame onto it.
type window struct {
	surface    *wgpu.Surface
	config     wgpu.SurfaceConfiguration
	configured bool
	stale      bool // the last frame was suboptimal: reconfigure before the next

	blitPipe   *wgpu.RenderPipeline
	blitLayout *wgpu.BindGroupLayout
	blitGroup  *wgpu.BindGroup // the current frame's view

	attach []wgpu.RenderPassColorAttachment
	desc   wgpu.RenderPassDescriptor
	frame  surfaceFrame

	presented int // frames presented, for tests
}

// surfaceFrame is one acquired surface texture and its view, released after Present.
type surfaceFrame struct {
	tex  *wgpu.Texture
	view *wgpu.TextureView
}

func (f *surfaceFrame) release() {
	if f == nil {
		return
	}
	if f.view != nil {
		f.view.Release()
	}
	if f.tex != nil {
		f.tex.Release()
	}
	f.tex, f.view = nil, nil
}

// NewWindow draws into a GLFW window's surface, on an adapter that can present to it.
// width, height: the framebuffer size in pixels (glfw's GetFramebufferSize, which differs from
// the window size on HiDPI displays).
func NewWindow(w *glfw.Window, width, height int) (*Canvas, error) {
	if w == nil {
		return nil, fmt.Errorf("canvas: NewWindow: nil window")
	}
	inst := wgpu.CreateInstance(&wgpu.InstanceDescriptor{Backends: backends})
	surface := inst.CreateSurface(wgpuglfw.GetSurfaceDescriptor(w))
	if surface == nil {
		inst.Release()
		return nil, fmt.Errorf("canvas: create surface for the window")
	}
	adapter, err := inst.RequestAdapter(&wgpu.RequestAdapterOptions{CompatibleSurface: surface})
	if err != nil || adapter == nil {
		surface.Release()
		inst.Release()
		return nil, fmt.Errorf("%w for the window's surface: %v", ErrNoAdapter, err)
	}
	c := &Canvas{inst: inst, adapter: adapter, win: &window{surface: surface}}
	caps := surface.GetCapabilities(adapter)
	if len(caps.Formats) == 0 {
		c.Close()
		return nil, fmt.Errorf("canvas: adapter %s cannot present to the window", adapter.GetInfo().Device)
	}
	c.win.config = wgpu.SurfaceConfiguration{
		Usage:       wgpu.TextureUsageRenderAttachment,
		Format:      pickFormat(caps.Formats),
		PresentMode: wgpu.PresentModeFifo, // always supported; vsync keeps the view off the CPU
		AlphaMode:   wgpu.CompositeAlphaModeAuto,
	}
	for i, m := range caps.AlphaModes {
		if i == 0 {
			c.win.config.AlphaMode = m
		}
		if m == wgpu.CompositeAlphaModeOpaque {
			c.win.config.AlphaMode = m
		}
	}
	if err := c.init(width, height); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// pickFormat prefers an 8-bit non-sRGB format, whose stored bytes are the frame's own, so the
// window shows the values Capture returns; then any non-sRGB one; then what the surface has
// (an sRGB format gets the decoding blit).
func pickFormat(formats []wgpu.TextureFormat) wgpu.TextureFormat {
	for _, f := range formats {
		if f == wgpu.TextureFormatBGRA8Unorm || f == wgpu.TextureFormatRGBA8Unorm {
			return f
		}
	}
	for _, f := range formats {
		if !isSRGB(f) {
			return f
		}
	}
	return formats[0]
}

func isSRGB(f wgpu.TextureFormat) bool {
	return strings.Contains(strings.ToLower(f.String()), "srgb")
}

func (win *window) makeBlitPipeline(c *Canvas, module *wgpu.ShaderModule) error {
	entry := "fs_blit"
	if isSRGB(win.config.Format) {
		entry = "fs_blit_srgb"
	}
	pipe, err := c.dev.TryCreateRenderPipeline(&wgpu.RenderPipelineDescriptor{
		Label:  "canvas blit",
		Vertex: wgpu.VertexState{Module: module, EntryPoint: "vs_blit"},
		Primitive: wgpu.PrimitiveState{
			Topology: wgpu.PrimitiveTopologyTriangleList, FrontFace: wgpu.FrontFaceCCW, CullMode: wgpu.CullModeNone,
		},
		Multisample: wgpu.MultisampleState{Count: 1, Mask: 0xFFFFFFFF},
		Fragment: &wgpu.FragmentState{
			Module: module, EntryPoint: entry,
			Targets: []wgpu.ColorTargetState{{Format: win.config.Format, WriteMask: wgpu.ColorWriteMaskAll}},
		},
	})
	if err != nil {
		return fmt.Errorf("canvas: create blit pipeline for %v: %w", win.config.Format, err)
	}
	win.blitPipe = pipe
	win.blitLayout = pipe.GetBindGroupLayout(0)
	win.attach = make([]wgpu.RenderPassColorAttachment, 1)
	win.desc = wgpu.RenderPassDescriptor{Label: "canvas blit", ColorAttachments: win.attach}
	return nil
}

// resize follows a new frame: the surface is reconfigured to its size and the blit rebound to
// its view.
func (win *window) resize(c *Canvas) error {
	g, err := c.dev.TryCreateBindGroup(&wgpu.BindGroupDescriptor{
		Label:   "canvas blit",
		Layout:  win.blitLayout,
		Entries: []wgpu.BindGroupEntry{{Binding: 2, TextureView: c.frameView}},
	})
	if err != nil {
		return fmt.Errorf("canvas: blit bind group: %w", err)
	}
	if win.blitGroup != nil {
		win.blitGroup.Release()
	}
	win.blitGroup = g
	win.config.Width, win.config.Height = uint32(c.width), uint32(c.height)
	win.configure(c)
	return nil
}

func (win *window) configure(c *Canvas) {
	win.surface.Configure(c.dev, &win.config)
	win.configured, win.stale = true, false
}

// blit acquires the surface's next texture and records the copy of the frame onto it. It
// returns nil, nil when there is nothing to present to this time (surface timed out or
// occluded, or still outdated after reconfiguring): the frame is drawn and Capture sees it,
// the window just skips it.
func (win *window) blit(c *Canvas, enc *wgpu.CommandEncoder) (*surfaceFrame, error) {
	if !win.configured || win.stale {
		win.configure(c)
	}
	var tex *wgpu.Texture
	for try := 0; tex == nil; try++ {
		if try == 2 {
			return nil, nil
		}
		st, err := win.surface.TryGetCurrentTexture()
		if err != nil {
			// wgpu-native may report the status as an error rather than in Status.
			msg := strings.ToLower(err.Error())
			switch {
			case strings.Contains(msg, "outdated"), strings.Contains(msg, "lost"):
				win.configure(c)
				continue
			case strings.Contains(msg, "timed out"), strings.Contains(msg, "timeout"), strings.Contains(msg, "occluded"):
				return nil, nil
			}
			return nil, fmt.Errorf("canvas: acquire surface texture: %w", err)
		}
		switch st.Status {
		case wgpu.SurfaceGetCurrentTextureStatusSuccessOptimal:
			tex = st.Texture
		case wgpu.SurfaceGetCurrentTextureStatusSuccessSuboptimal:
			tex, win.stale = st.Texture, true
		case wgpu.SurfaceGetCurrentTextureStatusOutdated, wgpu.SurfaceGetCurrentTextureStatusLost:
			if st.Texture != nil {
				st.Texture.Release()
			}
			win.configure(c)
		case wgpu.SurfaceGetCurrentTextureStatusTimeout, wgpu.SurfaceGetCurrentTextureStatusOccluded:
			if st.Texture != nil {
				st.Texture.Release()
			}
			return nil, nil
		default:
			if st.Texture != nil {
				st.Texture.Release()
			}
			return nil, fmt.Errorf("canvas: acquire surface texture: status %v", st.Status)
		}
	}
	view, err := tex.TryCreateView(nil)
	if err != nil {
		tex.Release()
		return nil, fmt.Errorf("canvas: surface view: %w", err)
	}
	win.frame = surfaceFrame{tex: tex, view: view}
	win.attach[0] = wgpu.RenderPassColorAttachment{
		View: view, LoadOp: wgpu.LoadOpClear, StoreOp: wgpu.StoreOpStore, ClearValue: wgpu.Color{A: 1},
	}
	pass, err := enc.TryBeginRenderPass(&win.desc)
	if err != nil {
		win.frame.release()
		return nil, fmt.Errorf("canvas: begin blit pass: %w", err)
	}
	pass.SetPipeline(win.blitPipe)
	pass.SetBindGroup(0, win.blitGroup, nil)
	pass.Draw(3, 1, 0, 0)
	if err := pass.TryEnd(); err != nil {
		win.frame.release()
		return nil, fmt.Errorf("canvas: blit: %w", err)
	}
	return &win.frame, nil
}

func (win *window) close() {
	win.frame.release()
	if win.blitGroup != nil {
		win.blitGroup.Release()
		win.blitGroup = nil
	}
	if win.blitLayout != nil {
		win.blitLayout.Release()
		win.blitLayout = nil
	}
	if win.blitPipe != nil {
		win.blitPipe.Release()
		win.blitPipe = nil
	}
	if win.surface != nil {
		win.surface.Release()
		win.surface = nil
	}
}

// canvas.wgsl: the render (not compute) shaders of gpu/canvas, the debug view's 2D canvas.
// vs_quad/fs_quad draw instanced quads (one instance per quad, six vertices each) into the
// offscreen frame with alpha blending; vs_blit/fs_blit copy that frame to a window's surface
// texel for texel, so the window shows exactly what Capture reads back.

struct View {
    size: vec2<f32>, // framebuffer pixels
    _pad: vec2<f32>,
}

@group(0) @binding(0) var<uniform> view: View;
// Coverage atlas (R8): textured quads multiply their alpha by it, read without filtering so
// glyphs drawn at integer positions stay crisp.
@group(0) @binding(1) var atlas: texture_2d<f32>;

struct QuadIn {
    @location(0) rect: vec4<f32>,  // x0, y0, x1, y1 in pixels, y down
    @location(1) uv: vec4<f32>,    // u0, v0, u1, v1 in atlas texels
    @location(2) color: vec4<f32>, // straight alpha
    @location(3) textured: f32,    // 1: alpha *= atlas coverage
}

struct QuadOut {
    @builtin(position) pos: vec4<f32>,
    @location(0) uv: vec2<f32>,
    @location(1) color: vec4<f32>,
    @location(2) @interpolate(flat) textured: f32,
}

@vertex
fn vs_quad(@builtin(vertex_index) vi: u32, q: QuadIn) -> QuadOut {
    // Two triangles over the corners (bit 0: right, bit 1: bottom).
    var corners = array<u32, 6>(0u, 1u, 2u, 2u, 1u, 3u);
    let c = corners[vi];
    let t = vec2<f32>(f32(c & 1u), f32(c >> 1u));
    let p = mix(q.rect.xy, q.rect.zw, t);
    var out: QuadOut;
    out.pos = vec4<f32>(p.x / view.size.x * 2.0 - 1.0, 1.0 - p.y / view.size.y * 2.0, 0.0, 1.0);
    out.uv = mix(q.uv.xy, q.uv.zw, t);
    out.color = q.color;
    out.textured = q.textured;
    return out;
}

@fragment
fn fs_quad(in: QuadOut) -> @location(0) vec4<f32> {
    var a = in.color.a;
    if (in.textured != 0.0) {
        let last = vec2<i32>(textureDimensions(atlas)) - vec2<i32>(1);
        let texel = clamp(vec2<i32>(floor(in.uv)), vec2<i32>(0), last);
        a = a * textureLoad(atlas, texel, 0).r;
    }
    return vec4<f32>(in.color.rgb, a);
}

// The offscreen frame, read by the blit.
@group(0) @binding(2) var frame: texture_2d<f32>;

@vertex
fn vs_blit(@builtin(vertex_index) vi: u32) -> @builtin(position) vec4<f32> {
    // One triangle covering the viewport: (-1,-1), (3,-1), (-1,3).
    let p = vec2<f32>(f32((vi << 1u) & 2u), f32(vi & 2u));
    return vec4<f32>(p * 2.0 - 1.0, 0.0, 1.0);
}

@fragment
fn fs_blit(@builtin(position) pos: vec4<f32>) -> @location(0) vec4<f32> {
    return textureLoad(frame, vec2<i32>(pos.xy), 0);
}

// fs_blit_srgb is the blit for a surface that only offers an sRGB format: the hardware encodes
// on store, so decoding first leaves the stored bytes equal to the frame's.
@fragment
fn fs_blit_srgb(@builtin(position) pos: vec4<f32>) -> @location(0) vec4<f32> {
    let c = textureLoad(frame, vec2<i32>(pos.xy), 0);
    let lo = c.rgb / 12.92;
    let hi = pow((c.rgb + 0.055) / 1.055, vec3<f32>(2.4));
    return vec4<f32>(select(hi, lo, c.rgb <= vec3<f32>(0.04045)), c.a);
}

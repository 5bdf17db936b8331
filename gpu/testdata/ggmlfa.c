// ggmlfa: llama.cpp's CPU flash attention (ggml_flash_attn_ext on the shared build's
// libggml-cpu, one thread), for tests that check ours bit for bit. Declarations of the few
// ggml calls it makes are written here: the library is loaded with dlopen from argv[1].
// argv[2..]: head_dim, queries, heads, keys, kv heads, scale, sinks (0 or 1).
// stdin: q (queries x heads x head_dim f32), k and v (keys x kv heads x head_dim f32, rounded
// to f16 here), then one sink per head when asked. The queries are the last of the keys'
// positions, each attending causally. stdout: queries x heads x head_dim f32.
#include <dlfcn.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

struct init_params { size_t mem_size; void *mem_buffer; bool no_alloc; };
typedef struct tensor tensor;
enum { F32 = 0, F16 = 1 };

#define FN(ret, name, args) static ret(*name) args
FN(void *, ggml_init, (struct init_params));
FN(tensor *, ggml_new_tensor_1d, (void *, int, int64_t));
FN(tensor *, ggml_new_tensor_2d, (void *, int, int64_t, int64_t));
FN(tensor *, ggml_new_tensor_3d, (void *, int, int64_t, int64_t, int64_t));
FN(tensor *, ggml_permute, (void *, tensor *, int, int, int, int));
FN(tensor *, ggml_flash_attn_ext, (void *, tensor *, tensor *, tensor *, tensor *, float, float, float));
FN(void, ggml_flash_attn_ext_add_sinks, (tensor *, tensor *));
FN(void *, ggml_new_graph, (void *));
FN(void, ggml_build_forward_expand, (void *, tensor *));
FN(int, ggml_graph_compute_with_ctx, (void *, void *, int));
FN(void *, ggml_get_data, (const tensor *));
FN(void, ggml_fp32_to_fp16_row, (const float *, uint16_t *, int64_t));

static void *sym(void *lib, const char *name) {
    void *p = dlsym(lib, name);
    if (!p) { fprintf(stderr, "ggmlfa: %s\n", dlerror()); exit(1); }
    return p;
}

static void readf(float *dst, size_t n) {
    if (fread(dst, 4, n, stdin) != n) { fprintf(stderr, "ggmlfa: short input\n"); exit(1); }
}

int main(int argc, char **argv) {
    if (argc != 9) { fprintf(stderr, "usage: ggmlfa LIBDIR D NQ H NKV HKV SCALE SINKS\n"); return 2; }
    char path[4096];
    snprintf(path, sizeof path, "%s/libggml-base.so.0", argv[1]);
    void *base = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
    snprintf(path, sizeof path, "%s/libggml-cpu.so.0", argv[1]);
    void *cpu = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
    if (!base || !cpu) { fprintf(stderr, "ggmlfa: %s\n", dlerror()); return 1; }
    ggml_init = sym(base, "ggml_init");
    ggml_new_tensor_1d = sym(base, "ggml_new_tensor_1d");
    ggml_new_tensor_2d = sym(base, "ggml_new_tensor_2d");
    ggml_new_tensor_3d = sym(base, "ggml_new_tensor_3d");
    ggml_permute = sym(base, "ggml_permute");
    ggml_flash_attn_ext = sym(base, "ggml_flash_attn_ext");
    ggml_flash_attn_ext_add_sinks = sym(base, "ggml_flash_attn_ext_add_sinks");
    ggml_new_graph = sym(base, "ggml_new_graph");
    ggml_build_forward_expand = sym(base, "ggml_build_forward_expand");
    ggml_get_data = sym(base, "ggml_get_data");
    ggml_fp32_to_fp16_row = sym(base, "ggml_fp32_to_fp16_row");
    ggml_graph_compute_with_ctx = sym(cpu, "ggml_graph_compute_with_ctx");

    int d = atoi(argv[2]), nq = atoi(argv[3]), h = atoi(argv[4]), nkv = atoi(argv[5]), hkv = atoi(argv[6]);
    float scale = atof(argv[7]);
    int sinks = atoi(argv[8]);
    void *ctx = ggml_init((struct init_params){(size_t)256 << 20, NULL, false});
    tensor *q = ggml_new_tensor_3d(ctx, F32, d, h, nq);
    tensor *k = ggml_new_tensor_3d(ctx, F16, d, hkv, nkv);
    tensor *v = ggml_new_tensor_3d(ctx, F16, d, hkv, nkv);
    int nqp = (nq + 63) / 64 * 64; // the mask's rows padded, as llama.cpp pads them
    tensor *mask = ggml_new_tensor_2d(ctx, F16, nkv, nqp);
    readf(ggml_get_data(q), (size_t)nq * h * d);
    float *buf = malloc(sizeof(float) * (size_t)nkv * hkv * d);
    float *m = malloc(sizeof(float) * (size_t)nkv * nqp);
    readf(buf, (size_t)nkv * hkv * d);
    ggml_fp32_to_fp16_row(buf, ggml_get_data(k), (int64_t)nkv * hkv * d);
    readf(buf, (size_t)nkv * hkv * d);
    ggml_fp32_to_fp16_row(buf, ggml_get_data(v), (int64_t)nkv * hkv * d);
    for (int i = 0; i < nqp; i++)
        for (int j = 0; j < nkv; j++)
            m[i * nkv + j] = i < nq && j <= nkv - nq + i ? 0.0f : -INFINITY;
    ggml_fp32_to_fp16_row(m, ggml_get_data(mask), (int64_t)nkv * nqp);
    tensor *r = ggml_flash_attn_ext(ctx, ggml_permute(ctx, q, 0, 2, 1, 3), ggml_permute(ctx, k, 0, 2, 1, 3),
                                    ggml_permute(ctx, v, 0, 2, 1, 3), mask, scale, 0.0f, 0.0f);
    if (sinks) {
        tensor *s = ggml_new_tensor_1d(ctx, F32, h);
        readf(ggml_get_data(s), h);
        ggml_flash_attn_ext_add_sinks(r, s);
    }
    void *gf = ggml_new_graph(ctx);
    ggml_build_forward_expand(gf, r);
    ggml_graph_compute_with_ctx(ctx, gf, 1);
    fwrite(ggml_get_data(r), 4, (size_t)nq * h * d, stdout);
    return 0;
}

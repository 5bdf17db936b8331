// ggmlmm: llama.cpp's CPU mul_mat of an F32 weight (rows x k) with n f32 rows (the shared
// build's libggml through its graph API, loaded with dlopen from argv[1]; the calls it makes
// are declared here). argv[2..]: rows, k, n. stdin: the weight, then the n rows. stdout: n x
// rows f32. For n of 2 or more llama.cpp takes llamafile's tinyBLAS where the shape allows.
#include <dlfcn.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

struct init_params { size_t mem_size; void *mem_buffer; bool no_alloc; };
typedef struct tensor tensor;

static void *sym(void *lib, const char *name) {
    void *p = dlsym(lib, name);
    if (!p) { fprintf(stderr, "ggmlmm: %s\n", dlerror()); exit(1); }
    return p;
}

int main(int argc, char **argv) {
    if (argc != 5) { fprintf(stderr, "usage: ggmlmm LIBDIR ROWS K N\n"); return 2; }
    char path[4096];
    snprintf(path, sizeof path, "%s/libggml-base.so.0", argv[1]);
    void *base = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
    snprintf(path, sizeof path, "%s/libggml-cpu.so.0", argv[1]);
    void *cpu = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
    if (!base || !cpu) { fprintf(stderr, "ggmlmm: %s\n", dlerror()); return 1; }
    void *(*init)(struct init_params) = sym(base, "ggml_init");
    tensor *(*new2d)(void *, int, int64_t, int64_t) = sym(base, "ggml_new_tensor_2d");
    tensor *(*mul_mat)(void *, tensor *, tensor *) = sym(base, "ggml_mul_mat");
    void *(*new_graph)(void *) = sym(base, "ggml_new_graph");
    void (*expand)(void *, tensor *) = sym(base, "ggml_build_forward_expand");
    void *(*data)(const tensor *) = sym(base, "ggml_get_data");
    int (*compute)(void *, void *, int) = sym(cpu, "ggml_graph_compute_with_ctx");

    int rows = atoi(argv[2]), k = atoi(argv[3]), n = atoi(argv[4]);
    void *ctx = init((struct init_params){(size_t)256 << 20, NULL, false});
    tensor *w = new2d(ctx, 0, k, rows); // GGML_TYPE_F32
    tensor *x = new2d(ctx, 0, k, n);
    if (fread(data(w), 4, (size_t)rows * k, stdin) != (size_t)rows * k ||
        fread(data(x), 4, (size_t)n * k, stdin) != (size_t)n * k) {
        fprintf(stderr, "ggmlmm: short input\n");
        return 1;
    }
    tensor *y = mul_mat(ctx, w, x);
    void *gf = new_graph(ctx);
    expand(gf, y);
    compute(ctx, gf, 1);
    fwrite(data(y), 4, (size_t)rows * n, stdout);
    return 0;
}

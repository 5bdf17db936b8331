// ggmldot: llama.cpp's CPU vec_dot of weight rows with one activation row.
// stdin: int32 type, int32 n, int32 rows, rows*row_size weight bytes, n floats.
// stdout: rows floats.
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
typedef void (*from_float_t)(const float *, void *, int64_t);
typedef void (*vec_dot_t)(int, float *, size_t, const void *, size_t, const void *, size_t, int);
struct traits { from_float_t from_float; vec_dot_t vec_dot; int vec_dot_type; int64_t nrows; };
int main(int argc, char **argv) {
    char path[4096];
    snprintf(path, sizeof path, "%s/libggml-base.so.0", argv[1]);
    void *base = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
    snprintf(path, sizeof path, "%s/libggml-cpu.so.0", argv[1]);
    void *cpu = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
    if (!base || !cpu) { fprintf(stderr, "%s\n", dlerror()); return 1; }
    void (*cpu_init)(void) = dlsym(cpu, "ggml_cpu_init");
    const struct traits *(*get)(int) = dlsym(cpu, "ggml_get_type_traits_cpu");
    size_t (*row_size)(int, int64_t) = dlsym(base, "ggml_row_size");
    cpu_init();
    int32_t hdr[3];
    if (fread(hdr, 4, 3, stdin) != 3) return 1;
    int type = hdr[0], n = hdr[1], rows = hdr[2];
    size_t rs = row_size(type, n);
    const struct traits *t = get(type);
    size_t xs = row_size(t->vec_dot_type, n);
    char *w = malloc(rs * rows), *xq = malloc(xs);
    float *x = malloc(4 * n);
    if (fread(w, 1, rs * rows, stdin) != rs * rows || fread(x, 4, n, stdin) != (size_t)n) return 1;
    get(t->vec_dot_type)->from_float(x, xq, n);
    for (int r = 0; r < rows; r++) {
        float s;
        t->vec_dot(n, &s, 0, w + r * rs, 0, xq, 0, 1);
        fwrite(&s, 4, 1, stdout);
    }
    return 0;
}

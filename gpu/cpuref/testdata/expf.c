// expf: the C library's expf of each float read from stdin, written to stdout.
#include <math.h>
#include <stdio.h>
int main(void) {
    float x[4096], y[4096];
    size_t n;
    while ((n = fread(x, 4, 4096, stdin)) > 0) {
        for (size_t i = 0; i < n; i++) y[i] = expf(x[i]);
        fwrite(y, 4, n, stdout);
    }
    return 0;
}

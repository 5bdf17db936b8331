// libmf: the C library's expf or logf (argv[1]) of each float read from stdin, to stdout.
#include <math.h>
#include <stdio.h>
#include <string.h>
int main(int argc, char **argv) {
    float (*f)(float) = argc > 1 && strcmp(argv[1], "logf") == 0 ? logf : expf;
    float x[4096], y[4096];
    size_t n;
    while ((n = fread(x, 4, 4096, stdin)) > 0) {
        for (size_t i = 0; i < n; i++) y[i] = f(x[i]);
        fwrite(y, 4, n, stdout);
    }
    return 0;
}

/* opwalk.c - the floor under any pickle reader: a loop that only steps
 * over a pickle's opcodes (reading each memo get, writing each memoize),
 * with no values, no checks and no conversion. What memdiag's reader costs
 * above this is its own doing. Protocol 2-5 pickles as torch writes them.
 *   cc -std=c11 -O2 -o build/opwalk bench/opwalk.c && build/opwalk FILE [RUNS] */
#define _POSIX_C_SOURCE 199309L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

/* One pass; returns the number of opcodes stepped over. */
static size_t walk(const unsigned char *b, size_t n, uint64_t *memo, uint64_t *acc)
{
    size_t pos = 0, ops = 0, nm = 0;
    uint32_t i;
    while (pos < n) {
        ops++;
        switch (b[pos]) {
        case 'h': *acc += memo[b[pos + 1]]; pos += 2; break;
        case 'j': memcpy(&i, b + pos + 1, 4); *acc += memo[i % (n + 1)]; pos += 5; break;
        case 0x94: memo[nm++ % (n + 1)] = pos; pos += 1; break;
        case 'K': case 'q': case 0x80: pos += 2; break; /* BININT1, BINPUT, PROTO */
        case 'M': pos += 3; break;
        case 'J': case 'r': pos += 5; break;              /* BININT, LONG_BINPUT */
        case 0x8a: case 0x8c: pos += 2 + (size_t)b[pos + 1]; break;
        case 0x95: pos += 9; break;
        case 'X': memcpy(&i, b + pos + 1, 4); pos += 5 + (size_t)i; break;
        default: pos += 1; break;
        }
    }
    return ops;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: opwalk FILE [RUNS]\n");
        return 2;
    }
    FILE *f = fopen(argv[1], "rb");
    if (!f || fseek(f, 0, SEEK_END))
        return perror(argv[1]), 2;
    long n = ftell(f);
    rewind(f);
    unsigned char *b = calloc((size_t)n + 16, 1);
    uint64_t *memo = calloc((size_t)n + 1, sizeof *memo);
    if (!b || !memo || fread(b, 1, (size_t)n, f) != (size_t)n)
        return fprintf(stderr, "%s: cannot read\n", argv[1]), 2;
    int runs = argc > 2 ? atoi(argv[2]) : 5;
    double best = -1;
    size_t ops = 0;
    uint64_t acc = 0;
    for (int r = 0; r < runs; r++) {
        double t0 = now_ms();
        ops = walk(b, (size_t)n, memo, &acc);
        double t = now_ms() - t0;
        best = best < 0 || t < best ? t : best;
    }
    printf("%zu opcodes in %.2f ms (best of %d; %.2f ns an opcode)%s\n", ops, best, runs,
           best * 1e6 / (double)ops, acc == 42 ? " " : "");
    free(b);
    free(memo);
    fclose(f);
    return 0;
}

/* faultcost.c - what a page fault costs on this machine: touches fresh
 * anonymous memory page by page, with and without transparent huge pages
 * (a fresh process's heap and arrays are a few thousand such faults).
 *   cc -O2 -o build/faultcost bench/faultcost.c && build/faultcost [MB] */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* Microseconds per 4 KiB page to fault in n bytes, advised as asked. */
static double touch(size_t n, int advice)
{
    const size_t huge = (size_t)2 << 20;
    char *map = mmap(NULL, n + huge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (map == MAP_FAILED)
        return -1;
    char *p = (char *)(((size_t)map + huge - 1) & ~(huge - 1)); /* huge-page aligned */
    madvise(p, n, advice);
    double t = now();
    for (size_t i = 0; i < n; i += 4096)
        p[i] = 1;
    t = now() - t;
    munmap(map, n + huge);
    return t * 1e6 / (double)(n / 4096);
}

int main(int argc, char **argv)
{
    size_t n = (size_t)(argc > 1 ? atol(argv[1]) : 8) << 20;
    for (int r = 0; r < 3; r++)
        printf("%zu MB: 4 KiB pages %.2f us/page, huge pages %.2f us per 4 KiB\n", n >> 20,
               touch(n, MADV_NOHUGEPAGE), touch(n, MADV_HUGEPAGE));
    return 0;
}

/* memcost.c - what making memory costs on this host, ns per 4 KiB page:
 * an 8 MiB anonymous mapping's pages allocated by MADV_POPULATE_WRITE in
 * pieces of 4 KiB to 8 MiB, or by a write to each page (a fault each), or
 * as 2 MiB huge pages; and the munmap that gives them back. The median of
 * RUNS rounds. Build: cc -O2 -static -o build/memcost bench/memcost.c */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>

#define MB ((size_t)1 << 20)
#define SPAN (8 * MB)
#define PAGES (SPAN / 4096)

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* How a round makes its pages: populated `piece` bytes a call, else touched
 * (on huge pages where `huge`). */
typedef struct way {
    const char *name;
    size_t piece;
    int huge;
} way;

static const way ways[] = {
    {"touch 4K", 0, 0},          {"touch huge", 0, 1},        {"populate 4 K", 4096, 0},
    {"populate 16 K", 16384, 0}, {"populate 64 K", 65536, 0}, {"populate 256 K", 262144, 0},
    {"populate 1024 K", MB, 0},  {"populate 8192 K", SPAN, 0},
};

/* one round: ns a page to make them w's way, and to unmap them */
static void round_of(const way *w, double *make, double *unmap)
{
    char *p = mmap(NULL, SPAN + 2 * MB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        exit(1);
    char *a = (char *)(((size_t)p + 2 * MB - 1) & ~(2 * MB - 1));
    if (w->huge)
        madvise(a, SPAN, MADV_HUGEPAGE);
    double t0 = now();
    if (w->piece)
        for (size_t o = 0; o < SPAN; o += w->piece)
            madvise(a + o, w->piece, MADV_POPULATE_WRITE);
    else
        for (size_t o = 0; o < SPAN; o += 4096)
            a[o] = 1;
    double t1 = now();
    munmap(p, SPAN + 2 * MB);
    double t2 = now();
    *make = (t1 - t0) / PAGES, *unmap = (t2 - t1) / PAGES;
}

int main(int argc, char **argv)
{
    int runs = argc > 1 ? atoi(argv[1]) : 21;
    double mk[101], um[101];
    if (runs < 1 || runs > 101)
        return 2;
    printf("%-22s %10s %10s\n", "how", "make_ns/pg", "unmap_ns/pg");
    for (size_t w = 0; w < sizeof ways / sizeof *ways; w++) {
        for (int r = 0; r < runs; r++)
            round_of(&ways[w], &mk[r], &um[r]);
        qsort(mk, runs, sizeof *mk, cmp);
        qsort(um, runs, sizeof *um, cmp);
        printf("%-22s %10.0f %10.0f   (min %.0f / %.0f)\n", ways[w].name, mk[runs / 2],
               um[runs / 2], mk[0], um[0]);
    }
    return 0;
}

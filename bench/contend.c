/* contend.c - how much slower one thread reads a snapshot while other
 * threads are busy: session 45 saw the first reader of a split read take
 * about as long for 55 % of big_gamma as alone for all of it. Each line
 * times md_snapshot_load (best and median of RUNS, in ms) with K busy
 * threads beside it, the reader pinned to CPU 0 and each busy one pinned
 * to the CPUs listed (or left to the scheduler), busy with ALU work (a
 * multiply chain: clock and core sharing alone) or with memory (a 4 MB
 * buffer walked: the shared cache too), or mapping memory (mm: the
 * reader's page faults wait for the address space's lock).
 * A second table (`burst`) times short parallel work, as a split read's
 * memo count is: K threads started, each doing the same ~1 ms of ALU
 * work, until all are joined, against that work done once on the caller
 * (wall ms: best and median of RUNS); so a thread's start and a busy
 * host's slower cores show.
 *   build/contend FILE RUNS [alu|mem|mm] [CPU,CPU,...|free]
 *   build/contend burst RUNS   */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include "memdiag.h"

typedef struct busy {
    pthread_t t;
    int cpu;     /* -1: not pinned */
    int mem;     /* walk a buffer, not only multiply */
    int mm;      /* map, touch and unmap 2 MB over and over: the address
                  * space's lock taken for writing, as a reader's arrays
                  * growing by mremap take it */
    atomic_int *stop;
    unsigned long sink;
} busy;

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* t on `cpu`, or (cpu -1) on any CPU but 0, the reader's: a thread
 * inherits its creator's affinity, so an unpinned one would share CPU 0 */
static void pin(pthread_t t, int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    if (cpu >= 0)
        CPU_SET(cpu, &set);
    else
        for (int c = 1; c < CPU_SETSIZE; c++)
            CPU_SET(c, &set);
    pthread_setaffinity_np(t, sizeof set, &set);
}

static void *map_loop(busy *b)
{
    size_t n = (size_t)2 << 20;
    while (!atomic_load_explicit(b->stop, memory_order_relaxed)) {
        unsigned char *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED)
            break;
        for (size_t i = 0; i < n; i += 4096)
            p[i] = 1;
        munmap(p, n);
    }
    return NULL;
}

static void *busy_main(void *arg)
{
    busy *b = arg;
    if (b->mm)
        return map_loop(b);
    size_t n = (size_t)4 << 20;
    unsigned char *buf = b->mem ? malloc(n) : NULL;
    if (buf)
        memset(buf, 1, n);
    unsigned long x = 88172645463325252ul, i = 0;
    while (!atomic_load_explicit(b->stop, memory_order_relaxed)) {
        for (int k = 0; k < 4096; k++) {
            x = x * 6364136223846793005ul + 1442695040888963407ul;
            if (buf)
                x += buf[(x >> 20) & (n - 1)], buf[(i += 64) & (n - 1)]++;
        }
    }
    b->sink = x;
    free(buf);
    return NULL;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* best and median ms of `runs` loads of `path` */
static void time_loads(const char *path, int runs, double *best, double *median)
{
    double *t = calloc((size_t)runs, sizeof *t);
    for (int i = 0; i < runs; i++) {
        md_err e = {0};
        md_snapshot *s = NULL;
        double t0 = now();
        if (md_snapshot_load(path, &s, &e) != 0) {
            char buf[512];
            fprintf(stderr, "contend: %s\n", md_err_format(&e, buf, sizeof buf));
            exit(1);
        }
        t[i] = (now() - t0) * 1e3;
        md_snapshot_free(s);
    }
    qsort(t, (size_t)runs, sizeof *t, cmp);
    *best = t[0], *median = t[runs / 2];
    free(t);
}

/* the CPUs listed in `s` ("3,5,7"), at most `max`; "free": none pinned */
static int parse_cpus(const char *s, int *cpus, int max)
{
    int n = 0;
    if (!strcmp(s, "free"))
        return 0;
    for (char *end; *s && n < max; s = *end ? end + 1 : end)
        cpus[n++] = (int)strtol(s, &end, 10);
    return n;
}

/* ~1 ms of ALU work on one core (a multiply chain) */
static void *burst_work(void *arg)
{
    unsigned long x = (unsigned long)(uintptr_t)arg | 1;
    for (int i = 0; i < 1000000; i++)
        x = x * 6364136223846793005ul + 1442695040888963407ul;
    __asm__ volatile("" : : "r"(x));
    return NULL;
}

static void burst(int runs)
{
    double *t = calloc((size_t)runs, sizeof *t);
    for (int k = 0; k <= 15; k = k ? 2 * k + 1 : 1) { /* 0: on the caller */
        for (int r = 0; r < runs; r++) {
            pthread_t tid[16];
            double t0 = now();
            if (!k)
                burst_work(NULL);
            for (int i = 0; i < k; i++)
                pthread_create(&tid[i], NULL, burst_work, NULL);
            for (int i = 0; i < k; i++)
                pthread_join(tid[i], NULL);
            t[r] = (now() - t0) * 1e3;
        }
        qsort(t, (size_t)runs, sizeof *t, cmp);
        printf("burst %2d threads: %.3f / %.3f ms\n", k, t[0], t[runs / 2]);
    }
    free(t);
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: contend FILE RUNS [alu|mem|mm] [CPU,CPU,...|free]\n");
        return 2;
    }
    int runs = atoi(argv[2]) > 0 ? atoi(argv[2]) : 9;
    if (!strcmp(argv[1], "burst")) {
        burst(runs);
        return 0;
    }
    int mem = argc > 3 && !strcmp(argv[3], "mem"), mm = argc > 3 && !strcmp(argv[3], "mm");
    int cpus[64], ncpu = parse_cpus(argc > 4 ? argv[4] : "free", cpus, 64);
    int kmax = ncpu ? ncpu : 15;
    pin(pthread_self(), 0);
    for (int k = 0; k <= kmax; k = k ? 2 * k : 1) {
        int kk = k > kmax ? kmax : k;
        atomic_int stop = 0;
        busy *b = calloc((size_t)kk + 1, sizeof *b);
        for (int i = 0; i < kk; i++) {
            b[i] = (busy){.cpu = ncpu ? cpus[i] : -1, .mem = mem, .mm = mm, .stop = &stop};
            pthread_create(&b[i].t, NULL, busy_main, &b[i]);
            pin(b[i].t, b[i].cpu);
        }
        double best, median;
        time_loads(argv[1], runs, &best, &median);
        atomic_store(&stop, 1);
        for (int i = 0; i < kk; i++)
            pthread_join(b[i].t, NULL);
        printf("%s busy %2d %s: read %.2f / %.2f ms\n", mm ? "mm" : mem ? "mem" : "alu", kk,
               ncpu ? "pinned" : "free", best, median);
        free(b);
        if (kk == kmax)
            break;
    }
    return 0;
}

/* stages.c - where `memdiag summary`'s time goes: each library stage of
 * one file timed on its own (best of N runs), and the page faults of each
 * in the first run (fresh memory is a large part of the time on small
 * files).
 *   make build/stages && build/stages FILE [N]   (built by `make bench`) */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>
#include "memdiag.h"

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static long faults(void)
{
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return u.ru_minflt;
}

static long max_rss_kb(void)
{
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return u.ru_maxrss;
}

static void keep_min(double *best, double v)
{
    if (*best < 0 || v < *best)
        *best = v;
}

int main(int argc, char **argv)
{
    mallopt(M_MMAP_THRESHOLD, 1 << 20); /* as memdiag's main does */
    mallopt(M_TRIM_THRESHOLD, 256 << 20);
    if (argc < 2) {
        fprintf(stderr, "usage: stages FILE [RUNS]\n");
        return 2;
    }
    int runs = argc > 2 ? atoi(argv[2]) : 5;
    double best[4] = {-1, -1, -1, -1};
    long pf[5] = {0}, rss[4] = {0};
    for (int i = 0; i < runs; i++) {
        md_err e = {0};
        md_snapshot *s = NULL;
        md_replay *r = NULL;
        md_analysis *a = NULL;
        double t[5];
        long f[5];
        f[0] = faults(), t[0] = now();
        int rc = md_snapshot_load(argv[1], &s, &e);
        f[1] = faults(), t[1] = now();
        if (i == 0)
            rss[0] = max_rss_kb();
        if (!rc)
            rc = md_replay_run(s, 0, &r, &e);
        f[2] = faults(), t[2] = now();
        if (i == 0)
            rss[1] = max_rss_kb();
        if (!rc)
            rc = md_analyze(s, r, &a, &e);
        f[3] = faults(), t[3] = now();
        if (i == 0)
            rss[2] = max_rss_kb();
        if (rc) {
            char buf[512];
            fprintf(stderr, "stages: %s\n", md_err_format(&e, buf, sizeof buf));
            return 1;
        }
        md_analysis_free(a);
        md_replay_free(r);
        md_snapshot_free(s);
        f[4] = faults(), t[4] = now();
        for (int k = 0; k < 4; k++)
            keep_min(&best[k], t[k + 1] - t[k]);
        for (int k = 0; i == 0 && k < 4; k++)
            pf[k] = f[k + 1] - f[k];
        if (i == 0) /* the peak so far after each stage (stages run in order) */
            rss[3] = max_rss_kb();
    }
    printf("read %.1f ms, replay %.1f ms, analysis %.1f ms, free %.1f ms (best of %d)\n",
           best[0] * 1e3, best[1] * 1e3, best[2] * 1e3, best[3] * 1e3, runs);
    printf("page faults (first run): read %ld, replay %ld, analysis %ld, free %ld\n", pf[0],
           pf[1], pf[2], pf[3]);
    printf("peak RSS after each stage (first run): read %ld KB, replay %ld, analysis %ld\n",
           rss[0], rss[1], rss[2]);
    return 0;
}

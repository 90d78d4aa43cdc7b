/* paths.c - turns the PATH arguments into a list of snapshot files: files
 * as given, directories expanded to the snapshot files inside, ordered by
 * the rank number in their names. */
#include <dirent.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <stdio.h>
#include <time.h>
#include "../capture/format.h"
#include "../render/report.h"
#include "cli.h"

static int is_snapshot_name(const char *n)
{
    static const char *const ext[] = {".pickle", ".pkl", ".pickle.gz", ".pickle.xz",
                                      ".pickle.zst", ".pkl.gz", ".pkl.xz", ".pkl.zst", ".mdcap"};
    size_t ln = strlen(n);
    for (size_t i = 0; i < sizeof ext / sizeof ext[0]; i++) {
        size_t le = strlen(ext[i]);
        if (ln > le && !strcmp(n + ln - le, ext[i]))
            return 1;
    }
    return 0;
}

static int by_rank(const void *a, const void *b)
{
    const char *x = *(char *const *)a, *y = *(char *const *)b;
    int rx = md_rank_from_name(x), ry = md_rank_from_name(y);
    if (rx != ry)
        return rx < ry ? -1 : 1;
    return strcmp(x, y);
}

static int push(char ***v, size_t *n, size_t *cap, const char *s)
{
    char *d = strdup(s);
    if (d && *n == *cap) {
        size_t nc = *cap ? *cap * 2 : 16;
        char **nv = realloc(*v, nc * sizeof *nv);
        if (nv) {
            *v = nv;
            *cap = nc;
        }
    }
    if (!d || *n == *cap) {
        free(d);
        return -1;
    }
    (*v)[(*n)++] = d;
    return 0;
}

static int is_snapshot(const char *p)
{
    size_t l = strlen(p);
    return !(l > 6 && !strcmp(p + l - 6, ".mdcap"));
}

static time_t mtime(const char *p)
{
    struct stat st;
    return stat(p, &st) ? 0 : st.st_mtime;
}

/* The exit snapshot (no -oom/-signal/-window/-manual suffix) holds the
 * whole history; then the newest. */
static int priority(const char *p)
{
    static const char *const tags[] = {"-oom.", "-signal.", "-window.", "-manual."};
    const char *base = strrchr(p, '/');
    base = base ? base + 1 : p;
    for (size_t i = 0; i < sizeof tags / sizeof tags[0]; i++)
        if (strstr(base, tags[i]))
            return 0;
    return 1;
}

static int better(const char *a, const char *b)
{
    if (priority(a) != priority(b))
        return priority(a) > priority(b);
    return mtime(a) > mtime(b);
}

/* The "-pidN" memdiag run adds to a second process's names where two
 * processes claim one rank (a sweep's, DataLoader workers); 0 if none. */
static long pid_from_name(const char *p)
{
    const char *base = strrchr(p, '/'), *hit = NULL;
    base = base ? base + 1 : p;
    for (const char *q = base; (q = strstr(q, "-pid")) != NULL; q += 4)
        if (q[4] >= '0' && q[4] <= '9')
            hit = q + 4;
    return hit ? atol(hit) : 0;
}

static int same_process(const char *a, const char *b)
{
    return md_rank_from_name(a) == md_rank_from_name(b) && pid_from_name(a) == pid_from_name(b);
}

/* A run directory can hold several snapshots of one process (window,
 * signal, oom, exit); one is reported, the others are named once and left
 * out. */
static void keep_newest_per_rank(char **v, size_t *n, size_t before)
{
    size_t w = 0, m = *n - before;
    for (size_t i = 0; i < m; i++) {
        int r = md_rank_from_name(v[i]), dup = 0;
        if (is_snapshot(v[i]) && r >= 0)
            for (size_t j = 0; j < m && !dup; j++)
                dup = j != i && is_snapshot(v[j]) && same_process(v[j], v[i]) &&
                      (better(v[j], v[i]) || (!better(v[i], v[j]) && j > i));
        if (dup) {
            fprintf(stderr, "memdiag: %s: another snapshot of rank %d is used (the exit one, or the newest)\n",
                    v[i], r);
            free(v[i]);
            continue;
        }
        v[w++] = v[i];
    }
    *n = before + w;
}

static int expand_dir(const char *dir, char ***v, size_t *n, size_t *cap)
{
    DIR *d = opendir(dir);
    if (!d) {
        cli_fail("%s: cannot read directory", dir);
        return EXIT_USAGE;
    }
    size_t before = *n;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (!is_snapshot_name(e->d_name))
            continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (push(v, n, cap, path)) {
            closedir(d);
            cli_fail("out of memory");
            return EXIT_USAGE;
        }
    }
    closedir(d);
    if (*n == before) {
        cli_fail("%s: no snapshot or capture files (*.pickle, *.pkl, optionally .gz/.xz/.zst; "
                 "*.mdcap) in this directory", dir);
        return EXIT_USAGE;
    }
    qsort(*v + before, *n - before, sizeof **v, by_rank);
    keep_newest_per_rank(*v + before, n, before);
    return 0;
}

int cli_expand_paths(char **args, int nargs, char ***out, size_t *nout)
{
    char **v = NULL;
    size_t n = 0, cap = 0;
    for (int i = 0; i < nargs; i++) {
        /* "-": standard input, as in `zstdcat F | memdiag summary -` */
        const char *a = strcmp(args[i], "-") ? args[i] : "/dev/stdin";
        struct stat st;
        if (stat(a, &st) != 0) {
            cli_fail("%s: no such file or directory", a);
            cli_free_paths(v, n);
            return EXIT_USAGE;
        }
        int rc = S_ISDIR(st.st_mode) ? expand_dir(a, &v, &n, &cap)
                                     : push(&v, &n, &cap, a) ? EXIT_USAGE : 0;
        if (rc) {
            cli_free_paths(v, n);
            return rc;
        }
    }
    *out = v;
    *nout = n;
    return 0;
}

void cli_free_paths(char **paths, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(paths[i]);
    free(paths);
}

/* Devices to report: those with a trace; for a snapshot without history
 * (or a legacy segment list), those holding segments, from final state. */
int cli_device_has_data(const md_snapshot *s, int d, int traces)
{
    size_t n;
    if (traces) { /* a trace of only 'snapshot' markers is not data */
        const md_event *ev = md_snapshot_events(s, d, &n);
        for (size_t i = 0; i < n; i++)
            if (ev[i].action != MD_ACT_SNAPSHOT && ev[i].action != MD_ACT_ANNOTATE)
                return 1;
        return 0;
    }
    const md_segment *g = md_snapshot_segments(s, &n);
    for (size_t i = 0; i < n; i++)
        if (g[i].device == d)
            return 1;
    return 0;
}

/* Only a regular file is sniffed: reading the start of a pipe
 * (`zcat snap.gz | memdiag summary /dev/stdin`) would take it from the
 * reader. Anything else is read as a snapshot. */
static int sniffable(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* A seed-script JSON report rather than a snapshot: text starting '{'. */
int cli_is_seed_report(const char *path)
{
    if (!sniffable(path))
        return 0;
    FILE *f = fopen(path, "rb");
    int c = EOF;
    if (!f)
        return 0;
    while ((c = fgetc(f)) == ' ' || c == '\n' || c == '\t' || c == '\r')
        ;
    fclose(f);
    return c == '{';
}

int cli_is_capture(const char *path)
{
    char magic[8] = {0};
    if (!sniffable(path))
        return 0;
    FILE *f = fopen(path, "rb");
    if (!f)
        return 0;
    size_t got = fread(magic, 1, sizeof magic, f);
    fclose(f);
    return got == sizeof magic && !memcmp(magic, MD_CAP_MAGIC, MD_CAP_MAGIC_LEN);
}

int cli_find_beside_exe(const char *const *patterns, int n, const char *inside,
                        char out[PATH_MAX])
{
    char exe[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len <= 0)
        return -1;
    exe[len] = 0;
    char *slash = strrchr(exe, '/');
    if (!slash)
        return -1;
    *slash = 0;
    for (int i = 0; i < n; i++) {
        char p[PATH_MAX + 64], q[2 * PATH_MAX + 128];
        snprintf(p, sizeof p, patterns[i], exe);
        snprintf(q, sizeof q, "%s%s", p, inside);
        if (access(q, R_OK) == 0 && realpath(p, out))
            return 0;
    }
    return -1;
}

int cli_find_python(char out[PATH_MAX])
{
    static const char *const pys[] = {"%s/../python", "%s/../lib/memdiag/python"};
    return cli_find_beside_exe(pys, 2, "/memdiag/_site/sitecustomize.py", out);
}

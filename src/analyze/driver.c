/* driver.c - device memory by the library that asked the CUDA driver for
 * it, from memdiag run's driver-level trace: a replay of each process's
 * allocation calls (allocs matched to frees by address, cuMemCreate to
 * cuMemRelease by handle) giving the live total over time, its peak, and
 * what each library held at that peak and at the end. What PyTorch's
 * caching allocator holds there is its reserved memory; what the others
 * hold is what snapshots cannot see. */
#include <stdlib.h>
#include <string.h>
#include "../util/util.h"
#include "memdiag.h"

static const struct {
    const char *prefix, *what;
    md_driver_lib lib;
} known[] = {
    {"libc10_cuda.", "PyTorch's caching allocator", MD_LIB_OTHER},
    {"libnccl.", "NCCL communicator buffers", MD_LIB_NCCL},
    {"libnvshmem", "NVSHMEM symmetric memory", MD_LIB_OTHER},
    {"libtorch_cuda.", "PyTorch, outside its caching allocator", MD_LIB_OTHER},
    {"libcublasLt.", "cuBLASLt", MD_LIB_OTHER},
    {"libcublas.", "cuBLAS", MD_LIB_OTHER},
    {"libcudnn", "cuDNN", MD_LIB_OTHER},
    {"libcufft", "cuFFT", MD_LIB_OTHER},
    {"libcusparse", "cuSPARSE", MD_LIB_OTHER},
    {"libcusolver", "cuSOLVER", MD_LIB_OTHER},
    {"libtriton", "Triton", MD_LIB_OTHER},
    {"libnvrtc", "NVRTC", MD_LIB_OTHER},
    {"python", "Python code: ctypes, CuPy, Numba", MD_LIB_OTHER},
    {"libffi.", "a foreign call from Python: ctypes or cffi", MD_LIB_OTHER},
    {"xla_cuda_plugin", "JAX/XLA's allocator", MD_LIB_JAX},
    {"libxla", "JAX/XLA's allocator", MD_LIB_JAX},
    {"xla_extension", "JAX/XLA's allocator", MD_LIB_JAX},
    {"jaxlib", "JAX/XLA's allocator", MD_LIB_JAX},
    {"cupy", "CuPy's memory pool", MD_LIB_CUPY},
};

const char *md_driver_caller_what(const char *caller)
{
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (!strncmp(caller, known[i].prefix, strlen(known[i].prefix)))
            return known[i].what;
    return NULL;
}

md_driver_lib md_driver_caller_lib(const char *caller)
{
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (!strncmp(caller, known[i].prefix, strlen(known[i].prefix)))
            return known[i].lib;
    return MD_LIB_OTHER;
}

int md_driver_is_torch_allocator(const char *caller)
{
    return !strncmp(caller, "libc10_cuda.", 12);
}

static int is_alloc(int op)
{
    return op == MD_DRV_ALLOC || op == MD_DRV_ALLOC_PITCH || op == MD_DRV_ALLOC_MANAGED ||
           op == MD_DRV_ALLOC_ASYNC || op == MD_DRV_CREATE;
}

/* Value kept per live allocation: its event index. */
typedef struct replay {
    const md_driver_log *d;
    int device;
    md_map addr, handle;
    uint64_t *live;      /* per caller */
    const uint8_t *torch; /* per caller: PyTorch's caching allocator */
    uint64_t total, outside;
    size_t peak_at;      /* the event after which the peak holds */
    md_driver_col *cols; /* md_driver_timeline's buckets, or NULL */
    size_t ncols;
    double t0, span;     /* the trace's first time and its length, ns */
    const int64_t *at;   /* md_driver_live_at's moments, visited in order[] */
    const size_t *order;
    size_t nat, next;
    uint64_t *live_at;
} replay;

static void take(replay *r, md_driver_stats *s, const md_driver_event *e, int64_t sign)
{
    uint64_t b = e->bytes;
    r->live[e->caller] += (uint64_t)sign * b;
    r->total += (uint64_t)sign * b;
    if (!r->torch[e->caller])
        r->outside += (uint64_t)sign * b;
    if (r->outside > s->outside_peak)
        s->outside_peak = r->outside, s->outside_peak_ns = e->time_ns;
}

/* One event; frees of memory the trace never saw allocated (before the
 * tracer started) are counted, not applied. */
static int step(replay *r, md_driver_stats *s, size_t i)
{
    const md_driver_event *e = &r->d->ev[i];
    md_map *m = e->op == MD_DRV_CREATE || e->op == MD_DRV_RELEASE ? &r->handle : &r->addr;
    if (is_alloc(e->op)) {
        if (r->device >= 0 && e->device != r->device)
            return 0;
        uint64_t old;
        if (md_map_get(m, e->id, &old)) /* its free was not seen: gone now */
            take(r, s, &r->d->ev[old], -1);
        if (md_map_put(m, e->id, i))
            return -1;
        take(r, s, e, 1);
        s->use[e->caller].allocs++;
        s->use[e->caller].physical |= e->op == MD_DRV_CREATE;
        s->use[e->caller].async |= e->op == MD_DRV_ALLOC_ASYNC;
        if (r->live[e->caller] > s->use[e->caller].max_live)
            s->use[e->caller].max_live = r->live[e->caller];
        if (r->total > s->peak)
            s->peak = r->total, s->peak_ns = e->time_ns, r->peak_at = i;
        return 0;
    }
    uint64_t at;
    if (!md_map_get(m, e->id, &at)) {
        /* a release of a handle made elsewhere (NCCL imports its peers'
         * buffers) or a free of address 0 is no memory of this process */
        s->unmatched += e->op != MD_DRV_RELEASE && e->id && (r->device < 0 || e->device == r->device);
        return 0;
    }
    md_map_del(m, e->id);
    take(r, s, &r->d->ev[at], -1);
    return 0;
}

static int by_peak(const void *a, const void *b)
{
    const md_driver_use *x = a, *y = b;
    if (x->at_peak != y->at_peak)
        return x->at_peak < y->at_peak ? 1 : -1;
    if (x->max_live != y->max_live)
        return x->max_live < y->max_live ? 1 : -1;
    return strcmp(x->caller, y->caller);
}

/* The state after event i into its time bucket: lowest and highest
 * total, highest of PyTorch's allocator's part. Times in double: a file's
 * clock values may be anything. */
static void bucket(replay *r, size_t i)
{
    double dt = (double)r->d->ev[i].time_ns - r->t0;
    double x = r->span > 0 ? dt / r->span * (double)r->ncols : 0;
    size_t k = x > 0 ? (x < (double)r->ncols ? (size_t)x : r->ncols - 1) : 0;
    md_driver_col *c = &r->cols[k];
    uint64_t torch = r->total - r->outside;
    if (!c->events) {
        c->seconds = dt / 1e9;
        c->lo = c->hi = r->total;
        c->torch = torch;
    }
    c->events++;
    c->lo = r->total < c->lo ? r->total : c->lo;
    c->hi = r->total > c->hi ? r->total : c->hi;
    c->torch = torch > c->torch ? torch : c->torch;
}

/* The trace's time range, for the buckets. */
static void time_range(replay *r)
{
    double lo = 0, hi = 0;
    for (size_t i = 0; i < r->d->n; i++) {
        double t = (double)r->d->ev[i].time_ns;
        lo = !i || t < lo ? t : lo;
        hi = !i || t > hi ? t : hi;
    }
    r->t0 = lo;
    r->span = hi - lo + 1;
}

/* What each library held at the peak: a second replay up to it (keeping
 * every library's count at each new peak would cost events x libraries). */
static int at_peak(replay *r, md_driver_stats *s)
{
    md_driver_use *keep = s->use;
    md_driver_stats scratch;
    memset(&scratch, 0, sizeof scratch);
    scratch.nuse = s->nuse;
    scratch.use = calloc(s->nuse ? s->nuse : 1, sizeof *scratch.use);
    replay again = {.d = r->d, .device = r->device, .live = r->live, .torch = r->torch};
    memset(r->live, 0, s->nuse * sizeof *r->live);
    int rc = !scratch.use || md_map_init(&again.addr, 64) || md_map_init(&again.handle, 64);
    for (size_t i = 0; !rc && i <= r->peak_at && i < r->d->n; i++)
        rc = step(&again, &scratch, i);
    for (size_t i = 0; !rc && i < s->nuse; i++)
        keep[i].at_peak = r->live[i];
    free(scratch.use);
    md_map_free(&again.addr);
    md_map_free(&again.handle);
    return rc ? -1 : 0;
}

/* The total live for each asked moment before time t. */
static void moments_before(replay *r, double t)
{
    while (r->next < r->nat && (double)r->at[r->order[r->next]] < t)
        r->live_at[r->order[r->next++]] = r->total;
}

static int run(replay *r, md_driver_stats *s)
{
    if (r->cols)
        time_range(r);
    for (size_t i = 0; i < r->d->n; i++) {
        moments_before(r, (double)r->d->ev[i].time_ns);
        if (r->d->ev[i].caller >= s->nuse || step(r, s, i))
            return -1;
        if (r->cols)
            bucket(r, i);
    }
    moments_before(r, 1e300);
    s->at_end = r->total;
    for (size_t i = 0; i < s->nuse; i++)
        s->use[i].at_end = r->live[i];
    if (r->d->n) {
        s->start_ns = r->d->ev[0].time_ns;
        s->end_ns = r->d->ev[r->d->n - 1].time_ns;
    }
    return s->peak ? at_peak(r, s) : 0;
}

/* Keeps the libraries that allocated anything, largest at the peak first. */
static void order(md_driver_stats *s)
{
    size_t k = 0;
    for (size_t i = 0; i < s->nuse; i++)
        if (s->use[i].allocs)
            s->use[k++] = s->use[i];
    s->nuse = k;
    qsort(s->use, s->nuse, sizeof *s->use, by_peak);
}

static int analyze(const md_driver_log *d, int device, md_driver_stats *s, replay r, md_err *err)
{
    memset(s, 0, sizeof *s);
    r.d = d;
    r.device = device;
    s->nuse = d->ncallers;
    s->use = calloc(d->ncallers ? d->ncallers : 1, sizeof *s->use);
    r.live = calloc(d->ncallers ? d->ncallers : 1, sizeof *r.live);
    uint8_t *torch = calloc(d->ncallers ? d->ncallers : 1, 1);
    r.torch = torch;
    int rc = !s->use || !r.live || !torch || md_map_init(&r.addr, 64) || md_map_init(&r.handle, 64);
    for (size_t i = 0; !rc && i < s->nuse; i++) {
        s->use[i].caller = d->callers[i];
        s->use[i].what = md_driver_caller_what(d->callers[i]);
        torch[i] = (uint8_t)md_driver_is_torch_allocator(d->callers[i]);
    }
    rc = rc || run(&r, s);
    free(r.live);
    free(torch);
    md_map_free(&r.addr);
    md_map_free(&r.handle);
    if (rc) {
        md_driver_stats_free(s);
        return md_err_set(err, MD_E_NOMEM, -1, "out of memory replaying driver calls");
    }
    order(s);
    return MD_OK;
}

int md_driver_analyze(const md_driver_log *d, int device, md_driver_stats *s, md_err *err)
{
    return analyze(d, device, s, (replay){0}, err);
}

typedef struct moment { int64_t t; size_t i; } moment;

static int by_time(const void *a, const void *b)
{
    const moment *x = a, *y = b;
    return x->t != y->t ? (x->t < y->t ? -1 : 1) : (x->i > y->i) - (x->i < y->i);
}

int md_driver_live_at(const md_driver_log *d, const int64_t *t, size_t n, uint64_t *out,
                      md_err *err)
{
    moment *m = malloc((n ? n : 1) * sizeof *m);
    size_t *order = malloc((n ? n : 1) * sizeof *order);
    int rc = !m || !order ? md_err_set(err, MD_E_NOMEM, -1, "out of memory") : MD_OK;
    for (size_t i = 0; !rc && i < n; i++)
        m[i] = (moment){t[i], i}, out[i] = 0;
    if (!rc)
        qsort(m, n, sizeof *m, by_time);
    for (size_t i = 0; !rc && i < n; i++)
        order[i] = m[i].i;
    md_driver_stats s;
    if (!rc)
        rc = analyze(d, -1, &s, (replay){.at = t, .order = order, .nat = n, .live_at = out}, err);
    if (!rc)
        md_driver_stats_free(&s);
    free(m);
    free(order);
    return rc;
}

int md_driver_timeline(const md_driver_log *d, int device, size_t ncols, md_driver_col **out,
                       size_t *n, md_err *err)
{
    *out = NULL;
    *n = 0;
    if (!d->n || !ncols)
        return MD_OK;
    md_driver_col *c = calloc(ncols, sizeof *c);
    md_driver_stats s;
    if (!c)
        return md_err_set(err, MD_E_NOMEM, -1, "out of memory");
    if (analyze(d, device, &s, (replay){.cols = c, .ncols = ncols}, err)) {
        free(c);
        return MD_E_NOMEM;
    }
    md_driver_stats_free(&s);
    size_t k = 0;
    for (size_t i = 0; i < ncols; i++) /* the buckets no event fell in: gone */
        if (c[i].events)
            c[k++] = c[i];
    *out = c;
    *n = k;
    return MD_OK;
}

void md_driver_stats_free(md_driver_stats *s)
{
    free(s->use);
    s->use = NULL;
    s->nuse = 0;
}

uint64_t *md_driver_at_samples(const md_sample_rank *r)
{
    size_t n = r->nsamples;
    int64_t *t = r->driver.n && n ? malloc(n * sizeof *t) : NULL;
    uint64_t *live = t ? malloc(n * sizeof *live) : NULL;
    md_err err;
    for (size_t i = 0; live && i < n; i++)
        t[i] = r->samples[i].time_ns;
    if (live && md_driver_live_at(&r->driver, t, n, live, &err)) {
        free(live);
        live = NULL;
    }
    free(t);
    return live;
}

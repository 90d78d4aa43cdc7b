/* driver.c - driver-level device-memory tracing: the CUDA driver loads this
 * library (CUDA_INJECTION64_PATH, set by `memdiag run`) in every process
 * that calls cuInit, before its first allocation, and calls
 * InitializeInjection. Through CUPTI's callback API it sees each successful
 * cuMemAlloc/cuMemFree, cuMemCreate/cuMemRelease (the physical memory of
 * expandable segments and NCCL's buffers), managed and stream-ordered
 * allocations, and writes one record per call (format.h, MD_CAP_DRIVER)
 * into driver-{host}-pid{pid}.mdcap, naming the library that made the call.
 *
 * CUPTI is found at run time (the copy the process already loaded, as
 * torch's wheel does, else MEMDIAG_CUPTI, else the loader's search), so
 * nothing here links against CUDA. Only the memory callbacks are enabled:
 * other driver calls (kernel launches) pay nothing. The tracer's state is
 * process-wide, as the driver's injection is. */
#include <dlfcn.h>
#include <execinfo.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "memdiag.h"
#include "driver.h"

#define CUPTI_DOMAIN_DRIVER 1
#define CUPTI_API_EXIT 1

/* The driver functions traced, as cupti_driver_cbid.h numbers them, and
 * what each is (md_drv_op). */
static const struct { uint32_t cbid; uint8_t op; } traced[] = {
    {243, MD_DRV_ALLOC},       /* cuMemAlloc_v2 */
    {244, MD_DRV_ALLOC_PITCH}, /* cuMemAllocPitch_v2 */
    {245, MD_DRV_FREE},        /* cuMemFree_v2 */
    {371, MD_DRV_ALLOC_MANAGED}, /* cuMemAllocManaged */
    {549, MD_DRV_CREATE},      /* cuMemCreate */
    {550, MD_DRV_RELEASE},     /* cuMemRelease */
    {598, MD_DRV_ALLOC_ASYNC}, /* cuMemAllocAsync */
    {599, MD_DRV_ALLOC_ASYNC}, /* cuMemAllocAsync_ptsz */
    {600, MD_DRV_FREE_ASYNC},  /* cuMemFreeAsync */
    {601, MD_DRV_FREE_ASYNC},  /* cuMemFreeAsync_ptsz */
    {611, MD_DRV_ALLOC_ASYNC}, /* cuMemAllocFromPoolAsync */
    {612, MD_DRV_ALLOC_ASYNC}, /* cuMemAllocFromPoolAsync_ptsz */
};

#define BUF_BYTES (64 * 1024)
#define FLUSH_NS 250000000LL   /* records reach the file within a quarter second */
#define ASYNC_SAMPLE 256       /* a stream-ordered call in 256 walks the stack */

static struct {
    pthread_mutex_t mu;
    md_cap *cap;
    pid_t pid;                 /* the process that opened cap: a fork child writes nothing */
    cupti_subscriber sub;
    int (*unsubscribe)(cupti_subscriber);
    int (*ctx_get_device)(int *);
    struct { void *ctx; int device; } ctxs[64];
    size_t nctxs;
    unsigned char buf[BUF_BYTES]; /* whole records not yet written */
    size_t nbuf;
    int64_t buf_since;         /* when the oldest of them was made */
    char status[128];          /* the file's META driver: "on", or why not */
    int failed, closed;        /* the file could not be made; the process ended */
} T = {.mu = PTHREAD_MUTEX_INITIALIZER};

static md_cap *open_file(void);
static void write_meta(md_cap *c, const char *status);

static int64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t); /* the samples' clock */
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* The device of the context current to this thread (a cuMemAlloc's): the
 * last answer per thread, then the process's table, then the driver. */
static int context_device(void *ctx)
{
    static _Thread_local void *last_ctx;
    static _Thread_local int last_dev = -1;
    if (ctx && ctx == last_ctx)
        return last_dev;
    int dev = -1;
    pthread_mutex_lock(&T.mu);
    for (size_t i = 0; i < T.nctxs; i++)
        if (T.ctxs[i].ctx == ctx)
            dev = T.ctxs[i].device;
    pthread_mutex_unlock(&T.mu);
    if (dev < 0 && T.ctx_get_device && T.ctx_get_device(&dev) == 0) {
        pthread_mutex_lock(&T.mu);
        if (T.nctxs < sizeof T.ctxs / sizeof T.ctxs[0])
            T.ctxs[T.nctxs].ctx = ctx, T.ctxs[T.nctxs++].device = dev;
        pthread_mutex_unlock(&T.mu);
    }
    last_ctx = ctx, last_dev = dev;
    return dev;
}

/* Libraries between the caller and the allocation: CUDA's own, CUPTI's
 * and this one's. */
static int is_plumbing(const char *base)
{
    static const char *const skip[] = {"libcuda.", "libcupti", "libcudart", "libmemdiag_capture"};
    for (size_t i = 0; i < sizeof skip / sizeof skip[0]; i++)
        if (!strncmp(base, skip[i], strlen(skip[i])))
            return 1;
    return 0;
}

/* Its file name alone ("runtime.cpython-...so") says too little. */
int md_drv_python_module(const char *path, char *out, size_t n)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    const char *end = strstr(base, ".cpython-");
    if (!end)
        end = strstr(base, ".abi3.so");
    if (!end || !n)
        return 0;
    const char *from = strstr(path, "-packages/");
    from = from && from < base ? from + strlen("-packages/") : base;
    size_t k = 0;
    for (const char *c = from; c < end && k + 1 < n; c++)
        out[k++] = *c == '/' ? '.' : *c;
    out[k] = 0;
    return k > 0;
}

/* The library (or program) that called the driver: the first frame
 * outside the plumbing. */
static void caller_of(char *out, size_t n)
{
    void *pc[24];
    int depth = backtrace(pc, 24);
    snprintf(out, n, "?");
    for (int i = 1; i < depth; i++) {
        Dl_info d;
        if (!dladdr(pc[i], &d) || !d.dli_fname)
            continue;
        const char *base = strrchr(d.dli_fname, '/');
        base = base ? base + 1 : d.dli_fname;
        if (!*base || is_plumbing(base))
            continue;
        if (!md_drv_python_module(d.dli_fname, out, n))
            snprintf(out, n, "%s", base);
        return;
    }
}

/* Under T.mu. The file is made with the first record: a process that
 * initialises CUDA and allocates nothing (a compile worker) leaves none. */
static int have_file_locked(void)
{
    if (!T.cap && !T.failed && !T.closed && T.pid == getpid()) {
        T.cap = open_file();
        T.failed = !T.cap;
        if (T.cap)
            write_meta(T.cap, T.status);
    }
    return T.cap && T.pid == getpid();
}

static void flush_locked(void)
{
    if (T.nbuf && have_file_locked())
        md_cap_write_records(T.cap, T.buf, T.nbuf);
    T.nbuf = 0;
}

/* Stream-ordered pool calls come once per tensor (cudaMallocAsync): each
 * thread looks their caller up on its first call and one in ASYNC_SAMPLE
 * after, the same library in between (a stack walk costs more than the
 * call itself), without a lock. */
static void async_caller(char *out, size_t n)
{
    static _Thread_local uint32_t calls;
    static _Thread_local char last[MD_DRV_CALLER_MAX];
    if (calls++ % ASYNC_SAMPLE == 0)
        caller_of(last, sizeof last);
    memcpy(out, last, n < sizeof last ? n : sizeof last);
    out[n - 1] = 0;
}

static void emit(uint8_t op, int device, uint64_t id, uint64_t bytes, int want_caller)
{
    char caller[MD_DRV_CALLER_MAX] = "";
    if (want_caller && op == MD_DRV_ALLOC_ASYNC)
        async_caller(caller, sizeof caller);
    else if (want_caller)
        caller_of(caller, sizeof caller);
    int64_t t = now_ns();
    md_cap_driver_rec r = {t, op, device, id, bytes, caller};
    pthread_mutex_lock(&T.mu);
    if (T.nbuf + MD_CAP_DRIVER_RECORD_MAX > sizeof T.buf)
        flush_locked();
    if (!T.nbuf)
        T.buf_since = t;
    T.nbuf += md_cap_driver_encode(T.buf + T.nbuf, &r);
    if (t - T.buf_since >= FLUSH_NS)
        flush_locked();
    pthread_mutex_unlock(&T.mu);
}

/* Writes what a quiet process left in the buffer: nothing waits longer
 * than about a second for the file. */
static void *flusher(void *arg)
{
    (void)arg;
    for (;;) {
        struct timespec d = {0, 500000000};
        nanosleep(&d, NULL);
        pthread_mutex_lock(&T.mu);
        int done = T.closed;
        flush_locked();
        pthread_mutex_unlock(&T.mu);
        if (done)
            return NULL;
    }
}

static int op_of(uint32_t cbid)
{
    for (size_t i = 0; i < sizeof traced / sizeof traced[0]; i++)
        if (traced[i].cbid == cbid)
            return traced[i].op;
    return -1;
}

static void on_exit_of(int op, const cupti_cb_data *d)
{
    const void *p = d->params;
    switch (op) {
    case MD_DRV_ALLOC: case MD_DRV_ALLOC_MANAGED: case MD_DRV_ALLOC_ASYNC: {
        const p_alloc *a = p;
        emit((uint8_t)op, context_device(d->context), *a->dptr, a->bytes, 1);
        break;
    }
    case MD_DRV_ALLOC_PITCH: {
        const p_pitch *a = p;
        emit((uint8_t)op, context_device(d->context), *a->dptr, (uint64_t)*a->pitch * a->height, 1);
        break;
    }
    case MD_DRV_FREE: case MD_DRV_FREE_ASYNC:
        if (((const p_free *)p)->dptr) /* cudaFree(0): the idiom that makes a context */
            emit((uint8_t)op, context_device(d->context), ((const p_free *)p)->dptr, 0, 0);
        break;
    case MD_DRV_CREATE: {
        const p_create *c = p;
        const p_prop *prop = c->prop;
        int dev = prop && prop->location_type == MD_CU_LOCATION_DEVICE ? prop->location_id : -1;
        emit(MD_DRV_CREATE, dev, *c->handle, c->size, 1);
        break;
    }
    case MD_DRV_RELEASE:
        emit(MD_DRV_RELEASE, -1, ((const p_release *)p)->handle, 0, 0);
        break;
    default: break;
    }
}

static void on_callback(void *user, int domain, uint32_t cbid, const void *data)
{
    (void)user;
    const cupti_cb_data *d = data;
    if (domain != CUPTI_DOMAIN_DRIVER || !d || d->callback_site != CUPTI_API_EXIT ||
        !d->params || !d->return_value || *(const int *)d->return_value != 0)
        return; /* only calls that succeeded */
    int op = op_of(cbid);
    if (op > 0)
        on_exit_of(op, d);
}

/* CUPTI: the copy already in the process (torch's wheel loads one), else
 * MEMDIAG_CUPTI (memdiag run finds the toolkit's), else the loader's. */
static void *open_cupti(void)
{
    static const char *const names[] = {"libcupti.so.13", "libcupti.so.12", "libcupti.so"};
    for (size_t i = 0; i < 3; i++) {
        void *h = dlopen(names[i], RTLD_NOW | RTLD_NOLOAD);
        if (h)
            return h;
    }
    const char *env = getenv("MEMDIAG_CUPTI");
    void *h = env && *env ? dlopen(env, RTLD_NOW | RTLD_GLOBAL) : NULL;
    for (size_t i = 0; !h && i < 3; i++)
        h = dlopen(names[i], RTLD_NOW | RTLD_GLOBAL);
    return h;
}

static const char *rank_of(void)
{
    static const char *const vars[] = {"RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK"};
    for (size_t i = 0; i < 3; i++)
        if (getenv(vars[i]) && *getenv(vars[i]))
            return getenv(vars[i]);
    return "0";
}

static void write_meta(md_cap *c, const char *status)
{
    char buf[4096], num[32];
    md_cap_meta(c, "kind", "driver");
    md_cap_meta(c, "rank", rank_of());
    snprintf(num, sizeof num, "%ld", (long)getpid());
    md_cap_meta(c, "pid", num);
    FILE *f = fopen("/proc/self/cmdline", "rb");
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f)
        fclose(f);
    for (size_t i = 0; i + 1 < n; i++)
        buf[i] = buf[i] ? buf[i] : ' ';
    buf[n] = 0;
    md_cap_meta(c, "argv", buf);
    md_cap_meta(c, "driver", status);
}

static void at_exit(void)
{
    pthread_mutex_lock(&T.mu);
    flush_locked();
    if (T.cap && T.pid == getpid())
        md_cap_close(T.cap, 0);
    T.cap = NULL;
    T.closed = 1;
    pthread_mutex_unlock(&T.mu);
}

/* A fork child cannot use CUDA: it writes nothing (its copy of the
 * descriptor is the parent's file). */
static void in_child(void)
{
    T.cap = NULL;
    T.nbuf = 0;
    T.closed = 1;
    pthread_mutex_init(&T.mu, NULL);
}

void md_driver_trace_stop(const char *why)
{
    pthread_mutex_lock(&T.mu);
    if (T.sub && T.unsubscribe)
        T.unsubscribe(T.sub);
    T.sub = NULL;
    flush_locked();
    snprintf(T.status, sizeof T.status, "stopped: %s", why && *why ? why : "asked to");
    if (T.cap && T.pid == getpid())
        md_cap_meta(T.cap, "driver", T.status);
    pthread_mutex_unlock(&T.mu);
}

/* driver-{host}-pid{pid}.mdcap: a pid alone can repeat on another node
 * writing into the same shared directory. */
static md_cap *open_file(void)
{
    const char *dir = getenv("MEMDIAG_OUT");
    char path[PATH_MAX], host[128] = "";
    if (gethostname(host, sizeof host - 1) || strchr(host, '/'))
        snprintf(host, sizeof host, "host");
    snprintf(path, sizeof path, "%s/driver-%s-pid%ld.mdcap", dir && *dir ? dir : ".", host,
             (long)getpid());
    md_cap *c = NULL;
    md_err err;
    return md_cap_open(path, 1, &c, &err) == MD_OK ? c : NULL;
}

/* Subscribes and enables the memory callbacks; returns a status line for
 * the file ("on" or why not). */
static const char *start(void *cupti)
{
    int (*subscribe)(cupti_subscriber *, cupti_cb_fn, void *) = cupti ? dlsym(cupti, "cuptiSubscribe") : NULL;
    int (*enable)(uint32_t, cupti_subscriber, int, uint32_t) = cupti ? dlsym(cupti, "cuptiEnableCallback") : NULL;
    T.unsubscribe = cupti ? (int (*)(cupti_subscriber))dlsym(cupti, "cuptiUnsubscribe") : NULL;
    if (!subscribe || !enable)
        return "off: no CUPTI library found (set MEMDIAG_CUPTI to libcupti.so)";
    int rc = subscribe(&T.sub, on_callback, NULL);
    if (rc == 39)
        return "off: another tool holds CUPTI (a profiler: Nsight, torch.profiler's daemon)";
    if (rc != 0)
        return "off: cuptiSubscribe failed";
    for (size_t i = 0; i < sizeof traced / sizeof traced[0]; i++)
        if (enable(1, T.sub, CUPTI_DOMAIN_DRIVER, traced[i].cbid) != 0)
            return "partial: a memory callback could not be enabled";
    return "on";
}

/* Called by the CUDA driver at cuInit; makes no CUDA call. Returns 1: a
 * tracer that cannot start leaves the process to run untraced. */
int InitializeInjection(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, md_driver_trace_start);
    return 1;
}

void md_driver_trace_start(void)
{
    void *cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    T.ctx_get_device = cuda ? (int (*)(int *))dlsym(cuda, "cuCtxGetDevice") : NULL;
    char warm[8];
    caller_of(warm, sizeof warm); /* backtrace loads libgcc_s once: not inside a callback */
    pthread_mutex_lock(&T.mu);
    T.pid = getpid();
    snprintf(T.status, sizeof T.status, "on"); /* what the first record's file says */
    pthread_mutex_unlock(&T.mu);
    const char *status = start(open_cupti()); /* callbacks may begin here */
    if (strcmp(status, "on")) {
        pthread_mutex_lock(&T.mu);
        snprintf(T.status, sizeof T.status, "%s", status);
        if (have_file_locked()) /* why there is no trace, said at once */
            md_cap_meta(T.cap, "driver", T.status);
        pthread_mutex_unlock(&T.mu);
    }
    pthread_atfork(NULL, NULL, in_child);
    atexit(at_exit);
    pthread_t th;
    if (pthread_create(&th, NULL, flusher, NULL) == 0)
        pthread_detach(th);
}

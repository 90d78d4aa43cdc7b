/* test_driver.c - the driver-level tracer (src/capture/driver.c) driven
 * through a stand-in libcupti, its records read back, and the replay
 * that attributes device memory to libraries (src/analyze/driver.c). */
#include <dlfcn.h>
#include <libgen.h>
#include <limits.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "testutil.h"
#include "capture/driver.h"
#include "capture/format.h"
#ifdef MD_HAVE_CUPTI_H
#define __CUDA_API_VERSION_INTERNAL /* the _v1 types generated_cuda_meta.h names */
#include <cuda.h>
#include <cupti_callbacks.h>
#include <cupti_driver_cbid.h>
#include <generated_cuda_meta.h>
#endif

#define MiB (1024ull * 1024)

static char dir[PATH_MAX];
static void (*fire)(uint32_t, const void *);
static int (*enabled)(uint32_t);

#ifdef MD_HAVE_CUPTI_H
/* The tracer's copies of CUPTI's and the driver's structs, field by field. */
_Static_assert(sizeof(cupti_cb_data) == sizeof(CUpti_CallbackData), "cbdata size");
_Static_assert(offsetof(cupti_cb_data, params) == offsetof(CUpti_CallbackData, functionParams), "params");
_Static_assert(offsetof(cupti_cb_data, return_value) == offsetof(CUpti_CallbackData, functionReturnValue), "ret");
_Static_assert(offsetof(cupti_cb_data, context) == offsetof(CUpti_CallbackData, context), "ctx");
_Static_assert(offsetof(p_alloc, bytes) == offsetof(cuMemAlloc_v2_params, bytesize), "alloc");
_Static_assert(offsetof(p_alloc, bytes) == offsetof(cuMemAllocAsync_params, bytesize), "async");
_Static_assert(offsetof(p_alloc, bytes) == offsetof(cuMemAllocFromPoolAsync_params, bytesize), "pool");
_Static_assert(offsetof(p_alloc, bytes) == offsetof(cuMemAllocManaged_params, bytesize), "managed");
_Static_assert(offsetof(p_pitch, height) == offsetof(cuMemAllocPitch_v2_params, Height), "pitch");
_Static_assert(offsetof(p_create, size) == offsetof(cuMemCreate_params, size), "create");
_Static_assert(offsetof(p_create, prop) == offsetof(cuMemCreate_params, prop), "prop");
_Static_assert(offsetof(p_prop, location_id) == offsetof(CUmemAllocationProp, location.id), "loc");
_Static_assert(CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2 == 243 && CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2 == 245 &&
               CUPTI_DRIVER_TRACE_CBID_cuMemCreate == 549 && CUPTI_DRIVER_TRACE_CBID_cuMemRelease == 550 &&
               CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync == 598 && CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync_ptsz == 601 &&
               CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync_ptsz == 612 &&
               CUPTI_DRIVER_TRACE_CBID_cuMemAllocManaged == 371, "cbids");
#endif

static int setup(void **state)
{
    (void)state;
    char exe[PATH_MAX], lib[PATH_MAX + 32];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0)
        return -1;
    exe[n] = 0;
    snprintf(lib, sizeof lib, "%s/libfake_cupti.so", dirname(exe));
    snprintf(dir, sizeof dir, "/tmp/md-driver-XXXXXX");
    if (!mkdtemp(dir))
        return -1;
    setenv("MEMDIAG_OUT", dir, 1);
    setenv("MEMDIAG_CUPTI", lib, 1);
    setenv("RANK", "3", 1);
    return 0;
}

static const char *host(void)
{
    static char h[128];
    if (!h[0] && gethostname(h, sizeof h - 1))
        snprintf(h, sizeof h, "host");
    return h;
}

/* A child process's tracer (each process starts its own once); returns
 * its pid after it exited, with exit() (atexit runs) or _exit(). */
static pid_t child_tracer(const char *sub, int busy, int clean_exit)
{
    pid_t pid = fork();
    if (pid == 0) {
        char out[PATH_MAX + 16];
        snprintf(out, sizeof out, "%s/%s", dir, sub);
        mkdir(out, 0755);
        setenv("MEMDIAG_OUT", out, 1);
        if (busy)
            setenv("FAKE_CUPTI_BUSY", "1", 1);
        InitializeInjection();
        if (clean_exit)
            exit(0);
        _exit(0);
    }
    int st;
    waitpid(pid, &st, 0);
    return pid;
}

/* CUPTI held by another tool: the file says so at once. A process that
 * allocated nothing through the driver (a compile worker) leaves no file. */
static void test_tracer_off_says_why_and_idle_leaves_nothing(void **state)
{
    (void)state;
    char path[PATH_MAX + 256];
    pid_t pid = child_tracer("busy", 1, 0);
    snprintf(path, sizeof path, "%s/busy/driver-%s-pid%ld.mdcap", dir, host(), (long)pid);
    md_sample_rank r;
    md_capture_info info;
    md_err err;
    assert_int_equal(md_capture_load(path, &r, &info, &err), MD_OK);
    assert_non_null(strstr(r.driver.status, "off: another tool holds CUPTI"));
    assert_int_equal(r.driver.n, 0);
    md_driver_log_free(&r.driver);
    pid = child_tracer("idle", 0, 1);
    snprintf(path, sizeof path, "%s/idle/driver-%s-pid%ld.mdcap", dir, host(), (long)pid);
    assert_int_not_equal(access(path, F_OK), 0);
}

static void call(uint32_t cbid, int site, int result, const void *params)
{
    int ret = result;
    cupti_cb_data d = {.callback_site = site, .params = params, .return_value = &ret};
    fire(cbid, &d);
}

static void load(md_sample_rank *r)
{
    char path[PATH_MAX + 256];
    snprintf(path, sizeof path, "%s/driver-%s-pid%ld.mdcap", dir, host(), (long)getpid());
    md_capture_info info;
    md_err err;
    assert_int_equal(md_capture_load(path, r, &info, &err), MD_OK);
}

/* The tracer subscribes, enables the memory calls only, and records each
 * successful one at its exit. */
static void test_tracer_records_successful_calls(void **state)
{
    (void)state;
    assert_int_equal(InitializeInjection(), 1);
    void *h = dlopen(getenv("MEMDIAG_CUPTI"), RTLD_NOW | RTLD_NOLOAD);
    assert_non_null(h);
    *(void **)&fire = dlsym(h, "fake_cupti_fire");
    *(void **)&enabled = dlsym(h, "fake_cupti_enabled");
    assert_true(enabled(243) && enabled(549) && enabled(601) && !enabled(13));

    uint64_t a = 0x7f0000000000, handle = 77;
    p_alloc alloc = {&a, 2 * MiB};
    call(243, 0, 0, &alloc);          /* the entry: nothing yet */
    call(243, 1, 2, &alloc);          /* CUDA_ERROR_OUT_OF_MEMORY: not recorded */
    call(243, 1, 0, &alloc);
    p_prop prop = {0, 0, MD_CU_LOCATION_DEVICE, 1};
    p_create create = {&handle, 64 * MiB, &prop};
    call(549, 1, 0, &create);
    p_free fr = {a};
    call(245, 1, 0, &fr);
    p_release rel = {handle};
    call(550, 1, 0, &rel);
    uint64_t b = 0x7f1000000000, z = 0;
    p_alloc pool = {&b, MiB};
    call(598, 1, 0, &pool);           /* stream-ordered: the caller walked once ... */
    call(612, 1, 0, &pool);           /* ... and reused (cuMemAllocFromPoolAsync_ptsz) */
    p_free pf = {b}, none = {z};
    call(600, 1, 0, &pf);
    call(245, 1, 0, &none);           /* cudaFree(0), the context idiom: not recorded */

    md_sample_rank r;
    /* records wait in the tracer's buffer; its thread writes them within
     * a second (what a SIGKILL can lose) */
    struct timespec wait = {1, 200000000};
    nanosleep(&wait, NULL);
    load(&r);
    assert_string_equal(r.driver.status, "on");
    assert_int_equal(r.driver.n, 7);
    md_driver_log_free(&r.driver);
    /* stopping (a profiler wants CUPTI) unsubscribes: later calls are not seen */
    md_driver_trace_stop("the test");
    call(243, 1, 0, &alloc);
    load(&r);
    assert_true(r.driver_file);
    assert_int_equal(r.rank, 3);
    assert_int_equal(r.pid, getpid());
    assert_string_equal(r.driver.status, "stopped: the test");
    assert_int_equal(r.driver.n, 7);
    const md_driver_event *e = r.driver.ev;
    assert_true(e[4].op == MD_DRV_ALLOC_ASYNC && e[5].op == MD_DRV_ALLOC_ASYNC);
    assert_true(e[4].caller == e[0].caller && e[5].caller == e[0].caller);
    assert_true(e[6].op == MD_DRV_FREE_ASYNC && e[6].id == b);
    assert_int_equal(e[0].op, MD_DRV_ALLOC);
    assert_true(e[0].id == a && e[0].bytes == 2 * MiB);
    assert_int_equal(e[1].op, MD_DRV_CREATE);
    assert_true(e[1].id == handle && e[1].bytes == 64 * MiB && e[1].device == 1);
    assert_true(e[2].op == MD_DRV_FREE && e[2].id == a && e[2].caller == 0);
    assert_true(e[3].op == MD_DRV_RELEASE && e[3].id == handle);
    assert_true(strlen(r.driver.callers[e[0].caller]) > 0); /* this test's program */
    assert_true(e[1].time_ns >= e[0].time_ns);

    md_driver_stats s;
    md_err err;
    assert_int_equal(md_driver_analyze(&r.driver, -1, &s, &err), MD_OK);
    assert_true(s.peak == 66 * MiB && s.at_end == 0 && s.unmatched == 0);
    assert_true(s.outside_peak == 66 * MiB);
    md_driver_stats_free(&s);
    assert_int_equal(md_driver_analyze(&r.driver, 1, &s, &err), MD_OK);
    assert_true(s.peak == 64 * MiB && s.at_end == 0);
    md_driver_stats_free(&s);
    free(r.samples);
    md_driver_log_free(&r.driver);
}

/* Python extension modules are named by their package path, other
 * libraries by their file name (caller_of). */
static void test_python_module_names(void **state)
{
    (void)state;
    char out[MD_DRV_CALLER_MAX];
    assert_true(md_drv_python_module("/opt/v/lib/python3.12/site-packages/cupy_backends/cuda/api/"
                                     "runtime.cpython-312-x86_64-linux-gnu.so", out, sizeof out));
    assert_string_equal(out, "cupy_backends.cuda.api.runtime");
    assert_true(md_drv_python_module("/usr/lib/python3/dist-packages/pkg/_ext.abi3.so", out,
                                     sizeof out));
    assert_string_equal(out, "pkg._ext");
    assert_true(md_drv_python_module("/home/u/build/fused.cpython-311-x86_64-linux-gnu.so", out,
                                     sizeof out));
    assert_string_equal(out, "fused"); /* not installed: its file's stem */
    assert_false(md_drv_python_module("/usr/lib/libcublas.so.13", out, sizeof out));
    char small[8];
    assert_true(md_drv_python_module("/x/site-packages/abcdefghij/k.cpython-3.so", small,
                                     sizeof small));
    assert_string_equal(small, "abcdefg"); /* cut, terminated */
}

/* A capture file of this test's making in the test directory. */
static md_cap *synthetic(const char *name, char *path, size_t n)
{
    md_cap *c;
    md_err err;
    snprintf(path, n, "%s/%s", dir, name);
    assert_int_equal(md_cap_open(path, 1, &c, &err), MD_OK);
    return c;
}

static void put(md_cap *c, int64_t t, int op, uint64_t id, uint64_t bytes, const char *caller)
{
    md_cap_driver_rec rec = {t, (uint8_t)op, 0, id, bytes, caller};
    assert_int_equal(md_cap_driver(c, &rec), MD_OK);
}

/* Attribution: what each library held at the process's peak and at the
 * end; memory outside PyTorch's caching allocator; a free of memory
 * allocated before tracing began; an address reused without its free. */
static void test_replay_attributes_to_libraries(void **state)
{
    (void)state;
    char path[PATH_MAX + 32];
    md_err err;
    md_cap *c = synthetic("synthetic.mdcap", path, sizeof path);
    md_cap_meta(c, "kind", "driver");
    put(c, 1, MD_DRV_ALLOC, 0x1000, 20 * MiB, "libc10_cuda.so");
    put(c, 2, MD_DRV_CREATE, 5, 512 * MiB, "libnccl.so.2");
    put(c, 3, MD_DRV_FREE, 0x9000, 0, "");           /* allocated before the trace */
    put(c, 4, MD_DRV_ALLOC, 0x2000, 100 * MiB, "libc10_cuda.so"); /* the peak: 632 */
    put(c, 5, MD_DRV_FREE, 0x2000, 0, "");
    put(c, 6, MD_DRV_ALLOC, 0x1000, 30 * MiB, "libc10_cuda.so"); /* 0x1000's free unseen */
    put(c, 7, MD_DRV_ALLOC_ASYNC, 0x3000, 1 * MiB, "libcublasLt.so.13");
    assert_int_equal(md_cap_close(c, 0), MD_OK);

    md_sample_rank r;
    md_capture_info info;
    assert_int_equal(md_capture_load(path, &r, &info, &err), MD_OK);
    md_driver_stats s;
    assert_int_equal(md_driver_analyze(&r.driver, -1, &s, &err), MD_OK);
    assert_true(s.peak == 632 * MiB && s.peak_ns == 4);
    assert_true(s.at_end == 543 * MiB);
    assert_true(s.outside_peak == 513 * MiB && s.outside_peak_ns == 7);
    assert_int_equal(s.unmatched, 1);
    assert_int_equal(s.nuse, 3);
    assert_string_equal(s.use[0].caller, "libnccl.so.2");
    assert_true(s.use[0].physical && s.use[0].at_peak == 512 * MiB);
    assert_string_equal(s.use[0].what, "NCCL communicator buffers");
    assert_string_equal(s.use[1].caller, "libc10_cuda.so");
    assert_true(s.use[1].at_peak == 120 * MiB && s.use[1].at_end == 30 * MiB);
    assert_true(s.use[1].max_live == 120 * MiB && s.use[1].allocs == 3);
    assert_true(s.use[2].async && s.use[2].at_peak == 0 && s.use[2].at_end == MiB);
    md_driver_stats_free(&s);
    /* live through the driver at moments in any order: after every event up to each */
    int64_t t[] = {0, 4, 5, 100, 2};
    uint64_t live[5];
    assert_int_equal(md_driver_live_at(&r.driver, t, 5, live, &err), MD_OK);
    assert_true(live[0] == 0 && live[1] == 632 * MiB && live[2] == 532 * MiB &&
                live[3] == 543 * MiB && live[4] == 532 * MiB);
    md_driver_log_free(&r.driver);
}

/* No NVML figure (some containers): the driver trace alone makes the
 * non_framework finding of a torch process, NCCL named; a CUDA program's
 * own memory (a driver file alone) is no such finding. */
static void test_non_framework_from_the_trace_alone(void **state)
{
    (void)state;
    md_driver_event ev[] = {
        {1, 0x1000, 100 * MiB, 0, MD_DRV_ALLOC, 1},
        {2, 7, 512 * MiB, 0, MD_DRV_CREATE, 2},
    };
    char callers[3][MD_DRIVER_NAME_LEN] = {"", "libc10_cuda.so", "libnccl.so.2"};
    md_sample s = {0, MD_SP_AFTER_FORWARD, 100, 120, 110, -1, -1, 0};
    md_sample_rank r;
    memset(&r, 0, sizeof r);
    r.samples = &s, r.nsamples = 1;
    r.driver = (md_driver_log){1, "on", ev, 2, callers, 3};
    md_finding *f;
    size_t n;
    md_err err;
    assert_int_equal(md_diagnose_samples(&r, &f, &n, &err), MD_OK);
    assert_int_equal(n, 1);
    assert_string_equal(f[0].kind, "non_framework");
    assert_true(f[0].bytes == 512 * MiB);
    assert_string_equal(f[0].sites[0].site, "libnccl.so.2 (NCCL communicator buffers)");
    assert_non_null(strstr(f[0].advice, "NCCL_BUFFSIZE"));
    free(f);
    r.driver_file = 1;
    assert_int_equal(md_diagnose_samples(&r, &f, &n, &err), MD_OK);
    assert_int_equal(n, 0);
    free(f);
}

/* A made-up file naming a new library on every record, each a new peak:
 * read and replayed in time linear in its records (a name lookup by
 * hash, the peak's libraries from a second replay), not records x names. */
static void test_a_library_per_record_scales(void **state)
{
    (void)state;
    char path[PATH_MAX + 32], name[32];
    md_err err;
    md_cap *c = synthetic("many.mdcap", path, sizeof path);
    enum { N = 100000 };
    for (int i = 0; i < N; i++) {
        snprintf(name, sizeof name, "lib%d.so", i);
        put(c, i, MD_DRV_ALLOC, 0x1000 + (uint64_t)i * 0x1000, 4096, name);
    }
    assert_int_equal(md_cap_close(c, 0), MD_OK);
    md_sample_rank r;
    md_capture_info info;
    assert_int_equal(md_capture_load(path, &r, &info, &err), MD_OK);
    assert_int_equal(r.driver.n, N);
    assert_int_equal(r.driver.ncallers, N + 1); /* and "" */
    md_driver_stats s;
    assert_int_equal(md_driver_analyze(&r.driver, -1, &s, &err), MD_OK);
    assert_true(s.peak == (uint64_t)N * 4096 && s.nuse == N && s.use[0].at_peak == 4096);
    md_driver_stats_free(&s);
    md_driver_log_free(&r.driver);
}

/* A truncated or malformed driver record is skipped, never read past. */
static void test_reader_skips_bad_records(void **state)
{
    (void)state;
    char path[PATH_MAX + 32];
    md_err err;
    md_cap *c = synthetic("bad.mdcap", path, sizeof path);
    put(c, 1, MD_DRV_ALLOC, 0x1000, MiB, "x");
    put(c, 2, 99, 0x1000, MiB, "x");      /* no such operation */
    assert_int_equal(md_cap_close(c, 0), MD_OK);
    size_t n;
    unsigned char *b = slurp(path, &n);
    assert_non_null(b);
    md_sample_rank r;
    md_capture_info info;
    assert_int_equal(md_capture_load_mem(b, n, "bad", &r, &info, &err), MD_OK);
    assert_int_equal(r.driver.n, 1);
    md_driver_log_free(&r.driver);
    for (size_t cut = MD_CAP_HEADER_LEN; cut < n; cut++) {
        assert_int_equal(md_capture_load_mem(b, cut, "cut", &r, &info, &err), MD_OK);
        assert_true(r.driver.n <= 1);
        md_driver_log_free(&r.driver);
    }
    free(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tracer_off_says_why_and_idle_leaves_nothing), /* before this process's own */
        cmocka_unit_test(test_tracer_records_successful_calls),
        cmocka_unit_test(test_replay_attributes_to_libraries),
        cmocka_unit_test(test_python_module_names),
        cmocka_unit_test(test_reader_skips_bad_records),
        cmocka_unit_test(test_non_framework_from_the_trace_alone),
        cmocka_unit_test(test_a_library_per_record_scales),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}

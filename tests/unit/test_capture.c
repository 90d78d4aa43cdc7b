/* test_capture.c - the capture file: round trip, a writer killed with
 * SIGKILL mid-stream (readable up to the last complete record), torn and
 * corrupt tails, version and magic checks, no overwrite without asking. */
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>
#include "testutil.h"

static char path[256];

static int setup(void **st)
{
    (void)st;
    snprintf(path, sizeof path, "/tmp/md-test-%d.mdcap", (int)getpid());
    unlink(path);
    return 0;
}

static int teardown(void **st)
{
    (void)st;
    unlink(path);
    return 0;
}

static md_cap_sample sample(int step, int phase, uint64_t mib)
{
    md_cap_sample s = {step, phase, mib << 20, (mib + 10) << 20, (mib + 5) << 20,
                       (mib + 600) << 20, 80ULL << 30, UINT64_MAX};
    return s;
}

static void test_round_trip(void **st)
{
    (void)st;
    md_cap *c;
    md_err e;
    assert_int_equal(md_cap_open(path, 0, &c, &e), MD_OK);
    md_cap_meta(c, "rank", "3");
    md_cap_meta(c, "world_size", "4");
    md_cap_meta(c, "gpu", "NVIDIA H200");
    md_cap_sample s0 = sample(-1, MD_SP_AFTER_INPUT, 100);
    md_cap_write_sample(c, &s0);
    for (int k = 0; k < 3; k++) {
        md_cap_sample a = sample(k, MD_SP_AFTER_FORWARD, 300);
        md_cap_sample b = sample(k, MD_SP_AFTER_CLEAR_GRADIENTS, 150 + 10 * (uint64_t)k);
        md_cap_write_sample(c, &a);
        md_cap_write_sample(c, &b);
        md_cap_step(c, k);
    }
    md_cap_snapshot(c, "/runs/x/rank3.pickle", "exit");
    assert_int_equal(md_cap_close(c, 0), MD_OK);

    md_sample_rank r;
    md_capture_info info;
    assert_int_equal(md_capture_load(path, &r, &info, &e), MD_OK);
    assert_int_equal(r.rank, 3);
    assert_int_equal(r.pid, getpid()); /* written by md_cap_open: a driver trace joins by it */
    assert_int_equal(info.world_size, 4);
    assert_string_equal(r.gpu, "NVIDIA H200");
    assert_int_equal(r.nsamples, 7);
    assert_true(info.complete);
    assert_int_equal(info.status, 0);
    assert_int_equal(info.steps, 3);
    assert_false(info.truncated);
    assert_string_equal(info.snapshot, "/runs/x/rank3.pickle");
    assert_string_equal(info.snapshot_reason, "exit");
    assert_int_equal(r.samples[2].phase, MD_SP_AFTER_CLEAR_GRADIENTS);
    assert_true(r.samples[2].allocated_mib == 150.0);
    assert_true(r.samples[2].device_used_mib == 750.0);
    md_samples_indicators(&r);
    assert_true(r.indicators.valid);
    assert_true(r.indicators.between_step_growth_mib == 20.0);
    free(r.samples);

    /* no silent overwrite */
    assert_int_equal(md_cap_open(path, 0, &c, &e), MD_E_IO);
    assert_non_null(strstr(e.msg, "--force"));
}

/* A child writes samples as fast as it can and is killed with SIGKILL:
 * everything before the last record is there, nothing torn is read. */
static void test_sigkill_mid_write(void **st)
{
    (void)st;
    /* blocked before the fork: the child may signal before the parent runs */
    sigset_t set, old;
    sigemptyset(&set);
    sigaddset(&set, SIGUSR2);
    sigprocmask(SIG_BLOCK, &set, &old);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        md_cap *c;
        md_err e;
        /* never outlive the test: an orphan writing forever fills the disk */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() == 1 || md_cap_open(path, 1, &c, &e))
            _exit(1);
        for (int k = 0; k < 1000000; k++) { /* ~70 MB at most, then stop unclosed */
            md_cap_sample s = sample(k, MD_SP_AFTER_FORWARD, (uint64_t)k % 1000);
            md_cap_write_sample(c, &s);
            if (k == 2000)
                kill(getppid(), SIGUSR2); /* enough written: tell the parent */
        }
        _exit(0);
    }
    int sig;
    sigwait(&set, &sig);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    sigprocmask(SIG_SETMASK, &old, NULL);
    md_sample_rank r;
    md_capture_info info;
    md_err e;
    assert_int_equal(md_capture_load(path, &r, &info, &e), MD_OK);
    assert_false(info.complete); /* no END record: reported as incomplete */
    assert_true(r.nsamples >= 2000);
    for (size_t i = 0; i < r.nsamples; i++)
        assert_int_equal(r.samples[i].step, (int)i); /* every record intact, in order */
    free(r.samples);
}

static void test_torn_and_corrupt(void **st)
{
    (void)st;
    md_cap *c;
    md_err e;
    assert_int_equal(md_cap_open(path, 1, &c, &e), MD_OK);
    for (int k = 0; k < 10; k++) {
        md_cap_sample s = sample(k, MD_SP_AFTER_FORWARD, 10);
        md_cap_write_sample(c, &s);
    }
    md_cap_close(c, 0);
    size_t n;
    unsigned char *b = slurp(path, &n);
    assert_non_null(b);
    size_t rec = 9 + 61;
    /* the samples follow the header and the pid META record md_cap_open writes */
    size_t base = 16 + 9 + ((size_t)b[16] | (size_t)b[17] << 8);
    for (size_t cut = base; cut < n; cut += 7) { /* every tear point */
        FILE *f = fopen(path, "wb");
        fwrite(b, 1, cut, f);
        fclose(f);
        md_sample_rank r;
        md_capture_info info;
        assert_int_equal(md_capture_load(path, &r, &info, &e), MD_OK);
        assert_int_equal(r.nsamples, (cut - base) / rec);
        assert_int_equal(info.truncated, (cut - base) % rec != 0);
        free(r.samples);
    }
    /* a flipped byte inside record 4: records 0-3 are kept */
    b[base + 4 * rec + 20] ^= 0x40;
    FILE *f = fopen(path, "wb");
    fwrite(b, 1, n, f);
    fclose(f);
    md_sample_rank r;
    md_capture_info info;
    assert_int_equal(md_capture_load(path, &r, &info, &e), MD_OK);
    assert_int_equal(r.nsamples, 4);
    assert_true(info.truncated);
    free(r.samples);
    /* newer version, wrong magic */
    b[8] = 99;
    f = fopen(path, "wb");
    fwrite(b, 1, n, f);
    fclose(f);
    assert_int_equal(md_capture_load(path, &r, &info, &e), MD_E_FORMAT);
    assert_non_null(strstr(e.msg, "newer"));
    b[0] = 'X';
    f = fopen(path, "wb");
    fwrite(b, 1, n, f);
    fclose(f);
    assert_int_equal(md_capture_load(path, &r, &info, &e), MD_E_FORMAT);
    assert_non_null(strstr(e.msg, "magic"));
    free(b);
}

/* A process on three devices of four: its own (cuda:2), DataParallel's
 * replica on cuda:0 and cuda:3, cuda:1 visible but never used. */
static void test_further_devices(void **st)
{
    (void)st;
    md_cap *c;
    md_err e;
    assert_int_equal(md_cap_open(path, 0, &c, &e), MD_OK);
    md_cap_meta(c, "rank", "1");
    md_cap_meta(c, "cuda_device", "0"); /* CUDA started on cuda:0, */
    md_cap_meta(c, "cuda_device", "2"); /* then the process moved to its own */
    for (int k = 0; k < 2; k++) {
        md_cap_sample own = sample(k, MD_SP_AFTER_FORWARD, 300);
        md_cap_sample rep = sample(k, MD_SP_AFTER_FORWARD, 40 + 10 * (uint64_t)k);
        md_cap_sample none = {k, MD_SP_AFTER_FORWARD, 0, 0, 0, UINT64_MAX, UINT64_MAX, UINT64_MAX};
        md_cap_write_sample(c, &own);
        md_cap_write_device_sample(c, 3, &rep);
        md_cap_write_device_sample(c, 1, &none);
        md_cap_write_device_sample(c, 0, &rep);
        md_cap_write_device_sample(c, 2, &rep); /* its own device again: ignored */
        md_cap_write_device_sample(c, -5, &rep); /* not a device: skipped */
        md_cap_step(c, k);
    }
    assert_int_equal(md_cap_close(c, 0), MD_OK);

    md_sample_rank *r;
    size_t n;
    md_capture_info info;
    assert_int_equal(md_capture_load_devices(path, &r, &n, &info, &e), MD_OK);
    assert_int_equal(n, 3);
    assert_int_equal(r[0].device, 2);
    assert_false(r[0].further_device);
    assert_int_equal(r[0].nsamples, 2);
    assert_true(r[0].samples[1].allocated_mib == 300.0);
    int devs[2] = {r[1].device, r[2].device};
    assert_int_equal(devs[0], 0);
    assert_int_equal(devs[1], 3);
    for (int i = 1; i < 3; i++) {
        assert_true(r[i].further_device);
        assert_int_equal(r[i].rank, 1);
        assert_true(r[i].has_capture && r[i].capture.complete && r[i].capture.steps == 2);
        assert_int_equal(r[i].nsamples, 2);
        assert_true(r[i].samples[1].allocated_mib == 50.0);
    }
    md_sample_ranks_free(r, n);
    /* the one-series reader sees the process's own device alone */
    md_sample_rank one;
    assert_int_equal(md_capture_load(path, &one, &info, &e), MD_OK);
    assert_int_equal(one.nsamples, 2);
    free(one.samples);
}

/* A rank that never called set_device: current on cuda:0, where it only
 * holds a CUDA context (NVML: 500 MiB), its memory on cuda:1. cuda:1 is
 * its own device; cuda:0 a further one. */
static void test_own_device_is_the_largest(void **st)
{
    (void)st;
    md_cap *c;
    md_err e;
    assert_int_equal(md_cap_open(path, 0, &c, &e), MD_OK);
    md_cap_meta(c, "rank", "1");
    md_cap_meta(c, "cuda_device", "0");
    for (int k = 0; k < 2; k++) {
        md_cap_sample ctx = {k, MD_SP_AFTER_FORWARD, 0, 0, 0, 600ULL << 20, 80ULL << 30, 500ULL << 20};
        md_cap_sample work = sample(k, MD_SP_AFTER_FORWARD, 300);
        md_cap_write_sample(c, &ctx);
        md_cap_write_device_sample(c, 1, &work);
        md_cap_step(c, k);
    }
    assert_int_equal(md_cap_close(c, 0), MD_OK);
    md_sample_rank *r;
    size_t n;
    md_capture_info info;
    assert_int_equal(md_capture_load_devices(path, &r, &n, &info, &e), MD_OK);
    assert_int_equal(n, 2);
    assert_int_equal(r[0].device, 1);
    assert_false(r[0].further_device);
    assert_true(r[0].samples[1].allocated_mib == 300.0);
    assert_int_equal(r[1].device, 0);
    assert_true(r[1].further_device);
    assert_true(r[1].samples[0].process_used_mib == 500.0);
    md_sample_ranks_free(r, n);
}

/* Other processes on the device: each pid once at its largest use, its
 * command line on one line; a list that overruns its record is read up
 * to there. The parent's pid and the process's role from META. */
static void test_other_processes(void **st)
{
    (void)st;
    md_cap *c;
    md_err e;
    assert_int_equal(md_cap_open(path, 0, &c, &e), MD_OK);
    md_cap_meta(c, "ppid", "77");
    md_cap_meta(c, "role", "DataLoader worker 1");
    md_gpu_process p[2] = {{10, 5, 600ULL << 20, "python3 -c import torch\nx = 1"},
                           {11, 5, UINT64_MAX, ""}};
    md_cap_processes(c, 0, p, 2);
    p[0].used = 700ULL << 20;
    p[1].used = 50ULL << 20;
    md_cap_processes(c, 0, p, 2);
    p[0].used = 100ULL << 20; /* smaller later: the largest stays */
    md_cap_processes(c, 0, p, 1);
    md_cap_processes(c, 0, p, 0); /* they are gone */
    assert_int_equal(md_cap_close(c, 0), MD_OK);
    md_sample_rank r;
    md_capture_info info;
    assert_int_equal(md_capture_load(path, &r, &info, &e), MD_OK);
    assert_int_equal(r.ppid, 77);
    assert_string_equal(r.role, "DataLoader worker 1");
    assert_int_equal(r.nothers, 2);
    assert_int_equal(r.others[0].pid, 10);
    assert_int_equal(r.others[0].ppid, 5);
    assert_true(r.others[0].used == 700ULL << 20);
    assert_string_equal(r.others[0].name, "python3 -c import torch x = 1");
    assert_true(r.others[1].used == 50ULL << 20); /* NVML could not say, then could */
    md_sample_rank_clear(&r);
    /* a record whose list claims more processes than it holds */
    static const unsigned char torn[] = {1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0,
                                         9, 0, 0, 0, 5, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 'a', 0};
    unsigned char file[256];
    size_t n = 0;
    memcpy(file, "MDCAP\r\n\x1a\1\0\0\0\0\0\0\0", 16);
    n = 16;
    uint32_t len = sizeof torn;
    memcpy(file + n, &len, 4);
    file[n + 4] = 9;
    memcpy(file + n + 5, torn, sizeof torn);
    uint32_t crc = (uint32_t)crc32(0L, file + n + 4, (uInt)(sizeof torn + 1));
    memcpy(file + n + 5 + sizeof torn, &crc, 4);
    n += 9 + sizeof torn;
    assert_int_equal(md_capture_load_mem(file, n, "torn", &r, &info, &e), MD_OK);
    assert_int_equal(r.nothers, 1);
    assert_int_equal(r.others[0].pid, 9);
    assert_string_equal(r.others[0].name, "a");
    md_sample_rank_clear(&r);
}

/* A capture whose parent process is another input's is a helper. */
static void test_relate(void **st)
{
    (void)st;
    md_sample_rank r[4];
    memset(r, 0, sizeof r);
    r[0].pid = 100, r[0].ppid = 1;
    r[1].pid = 101, r[1].ppid = 100;                       /* its worker */
    r[2].pid = 102, r[2].ppid = 100, r[2].driver_file = 1; /* the worker's trace, too */
    r[3].pid = 103, r[3].ppid = 99;                        /* a sibling's parent is no input */
    md_sample_ranks_relate(r, 4);
    assert_false(r[0].helper);
    assert_true(r[1].helper);
    assert_true(r[2].helper);
    assert_false(r[3].helper);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_further_devices, setup, teardown),
        cmocka_unit_test_setup_teardown(test_own_device_is_the_largest, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sigkill_mid_write, setup, teardown),
        cmocka_unit_test_setup_teardown(test_torn_and_corrupt, setup, teardown),
        cmocka_unit_test_setup_teardown(test_other_processes, setup, teardown),
        cmocka_unit_test(test_relate),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* test_findings.c - the diagnosis on the real seed-exercise snapshots:
 * the right cause for each anonymous workload, and no false findings. */
#include <math.h>
#include "testutil.h"

#define MIB (1024.0 * 1024.0)

typedef struct diag {
    md_snapshot *s;
    md_replay *r;
    md_analysis *a;
    md_finding *f;
    size_t n;
} diag;

static diag run(const char *rel, int device)
{
    diag d;
    md_err e;
    memset(&d, 0, sizeof d);
    d.s = load_ok(rel);
    assert_int_equal(md_replay_run(d.s, device, &d.r, &e), MD_OK);
    assert_int_equal(md_analyze(d.s, d.r, &d.a, &e), MD_OK);
    assert_int_equal(md_diagnose(d.a, &d.f, &d.n, &e), MD_OK);
    return d;
}

static void done(diag *d)
{
    free(d->f);
    md_analysis_free(d->a);
    md_replay_free(d->r);
    md_snapshot_free(d->s);
}

static const md_finding *find(const diag *d, const char *kind)
{
    for (size_t i = 0; i < d->n; i++)
        if (!strcmp(d->f[i].kind, kind))
            return &d->f[i];
    return NULL;
}

static void near(double got, double want, double tol, const char *what)
{
    if (fabs(got - want) > tol)
        fail_msg("%s: got %.2f, want %.2f +- %.2f", what, got, want, tol);
}

/* alpha: SGD without momentum. The 64 MiB that persists after step 0 is
 * two cuBLAS workspaces, not optimizer state; nothing leaks. */
static void test_alpha(void **st)
{
    (void)st;
    const char *files[] = {"seed-exercise/snap-alpha-small-rank0.pickle",
                           "seed-exercise/snap-alpha-medium-rank0.pickle"};
    for (int i = 0; i < 2; i++) {
        diag d = run(files[i], 0);
        const md_finding *ws = find(&d, "library_workspace");
        assert_non_null(ws);
        near((double)ws->bytes / MIB, 64.0, 0.5, "workspace MiB");
        assert_int_equal(ws->severity, MD_SEV_INFO);
        assert_null(find(&d, "optimizer_state"));
        assert_null(find(&d, "leak"));
        assert_null(find(&d, "oom"));
        done(&d);
    }
}

/* beta: AdamW, state = 2 x parameter bytes, no leak. */
static void test_beta(void **st)
{
    (void)st;
    const struct { const char *file; double params_mib; } c[] = {
        {"seed-exercise/snap-beta-small-rank0.pickle", 33.42},
        {"seed-exercise/snap-beta-medium-rank0.pickle", 105.10}};
    for (int i = 0; i < 2; i++) {
        diag d = run(c[i].file, 0);
        const md_finding *os = find(&d, "optimizer_state");
        assert_non_null(os);
        near((double)os->bytes / MIB / c[i].params_mib, 2.0, 0.1, "AdamW state / params");
        assert_non_null(strstr(os->summary, "AdamW"));
        assert_null(find(&d, "leak"));
        assert_non_null(find(&d, "library_workspace"));
        done(&d);
    }
}

/* gamma: retained graphs, a leak of ~52 MiB/step (small), ~274 (medium),
 * attributed to forward activations. */
static void test_gamma(void **st)
{
    (void)st;
    const struct { const char *file; double per_step; } c[] = {
        {"seed-exercise/snap-gamma-small-rank0.pickle", 52.4},
        {"seed-exercise/snap-gamma-medium-rank0.pickle", 274.4}};
    for (int i = 0; i < 2; i++) {
        diag d = run(c[i].file, 0);
        const md_finding *lk = find(&d, "leak");
        assert_non_null(lk);
        near((double)lk->bytes / MIB, c[i].per_step, 1.0, "leak MiB/step");
        assert_non_null(strstr(lk->summary, "autograd graph"));
        assert_true(lk->nsites > 0);
        assert_non_null(strstr(lk->sites[0].site, "memory_diagnostics.py"));
        assert_non_null(find(&d, "library_workspace"));
        assert_null(find(&d, "optimizer_state")); /* plain SGD */
        done(&d);
    }
}

/* DDP with rank-zero extra samples: rank 0, diverging in the forward. */
static void test_rank_imbalance(void **st)
{
    (void)st;
    diag r0 = run("seed-exercise/snap-beta-ddp-rank0.pickle", 0);
    diag r1 = run("seed-exercise/snap-beta-ddp-rank1.pickle", 1);
    const md_analysis *as[2] = {r0.a, r1.a};
    int ranks[2] = {0, 1};
    md_finding *f;
    size_t n;
    md_err e;
    assert_int_equal(md_diagnose_ranks(as, ranks, 2, &f, &n, &e), MD_OK);
    assert_int_equal(n, 1);
    assert_string_equal(f[0].kind, "rank_imbalance");
    assert_non_null(strstr(f[0].summary, "rank 0"));
    assert_int_equal(f[0].phase, MD_PHASE_FORWARD);
    near((double)f[0].bytes / MIB, 165.2, 0.5, "imbalance MiB");
    free(f);
    /* the same rank against itself: nothing */
    const md_analysis *same[2] = {r1.a, r1.a};
    assert_int_equal(md_diagnose_ranks(same, ranks, 2, &f, &n, &e), MD_OK);
    assert_int_equal(n, 0);
    free(f);
    assert_null(find(&r1, "leak"));
    done(&r0);
    done(&r1);
}

/* An OOM entry in the trace becomes an oom finding with the request and
 * the device's free memory. */
static void test_oom(void **st)
{
    (void)st;
    diag d = run("synthetic/oom.pickle", 0);
    const md_finding *o = find(&d, "oom");
    assert_non_null(o);
    assert_int_equal(o->severity, MD_SEV_CRITICAL);
    assert_int_equal(o->bytes, 80ULL * 1024 * 1024 * 1024);
    assert_non_null(strstr(o->summary, "123.0 MiB free"));
    done(&d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_alpha),
        cmocka_unit_test(test_beta),
        cmocka_unit_test(test_gamma),
        cmocka_unit_test(test_rank_imbalance),
        cmocka_unit_test(test_oom),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

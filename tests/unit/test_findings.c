/* test_findings.c - the diagnosis on the real seed-exercise snapshots:
 * the right cause for each anonymous workload, and no false findings. */
#include <math.h>
#include "testutil.h"
#include "analyze/analyze.h"

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

/* The finding of this kind; fails the test when there is none. */
static const md_finding *need(const diag *d, const char *kind)
{
    static md_finding none;
    const md_finding *f = find(d, kind);
    if (!f)
        fail_msg("no %s finding", kind);
    return f ? f : &none;
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
        const md_finding *ws = need(&d, "library_workspace");
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
        const md_finding *os = need(&d, "optimizer_state");
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
        const md_finding *lk = need(&d, "leak");
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
    const md_finding *o = need(&d, "oom");
    assert_int_equal(o->severity, MD_SEV_CRITICAL);
    assert_int_equal(o->bytes, 80ULL * 1024 * 1024 * 1024);
    assert_non_null(strstr(o->summary, "123.0 MiB free"));
    done(&d);
}

/* Two optimizers in turn (tests/gen/make_synthetic.py, optimizers_in_turn):
 * nine steps beginning with the second optimizer's, one step's site
 * unknown. Four iterations ending with the last step, the sites in an
 * iteration's order, and the leak per iteration (none step to step). */
static void test_optimizers_in_turn(void **st)
{
    (void)st;
    diag d = run("synthetic/optimizers_in_turn.pickle", 0);
    size_t nst, nit;
    const md_step *steps = md_analysis_steps(d.a, &nst);
    const md_step *it = md_analysis_iterations(d.a, &nit);
    assert_int_equal(nst, 9);
    assert_int_equal(md_analysis_period(d.a), 2);
    assert_int_equal(nit, 4);
    assert_int_equal(it[0].fwd_start, steps[1].fwd_start); /* step 0 left out */
    assert_int_equal(it[3].after_zero, steps[8].after_zero);
    assert_int_equal(md_analysis_period_site(d.a, 0)->line, 40);
    assert_int_equal(md_analysis_period_site(d.a, 1)->line, 50);
    char say[256];
    assert_int_equal(md_analysis_period_say(d.a, say, sizeof say), 2);
    assert_string_equal(say, "Adam/AdamW at /home/u/gan.py:40 train, then Adam/AdamW at "
                              "/home/u/gan.py:50 train");
    const md_finding *l = need(&d, "leak");
    near((double)l->bytes / MIB, 2.0, 0.01, "leak per iteration");
    assert_non_null(strstr(l->summary, "every iteration"));
    near(md_analysis_indicators(d.a)->between_step_growth_mib, 6.0, 0.01, "between-step growth");
    done(&d);
}

/* A leak under the totals' noise (tests/gen/make_synthetic.py,
 * small_leaks): the line keeping 16 KiB every step is the leak, an info;
 * the line that skipped one step is not in it. */
static void test_small_leaks(void **st)
{
    (void)st;
    diag d = run("synthetic/small_leaks.pickle", 0);
    const md_finding *l = need(&d, "leak");
    assert_int_equal(l->severity, MD_SEV_INFO);
    assert_int_equal(l->bytes, 16 << 10);
    assert_int_equal(l->nsites, 1);
    assert_non_null(strstr(l->sites[0].site, "/home/u/train.py:60 train"));
    assert_int_equal(l->sites[0].count, 6);
    assert_non_null(strstr(l->summary, "16.0 KiB every step"));
    done(&d);
}

/* No training steps (tests/gen/make_synthetic.py, calls): the calls of
 * the script line that allocates most, a C++ allocation inside a call not
 * ending it, the last call left out; a leak per call. */
static void test_calls(void **st)
{
    (void)st;
    diag d = run("synthetic/calls.pickle", 0);
    size_t nst, nit;
    md_analysis_steps(d.a, &nst);
    const md_step *it = md_analysis_iterations(d.a, &nit);
    assert_int_equal(nst, 0);
    assert_int_equal(nit, 4);
    const md_frame *call = md_analysis_call_site(d.a);
    assert_non_null(call);
    assert_int_equal(call->line, 20);
    near(((double)md_replay_at(d.r, it[3].after_zero).allocated -
          (double)md_replay_at(d.r, it[0].after_zero).allocated) / MIB, 6.0, 0.01,
         "growth over calls");
    const md_finding *l = need(&d, "leak");
    near((double)l->bytes / MIB, 2.0, 0.01, "leak per call");
    assert_non_null(strstr(l->summary, "every call"));
    done(&d);
}

/* One optimizer: period 1, the iterations are the steps. */
static void test_one_optimizer_no_cycle(void **st)
{
    (void)st;
    diag d = run("seed-exercise/snap-beta-small-rank0.pickle", 0);
    size_t nst, nit;
    md_analysis_steps(d.a, &nst);
    md_analysis_iterations(d.a, &nit);
    assert_int_equal(md_analysis_period(d.a), 1);
    assert_int_equal(nit, nst);
    assert_null(md_analysis_period_site(d.a, 0));
    assert_null(md_analysis_call_site(d.a)); /* steps were found */
    char say[64];
    assert_int_equal(md_analysis_period_say(d.a, say, sizeof say), 0);
    assert_string_equal(say, "");
    done(&d);
}

/* Captured with examples/workloads.py on an H200 (tests/gpu/run.sh),
 * Python-only stacks: the realistic default. */
static void test_captured_python_stacks(void **st)
{
    (void)st;
    diag d = run("captured/alpha-small-py.pickle.xz", 0);
    const md_finding *ws = find(&d, "library_workspace");
    assert_non_null(ws); /* found by size: no C++ frames to name cuBLAS */
    near((double)ws->bytes / MIB, 64.0, 0.5, "workspace without C++ frames");
    assert_int_equal(d.n, 1);
    done(&d);

    d = run("captured/beta-small-py.pickle.xz", 0);
    const md_finding *os = need(&d, "optimizer_state");
    assert_non_null(strstr(os->summary, "2.0"));
    assert_null(find(&d, "leak"));
    done(&d);

    d = run("captured/gamma-small-py.pickle.xz", 0);
    const md_finding *lk = need(&d, "leak");
    near((double)lk->bytes / MIB, 53.2, 1.0, "leak MiB/step");
    assert_non_null(strstr(lk->summary, "autograd graph"));
    done(&d);

    /* the loss is kept but backward freed its graph's buffers: a Python
     * object holding a finished graph is not a GPU leak */
    d = run("captured/keptloss-small-py.pickle.xz", 0);
    assert_null(find(&d, "leak"));
    done(&d);
}

static void test_captured_logits_fragmentation_oom(void **st)
{
    (void)st;
    diag d = run("captured/vocab.pickle.xz", 0);
    const md_finding *lg = need(&d, "logits");
    assert_non_null(strstr(lg->summary, "12.0 bytes per logit element"));
    assert_null(find(&d, "activations"));
    done(&d);

    d = run("captured/ragged.pickle.xz", 0);
    const md_finding *fr = need(&d, "fragmentation");
    assert_true(fr->bytes > 200 * 1024 * 1024);
    assert_null(find(&d, "logits"));
    assert_non_null(strstr(fr->advice, "expandable_segments:True lets segments grow"));
    done(&d);
    /* settings that say expandable_segments is on: not advised again */
    d = run("derived/ragged-claims-expandable.pickle.xz", 0);
    fr = need(&d, "fragmentation");
    assert_true(strstr(fr->advice, "expandable_segments is on already") == fr->advice);
    done(&d);
    /* the same workload with expandable segments: no fragmentation */
    d = run("captured/ragged-expandable.pickle.xz", 0);
    assert_null(find(&d, "fragmentation"));
    assert_true(md_snapshot_settings(d.s)->expandable_segments);
    done(&d);

    d = run("captured/oom.pickle.xz", 0);
    const md_finding *o = need(&d, "oom");
    assert_int_equal(o->bytes, 144ULL * 1024 * 1024); /* "Tried to allocate 144.00 MiB" */
    done(&d);
}

/* A history that overflowed its ring buffer: only complete steps inside
 * it are used, two, too few for the leak rule's three; the window's own
 * rule finds gamma's leak from one interval and the same sizes held from
 * before the window. The kept loss's ring (its graph freed) has none. */
static void test_captured_ring_buffer(void **st)
{
    (void)st;
    diag d = run("captured/gamma-small-ring.pickle.xz", 0);
    size_t n;
    const md_step *steps = md_analysis_steps(d.a, &n);
    assert_int_equal(n, 2);
    assert_int_equal(steps[0].number, 4);
    assert_false(md_analysis_indicators(d.a)->first_step_recorded);
    const md_finding *l = need(&d, "leak");
    assert_int_equal(l->severity, MD_SEV_CRITICAL);
    assert_true(l->bytes > 53ULL << 20 && l->bytes < 54ULL << 20); /* 53.6 MiB a step */
    done(&d);
    d = run("captured/keptloss-small-ring.pickle.xz", 0);
    assert_null(find(&d, "leak"));
    done(&d);
}

/* md_lone_growth's rule on its own: a leak on some ranks and none on others
 * is named for the most growing rank; small growth, growth alike on every
 * rank, or one rank alone say nothing. */
static void test_lone_growth(void **st)
{
    (void)st;
    static const struct {
        md_rank_growth g[3];
        size_t n;
        int want; /* rank named, -1 for none */
    } cases[] = {
        {{{0, 0.0}, {1, 56.0}}, 2, 1},            /* tests/data/patterns/rankleak */
        {{{0, 112.0}, {1, 112.0}}, 2, -1},        /* fsdpleak: both ranks */
        {{{0, 10.0}, {1, 0.0}}, 2, -1},           /* under 16 MiB */
        {{{0, 40.0}, {1, 11.0}}, 2, -1},          /* the other grows over a quarter */
        {{{0, 40.0}, {1, 9.9}, {2, 30.0}}, 3, 0}, /* the least growing decides */
        {{{3, -5.0}, {7, 64.0}}, 2, 7},           /* one fell; rank numbers kept */
        {{{0, 99.0}}, 1, -1},                     /* one rank compares with nothing */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        md_finding *f = NULL;
        size_t n = 0, cap = 0;
        assert_int_equal(md_lone_growth(cases[i].g, cases[i].n, &f, &n, &cap), MD_OK);
        if (cases[i].want < 0) {
            assert_int_equal(n, 0);
        } else {
            assert_int_equal(n, 1);
            assert_string_equal(f[0].kind, "rank_imbalance");
            assert_int_equal(f[0].rank, cases[i].want);
            assert_int_equal(f[0].severity, MD_SEV_WARNING);
            if (i == 4) /* ranks 0 and 2 grow, rank 1 does not */
                assert_non_null(strstr(f[0].summary, "a leak on ranks 0, 2's side only"));
        }
        free(f);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_alpha),
        cmocka_unit_test(test_beta),
        cmocka_unit_test(test_gamma),
        cmocka_unit_test(test_rank_imbalance),
        cmocka_unit_test(test_lone_growth),
        cmocka_unit_test(test_oom),
        cmocka_unit_test(test_optimizers_in_turn),
        cmocka_unit_test(test_small_leaks),
        cmocka_unit_test(test_one_optimizer_no_cycle),
        cmocka_unit_test(test_calls),
        cmocka_unit_test(test_captured_python_stacks),
        cmocka_unit_test(test_captured_logits_fragmentation_oom),
        cmocka_unit_test(test_captured_ring_buffer),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

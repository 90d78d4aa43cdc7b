/* test_indicators.c - golden test against the seed script's own
 * measurements: every seed-exercise snapshot, replayed, must give the
 * indicators in the JSON the script wrote for the same run (within 1 MiB),
 * and the allocated figure at every phase sample plus each step's peak
 * (within 0.01 MiB, the accuracy the block rules allow). */
#include <jansson.h>
#include <math.h>
#include "testutil.h"

#define MIB (1024.0 * 1024.0)

typedef struct golden {
    const char *json, *snap;
    int rank, device;
} golden;

static const golden cases[] = {
    {"alpha-small.json", "snap-alpha-small-rank0.pickle", 0, 0},
    {"alpha-medium.json", "snap-alpha-medium-rank0.pickle", 0, 0},
    {"beta-small.json", "snap-beta-small-rank0.pickle", 0, 0},
    {"beta-medium.json", "snap-beta-medium-rank0.pickle", 0, 0},
    {"gamma-small.json", "snap-gamma-small-rank0.pickle", 0, 0},
    {"gamma-medium.json", "snap-gamma-medium-rank0.pickle", 0, 0},
    {"beta-ddp.json", "snap-beta-ddp-rank0.pickle", 0, 0},
    {"beta-ddp.json", "snap-beta-ddp-rank1.pickle", 1, 1},
};

static json_t *rank_report(json_t *root, int rank)
{
    size_t i;
    json_t *r;
    json_array_foreach(json_object_get(root, "rank_reports"), i, r)
        if (json_integer_value(json_object_get(r, "rank")) == rank)
            return r;
    return NULL;
}

static double sample(json_t *rep, int step, const char *phase, const char *field)
{
    size_t i;
    json_t *s;
    json_array_foreach(json_object_get(rep, "samples"), i, s) {
        if (json_integer_value(json_object_get(s, "step")) == step &&
            !strcmp(json_string_value(json_object_get(s, "phase")), phase))
            return json_real_value(json_object_get(s, field));
    }
    fail_msg("no sample step %d %s", step, phase);
    return NAN;
}

static void near(double got, double want, double tol, const char *what, const char *file)
{
    if (fabs(got - want) > tol)
        fail_msg("%s %s: got %.4f, want %.4f (tolerance %.2f)", file, what, got, want, tol);
}

static double at(const md_replay *r, long i)
{
    return (double)md_replay_at(r, i).allocated / MIB;
}

static void check_case(const golden *g)
{
    char p[1024], rel[512];
    json_error_t je;
    snprintf(rel, sizeof rel, "seed-exercise/%s", g->json);
    json_t *root = json_load_file(data_path(rel, p, sizeof p), 0, &je);
    assert_non_null(root);
    json_t *rep = rank_report(root, g->rank);
    assert_non_null(rep);
    snprintf(rel, sizeof rel, "seed-exercise/%s", g->snap);
    md_snapshot *s = load_ok(rel);
    md_replay *r;
    md_analysis *a;
    md_err e;
    assert_int_equal(md_replay_run(s, g->device, &r, &e), MD_OK);
    assert_int_equal(md_analyze(s, r, &a, &e), MD_OK);
    assert_int_equal(md_replay_anomalies(r), 0);

    const md_indicators *in = md_analysis_indicators(a);
    json_t *ji = json_object_get(rep, "indicators");
    assert_true(in->valid);
    near(in->first_step_persistent_change_mib,
         json_real_value(json_object_get(ji, "first_step_persistent_change_mib")), 1.0,
         "first_step_persistent_change_mib", g->snap);
    near(in->between_step_growth_mib, json_real_value(json_object_get(ji, "between_step_growth_mib")),
         1.0, "between_step_growth_mib", g->snap);
    near(in->largest_forward_increase_mib,
         json_real_value(json_object_get(ji, "largest_forward_increase_mib")), 1.0,
         "largest_forward_increase_mib", g->snap);
    near(in->maximum_peak_allocated_mib,
         json_real_value(json_object_get(ji, "maximum_peak_allocated_mib")), 1.0,
         "maximum_peak_allocated_mib", g->snap);

    size_t n;
    const md_step *st = md_analysis_steps(a, &n);
    assert_int_equal(n, json_integer_value(json_object_get(root, "steps")));
    assert_int_equal(md_analysis_step_source(a), MD_STEPS_FROM_ANNOTATIONS);
    near(at(r, st[0].fwd_start), sample(rep, -1, "after_input", "allocated_mib"), 0.01,
         "after_input", g->snap);
    for (size_t k = 0; k < n; k++) {
        int sk = (int)k;
        near(at(r, st[k].after_forward), sample(rep, sk, "after_forward", "allocated_mib"), 0.01,
             "after_forward", g->snap);
        near(at(r, st[k].after_backward), sample(rep, sk, "after_backward", "allocated_mib"), 0.01,
             "after_backward", g->snap);
        near(at(r, st[k].after_optim), sample(rep, sk, "after_optimizer_step", "allocated_mib"),
             0.01, "after_optimizer_step", g->snap);
        near(at(r, st[k].after_zero), sample(rep, sk, "after_clear_gradients", "allocated_mib"),
             0.01, "after_clear_gradients", g->snap);
        near((double)st[k].peak / MIB,
             sample(rep, sk, "after_clear_gradients", "peak_allocated_mib"), 0.01, "step peak",
             g->snap);
    }
    md_analysis_free(a);
    md_replay_free(r);
    md_snapshot_free(s);
    json_decref(root);
}

static void test_seed_exercise_golden(void **st)
{
    (void)st;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        check_case(&cases[i]);
}

/* Summing requested sizes instead of replaying blocks is measurably wrong
 * on these runs: the replay is not a no-op. */
static void test_requested_differs_from_allocated(void **st)
{
    (void)st;
    md_snapshot *s = load_ok("seed-exercise/snap-gamma-medium-rank0.pickle");
    md_replay *r = replay_ok(s, 0);
    long p = md_replay_peak_index(r);
    md_point pt = md_replay_at(r, p);
    assert_true(pt.allocated > pt.requested);
    assert_true(pt.allocated - pt.requested > 1024 * 1024);
    md_replay_free(r);
    md_snapshot_free(s);
}

/* Categories and sites at the peak of the AdamW run. */
static void test_sites_and_categories(void **st)
{
    (void)st;
    md_snapshot *s = load_ok("seed-exercise/snap-beta-small-rank0.pickle");
    md_replay *r;
    md_analysis *a;
    md_err e;
    assert_int_equal(md_replay_run(s, 0, &r, &e), MD_OK);
    assert_int_equal(md_analyze(s, r, &a, &e), MD_OK);
    assert_string_equal(md_analysis_optimizer(a), "AdamW");
    md_site *sites;
    size_t n;
    uint64_t cat[MD_CAT_COUNT];
    size_t ns;
    const md_step *steps = md_analysis_steps(a, &ns);
    /* after the last optimizer step: parameters, AdamW state (2x params),
     * two 32 MiB cuBLAS workspaces, gradients still live */
    assert_int_equal(md_sites_at(a, steps[ns - 1].after_optim, &sites, &n, cat, &e), MD_OK);
    double params = (double)cat[MD_CAT_PARAMETER] / MIB;
    double optim = (double)cat[MD_CAT_OPTIMIZER_STATE] / MIB;
    double ws = (double)cat[MD_CAT_WORKSPACE] / MIB;
    near(params, 33.42, 0.1, "parameters", "beta-small");
    near(optim / params, 2.0, 0.05, "AdamW state / parameters", "beta-small");
    near(ws, 64.0, 0.01, "cuBLAS workspaces", "beta-small");
    assert_true(n > 0);
    for (size_t i = 1; i < n; i++)
        assert_true(sites[i - 1].bytes >= sites[i].bytes);
    free(sites);
    md_analysis_free(a);
    md_replay_free(r);
    md_snapshot_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_seed_exercise_golden),
        cmocka_unit_test(test_requested_differs_from_allocated),
        cmocka_unit_test(test_sites_and_categories),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* test_samples.c - the seed script's JSON reports as input: indicators
 * recomputed from the samples equal the script's own, and the findings
 * that samples alone support (non_framework, leak, rank_imbalance). */
#include <jansson.h>
#include <math.h>
#include "testutil.h"

static md_sample_rank *load_json(const char *rel, size_t *n)
{
    char p[1024];
    md_sample_rank *r = NULL;
    md_err e;
    memset(&e, 0, sizeof e);
    int rc = md_seedjson_load(data_path(rel, p, sizeof p), &r, n, &e);
    if (rc)
        print_error("%s: %s\n", rel, e.msg);
    assert_int_equal(rc, MD_OK);
    for (size_t i = 0; i < *n; i++)
        md_samples_indicators(&r[i]);
    return r;
}

static int has(const md_finding *f, size_t n, const char *kind)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(f[i].kind, kind))
            return 1;
    return 0;
}

static void test_indicators_equal_the_scripts(void **st)
{
    (void)st;
    const char *files[] = {"alpha-small.json", "alpha-medium.json", "beta-small.json",
                           "beta-medium.json", "gamma-small.json", "gamma-medium.json",
                           "beta-ddp.json", "gamma-ddp-bf16.json"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char rel[256], p[1024];
        snprintf(rel, sizeof rel, "seed-exercise/%s", files[i]);
        size_t n;
        md_sample_rank *r = load_json(rel, &n);
        json_t *root = json_load_file(data_path(rel, p, sizeof p), 0, NULL);
        json_t *reps = json_object_get(root, "rank_reports");
        assert_int_equal(n, json_array_size(reps));
        for (size_t k = 0; k < n; k++) {
            json_t *ind = json_object_get(json_array_get(reps, k), "indicators");
            const md_indicators *in = &r[k].indicators;
            assert_true(in->valid);
            assert_true(fabs(in->first_step_persistent_change_mib -
                             json_real_value(json_object_get(ind, "first_step_persistent_change_mib"))) < 1e-9);
            assert_true(fabs(in->between_step_growth_mib -
                             json_real_value(json_object_get(ind, "between_step_growth_mib"))) < 1e-9);
            assert_true(fabs(in->largest_forward_increase_mib -
                             json_real_value(json_object_get(ind, "largest_forward_increase_mib"))) < 1e-9);
            assert_true(fabs(in->maximum_peak_allocated_mib -
                             json_real_value(json_object_get(ind, "maximum_peak_allocated_mib"))) < 1e-9);
        }
        json_decref(root);
        md_sample_ranks_free(r, n);
    }
}

static void test_findings_from_samples(void **st)
{
    (void)st;
    md_finding *f;
    size_t n, nf;
    md_err e;
    /* alpha: ~750 MiB outside the allocator (CUDA context), no leak */
    md_sample_rank *r = load_json("seed-exercise/alpha-small.json", &n);
    assert_int_equal(md_diagnose_samples(&r[0], &f, &nf, &e), MD_OK);
    assert_true(has(f, nf, "non_framework"));
    assert_false(has(f, nf, "leak"));
    assert_int_equal(f[0].severity, MD_SEV_INFO);
    free(f);
    md_sample_ranks_free(r, n);
    /* gamma: the leak, ~52 MiB per step */
    r = load_json("seed-exercise/gamma-small.json", &n);
    assert_int_equal(md_diagnose_samples(&r[0], &f, &nf, &e), MD_OK);
    assert_true(has(f, nf, "leak"));
    assert_true(fabs((double)f[0].bytes / 1048576.0 - 52.4) < 0.5);
    free(f);
    md_sample_ranks_free(r, n);
    /* DDP with rank-0 extra samples: imbalance; without them (gamma bf16): none */
    r = load_json("seed-exercise/beta-ddp.json", &n);
    assert_int_equal(md_diagnose_sample_ranks(r, n, &f, &nf, &e), MD_OK);
    assert_int_equal(nf, 1);
    assert_string_equal(f[0].kind, "rank_imbalance");
    assert_int_equal(f[0].phase, MD_PHASE_FORWARD);
    free(f);
    md_sample_ranks_free(r, n);
    r = load_json("seed-exercise/gamma-ddp-bf16.json", &n);
    assert_int_equal(md_diagnose_sample_ranks(r, n, &f, &nf, &e), MD_OK);
    assert_int_equal(nf, 0);
    free(f);
    md_sample_ranks_free(r, n);
    /* a small context and flat memory: nothing to report */
    r = load_json("synthetic/seed-small-context.json", &n);
    assert_int_equal(md_diagnose_samples(&r[0], &f, &nf, &e), MD_OK);
    assert_int_equal(nf, 0);
    free(f);
    md_sample_ranks_free(r, n);
}

/* The capture files of one run directory, each file's own device. */
static md_sample_rank *load_captures(const char *const *rel, size_t n)
{
    md_sample_rank *r = calloc(n, sizeof *r);
    assert_non_null(r);
    for (size_t i = 0; i < n; i++) {
        char p[1024];
        md_capture_info info;
        md_err e;
        assert_int_equal(md_capture_load(data_path(rel[i], p, sizeof p), &r[i], &info, &e), MD_OK);
        md_samples_indicators(&r[i]);
    }
    md_sample_ranks_relate(r, n);
    return r;
}

/* The finding of that kind, or an empty one (its checks then fail). */
static md_finding find_kind(const md_finding *f, size_t n, const char *kind)
{
    md_finding none;
    memset(&none, 0, sizeof none);
    for (size_t i = 0; i < n; i++)
        if (!strcmp(f[i].kind, kind))
            return f[i];
    return none;
}

/* Real runs (tests/data/sharing, examples/sharing.py on an H200): two
 * DataLoader workers with CUDA contexts are the main process's children
 * and no ranks of their own (the main process was "1359 MiB above rank
 * 0"); a sweep's two processes on one GPU name each other as siblings. */
static void test_other_processes(void **st)
{
    (void)st;
    static const char *const workers[] = {"sharing/workers/rank0.mdcap",
                                          "sharing/workers/rank0-pid559.mdcap",
                                          "sharing/workers/rank0-pid560.mdcap"};
    md_sample_rank *r = load_captures(workers, 3);
    assert_false(r[0].helper);
    assert_true(r[1].helper && r[2].helper);
    assert_string_equal(r[1].role, "DataLoader worker 0");
    md_finding *f;
    size_t nf;
    md_err e;
    assert_int_equal(md_diagnose_sample_ranks(r, 3, &f, &nf, &e), MD_OK);
    assert_int_equal(nf, 0);
    free(f);
    for (int i = 1; i < 3; i++) { /* said by their parent's finding */
        assert_int_equal(md_diagnose_samples(&r[i], &f, &nf, &e), MD_OK);
        assert_false(has(f, nf, "non_framework"));
        free(f);
    }
    assert_int_equal(md_diagnose_samples(&r[0], &f, &nf, &e), MD_OK);
    md_finding x = find_kind(f, nf, "non_framework");
    assert_non_null(strstr(x.summary, "1268.0 MiB of it by 2 child processes of this one"));
    assert_int_equal(x.severity, MD_SEV_WARNING);
    assert_int_equal(x.nsites, 2);
    assert_non_null(strstr(x.sites[0].site, "(a child of this process): python3 -B -c from "
                                            "multiprocessing.spawn"));
    free(f);
    md_sample_ranks_free(r, 3);

    static const char *const sweep[] = {"sharing/sweep/rank0.mdcap",
                                        "sharing/sweep/rank0-pid652.mdcap"};
    r = load_captures(sweep, 2);
    assert_int_equal(md_diagnose_sample_ranks(r, 2, &f, &nf, &e), MD_OK);
    assert_int_equal(nf, 0);
    free(f);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(md_diagnose_samples(&r[i], &f, &nf, &e), MD_OK);
        x = find_kind(f, nf, "non_framework");
        assert_non_null(strstr(x.summary, "3428.4 MiB of it by another process started by "
                                          "this one's parent"));
        assert_non_null(strstr(x.advice, "torch.cuda.set_device(rank)"));
        free(f);
    }
    md_sample_ranks_free(r, 2);

    /* two DDP ranks over gloo that never chose a GPU: one finding across them */
    static const char *const same[] = {"launch/samegpu/rank0.mdcap", "launch/samegpu/rank1.mdcap"};
    r = load_captures(same, 2);
    assert_int_equal(md_diagnose_sample_ranks(r, 2, &f, &nf, &e), MD_OK);
    assert_int_equal(nf, 1);
    assert_string_equal(f[0].summary, "ranks 0 and 1 run on one GPU, cuda:0 of vm: each has what "
                                      "the others leave of it");
    assert_int_equal(f[0].severity, MD_SEV_WARNING);
    free(f);
    md_sample_ranks_free(r, 2);
}

static void test_bad_json(void **st)
{
    (void)st;
    char p[1024];
    md_sample_rank *r;
    size_t n;
    md_err e;
    memset(&e, 0, sizeof e);
    /* a snapshot is not JSON; a JSON file without rank_reports is refused */
    assert_int_equal(md_seedjson_load(data_path("synthetic/v2_3.pickle", p, sizeof p), &r, &n, &e),
                     MD_E_FORMAT);
    FILE *f = fopen("/tmp/md-test-bad.json", "w");
    assert_non_null(f);
    fputs("{\"rank_reports\": [{\"samples\": [{\"step\": 0}]}]}", f);
    fclose(f);
    assert_int_equal(md_seedjson_load("/tmp/md-test-bad.json", &r, &n, &e), MD_E_SCHEMA);
    assert_non_null(strstr(e.msg, "rank_reports[0].samples[0]"));
    remove("/tmp/md-test-bad.json");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_indicators_equal_the_scripts),
        cmocka_unit_test(test_findings_from_samples),
        cmocka_unit_test(test_other_processes),
        cmocka_unit_test(test_bad_json),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

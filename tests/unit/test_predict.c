/* test_predict.c - parameter counts against transformers' own (configs
 * and counts measured with transformers 5.17 on an H200), the seed
 * presets against the seed script's counts, and the step floor against
 * allocated memory measured at the start of 122 steady-state steps. */
#include "testutil.h"

/* tests/data/predict/ARCH.json, whose parameters transformers counts as params */
static void load_arch(const char *arch, long long params, md_model *m)
{
    char rel[128], p[1024];
    md_err e;
    snprintf(rel, sizeof rel, "predict/%s.json", arch);
    assert_int_equal(md_model_load(data_path(rel, p, sizeof p), m, &e), MD_OK);
    if (md_model_params(m) != params)
        fail_msg("%s: %lld parameters, transformers counts %lld", arch,
                 (long long)md_model_params(m), params);
}

static void test_grid(void **st)
{
    (void)st;
    char p[1024];
    FILE *f = fopen(data_path("predict/grid.tsv", p, sizeof p), "r");
    assert_non_null(f);
    char line[512], arch[32], opt[32], prec[32];
    long long batch, seq, params, before, peak;
    int rows = 0;
    if (!fgets(line, sizeof line, f)) /* header */
        fail();
    while (fgets(line, sizeof line, f)) {
        assert_int_equal(sscanf(line, "%31s %lld %lld %31s %31s %lld %lld %lld", arch, &batch, &seq,
                                opt, prec, &params, &before, &peak), 8);
        md_model m;
        md_prediction pr;
        md_err e;
        load_arch(arch, params, &m);
        md_optimizer o = !strcmp(opt, "adamw") ? MD_OPT_ADAMW : MD_OPT_SGD;
        md_precision pc = !strcmp(prec, "bf16-pure") ? MD_BF16_PURE
                          : !strcmp(prec, "fp32")    ? MD_FP32 : MD_BF16_AUTOCAST;
        assert_int_equal(md_predict(&m, batch, seq, o, pc, &pr, &e), MD_OK);
        /* a floor: never above what was measured, and within 64 MiB of it
         * (inputs, the loss scalar, small buffers) */
        if ((long long)pr.floor > before || before - (long long)pr.floor > 64LL << 20)
            fail_msg("%s %lldx%lld %s %s: floor %llu, measured %lld", arch, batch, seq, opt, prec,
                     (unsigned long long)pr.floor, before);
        assert_false(pr.peak_known);
        assert_true((long long)pr.floor_with_grads < peak);
        rows++;
    }
    fclose(f);
    assert_true(rows >= 120);
}

/* Every architecture, including gemma and phi3 that the grid lacks. */
static void test_param_counts(void **st)
{
    (void)st;
    char p[1024], line[256], arch[32];
    long long params;
    int rows = 0;
    FILE *f = fopen(data_path("predict/params.tsv", p, sizeof p), "r");
    assert_non_null(f);
    while (fgets(line, sizeof line, f)) {
        if (sscanf(line, "%31s %lld", arch, &params) != 2)
            continue; /* comment, header */
        md_model m;
        load_arch(arch, params, &m);
        rows++;
    }
    fclose(f);
    assert_int_equal(rows, 8);
}

static void test_seed_presets(void **st)
{
    (void)st;
    md_model m;
    md_err e;
    /* parameter_count in the seed script's JSON reports */
    assert_int_equal(md_model_load("seed:small", &m, &e), MD_OK);
    assert_int_equal(md_model_params(&m), 8762112);
    assert_int_equal(md_model_load("seed:medium", &m, &e), MD_OK);
    assert_int_equal(md_model_params(&m), 27550720);
    assert_int_equal(md_model_load("seed:large", &m, &e), MD_E_ARG);
}

/* The prediction next to the real HF run it describes (tests/data/runs/hf,
 * examples/hf_train.py --model llama --batch 8 --seq 512, AdamW, fp32). */
static void test_validate_hf_run(void **st)
{
    (void)st;
    char p[1024];
    md_model m;
    md_prediction pr;
    md_validation v;
    md_snapshot *s;
    md_replay *r;
    md_analysis *a;
    md_err e;
    assert_int_equal(md_model_load(data_path("predict/hf-run-llama.json", p, sizeof p), &m, &e), MD_OK);
    assert_int_equal(md_predict(&m, 8, 512, MD_OPT_ADAMW, MD_FP32, &pr, &e), MD_OK);
    assert_int_equal(md_snapshot_load(data_path("runs/hf/rank0.pickle.xz", p, sizeof p), &s, &e), MD_OK);
    assert_int_equal(md_replay_run(s, 0, &r, &e), MD_OK);
    assert_int_equal(md_analyze(s, r, &a, &e), MD_OK);
    assert_int_equal(md_predict_validate(&pr, r, a, &v, &e), MD_OK);
    assert_int_equal(v.step, 4);
    for (int c = 0; c < MD_VAL_COUNT; c++) {
        double ratio = (double)v.predicted[c] / (double)v.measured[c];
        if (ratio < 0.985 || ratio > 1.0)
            fail_msg("%s: predicted %llu, measured %llu", md_validation_name(c),
                     (unsigned long long)v.predicted[c], (unsigned long long)v.measured[c]);
    }
    assert_int_equal(v.measured[MD_VAL_WORKSPACE], 64ULL << 20);
    assert_int_equal(v.grads_at_start, 0);
    assert_true(v.measured_peak > 3561ULL << 20 && v.measured_peak < 3562ULL << 20);
    md_analysis_free(a);
    md_replay_free(r);
    md_snapshot_free(s);
}

static void test_refusals(void **st)
{
    (void)st;
    md_model m;
    md_prediction p;
    md_err e;
    FILE *f = fopen("/tmp/md-test-config.json", "w");
    fputs("{\"model_type\": \"mamba\", \"vocab_size\": 10}", f);
    fclose(f);
    assert_int_equal(md_model_load("/tmp/md-test-config.json", &m, &e), MD_E_SCHEMA);
    assert_non_null(strstr(e.msg, "'mamba' is not supported"));
    remove("/tmp/md-test-config.json");
    /* hostile sizes are refused before any product can overflow */
    static const char *const bad[] = {
        "{\"model_type\":\"llama\",\"vocab_size\":9223372036854775807,\"hidden_size\":8,"
        "\"intermediate_size\":8,\"num_hidden_layers\":1,\"num_attention_heads\":1}",
        "{\"model_type\":\"gpt2\",\"vocab_size\":10,\"n_embd\":4611686018427387904}",
        "{\"model_type\":\"llama\",\"vocab_size\":10,\"hidden_size\":8,\"intermediate_size\":8,"
        "\"num_hidden_layers\":1,\"num_attention_heads\":16384,\"head_dim\":65536}",
        "{\"model_type\":\"gpt2\",\"vocab_size\":10,\"n_head\":0}",
        "[\"llama\"]",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(md_model_load_mem(bad[i], strlen(bad[i]), "bad", &m, &e), MD_E_SCHEMA);
    const char *gpt2 = "{\"model_type\":\"gpt2\",\"vocab_size\":50257}"; /* defaults: gpt2 small */
    assert_int_equal(md_model_load_mem(gpt2, strlen(gpt2), "gpt2", &m, &e), MD_OK);
    assert_int_equal(md_model_params(&m), 124439808);
    /* the context the verdict adds is the one measured on the H200 runs
     * (non_framework of tests/data/runs/hf: 1367.9 MiB) */
    md_prediction q;
    assert_int_equal(md_predict(&m, 1, 128, MD_OPT_SGD, MD_FP32, &q, &e), MD_OK);
    assert_int_equal(q.context, 1368ULL << 20);
    char path[1024];
    assert_int_equal(md_model_load(data_path("predict/llama.json", path, sizeof path), &m, &e), MD_OK);
    assert_int_equal(md_predict(&m, 1, 1 << 20, MD_OPT_SGD, MD_FP32, &p, &e), MD_E_ARG);
    assert_non_null(strstr(e.msg, "positions"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_grid),
        cmocka_unit_test(test_param_counts),
        cmocka_unit_test(test_seed_presets),
        cmocka_unit_test(test_validate_hf_run),
        cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* test_predict.c - predicted peaks against 464 steady-state training
 * steps measured on an H200, parameter counts against transformers' own,
 * the seed presets against the seed script's counts, a real memdiag run
 * validated component by component, and calibration files. */
#include <jansson.h>
#include <math.h>
#include "../../src/predict/arch.h"
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

static md_optimizer optimizer_of(const char *s)
{
    return !strcmp(s, "adamw") ? MD_OPT_ADAMW : !strcmp(s, "adam") ? MD_OPT_ADAM
           : !strcmp(s, "sgd-momentum") ? MD_OPT_SGD_MOMENTUM : MD_OPT_SGD;
}

static md_precision precision_of(const char *s)
{
    return !strcmp(s, "bf16-pure") ? MD_BF16_PURE : !strcmp(s, "fp32") ? MD_FP32
           : !strcmp(s, "fp16-autocast") ? MD_FP16_AUTOCAST : MD_BF16_AUTOCAST;
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The row's training options: gradient checkpointing, eager attention,
 * LoRA rank and targets (module names as peft takes them), data
 * parallelism and its world size, layer streaming's buffers. */
static void options_of(json_t *o, const md_model *m, md_step_config *st)
{
    if (!json_is_object(o))
        return;
    st->checkpointing = json_object_get(o, "gc") != NULL;
    st->eager = json_is_string(json_object_get(o, "attn")) &&
                !strcmp(json_string_value(json_object_get(o, "attn")), "eager");
    st->lora_rank = json_integer_value(json_object_get(o, "lora"));
    char list[256] = "";
    size_t i, bad;
    json_t *t;
    json_array_foreach(json_object_get(o, "targets"), i, t)
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? "," : "",
                 json_string_value(t));
    if (st->lora_rank)
        assert_int_equal(md_lora_targets(list, m, &st->lora_targets, &bad), 0);
    const char *par = json_string_value(json_object_get(o, "parallel"));
    for (int k = 0; par && k <= MD_PAR_FSDP_NO_RESHARD; k++)
        if (!strcmp(par, md_parallel_name((md_parallel)k)))
            st->parallel = (md_parallel)k;
    assert_true(!par || st->parallel != MD_PAR_NONE);
    st->world = (int)json_integer_value(json_object_get(o, "world"));
    st->stream_buffers = (int)json_integer_value(json_object_get(o, "stream"));
    st->bucket_mb = (int)json_integer_value(json_object_get(o, "bucket_mb"));
}

/* One measured step (a line of tests/data/predict/measured/): the config's
 * parameter count must be transformers' exactly, the peak within the
 * grid's tolerance, the step's starting memory within 64 MiB or 1 %.
 * Returns |pred/real - 1|. */
static double check_row(json_t *r, const char *file, double tolerance)
{
    const char *arch = json_string_value(json_object_get(r, "arch"));
    long long batch = json_integer_value(json_object_get(r, "batch"));
    long long seq = json_integer_value(json_object_get(r, "seq"));
    const char *opt = json_string_value(json_object_get(r, "optimizer"));
    const char *prec = json_string_value(json_object_get(r, "precision"));
    double real = (double)json_integer_value(json_object_get(r, "peak_allocated"));
    double before = (double)json_integer_value(json_object_get(r, "allocated_before_step"));
    char *cfg = json_dumps(json_object_get(r, "config"), 0);
    md_model m;
    md_prediction p;
    md_err e;
    assert_int_equal(md_model_load_mem(cfg, strlen(cfg), arch, &m, &e), MD_OK);
    free(cfg);
    md_step_config step = {.batch = batch, .seq = seq, .optimizer = optimizer_of(opt),
                           .precision = precision_of(prec)};
    options_of(json_object_get(r, "options"), &m, &step);
    step.rank = (int)json_integer_value(json_object_get(r, "rank")); /* 0 where absent */
    assert_int_equal(md_predict(&m, &step, &p, &e), MD_OK);
    /* transformers' (and peft's) counts: every parameter, and the trainable */
    long long want = json_integer_value(json_object_get(r, "params"));
    long long got = md_model_params(&m) + (step.lora_rank ? p.trainable : 0);
    json_t *tr = json_object_get(r, "trainable");
    if (got != want || (tr && json_integer_value(tr) != p.trainable))
        fail_msg("%s %s: %lld parameters (%lld trainable), measured %lld (%lld)", file, arch, got,
                 (long long)p.trainable, want, tr ? (long long)json_integer_value(tr) : -1LL);
    assert_true(p.peak_known);
    double ratio = (double)p.peak / real;
    const md_breakdown *b = &p.at_peak; /* the breakdown is the peak, whole */
    assert_int_equal(b->weights + b->gradients + b->optimizer_state + b->activations + b->logits +
                         b->transient + b->workspace + b->inputs + b->buckets + b->rounding,
                     p.peak);
    json_t *mr = json_object_get(r, "max_reserved"); /* the reserved envelope holds */
    if (json_object_get(r, "reserved_note")) /* a reserve that is not the step's (the row says why) */
        mr = NULL;
    if (mr && (double)json_integer_value(mr) > (double)p.reserved_high)
        fail_msg("%s %s %lldx%lld: reserved %.1f MiB above the predicted high end %.1f", file,
                 arch, batch, seq, (double)json_integer_value(mr) / 1048576,
                 (double)p.reserved_high / 1048576);
    double slack = fmax(64.0 * 1048576, 0.01 * before); /* allocator rounding */
    if (fabs(ratio - 1) > tolerance || fabs((double)p.floor - before) > slack)
        fail_msg("%s %s %lldx%lld %s %s: peak %.1f MiB measured %.1f (%.4f); start %.1f measured %.1f",
                 file, arch, batch, seq, opt, prec, (double)p.peak / 1048576, real / 1048576, ratio,
                 (double)p.floor / 1048576, before / 1048576);
    return fabs(ratio - 1);
}

/* Every measured grid: each row within its tolerance (2 %; the options
 * grids 2.5 % and, held out, 6 %), each grid's median within 0.5 %
 * (dist, dist_final: one row per rank of 2-GPU DDP, ZeRO-1 and FSDP;
 * newarch, newarch_final: gemma3_text and olmo2; newarch_options, their
 * options held out: 7 %; neox, neox_final: gpt_neox, held out 2.5 %; optphi,
 * optphi_final: opt and phi, held out 3.5 %; llama_kin: granite, smollm3;
 * layernorm_gc: checkpointing on gpt_neox, opt, phi; moe, moe_final: mixtral;
 * phi_dropout: phi-2's resid_pdrop; moe2, moe2_final: qwen3_moe and qwen2_moe;
 * moe_gc: checkpointing on the mixtures of experts)
 * (docs/predict-validation.md has the table). */
static void test_measured_grids(void **st)
{
    (void)st;
    static const char *const files[] = {"grid", "grid_extra", "heldout", "real", "final",
                                        "options", "options_final", "dist", "dist_final",
                                        "dist_more", "stream", "newarch", "newarch_final",
                                        "newarch_options", "neox", "neox_final", "optphi",
                                        "optphi_final", "llama_kin", "layernorm_gc", "moe",
                                        "moe_final", "phi_dropout", "moe2", "moe2_final",
                                        "moe_gc"};
    static const double tolerance[] = {0.02, 0.02, 0.02, 0.02, 0.02, 0.025, 0.06, 0.02, 0.02,
                                       0.02, 0.02, 0.02, 0.02, 0.07, 0.02, 0.025, 0.02, 0.035,
                                       0.02, 0.02, 0.02, 0.02, 0.02, 0.02, 0.02, 0.02};
    int total = 0;
    for (size_t k = 0; k < sizeof files / sizeof files[0]; k++) {
        char rel[128], p[1024], line[16384];
        snprintf(rel, sizeof rel, "predict/measured/%s.jsonl", files[k]);
        FILE *f = fopen(data_path(rel, p, sizeof p), "r");
        assert_non_null(f);
        double err[512];
        int n = 0;
        while (fgets(line, sizeof line, f)) {
            json_error_t je;
            json_t *r = json_loads(line, 0, &je);
            assert_non_null(r);
            if (json_object_get(r, "peak_allocated") && n < 512)
                err[n++] = check_row(r, files[k], tolerance[k]);
            json_decref(r);
        }
        fclose(f);
        assert_true(n >= 12);
        qsort(err, (size_t)n, sizeof err[0], by_value);
        if (err[n / 2] > 0.005)
            fail_msg("%s: median |pred/real - 1| %.4f", files[k], err[n / 2]);
        total += n;
    }
    assert_true(total >= 1300);
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
    assert_int_equal(rows, 16);
}

static void add_elems(void *ctx, int64_t count, int64_t elems);

/* Hub configs as transformers 4.x saved them (Qwen's num_experts, no
 * qkv_bias key: qwen2_moe's q/k/v have biases): Qwen3-30B-A3B and
 * Qwen1.5-MoE-A2.7B, whose totals the model cards round to 30.5B and 14.3B;
 * the layer layout is the one checked exactly against transformers above. */
static void test_hub_moe_counts(void **st)
{
    (void)st;
    static const struct { const char *json; long long params; } hub[] = {
        {"{\"model_type\":\"qwen3_moe\",\"hidden_size\":2048,\"intermediate_size\":6144,"
         "\"moe_intermediate_size\":768,\"num_experts\":128,\"num_experts_per_tok\":8,"
         "\"num_hidden_layers\":48,\"num_attention_heads\":32,\"num_key_value_heads\":4,"
         "\"head_dim\":128,\"vocab_size\":151936,\"max_position_embeddings\":40960,"
         "\"tie_word_embeddings\":false,\"decoder_sparse_step\":1,\"mlp_only_layers\":[],"
         "\"norm_topk_prob\":true,\"use_sliding_window\":false,\"sliding_window\":null}",
         30532122624LL},
        {"{\"model_type\":\"qwen2_moe\",\"hidden_size\":2048,\"intermediate_size\":5632,"
         "\"moe_intermediate_size\":1408,\"shared_expert_intermediate_size\":5632,"
         "\"num_experts\":60,\"num_experts_per_tok\":4,\"num_hidden_layers\":24,"
         "\"num_attention_heads\":16,\"num_key_value_heads\":16,\"vocab_size\":151936,"
         "\"max_position_embeddings\":8192,\"tie_word_embeddings\":false,"
         "\"decoder_sparse_step\":1,\"norm_topk_prob\":false,\"use_sliding_window\":false,"
         "\"sliding_window\":32768}",
         14315784192LL},
    };
    for (size_t i = 0; i < sizeof hub / sizeof hub[0]; i++) {
        md_model m;
        md_err e;
        assert_int_equal(md_model_load_mem(hub[i].json, strlen(hub[i].json), "hub", &m, &e), MD_OK);
        assert_int_equal(md_model_params(&m), hub[i].params);
        int64_t sum = 0;
        md_arch_params(&m, add_elems, &sum);
        assert_int_equal(sum, hub[i].params);
        assert_int_equal(m.sliding_window, 0); /* use_sliding_window false */
    }
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

static void add_elems(void *ctx, int64_t count, int64_t elems)
{
    *(int64_t *)ctx += count * elems;
}

/* The tensors predict sizes weights, gradients and state from add up to
 * the parameter count, for every architecture and the seed presets. */
static void test_param_tensors(void **st)
{
    (void)st;
    static const char *const specs[] = {"gpt2", "llama", "mistral", "qwen2", "qwen3", "gemma",
                                        "gemma2", "gemma3_text", "olmo2", "phi3", "gpt_neox",
                                        "opt", "phi", "mixtral", "qwen3_moe", "qwen2_moe",
                                        "seed:small", "seed:medium"};
    for (size_t k = 0; k < sizeof specs / sizeof specs[0]; k++) {
        char rel[64], p[1024];
        md_model m;
        md_err e;
        snprintf(rel, sizeof rel, "predict/%s.json", specs[k]);
        const char *spec = strncmp(specs[k], "seed", 4) ? data_path(rel, p, sizeof p) : specs[k];
        assert_int_equal(md_model_load(spec, &m, &e), MD_OK);
        int64_t n = 0;
        md_arch_params(&m, add_elems, &n);
        if (n != md_model_params(&m))
            fail_msg("%s: tensors hold %lld elements, parameters %lld", specs[k], (long long)n,
                     (long long)md_model_params(&m));
    }
}

/* DDP with gradient_as_bucket_view, per rank, against the seed exercise's
 * DDP run (beta, 2 ranks on H200, rank 0 with 6 extra samples; the same
 * peaks as tests/data/runs/ddp): buckets live from construction, the
 * gradients are views into them. */
static void test_ddp_peaks(void **st)
{
    (void)st;
    static const struct { int64_t batch; double mib; } ranks[] = {{8, 421.17}, {2, 255.98}};
    md_model m;
    md_prediction p;
    md_err e;
    assert_int_equal(md_model_load("seed:small", &m, &e), MD_OK);
    for (size_t k = 0; k < 2; k++) {
        md_step_config step = {.batch = ranks[k].batch, .seq = 256, .optimizer = MD_OPT_ADAMW,
                               .precision = MD_FP32, .parallel = MD_PAR_DDP_VIEW};
        assert_int_equal(md_predict(&m, &step, &p, &e), MD_OK);
        double ratio = md_mib(p.peak) / ranks[k].mib;
        if (ratio < 0.98 || ratio > 1.02)
            fail_msg("rank %zu: predicted %.1f MiB, measured %.1f", k, md_mib(p.peak), ranks[k].mib);
        assert_true(p.buckets > 33ULL << 20 && p.gradients == 0 && p.caveat == NULL);
    }
    md_step_config plain = {.batch = 2, .seq = 256, .optimizer = MD_OPT_ADAMW,
                            .precision = MD_FP32, .parallel = MD_PAR_DDP};
    assert_int_equal(md_predict(&m, &plain, &p, &e), MD_OK);
    /* measured since (dist.jsonl): buckets beside the gradients */
    double gap = fabs((double)p.buckets - (double)p.gradients); /* rounded per bucket */
    assert_true(p.caveat == NULL && p.gradients > 0 && gap < 0.02 * (double)p.gradients + 2e6);
}

/* ZeRO-1, FSDP and layer streaming: what is refused, and what no
 * measurement covers is said (the measured rows are in
 * test_measured_grids). */
static void test_parallel_settings(void **st)
{
    (void)st;
    md_model m;
    md_prediction p;
    md_err e;
    char path[1024];
    assert_int_equal(md_model_load(data_path("predict/qwen2.json", path, sizeof path), &m, &e),
                     MD_OK);
    md_step_config c = {.batch = 2, .seq = 512, .optimizer = MD_OPT_ADAMW, .precision = MD_FP32,
                        .parallel = MD_PAR_FSDP, .world = 1};
    assert_int_equal(md_predict(&m, &c, &p, &e), MD_E_ARG); /* one rank shards nothing */
    c.parallel = MD_PAR_ZERO1, c.world = 2, c.rank = 2;
    assert_int_equal(md_predict(&m, &c, &p, &e), MD_E_ARG); /* no such rank */
    c.rank = -1, c.lora_rank = 8, c.lora_targets = MD_LORA_Q;
    assert_int_equal(md_predict(&m, &c, &p, &e), MD_E_ARG); /* not modeled */
    c.lora_rank = 0;
    assert_int_equal(md_predict(&m, &c, &p, &e), MD_OK);
    uint64_t most = p.optimizer_state;
    c.rank = 1; /* the embedding alone went to rank 0 (largest first) */
    assert_int_equal(md_predict(&m, &c, &p, &e), MD_OK);
    assert_true(p.optimizer_state < most && p.caveat == NULL);
    c.parallel = MD_PAR_FSDP, c.world = 8;
    assert_int_equal(md_predict(&m, &c, &p, &e), MD_OK);
    assert_non_null(p.caveat); /* measured on 2 ranks only */
    assert_true(p.gathered > 0 && p.weights < (uint64_t)md_model_params(&m) * 4 / 7);
    md_step_config sc = {.batch = 1, .seq = 2048, .optimizer = MD_OPT_ADAMW,
                         .precision = MD_BF16_PURE, .stream_buffers = 2};
    assert_int_equal(md_predict(&m, &sc, &p, &e), MD_E_ARG); /* streaming is LoRA's */
    sc.lora_rank = 8, sc.lora_targets = MD_LORA_Q | MD_LORA_V;
    assert_int_equal(md_predict(&m, &sc, &p, &e), MD_OK);
    uint64_t two = p.weights;
    sc.stream_buffers = 3; /* one more layer's weights, nothing else */
    assert_int_equal(md_predict(&m, &sc, &p, &e), MD_OK);
    uint64_t layer = (uint64_t)md_arch_layer_params(&m) * 2;
    assert_true(p.weights - two >= layer && p.weights - two < layer + (2 << 20));
}

/* The seed presets' peaks against the seed exercise's own measurements
 * (maximum peak of the steady steps, torch's counters, H200): alpha SGD,
 * beta AdamW, small and medium, fp32, batch 2. */
static void test_seed_peaks(void **st)
{
    (void)st;
    static const struct { const char *preset; int64_t seq; md_optimizer opt; double mib; } runs[] = {
        {"seed:small", 256, MD_OPT_SGD, 155.16}, {"seed:medium", 512, MD_OPT_SGD, 457.52},
        {"seed:small", 256, MD_OPT_ADAMW, 239.50}, {"seed:medium", 512, MD_OPT_ADAMW, 671.71}};
    for (size_t k = 0; k < sizeof runs / sizeof runs[0]; k++) {
        md_model m;
        md_prediction p;
        md_err e;
        assert_int_equal(md_model_load(runs[k].preset, &m, &e), MD_OK);
        md_step_config step = {.batch = 2, .seq = runs[k].seq, .optimizer = runs[k].opt,
                               .precision = MD_FP32};
        assert_int_equal(md_predict(&m, &step, &p, &e), MD_OK);
        double ratio = md_mib(p.peak) / runs[k].mib;
        if (!p.peak_known || ratio < 0.96 || ratio > 1.02)
            fail_msg("%s %s: predicted %.1f MiB, measured %.1f", runs[k].preset,
                     runs[k].opt == MD_OPT_SGD ? "sgd" : "adamw", md_mib(p.peak), runs[k].mib);
    }
}

/* The prediction next to the real HF run it describes (tests/data/runs/hf,
 * examples/hf_train.py --model llama --batch 8 --seq 512, AdamW, fp32;
 * `loss = model(...).loss`: the output is dropped). */
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
    md_step_config step = {.batch = 8, .seq = 512, .optimizer = MD_OPT_ADAMW, .precision = MD_FP32,
                           .drop_outputs = 1};
    assert_int_equal(md_predict(&m, &step, &pr, &e), MD_OK);
    assert_int_equal(md_snapshot_load(data_path("runs/hf/rank0.pickle.xz", p, sizeof p), &s, &e), MD_OK);
    assert_int_equal(md_replay_run(s, 0, &r, &e), MD_OK);
    assert_int_equal(md_analyze(s, r, &a, &e), MD_OK);
    assert_int_equal(md_predict_validate(&pr, r, a, &v, &e), MD_OK);
    assert_int_equal(v.step, 4);
    for (int c = 0; c < MD_VAL_COUNT; c++) {
        double ratio = (double)v.predicted[c] / (double)v.measured[c];
        if (ratio < 0.985 || ratio > 1.001)
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

/* Against a seed report's phase samples: only the floor and the peak are
 * measured there; the steady step is the last, its start the previous
 * step's after_clear_gradients. */
static void test_validate_samples(void **st)
{
    (void)st;
    char p[1024];
    md_model m;
    md_prediction pr;
    md_validation v;
    md_sample_rank *ranks;
    size_t n;
    md_err e;
    assert_int_equal(md_model_load("seed:small", &m, &e), MD_OK);
    md_step_config step = {.batch = 2, .seq = 256, .optimizer = MD_OPT_ADAMW,
                           .precision = MD_FP32};
    assert_int_equal(md_predict(&m, &step, &pr, &e), MD_OK);
    assert_int_equal(md_seedjson_load(data_path("seed-exercise/beta-small.json", p, sizeof p),
                                      &ranks, &n, &e), MD_OK);
    assert_int_equal(md_predict_validate_samples(&pr, &ranks[0], &v, &e), MD_OK);
    assert_int_equal(v.step, 5);
    assert_true(fabs(md_mib(v.measured[MD_VAL_PEAK]) - 239.50) < 0.01);
    assert_true(fabs(md_mib(v.measured[MD_VAL_FLOOR]) - 164.8) < 0.1);
    assert_false(md_validation_measured(&v, MD_VAL_WEIGHTS));
    assert_true(md_validation_measured(&v, MD_VAL_PEAK));
    /* no step after the first: said, not guessed */
    ranks[0].nsamples = 7; /* the model, optimizer, input and step 0 only */
    assert_int_equal(md_predict_validate_samples(&pr, &ranks[0], &v, &e), MD_E_SCHEMA);
    md_sample_ranks_free(ranks, n);
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
        "{\"model_type\":\"mixtral\",\"vocab_size\":100,\"hidden_size\":64,"
        "\"intermediate_size\":64,\"num_hidden_layers\":2,\"num_attention_heads\":4,"
        "\"num_local_experts\":4,\"num_experts_per_tok\":5}",
        "{\"model_type\":\"mixtral\",\"vocab_size\":100,\"hidden_size\":1048576,"
        "\"intermediate_size\":4194304,\"num_hidden_layers\":4096,\"num_attention_heads\":4,"
        "\"num_local_experts\":4096,\"num_experts_per_tok\":2}",
        "[\"llama\"]",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(md_model_load_mem(bad[i], strlen(bad[i]), "bad", &m, &e), MD_E_SCHEMA);
    /* a multimodal wrapper: pointed at its text model */
    const char *mm = "{\"model_type\":\"gemma3\",\"text_config\":{\"model_type\":\"gemma3_text\"}}";
    assert_int_equal(md_model_load_mem(mm, strlen(mm), "x", &m, &e), MD_E_SCHEMA);
    assert_non_null(strstr(e.msg, "text_config (model_type 'gemma3_text')"));
    /* layouts of a supported model_type that are not modeled: named, refused */
    static const char *const unmodeled[] = {
        "{\"model_type\":\"opt\",\"vocab_size\":50272,\"hidden_size\":1024,\"ffn_dim\":4096,"
        "\"num_hidden_layers\":2,\"num_attention_heads\":16,\"word_embed_proj_dim\":512,"
        "\"do_layer_norm_before\":false}", /* opt-350m */
        "{\"model_type\":\"phi\",\"vocab_size\":51200,\"hidden_size\":1024,"
        "\"intermediate_size\":4096,\"num_hidden_layers\":2,\"num_attention_heads\":16,"
        "\"qk_layernorm\":true}",
        "{\"model_type\":\"phi\",\"vocab_size\":51200,\"hidden_size\":1024,"
        "\"intermediate_size\":4096,\"num_hidden_layers\":2,\"num_attention_heads\":16,"
        "\"num_key_value_heads\":4}",
        /* Qwen MoE with dense MLP layers (every other layer, or listed) */
        "{\"model_type\":\"qwen2_moe\",\"vocab_size\":1000,\"hidden_size\":64,"
        "\"intermediate_size\":128,\"num_hidden_layers\":4,\"num_attention_heads\":4,"
        "\"decoder_sparse_step\":2}",
        "{\"model_type\":\"qwen3_moe\",\"vocab_size\":1000,\"hidden_size\":64,"
        "\"intermediate_size\":128,\"num_hidden_layers\":4,\"num_attention_heads\":4,"
        "\"mlp_only_layers\":[0]}",
    };
    for (size_t i = 0; i < sizeof unmodeled / sizeof unmodeled[0]; i++) {
        assert_int_equal(md_model_load_mem(unmodeled[i], strlen(unmodeled[i]), "x", &m, &e),
                         MD_E_SCHEMA);
        assert_non_null(strstr(e.msg, "is not modeled"));
    }
    /* phi-2's resid_pdrop 0.1: a bool mask per dropout, two a layer, as OPT's */
    const char *phi0 = "{\"model_type\":\"phi\",\"vocab_size\":51200,\"hidden_size\":1024,"
                       "\"intermediate_size\":4096,\"num_hidden_layers\":4,"
                       "\"num_attention_heads\":16,\"resid_pdrop\":0.0}";
    const char *phi2 = "{\"model_type\":\"phi\",\"vocab_size\":51200,\"hidden_size\":1024,"
                       "\"intermediate_size\":4096,\"num_hidden_layers\":4,"
                       "\"num_attention_heads\":16,\"resid_pdrop\":0.1}";
    md_step_config st1 = {.batch = 2, .seq = 1024, .optimizer = MD_OPT_SGD, .precision = MD_FP32};
    md_prediction p0, p2;
    assert_int_equal(md_model_load_mem(phi0, strlen(phi0), "x", &m, &e), MD_OK);
    assert_int_equal(md_predict(&m, &st1, &p0, &e), MD_OK);
    assert_int_equal(md_model_load_mem(phi2, strlen(phi2), "x", &m, &e), MD_OK);
    assert_int_equal(md_predict(&m, &st1, &p2, &e), MD_OK);
    assert_true(p2.activations == p0.activations + 2ULL * 1024 * 2048 * 4); /* 2h x T x L */
    /* eager attention and LoRA are not modeled for the LayerNorm families */
    char optcfg[1024];
    assert_int_equal(md_model_load(data_path("predict/opt.json", optcfg, sizeof optcfg), &m, &e),
                     MD_OK);
    md_step_config eager = {.batch = 1, .seq = 128, .optimizer = MD_OPT_SGD, .precision = MD_FP32,
                            .eager = 1};
    assert_int_equal(md_predict(&m, &eager, &p, &e), MD_E_ARG);
    assert_non_null(strstr(e.msg, "not modeled for opt"));
    const char *gpt2 = "{\"model_type\":\"gpt2\",\"vocab_size\":50257}"; /* defaults: gpt2 small */
    assert_int_equal(md_model_load_mem(gpt2, strlen(gpt2), "gpt2", &m, &e), MD_OK);
    assert_int_equal(md_model_params(&m), 124439808);
    /* the context the verdict adds is the probe's on the H200, which a
     * process running the grid's models also held (bench/context_growth.py) */
    md_prediction q;
    md_step_config small = {.batch = 1, .seq = 128, .optimizer = MD_OPT_SGD, .precision = MD_FP32};
    assert_int_equal(md_predict(&m, &small, &q, &e), MD_OK);
    assert_int_equal(q.context, 806158336);
    char path[1024];
    assert_int_equal(md_model_load(data_path("predict/llama.json", path, sizeof path), &m, &e), MD_OK);
    md_step_config huge = {.batch = 1, .seq = 1 << 20, .optimizer = MD_OPT_SGD,
                           .precision = MD_FP32};
    assert_int_equal(md_predict(&m, &huge, &p, &e), MD_E_ARG);
    assert_non_null(strstr(e.msg, "positions"));
    /* LoRA on the seed presets is not modeled, and said */
    assert_int_equal(md_model_load("seed:small", &m, &e), MD_OK);
    md_step_config seed_lora = {.batch = 1, .seq = 128, .optimizer = MD_OPT_SGD,
                                .precision = MD_FP32, .lora_rank = 8, .lora_targets = MD_LORA_Q};
    assert_int_equal(md_predict(&m, &seed_lora, &p, &e), MD_E_ARG);
    /* LoRA targets a model does not have are refused, naming the model */
    assert_int_equal(md_model_load(data_path("predict/gpt2.json", path, sizeof path), &m, &e), MD_OK);
    md_step_config lora = {.batch = 1, .seq = 128, .optimizer = MD_OPT_ADAMW, .precision = MD_FP32,
                           .lora_rank = 16, .lora_targets = MD_LORA_GATE};
    assert_int_equal(md_predict(&m, &lora, &p, &e), MD_E_ARG);
    assert_non_null(strstr(e.msg, "gpt2"));
}

/* The probe's file from the H200 equals the shipped defaults (but for the
 * context: a whole training process loads more kernels than the probe);
 * odd values are refused with the key's name. */
static void test_calibration(void **st)
{
    (void)st;
    char p[1024];
    md_calibration c, d;
    md_err e;
    md_calibration_default(&d);
    assert_int_equal(md_calibration_load(data_path("predict/calibration-h200.json", p, sizeof p), &c,
                                         &e), MD_OK);
    assert_string_equal(c.gpu, "NVIDIA H200");
    assert_int_equal(c.workspace, d.workspace);
    assert_true(c.loss_per_logit == d.loss_per_logit && c.math_per_score == d.math_per_score);
    assert_true(c.context == d.context); /* the shipped defaults are the probe's */
    static const char *const bad[] = {
        "{\"cuda_context_bytes\": 1}",
        "{\"memdiag_calibration\": 1, \"cuda_context_bytes\": -5}",
        "{\"memdiag_calibration\": 1, \"loss_bytes_per_logit\": 1e300}",
        "{\"memdiag_calibration\": 1, \"sdpa_math_bytes_per_score\": \"4\"}",
        "[1]", "{",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_not_equal(md_calibration_load_mem(bad[i], strlen(bad[i]), "bad", &c, &e), MD_OK);
    /* a calibrated loss cost moves the loss-backward peak by its share (three
     * tensors, each rounded to the allocator's 2 MiB segments) */
    md_model m;
    md_prediction a, b;
    assert_int_equal(md_model_load(data_path("predict/llama.json", p, sizeof p), &m, &e), MD_OK);
    md_step_config step = {.batch = 4, .seq = 1024, .optimizer = MD_OPT_ADAMW,
                           .precision = MD_BF16_AUTOCAST, .calibration = &d};
    assert_int_equal(md_predict(&m, &step, &a, &e), MD_OK);
    c = d, c.loss_per_logit = 15.0, step.calibration = &c;
    assert_int_equal(md_predict(&m, &step, &b, &e), MD_OK);
    assert_int_equal(a.phase, MD_PHASE_LOSS_BACKWARD);
    uint64_t share = 3ULL * 4 * 1024 * 32000;
    assert_true(b.peak - a.peak >= share && b.peak - a.peak <= share + (6ULL << 20));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_measured_grids),
        cmocka_unit_test(test_calibration),
        cmocka_unit_test(test_param_counts),
        cmocka_unit_test(test_hub_moe_counts),
        cmocka_unit_test(test_seed_presets),
        cmocka_unit_test(test_param_tensors),
        cmocka_unit_test(test_seed_peaks),
        cmocka_unit_test(test_ddp_peaks),
        cmocka_unit_test(test_parallel_settings),
        cmocka_unit_test(test_validate_hf_run),
        cmocka_unit_test(test_validate_samples),
        cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

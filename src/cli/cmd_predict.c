/* cmd_predict.c - `memdiag predict`: the peak memory of a training step
 * before running it, with its breakdown, a fits verdict for a GPU, and
 * --validate against a measured run. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include "../util/util.h"
#include "cli.h"

static void help(void)
{
    printf("usage: memdiag predict --model CONFIG|PRESET --batch B --seq S [--optimizer O]\n"
           "                       [--precision P] [--checkpointing] [--attention sdpa|eager]\n"
           "                       [--lora RANK[:MODULES]] [--outputs kept|dropped]\n"
           "                       [--parallel STRATEGY [--world N] [--rank R] [--bucket-mb M]]\n"
           "                       [--stream-layers K]\n"
           "                       [--gpu NAME|SIZE] [--calibration FILE]\n"
           "                       [--validate RUN] [--json]\n\n"
           "  --model      a Hugging Face config.json (gpt2, llama, mistral, qwen2, qwen3, gemma,\n"
           "               gemma2, gemma3_text, olmo2, phi3, gpt_neox, opt, phi, granite,\n"
           "               smollm3, mixtral, qwen3_moe, qwen2_moe) or seed:small / seed:medium\n"
           "  --optimizer  sgd, sgd-momentum, adam, adamw (default adamw)\n"
           "  --precision  fp32, bf16-autocast, fp16-autocast, bf16-pure (default fp32)\n"
           "  --gpu        H200, H100, A100-80GB, A100-40GB, L40S, A10G, 4090, or a size (80GB)\n"
           "  --lora RANK[:MODULES]  LoRA adapters (peft, dropout 0) on a frozen base; MODULES\n"
           "               q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj (phi3:\n"
           "               qkv_proj, gate_up_proj; gpt2: c_attn) or all-linear; default peft's\n"
           "  --parallel   one rank of data parallelism (the batch is the rank's): ddp,\n"
           "               ddp-bucket-view (gradient_as_bucket_view=True), zero1\n"
           "               (ZeroRedundancyOptimizer over DDP), fsdp (FSDP2 fully_shard per\n"
           "               decoder layer and the model), fsdp-no-reshard\n"
           "               (reshard_after_forward=False); zero3 and zero2 are fsdp and\n"
           "               fsdp-no-reshard (torch's); --ddp is --parallel ddp\n"
           "  --bucket-mb M  DDP's bucket_cap_mb (default 25)\n"
           "  --world N    ranks (zero1, fsdp); --rank R: which rank (zero1 shares the\n"
           "               parameters unevenly; default the rank holding the most)\n"
           "  --stream-layers K  layer streaming (seed 001): the decoder layers' frozen\n"
           "               weights in host memory, K one-layer GPU buffers; with --lora\n"
           "  --checkpointing  gradient checkpointing of every decoder layer\n"
           "               (model.gradient_checkpointing_enable())\n"
           "  --attention  sdpa (default) or eager (attn_implementation=\"eager\")\n"
           "  --outputs    kept (default: `out = model(...)` lives through the step) or dropped\n"
           "               (`loss = model(...).loss`, as the Hugging Face Trainer does)\n"
           "  --calibration  constants measured by `memdiag probe` on your GPU (default: H200)\n"
           "  --validate   a measured run of this model and shape (memdiag run directory or a\n"
           "               snapshot): each predicted component next to the measured one\n\n"
           "Predicts torch.cuda.max_memory_allocated() of a steady-state training step (after\n"
           "the first: optimizer state exists) of a causal LM trained on its own labels with\n"
           "SDPA attention, when it happens, and what is allocated then. The step is\n"
           "`out = model(input_ids=x, labels=x); out.loss.backward(); opt.step();\n"
           "opt.zero_grad()` (see --outputs), on one GPU or one rank (--parallel). Checked\n"
           "against measured H200 steps (docs/predict-validation.md).\n");
}

static const struct { const char *name; double mib; } gpus[] = {
    {"H200", 143771}, {"H100", 81559}, {"A100-80GB", 81920}, {"A100-40GB", 40960},
    {"L40S", 46068}, {"A10G", 23028}, {"4090", 24564}, {"L4", 23034}};

/* "H100", "80GB", "24GiB", "81559MiB" -> MiB; <= 0 if unknown */
static double gpu_mib(const char *s)
{
    for (size_t i = 0; i < sizeof gpus / sizeof gpus[0]; i++)
        if (!strcasecmp(s, gpus[i].name))
            return gpus[i].mib;
    char *end;
    double v = strtod(s, &end);
    if (end == s || v <= 0)
        return -1;
    if (!strcasecmp(end, "GB"))
        return v * 1e9 / 1048576.0;
    if (!strcasecmp(end, "GiB"))
        return v * 1024;
    if (!strcasecmp(end, "MiB") || !*end)
        return v;
    return -1;
}

static int pick(const char *v, const char *const *names, int n)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(v, names[i]))
            return i;
    return -1;
}

static const char *const precision_notes[MD_BF16_PURE + 1] = {
    [MD_FP16_AUTOCAST] = "fp16 autocast is counted as bf16 autocast (same sizes; GradScaler's "
                         "few small buffers not counted)"};

/* The breakdown at the peak, largest first in the reader's eye: name,
 * bytes, what it is. */
typedef struct { const char *name, *json, *what; uint64_t bytes; } part;

static int parts_of(const md_prediction *p, part out[10])
{
    const md_breakdown *b = &p->at_peak;
    part all[] = {
        {"weights", "weights", "", b->weights},
        {"gradients", "gradients", "", b->gradients},
        {"optimizer", "optimizer_state", "", b->optimizer_state},
        {"activations", "saved_activations", "saved for backward", b->activations},
        {"logits/loss", "logits_loss", "logits the output keeps, the loss and its gradients",
         b->logits},
        {"transient", "transient_at_peak", "temporaries of the moment", b->transient},
        {"workspaces", "library_workspaces", "cuBLAS, 2 x 32 MiB on Hopper", b->workspace},
        {"inputs", "inputs", "input ids (labels share them)", b->inputs},
        {"buckets", "ddp_buckets", "DDP's gradient buckets", b->buckets},
        {"rounding", "allocator_rounding", "the caching allocator's block sizes", b->rounding},
    };
    for (int i = 0; i < 10; i++)
        out[i] = all[i];
    return 10;
}

/* fits: even the high end of reserved fits; tight: the peak fits but
 * fragmentation may not; no: the peak itself does not */
typedef enum { FIT_YES, FIT_TIGHT, FIT_NO, FIT_UNKNOWN } fit_kind;
static const char *const fit_names[] = {"yes", "tight", "no", "unknown"};

static fit_kind fit(const md_prediction *p, double gpu)
{
    double ctx = md_mib(p->context);
    if (!p->peak_known)
        return md_mib(p->floor_with_grads) + ctx > gpu ? FIT_NO : FIT_UNKNOWN;
    if (md_mib(p->peak) + ctx > gpu)
        return FIT_NO;
    return md_mib(p->reserved_high) + ctx > gpu ? FIT_TIGHT : FIT_YES;
}

static void verdict(const md_prediction *p, double gpu, const char *gname)
{
    fit_kind f = fit(p, gpu);
    double ctx = md_mib(p->context);
    if (f == FIT_UNKNOWN)
        printf("verdict       the floor fits %s (%.0f MiB); the peak is not predicted\n", gname, gpu);
    else if (f == FIT_NO)
        printf("verdict       does not fit %s (%.0f MiB): short by %.1f MiB\n", gname, gpu,
               md_mib(p->peak_known ? p->peak : p->floor_with_grads) + ctx - gpu);
    else if (f == FIT_TIGHT)
        printf("verdict       tight on %s (%.0f MiB): the peak fits with %.1f MiB to spare, but\n"
               "              fragmentation can reserve up to %.1f MiB\n", gname, gpu,
               gpu - md_mib(p->peak) - ctx, md_mib(p->reserved_high));
    else
        printf("verdict       fits %s (%.0f MiB) with %.1f MiB headroom (%.0f%%) above the\n"
               "              high end of reserved\n", gname, gpu, gpu - md_mib(p->reserved_high) - ctx,
               100.0 * (gpu - md_mib(p->reserved_high) - ctx) / gpu);
}

static void text_parallel(const md_prediction *p, const md_step_config *st)
{
    printf("parallel      %s", md_parallel_name(st->parallel));
    if (st->parallel >= MD_PAR_ZERO1)
        printf(" over %d ranks", st->world);
    if (st->parallel == MD_PAR_ZERO1 && st->rank < 0)
        printf(", the rank holding the most optimizer state");
    else if (st->parallel == MD_PAR_ZERO1)
        printf(", rank %d", st->rank);
    if (p->gathered)
        printf("\n              %.1f MiB of all-gathered parameters at the peak (in transient)",
               md_mib(p->gathered));
    printf("\n");
}

static void text(const md_model *m, const md_prediction *p, const md_step_config *st,
                 double gpu, const char *gname)
{
    md_precision prec = st->precision;
    printf("model         %s: %lld parameters (%lld layers, hidden %lld, vocab %lld%s)\n", m->type,
           (long long)p->params, (long long)m->layers, (long long)m->hidden, (long long)m->vocab,
           m->tied ? ", tied embeddings" : "");
    if (st->checkpointing || st->eager)
        printf("training      %s%s%s\n", st->checkpointing ? "gradient checkpointing" : "",
               st->checkpointing && st->eager ? ", " : "", st->eager ? "eager attention" : "");
    if (st->parallel)
        text_parallel(p, st);
    if (st->stream_buffers)
        printf("streaming     %d one-layer buffers on the GPU; the decoder layers' frozen "
               "weights in host memory\n", st->stream_buffers);
    if (st->lora_rank)
        printf("LoRA          rank %lld: %lld trainable parameters, the base frozen\n",
               (long long)st->lora_rank, (long long)p->trainable);
    printf("floor         %10.1f MiB   allocated when a step starts (weights %.1f, optimizer "
           "%.1f,\n                             workspaces %.1f, inputs %.1f)\n",
           md_mib(p->floor), md_mib(p->weights), md_mib(p->optimizer_state),
           md_mib(p->workspace), md_mib(p->inputs));
    if (!p->peak_known) {
        printf("peak          not predicted: %s; %.1f MiB (floor + gradients) is a lower "
               "bound\n", p->unsupported, md_mib(p->floor_with_grads));
    } else {
        printf("peak          %10.1f MiB   max_memory_allocated of a steady-state step, at %s\n",
               md_mib(p->peak), md_step_phase_name(p->phase));
        part parts[10];
        int n = parts_of(p, parts);
        for (int i = 0; i < n; i++)
            if (parts[i].bytes)
                printf("  %-12s %10.1f MiB%s%s\n", parts[i].name, md_mib(parts[i].bytes),
                       *parts[i].what ? "   " : "", parts[i].what);
        printf("reserved      %10.1f MiB   estimated max_memory_reserved (up to %.1f)\n",
               md_mib(p->reserved), md_mib(p->reserved_high));
    }
    printf("context       %10.1f MiB   outside PyTorch (CUDA context, kernels; measured on an "
           "H200)\n", md_mib(p->context));
    if (p->peak_known)
        printf("device total  %10.1f MiB   reserved + context: what nvidia-smi will show\n",
               md_mib(p->device_total));
    if (precision_notes[prec])
        printf("note          %s\n", precision_notes[prec]);
    if (p->caveat)
        printf("note          %s\n", p->caveat);
    if (gpu > 0)
        verdict(p, gpu, gname);
}

static void json(const md_model *m, const md_prediction *p, const md_step_config *st,
                 double gpu)
{
    md_precision prec = st->precision;
    printf("{\"schema\":1,\"model\":{\"type\":\"%s\",\"parameters\":%lld,\"layers\":%lld,"
           "\"hidden\":%lld,\"vocab\":%lld,\"tied_embeddings\":%s},", m->type,
           (long long)p->params, (long long)m->layers, (long long)m->hidden, (long long)m->vocab,
           m->tied ? "true" : "false");
    printf("\"training\":{\"trainable_parameters\":%lld,\"checkpointing\":%s,\"attention\":\"%s\","
           "\"lora_rank\":%lld,\"outputs\":\"%s\",\"parallel\":\"%s\",\"world\":%d,"
           "\"rank\":%d,\"gathered_at_peak\":%llu,\"stream_buffers\":%d},", (long long)p->trainable,
           st->checkpointing ? "true" : "false", st->eager ? "eager" : "sdpa",
           (long long)st->lora_rank, st->drop_outputs ? "dropped" : "kept",
           md_parallel_name(st->parallel), st->parallel >= MD_PAR_ZERO1 ? st->world : 0,
           st->rank, (unsigned long long)p->gathered, st->stream_buffers);
    part parts[10];
    int n = parts_of(p, parts);
    printf("\"breakdown\":{");
    for (int i = 0; i < n; i++)
        printf("%s\"%s\":%llu", i ? "," : "", parts[i].json, (unsigned long long)parts[i].bytes);
    printf("},\"static\":{\"weights\":%llu,\"gradients\":%llu,\"optimizer_state\":%llu,"
           "\"library_workspaces\":%llu,\"inputs\":%llu,\"ddp_buckets\":%llu},",
           (unsigned long long)p->weights, (unsigned long long)p->gradients,
           (unsigned long long)p->optimizer_state, (unsigned long long)p->workspace,
           (unsigned long long)p->inputs, (unsigned long long)p->buckets);
    printf("\"cuda_context_bytes\":%llu,\"floor_bytes\":%llu,\"floor_with_gradients_bytes\":%llu,",
           (unsigned long long)p->context, (unsigned long long)p->floor,
           (unsigned long long)p->floor_with_grads);
    if (p->peak_known) {
        printf("\"peak_allocated_bytes\":%llu,\"peak_phase\":\"%s\",\"saved_activations_bytes\":%llu,"
               "\"loss_bytes_per_logit\":%.3f,\"reserved_bytes\":%llu,\"reserved_high_bytes\":%llu,"
               "\"device_total_bytes\":%llu,\"unsupported\":null",
               (unsigned long long)p->peak, md_step_phase_name(p->phase),
               (unsigned long long)p->activations, p->loss_bytes_per_logit,
               (unsigned long long)p->reserved, (unsigned long long)p->reserved_high,
               (unsigned long long)p->device_total);
    } else {
        printf("\"peak_allocated_bytes\":null,\"peak_phase\":null,\"unsupported\":");
        cli_json_string(stdout, p->unsupported);
    }
    printf(",\"note\":");
    if (precision_notes[prec] || p->caveat)
        cli_json_string(stdout, precision_notes[prec] ? precision_notes[prec] : p->caveat);
    else
        printf("null");
    printf(",\"caveat\":");
    if (p->caveat)
        cli_json_string(stdout, p->caveat);
    else
        printf("null");
    if (gpu > 0)
        printf(",\"gpu_mib\":%.0f,\"fits\":\"%s\"", gpu, fit_names[fit(p, gpu)]);
}

/* The run's first rank, as a snapshot (*s) or, where there is none, as
 * phase samples from a capture file or a seed-script report (*r). */
static int first_rank(const char *run, md_snapshot **s, md_sample_rank **r, size_t *nr,
                      char *path, size_t n)
{
    char *arg = (char *)run, **paths;
    size_t np;
    *nr = 0;
    if (cli_expand_paths(&arg, 1, &paths, &np))
        return EXIT_USAGE;
    md_err err = {0};
    int rc = -1;
    for (size_t i = 0; i < np && rc; i++)
        if (!cli_is_capture(paths[i]) && !cli_is_seed_report(paths[i])) {
            rc = md_snapshot_load(paths[i], s, &err) ? EXIT_USAGE : 0;
            snprintf(path, n, "%s", paths[i]);
        }
    for (size_t i = 0; i < np && rc == -1; i++) {
        md_capture_info info;
        *r = calloc(1, sizeof **r);
        if (!*r)
            break;
        *nr = 1;
        if (cli_is_capture(paths[i]))
            rc = md_capture_load(paths[i], *r, &info, &err) ? EXIT_USAGE : 0;
        else if (cli_is_seed_report(paths[i])) {
            free(*r);
            *r = NULL;
            rc = md_seedjson_load(paths[i], r, nr, &err) ? EXIT_USAGE : 0;
        }
        if (rc)
            md_sample_ranks_free(*r, *nr), *r = NULL;
        snprintf(path, n, "%s", paths[i]);
    }
    if (rc == EXIT_USAGE)
        cli_fail_err(&err);
    else if (rc == -1 && np)
        cli_fail("%s: nothing to validate against (no snapshot, capture file or seed report)", run);
    cli_free_paths(paths, np);
    return rc ? EXIT_USAGE : 0;
}

static int validate(const char *run, const md_prediction *p, md_validation *v, char *path,
                    size_t n, int *device)
{
    md_snapshot *s = NULL;
    md_sample_rank *ranks = NULL;
    size_t nranks = 0;
    md_replay *r = NULL;
    md_analysis *a = NULL;
    md_err err = {0};
    if (first_rank(run, &s, &ranks, &nranks, path, n))
        return EXIT_USAGE;
    int rc;
    if (ranks) { /* phase samples: the floor and the peak only */
        *device = ranks->local_rank >= 0 ? ranks->local_rank : 0;
        rc = md_predict_validate_samples(p, ranks, v, &err);
        md_sample_ranks_free(ranks, nranks);
    } else {
        int d = 0, nd = md_snapshot_ndevices(s);
        while (d < nd && !cli_device_has_data(s, d, 1))
            d++;
        *device = d < nd ? d : 0;
        rc = md_replay_run(s, *device, &r, &err);
        if (!rc)
            rc = md_analyze(s, r, &a, &err);
        if (!rc)
            rc = md_predict_validate(p, r, a, v, &err);
    }
    if (rc)
        cli_fail("%s: %s", path, err.msg);
    md_analysis_free(a);
    md_replay_free(r);
    md_snapshot_free(s);
    return rc ? EXIT_USAGE : 0;
}

/* predicted / measured, or -1 when nothing was measured */
static double val_ratio(const md_validation *v, int c)
{
    return v->measured[c] ? (double)v->predicted[c] / (double)v->measured[c] : -1;
}

static void validate_text(const md_validation *v, const char *path, int device)
{
    static const char *const note[MD_VAL_COUNT] = {"", "", "", "allocated at the step's start",
                                                   "at the end of backward",
                                                   "max allocated in the step"};
    printf("\nvalidated against %s (cuda:%d), step %d\n", path, device, v->step);
    printf("  %-20s %12s %12s %9s\n", "component", "predicted", "measured", "pred/real");
    for (int c = 0; c < MD_VAL_COUNT; c++) {
        char ratio[32] = "-", pred[32] = "           -", meas[32] = "           -";
        if (val_ratio(v, c) >= 0 && v->predicted[c])
            snprintf(ratio, sizeof ratio, "%.3f", val_ratio(v, c));
        if (v->predicted[c] || c != MD_VAL_PEAK)
            snprintf(pred, sizeof pred, "%8.1f MiB", md_mib(v->predicted[c]));
        if (md_validation_measured(v, c))
            snprintf(meas, sizeof meas, "%8.1f MiB", md_mib(v->measured[c]));
        printf("  %-20s %s %s %9s%s%s\n", md_validation_name(c), pred, meas, ratio,
               *note[c] ? "   " : "", note[c]);
    }
    if (v->grads_at_start)
        printf("  note: %.1f MiB of gradients live at the step's start (zero_grad(set_to_none=False)\n"
               "        or accumulation): the measured floor includes them\n",
               md_mib(v->grads_at_start));
}

static void validate_json(const md_validation *v, const char *path, int device)
{
    printf(",\"validation\":{\"source\":");
    cli_json_string(stdout, path);
    printf(",\"device\":%d,\"step\":%d,\"components\":[", device, v->step);
    for (int c = 0; c < MD_VAL_COUNT; c++) {
        printf("%s{\"name\":\"%s\",\"predicted_bytes\":", c ? "," : "", md_validation_name(c));
        if (c == MD_VAL_PEAK && !v->predicted[c])
            printf("null");
        else
            printf("%llu", (unsigned long long)v->predicted[c]);
        if (md_validation_measured(v, c))
            printf(",\"measured_bytes\":%llu,\"ratio\":", (unsigned long long)v->measured[c]);
        else
            printf(",\"measured_bytes\":null,\"ratio\":");
        if (val_ratio(v, c) >= 0 && v->predicted[c])
            printf("%.4f}", val_ratio(v, c));
        else
            printf("null}");
    }
    printf("],\"gradients_at_start_bytes\":%llu}", (unsigned long long)v->grads_at_start);
}

typedef struct predict_args {
    const char *model, *gpu_name, *run, *calibration, *lora_modules;
    double gpu_mib;
    int json;
    md_step_config step;
} predict_args;

/* One word of a fixed set into *out, or an error naming the set. */
static int choose(const char *opt, const char *v, const char *const *names, int n, int *out)
{
    if ((*out = pick(v, names, n)) >= 0)
        return 0;
    char list[256] = "";
    for (int i = 0; i < n; i++)
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s",
                 i == 0 ? "" : i == n - 1 ? " or " : ", ", names[i]);
    cli_fail("%s: %s, not '%s'", opt, list, v);
    return -1;
}

/* A whole number in [lo, hi] into *out, or an error saying what o wants. */
static int whole(const char *o, const char *v, long long lo, long long hi, const char *what,
                 long long *out)
{
    char *end;
    *out = strtoll(v, &end, 10);
    if (end == v || *end || *out < lo || *out > hi) {
        cli_fail("%s wants %s, got '%s'", o, what, v);
        return -1;
    }
    return 0;
}

/* --lora RANK[:MODULES] */
static int parse_lora(const char *v, predict_args *a)
{
    char *end;
    long long rank = strtoll(v, &end, 10);
    if (end == v || rank <= 0 || rank > 65536 || (*end && *end != ':')) {
        cli_fail("--lora wants RANK[:MODULES] (16, 16:q_proj,v_proj), not '%s'", v);
        return -1;
    }
    a->step.lora_rank = rank;
    a->lora_modules = *end ? end + 1 : NULL;
    return 0;
}

/* An option that takes a value; -1 after reporting a bad one. */
static int parse_valued(const char *o, const char *v, predict_args *a)
{
    static const char *const opts[] = {"sgd", "sgd-momentum", "adam", "adamw"};
    static const char *const precs[] = {"fp32", "bf16-autocast", "fp16-autocast", "bf16-pure"};
    static const char *const outs[] = {"kept", "dropped"}, *const attns[] = {"sdpa", "eager"};
    static const char *const pars[] = {"ddp", "ddp-bucket-view", "zero1", "fsdp",
                                       "fsdp-no-reshard", "zero3", "zero2"};
    md_step_config *st = &a->step;
    int k = 0, rc = 0;
    long long x;
    if (!strcmp(o, "--model")) {
        a->model = v;
    } else if (!strcmp(o, "--validate")) {
        a->run = v;
    } else if (!strcmp(o, "--calibration")) {
        a->calibration = v;
    } else if (!strcmp(o, "--lora")) {
        rc = parse_lora(v, a);
    } else if (!strcmp(o, "--batch") || !strcmp(o, "--seq")) {
        if (whole(o, v, 1, LLONG_MAX, "a positive whole number", &x))
            return -1;
        *(o[2] == 'b' ? &st->batch : &st->seq) = x;
    } else if (!strcmp(o, "--optimizer")) {
        if (strstr(v, "8bit") || strstr(v, "8-bit")) { /* bitsandbytes' */
            cli_fail("--optimizer %s: 8-bit optimizers are not modeled (no bitsandbytes on "
                     "the machines that calibrate predict)", v);
            return -1;
        }
        rc = choose(o, v, opts, 4, &k), st->optimizer = (md_optimizer)k;
    } else if (!strcmp(o, "--precision")) {
        rc = choose(o, v, precs, 4, &k), st->precision = (md_precision)k;
    } else if (!strcmp(o, "--outputs")) {
        rc = choose(o, v, outs, 2, &st->drop_outputs);
    } else if (!strcmp(o, "--attention")) {
        rc = choose(o, v, attns, 2, &st->eager);
    } else if (!strcmp(o, "--parallel")) {
        rc = choose(o, v, pars, 7, &k);
        /* zero3, zero2: torch's own, FSDP2 with and without resharding */
        st->parallel = k == 5 ? MD_PAR_FSDP : k == 6 ? MD_PAR_FSDP_NO_RESHARD : (md_parallel)(k + 1);
    } else if (!strcmp(o, "--stream-layers")) {
        if (whole(o, v, 1, 1024, "a number of buffers from 1 to 1024", &x))
            return -1;
        st->stream_buffers = (int)x;
    } else if (!strcmp(o, "--bucket-mb")) {
        if (whole(o, v, 1, 1 << 20, "a positive whole number of MiB", &x))
            return -1;
        st->bucket_mb = (int)x;
    } else if (!strcmp(o, "--world") || !strcmp(o, "--rank")) {
        if (whole(o, v, 0, 1 << 20, "a whole number", &x))
            return -1;
        *(o[2] == 'w' ? &st->world : &st->rank) = (int)x;
    } else if (!strcmp(o, "--gpu")) {
        a->gpu_name = v;
        if ((a->gpu_mib = gpu_mib(v)) <= 0) {
            cli_fail("--gpu: a known GPU (H200, H100, A100-80GB, ...) or a size like 80GB, not '%s'", v);
            return -1;
        }
    } else {
        return 1; /* not an option with a value */
    }
    return rc;
}

/* 0 parsed, 1 help shown, -1 error reported. */
static int parse(int argc, char **argv, predict_args *a)
{
    a->step.optimizer = MD_OPT_ADAMW, a->step.precision = MD_FP32, a->step.rank = -1;
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i];
        int rc = i + 1 < argc ? parse_valued(o, argv[i + 1], a) : 1;
        if (rc < 0)
            return -1;
        if (rc == 0) {
            i++;
        } else if (!strcmp(o, "-h") || !strcmp(o, "--help")) {
            help();
            return 1;
        } else if (!strcmp(o, "--json")) {
            a->json = 1;
        } else if (!strcmp(o, "--ddp")) {
            a->step.parallel = a->step.parallel ? a->step.parallel : MD_PAR_DDP;
        } else if (!strcmp(o, "--gradient-as-bucket-view")) {
            a->step.parallel = MD_PAR_DDP_VIEW;
        } else if (!strcmp(o, "--checkpointing")) {
            a->step.checkpointing = 1;
        } else {
            cli_fail("unknown or incomplete option '%s' (see 'memdiag predict --help')", o);
            return -1;
        }
    }
    if (a->model && a->step.batch && a->step.seq)
        return 0;
    cli_fail("predict needs --model, --batch and --seq (see 'memdiag predict --help')");
    return -1;
}

static void output(const md_model *m, const md_prediction *p, const predict_args *a,
                   const md_validation *val, const char *path, int device)
{
    if (a->json) {
        json(m, p, &a->step, a->gpu_mib);
        if (a->run)
            validate_json(val, path, device);
        printf("}\n");
    } else {
        text(m, p, &a->step, a->gpu_mib, a->gpu_name);
        if (a->run)
            validate_text(val, path, device);
    }
}

int cmd_predict(int argc, char **argv)
{
    predict_args a;
    memset(&a, 0, sizeof a);
    int rc = parse(argc, argv, &a);
    if (rc)
        return rc > 0 ? 0 : EXIT_USAGE;
    md_model m;
    md_prediction p;
    md_calibration cal;
    md_err err = {0};
    md_calibration_default(&cal);
    a.step.calibration = &cal;
    if ((a.calibration && md_calibration_load(a.calibration, &cal, &err)) ||
        md_model_load(a.model, &m, &err)) {
        cli_fail_err(&err);
        return EXIT_USAGE;
    }
    size_t bad;
    if (a.step.lora_rank && md_lora_targets(a.lora_modules, &m, &a.step.lora_targets, &bad)) {
        cli_fail("--lora: unknown module '%.*s' (q_proj, k_proj, v_proj, o_proj, gate_proj, "
                 "up_proj, down_proj, qkv_proj, gate_up_proj, c_attn, all-linear)",
                 (int)strcspn(a.lora_modules + bad, ","), a.lora_modules + bad);
        return EXIT_USAGE;
    }
    if (md_predict(&m, &a.step, &p, &err)) {
        cli_fail_err(&err);
        return EXIT_USAGE;
    }
    md_validation val;
    char path[4096];
    int device = 0;
    if (a.run && validate(a.run, &p, &val, path, sizeof path, &device))
        return EXIT_USAGE;
    output(&m, &p, &a, &val, path, device);
    return 0;
}

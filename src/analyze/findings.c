/* findings.c - names the causes of memory pressure in one rank's replay,
 * with the numbers they rest on: leak, optimizer_state, library_workspace,
 * activations, fragmentation, oom; and across ranks rank_imbalance.
 *
 * Thresholds are relative to what they judge (the peak, the parameter
 * bytes, the step count), never fitted to one workload; docs/diagnosis.md
 * states each one and why. A finding that cannot be supported by the
 * trace (too few steps, no frames) is not made: no false leaks. */
#include <math.h>
#include <stdarg.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include "../model/model.h"
#include "../snapshot/snapshot_int.h"
#include "analyze.h"

#define MIB 1048576.0
#define MIN_LEAK_STEPS 3          /* a leak must show over >= 3 steps */
#define GRAPH_MIN_STACKS 6        /* a graph: tensors from at least this many call stacks */
#define LEAK_MIN_PER_STEP (1 << 20)
#define LEAK_PEAK_FRACTION 0.002  /* growth per step must exceed 0.2% of peak */
#define ACTIVATIONS_SHARE 0.40    /* activations at peak: finding above 40% */
#define FROZEN_GRADS_SHARE 0.9    /* gradients under 90% of the parameters: a frozen part */
#define HELD_OVER_SHARE 0.10      /* the step before's activations at the peak: said above 10% */
#define FRAG_SHARE 0.25           /* reserved not allocated, share of reserved */
#define FRAG_MIN (128ULL << 20)
#define IMBALANCE_SHARE 0.10      /* peak difference relative to the smaller */
#define IMBALANCE_MIN (16ULL << 20)
#define HELD_ATTEMPT_MIN (16ULL << 20) /* a failed attempt's tensors held after its OOM */
#define HELD_ATTEMPT_SHARE 0.05        /* ... and this share of what is allocated then */
#define UNTRAINED_GRADS_MIN (16ULL << 20) /* gradients kept that no optimizer steps */
#define OUTLIER_MIN (64ULL << 20)         /* what a failed outsized batch had made */
#define LONE_GROWTH_MIN_MIB 16.0  /* growth over the steps on the growing rank */
#define LONE_GROWTH_OTHERS 0.25   /* the least growing rank grows under this share of it */

typedef struct fctx {
    const md_analysis *a;
    const md_snapshot *s;
    const md_replay *r;
    const md_step *st;
    size_t nst;
    const md_step *it; /* training iterations: the steps, or where several
                          optimizers step in turn, their groups */
    size_t nit;
    md_finding *out;
    size_t n, cap;
    uint64_t state_grew; /* the memory held between steps grew by this much of
                            optimizer state: parameters joined the optimizer */
    const md_step *state_oom; /* the last step's optimizer step ran out of memory:
                                 the state live at the end is what it made */
    int no_backward;          /* -1: not known yet; else no_backward()'s answer */
    int no_grad_said;         /* a leak's advice said inference_mode already */
    int scores_said;          /* a leak's advice said generate()'s scores already */
    uint64_t untrained;       /* gradients kept for parameters no optimizer steps */
    size_t untrained_count;
} fctx;

static const md_live_set *live_at(fctx *c, long index)
{
    return md_analysis_live(c->a, index);
}

md_finding *md_finding_new(md_finding **arr, size_t *n, size_t *cap, const char *kind,
                           int severity, uint64_t bytes)
{
    if (md_grow((void **)arr, cap, *n + 1, sizeof **arr))
        return NULL;
    md_finding *f = &(*arr)[(*n)++];
    memset(f, 0, sizeof *f);
    snprintf(f->kind, sizeof f->kind, "%s", kind);
    f->severity = severity;
    f->bytes = bytes;
    f->rank = -1;
    f->device = -1;
    f->phase = -1;
    return f;
}

void md_held_growth_add(md_held_growth *g, double d, double thr)
{
    g->n++;
    g->fell |= d < -thr;
    if (d > thr)
        g->ups++, g->last_up = g->n;
    g->sum += d;
    g->lo = fmin(g->lo, d);
    g->hi = fmax(g->hi, d);
}

size_t md_held_growth_leak(const md_held_growth *g)
{
    if (g->n && g->ups == g->n)
        return g->n;
    return !g->fell && g->ups >= MIN_LEAK_STEPS && 3 * g->last_up >= 2 * g->n ? g->ups : 0;
}

void md_fsay(char *dst, size_t n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(dst, n, fmt, ap);
    va_end(ap);
}

/* Puts a more specific sentence before the advice already written. */
static void advice_first(md_finding *f, const char *fmt, ...)
{
    char first[sizeof f->advice], rest[sizeof f->advice];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(first, sizeof first, fmt, ap);
    va_end(ap);
    memcpy(rest, f->advice, sizeof rest);
    md_fsay(f->advice, sizeof f->advice, "%s %s", first, rest);
}

static md_finding *add(fctx *c, const char *kind, int sev, uint64_t bytes)
{
    return md_finding_new(&c->out, &c->n, &c->cap, kind, sev, bytes);
}


/* ---- live sets grouped by site, with a filter ---------------------------- */

typedef int (*live_pred)(const fctx *c, const md_live *l, md_category cat, void *arg);

/* A live allocation's site while grouping: its user frame, or one of two
 * stand-ins where it has none. */
static const char before_history[] = "(allocated before the recorded history began)";
static const char no_user_frame[] = "(no frames outside torch: autograd engine or C++)";

static const void *site_key(fctx *c, const md_live *l)
{
    if (l->alloc_index < 0 && l->stack == 0)
        return before_history;
    const md_frame *fr = md_stack_user_frame(md_analysis_cache(c->a), c->s, l->stack);
    return fr ? (const void *)fr : no_user_frame;
}

typedef struct site_group {
    const void *key; /* site_key */
    uint64_t bytes;
    uint32_t count;
} site_group;

/* The groups' labels; groups whose labels come out the same (frames cut
 * to the same text) merged into the first. Returns the sites, in order of
 * first appearance, and their count in *ns (NULL: no memory). */
static md_finding_site *label_groups(fctx *c, const site_group *g, size_t ng, size_t *ns)
{
    md_finding_site *sites = ng ? calloc(ng, sizeof *sites) : NULL;
    *ns = 0;
    for (size_t i = 0; sites && i < ng; i++) {
        char label[sizeof sites->site];
        if (g[i].key == before_history || g[i].key == no_user_frame)
            snprintf(label, sizeof label, "%s", (const char *)g[i].key);
        else
            md_frame_label(c->s, g[i].key, label, sizeof label);
        size_t k = 0;
        while (k < *ns && strcmp(sites[k].site, label))
            k++;
        if (k == *ns)
            snprintf(sites[(*ns)++].site, sizeof sites->site, "%s", label);
        sites[k].bytes += g[i].bytes;
        sites[k].count += g[i].count;
    }
    return sites;
}

/* Adds the live allocations at `index` that pass `pred` to f->sites,
 * largest sites first; returns their total bytes. Grouped by frame first,
 * labelled after: a label costs a formatted print, and a peak holds
 * thousands of allocations from a few dozen lines. */
static uint64_t collect_sites(fctx *c, md_finding *f, long index, live_pred pred, void *arg)
{
    const md_live_set *ls = live_at(c, index);
    if (!ls)
        return 0;
    site_group *g = NULL;
    size_t ng = 0, cap = 0, ns = 0;
    uint64_t total = 0;
    for (size_t i = 0; i < ls->n; i++) {
        const md_live *l = &ls->live[i];
        if (!pred(c, l, (md_category)l->category, arg))
            continue;
        total += l->block_size;
        const void *key = site_key(c, l);
        size_t k = 0;
        while (k < ng && g[k].key != key)
            k++;
        if (k == ng) {
            if (md_grow((void **)&g, &cap, ng + 1, sizeof *g))
                break;
            g[ng++] = (site_group){key, 0, 0};
        }
        g[k].bytes += l->block_size;
        g[k].count++;
    }
    md_finding_site *sites = label_groups(c, g, ng, &ns);
    free(g);
    /* keep the largest few; crumbs under 1% of the total say nothing */
    for (int slot = 0; slot < MD_FINDING_MAX_SITES && ns; slot++) {
        size_t best = 0;
        for (size_t k = 1; k < ns; k++)
            if (sites[k].bytes > sites[best].bytes)
                best = k;
        if (!sites[best].bytes || sites[best].bytes * 100 < total)
            break;
        f->sites[f->nsites++] = sites[best];
        sites[best].bytes = 0;
    }
    free(sites);
    return total;
}

/* End of the step before the one containing event p (-1 if none): what
 * this step allocated is what came after it. */
static long step_before(const fctx *c, long p)
{
    long lo = -1;
    for (size_t k = 0; k < c->nst; k++)
        if (p > c->st[k].after_zero)
            lo = c->st[k].after_zero;
    return lo;
}

static long last_index(const fctx *c)
{
    return (long)md_replay_nevents(c->r) - 1;
}

/* ---- leak -------------------------------------------------------------------- */

typedef struct leak_arg {
    long after, until; /* allocated in (after, until]: after the first step,
                          before the last (what the last holds until the
                          next, its gradients or outputs, is no leak's) */
    uint64_t forward_bytes, backward_bytes; /* kept bytes made in those phases */
    uint64_t state_bytes;                   /* kept optimizer state */
    uint64_t param_bytes;                   /* kept parameters (models built mid-run) */
    uint32_t *fstacks; /* stacks of the kept forward allocations */
    size_t nf, fcap;
    int nomem;
} leak_arg;

/* The first iteration k in [lo, hi) whose end is at or after event i (hi:
 * none): the one event i belongs to. */
static size_t iteration_of(const fctx *c, long i, size_t lo, size_t hi)
{
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (i <= c->it[mid].after_zero)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

/* Whether a live allocation was made by the autograd engine in a backward
 * phase ((after_forward, after_backward] of its iteration): no Python
 * frames, or autograd's own, not a line of the script run after backward. */
static int made_in_backward(const fctx *c, const md_live *l)
{
    if (l->stack ? !(md_stack_tags(md_analysis_cache(c->a), c->s, l->stack) & MD_TAG_BACKWARD)
                 : !(c->s->features & MD_HAS_FRAMES))
        return 0;
    size_t k = iteration_of(c, l->alloc_index, 0, c->nit);
    return k < c->nit && l->alloc_index > c->it[k].after_forward &&
           l->alloc_index <= c->it[k].after_backward;
}

static int retained_pred(const fctx *c, const md_live *l, md_category cat, void *arg)
{
    leak_arg *la = arg;
    if (l->alloc_index <= la->after || l->alloc_index > la->until || cat == MD_CAT_WORKSPACE)
        return 0;
    if (cat != MD_CAT_ACTIVATION && made_in_backward(c, l))
        la->backward_bytes += l->block_size;
    if (cat == MD_CAT_OPTIMIZER_STATE)
        la->state_bytes += l->block_size;
    if (cat == MD_CAT_PARAMETER)
        la->param_bytes += l->block_size;
    if (cat == MD_CAT_ACTIVATION) {
        la->forward_bytes += l->block_size;
        if (md_grow((void **)&la->fstacks, &la->fcap, la->nf + 1, sizeof *la->fstacks))
            la->nomem = 1;
        else
            la->fstacks[la->nf++] = l->stack;
    }
    return 1;
}

/* What a leak keeps. A kept autograd graph holds the tensors every layer
 * saved for backward: many allocations a step from many call stacks
 * (60 a step from 13-17 stacks in the gamma fixtures). A stored output
 * (logits kept for metrics, a hook keeping block outputs) is a few
 * allocations a step from one or two stacks. A torchmetrics metric with a
 * list state (AUROC and the like, thresholds=None) keeps every update's
 * inputs until reset(): its own code is then the largest site. */
typedef enum {
    KEPT_GRAPHS, KEPT_OUTPUTS, KEPT_TENSORS, KEPT_METRIC, KEPT_BACKWARD, KEPT_KV_CACHE,
    KEPT_MODELS, KEPT_SCORES
} leak_kind;
#define OUTPUT_MAX_SITES 4
#define OUTPUT_MAX_PER_STEP 8.0

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* How many different call stacks made the kept forward allocations. */
static size_t distinct_stacks(uint32_t *ids, size_t n)
{
    if (n == 0)
        return 0; /* ids may be NULL: none kept */
    qsort(ids, n, sizeof *ids, cmp_u32);
    size_t d = 0;
    for (size_t i = 0; i < n; i++)
        d += i == 0 || ids[i] != ids[i - 1];
    return d;
}

/* How many distinct stack ids ids holds: a bit each (ids below nstacks),
 * where sorting big_gamma's 71 000 ids took 2.6 M instructions; else, or
 * without memory for the bits, by sorting them (distinct_stacks). */
static size_t count_stacks(uint32_t *ids, size_t n, size_t nstacks)
{
    uint64_t *seen = calloc(nstacks / 64 + 1, sizeof *seen);
    size_t d = 0;
    for (size_t i = 0; seen && i < n; i++) {
        if (ids[i] >= nstacks) {
            free(seen);
            return distinct_stacks(ids, n);
        }
        uint64_t bit = 1ull << (ids[i] % 64);
        d += !(seen[ids[i] / 64] & bit);
        seen[ids[i] / 64] |= bit;
    }
    if (!seen)
        return distinct_stacks(ids, n);
    free(seen);
    return d;
}

/* The frame that called into torchmetrics for a kept allocation made
 * after `after` and live at `index` (the user's metric.update() line), or
 * NULL. Stacks are innermost first: past the metric's frames, the first
 * that is neither torchmetrics nor torch. */
static const md_frame *metric_caller(fctx *c, long index, long after)
{
    const md_live_set *ls = live_at(c, index);
    for (size_t i = 0; ls && i < ls->n; i++) {
        if (ls->live[i].alloc_index <= after)
            continue;
        md_stack_ids ids = md_snapshot_stack(c->s, ls->live[i].stack);
        int inside = 0;
        for (size_t k = 0; k < ids.n; k++) {
            const md_frame *fr = md_snapshot_frame(c->s, md_stack_id(ids, k));
            const char *fn = fr ? md_snapshot_string(c->s, fr->filename) : "";
            if (strstr(fn, "/torchmetrics/"))
                inside = 1;
            else if (inside && !strstr(fn, "/torch/") && fn[0] != '<')
                return fr;
        }
    }
    return NULL;
}

/* Which of the leak_kind cases the kept allocations look like: a
 * metric's own code as the largest site; mostly parameters (whole models
 * built between steps and kept); mostly made in backward passes
 * (gradients of intermediate tensors, which a tensor hook or
 * autograd.grad hands out); mostly made outside a forward pass; few
 * forward tensors a step from few stacks; else whole graphs. */
static leak_kind leak_kind_of(const md_finding *f, uint64_t kept, const leak_arg *la,
                              size_t nstacks, double per_step)
{
    if (f->nsites && strstr(f->sites[0].site, "/torchmetrics/"))
        return KEPT_METRIC;
    if (f->nsites && strstr(f->sites[0].site, "transformers/cache_utils.py"))
        return KEPT_KV_CACHE;
    if (f->nsites && strstr(f->sites[0].site, "transformers/generation/logits_process.py"))
        return KEPT_SCORES;
    if (kept && la->param_bytes * 2 >= kept)
        return KEPT_MODELS; /* models built mid-run, each kept: a sweep's results */
    if (kept && la->backward_bytes * 2 >= kept)
        return KEPT_BACKWARD;
    if (!kept || la->forward_bytes * 2 < kept)
        return KEPT_TENSORS;
    return nstacks <= OUTPUT_MAX_SITES && per_step <= OUTPUT_MAX_PER_STEP ? KEPT_OUTPUTS
                                                                          : KEPT_GRAPHS;
}

/* Bytes as a report says them: KiB below a MiB (a small leak's), else MiB. */
static void say_bytes(char *dst, size_t n, double bytes)
{
    if (bytes < MIB)
        snprintf(dst, n, "%.1f KiB", bytes / 1024.0);
    else
        snprintf(dst, n, "%.1f MiB", bytes / MIB);
}

/* A trace of forward passes only: no training steps, and no allocation
 * anywhere under backward's frames (Python frames recorded, so it would
 * show). Graphs recorded there serve no backward. */
static int no_backward(fctx *c)
{
    if (c->no_backward >= 0)
        return c->no_backward;
    c->no_backward = !c->nst && (c->s->features & MD_HAS_FRAMES);
    const md_event *ev = md_replay_events(c->r);
    size_t n = c->no_backward ? md_replay_nevents(c->r) : 0;
    for (size_t i = 0; i < n && c->no_backward; i++)
        if (ev[i].action == MD_ACT_ALLOC &&
            (md_stack_tags(md_analysis_cache(c->a), c->s, ev[i].stack) & MD_TAG_BACKWARD))
            c->no_backward = 0;
    return c->no_backward;
}

#define NO_GRAD_ADVICE \
    "No backward runs in this trace, yet the forward passes record autograd graphs: run them " \
    "under torch.inference_mode() (or torch.no_grad(); model.eval() alone does not stop " \
    "autograd)"

/* generate()'s scores: return_dict_in_generate with output_scores (or
 * output_logits) keeps a (batch x beams, vocab) fp32 tensor per new token
 * in the output, for as long as the output is referenced. */
#define GEN_SCORES_ADVICE                                                                          \
    "generate(..., output_scores=True) keeps a batch x vocab tensor of fp32 scores per new "      \
    "token in its output (output_logits=True another): leave them off where only the sequences " \
    "are used; where the scores are, reduce them at once (model.compute_transition_scores(), "    \
    "then .cpu()) and keep out.sequences, not the output."

static void leak_advice(fctx *c, md_finding *f, leak_kind kind, double per, const char *unit)
{
    char each[32];
    say_bytes(each, sizeof each, per);
    if (kind == KEPT_GRAPHS && no_backward(c) && (c->no_grad_said = 1))
        MD_ADVICE(f, NO_GRAD_ADVICE ", and what each %s keeps holds only itself, not its graph; "
                  "keep loss.item() or out.detach() where a number or a tensor is all you need. "
                  "That frees most of %s per %s.", unit, each, unit);
    else if (kind == KEPT_GRAPHS)
        MD_ADVICE(f, "Something holds a reference to each step's graph: typically the loss or an "
                  "output appended to a list (store loss.item() or loss.detach()), or "
                  "backward(retain_graph=True) with the graph still referenced. Fixing it frees "
                  "about %s per %s.", each, unit);
    else if (kind == KEPT_OUTPUTS)
        MD_ADVICE(f, "Outputs of the forward pass stay referenced every step: predictions or "
                  "logits kept for metrics (.detach() alone keeps them on the GPU: keep .cpu() "
                  "copies or reduce them to numbers with .item(); a slice or view such as "
                  "logits[:, -1] keeps the whole tensor: .clone() it), a forward hook that stores "
                  "outputs, or a cache. Fixing it frees about %s per %s.", each, unit);
    else if (kind == KEPT_BACKWARD)
        MD_ADVICE(f, "Gradients of intermediate tensors stay referenced: a hook registered with "
                  "Tensor.register_hook (or a module's backward hook) that stores its argument, or "
                  "the outputs of torch.autograd.grad kept in a list. Keep a number "
                  "(g.norm().item()) or a .detach().cpu() copy, or remove the hook when done; that "
                  "frees about %s per %s.", each, unit);
    else if (kind == KEPT_MODELS)
        MD_ADVICE(f, "A model built during the run stays referenced after its use (a sweep's "
                  "results list holding each trial's model, a model kept per epoch or per "
                  "run): keep its score or a state_dict on the CPU ({k: v.cpu() for k, v in "
                  "model.state_dict().items()}) and drop every reference, its optimizer's too, "
                  "before building the next; that frees about %s per %s.", each, unit);
    else if (kind == KEPT_KV_CACHE)
        MD_ADVICE(f, "Attention KV caches (past_key_values, a DynamicCache) stay referenced after "
                  "their request: a session store, or outputs kept with their caches. Drop a "
                  "cache when its session ends, bound how many stay on the GPU, or keep them in "
                  "host memory (OffloadedCache) or quantized (QuantizedCache); that frees about "
                  "%s per %s.", each, unit);
    else if (kind == KEPT_SCORES && (c->scores_said = 1))
        MD_ADVICE(f, GEN_SCORES_ADVICE " That frees about %s per %s.", each, unit);
    else if (kind == KEPT_METRIC)
        MD_ADVICE(f, "Metrics with list states (AUROC, AveragePrecision, ROC or PR curves with "
                  "thresholds=None, CatMetric, retrieval metrics) keep every update's tensors on the "
                  "GPU until reset(): call compute() and reset() each epoch or more often, pass "
                  "compute_on_cpu=True to keep them in host memory, or thresholds=N for a fixed-size "
                  "binned state. About %s per %s.", each, unit);
    else
        MD_ADVICE(f, "Tensors made every step stay referenced (a list, cache or history buffer). "
                  "Drop the references, or keep .detach().cpu() copies; that frees about %s "
                  "per %s.", each, unit);
}

static double allocated_at(const fctx *c, long index)
{
    return (double)md_replay_at(c->r, index).allocated;
}

/* What step k's forward pass added, as the indicator counts it: over the
 * end of the step before (the first step: over its start). */
static double forward_increase(const fctx *c, size_t k)
{
    return allocated_at(c, c->it[k].after_forward) -
           allocated_at(c, k ? c->it[k - 1].after_zero : c->it[0].fwd_start);
}

/* Memory held between steps (or calls) that grows no faster than the
 * forward pass does, with little that the earlier ones made still live at
 * the end: each step's outputs kept until the next step replaces them,
 * larger each time because the inputs grow (a sequence-length or batch
 * schedule, generate() on growing batches). Not
 * a leak: a leak accumulates, and what earlier steps made stays live; a
 * buffer re-grown every step (torch.cat onto a history) grows while the
 * forward pass does not. */
static int growth_follows_inputs(fctx *c)
{
    /* the first interval compares against the first step or call, which
     * also warms up (workspaces, state): from the second on where two remain */
    for (size_t k = c->nit >= 4 ? 2 : 1; k < c->nit; k++) {
        double held = allocated_at(c, c->it[k].after_zero) - allocated_at(c, c->it[k - 1].after_zero);
        if (held > forward_increase(c, k) - forward_increase(c, k - 1))
            return 0;
    }
    long from = c->it[0].after_zero, to = c->it[c->nit - 2].after_zero;
    const md_live_set *ls = live_at(c, c->it[c->nit - 1].after_zero);
    uint64_t kept = 0;
    for (size_t i = 0; ls && i < ls->n; i++)
        if (ls->live[i].alloc_index > from && ls->live[i].alloc_index <= to)
            kept += ls->live[i].block_size;
    return (double)kept < 0.5 * (allocated_at(c, to) - allocated_at(c, from));
}

/* What the totals cannot tell from noise: 1 MiB, or 0.2% of the peak. */
static double held_noise(const fctx *c)
{
    return fmax(LEAK_MIN_PER_STEP, LEAK_PEAK_FRACTION * (double)md_replay_peak_allocated(c->r));
}

/* How the memory held between steps moved, step by step, against noise. */
static md_held_growth held_growth(const fctx *c)
{
    double thr = held_noise(c);
    md_held_growth g = MD_HELD_GROWTH_INIT;
    for (size_t k = 1; k < c->nit; k++)
        md_held_growth_add(&g, allocated_at(c, c->it[k].after_zero) -
                                   allocated_at(c, c->it[k - 1].after_zero), thr);
    return g;
}

/* Whether every step's forward pass added more than the one before. */
static int forward_grows(const fctx *c)
{
    for (size_t k = 1; k < c->nit; k++)
        if (forward_increase(c, k) <= forward_increase(c, k - 1))
            return 0;
    return c->nit > 1;
}

/* Forward allocations kept per step of the kept range (steps after the
 * first and before the last). */
static double kept_per_step(const fctx *c, const leak_arg *la)
{
    return (double)la->nf / (double)(c->nit - 2);
}

/* What the leak keeps: how much of the kept range is still live, how
 * many forward allocations a step from how many stacks, the metric's
 * caller. */
static void say_kept(fctx *c, md_finding *f, const char *unit, uint64_t kept,
                     const leak_arg *la, leak_kind kind, size_t nstacks)
{
    char made[96];
    if (c->nit == 3)
        snprintf(made, sizeof made, "%s %d", unit, c->it[1].number);
    else
        snprintf(made, sizeof made, "%ss %d to %d", unit, c->it[1].number, c->it[c->nit - 2].number);
    char bytes[32];
    say_bytes(bytes, sizeof bytes, (double)kept);
    if (kind == KEPT_BACKWARD)
        MD_EVIDENCE(f, "%s allocated in %s is still live after the last %s; %.0f%% of it was "
                    "allocated in a backward pass, not as a parameter's gradient (those are "
                    "replaced every %s)", bytes, made, unit,
                    100.0 * (double)la->backward_bytes / (double)kept, unit);
    else
        MD_EVIDENCE(f, "%s allocated in %s is still live after the last %s; "
                    "%.0f%% of it was allocated in a forward pass%s",
                    bytes, made, unit,
                    kept ? 100.0 * (double)la->forward_bytes / (double)kept : 0.0,
                    kind == KEPT_GRAPHS ? " (saved for backward)" : "");
    if ((kind == KEPT_GRAPHS || kind == KEPT_OUTPUTS) && nstacks != SIZE_MAX)
        MD_EVIDENCE(f, "%.1f forward allocations a %s stay, from %zu call stack%s%s",
                    kept_per_step(c, la), unit, nstacks, nstacks == 1 ? "" : "s",
                    kind == KEPT_OUTPUTS ? ": a kept graph would hold what every layer saved"
                                         : ": what the layers saved for backward");
    const md_frame *caller = kind == KEPT_METRIC ? metric_caller(c, c->it[c->nit - 1].after_zero,
                                                                  la->after) : NULL;
    char where[512];
    if (caller)
        MD_EVIDENCE(f, "the metric is updated from %s",
                    md_frame_label(c->s, caller, where, sizeof where));
}

/* Which optimizers step in turn, as leak evidence. */
static void say_period(fctx *c, md_finding *f)
{
    char sites[1024];
    size_t distinct = md_analysis_period_say(c->a, sites, sizeof sites);
    MD_EVIDENCE(f, "%zu optimizers step in turn (%s): each iteration is %zu optimizer steps, and "
                "memory is compared from one iteration's end to the next",
                distinct, sites, md_analysis_period(c->a));
}

/* What memory is compared between: steps, iterations of optimizers in
 * turn, or calls (no steps); and the moment of each. */
static const char *leak_unit(const fctx *c)
{
    return md_analysis_call_site(c->a) ? "call" : md_analysis_period(c->a) > 1 ? "iteration"
                                                                             : "step";
}

static const char *leak_point(const fctx *c)
{
    return md_analysis_call_site(c->a) ? "between calls" : "after zero_grad";
}

/* Evidence of what the leak compares, where it is not plain steps. */
static void say_compared(fctx *c, md_finding *f)
{
    const md_frame *call = md_analysis_call_site(c->a);
    char where[512];
    if (md_analysis_period(c->a) > 1)
        say_period(c, f);
    if (call)
        MD_EVIDENCE(f, "no training steps: memory is compared between the calls of %s, the "
                    "line of the script that allocates most often (%zu calls and the last)",
                    md_frame_label(c->s, call, where, sizeof where), c->nit);
}

/* ---- leaks below the totals' noise floor ---------------------------------- */

/* Whether a live allocation was made in the kept range by a known stack
 * (not a workspace). */
static int kept_from_step(const md_live *l, long from, long to, size_t nstacks)
{
    return l->alloc_index > from && l->alloc_index <= to && l->stack != 0 &&
           l->stack < nstacks && l->category != MD_CAT_WORKSPACE;
}

/* The call stacks that made an allocation in every step of the kept range
 * (steps after the first, before the last) that is still live after the
 * last step, sorted, into *out (to free); their count (0 on no memory).
 * Counting, not sorting: the allocations grouped by stack (a counting
 * sort over stack ids), each group's distinct steps marked in one array. */
static size_t steady_stacks(const fctx *c, const md_live_set *ls, uint32_t **out)
{
    long from = c->it[0].after_zero, to = c->it[c->nit - 2].after_zero;
    size_t ns = c->s->nstacks, need = c->nit - 2, found = 0;
    uint32_t *first = calloc(ns + 1, sizeof *first), *mark = calloc(c->nit, sizeof *mark);
    uint32_t *step = malloc((ls->n ? ls->n : 1) * sizeof *step);
    *out = malloc((ls->n ? ls->n : 1) * sizeof **out);
    if (!first || !mark || !step || !*out)
        goto done;
    for (size_t i = 0; i < ls->n; i++) /* group sizes, then where each group starts */
        if (kept_from_step(&ls->live[i], from, to, ns))
            first[ls->live[i].stack + 1]++;
    for (size_t k = 1; k <= ns; k++)
        first[k] += first[k - 1];
    for (size_t i = 0; i < ls->n; i++) {
        const md_live *l = &ls->live[i];
        if (kept_from_step(l, from, to, ns))
            step[first[l->stack]++] = (uint32_t)iteration_of(c, l->alloc_index, 1, c->nit - 2);
    }
    /* first[k] is now where group k ends (group k-1's end is its start) */
    for (size_t k = 0, lo = 0; k < ns; lo = first[k++]) {
        size_t steps = 0;
        for (size_t j = lo; j < first[k]; j++)
            if (mark[step[j]] != k + 1)
                mark[step[j]] = (uint32_t)(k + 1), steps++;
        if (steps == need)
            (*out)[found++] = (uint32_t)k;
    }
done:
    free(first);
    free(mark);
    free(step);
    return found;
}

typedef struct steady_arg {
    leak_arg la;
    const uint32_t *stacks;
    size_t n;
} steady_arg;

static int steady_pred(const fctx *c, const md_live *l, md_category cat, void *arg)
{
    steady_arg *sa = arg;
    uint32_t stack = l->stack;
    if (!bsearch(&stack, sa->stacks, sa->n, sizeof *sa->stacks, cmp_u32))
        return 0;
    return retained_pred(c, l, cat, &sa->la);
}

/* A small leak's summary, evidence and advice; f->bytes is its bytes a step. */
static void say_small_leak(fctx *c, md_finding *f, const md_held_growth *g, uint64_t kept,
                           const leak_arg *la, size_t nstacks)
{
    static const char *const what[] = {
        [KEPT_GRAPHS] = "forward tensors", [KEPT_OUTPUTS] = "forward outputs",
        [KEPT_TENSORS] = "tensors made", [KEPT_METRIC] = "a metric's tensors",
        [KEPT_BACKWARD] = "tensors made in backward", [KEPT_KV_CACHE] = "KV caches",
        [KEPT_MODELS] = "models' parameters", [KEPT_SCORES] = "generate()'s scores"};
    leak_kind kind = leak_kind_of(f, kept, la, nstacks, kept_per_step(c, la));
    const char *unit = leak_unit(c);
    double per = (double)f->bytes;
    char each[32], sum[32];
    say_bytes(each, sizeof each, per);
    say_bytes(sum, sizeof sum, g->sum);
    MD_SUMMARY(f, "memory grows by %s every %s and is never freed: %s from the same line each "
               "%s are kept (small now; 1 GiB after %.0f %ss)", each, unit, what[kind], unit,
               1024.0 * MIB / per, unit);
    say_compared(c, f);
    MD_EVIDENCE(f, "each of %ss %d to %d left an allocation from the same call stack that is "
                "still live after the last %s: %s a %s",
                unit, c->it[1].number, c->it[c->nit - 2].number, unit, each, unit);
    MD_EVIDENCE(f, "allocated %s grows by %s over %zu %ss, under the %.1f MiB a %s that the "
                "totals can tell from noise: the totals alone show no leak", leak_point(c), sum,
                c->nit - 1, unit, held_noise(c) / MIB, unit);
    say_kept(c, f, unit, kept, la, kind, nstacks);
    leak_advice(c, f, kind, per, unit);
}

/* What a leak keeps, its sites into f: the allocations of the kept range
 * still live after the last step, from the call stacks that keep one from
 * every step where there are such (a one-off in the range, such as DDP's
 * buckets rebuilt at step 1, is not the leak's), else all of them (none
 * with only_steady). la gets what they are; *nstacks the distinct stacks of
 * the forward ones (SIZE_MAX: not known). The bytes. */
static uint64_t collect_kept(fctx *c, md_finding *f, int only_steady, leak_arg *la,
                             size_t *nstacks)
{
    long last = c->it[c->nit - 1].after_zero;
    const md_live_set *ls = c->nit >= MIN_LEAK_STEPS + 2 ? live_at(c, last) : NULL;
    uint32_t *stacks = NULL;
    steady_arg sa = {{.after = c->it[0].after_zero, .until = c->it[c->nit - 2].after_zero}, NULL, 0};
    sa.n = ls ? steady_stacks(c, ls, &stacks) : 0;
    sa.stacks = stacks;
    uint64_t kept = sa.n        ? collect_sites(c, f, last, steady_pred, &sa)
                    : only_steady ? 0
                                  : collect_sites(c, f, last, retained_pred, &sa.la);
    free(stacks);
    *nstacks = sa.la.nomem ? SIZE_MAX
               : sa.la.nf ? count_stacks(sa.la.fstacks, sa.la.nf, md_snapshot_nstacks(c->s))
                          : 0;
    free(sa.la.fstacks);
    sa.la.fstacks = NULL;
    *la = sa.la;
    return kept;
}

/* Memory held between steps grows too little for the totals to tell it
 * from noise (the allocator's rounding, a cache warming), yet one call
 * stack leaves a tensor from every step live at the end: predictions
 * (argmax) or losses kept on the GPU. Small now; it grows with the run. */
static void find_small_leak(fctx *c, const md_held_growth *g)
{
    if (c->nit < MIN_LEAK_STEPS + 2 || g->fell)
        return;
    md_finding *f = add(c, "leak", MD_SEV_INFO, 0);
    if (!f)
        return;
    leak_arg la;
    size_t nstacks;
    uint64_t kept = collect_kept(c, f, 1, &la, &nstacks);
    double per = (double)kept / (double)(c->nit - 2);
    if (!md_small_leak_said(per / MIB)) {
        c->n--; /* none, or harmless within any run's length */
        return;
    }
    f->bytes = (uint64_t)per;
    say_small_leak(c, f, g, kept, &la, nstacks);
}

static uint64_t category_bytes(fctx *c, long index, md_category cat);
static double expected_state_multiple(const char *opt);

/* Whether what a growth keeps is optimizer state, and the state no more
 * than the optimizer keeps for every parameter (2 x for Adam; 2 x where
 * unknown): parameters joined the optimizer during the run (layers
 * unfrozen one by one, add_param_group), and it stops when all have. */
static int state_growth(fctx *c, uint64_t kept, const leak_arg *la)
{
    if (!kept || (double)la->state_bytes < 0.9 * (double)kept)
        return 0;
    long end = c->st[c->nst - 1].after_zero;
    double want = expected_state_multiple(md_analysis_optimizer(c->a));
    double params = (double)category_bytes(c, end, MD_CAT_PARAMETER);
    return (double)category_bytes(c, end, MD_CAT_OPTIMIZER_STATE) <=
           1.05 * (want > 0 ? want : 2.0) * params;
}

static size_t ooms_in(const fctx *c, long from, long to);

/* What a leak of this kind keeps, in words; unit: step, iteration or call. */
static void kept_what(char *dst, size_t n, leak_kind kind, const char *unit)
{
    static const char *const what[] = { /* %s: the unit */
        [KEPT_GRAPHS] = "each %s's autograd graph (forward activations) is kept alive",
        [KEPT_OUTPUTS] = "a few tensors made in each forward pass are kept (outputs, not whole graphs)",
        [KEPT_TENSORS] = "tensors created each %s are kept",
        [KEPT_METRIC] = "a torchmetrics metric keeps what each update() gave it",
        [KEPT_BACKWARD] = "tensors made in each backward pass are kept (not parameter gradients)",
        [KEPT_KV_CACHE] = "attention KV caches (past_key_values) are kept",
        [KEPT_MODELS] = "models built during the run are kept (their parameters)",
        [KEPT_SCORES] = "each generate() output keeps every new token's scores (output_scores=True)"};
    snprintf(dst, n, what[kind], unit); /* formats with one %s or none */
}

/* Of the blocks live at `at`: those the window's steps but the last made
 * (la's range) against those made before the history that are neither
 * weights, optimizer state nor workspaces. Returns the bytes of the latter
 * in the sizes they repeat, where they repeat what the steps kept
 * (md_repeats_hold, *times as there); else 0. */
static uint64_t window_repeats(fctx *c, long at, const leak_arg *la, double *times)
{
    const md_live_set *ls = live_at(c, at);
    md_repeats r = {0};
    uint64_t before;
    for (size_t i = 0; ls && i < ls->n; i++) {
        const md_live *l = &ls->live[i];
        if (l->alloc_index < 0 && (l->category == MD_CAT_OTHER || l->category == MD_CAT_ACTIVATION))
            md_repeats_before(&r, l->block_size);
        else if (l->alloc_index > la->after && l->alloc_index <= la->until &&
                 l->category != MD_CAT_WORKSPACE)
            md_repeats_kept(&r, l->block_size);
    }
    int hold = md_repeats_hold(&r, &before, times);
    md_repeats_free(&r);
    return hold ? before : 0;
}

/* A window of the training (a ring buffer that overflowed, a recording
 * started mid-run) too short for the rule's 3 steps: 2 steps, so one
 * interval. It is a leak where memory held after zero_grad grew, the first
 * step left at least half of that growth live at the end, and the blocks
 * made before the window (not weights, state or workspaces) hold the sizes
 * it left, each as often at least: the steps before it kept theirs the
 * same way. An OOM dump's ring buffer often holds only the last steps. */
static void find_window_leak(fctx *c, const md_held_growth *g)
{
    if (c->nit != 2 || md_analysis_indicators(c->a)->first_step_recorded ||
        md_analysis_call_site(c->a) || g->ups != 1 || growth_follows_inputs(c))
        return;
    long last = c->it[1].after_zero;
    leak_arg la = {.after = c->it[0].fwd_start, .until = c->it[0].after_zero};
    double times;
    uint64_t before = window_repeats(c, last, &la, &times);
    uint64_t peak = md_replay_peak_allocated(c->r);
    if (!before)
        return;
    md_finding *f = add(c, "leak", g->sum + (double)before >= 0.25 * (double)peak
                                       ? MD_SEV_CRITICAL : MD_SEV_WARNING, (uint64_t)g->sum);
    if (!f)
        return;
    uint64_t kept = collect_sites(c, f, last, retained_pred, &la);
    size_t nstacks = la.nomem ? SIZE_MAX : count_stacks(la.fstacks, la.nf, md_snapshot_nstacks(c->s));
    free(la.fstacks);
    if (2 * (double)kept < g->sum || la.state_bytes * 2 >= kept) {
        c->n--; /* what the step left is not what grew, or is the optimizer's */
        return;
    }
    leak_kind kind = leak_kind_of(f, kept, &la, nstacks, (double)la.nf);
    char what[128];
    kept_what(what, sizeof what, kind, "step");
    MD_SUMMARY(f, "memory grows by %.1f MiB every step and is never freed: %s",
               md_mib((uint64_t)g->sum), what);
    MD_EVIDENCE(f, "the recorded history begins in step %d's work (a ring buffer's window, or "
                "a recording started mid-run): 2 whole steps; allocated after zero_grad grows "
                "by %.1f MiB from step %d to step %d", c->it[0].number - 1,
                md_mib((uint64_t)g->sum), c->it[0].number, c->it[1].number);
    if (nstacks != SIZE_MAX)
        MD_EVIDENCE(f, "%.1f MiB allocated in step %d is still live after the last step, "
                    "%.1f MiB of it made by its forward pass: %zu allocations from %zu call "
                    "stacks", md_mib(kept), c->it[0].number, md_mib(la.forward_bytes), la.nf,
                    nstacks);
    MD_EVIDENCE(f, "%.1f MiB made before the recorded history, not weights, optimizer state or "
                "workspaces, is still live after the last step, in the sizes step %d left, each "
                "%.1f times over at least: the steps before the window kept theirs the same way",
                md_mib(before), c->it[0].number, times);
    MD_EVIDENCE(f, "the growth is %.1f%% of the peak (%.1f MiB) per step; with what came before "
                "the window, %.1f MiB is held", 100.0 * g->sum / (double)peak, md_mib(peak),
                md_mib((uint64_t)(g->sum + (double)before)));
    leak_advice(c, f, kind, g->sum, "step");
}

static void find_leak(fctx *c)
{
    if (c->nit < MIN_LEAK_STEPS) {
        md_held_growth g = held_growth(c);
        find_window_leak(c, &g);
        return;
    }
    uint64_t peak = md_replay_peak_allocated(c->r);
    md_held_growth g = held_growth(c);
    size_t nd = c->nit - 1, ups = md_held_growth_leak(&g);
    double sum = g.sum, lo = g.lo, hi = g.hi;
    if (!ups) {
        find_small_leak(c, &g);
        return;
    }
    if (growth_follows_inputs(c))
        return;
    if (md_analysis_call_site(c->a) && ooms_in(c, -1, (long)md_replay_nevents(c->r) - 1) >= 2)
        return; /* the calls compared are attempts that ran out of memory: the oom findings' */
    double per = sum / (double)nd;
    md_finding *f = add(c, "leak", sum >= 0.25 * (double)peak ? MD_SEV_CRITICAL : MD_SEV_WARNING,
                        (uint64_t)per);
    if (!f)
        return;
    leak_arg la;
    size_t nstacks;
    uint64_t kept = collect_kept(c, f, 0, &la, &nstacks);
    if (state_growth(c, kept, &la)) {
        c->n--; /* said by the optimizer_state finding */
        c->state_grew = kept;
        return;
    }
    leak_kind kind = leak_kind_of(f, kept, &la, nstacks, kept_per_step(c, &la));
    const char *unit = leak_unit(c);
    char what[128];
    kept_what(what, sizeof what, kind, unit);
    if (ups == nd)
        MD_SUMMARY(f, "memory grows by %.1f MiB every %s and is never freed: %s",
                   md_mib((uint64_t)per), unit, what);
    else
        MD_SUMMARY(f, "memory grows in %zu of %zu %ss, %.1f MiB a %s on average, and is never "
                   "freed: %s", ups, nd, unit, md_mib((uint64_t)per), unit, what);
    say_compared(c, f);
    if (ups == nd)
        MD_EVIDENCE(f, "allocated %s grows in every one of %zu %ss: %.1f MiB per %s "
                    "(min %.1f, max %.1f), %.1f MiB in total", leak_point(c), nd, unit,
                    md_mib((uint64_t)per), unit, lo / MIB, hi / MIB, sum / MIB);
    else
        MD_EVIDENCE(f, "allocated %s grows in %zu of %zu %ss and never falls, the "
                    "last time in the run's last third: %.1f MiB in total, %.1f MiB a %s on "
                    "average (something done every few %ss keeps what it made)",
                    leak_point(c), ups, nd, unit, sum / MIB, md_mib((uint64_t)per), unit, unit);
    say_kept(c, f, unit, kept, &la, kind, nstacks);
    MD_EVIDENCE(f, "the growth is %.1f%% of the peak (%.1f MiB) per %s",
             100.0 * per / (double)peak, md_mib(peak), unit);
    leak_advice(c, f, kind, per, unit);
}

/* ---- optimizer state and parameters --------------------------------------- */

typedef struct cat_arg {
    md_category cat;
    long lo, hi;       /* alloc index range (lo, hi]; hi < 0 = any */
    size_t count;
} cat_arg;

static int cat_pred(const fctx *c, const md_live *l, md_category cat, void *arg)
{
    cat_arg *ca = arg;
    (void)c;
    if (cat != ca->cat)
        return 0;
    if (ca->hi >= 0 && (l->alloc_index <= ca->lo || l->alloc_index > ca->hi))
        return 0;
    ca->count++;
    return 1;
}

static uint64_t category_bytes(fctx *c, long index, md_category cat)
{
    md_finding scratch;
    memset(&scratch, 0, sizeof scratch);
    cat_arg ca = {cat, 0, -1, 0};
    return collect_sites(c, &scratch, index, cat_pred, &ca);
}

static double expected_state_multiple(const char *opt)
{
    static const struct { const char *name; double x; } known[] = {
        {"AdamW", 2}, {"Adam", 2}, {"Adam/AdamW", 2}, {"Adamax", 2}, {"NAdam", 2}, {"RAdam", 2},
        {"SGD", 1}, {"Adagrad", 1}, {"RMSprop", 1}, {"Adadelta", 2}, {"Rprop", 2}, {"Muon", 1},
        {"SparseAdam", 2}};
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (!strcmp(opt, known[i].name))
            return known[i].x;
    return 0;
}

/* Whether FSDP or DTensor (tensor parallelism) sharded the parameters live
 * at index: the optimizer state is then this rank's shard already. */
static int params_sharded(fctx *c, long index)
{
    const md_live_set *ls = live_at(c, index);
    for (size_t i = 0; ls && i < ls->n; i++)
        if (ls->live[i].category == MD_CAT_PARAMETER &&
            (md_stack_tags(md_analysis_cache(c->a), c->s, ls->live[i].stack) & MD_TAG_SHARDED))
            return 1;
    return 0;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The requested sizes of the parameters live at end, sorted, into *out
 * (to free); their count. */
static size_t param_sizes(fctx *c, long end, uint64_t **out)
{
    const md_live_set *ls = live_at(c, end);
    size_t n = 0;
    *out = ls && ls->n ? malloc(ls->n * sizeof **out) : NULL;
    for (size_t i = 0; *out && i < ls->n; i++)
        if (ls->live[i].category == MD_CAT_PARAMETER)
            (*out)[n++] = ls->live[i].requested;
    if (n)
        qsort(*out, n, sizeof **out, cmp_u64);
    return n;
}

/* Gradients no optimizer steps: at the end of the last step, the
 * gradient tensors made in the first step and kept since, where the last
 * step's zero_grad freed others (set_to_none: the optimizer's own). A
 * model the backward runs through though nothing trains it: a teacher or
 * a reference model run without no_grad, its parameters left
 * requires_grad (eval() freezes nothing). Their bytes; 0 where zero_grad
 * freed none (set_to_none=False keeps every gradient: nothing to tell). */
static uint64_t untrained_grads(fctx *c, size_t *count)
{
    *count = 0;
    if (c->nst < 2)
        return 0;
    const md_step *last = &c->st[c->nst - 1], *first = &c->st[0];
    /* zero_grad frees nothing but gradients: what it freed is what fell
     * (a live set there would cost a replay) */
    if (md_replay_at(c->r, last->after_optim).allocated <
        md_replay_at(c->r, last->after_zero).allocated + (1 << 20))
        return 0;
    const md_live_set *ls = live_at(c, last->after_zero);
    uint64_t kept = 0, *sizes;
    size_t ns = param_sizes(c, last->after_zero, &sizes);
    for (size_t k = 0; ns && ls && k < ls->n; k++) {
        const md_live *l = &ls->live[k];
        if (l->category == MD_CAT_GRADIENT && l->alloc_index > first->after_forward &&
            l->alloc_index <= first->after_zero &&
            bsearch(&l->requested, sizes, ns, sizeof *sizes, cmp_u64)) {
            kept += l->requested; /* a parameter's size: its gradient */
            ++*count;
        }
    }
    free(sizes);
    return kept >= UNTRAINED_GRADS_MIN ? kept : 0;
}

/* The bytes of the parameters that are trained, where a part is not (a
 * frozen base under LoRA adapters, a frozen backbone or reference model):
 * the gradients the last whole iteration's backward allocated (where
 * optimizers step in turn, each one's: a GAN's generator step accumulates
 * into the discriminator's gradients, made in its own backward), each the
 * size of a parameter. A frozen part when they are under 90% of all
 * parameter bytes and the state agrees (state / the optimizer's multiple
 * within 10% of them: a sparse gradient, gradients accumulated in place or
 * DataParallel's reduction count short, and the state then says all are
 * trained); under half where the multiple is unknown. Else 0 and the
 * optimizer is judged against every parameter. Gradients kept as views of
 * DDP's buckets are not allocated in the backward: 0. (Each of the
 * backward's allocations categorized alone: a live set there would cost a
 * replay.) */
static uint64_t last_grad_bytes(fctx *c, long end)
{
    const md_step *last = c->nit ? &c->it[c->nit - 1] : &c->st[c->nst - 1];
    const md_event *ev = md_replay_events(c->r);
    uint64_t *sizes, grads = 0;
    size_t ns = param_sizes(c, end, &sizes);
    for (long i = last->after_forward + 1; ns && i >= 0 && i <= last->after_backward; i++) {
        md_live l = {.requested = ev[i].size, .alloc_index = i, .stack = ev[i].stack};
        if (ev[i].action == MD_ACT_ALLOC && md_categorize(c->a, &l) == MD_CAT_GRADIENT &&
            bsearch(&ev[i].size, sizes, ns, sizeof *sizes, cmp_u64))
            grads += ev[i].size;
    }
    free(sizes);
    return grads;
}

static uint64_t trained_bytes(fctx *c, uint64_t params, uint64_t state, uint64_t grads)
{
    double want = expected_state_multiple(md_analysis_optimizer(c->a));
    double g = (double)grads, p = (double)params, per = want > 0 ? (double)state / want : 0;
    if (!grads || g >= p || (want <= 0 && g >= 0.5 * p))
        return 0;
    if (want <= 0)
        return grads;
    if (g < FROZEN_GRADS_SHARE * p)
        return fabs(per - g) > 0.1 * g ? 0 : grads;
    /* a few buffers beside the weights (nanoGPT's causal masks): trained
     * where the state fits the gradients and not all parameters */
    return fabs(per - g) <= 0.02 * g && fabs(per - p) >= 0.05 * p ? grads : 0;
}

typedef struct made_at {
    long index;
    uint64_t bytes;
} made_at;

static int newest_first(const void *a, const void *b)
{
    long x = ((const made_at *)a)->index, y = ((const made_at *)b)->index;
    return x > y ? -1 : x < y;
}

/* Whether the trained parameter bytes (trained) are those of the newest
 * parameters, all made after the first step: the model built last trains,
 * the ones built before it (still referenced) do not. */
static int only_late_train(fctx *c, long end, uint64_t trained)
{
    const md_live_set *ls = live_at(c, end);
    made_at *p = ls && ls->n ? malloc(ls->n * sizeof *p) : NULL;
    size_t n = 0, k = 0;
    for (size_t i = 0; p && i < ls->n; i++)
        if (ls->live[i].category == MD_CAT_PARAMETER)
            p[n++] = (made_at){ls->live[i].alloc_index, ls->live[i].requested};
    if (n)
        qsort(p, n, sizeof *p, newest_first);
    uint64_t newest = 0; /* the newest parameters until they reach the trained bytes */
    for (; k < n && (double)newest < 0.95 * (double)trained; k++)
        newest += p[k].bytes;
    int late = k > 0 && p[k - 1].index > c->st[0].after_zero &&
               fabs((double)newest - (double)trained) <= 0.1 * (double)trained;
    free(p);
    return late;
}

/* Parameters that no longer train but keep their optimizer state: the
 * state matches all the parameters, the last iteration's gradients only
 * the ones made after the first step (a model built mid-run while the
 * earlier one, or its optimizer, is still referenced). Their bytes, or 0. */
static uint64_t stale_params(fctx *c, uint64_t params, uint64_t state, long end, double want,
                             uint64_t grads)
{
    if (want <= 0 || !params || fabs((double)state / want - (double)params) > 0.1 * (double)params)
        return 0;
    if (!grads || (double)grads >= FROZEN_GRADS_SHARE * (double)params)
        return 0;
    return only_late_train(c, end, grads) ? params - grads : 0;
}

/* The optimizer ZeroRedundancyOptimizer wraps, from the frames of the
 * state's allocations live at end ("" when none says). */
static const char *inner_optimizer(fctx *c, long end)
{
    const md_live_set *ls = live_at(c, end);
    for (size_t i = 0; ls && i < ls->n; i++) {
        const char *o = ls->live[i].category == MD_CAT_OPTIMIZER_STATE
                            ? md_optimizer_from_stack(c->s, ls->live[i].stack) : NULL;
        if (o)
            return o;
    }
    return "";
}

static int is_zero(const char *opt)
{
    return !strcmp(opt, "ZeroRedundancyOptimizer");
}

/* The state an optimizer keeps beyond its default buffers, where an option
 * adds one: the variant whose multiple the measured ratio matches (within
 * 10%), or NULL (the default, expected_state_multiple). */
typedef struct state_variant {
    const char *opt;
    double x;
    const char *what, *option;
} state_variant;

static const state_variant *state_variant_of(const char *opt, double ratio)
{
    static const state_variant v[] = {
        {"Adam", 3, "exp_avg, exp_avg_sq and max_exp_avg_sq", "amsgrad=True"},
        {"AdamW", 3, "exp_avg, exp_avg_sq and max_exp_avg_sq", "amsgrad=True"},
        {"Adam/AdamW", 3, "exp_avg, exp_avg_sq and max_exp_avg_sq", "amsgrad=True"},
        {"RMSprop", 2, "square_avg and momentum_buffer (or grad_avg)",
         "momentum > 0 (or centered=True)"},
        {"RMSprop", 3, "square_avg, momentum_buffer and grad_avg", "momentum > 0 and centered=True"}};
    for (size_t i = 0; ratio > 0 && i < sizeof v / sizeof v[0]; i++)
        if (!strcmp(opt, v[i].opt) && fabs(ratio / v[i].x - 1) < 0.1)
            return &v[i];
    return NULL;
}

/* What this optimizer's state should be, as evidence. */
static void say_state_expected(fctx *c, md_finding *f, const char *opt, double ratio,
                               const char *whose, int has_params, long end)
{
    const char *inner = is_zero(opt) ? inner_optimizer(c, end) : opt;
    double want = expected_state_multiple(inner);
    const state_variant *var = is_zero(opt) || !has_params ? NULL : state_variant_of(opt, ratio);
    if (var) {
        MD_EVIDENCE(f, "%s with %s keeps %.0f x the %sparameters (%s)", opt, var->option, var->x,
                    whose, var->what);
        return;
    }
    if (is_zero(opt) && want > 0 && has_params && ratio > 0)
        MD_EVIDENCE(f, "ZeroRedundancyOptimizer shards %s's state (%.0f x the %sparameters) across "
                    "the data-parallel ranks: this rank keeps its share, %.2f x, about 1/%.0f "
                    "of it", inner, want, whose, ratio, want / ratio);
    else if (is_zero(opt))
        MD_EVIDENCE(f, "ZeroRedundancyOptimizer shards the wrapped optimizer's state across the "
                    "data-parallel ranks: this is this rank's share");
    else if (want > 0 && has_params)
        MD_EVIDENCE(f, "%s's expected state is %.0f x the %sparameters (%s)", opt, want, whose,
                 want >= 2 ? "two moment buffers, exp_avg and exp_avg_sq" : "one buffer, e.g. momentum");
    else if (!strcmp(opt, "LBFGS"))
        MD_EVIDENCE(f, "L-BFGS keeps 2 x history_size past updates (old_dirs, old_stps) plus a few "
                    "flat copies of the parameters: it grows until the history is full "
                    "(history_size defaults to 100, 200 x the parameters)");
    else if (has_params && ratio >= 0.5 && opt[0])
        MD_EVIDENCE(f, "%s is not an optimizer memdiag knows: %.2f x is about %.0f buffer%s of each "
                    "parameter's size", opt, ratio, floor(ratio + 0.5),
                    floor(ratio + 0.5) == 1 ? "" : "s");
}

static void say_state_advice(fctx *c, md_finding *f, const char *opt, uint64_t state, long end)
{
    const char *sharder = is_zero(opt) ? "ZeroRedundancyOptimizer" : params_sharded(c, end)
                                         ? "FSDP or tensor parallelism" : NULL;
    const char *with = sharder && !is_zero(opt) ? " with the parameters" : "";
    if (!strcmp(opt, "LBFGS"))
        MD_ADVICE(f, "Expected for L-BFGS: a smaller history_size shrinks it by 2 x the parameters "
                  "an entry, at some convergence speed (of the %.1f MiB).", md_mib(state));
    else if (sharder)
        MD_ADVICE(f, "Expected for this optimizer; %s already shards it%s (this is this rank's "
                  "share). To shrink it further: shard over more ranks, an 8-bit optimizer (about "
                  "a quarter of fp32 Adam state), or a stateless optimizer; saving up to %.1f MiB.",
                  sharder, with, md_mib(state));
    else
        MD_ADVICE(f, "%s To shrink it: shard it across data-parallel ranks (ZeRO-1 / FSDP: divided "
                  "by the world size), an 8-bit optimizer (about a quarter of fp32 Adam state), or "
                  "a stateless optimizer; saving up to %.1f MiB.",
                  expected_state_multiple(opt) > 0 ? "Expected for this optimizer."
                  : "Whether this is expected depends on the optimizer's design (see its buffers).",
                  md_mib(state));
}

/* An option's buffer, said before the advice: what dropping it saves. */
static void say_variant_advice(md_finding *f, const char *opt, double ratio, uint64_t params)
{
    const state_variant *var = params ? state_variant_of(opt, ratio) : NULL;
    if (!var)
        return;
    double base = expected_state_multiple(opt);
    advice_first(f, "%s adds %.0f x the parameters to %s's default (%.0f x): without it, %.1f MiB "
                 "less.", var->option, var->x - base, opt, base, (var->x - base) * md_mib(params));
}

/* The values a and b (both ascending) have in common, each matched once:
 * their sum, and how many in *count. */
static uint64_t common_sizes(const uint64_t *a, size_t na, const uint64_t *b, size_t nb,
                             size_t *count)
{
    uint64_t sum = 0;
    size_t i = 0, j = 0;
    *count = 0;
    while (i < na && j < nb) {
        if (a[i] == b[j])
            sum += a[i], i++, j++, ++*count;
        else if (a[i] < b[j])
            i++;
        else
            j++;
    }
    return sum;
}

/* A parameter no frame names (raw tensors, fp32 master copies). */
static int unnamed_param(fctx *c, const md_live *l)
{
    return l->category == MD_CAT_PARAMETER && md_analysis_unnamed_param(c->a, l);
}

/* fp32 master weights beside 16-bit parameters (apex O2's way, a
 * hand-rolled mixed precision): tensors made outside the steps (inputs,
 * other, or parameters no frame names) of twice a parameter's size, one
 * for each parameter, covering 90% of their bytes. Their bytes (0: none),
 * the site of the largest in *site. */
static uint64_t master_weights(fctx *c, long end, uint64_t params, md_finding_site *site)
{
    const md_live_set *ls = live_at(c, end);
    uint64_t *psz = NULL, *got = ls && ls->n ? malloc(ls->n * sizeof *got) : NULL;
    size_t np = param_sizes(c, end, &psz), n = 0, matched;
    uint64_t largest = 0;
    for (size_t k = 0; got && k < ls->n; k++) {
        const md_live *l = &ls->live[k];
        if ((l->category != MD_CAT_INPUT && l->category != MD_CAT_OTHER && !unnamed_param(c, l)) ||
            l->requested % 2)
            continue;
        got[n++] = l->requested / 2;
        if (l->requested > largest) {
            largest = l->requested;
            const md_frame *fr = md_stack_user_frame(md_analysis_cache(c->a), c->s, l->stack);
            if (fr)
                md_frame_label(c->s, fr, site->site, sizeof site->site);
        }
    }
    if (n)
        qsort(got, n, sizeof *got, cmp_u64);
    uint64_t covered = got ? common_sizes(psz, np, got, n, &matched) : 0;
    site->count = got ? (uint32_t)matched : 0;
    free(got);
    free(psz);
    return params && (double)covered >= 0.9 * (double)params ? 2 * covered : 0;
}

/* Whether a stack runs inside torch.load (its frames' tags, cached). */
static int in_torch_load(const md_analysis *a, uint32_t stack)
{
    return (md_stack_tags(md_analysis_cache(a), md_analysis_snapshot(a), stack) &
            MD_TAG_TORCH_LOAD) != 0;
}

/* Optimizer state a checkpoint brought (Optimizer.load_state_dict keeps
 * the loaded tensors where their device and dtype match): no optimizer
 * step made any, yet tensors loaded by torch.load and live at the end
 * match each parameter's size `want` times over. Says it as the state,
 * with the rest of that checkpoint still held. 0 where it does not. */
static int loaded_state(fctx *c, long end, uint64_t params, const char *opt)
{
    double want = expected_state_multiple(opt);
    const md_live_set *ls = live_at(c, end);
    if (want < 1 || want > 3 || !params || !ls || !ls->n)
        return 0;
    uint64_t *psz = NULL, *got = malloc(ls->n * sizeof *got), loaded = 0;
    size_t np = param_sizes(c, end, &psz), n = 0, matched = 0, times = (size_t)want;
    uint64_t *wanted = psz && np ? malloc(np * times * sizeof *wanted) : NULL;
    md_finding_site site = {"", 0, 0};
    for (size_t k = 0; got && k < ls->n; k++) {
        const md_live *l = &ls->live[k];
        if (l->category == MD_CAT_PARAMETER || !in_torch_load(c->a, l->stack))
            continue;
        got[n++] = l->requested;
        loaded += l->block_size;
        const md_frame *fr = site.site[0] ? NULL
                             : md_stack_user_frame(md_analysis_cache(c->a), c->s, l->stack);
        if (fr)
            md_frame_label(c->s, fr, site.site, sizeof site.site);
    }
    for (size_t k = 0; wanted && k < np * times; k++) /* each size want times, ascending */
        wanted[k] = psz[k / times];
    if (n)
        qsort(got, n, sizeof *got, cmp_u64);
    uint64_t state = wanted && n ? common_sizes(wanted, np * times, got, n, &matched) : 0;
    free(got);
    free(psz);
    free(wanted);
    if ((double)state < 0.9 * want * (double)params)
        return 0;
    md_finding *f = add(c, "optimizer_state", MD_SEV_INFO, state);
    if (!f)
        return 0;
    site.bytes = loaded;
    site.count = (uint32_t)n;
    f->sites[f->nsites++] = site;
    MD_SUMMARY(f, "%s keeps %.1f MiB of state, %.2f x the parameter bytes, loaded from a "
               "checkpoint (torch.load at %s)", opt, md_mib(state), (double)state / (double)params,
               site.site);
    MD_EVIDENCE(f, "no optimizer step made state; %zu tensors torch.load made and still live "
                "match each parameter's size %g times: %.1f MiB, the state "
                "Optimizer.load_state_dict took over (it keeps loaded tensors whose device and "
                "dtype already match)", matched, want, md_mib(state));
    MD_EVIDENCE(f, "parameters: %.1f MiB; state / parameters = %.2f", md_mib(params),
                (double)state / (double)params);
    if (loaded > state + (1 << 20))
        MD_EVIDENCE(f, "that checkpoint holds %.1f MiB more, still live: what load_state_dict "
                    "copied into the model (its weights) stays while the checkpoint is referenced",
                    md_mib(loaded - state));
    say_state_advice(c, f, opt, state, end);
    if (loaded > state + (1 << 20))
        advice_first(f, "del the checkpoint once loaded (or load it with map_location=\"cpu\"): "
                     "%.1f MiB.", md_mib(loaded - state));
    return 1;
}

/* The optimizers whose state is live at end, by the files their steps
 * run in (Muon for the hidden matrices beside AdamW for the rest). */
#define MAX_OWNERS 4
typedef struct owners {
    const char *name[MAX_OWNERS];
    uint64_t bytes[MAX_OWNERS];
    size_t n;
    const char *last; /* the last named, in the live set's order */
} owners;

static void state_owners(fctx *c, long end, owners *w)
{
    const md_live_set *ls = live_at(c, end);
    uint32_t seen[16]; /* a few stacks make all the state: each looked up once */
    const char *seen_name[16];
    size_t nseen = 0;
    memset(w, 0, sizeof *w);
    for (size_t i = 0; ls && i < ls->n; i++) {
        const md_live *l = &ls->live[i];
        if (l->category != MD_CAT_OPTIMIZER_STATE)
            continue;
        size_t j = 0;
        while (j < nseen && seen[j] != l->stack)
            j++;
        const char *o = j < nseen ? seen_name[j] : md_optimizer_from_stack(c->s, l->stack);
        if (j == nseen && nseen < 16) {
            seen[nseen] = l->stack;
            seen_name[nseen++] = o;
        }
        w->last = o ? o : w->last;
        size_t k = 0;
        while (o && k < w->n && strcmp(w->name[k], o))
            k++;
        if (!o || k == MAX_OWNERS)
            continue;
        w->name[k] = o;
        w->bytes[k] += l->block_size;
        w->n += k == w->n;
    }
}

/* The optimizer whose state is live at end, named by its allocations'
 * frames, where that is not the one the annotations named first (opt): an
 * optimizer replaced mid-run (SGD for a warm-up, then AdamW); else opt. */
static const char *state_owner(fctx *c, long end, const char *opt)
{
    if (is_zero(opt))
        return opt;
    owners w;
    state_owners(c, end, &w);
    for (size_t k = 0; k < w.n; k++)
        if (strstr(w.name[k], opt) || strstr(opt, w.name[k]))
            return opt;
    return w.last && opt[0] ? w.last : opt;
}

/* Several optimizers, each over its own parameters, keep the state
 * together: each one's share, and whether their multiples account for the
 * parameters between them. 0 where one optimizer holds nine tenths. */
static int mixed_state(fctx *c, md_finding *f, long end, uint64_t state, uint64_t params,
                       const char *whose)
{
    owners w;
    state_owners(c, end, &w);
    size_t big = 0;
    for (size_t k = 0; k < w.n; k++)
        big += (double)w.bytes[k] >= 0.1 * (double)state;
    if (big < 2)
        return 0;
    char names[96] = "";
    double covered = 0;
    int known = 1;
    for (size_t k = 0, len = 0; k < w.n; k++) {
        double want = expected_state_multiple(w.name[k]);
        if (len < sizeof names)
            len += (size_t)snprintf(names + len, sizeof names - len, "%s%s",
                                    !k ? "" : k + 1 == w.n ? " and " : ", ", w.name[k]);
        if (want > 0)
            MD_EVIDENCE(f, "%s: %.1f MiB, %g x the %.1f MiB of parameters it steps", w.name[k],
                        md_mib(w.bytes[k]), want, md_mib(w.bytes[k]) / want);
        else
            MD_EVIDENCE(f, "%s: %.1f MiB (its multiple is not known to memdiag)", w.name[k],
                        md_mib(w.bytes[k]));
        covered += want > 0 ? md_mib(w.bytes[k]) / want : 0;
        known &= want > 0;
    }
    MD_SUMMARY(f, "%s keep %.1f MiB of state together, %.2f x the %sparameter bytes, created at "
               "the first optimizer step", names, md_mib(state),
               params ? (double)state / (double)params : 0, whose);
    if (known && params && fabs(covered / md_mib(params) - 1) < 0.1)
        MD_EVIDENCE(f, "%.1f MiB of parameters between them, against %.1f MiB of %sparameters: "
                    "each has one optimizer's state, as expected", covered, md_mib(params), whose);
    else if (known && params)
        MD_EVIDENCE(f, "%.1f MiB of parameters between them, against %.1f MiB of %sparameters",
                    covered, md_mib(params), whose);
    return 1;
}

/* The optimizer's step ran out of memory while it made its state: what
 * is live is what it made before the error, not what it keeps. */
static void unfinished_state(fctx *c, md_finding *f, const char *opt, uint64_t state,
                             uint64_t params, const char *whose, double want, size_t count)
{
    const char *name = opt[0] ? opt : "the optimizer";
    f->severity = MD_SEV_WARNING;
    if (want > 0 && params)
        MD_SUMMARY(f, "%s had made %.1f MiB of its state when its step ran out of memory; the "
                   "whole is %g x the %sparameter bytes, %.1f MiB", name, md_mib(state), want,
                   whose, want * md_mib(params));
    else
        MD_SUMMARY(f, "%s had made %.1f MiB of its state when its step ran out of memory", name,
                   md_mib(state));
    MD_EVIDENCE(f, "%.1f MiB in %zu allocations made in step %d's optimizer step before the "
                "error", md_mib(state), count, c->state_oom->number);
    if (params)
        MD_EVIDENCE(f, "parameters: %.1f MiB (%s); state made / parameters = %.2f",
                    md_mib(params), whose[0] ? "those that get gradients" : "all",
                    (double)state / (double)params);
    MD_ADVICE(f, "See the oom finding: the state did not fit beside the weights and gradients.");
}

/* The bytes of the tensors (as requested, not the allocator's rounded
 * blocks) of category cat live after event index, those pred says yes to
 * (NULL: all). */
static uint64_t tensor_bytes(fctx *c, long index, md_category cat,
                             int (*pred)(fctx *, const md_live *))
{
    const md_live_set *ls = live_at(c, index);
    uint64_t sum = 0;
    for (size_t k = 0; ls && k < ls->n; k++)
        if (ls->live[k].category == cat && (!pred || pred(c, &ls->live[k])))
            sum += ls->live[k].requested;
    return sum;
}

static int made_before_history(fctx *c, const md_live *l)
{
    (void)c;
    return l->alloc_index < 0;
}

/* The optimizer state against the parameters it is kept for. Multiples
 * are of tensor bytes: the allocator rounds a 5.5 MiB moment buffer up to
 * a 6 MiB block, which would read as a state beyond the optimizer's. */
typedef struct state_measure {
    uint64_t tensors; /* its tensors' bytes */
    uint64_t params;  /* the parameters it is measured against */
    uint64_t all;     /* all parameters' bytes */
    uint64_t named;   /* parameters frames name (not fp32 master copies) */
    uint64_t masters, trained; /* fp32 master weights, the trained part; 0: none */
    uint64_t grads;   /* the last iteration's gradients, a parameter's size each */
    double ratio;
    md_finding_site msite; /* the largest master weight's */
} state_measure;

static void measure_state(fctx *c, long end, double want, state_measure *m)
{
    memset(m, 0, sizeof *m);
    snprintf(m->msite.site, sizeof m->msite.site, "an unnamed site");
    m->tensors = tensor_bytes(c, end, MD_CAT_OPTIMIZER_STATE, NULL);
    m->all = tensor_bytes(c, end, MD_CAT_PARAMETER, NULL);
    double st = (double)m->tensors;
    /* twice the multiple expected over the parameters frames name: the
     * state may be of fp32 master weights beside them */
    m->named = m->all - tensor_bytes(c, end, MD_CAT_PARAMETER, unnamed_param);
    if (want > 0 && m->named && fabs(st / (double)m->named / (2 * want) - 1) < 0.15)
        m->masters = master_weights(c, end, m->named, &m->msite);
    if (m->masters && fabs(st / (double)m->masters / want - 1) >= 0.1)
        m->masters = 0;
    m->grads = last_grad_bytes(c, end);
    m->trained = m->masters ? 0 : trained_bytes(c, m->all, m->tensors, m->grads);
    m->params = m->masters ? m->named : m->trained ? m->trained : m->all;
    uint64_t against = m->masters ? m->masters : m->params;
    m->ratio = against ? st / (double)against : 0;
}

/* An optimizer constructed inside the loop: every step after the first
 * makes the whole state again in its optimizer step, and none of the
 * step before's is live as its forward begins (a new optimizer starts
 * with none, the old one's freed with it). The steps that did, where all
 * after the first did (two or more); else 0. */
static size_t state_remade(fctx *c, uint64_t state)
{
    if (c->nst < 3 || !state)
        return 0;
    for (size_t k = 1; k < c->nst; k++) /* the state's bytes freed between steps: cheap */
        if ((double)md_replay_at(c->r, c->st[k - 1].after_zero).allocated -
                (double)md_replay_at(c->r, c->st[k].fwd_start).allocated < 0.9 * (double)state)
            return 0;
    for (size_t k = 1; k < c->nst; k++) {
        const md_step *st = &c->st[k];
        md_finding scratch;
        memset(&scratch, 0, sizeof scratch);
        cat_arg ca = {MD_CAT_OPTIMIZER_STATE, st->after_backward, st->after_optim, 0};
        uint64_t made = collect_sites(c, &scratch, st->after_optim, cat_pred, &ca);
        uint64_t before = category_bytes(c, st->fwd_start, MD_CAT_OPTIMIZER_STATE);
        if ((double)made < 0.9 * (double)state || (double)before > 0.1 * (double)state)
            return 0;
    }
    return c->nst - 1;
}

static void find_optimizer_state(fctx *c)
{
    if (!c->nst)
        return;
    long end = c->st[c->nst - 1].after_zero;
    md_finding probe;
    memset(&probe, 0, sizeof probe);
    cat_arg ca = {MD_CAT_OPTIMIZER_STATE, -1, -1, 0};
    uint64_t state = collect_sites(c, &probe, end, cat_pred, &ca);
    const char *first = md_analysis_optimizer(c->a), *opt = state_owner(c, end, first);
    double want = expected_state_multiple(opt);
    state_measure m;
    measure_state(c, end, want, &m);
    uint64_t masters = m.masters, trained = m.trained, params = m.params, named = m.named;
    /* ignore per-parameter step counters and other crumbs */
    if (state < (1 << 20) || (params && (double)state < 0.05 * (double)params)) {
        loaded_state(c, end, params, md_analysis_optimizer(c->a));
        return;
    }
    double ratio = m.ratio;
    md_finding_site msite = m.msite;
    const char *whose = masters ? "fp32 master " : trained ? "trained " : "";
    uint64_t peak = md_replay_peak_allocated(c->r);
    md_finding *f = add(c, "optimizer_state",
                        (double)state > 0.3 * (double)peak ? MD_SEV_WARNING : MD_SEV_INFO, state);
    if (!f)
        return;
    memcpy(f->sites, probe.sites, sizeof f->sites);
    f->nsites = probe.nsites;
    /* a ring buffer that overflowed keeps the state's blocks and frames, not its making */
    int before = (double)tensor_bytes(c, end, MD_CAT_OPTIMIZER_STATE, made_before_history) >=
                 0.9 * (double)m.tensors;
    const char *made = c->state_grew ? "made as parameters joined the optimizer"
                       : before      ? "made before the recorded history began"
                                     : "created at the first optimizer step";
    if (c->state_oom) {
        unfinished_state(c, f, opt, state, params, whose, want, ca.count);
        return;
    }
    size_t remade = state_remade(c, state);
    if (remade) {
        f->severity = MD_SEV_WARNING;
        MD_SUMMARY(f, "%s makes its %.1f MiB of state anew at every step: the optimizer is "
                   "constructed inside the loop, and its state restarts each step",
                   opt[0] ? opt : "the optimizer", md_mib(state));
        MD_EVIDENCE(f, "in each of steps %d to %d the optimizer step made the whole state again, "
                    "and none of the step before's was live as its forward began",
                    c->st[1].number, c->st[c->nst - 1].number);
    } else if (params)
        MD_SUMMARY(f, "%s%skeeps %.1f MiB of state, %.2f x the %sparameter bytes, %s",
                opt[0] ? opt : "the optimizer", " ", md_mib(state), ratio, whose, made);
    else
        MD_SUMMARY(f, "%s%skeeps %.1f MiB of state %s", opt[0] ? opt : "the optimizer", " ",
                   md_mib(state), made);
    if (before)
        MD_EVIDENCE(f, "%.1f MiB in %zu allocations made before the recorded history began, "
                    "the optimizer's by their frames or their sizes (each a parameter's, as many "
                    "as its multiple says), still live at the end of the last step",
                    md_mib(state), ca.count);
    else
        MD_EVIDENCE(f, "%.1f MiB in %zu allocations made during the optimizer step and live after "
                    "it, still live at the end of the last step", md_mib(state), ca.count);
    if ((double)state > 1.02 * (double)m.tensors)
        MD_EVIDENCE(f, "its tensors are %.1f MiB: the allocator's blocks round them up by %.1f MiB "
                    "(a large block is not split where 1 MiB or less would remain)",
                    md_mib(m.tensors), md_mib(state - m.tensors));
    /* several optimizers step in turn wherever several keep state */
    if (!masters && md_analysis_period(c->a) > 1 && mixed_state(c, f, end, state, params, whose)) {
        say_state_advice(c, f, opt, state, end);
        return;
    }
    if (masters)
        MD_EVIDENCE(f, "parameters: %.1f MiB, 16-bit; fp32 master weights beside them: %.1f MiB in "
                    "%zu tensors, each twice a parameter's size (the largest at %s); state / "
                    "master weights = %.2f", md_mib(named), md_mib(masters),
                    (size_t)msite.count, msite.site, ratio);
    else if (trained && only_late_train(c, end, trained))
        MD_EVIDENCE(f, "parameters: %.1f MiB, of which %.1f MiB get gradients, those made after the "
                    "first step (a model built mid-run); the rest belong to models built earlier "
                    "that no longer train; state / trained parameters = %.2f", md_mib(m.all),
                    md_mib(trained), ratio);
    else if (trained && c->untrained)
        MD_EVIDENCE(f, "parameters: %.1f MiB, of which %.1f MiB train; of the rest, %.1f MiB get "
                    "gradients this optimizer does not step (see the activations finding); "
                    "state / trained parameters = %.2f", md_mib(m.all), md_mib(trained),
                    md_mib(c->untrained), ratio);
    else if (trained)
        MD_EVIDENCE(f, "parameters: %.1f MiB, of which %.1f MiB get gradients (the rest none: frozen "
                    "weights, or buffers such as attention masks); "
                    "state / trained parameters = %.2f", md_mib(m.all), md_mib(trained), ratio);
    else if (params)
        MD_EVIDENCE(f, "parameters: %.1f MiB; state / parameters = %.2f", md_mib(params), ratio);
    if (opt != first)
        MD_EVIDENCE(f, "the optimizer changed during the run: %s stepped first; the state live at "
                    "the end is %s's", first, opt);
    say_state_expected(c, f, opt, ratio, whose, params != 0, end);
    if (c->state_grew)
        MD_EVIDENCE(f, "it grew by %.1f MiB after the first step, in the steps where parameters "
                    "joined the optimizer (add_param_group, layers unfrozen one by one): not a "
                    "leak; it stops when every trained parameter has its state",
                    md_mib(c->state_grew));
    MD_EVIDENCE(f, "this is %.0f%% of the peak allocated (%.1f MiB)",
             100.0 * (double)state / (double)peak, md_mib(peak));
    uint64_t stale = trained || masters ? 0 : stale_params(c, params, state, end, want, m.grads);
    if (stale)
        MD_EVIDENCE(f, "only %.1f MiB of the %.1f MiB of parameters got gradients in the last step, "
                    "those made after the first step (a model built mid-run); the state matches "
                    "all of them: %.1f MiB of parameters and about %.1f MiB of their state no "
                    "longer train, kept by a reference to the earlier model or its optimizer",
                    md_mib(params - stale), md_mib(params), md_mib(stale), want * md_mib(stale));
    say_state_advice(c, f, opt, state, end);
    if (!masters && !trained)
        say_variant_advice(f, opt, ratio, params);
    if (stale)
        advice_first(f, "Drop every reference to the earlier model, its optimizer included (an "
                     "optimizer keeps its parameters and their state: del it too, or reuse one): "
                     "about %.1f MiB.", (1 + want) * md_mib(stale));
    if (remade) /* the cause, not the state's size, is what to change */
        MD_ADVICE(f, "Construct the optimizer once, before the loop: a new one each step starts "
                  "its moments (and a scheduler bound to it) from nothing, so the updates are "
                  "not %s's. Kept across steps, the state adds %.1f MiB to every step's forward "
                  "and backward: budget for it.", opt[0] ? opt : "the optimizer's",
                  md_mib(state));
    if (masters) /* the 16-bit copy and its gradients are what autocast saves */
        advice_first(f, "With torch.autocast over fp32 parameters the parameters are the master "
                     "weights: the 16-bit copy and its 16-bit gradients (%.1f MiB here) go.",
                     2 * md_mib(named));
}

/* ---- library workspaces ---------------------------------------------------------- */

static void find_workspace(fctx *c)
{
    md_finding *f = add(c, "library_workspace", MD_SEV_INFO, 0);
    if (!f)
        return;
    cat_arg ca = {MD_CAT_WORKSPACE, 0, -1, 0};
    uint64_t ws = collect_sites(c, f, last_index(c), cat_pred, &ca);
    if (ws < (1 << 20)) {
        c->n--; /* nothing worth reporting */
        return;
    }
    f->bytes = ws;
    int n32 = (int)(ws / (32 << 20));
    MD_SUMMARY(f, "%.1f MiB is cuBLAS/cuDNN workspace, held for the whole run (not optimizer state)",
            md_mib(ws));
    MD_EVIDENCE(f, "%zu never-freed workspace allocation%s, %.1f MiB in total", ca.count,
             ca.count == 1 ? "" : "s", md_mib(ws));
    if (n32 && ws == (uint64_t)n32 * (32 << 20))
        MD_EVIDENCE(f, "%d x 32 MiB: cuBLAS allocates one 32 MiB workspace per handle and stream on "
                    "Hopper (sm90); the forward and the autograd thread use different streams",
                 n32);
    MD_ADVICE(f, "Usually fine. CUBLAS_WORKSPACE_CONFIG=:4096:8 limits each workspace to 32 MiB "
              "(smaller configs such as :16:8 save most of the %.1f MiB at some matmul speed).",
           md_mib(ws));
}

/* ---- activations ----------------------------------------------------------------- */

/* Were any of the forward allocations (lo, index] live at index made
 * inside attention code? Only then is the sequence length part of the
 * advice (not for a convolutional network), and the attention kernel where
 * none was made inside a fused one already: scaled_dot_product_attention,
 * FlexAttention, or nn.MultiheadAttention with need_weights=False (it calls
 * SDPA from C++: no softmax frame under it, where need_weights=True has
 * one). */
enum { ATTN_NONE, ATTN_PYTHON, ATTN_SDPA };

static int attention_in(fctx *c, long index, long lo)
{
    const md_live_set *ls = live_at(c, index);
    int any = 0, fused = 0, mha = 0, mha_softmax = 0;
    for (size_t i = 0; ls && i < ls->n; i++) {
        const md_live *l = &ls->live[i];
        unsigned t = l->category == MD_CAT_ACTIVATION && l->alloc_index > lo
                         ? md_stack_tags(md_analysis_cache(c->a), c->s, l->stack) : 0;
        any |= (t & MD_TAG_ATTENTION) != 0;
        fused |= (t & MD_TAG_ATTENTION) && (t & MD_TAG_SDPA);
        mha |= (t & MD_TAG_MHA) != 0;
        mha_softmax |= (t & MD_TAG_MHA) && (t & MD_TAG_SOFTMAX);
    }
    if (fused || (mha && !mha_softmax))
        return ATTN_SDPA;
    return any ? ATTN_PYTHON : ATTN_NONE;
}

/* Evidence that the inputs grow: every step's forward pass adds more. */
static void say_inputs_grow(fctx *c, md_finding *f)
{
    const char *unit = leak_unit(c);
    if (c->nit < MIN_LEAK_STEPS || !forward_grows(c))
        return;
    md_held_growth g = held_growth(c);
    MD_EVIDENCE(f, "the forward pass grows every %s (%.1f MiB in %s %d, %.1f MiB in %s %d): "
                "the inputs grow%s", unit,
                md_mib((uint64_t)forward_increase(c, 0)), unit, c->it[0].number,
                md_mib((uint64_t)forward_increase(c, c->nit - 1)), unit, c->it[c->nit - 1].number,
                g.ups == g.n
                    ? ", and what a step holds until the next grows with them (not a leak: "
                      "nothing accumulates)" : "");
}

static long first_forward(fctx *c, long from, long to);
static uint64_t made_between(fctx *c, long from, long to, const md_live_set *live,
                             uint32_t *stack);

/* Requested bytes iteration k made before its forward: its input. */
static uint64_t iteration_input(fctx *c, size_t k)
{
    uint32_t stack = 0;
    long from = c->it[k - 1].after_zero;
    return made_between(c, from, first_forward(c, from, c->it[k].after_forward), NULL, &stack);
}

/* Forward passes whose size follows inputs of many sizes (clips or
 * sequences of many lengths) without growing every step: the largest sets
 * the peak. The first iteration is left out (it warms up: workspaces,
 * state), and the larger forward's input must be larger too (layers
 * unfrozen, an optimizer switched: the program changed, not the inputs).
 * Said as evidence; returns whether it was. */
#define VARY_MIN ((uint64_t)64 << 20)
static int say_inputs_vary(fctx *c, md_finding *f)
{
    if (c->nit < MIN_LEAK_STEPS + 1 || forward_grows(c))
        return 0;
    size_t lo = 1, hi = 1;
    for (size_t k = 2; k < c->nit; k++) {
        lo = forward_increase(c, k) < forward_increase(c, lo) ? k : lo;
        hi = forward_increase(c, k) > forward_increase(c, hi) ? k : hi;
    }
    double a = forward_increase(c, lo), b = forward_increase(c, hi);
    if (a <= 0 || b < 1.5 * a || b - a < (double)VARY_MIN)
        return 0;
    uint64_t in_lo = iteration_input(c, lo), in_hi = iteration_input(c, hi);
    if (!in_lo || (double)in_hi < 1.2 * (double)in_lo)
        return 0;
    const char *unit = leak_unit(c);
    int mib = in_lo >= (1u << 20);
    MD_EVIDENCE(f, "the forward pass varies with the inputs: %.1f MiB in %s %d, %.1f MiB in %s %d "
                "(%.1f x; their inputs %.1f and %.1f %s): the largest inputs set the peak",
                md_mib((uint64_t)a), unit, c->it[lo].number, md_mib((uint64_t)b), unit,
                c->it[hi].number, b / a, (double)in_lo / (mib ? 1 << 20 : 1024),
                (double)in_hi / (mib ? 1 << 20 : 1024), mib ? "MiB" : "KiB");
    return 1;
}

/* Which step and phase the peak at event p falls in. */
static void say_peak_step(fctx *c, md_finding *f, long p, uint64_t peak)
{
    for (size_t k = 0; k < c->nst; k++)
        if (p > (k ? c->st[k - 1].after_zero : -1) && p <= c->st[k].after_zero) {
            const md_step *st = &c->st[k];
            MD_EVIDENCE(f, "the peak (%.1f MiB) falls in step %d, %s", md_mib(peak), st->number,
                     p <= st->after_forward ? "at the end of the forward"
                     : p <= st->after_backward ? "during backward"
                     : p > st->after_optim && first_forward(c, st->after_optim, p + 1) <= p
                         ? "in a forward pass after its optimizer step and before the zero_grad "
                           "that closes it (the next iteration's work run ahead of its zero_grad: "
                           "an adversarial attack, a GAN's generator)"
                         : "after backward");
            return;
        }
}

static void activations_advice(md_finding *f, uint64_t act, uint64_t held, int attn)
{
    if (held)
        MD_ADVICE(f, "Free the previous step's tensors before the next forward: the loss or the "
                  "outputs stay referenced until their variables are assigned again (and with "
                  "backward(retain_graph=True) the whole graph with them); `del` them after the "
                  "optimizer step, or drop retain_graph: %.1f MiB off the peak. Then: activation "
                  "checkpointing of the repeated blocks (torch.utils.checkpoint) keeps only block "
                  "inputs and gives back most of the other %.1f MiB for ~30%% more compute.",
                  md_mib(held), md_mib(act));
    else
        MD_ADVICE(f, "Activation checkpointing of the repeated blocks (torch.utils.checkpoint) "
                  "keeps only block inputs and gives back most of the %.1f MiB for ~30%% more "
                  "compute; halving the batch%s halves it; bf16 autocast, where not on yet, halves "
                  "fp32 activations%s", md_mib(act), attn ? " or sequence" : "",
                  attn == ATTN_PYTHON
                      ? "; where attention is written as softmax(q k^T), SDPA (flash / "
                        "memory-efficient) avoids its seq x seq matrix."
                      : ".");
}

/* Whether stacks seq[0..n) are n/runs repetitions of one sequence (9 in
 * 10 positions equal to the same position one repetition on). */
static int periodic(const uint32_t *seq, size_t n, size_t runs)
{
    if (runs < 2 || n % runs)
        return 0;
    size_t period = n / runs, same = 0;
    for (size_t j = 0; j + period < n; j++)
        same += seq[j] == seq[j + period];
    return period > 1 && 10 * same >= 9 * (n - period);
}

/* Whether the forward runs that begin with allocations of `stack` in the
 * step's forward phase are micro-batches: before each run after the first,
 * since the one before began, a new input was made (outside the forward
 * and the loss) and a loss computed. A loss that couples the runs (R-Drop's
 * two passes over one batch, SimCLR's two views) reads both outputs after
 * the last run, and R-Drop's runs share their input. */
static int runs_are_micro_batches(fctx *c, const md_step *st, uint32_t stack)
{
    const md_event *ev = md_replay_events(c->r);
    long prev = -1;
    int input = 0, loss = 0;
    for (long i = st->fwd_start + 1; i <= st->after_forward; i++) {
        if (ev[i].action != MD_ACT_ALLOC)
            continue;
        if (ev[i].stack == stack) {
            if (prev >= 0 && !(input && loss))
                return 0;
            prev = i, input = loss = 0;
            continue;
        }
        unsigned t = ev[i].stack ? md_stack_tags(md_analysis_cache(c->a), c->s, ev[i].stack) : 0;
        loss |= (t & MD_TAG_LOSS) != 0;
        input |= ev[i].stack && !(t & (MD_TAG_FORWARD | MD_TAG_LOSS));
    }
    return 1;
}

/* How many times the forward pass of the step holding event p ran before
 * its first backward, everything it made kept to p: the forward phase's
 * allocations a sequence of call stacks repeated that many times, each
 * repetition's first allocation live at p (losses of micro-batches summed
 * before one backward keep every graph at once; runs_are_micro_batches).
 * 1: once. */
static size_t forward_repeats(fctx *c, long p, md_finding_site *first)
{
    const md_step *st = NULL;
    for (size_t k = 0; k < c->nst && !st; k++)
        if (p <= c->st[k].after_zero)
            st = &c->st[k];
    const md_live_set *ls = st ? live_at(c, p) : NULL;
    if (!ls)
        return 1;
    const md_event *ev = md_replay_events(c->r);
    uint32_t *seq = NULL;
    size_t n = 0, cap = 0, runs = 0, kept = 0;
    for (long i = st->fwd_start + 1; i <= st->after_forward; i++)
        if (ev[i].action == MD_ACT_ALLOC &&
            (md_stack_tags(md_analysis_cache(c->a), c->s, ev[i].stack) & MD_TAG_FORWARD) &&
            !md_grow((void **)&seq, &cap, n + 1, sizeof *seq))
            seq[n++] = ev[i].stack;
    for (size_t j = 0; j < n; j++)
        runs += seq[j] == seq[0];
    for (size_t j = 0; n && j < ls->n; j++)
        kept += ls->live[j].stack == seq[0] && ls->live[j].alloc_index > st->fwd_start &&
                ls->live[j].alloc_index <= st->after_forward;
    int repeated = kept == runs && periodic(seq, n, runs) && runs_are_micro_batches(c, st, seq[0]);
    const md_frame *fr = repeated ? md_stack_user_frame(md_analysis_cache(c->a), c->s, seq[0]) : NULL;
    if (fr)
        md_frame_label(c->s, fr, first->site, sizeof first->site);
    free(seq);
    return repeated ? runs : 1;
}

/* The step holding event p, or NULL. */
static const md_step *step_holding(const fctx *c, long p)
{
    for (size_t k = 0; k < c->nst; k++)
        if (p > c->st[k].fwd_start && p <= c->st[k].after_zero)
            return &c->st[k];
    return NULL;
}

/* torch.autograd.grad calls in a step's forward phase, before its
 * backward (steps.c's past_grad_calls put them there): each a run of
 * events that begins inside torch.autograd.grad and lasts until user code
 * runs again. *first: the first call's first event. */
static size_t grad_calls(fctx *c, const md_step *st, long *first)
{
    const md_event *ev = md_replay_events(c->r);
    size_t calls = 0;
    int inside = 0;
    *first = -1;
    for (long i = st->fwd_start + 1; i <= st->after_forward; i++) {
        if (!ev[i].stack)
            continue; /* the autograd engine's thread: no frames */
        int g = (md_stack_tags(md_analysis_cache(c->a), c->s, ev[i].stack) & MD_TAG_GRAD_CALL) != 0;
        if (g && !inside && !calls++)
            *first = i;
        inside = g;
    }
    return calls;
}

/* Activations and, where the peak falls among torch.autograd.grad calls
 * before the step's backward, what the forward made that is still live
 * (the gradients' graphs, freed before the backward, are temporaries). */
static int forward_made_pred(const fctx *c, const md_live *l, md_category cat, void *arg)
{
    cat_arg *ca = arg;
    (void)c;
    if ((cat != MD_CAT_ACTIVATION && cat != MD_CAT_TEMPORARY) || l->alloc_index <= ca->lo ||
        l->alloc_index > ca->hi)
        return 0;
    ca->count++;
    return 1;
}

static void say_grad_calls(fctx *c, md_finding *f, size_t calls, long first, uint64_t bytes)
{
    char site[sizeof f->sites[0].site] = "an unnamed site";
    const md_event *ev = md_replay_events(c->r);
    const md_frame *fr = md_stack_user_frame(md_analysis_cache(c->a), c->s, ev[first].stack);
    if (fr)
        md_frame_label(c->s, fr, site, sizeof site);
    MD_EVIDENCE(f, "torch.autograd.grad ran before the step's backward (%zu call%s seen, the "
                "first at %s): higher-order gradients (a gradient penalty, MAML's inner steps, "
                "Hessian-vector products)", calls, calls == 1 ? "" : "s", site);
    MD_ADVICE(f, "With create_graph=True each autograd.grad keeps the graph of its gradients for "
              "the later backward: about another forward's memory per call. A first-order "
              "approximation (first-order MAML, detached inner gradients, finite-difference "
              "Hessian-vector products), fewer inner steps or tasks per step, or the "
              "higher-order part on a smaller batch cuts it; `del` what it made before the main "
              "backward. Of the %.1f MiB, activation checkpointing then saves the forward's part.",
              md_mib(bytes));
}

/* nn.MultiheadAttention's attention matrices live at the peak (of act
 * bytes of activations): where it computed the weights in Python
 * (need_weights=True, its default: a softmax called inside
 * multi_head_attention_forward), the softmax's outputs and its other
 * tensors at least half their size (the scores, casts). Said as evidence
 * and advice; returns their bytes, 0 if none. */
static uint64_t say_mha_weights(fctx *c, md_finding *f, long p, long lo, uint64_t act)
{
    const md_live_set *ls = live_at(c, p);
    uint64_t biggest = 0, bytes = 0;
    size_t n = 0;
    for (size_t pass = 0; ls && pass < 2; pass++)
        for (size_t i = 0; i < ls->n; i++) {
            const md_live *l = &ls->live[i];
            unsigned t = md_stack_tags(md_analysis_cache(c->a), c->s, l->stack);
            if (l->alloc_index <= lo || !(t & MD_TAG_MHA))
                continue;
            if (pass == 0 && (t & MD_TAG_SOFTMAX))
                biggest = l->requested > biggest ? l->requested : biggest;
            else if (pass == 1 && biggest && 2 * l->requested >= biggest)
                bytes += l->block_size, n++;
        }
    if (!bytes)
        return 0;
    MD_EVIDENCE(f, "%.1f MiB in %zu attention matrices (seq x seq per head) that "
                "nn.MultiheadAttention computed in Python, the softmax's among them: its "
                "attention weights were asked for (need_weights=True, its default)",
                md_mib(bytes), n);
    MD_ADVICE(f, "Call nn.MultiheadAttention with need_weights=False (and no attention mask the "
              "fused kernels cannot take): it then runs scaled_dot_product_attention's flash or "
              "memory-efficient kernel, which keeps no seq x seq matrix: about %.1f MiB off the "
              "peak. Then activation checkpointing of the repeated blocks for the rest of the "
              "%.1f MiB.", md_mib(bytes), md_mib(act));
    return bytes;
}

/* Attention written as softmax(q k^T) (transformers' eager attention, a
 * script's own, a library's with its own bias, SDPA's math kernel): the
 * functions that called torch's softmax for activations live at the peak
 * (not nn.MultiheadAttention's, said apart), and what they made of a
 * softmax output's size, half or a quarter of it (the softmax's, 16-bit
 * casts, dropout masks; not the projections beside them). */
#define ATTN_OWNERS 4
#define ATTN_SIZES 16
typedef struct attn_matrices {
    md_frame owner[ATTN_OWNERS];
    uint64_t sizes[ATTN_SIZES]; /* the softmax outputs' */
    size_t nowner, nsizes, count;
    uint64_t bytes, biggest;
    int math; /* some made in scaled_dot_product_attention's math kernel */
} attn_matrices;

static int attn_sized(const attn_matrices *m, uint64_t bytes)
{
    for (size_t k = 0; bytes && k < m->nsizes; k++)
        if (bytes == m->sizes[k] || 2 * bytes == m->sizes[k] || 4 * bytes == m->sizes[k])
            return 1;
    return 0;
}

/* Whether frame fr is one of m's owners' functions. */
static int attn_owner_is(const attn_matrices *m, const md_frame *fr)
{
    for (size_t k = 0; fr && k < m->nowner; k++)
        if (m->owner[k].name == fr->name && m->owner[k].filename == fr->filename)
            return 1;
    return 0;
}

/* A softmax output of `bytes` made in frame fr's function. */
static void attn_softmax(attn_matrices *m, const md_frame *fr, uint64_t bytes)
{
    if (fr && !attn_owner_is(m, fr) && m->nowner < ATTN_OWNERS)
        m->owner[m->nowner++] = *fr;
    if (!attn_sized(m, bytes) && m->nsizes < ATTN_SIZES)
        m->sizes[m->nsizes++] = bytes;
    m->biggest = bytes > m->biggest ? bytes : m->biggest;
}

static void find_attn_matrices(fctx *c, long p, long lo, attn_matrices *m)
{
    const md_live_set *ls = live_at(c, p);
    memset(m, 0, sizeof *m);
    for (size_t pass = 0; ls && pass < 2; pass++)
        for (size_t i = 0; i < ls->n; i++) {
            const md_live *l = &ls->live[i];
            if (l->alloc_index <= lo || l->category != MD_CAT_ACTIVATION)
                continue;
            unsigned t = md_stack_tags(md_analysis_cache(c->a), c->s, l->stack);
            if (t & MD_TAG_MHA)
                continue;
            const md_frame *fr = md_stack_user_frame(md_analysis_cache(c->a), c->s, l->stack);
            if (pass == 0 && (t & MD_TAG_SOFTMAX)) {
                attn_softmax(m, fr, l->requested);
            } else if (pass == 1 && attn_sized(m, l->requested) && attn_owner_is(m, fr)) {
                m->bytes += l->block_size;
                m->count++;
                m->math |= (t & MD_TAG_SDPA_MATH) != 0;
            }
        }
}

/* The attention matrices among act bytes of activations at the peak, said
 * as evidence and advice where they are a quarter of them or more (64 MiB
 * at least); returns their bytes, 0 if not said. */
static uint64_t say_attn_matrices(fctx *c, md_finding *f, long p, long lo, uint64_t act)
{
    attn_matrices m;
    find_attn_matrices(c, p, lo, &m);
    if (m.bytes < (64u << 20) || (double)m.bytes < 0.25 * (double)act)
        return 0;
    char where[256];
    md_frame_label(c->s, &m.owner[0], where, sizeof where);
    const char *fn = md_strtab_get(&c->s->strs, m.owner[0].name);
    const char *file = md_strtab_get(&c->s->strs, m.owner[0].filename);
    MD_EVIDENCE(f, "%.1f MiB in %zu attention matrices (batch x heads x seq x seq) made in %s%s, "
                "the softmax's outputs among them (the largest %.1f MiB): attention computed as "
                "softmax(q k^T) keeps them for backward, %.0f%% of the activations",
                md_mib(m.bytes), m.count, where, m.nowner > 1 ? " and other attention code" : "",
                md_mib(m.biggest), 100.0 * (double)m.bytes / (double)act);
    if (m.math)
        MD_ADVICE(f, "scaled_dot_product_attention ran its math kernel for these calls, which "
                  "materializes the matrices: its flash and memory-efficient kernels could not "
                  "take the call's arguments (a float mask or bias in another dtype than the "
                  "queries, one that needs a gradient, a head size they do not support). Run one "
                  "step with torch.backends.cuda.enable_math_sdp(False): the call then fails and "
                  "torch's warnings say why each fused kernel declined; fixing that saves most of "
                  "%.1f MiB. Else activation checkpointing of the repeated blocks keeps only block "
                  "inputs (most of the %.1f MiB of activations).", md_mib(m.bytes), md_mib(act));
    else if (!strcmp(fn, "eager_attention_forward"))
        MD_ADVICE(f, "Load the model with attn_implementation=\"sdpa\" (or "
                  "\"flash_attention_2\" where installed): scaled_dot_product_attention's fused "
                  "kernels keep no seq x seq matrix, about %.1f MiB off the peak; "
                  "output_attentions=True forces the eager "
                  "path, so leave it off in training. Then activation checkpointing of the "
                  "repeated blocks for the rest of the %.1f MiB of activations.", md_mib(m.bytes),
                  md_mib(act));
    else if (strstr(file, "-packages/"))
        MD_ADVICE(f, "This library computes the model's attention itself (its own bias or mask "
                  "around the softmax), so no fused kernel replaces it here: activation "
                  "checkpointing of the repeated blocks keeps only block inputs (most of the "
                  "%.1f MiB), and the matrices shrink with the square of the sequence length.",
                  md_mib(act));
    else
        MD_ADVICE(f, "Compute the attention with torch.nn.functional.scaled_dot_product_attention("
                  "q, k, v, is_causal=True) (or attn_mask=) in place of softmax(q @ k^T) and its "
                  "mask: its flash and memory-efficient kernels keep no seq x seq matrix, about "
                  "%.1f MiB off the peak. Then activation checkpointing of the repeated blocks for "
                  "the rest of the %.1f MiB of activations.", md_mib(m.bytes), md_mib(act));
    return m.bytes;
}

/* Activations at the peak made inside torchdiffeq's solvers (odeint
 * without the adjoint keeps every solver step's graph); their bytes, said
 * as evidence and advice where they are at least a third of act; else 0. */
/* Bytes of activations live at p, made after lo under a frame tagged
 * `tag`; the largest block into *biggest. */
static uint64_t tagged_activations(fctx *c, long p, long lo, unsigned tag, uint64_t *biggest)
{
    const md_live_set *ls = live_at(c, p);
    uint64_t bytes = 0;
    *biggest = 0;
    for (size_t i = 0; ls && i < ls->n; i++) {
        const md_live *l = &ls->live[i];
        if (l->alloc_index > lo && l->category == MD_CAT_ACTIVATION &&
            (md_stack_tags(md_analysis_cache(c->a), c->s, l->stack) & tag)) {
            bytes += l->block_size;
            *biggest = l->block_size > *biggest ? l->block_size : *biggest;
        }
    }
    return bytes;
}

static uint64_t say_ode_steps(fctx *c, md_finding *f, long p, long lo, uint64_t act)
{
    uint64_t biggest, bytes = tagged_activations(c, p, lo, MD_TAG_ODE, &biggest);
    if (3 * bytes < act)
        return 0;
    MD_EVIDENCE(f, "%.1f MiB of them made inside torchdiffeq's ODE solver: odeint keeps every "
                "solver step's graph (each step's function evaluations) for the backward",
                md_mib(bytes));
    MD_ADVICE(f, "torchdiffeq's odeint_adjoint solves an adjoint ODE backward instead of keeping "
              "the solver's graph: memory no longer grows with the number of solver steps "
              "(about twice the compute); or fewer steps: looser rtol/atol, a fixed-step method. "
              "Up to %.1f MiB.", md_mib(act));
    return bytes;
}

/* Activations at the peak made inside gpytorch's kernels and operators
 * (an exact GP's N x N kernel matrices); their bytes, said as evidence and
 * advice where they are at least half of act; else 0. */
static uint64_t say_gp_kernels(fctx *c, md_finding *f, long p, long lo, uint64_t act)
{
    uint64_t biggest, bytes = tagged_activations(c, p, lo, MD_TAG_GP, &biggest);
    if (2 * bytes < act)
        return 0;
    MD_EVIDENCE(f, "%.1f MiB of them made inside gpytorch's kernels and operators, the largest "
                "%.1f MiB: an exact GP keeps N x N kernel matrices (N training points) for its "
                "marginal likelihood's backward", md_mib(bytes), md_mib(biggest));
    MD_ADVICE(f, "An exact GP's memory is quadratic in its training points: halving them quarters "
              "the %.1f MiB. KeOps kernels (gpytorch.kernels.keops, with pykeops) compute the "
              "kernel in blocks without storing it; a sparse or variational GP (inducing points: "
              "SGPR, or an ApproximateGP trained on minibatches) scales with the inducing points "
              "instead.", md_mib(act));
    return bytes;
}

static void say_activations(md_finding *f, uint64_t act, uint64_t held, uint64_t peak, int in_grad)
{
    double share = (double)(act + held) / (double)peak;
    if (held)
        MD_SUMMARY(f, "activations of two steps are live at the peak: this step's %.1f MiB and "
                   "%.1f MiB still held from the step before, %.0f%% of the peak (%.1f MiB)",
                   md_mib(act), md_mib(held), 100.0 * share, md_mib(peak));
    else if (in_grad)
        MD_SUMMARY(f, "the peak falls among torch.autograd.grad calls before the step's backward: "
                   "what the forward and the gradient computations made is %.0f%% of the peak "
                   "(%.1f of %.1f MiB)", 100.0 * share, md_mib(act), md_mib(peak));
    else
        MD_SUMMARY(f, "activations saved for backward are %.0f%% of the peak (%.1f of %.1f MiB)",
                   100.0 * share, md_mib(act), md_mib(peak));
}

/* A forward in the step whose graph its backward does not use (a second
 * call of the model for a metric, outside no_grad): the forward
 * allocations of one line of the script, from GRAPH_MIN_STACKS call stacks
 * or more, that (nine in ten of their bytes) outlive the step's backward,
 * where other lines' forward allocations were freed in it (a graph kept by
 * retain_graph=True outlives it whole). Said as evidence and advice where
 * they are HELD_OVER_SHARE of the peak or more; returns their bytes, 0 if
 * not said. */
#define UNUSED_LINES 16
typedef struct line_use {
    const md_frame *line;
    uint64_t bytes, outlive, freed;
    uint32_t stacks[GRAPH_MIN_STACKS];
    size_t nstacks;
} line_use;

static void line_add(line_use *u, uint32_t stack, uint64_t bytes, int outlives)
{
    u->bytes += bytes;
    if (outlives)
        u->outlive += bytes;
    else
        u->freed += bytes;
    size_t k = 0;
    while (k < u->nstacks && u->stacks[k] != stack)
        k++;
    if (k == u->nstacks && u->nstacks < GRAPH_MIN_STACKS)
        u->stacks[u->nstacks++] = stack;
}

static size_t forward_lines(fctx *c, const md_step *st, line_use *u)
{
    const md_event *ev = md_replay_events(c->r);
    size_t n = 0;
    for (long i = st->fwd_start + 1; i <= st->after_forward; i++) {
        if (ev[i].action != MD_ACT_ALLOC || !ev[i].stack)
            continue;
        const md_frame *fr = md_stack_user_frame(md_analysis_cache(c->a), c->s, ev[i].stack);
        long fi = md_replay_free_index(c->r, i);
        if (!fr || (fi >= 0 && fi <= st->after_forward))
            continue; /* a temporary of the forward itself */
        size_t k = 0;
        while (k < n && u[k].line != fr)
            k++;
        if (k == n && n == UNUSED_LINES)
            continue;
        if (k == n) {
            memset(&u[n++], 0, sizeof *u);
            u[k].line = fr;
        }
        line_add(&u[k], ev[i].stack, ev[i].size, fi < 0 || fi > st->after_backward);
    }
    return n;
}

static uint64_t say_unused_forward(fctx *c, md_finding *f, const md_step *st, uint64_t held,
                                   uint64_t peak)
{
    line_use u[UNUSED_LINES];
    size_t n = forward_lines(c, st, u), best = n;
    uint64_t freed = 0;
    for (size_t k = 0; k < n; k++) {
        freed += u[k].freed;
        if (u[k].nstacks >= GRAPH_MIN_STACKS && 10 * u[k].outlive >= 9 * u[k].bytes &&
            (best == n || u[k].outlive > u[best].outlive))
            best = k;
    }
    if (best == n || freed < u[best].outlive / 2 ||
        (double)u[best].outlive < HELD_OVER_SHARE * (double)peak)
        return 0;
    char site[sizeof f->sites[0].site];
    md_frame_label(c->s, u[best].line, site, sizeof site);
    MD_EVIDENCE(f, "%.1f MiB that the forward at %s made in step %d, from many call stacks (a "
                "graph), outlive its backward, which freed the rest of the forward's: that "
                "forward's graph is not the one the backward ran through",
                md_mib(u[best].outlive), site, st->number);
    MD_ADVICE(f, "The forward at %s records a graph no backward uses (its outputs feed a metric "
              "or a log): run it under torch.no_grad() (or torch.inference_mode()), or compute "
              "the metric from the training forward's outputs: %.1f MiB of this step's "
              "activations%s off the peak.", site, md_mib(u[best].outlive),
              held ? ", and what the step before's call still holds," : "");
    return u[best].outlive;
}

/* Gradients kept for parameters no optimizer steps: evidence, and the
 * advice (the most specific cause: the model is run for nothing). */
static void say_untrained(fctx *c, md_finding *f, uint64_t act)
{
    MD_EVIDENCE(f, "%.1f MiB of gradients (%zu tensors) made in step %d's backward are kept all "
                "run, never freed by the zero_grad that frees the optimizer's: parameters no "
                "optimizer steps get gradients, and their forward saves tensors for it",
                md_mib(c->untrained), c->untrained_count, c->st[0].number);
    MD_ADVICE(f, "Run the model no optimizer trains (a teacher, a reference or frozen model) under "
              "torch.no_grad() and freeze it with requires_grad_(False) (eval() freezes "
              "nothing): its forward then saves nothing for backward, the backward stops at the "
              "trained model, and its %.1f MiB of gradients go. Then activation checkpointing "
              "for the rest of the %.1f MiB of activations.", md_mib(c->untrained), md_mib(act));
}

/* The first user frame of the tensors of `size` requested bytes the step's
 * forward made, how many it made and their stacks' tags together; NULL if
 * none. */
static const md_frame *forward_made_of_size(fctx *c, const md_step *st, uint64_t size,
                                            size_t *count, unsigned *tags)
{
    const md_event *ev = md_replay_events(c->r);
    const md_frame *fr = NULL;
    *count = 0;
    *tags = 0;
    for (long i = st->fwd_start + 1; i <= st->after_forward; i++) {
        if (ev[i].action != MD_ACT_ALLOC || ev[i].size != size)
            continue;
        *tags |= md_stack_tags(md_analysis_cache(c->a), c->s, ev[i].stack);
        if (!(*count)++ || !fr)
            fr = md_stack_user_frame(md_analysis_cache(c->a), c->s, ev[i].stack);
    }
    return fr;
}

/* A peak in the backward pass that the gradients it is computing make (the
 * gradients of the forward's largest intermediate tensors, beside what it
 * saved: a seq x seq attention matrix written out, say), where no
 * activations or logits finding said the peak: an activations finding
 * where the gradients and the saved activations reach ACTIVATIONS_SHARE of
 * it, the gradients a quarter, and the largest are of tensors the step's
 * forward made (named by their site). */
typedef struct bwd_grads {
    uint64_t bytes, biggest, biggest_block;
    size_t n;
} bwd_grads;

static bwd_grads backward_grads(fctx *c, long p, const md_step *st)
{
    const md_live_set *ls = live_at(c, p);
    bwd_grads g = {0, 0, 0, 0};
    for (size_t i = 0; ls && i < ls->n; i++) {
        const md_live *l = &ls->live[i];
        if (l->category != MD_CAT_TEMPORARY || l->alloc_index <= st->after_forward)
            continue;
        g.bytes += l->block_size, g.n++;
        if (l->requested > g.biggest)
            g.biggest = l->requested, g.biggest_block = l->block_size;
    }
    return g;
}

static int said_kind(const fctx *c, const char *kind)
{
    for (size_t i = 0; i < c->n; i++)
        if (!strcmp(c->out[i].kind, kind))
            return 1;
    return 0;
}

static void find_backward_peak(fctx *c)
{
    long p = md_analysis_peak_index(c->a);
    uint64_t peak = md_replay_peak_allocated(c->r);
    const md_step *st = p >= 0 ? step_holding(c, p) : NULL;
    if (!st || !peak || p <= st->after_forward || p > st->after_backward ||
        said_kind(c, "activations") || said_kind(c, "logits"))
        return;
    bwd_grads g = backward_grads(c, p, st);
    size_t made;
    unsigned tags;
    const md_frame *fr = g.biggest ? forward_made_of_size(c, st, g.biggest, &made, &tags) : NULL;
    /* the logits' gradient (a loss's tensors, DataParallel's gathered
     * outputs) is the logits finding's, said or under its share */
    if (!fr || 4 * g.bytes < peak || (tags & (MD_TAG_LOSS | MD_TAG_DP_GATHER)))
        return;
    md_finding *f = add(c, "activations", MD_SEV_INFO, 0);
    if (!f)
        return;
    cat_arg ca = {MD_CAT_ACTIVATION, step_before(c, p), p, 0};
    uint64_t act = collect_sites(c, f, p, cat_pred, &ca);
    double share = (double)(act + g.bytes) / (double)peak;
    if (share < ACTIVATIONS_SHARE) {
        c->n--;
        return;
    }
    char site[sizeof f->sites[0].site];
    md_frame_label(c->s, fr, site, sizeof site);
    f->bytes = act + g.bytes;
    f->severity = share >= 0.6 ? MD_SEV_WARNING : MD_SEV_INFO;
    MD_SUMMARY(f, "the peak falls in backward: the gradients it is computing and the activations "
               "saved for it are %.0f%% of the peak (%.1f MiB of gradients beside %.1f MiB saved, "
               "of %.1f MiB)", 100.0 * share, md_mib(g.bytes), md_mib(act), md_mib(peak));
    MD_EVIDENCE(f, "%.1f MiB in %zu tensors the backward made are live at the peak (gradients of "
                "the forward's intermediate tensors), the largest %.1f MiB", md_mib(g.bytes), g.n,
                md_mib(g.biggest_block));
    MD_EVIDENCE(f, "the step's forward made %zu tensor%s of that size at %s: the largest gradients "
                "are of %s", made, made == 1 ? "" : "s", site, made == 1 ? "it" : "them");
    MD_EVIDENCE(f, "%.1f MiB in %zu allocations of the forward pass (saved for backward) live at "
                "the peak", md_mib(act), ca.count);
    say_peak_step(c, f, p, peak);
    /* in a module's forward: attention is the usual culprit; in the
     * training code (a loss over pairs): a broadcast */
    if (!strcmp(md_strtab_get(&c->s->strs, fr->name), "forward"))
        MD_ADVICE(f, "The backward holds the gradients of the forward's largest tensors beside what "
                  "it saved: those made at %s (%.1f MiB each). Shrinking that tensor cuts both: "
                  "attention written as softmax(q k^T) keeps no seq x seq matrix under "
                  "torch.nn.functional.scaled_dot_product_attention; else compute it in chunks, "
                  "on a smaller batch or sequence, or checkpoint the block that makes it.", site,
                  md_mib(g.biggest_block));
    else
        MD_ADVICE(f, "The backward holds the gradients of the training code's largest tensors "
                  "beside what it saved: those made at %s (%.1f MiB each), outside the model. "
                  "Shrinking that tensor cuts both: a broadcast over pairs such as (a[:, None] - "
                  "b[None]).norm(-1) keeps pairs x features where torch.cdist or a @ b.T keeps "
                  "pairs; else compute it in chunks or on a smaller batch.", site,
                  md_mib(g.biggest_block));
}

/* ---- graph networks' message passing (torch_geometric) ------------------------ */

/* Message passing gathers node features for every edge, makes a message of
 * each and sums them into the nodes: per layer, tensors of edges x channels
 * (x heads, for attention over edges), which on a large graph outweigh
 * everything per node. */

/* Whether the step's forward ran a softmax over edges (GATConv,
 * TransformerConv: attention coefficients per edge). */
static int edge_attention(fctx *c, const md_step *st)
{
    const md_event *ev = md_replay_events(c->r);
    for (long i = st->fwd_start + 1; i <= st->after_forward; i++)
        if (ev[i].action == MD_ACT_ALLOC &&
            (md_stack_tags(md_analysis_cache(c->a), c->s, ev[i].stack) & MD_TAG_EDGE_SOFTMAX))
            return 1;
    return 0;
}

/* The gradients the backward made live at p, where the largest is of a
 * tensor the step's forward made inside torch_geometric; else 0. */
static uint64_t edge_grads(fctx *c, long p, const md_step *st)
{
    if (!st || p <= st->after_forward || p > st->after_backward)
        return 0;
    bwd_grads g = backward_grads(c, p, st);
    size_t made;
    unsigned tags;
    if (!g.biggest || !forward_made_of_size(c, st, g.biggest, &made, &tags))
        return 0;
    return tags & MD_TAG_PER_EDGE ? g.bytes : 0;
}

static void message_passing_advice(md_finding *f, uint64_t bytes, int attention)
{
    if (attention)
        MD_ADVICE(f, "Attention over edges (GATConv, TransformerConv) keeps edges x heads x "
                  "channels a layer, which no fused kernel avoids: train on sampled "
                  "neighbourhoods (torch_geometric.loader.NeighborLoader: the edges a step sees "
                  "are bounded), use fewer heads or channels, bf16 autocast (halves them), or "
                  "checkpoint each conv layer. Up to %.1f MiB.", md_mib(bytes));
    else
        MD_ADVICE(f, "Pass the graph as a sparse adjacency (torch_geometric.transforms."
                  "ToSparseTensor, or edge_index as a torch.sparse CSR tensor): GCNConv-style "
                  "layers then gather and sum in one sparse matrix product "
                  "(message_and_aggregate) and make no per-edge tensor. Else train on sampled "
                  "neighbourhoods (torch_geometric.loader.NeighborLoader) or send fewer channels "
                  "in the first layers. Up to %.1f MiB.", md_mib(bytes));
}

/* Activations at the peak made inside torch_geometric (half of them or
 * more); their bytes, said as evidence and advice; else 0. */
static uint64_t say_message_passing(fctx *c, md_finding *f, long p, long lo, uint64_t act)
{
    uint64_t biggest, bytes = tagged_activations(c, p, lo, MD_TAG_PER_EDGE, &biggest);
    const md_step *st = step_holding(c, p);
    if (!st || 2 * bytes < act)
        return 0;
    int attention = edge_attention(c, st);
    MD_EVIDENCE(f, "%.1f MiB of them made inside torch_geometric's message passing, the largest "
                "%.1f MiB: per-edge tensors (node features gathered for every edge, the messages"
                "%s) saved for backward", md_mib(bytes), md_mib(biggest),
                attention ? ", attention coefficients per edge and head" : "");
    uint64_t grads = edge_grads(c, p, st);
    if (grads)
        MD_EVIDENCE(f, "the peak falls in backward, where %.1f MiB of their gradients are live "
                    "beside them", md_mib(grads));
    message_passing_advice(f, bytes + grads, attention);
    return bytes;
}

static int edge_pred(const fctx *c, const md_live *l, md_category cat, void *arg)
{
    cat_arg *ca = arg;
    if ((cat != MD_CAT_ACTIVATION && cat != MD_CAT_TEMPORARY) || l->alloc_index <= ca->lo ||
        l->alloc_index > ca->hi ||
        !(md_stack_tags(md_analysis_cache(c->a), c->s, l->stack) & MD_TAG_PER_EDGE))
        return 0;
    ca->count++;
    return 1;
}

/* A peak inside a forward pass that torch_geometric's per-edge tensors
 * make, most of them freed within their layer (temporaries: no
 * activations finding saw them), at least ACTIVATIONS_SHARE of it. */
static void find_message_passing(fctx *c)
{
    long p = md_analysis_peak_index(c->a);
    uint64_t peak = md_replay_peak_allocated(c->r);
    const md_step *st = p >= 0 ? step_holding(c, p) : NULL;
    if (!st || !peak || p > st->after_forward || said_kind(c, "activations"))
        return;
    md_finding *f = add(c, "activations", MD_SEV_INFO, 0);
    if (!f)
        return;
    cat_arg ca = {MD_CAT_TEMPORARY, st->fwd_start, p, 0};
    uint64_t bytes = collect_sites(c, f, p, edge_pred, &ca);
    double share = (double)bytes / (double)peak;
    if (share < ACTIVATIONS_SHARE) {
        c->n--;
        return;
    }
    cat_arg saved = {MD_CAT_ACTIVATION, st->fwd_start, p, 0};
    md_finding scratch;
    memset(&scratch, 0, sizeof scratch);
    uint64_t kept = collect_sites(c, &scratch, p, cat_pred, &saved);
    f->bytes = bytes;
    f->severity = share >= 0.6 ? MD_SEV_WARNING : MD_SEV_INFO;
    MD_SUMMARY(f, "the peak falls inside a forward pass's message passing: torch_geometric's "
               "per-edge tensors are %.0f%% of it (%.1f of %.1f MiB)", 100.0 * share,
               md_mib(bytes), md_mib(peak));
    MD_EVIDENCE(f, "%.1f MiB in %zu tensors made by torch_geometric's message passing are live "
                "at the peak, in step %d's forward: node features gathered for every edge (edges x "
                "channels) and the messages made of them", md_mib(bytes), ca.count, st->number);
    MD_EVIDENCE(f, "most are freed within the layer that made them: %.1f MiB of the step's "
                "forward is saved for backward at the peak", md_mib(kept));
    message_passing_advice(f, bytes, edge_attention(c, st));
}

/* ---- autocast's cache of casts held across steps ------------------------------ */

/* Copies of the weights that the first step's forward made, still live
 * after the last step, each half a parameter's size (a 16-bit cast of an
 * fp32 weight), made again by no later forward: autocast's cache of casts,
 * which lives until its block exits. A block around the whole loop,
 * optimizer step included, keeps it across steps, and every later forward
 * is handed the first forward's copies: the updated weights never reach
 * it (the loss stops improving). A warning whatever its size. */
#define CAST_MIN (8ULL << 20)   /* copies kept, bytes */
#define CAST_MIN_COUNT 4        /* ... and tensors */
#define CAST_PARAM_SHARE 0.3    /* the weights they copy, share of the parameters */

typedef struct cast_arg {
    const md_step *first;
    const uint64_t *ps; /* parameter sizes, sorted */
    size_t np;
    uint8_t *used;      /* per parameter: a copy matched to it in this pass */
    uint64_t requested;
    size_t n;
} cast_arg;

/* A parameter of twice l's size not matched yet in this pass (one copy a
 * parameter), marked matched; 0 if none. */
static int cast_of_param(cast_arg *ca, const md_live *l)
{
    uint64_t twice = 2 * l->requested;
    const uint64_t *hit = bsearch(&twice, ca->ps, ca->np, sizeof *ca->ps, cmp_u64);
    if (!l->requested || !hit)
        return 0;
    size_t j = (size_t)(hit - ca->ps);
    while (j > 0 && ca->ps[j - 1] == twice)
        j--;
    while (j < ca->np && ca->ps[j] == twice && ca->used[j])
        j++;
    if (j == ca->np || ca->ps[j] != twice)
        return 0;
    return ca->used[j] = 1;
}

static int cast_pred(const fctx *c, const md_live *l, md_category cat, void *arg)
{
    cast_arg *ca = arg;
    (void)cat;
    if (l->alloc_index <= ca->first->fwd_start || l->alloc_index > ca->first->after_forward ||
        !(md_stack_tags(md_analysis_cache(c->a), c->s, l->stack) & MD_TAG_FORWARD) ||
        !cast_of_param(ca, l))
        return 0;
    ca->requested += l->requested, ca->n++;
    return 1;
}

/* ca set for a new pass over a live set. */
static cast_arg *cast_pass(cast_arg *ca)
{
    memset(ca->used, 0, ca->np);
    ca->requested = 0, ca->n = 0;
    return ca;
}

/* The distinct stacks of the copies live at `at`, sorted, into *out (to
 * free); their count. */
static size_t cast_stacks(fctx *c, long at, cast_arg *ca, uint32_t **out)
{
    const md_live_set *ls = live_at(c, at);
    size_t n = 0;
    cast_arg scratch = *ca;
    cast_pass(&scratch);
    *out = ls && ls->n ? malloc(ls->n * sizeof **out) : NULL;
    for (size_t i = 0; *out && i < ls->n; i++)
        if (cast_pred(c, &ls->live[i], (md_category)ls->live[i].category, &scratch))
            (*out)[n++] = ls->live[i].stack;
    distinct_stacks(*out, n); /* sorts them */
    size_t w = 0;
    for (size_t i = 0; i < n; i++) /* each stack once */
        if (i == 0 || (*out)[i] != (*out)[i - 1])
            (*out)[w++] = (*out)[i];
    return w;
}

/* Allocations of the later steps' forward passes made at one of `stacks`. */
static size_t casts_remade(fctx *c, const uint32_t *stacks, size_t n)
{
    const md_event *ev = md_replay_events(c->r);
    size_t remade = 0;
    for (size_t k = 1; k < c->nst; k++)
        for (long i = c->st[k].fwd_start + 1; i <= c->st[k].after_forward; i++)
            remade += ev[i].action == MD_ACT_ALLOC &&
                      bsearch(&ev[i].stack, stacks, n, sizeof *stacks, cmp_u32);
    return remade;
}

static void say_cast_cache(fctx *c, md_finding *f, const cast_arg *ca, uint64_t params,
                           size_t sites)
{
    MD_SUMMARY(f, "autocast's cache keeps the first forward's 16-bit copies of the weights through "
               "every step (%.1f MiB): the later forwards use those copies, not the weights the "
               "optimizer updates", md_mib(f->bytes));
    MD_EVIDENCE(f, "%zu tensors made by step %d's forward, each half a parameter's size (a 16-bit "
                "copy of an fp32 weight: %.0f%% of the parameters' %.1f MiB copied), stay live "
                "through the %zu steps after it", ca->n, ca->first->number,
                100.0 * 2.0 * (double)ca->requested / (double)params, md_mib(params), c->nst - 1);
    MD_EVIDENCE(f, "no later forward makes them again (none at their %zu call sites in %zu steps): "
                "each is handed the copy the first one cast", sites, c->nst - 1);
    cast_arg again = *ca;
    md_finding scratch;
    memset(&scratch, 0, sizeof scratch);
    uint64_t left = collect_sites(c, &scratch, last_index(c), cast_pred, cast_pass(&again));
    if (left)
        MD_EVIDENCE(f, "%.1f MiB of them still live when the snapshot was taken", md_mib(left));
    else
        MD_EVIDENCE(f, "freed only after the last step (as the autocast block exits)");
    MD_ADVICE(f, "Wrap only the forward pass and the loss in torch.autocast (`with torch.autocast(...): "
              "loss = ...`, then loss.backward() and optimizer.step() outside it): its cache is "
              "dropped as the block exits, every step, and each forward casts the updated "
              "weights. As it is, training runs on the first forward's weights (the loss stops "
              "improving) and %.1f MiB stays allocated; torch.autocast(..., cache_enabled=False) "
              "also ends it, at a cast per use.", md_mib(f->bytes));
}

static void find_cast_cache(fctx *c)
{
    if (c->nst < 3 || said_kind(c, "leak")) /* kept for good: a leak's */
        return;
    long at = c->st[c->nst - 1].after_zero; /* after the last step (a live set already made) */
    uint64_t *ps = NULL, params = 0;
    size_t np = param_sizes(c, at, &ps);
    for (size_t i = 0; i < np; i++)
        params += ps[i];
    cast_arg ca = {&c->st[0], ps, np, np ? calloc(np, 1) : NULL, 0, 0};
    md_finding *f = ca.used ? add(c, "activations", MD_SEV_WARNING, 0) : NULL;
    uint64_t bytes = f ? collect_sites(c, f, at, cast_pred, &ca) : 0;
    uint32_t *stacks = NULL;
    size_t nstacks = 0;
    if (f && (bytes < CAST_MIN || ca.n < CAST_MIN_COUNT ||
              2.0 * (double)ca.requested < CAST_PARAM_SHARE * (double)params ||
              !(nstacks = cast_stacks(c, at, &ca, &stacks)) ||
              casts_remade(c, stacks, nstacks)))
        c->n--;
    else if (f) {
        f->bytes = bytes;
        say_cast_cache(c, f, &ca, params, nstacks);
    }
    free(stacks);
    free(ca.used);
    free(ps);
}

static void find_activations(fctx *c)
{
    long p = md_analysis_peak_index(c->a);
    uint64_t peak = md_replay_peak_allocated(c->r);
    if (p < 0 || !c->nst || !peak)
        return;
    md_finding *f = add(c, "activations", MD_SEV_INFO, 0);
    if (!f)
        return;
    /* this step's activations; the step before's still live are held
     * over (older ones, over several steps, are a leak's) */
    long lo = step_before(c, p), first_grad = -1;
    const md_step *pst = step_holding(c, p);
    size_t calls = pst ? grad_calls(c, pst, &first_grad) : 0;
    int in_grad = calls && p > first_grad && p <= pst->after_forward;
    cat_arg ca = {MD_CAT_ACTIVATION, lo, p, 0};
    uint64_t act = collect_sites(c, f, p, in_grad ? forward_made_pred : cat_pred, &ca);
    md_finding scratch;
    memset(&scratch, 0, sizeof scratch);
    cat_arg prev = {MD_CAT_ACTIVATION, lo >= 0 ? step_before(c, lo) : lo, lo, 0};
    uint64_t held = lo >= 0 ? collect_sites(c, &scratch, p, cat_pred, &prev) : 0;
    if ((double)held < HELD_OVER_SHARE * (double)peak)
        held = 0;
    double share = (double)(act + held) / (double)peak;
    if (share < ACTIVATIONS_SHARE && !c->untrained) {
        c->n--;
        return;
    }
    f->bytes = act + held;
    f->severity = share >= 0.6 || c->untrained ? MD_SEV_WARNING : MD_SEV_INFO;
    say_activations(f, act, held, peak, in_grad);
    MD_EVIDENCE(f, "%.1f MiB in %zu %s allocations live at the peak", md_mib(act), ca.count,
                in_grad ? "forward-phase" : "forward-pass");
    if (held)
        MD_EVIDENCE(f, "%.1f MiB in %zu allocations of the previous step's forward pass are still "
                    "live: its graph or outputs outlived its backward and optimizer step",
                    md_mib(held), prev.count);
    say_inputs_grow(c, f);
    int vary = say_inputs_vary(c, f);
    md_finding_site first = {"", 0, 0};
    size_t runs = held ? 1 : forward_repeats(c, p, &first);
    if (runs > 1)
        MD_EVIDENCE(f, "the forward pass ran %zu times before the step's backward, all of it live "
                    "at the peak (its first allocation, at %s, made %zu times): %zu micro-batches "
                    "whose losses are summed before one backward keep every graph at once",
                    runs, first.site[0] ? first.site : "an unnamed site", runs, runs);
    const md_indicators *in = md_analysis_indicators(c->a);
    if (in->valid)
        MD_EVIDENCE(f, "the largest forward pass adds %.1f MiB", in->largest_forward_increase_mib);
    say_peak_step(c, f, p, peak);
    /* the advice of the most specific cause found */
    if (pst && !calls && runs <= 1 && say_unused_forward(c, f, pst, held, peak))
        ;
    else if (calls && !held)
        say_grad_calls(c, f, calls, first_grad, act);
    else if (runs > 1)
        MD_ADVICE(f, "Call backward on each micro-batch's loss as it is made ((loss / %zu)."
                  "backward(), gradients accumulate): one graph at a time, about 1/%zu of the "
                  "%.1f MiB; then activation checkpointing of the repeated blocks.", runs, runs,
                  md_mib(act));
    else if (held || (!say_ode_steps(c, f, p, lo, act) && !say_gp_kernels(c, f, p, lo, act) &&
                      !say_message_passing(c, f, p, lo, act) &&
                      !say_mha_weights(c, f, p, lo, act) &&
                      !say_attn_matrices(c, f, p, lo, act))) {
        activations_advice(f, act, held, attention_in(c, p, ca.lo));
        size_t used = strlen(f->advice);
        if (vary && !held) /* what the steps' sizes add to it */
            snprintf(f->advice + used, sizeof f->advice - used, " The inputs come in many sizes "
                     "and the largest set the peak: capping their size (length, resolution), or "
                     "batching by a budget (tokens or pixels a batch, buckets by size), bounds "
                     "it.");
    }
    if (c->untrained)
        say_untrained(c, f, act);
}

/* Forward passes that record graphs with no backward in the trace
 * (inference or evaluation outside no_grad, `out = model(x)` in a loop):
 * at the peak, the call before's forward tensors from many call stacks are
 * still live, freed later when its output is assigned again (its graph),
 * where under no_grad only that output outlives a call (a KV cache kept
 * across calls: a few stacks). Said as the activations finding, unless a
 * leak of graphs said it already. */

/* Where the call holding event p starts: after the last closed call
 * before it, or at the start of the one it is in; -1: none. */
static long call_start(const fctx *c, long p)
{
    long call = -1;
    for (size_t k = 0; k < c->nit; k++)
        call = c->it[k].after_zero < p ? c->it[k].after_zero
               : c->it[k].fwd_start < p ? c->it[k].fwd_start : call;
    return call;
}

typedef struct held_graph {
    uint64_t act, held; /* activations live at the peak; the call before's among them */
    size_t count, nheld_stacks;
    uint32_t stacks[GRAPH_MIN_STACKS];
} held_graph;

static void held_graph_at(fctx *c, long p, long call, held_graph *g)
{
    const md_live_set *ls = live_at(c, p);
    memset(g, 0, sizeof *g);
    for (size_t i = 0; ls && i < ls->n; i++) {
        const md_live *l = &ls->live[i];
        if (l->category != MD_CAT_ACTIVATION)
            continue;
        g->act += l->block_size, g->count++;
        if (l->alloc_index < 0 || l->alloc_index > call ||
            md_replay_free_index(c->r, l->alloc_index) < 0)
            continue; /* this call's, or kept to the end (a cache) */
        g->held += l->block_size;
        size_t k = 0;
        while (k < g->nheld_stacks && g->stacks[k] != l->stack)
            k++;
        if (k == g->nheld_stacks && g->nheld_stacks < GRAPH_MIN_STACKS)
            g->stacks[g->nheld_stacks++] = l->stack;
    }
}

static void find_forward_graphs(fctx *c)
{
    long p = md_analysis_peak_index(c->a);
    uint64_t peak = md_replay_peak_allocated(c->r);
    long call = p >= 0 ? call_start(c, p) : -1;
    if (call < 0 || !peak || c->no_grad_said || !no_backward(c))
        return;
    held_graph g;
    held_graph_at(c, p, call, &g);
    if (g.nheld_stacks < GRAPH_MIN_STACKS || (double)g.held < 0.25 * (double)g.act ||
        (double)g.act < ACTIVATIONS_SHARE * (double)peak)
        return;
    md_finding *f = add(c, "activations", MD_SEV_WARNING, g.act);
    if (!f)
        return;
    cat_arg ca = {MD_CAT_ACTIVATION, -1, p, 0};
    collect_sites(c, f, p, cat_pred, &ca);
    MD_SUMMARY(f, "forward passes record autograd graphs though no backward runs: %.1f MiB of "
               "tensors saved for backward are live at the peak, %.0f%% of it", md_mib(g.act),
               100.0 * (double)g.act / (double)peak);
    MD_EVIDENCE(f, "no training step and no backward anywhere in the trace");
    MD_EVIDENCE(f, "%.1f MiB of them were made by the call before the peak's, from %zu or more "
                "call stacks, and freed later: its graph, which lives until its "
                "output is assigned again (under no_grad only that output would)", md_mib(g.held),
                g.nheld_stacks);
    MD_EVIDENCE(f, "%zu forward allocations are live at the peak of %.1f MiB", g.count,
                md_mib(peak));
    MD_ADVICE(f, NO_GRAD_ADVICE ": most of the %.1f MiB off the peak.", md_mib(g.act));
}

/* ---- per-sample gradients ------------------------------------------------ */

typedef struct per_sample_arg {
    const uint64_t *psz; /* the parameters' sizes, ascending */
    size_t np;
    uint64_t batch;
    long lo;             /* made after this event (the peak's step) */
    size_t count;
} per_sample_arg;

static int is_param_size(const per_sample_arg *pa, uint64_t bytes)
{
    size_t lo = 0, hi = pa->np;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (pa->psz[mid] < bytes)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < pa->np && pa->psz[lo] == bytes;
}

/* A tensor the step made outside the forward whose size is the batch
 * times a parameter's (activations of B*T tokens can be a multiple of a
 * weight's size too; they are the forward's). */
static int per_sample_pred(const fctx *c, const md_live *l, md_category cat, void *arg)
{
    per_sample_arg *pa = arg;
    if (cat == MD_CAT_PARAMETER || cat == MD_CAT_OPTIMIZER_STATE || cat == MD_CAT_WORKSPACE ||
        cat == MD_CAT_ACTIVATION || l->alloc_index <= pa->lo || !l->requested ||
        l->requested % pa->batch || !is_param_size(pa, l->requested / pa->batch) ||
        (md_stack_tags(md_analysis_cache(c->a), c->s, l->stack) & (MD_TAG_FORWARD | MD_TAG_LOSS)))
        return 0;
    pa->count++;
    return 1;
}

/* The parameter bytes that have a tensor of their own at B x their size
 * live at p (each parameter tensor matched to one such tensor). */
static uint64_t per_sample_covered(fctx *c, long p, per_sample_arg *pa)
{
    const md_live_set *ls = live_at(c, p);
    uint64_t *got = ls && ls->n ? malloc(ls->n * sizeof *got) : NULL;
    size_t n = 0, matched;
    for (size_t k = 0; got && k < ls->n; k++)
        if (per_sample_pred(c, &ls->live[k], (md_category)ls->live[k].category, pa))
            got[n++] = ls->live[k].requested / pa->batch;
    if (n)
        qsort(got, n, sizeof *got, cmp_u64);
    uint64_t covered = common_sizes(pa->psz, pa->np, got, n, &matched);
    free(got);
    return covered;
}

/* The batch size B for which live tensors of B x a parameter's size hold
 * the most bytes at the peak, trying the B of each tensor the step made
 * that is a multiple (2 x or more) of the largest parameter's size, the
 * first 8 distinct. */
static uint64_t per_sample_batch(fctx *c, long p, per_sample_arg *pa, uint64_t *bytes)
{
    const md_live_set *ls = live_at(c, p);
    uint64_t best = 0, most = 0, tried[8], top = pa->psz[pa->np - 1];
    size_t nt = 0;
    md_finding scratch;
    for (size_t j = 0; ls && top && j < ls->n && nt < 8; j++) {
        uint64_t r = ls->live[j].requested;
        if (ls->live[j].alloc_index <= pa->lo || r < 2 * top || r % top)
            continue;
        size_t k = 0;
        while (k < nt && tried[k] != r / top)
            k++;
        if (k < nt)
            continue;
        pa->batch = tried[nt++] = r / top;
        memset(&scratch, 0, sizeof scratch);
        uint64_t b = collect_sites(c, &scratch, p, per_sample_pred, pa);
        if (b > most)
            most = b, best = pa->batch;
    }
    pa->batch = best;
    *bytes = most;
    return best;
}

/* Per-sample gradients (DP-SGD: torch.func's vmap over grad, Opacus'
 * grad_sample): tensors of B x each parameter's size live at the peak,
 * made outside the forward, together at least half of B copies of the
 * parameters, and 90% of the parameter bytes each with one of its own. */
static void find_per_sample(fctx *c)
{
    long p = md_analysis_peak_index(c->a);
    uint64_t peak = md_replay_peak_allocated(c->r), *psz = NULL, held = 0;
    if (p < 0 || !peak || !c->nst)
        return;
    per_sample_arg pa = {NULL, param_sizes(c, p, &psz), 0, step_before(c, p), 0};
    pa.psz = psz;
    uint64_t params = 0;
    for (size_t k = 0; k < pa.np; k++)
        params += psz[k];
    if (!pa.np || !per_sample_batch(c, p, &pa, &held) ||
        2.0 * (double)held < (double)pa.batch * (double)params ||
        (double)held < ACTIVATIONS_SHARE * (double)peak ||
        (double)per_sample_covered(c, p, &pa) < 0.9 * (double)params) {
        free(psz);
        return;
    }
    md_finding *f = add(c, "activations", MD_SEV_WARNING, 0);
    if (f) {
        pa.count = 0;
        f->bytes = collect_sites(c, f, p, per_sample_pred, &pa);
        MD_SUMMARY(f, "per-sample gradients are %.0f%% of the peak: %.1f MiB, the parameters' %.1f "
                   "MiB once per example of a batch of %" PRIu64, 100.0 * (double)held / (double)peak,
                   md_mib(held), md_mib(params), pa.batch);
        MD_EVIDENCE(f, "%zu tensors live at the peak, each %" PRIu64 " x the size of a parameter "
                    "(%zu parameter tensors, %.1f MiB)", pa.count, pa.batch, pa.np, md_mib(params));
        say_peak_step(c, f, p, peak);
        MD_ADVICE(f, "Per-sample gradients cost the batch times the parameters. Compute them over "
                  "chunks of the batch and accumulate the clipped sums (torch.func.vmap's "
                  "chunk_size; Opacus' BatchMemoryManager with a smaller physical batch), or clip "
                  "without materializing them (ghost clipping: Opacus' fast gradient clipping); "
                  "up to %.1f MiB.", md_mib(held));
    }
    free(psz);
}

/* ---- logits and the loss ----------------------------------------------- */

/* Frames of the loss computation over the logits: torch's cross-entropy
 * family and transformers' loss functions. */
static int loss_frame(fctx *c, uint32_t stack)
{
    return (md_stack_tags(md_analysis_cache(c->a), c->s, stack) & MD_TAG_LOSS) != 0;
}

/* The bytes live at the peak made under a frame with `tag`, *count the
 * allocations. */
static uint64_t tagged_at_peak(fctx *c, unsigned tag, size_t *count)
{
    long p = md_analysis_peak_index(c->a);
    const md_live_set *ls = p >= 0 && md_replay_peak_allocated(c->r) ? live_at(c, p) : NULL;
    uint64_t held = 0;
    *count = 0;
    for (size_t i = 0; ls && i < ls->n; i++)
        if (md_stack_tags(md_analysis_cache(c->a), c->s, ls->live[i].stack) & tag) {
            held += ls->live[i].block_size;
            ++*count;
        }
    return held;
}

/* A logits finding of `held` bytes at the peak, a warning from half of
 * it, its summary `what` followed by the bytes and their share. */
static md_finding *add_logits_share(fctx *c, uint64_t held, uint64_t peak, const char *what)
{
    md_finding *f = add(c, "logits", (double)held >= 0.5 * (double)peak ? MD_SEV_WARNING
                                                                       : MD_SEV_INFO, held);
    if (f)
        MD_SUMMARY(f, "%s: %.1f MiB, %.0f%% of the peak", what, md_mib(held),
                   100.0 * (double)held / (double)peak);
    return f;
}

/* The Trainer's evaluation keeps every batch's logits on the GPU until the
 * evaluation ends (without eval_accumulation_steps): at the peak, at least
 * 30% of it in the gathering frames. */
static void find_eval_logits(fctx *c)
{
    uint64_t peak = md_replay_peak_allocated(c->r);
    size_t count;
    uint64_t held = tagged_at_peak(c, MD_TAG_EVAL_GATHER, &count);
    if (!held || (double)held < 0.30 * (double)peak)
        return;
    md_finding *f = add_logits_share(c, held, peak,
                                     "the Trainer's evaluation gathers every batch's logits on the GPU");
    if (!f)
        return;
    MD_EVIDENCE(f, "%zu allocation%s of the evaluation loop's gathering (nested_concat, "
                "torch_pad_and_concatenate) live at the peak of %.1f MiB; each batch's "
                "concatenation copies all the batches before it", count, count == 1 ? "" : "s",
                md_mib(peak));
    MD_ADVICE(f, "Set eval_accumulation_steps (the gathered logits move to the CPU every N "
              "evaluation steps), or preprocess_logits_for_metrics to keep what the metric needs "
              "(e.g. logits.argmax(-1)); prediction_loss_only=True when only the loss matters. "
              "Saving: most of %.1f MiB.", md_mib(held));
}

static int scores_pred(const fctx *c, const md_live *l, md_category cat, void *arg)
{
    (void)cat, (void)arg;
    return (md_stack_tags(md_analysis_cache(c->a), c->s, l->stack) & MD_TAG_GEN_SCORES) != 0;
}

/* generate()'s scores at the peak (output_scores=True: one tensor per new
 * token, kept in the output until it is dropped; the output kept until the
 * next call replaces it holds its call's too): a quarter of the peak or
 * more, from 16 tensors or more (a few are one step's own processing). */
static void find_generate_scores(fctx *c)
{
    long p = md_analysis_peak_index(c->a);
    uint64_t peak = md_replay_peak_allocated(c->r);
    size_t count;
    uint64_t held = tagged_at_peak(c, MD_TAG_GEN_SCORES, &count);
    if (c->scores_said || count < 16 || (double)held < 0.25 * (double)peak)
        return;
    md_finding *f = add_logits_share(c, held, peak,
                                     "generate() keeps every new token's scores (output_scores=True)");
    if (!f)
        return;
    MD_EVIDENCE(f, "%zu tensors made by transformers' logits processors (logits_process.py) "
                "live at the peak of %.1f MiB: one batch x vocab tensor per generated token, "
                "held by the output's scores while it is referenced", count, md_mib(peak));
    collect_sites(c, f, p, scores_pred, NULL);
    MD_ADVICE(f, GEN_SCORES_ADVICE " Saving: most of %.1f MiB.", md_mib(held));
}

/* Whether `size` requested bytes hold as many elements as the loss's
 * largest fp32 tensor of `big` bytes, in fp32 or 16-bit, within 2 % (a
 * shifted copy drops one token a sequence; a (batch, heads, seq, seq) mask
 * can land 2.4 % off the logits). */
static int logits_sized(uint64_t size, uint64_t big)
{
    double r = (double)size / (double)big;
    return (r > 0.98 && r < 1.02) || (r > 0.49 && r < 0.51);
}

/* Whether the logits came out of a module: the last allocation a module's
 * forward made before the loss's first (after event lo) is logits-sized
 * (an LM head's output, in fp32 or 16-bit). Otherwise the training code
 * made them from a module's outputs (a similarity matrix). */
static int logits_in_module(fctx *c, long lo, long first_loss, uint64_t big)
{
    const md_event *ev = md_replay_events(c->r);
    for (long i = first_loss - 1; i > lo; i--) {
        if (ev[i].action != MD_ACT_ALLOC || loss_frame(c, ev[i].stack) ||
            !(md_stack_tags(md_analysis_cache(c->a), c->s, ev[i].stack) & MD_TAG_FORWARD))
            continue;
        return logits_sized(ev[i].size, big);
    }
    return 0;
}

/* Logits of earlier micro-batches still live at the peak (each appended
 * to a list after its backward): of the logits-sized tensors this step
 * made at one call stack (the one with the most, 3 at least), those a
 * backward followed before the next was made. Their bytes, *count of them
 * and *stack; 0 where under two. */
#define MICRO_MAX 64
typedef struct micro {
    long at;
    uint64_t size;
    uint32_t stack;
} micro;

static int cmp_micro(const void *a, const void *b)
{
    long x = ((const micro *)a)->at, y = ((const micro *)b)->at;
    return (x > y) - (x < y);
}

static uint64_t kept_micro_logits(fctx *c, const md_live_set *ls, long lo, uint64_t big,
                                  size_t *count, uint32_t *stack)
{
    micro m[MICRO_MAX];
    size_t n = 0, most = 0;
    for (size_t i = 0; i < ls->n && n < MICRO_MAX; i++) {
        const md_live *l = &ls->live[i];
        if (l->alloc_index > lo && l->stack && logits_sized(l->requested, big))
            m[n++] = (micro){l->alloc_index, l->block_size, l->stack};
    }
    *stack = 0;
    for (size_t i = 0; i < n; i++) { /* the stack with the most copies */
        size_t same = 0;
        for (size_t j = 0; j < n; j++)
            same += m[j].stack == m[i].stack;
        if (same > most)
            most = same, *stack = m[i].stack;
    }
    qsort(m, n, sizeof *m, cmp_micro);
    uint64_t bytes = 0;
    const micro *prev = NULL;
    *count = 0;
    for (size_t k = 0; most >= 3 && k < n; k++) {
        if (m[k].stack != *stack)
            continue;
        if (prev && md_analysis_backward_between(c->a, prev->at, m[k].at))
            bytes += prev->size, (*count)++;
        prev = &m[k];
    }
    return *count >= 2 ? bytes : 0;
}

/* Kept micro-batch logits said as the logits finding's summary, evidence
 * and first advice. */
static void say_kept_micro(fctx *c, md_finding *f, uint64_t kept, size_t count, uint32_t stack,
                           uint64_t total, uint64_t peak)
{
    char site[sizeof f->sites[0].site] = "an unnamed site";
    const md_frame *fr = md_stack_user_frame(md_analysis_cache(c->a), c->s, stack);
    if (fr)
        md_frame_label(c->s, fr, site, sizeof site);
    MD_SUMMARY(f, "the logits of %zu earlier micro-batches are still live at the peak, kept after "
               "their backward: %.1f MiB of the %.1f MiB of logits and loss, %.0f%% of the peak",
               count, md_mib(kept), md_mib(total), 100.0 * (double)total / (double)peak);
    MD_EVIDENCE(f, "%zu logits-sized tensors made at %s in this step, a backward between each and "
                "the next, all live at the peak", count + 1, site);
    MD_ADVICE(f, "Each micro-batch's logits stay referenced after its backward (appended to a list "
              "for a metric, say): keep what the metric needs instead (logits.argmax(-1), a "
              "loss's .item(), a .cpu() copy): %.1f MiB off the peak. Then a fused linear + "
              "cross-entropy kernel or the loss in chunks for the one micro-batch in flight.",
              md_mib(kept));
}

static void find_logits(fctx *c)
{
    long p = md_analysis_peak_index(c->a);
    uint64_t peak = md_replay_peak_allocated(c->r);
    /* a training loss's: generation's log-softmax over a beam is no loss to
     * chunk, and its KV cache can match the logits' size */
    const md_live_set *ls = p >= 0 && peak && c->nst ? live_at(c, p) : NULL;
    if (!ls)
        return;
    const md_live *live = ls->live;
    size_t nl = ls->n;
    /* the loss path's bytes, and its largest tensor: fp32 log-probabilities,
     * one per logit element */
    uint64_t loss = 0, big = 0, logits = 0;
    long first_loss = -1, lo = step_before(c, p);
    size_t nloss = 0;
    for (size_t i = 0; i < nl; i++)
        if (live[i].alloc_index > lo && loss_frame(c, live[i].stack)) {
            loss += live[i].block_size;
            nloss++;
            big = live[i].requested > big ? live[i].requested : big;
            if (first_loss < 0 || live[i].alloc_index < first_loss)
                first_loss = live[i].alloc_index;
        }
    /* the logits, their copies (upcast, shifted slice) and their gradients:
     * this step's other tensors with the loss's element count in fp32 (1x)
     * or 16-bit (0.5x), logits_sized; nothing else in a model has vocab x
     * tokens elements */
    size_t ncopies = 0;
    uint64_t largest = 0;
    for (size_t i = 0; i < nl && big; i++) {
        if (live[i].alloc_index > lo && !loss_frame(c, live[i].stack) &&
            logits_sized(live[i].requested, big)) {
            logits += live[i].block_size;
            ncopies++;
            largest = live[i].block_size > largest ? live[i].block_size : largest;
        }
    }
    uint64_t total = loss + logits;
    if (!big || (double)total < 0.30 * (double)peak)
        return;
    double elems = (double)big / 4.0, side = floor(sqrt(elems) + 0.5);
    md_finding *f = add(c, "logits", (double)total >= 0.5 * (double)peak ? MD_SEV_WARNING
                                                                      : MD_SEV_INFO, total);
    if (!f)
        return;
    /* logits made outside any module; N x N of them a contrastive loss's
     * similarity matrix (CLIP, SimCLR, InfoNCE), not an LM head's */
    int outside = logits && first_loss >= 0 && !logits_in_module(c, lo, first_loss, big);
    int square = outside && side > 1 && side * side == elems;
    size_t nkept = 0;
    uint32_t kept_stack = 0;
    uint64_t kept = square ? 0 : kept_micro_logits(c, ls, lo, big, &nkept, &kept_stack);
    if ((double)kept < HELD_OVER_SHARE * (double)peak)
        kept = 0;
    if (kept)
        say_kept_micro(c, f, kept, nkept, kept_stack, total, peak);
    else if (square)
        MD_SUMMARY(f, "the %.0f x %.0f similarity logits of a contrastive loss and the loss over "
                   "them hold %.1f MiB, %.0f%% of the peak: %.1f bytes per logit element", side,
                   side, md_mib(total), 100.0 * (double)total / (double)peak, (double)total / elems);
    else
        MD_SUMMARY(f, "the logits and the loss over them hold %.1f MiB, %.0f%% of the peak: "
                   "%.1f bytes per logit element", md_mib(total), 100.0 * (double)total / (double)peak,
                   (double)total / elems);
    MD_EVIDENCE(f, "about %.0f million logit elements (the loss's largest fp32 tensor is %.1f MiB)",
             elems / 1e6, md_mib(big));
    if (logits)
        MD_EVIDENCE(f, "logits-sized tensors (the logits, copies, gradients): %.1f MiB in %zu "
                    "(the largest %.1f MiB, %s)", md_mib(logits), ncopies, md_mib(largest),
                 (double)largest >= 0.9 * (double)big ? "fp32" : "16-bit");
    MD_EVIDENCE(f, "%.1f MiB in %zu allocations of the loss (cross-entropy, log-softmax, upcasts, "
                "shifted copies) live at the peak of %.1f MiB",
             md_mib(loss), nloss, md_mib(peak));
    if (kept)
        ; /* said with the kept logits */
    else if (square)
        MD_ADVICE(f, "The similarity matrix grows with the square of the batch (%.0f pairs). "
                  "Compute the loss in chunks of rows, each against all keys, with a backward per "
                  "chunk (GradCache, a chunked InfoNCE), or split it across data-parallel ranks "
                  "(each rank's rows against the gathered keys: 1/world of it). Expected saving: "
                  "most of %.1f MiB.", side, md_mib(total));
    else if (outside)
        MD_ADVICE(f, "These logits are made outside any module, by a product in the training "
                  "code (a similarity against a queue of keys, a class matrix): compute them and "
                  "the loss in chunks of rows with a backward per chunk, which keeps one chunk's "
                  "logits; avoid a full .float() copy. Expected saving: most of %.1f MiB.",
                  md_mib(total));
    else
        MD_ADVICE(f, "Compute the loss without materializing every logit: a fused linear + "
                  "cross-entropy kernel (e.g. Liger) or the loss in chunks over the sequence keeps "
                  "one chunk's logits; avoid a full .float() copy and slicing logits[:, :-1] before "
                  "the loss (it copies). Expected saving: most of %.1f MiB.", md_mib(total));
}

/* ---- fragmentation --------------------------------------------------------------- */

/* Reserved memory the job never needed at once: peak reserved against
 * peak allocated. A cache that is merely warm between steps is normal and
 * not reported; only what the peak never used is. */
#define MAX_STREAMS 8

typedef struct stream_use {
    uint64_t stream, reserved, allocated;
} stream_use;

static stream_use *stream_slot(stream_use *u, size_t *n, uint64_t stream)
{
    for (size_t k = 0; k < *n; k++)
        if (u[k].stream == stream)
            return &u[k];
    if (*n == MAX_STREAMS)
        return NULL;
    u[*n] = (stream_use){stream, 0, 0};
    return &u[(*n)++];
}

/* Reserved and allocated bytes per stream after event `at`: segments from
 * the trace's segment events, blocks from the live set. 0 where the
 * trace's segments do not account for the reserved total (segments made
 * before recording began) or there are more streams than MAX_STREAMS. */
static size_t stream_use_at(fctx *c, long at, const md_live_set *ls, uint64_t reserved,
                            stream_use *u)
{
    const md_event *ev = md_replay_events(c->r);
    size_t n = 0;
    uint64_t seen = 0;
    for (long i = 0; i <= at; i++) {
        int sign = ev[i].action == MD_ACT_SEGMENT_ALLOC || ev[i].action == MD_ACT_SEGMENT_MAP ? 1
                   : ev[i].action == MD_ACT_SEGMENT_FREE || ev[i].action == MD_ACT_SEGMENT_UNMAP ? -1
                                                                                                 : 0;
        stream_use *x = sign ? stream_slot(u, &n, md_snapshot_stream(c->s, ev[i].stream)) : NULL;
        if (sign && !x)
            return 0;
        if (x) {
            x->reserved += sign > 0 ? ev[i].size : (uint64_t)0 - ev[i].size;
            seen += sign > 0 ? ev[i].size : (uint64_t)0 - ev[i].size;
        }
    }
    if (seen != reserved)
        return 0;
    for (size_t j = 0; j < ls->n; j++) {
        long i = ls->live[j].alloc_index;
        stream_use *x = i >= 0 ? stream_slot(u, &n, md_snapshot_stream(c->s, ev[i].stream)) : NULL;
        if (!x)
            return 0;
        x->allocated += ls->live[j].block_size;
    }
    return n;
}

/* The streams' caches at the reserved peak, said when at least half of
 * the free blocks are cached on streams other than the one holding the
 * most allocated memory: a block freed on one stream serves only that
 * stream's requests, so those could not have been reused where the
 * memory was wanted. Returns the streams holding free blocks, 0 if not
 * said. */
static size_t say_streams(fctx *c, md_finding *f, long at, const md_live_set *ls,
                          uint64_t reserved, uint64_t free_total)
{
    stream_use u[MAX_STREAMS];
    size_t n = stream_use_at(c, at, ls, reserved, u), holding = 0, main = 0;
    uint64_t elsewhere = 0;
    for (size_t k = 0; k < n; k++) {
        holding += u[k].reserved > u[k].allocated;
        main = u[k].allocated > u[main].allocated ? k : main;
    }
    for (size_t k = 0; k < n; k++)
        elsewhere += k != main && u[k].reserved > u[k].allocated ? u[k].reserved - u[k].allocated : 0;
    if (holding < 2 || 2 * elsewhere < free_total)
        return 0;
    for (size_t k = 0; k < n; k++) {
        char name[40];
        if (u[k].stream)
            snprintf(name, sizeof name, "stream 0x%" PRIx64, u[k].stream);
        else
            snprintf(name, sizeof name, "the default stream");
        MD_EVIDENCE(f, "%s: %.1f MiB reserved, %.1f MiB of it cached free", name,
                    md_mib(u[k].reserved), md_mib(u[k].reserved - u[k].allocated));
    }
    return holding;
}

static void find_fragmentation(fctx *c)
{
    uint64_t pres = md_replay_peak_reserved(c->r), palloc = md_replay_peak_allocated(c->r);
    /* without a history the two are one moment's: a cache kept warm after
     * the peak, not memory "never allocated at once" */
    if (pres <= palloc || !md_snapshot_has_history(c->s, md_replay_device(c->r)))
        return;
    uint64_t gap = pres - palloc;
    if (gap < FRAG_MIN || (double)gap < FRAG_SHARE * (double)pres)
        return;
    long at = md_replay_peak_reserved_index(c->r);
    const md_live_set *ls = live_at(c, at);
    if (!ls)
        return;
    md_cache_state cs = ls->cache;
    md_point pt = md_replay_at(c->r, at);
    md_finding *f = add(c, "fragmentation",
                        (double)gap >= 0.5 * (double)pres ? MD_SEV_WARNING : MD_SEV_INFO, gap);
    if (!f)
        return;
    MD_EVIDENCE(f, "peak reserved %.1f MiB vs peak allocated %.1f MiB", md_mib(pres), md_mib(palloc));
    MD_EVIDENCE(f, "when reserved peaked (event %ld): %.1f MiB allocated, %.1f MiB cached free in "
                "%zu segments, the largest free block %.1f MiB",
             at, md_mib(pt.allocated), md_mib(cs.free_total), cs.segments, md_mib(cs.largest_free));
    size_t streams = say_streams(c, f, at, ls, pres, cs.free_total);
    if (streams) {
        MD_SUMMARY(f, "%.1f MiB (%.0f%%) of the reserved peak was never allocated at once: the "
                   "allocator caches blocks per stream, and %zu streams hold free blocks the "
                   "others' requests cannot use", md_mib(gap), 100.0 * (double)gap / (double)pres,
                   streams);
        MD_ADVICE(f, "A block freed on one stream is reused only by requests on that stream (each "
                  "stream has its own segments, with expandable_segments too). Allocate on one "
                  "stream: run the step's compute on one stream and give side streams copies or "
                  "communication only; a tensor another stream uses needs "
                  "tensor.record_stream(stream), not a copy made there; torch.cuda.empty_cache() "
                  "after a phase on a side stream returns its cache. Up to %.1f MiB could be "
                  "returned.", md_mib(gap));
        return;
    }
    MD_SUMMARY(f, "%.1f MiB (%.0f%%) of the reserved peak was never allocated at once: cached blocks "
               "that did not fit later requests",
            md_mib(gap), 100.0 * (double)gap / (double)pres);
    if (c->s->settings.max_split_size >= 0 && !c->s->settings.expandable_segments) {
        MD_EVIDENCE(f, "max_split_size_mb is set (%.0f MiB): a cached block of that size or more "
                    "is never split, and serves only a request of at least %.0f MiB that it "
                    "exceeds by under 20 MiB (torch's kLargeBuffer)",
                    md_mib((uint64_t)c->s->settings.max_split_size),
                    md_mib((uint64_t)c->s->settings.max_split_size));
        MD_ADVICE(f, "max_split_size_mb keeps large blocks whole: with requests of many sizes "
                  "(sequence lengths) each size range gets segments of its own, and the cache "
                  "grows. Unset it or raise it, or use PYTORCH_CUDA_ALLOC_CONF="
                  "expandable_segments:True (segments grow in place); pad or bucket the shapes. "
                  "Up to %.1f MiB could be returned.", md_mib(gap));
    } else if (c->s->settings.expandable_segments)
        MD_ADVICE(f, "expandable_segments is on already: its segments keep the pages freed blocks "
                  "leave mapped until torch.cuda.empty_cache(). Pad or bucket varying shapes "
                  "(sequence lengths) so freed blocks fit the next request, or call empty_cache() "
                  "between phases of different shapes. Up to %.1f MiB could be returned.",
                  md_mib(gap));
    else
        MD_ADVICE(f, "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True lets segments grow in place "
                  "and usually removes most of this; or max_split_size_mb:<N> keeps large blocks "
                  "whole; pad or bucket varying shapes (sequence lengths) so freed blocks fit the "
                  "next request. Up to %.1f MiB could be returned.", md_mib(gap));
}

/* ---- the allocator's rounding of small tensors ---------------------------------------- */

#define ROUNDING_MIN (32ULL << 20) /* bytes rounded away at the peak */
#define ROUNDING_SHARE 0.15        /* ... and this share of the peak */
#define SMALL_REQUEST (1ULL << 20) /* torch's small pool: requests up to 1 MiB */

static int small_block(const fctx *c, const md_live *l, md_category cat, void *arg)
{
    (void)c, (void)cat, (void)arg;
    return l->requested <= SMALL_REQUEST && l->block_size >= 2 * l->requested;
}

/* Many tensors far smaller than their blocks: every block is a multiple
 * of 512 bytes, so a label of 8 bytes takes 512 (a dataset kept on the GPU
 * one sample per tensor). At the peak, the small pool's blocks at least
 * twice their tensor, where what they round away is 32 MiB or more and
 * 15 % of the peak: fragmentation inside the blocks, with their sites. */
static void find_rounding(fctx *c)
{
    long p = md_analysis_peak_index(c->a);
    uint64_t peak = md_replay_peak_allocated(c->r);
    const md_live_set *ls = live_at(c, p);
    uint64_t blocks = 0, data = 0;
    size_t n = 0;
    for (size_t k = 0; ls && k < ls->n; k++)
        if (small_block(c, &ls->live[k], MD_CAT_OTHER, NULL)) {
            blocks += ls->live[k].block_size;
            data += ls->live[k].requested;
            n++;
        }
    uint64_t lost = blocks - data;
    if (!peak || lost < ROUNDING_MIN || (double)lost < ROUNDING_SHARE * (double)peak)
        return;
    md_finding *f = add(c, "fragmentation",
                        (double)lost >= 0.3 * (double)peak ? MD_SEV_WARNING : MD_SEV_INFO, lost);
    if (!f)
        return;
    MD_SUMMARY(f, "%.1f MiB (%.0f%%) of the peak is the allocator's rounding: %zu small tensors "
               "hold %.1f MiB of data in %.1f MiB of blocks", md_mib(lost),
               100.0 * (double)lost / (double)peak, n, md_mib(data), md_mib(blocks));
    MD_EVIDENCE(f, "every block is a multiple of 512 bytes: these tensors average %.0f bytes, "
                "their blocks %.0f", (double)data / (double)n, (double)blocks / (double)n);
    collect_sites(c, f, p, small_block, NULL);
    MD_ADVICE(f, "Keep such data in a few large tensors: stack the samples into one tensor per "
              "field and index it, instead of a list of per-sample GPU tensors (or keep them on "
              "the CPU and move each batch). About %.1f MiB would be given back.", md_mib(lost));
}

/* ---- out of memory ----------------------------------------------------------------- */

typedef struct any_arg {
    uint64_t by_cat[MD_CAT_COUNT];
} any_arg;

static int any_pred(const fctx *c, const md_live *l, md_category cat, void *arg)
{
    any_arg *aa = arg;
    (void)c;
    aa->by_cat[cat] += l->block_size;
    return 1;
}

/* The steps that began after event i: a job that caught the error went on. */
static size_t steps_after(const fctx *c, long i, const md_step **first)
{
    size_t k = 0;
    while (k < c->nst && c->st[k].fwd_start < i)
        k++;
    *first = k < c->nst ? &c->st[k] : NULL;
    return c->nst - k;
}

/* The step whose optimizer phase holds event i, or NULL. */
static const md_step *in_optimizer_step(const fctx *c, long i)
{
    for (size_t k = 0; k < c->nst; k++)
        if (i > c->st[k].after_backward && i <= c->st[k].after_optim)
            return &c->st[k];
    return NULL;
}

/* An error in the optimizer's step as it made its state (Adam's first
 * step: exp_avg and exp_avg_sq for every parameter): said with what the
 * whole state needs beside the weights and gradients, and lighter or
 * sharded state as the advice. 0 where the step made no state. */
static int state_did_not_fit(fctx *c, md_finding *f, const md_step *st, long i)
{
    md_finding scratch;
    memset(&scratch, 0, sizeof scratch);
    cat_arg ca = {MD_CAT_OPTIMIZER_STATE, st->after_backward, i, 0};
    uint64_t made = collect_sites(c, &scratch, i, cat_pred, &ca);
    uint64_t params = category_bytes(c, i, MD_CAT_PARAMETER);
    uint64_t grads = category_bytes(c, i, MD_CAT_GRADIENT);
    const char *opt = md_analysis_optimizer(c->a);
    double want = expected_state_multiple(opt);
    if (made < (1 << 20) || !params)
        return 0;
    c->state_oom = st;
    const char *name = opt[0] ? opt : "the optimizer";
    MD_EVIDENCE(f, "it came in step %d's optimizer step, as %s made its state: %.1f MiB made in "
                "%zu allocations", st->number, name, md_mib(made), ca.count);
    if (want > 0)
        MD_EVIDENCE(f, "%s keeps %g x the parameters: %.1f MiB beside the weights (%.1f MiB) and "
                    "their gradients (%.1f MiB), %.1f MiB more than it had made",
                    name, want, want * md_mib(params), md_mib(params), md_mib(grads),
                    want * md_mib(params) - md_mib(made));
    MD_SUMMARY(f, "out of memory in step %d's optimizer step: %s's state (%.1f MiB made so far) "
               "did not fit beside the weights and gradients", st->number, name, md_mib(made));
    MD_ADVICE(f, "The state is made at the first step and kept: make it smaller or spread it. An "
              "8-bit optimizer (bitsandbytes' AdamW8bit: about a quarter of fp32 Adam's state), "
              "a lighter one (Adafactor; SGD with momentum or Lion: 1 x the parameters), sharding "
              "it over data-parallel ranks (FSDP, ZeroRedundancyOptimizer: divided by the world "
              "size), or keeping it on the CPU (DeepSpeed ZeRO-Offload); or a larger memory "
              "limit.%s", want > 0 ? "" : " The optimizer's multiple is not known to memdiag: "
              "see the state's sites.");
    return 1;
}

/* Where the work that failed at the OOM event i began: after the OOM
 * before it, or after the last step that ended before it (-1: the start). */
static long attempt_start(const fctx *c, long prev_oom, long i)
{
    long from = prev_oom;
    for (size_t k = 0; k < c->nst; k++)
        if (c->st[k].after_zero < i && c->st[k].after_zero > from)
            from = c->st[k].after_zero;
    return from;
}

static long first_forward(fctx *c, long from, long to);

/* Where the attempts that ran out of memory up to event i began: the
 * first forward allocation after the last step that ended before it, so
 * that data made before the attempts (a dataset, a batch) is not theirs;
 * the event before it. */
static long attempts_start(fctx *c, long i)
{
    long from = attempt_start(c, -1, i), ff = first_forward(c, from, i);
    return ff < i ? ff - 1 : from;
}

/* The OOM events in (from, to]. */
static size_t ooms_in(const fctx *c, long from, long to)
{
    const md_event *ev = md_replay_events(c->r);
    size_t n = 0;
    for (long k = from + 1; k <= to; k++)
        n += ev[k].action == MD_ACT_OOM;
    return n;
}

/* Bytes live after event at that the failed attempt (from, oom] made:
 * what its frames held (activations, inputs, temporaries), not weights,
 * gradients, state or workspaces. Their count in *count. */
static uint64_t attempt_left(fctx *c, long from, long oom, long at, size_t *count)
{
    const md_live_set *ls = live_at(c, at);
    uint64_t sum = 0;
    *count = 0;
    for (size_t k = 0; ls && k < ls->n; k++) {
        const md_live *l = &ls->live[k];
        int kept_kind = l->category == MD_CAT_PARAMETER || l->category == MD_CAT_GRADIENT ||
                        l->category == MD_CAT_OPTIMIZER_STATE ||
                        l->category == MD_CAT_WORKSPACE;
        if (l->alloc_index > from && l->alloc_index <= oom && !kept_kind) {
            sum += l->block_size;
            ++*count;
        }
    }
    return sum;
}

static double secs_at(const fctx *c, long i)
{
    const md_event *ev = md_replay_events(c->r);
    if (ev[0].time_us < 0 || ev[i].time_us < 0)
        return -1;
    return (double)(ev[i].time_us - ev[0].time_us) / 1e6;
}

/* The OOM event before i, or -1. */
static long oom_before(const fctx *c, long i)
{
    const md_event *ev = md_replay_events(c->r);
    while (--i >= 0 && ev[i].action != MD_ACT_OOM)
        ;
    return i;
}

/* The OOM event after i, or -1. */
static long oom_after(const fctx *c, long i)
{
    const md_event *ev = md_replay_events(c->r);
    long n = (long)md_replay_nevents(c->r);
    while (++i < n && ev[i].action != MD_ACT_OOM)
        ;
    return i < n ? i : -1;
}

/* Errors caught, and their tensors still held: the attempts that failed
 * at the OOMs before i (since the last step) made memory that is live at
 * i (a retry inside the except block, whose traceback holds the failed
 * call's frames; retries that recurse from it; the error kept in a
 * variable). Said as evidence; returns the bytes. */
static uint64_t say_held_attempt(fctx *c, md_finding *f, long i)
{
    long prev = oom_before(c, i);
    if (prev < 0)
        return 0;
    long from = attempts_start(c, prev);
    size_t count, failed = ooms_in(c, from, prev);
    uint64_t held = attempt_left(c, from, prev, i, &count);
    uint64_t allocated = md_replay_at(c->r, i).allocated;
    if (held < HELD_ATTEMPT_MIN || (double)held < HELD_ATTEMPT_SHARE * (double)allocated)
        return 0;
    long first = prev;
    for (size_t k = 1; k < failed; k++)
        first = oom_before(c, first);
    double t = secs_at(c, first);
    char when[64] = "";
    if (t >= 0)
        snprintf(when, sizeof when, "%s at +%.3f s", failed > 1 ? ", the first" : ",", t);
    char who[64] = "the attempt that ran out of memory before";
    if (failed > 1)
        snprintf(who, sizeof who, "the %zu attempts that ran out of memory before", failed);
    MD_EVIDENCE(f, "%.1f MiB of the live memory (%zu tensors) was made by %s%s, still held: a "
                "caught error's traceback keeps the failed call's frames and their tensors",
                md_mib(held), count, who, when);
    return held;
}

/* The attempt that failed at i left memory live after the work went on:
 * at the end of the last step, else of the first step that ended after
 * it. Said as evidence; returns the bytes. */
static uint64_t say_held_after(fctx *c, md_finding *f, long i)
{
    if (oom_after(c, i) >= 0 || !c->nst || c->st[c->nst - 1].after_zero <= i)
        return 0; /* the next OOM says what it found held */
    long from = attempt_start(c, oom_before(c, i), i);
    const md_step *st = &c->st[c->nst - 1];
    size_t count;
    uint64_t held = attempt_left(c, from, i, st->after_zero, &count);
    for (size_t k = 0; !held && k < c->nst; k++)
        if (c->st[k].after_zero > i) { /* gone by the end: the first step after it */
            st = &c->st[k];
            held = attempt_left(c, from, i, st->after_zero, &count);
            break;
        }
    uint64_t allocated = md_replay_at(c->r, st->after_zero).allocated;
    if (held < HELD_ATTEMPT_MIN || (double)held < HELD_ATTEMPT_SHARE * (double)allocated)
        return 0;
    MD_EVIDENCE(f, "%.1f MiB (%zu tensors) made by the attempt that failed here were still live "
                "at the end of step %d%s, the work gone on: the error, kept (a variable, a "
                "list), holds its traceback and its frames' tensors", md_mib(held), count,
                st->number, st == &c->st[c->nst - 1] ? ", the last" : "");
    return held;
}

/* The first forward allocation in (from, to), or to. */
static long first_forward(fctx *c, long from, long to)
{
    const md_event *ev = md_replay_events(c->r);
    for (long k = from + 1; k < to; k++)
        if (ev[k].action == MD_ACT_ALLOC &&
            (md_stack_tags(md_analysis_cache(c->a), c->s, ev[k].stack) & MD_TAG_FORWARD))
            return k;
    return to;
}

/* Requested bytes allocated in (from, to) and, where live is not NULL,
 * still in it: a step's input, made before its forward. Where one was made
 * into *stack. */
static uint64_t made_between(fctx *c, long from, long to, const md_live_set *live,
                             uint32_t *stack)
{
    const md_event *ev = md_replay_events(c->r);
    uint64_t sum = 0;
    for (long k = from + 1; k < to; k++) {
        int alive = !live;
        for (size_t j = 0; live && !alive && j < live->n; j++)
            alive = live->live[j].alloc_index == k;
        if (ev[k].action == MD_ACT_ALLOC && alive) {
            sum += ev[k].size;
            *stack = ev[k].stack;
        }
    }
    return sum;
}

/* A batch far larger than the steps' before it (a long sequence padded
 * into one batch): the work that failed at OOM i had made, by then, twice
 * the largest forward pass of the steps that completed before it, or more;
 * its input is compared with the last step's. Said as evidence; returns
 * the highest peak of those steps, 0 where it is not so. */
static uint64_t say_outlier(fctx *c, md_finding *f, long i)
{
    size_t done = 0;
    uint64_t fwd = 0, peak = 0;
    for (; done < c->nst && c->st[done].after_zero < i; done++) {
        const md_step *st = &c->st[done];
        uint64_t a = md_replay_at(c->r, st->after_forward).allocated;
        uint64_t b = md_replay_at(c->r, st->fwd_start).allocated;
        fwd = a > b && a - b > fwd ? a - b : fwd;
        peak = st->peak > peak ? st->peak : peak;
    }
    if (done < 2 || !fwd)
        return 0;
    long from = attempt_start(c, -1, i);
    size_t count;
    uint64_t made = attempt_left(c, from, i, i, &count);
    if (made < OUTLIER_MIN || made < 2 * fwd)
        return 0;
    MD_EVIDENCE(f, "the work that failed had made %.1f MiB by then, %.1f x the largest forward "
                "pass of the %zu steps before it (%.1f MiB), and was not done: this batch needs "
                "far more than theirs", md_mib(made), (double)made / (double)fwd, done,
                md_mib(fwd));
    long ff = first_forward(c, from, i), prev_from = done > 1 ? c->st[done - 2].after_zero : -1;
    uint32_t stack = 0, unused = 0;
    uint64_t in = made_between(c, from, ff, live_at(c, i), &stack);
    long prev_ff = first_forward(c, prev_from, c->st[done - 1].after_forward);
    uint64_t before = made_between(c, prev_from, prev_ff, NULL, &unused);
    char site[512] = "an unnamed site", lab[512];
    const md_frame *fr = stack ? md_stack_user_frame(md_analysis_cache(c->a), c->s, stack) : NULL;
    if (fr)
        snprintf(site, sizeof site, "%s", md_frame_label(c->s, fr, lab, sizeof lab));
    if (in && before && (double)in >= 1.5 * (double)before)
        MD_EVIDENCE(f, "its input is %.1f x the last step's (%.1f KiB against %.1f KiB, made at "
                    "%s): longer sequences or a larger batch", (double)in / (double)before,
                    (double)in / 1024, (double)before / 1024, site);
    return peak;
}

/* What the steps before OOM i kept: tensors they made (not weights,
 * gradients, state or workspaces) still live at the error, where that is
 * 16 MiB or more and a tenth of what is allocated: a leak, or graphs held
 * over, that grew until a step no longer fit. Said as evidence; returns
 * the bytes. */
static uint64_t say_kept_by_steps(fctx *c, md_finding *f, long i)
{
    size_t done = 0;
    while (done < c->nst && c->st[done].after_zero < i)
        done++;
    if (!done)
        return 0;
    size_t count;
    uint64_t kept = attempt_left(c, c->st[0].fwd_start, c->st[done - 1].after_zero, i, &count);
    uint64_t allocated = md_replay_at(c->r, i).allocated;
    if (kept < HELD_ATTEMPT_MIN || (double)kept < 0.1 * (double)allocated)
        return 0;
    MD_EVIDENCE(f, "%.1f MiB of the live memory (%zu tensors) was made by the %zu step%s before "
                "it and kept since (not weights, gradients or optimizer state): what the steps "
                "keep grew until this one no longer fit", md_mib(kept), count, done,
                done == 1 ? "" : "s");
    return kept;
}

/* One OOM event as the finding reads it. */
typedef struct oom_at {
    long i;
    md_point pt;
    md_cache_state cs;
    uint64_t req;      /* the request, rounded as the allocator rounds it */
    uint64_t short_by; /* live memory it would have needed gone */
    int limited;       /* a per-process limit stopped it, not the device */
    int top;           /* the category holding most of the live memory */
    uint64_t top_bytes;
} oom_at;

/* The summary and the allocator's state at the error. */
static void say_oom_state(fctx *c, md_finding *f, const oom_at *o, size_t went_on,
                          const md_step *next, uint64_t live)
{
    const md_event *e = &md_replay_events(c->r)[o->i];
    int retried = !went_on && oom_after(c, o->i) >= 0; /* caught, tried again */
    const char *caught = went_on ? " (caught: the job went on)"
                         : retried ? " (caught: the job tried again)" : "";
    f->severity = retried ? MD_SEV_WARNING : f->severity;
    if (o->limited)
        MD_SUMMARY(f, "out of memory%s: a request for %.1f MiB failed at the process's limit, "
                      "with %.1f MiB reserved and %.1f MiB allocated (the device had room)",
                   caught, md_mib(e->size), md_mib(o->pt.reserved), md_mib(o->pt.allocated));
    else
        MD_SUMMARY(f, "out of memory%s: a request for %.1f MiB failed with %.1f MiB free on the "
                      "device and %.1f MiB allocated", caught,
                   md_mib(e->size), md_mib(e->addr), md_mib(o->pt.allocated));
    if (went_on)
        MD_EVIDENCE(f, "%zu step%s ran after it, from step %d (peak %.1f MiB): the error was "
                    "caught and the work tried again, smaller or after freeing memory",
                    went_on, went_on == 1 ? "" : "s", next->number, md_mib(next->peak));
    MD_EVIDENCE(f, "requested %.1f MiB; the device reported %.1f MiB free", md_mib(e->size),
                md_mib(e->addr));
    MD_EVIDENCE(f, "allocator: %.1f MiB allocated, %.1f MiB reserved, %.1f MiB cached free "
                "(largest block %.1f MiB)", md_mib(o->pt.allocated), md_mib(o->pt.reserved),
                md_mib(o->cs.free_total), md_mib(o->cs.largest_free));
    MD_EVIDENCE(f, "live: %.1f MiB, the largest category %s with %.1f MiB", md_mib(live),
                md_category_name(o->top), md_mib(o->top_bytes));
}

/* The cause most specific to this error, said as evidence, and its
 * advice: an earlier attempt's tensors held, an outsized batch, what the
 * steps kept, else where the memory was. */
static void say_oom_cause(fctx *c, md_finding *f, const oom_at *o)
{
    uint64_t held = say_held_attempt(c, f, o->i);
    uint64_t left = say_held_after(c, f, o->i);
    uint64_t usual = held ? 0 : say_outlier(c, f, o->i); /* the steps' peak */
    uint64_t kept = held || usual ? 0 : say_kept_by_steps(c, f, o->i);
    if (kept)
        MD_ADVICE(f, "Free what the steps keep (see the leak and activations findings: losses or "
                     "outputs held with their graphs, tensors gathered in a list): %.1f MiB "
                     "would be free%s.", md_mib(kept),
                  kept >= o->short_by ? ", room enough for this request" : "");
    else if (usual)
        MD_ADVICE(f, "This batch needs far more than the ones before it: cap the sequence length "
                     "(truncate, or bucket samples by length so the longest batches are few and "
                     "planned for), keep the batch size the steps had, or split an outsized "
                     "batch into micro-batches with gradient accumulation. The steps before it "
                     "peaked at %.1f MiB.", md_mib(usual));
    else if (held || left)
        MD_ADVICE(f, "Retry after the except block, not inside it, and keep no reference to the "
                     "error (a variable, a list, a logger holding it): the error's traceback "
                     "keeps the failed attempt's tensors alive. The PyTorch FAQ's way: set a "
                     "flag in the except block and retry after it. %s%.1f MiB would be free%s.",
                  held ? "Here " : "", md_mib(held ? held : left),
                  !held                 ? " for the rest of the run"
                  : held >= o->short_by ? ", room enough for this request"
                                        : "");
    else if (o->limited)
        MD_ADVICE(f, "Raise the process's limit, or free %.1f MiB of live memory so the request "
                     "fits in cached blocks; the largest holder is %s (%.1f MiB): see the sites.",
                  md_mib(o->short_by), md_category_name(o->top), md_mib(o->top_bytes));
    else
        MD_ADVICE(f, "It would have fit with %.1f MiB less live memory%s; the largest holder is "
                     "%s (%.1f MiB): see the sites. %s",
                  md_mib(o->short_by), o->short_by ? "" : " (or less fragmentation)",
                  md_category_name(o->top), md_mib(o->top_bytes),
                  o->cs.free_total >= o->req && !c->s->settings.expandable_segments
                      ? "Try PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True."
                      : "Reduce the batch, checkpoint activations, or shard state.");
}

static void find_oom(fctx *c)
{
    size_t n = md_replay_nevents(c->r);
    const md_event *ev = md_replay_events(c->r);
    for (size_t i = 0; i < n; i++) {
        if (ev[i].action != MD_ACT_OOM)
            continue;
        const md_step *next;
        size_t went_on = steps_after(c, (long)i, &next);
        md_finding *f = add(c, "oom", went_on ? MD_SEV_WARNING : MD_SEV_CRITICAL, ev[i].size);
        if (!f)
            return;
        any_arg aa;
        memset(&aa, 0, sizeof aa);
        uint64_t live = collect_sites(c, f, (long)i, any_pred, &aa);
        oom_at o = {.i = (long)i, .pt = md_replay_at(c->r, (long)i), .top = MD_CAT_OTHER};
        const md_live_set *ls = live_at(c, (long)i);
        if (ls)
            o.cs = ls->cache;
        o.req = md_round_size(md_snapshot_settings(c->s), ev[i].size);
        o.limited = ev[i].addr > o.req + o.pt.reserved; /* the device had room */
        uint64_t avail = ev[i].addr + o.cs.largest_free;
        o.short_by = o.limited ? (o.req > o.cs.largest_free ? o.req - o.cs.largest_free : 0)
                               : (o.req > avail ? o.req - avail : 0);
        for (int k = 0; k < MD_CAT_COUNT; k++)
            o.top = aa.by_cat[k] > aa.by_cat[o.top] ? k : o.top;
        o.top_bytes = aa.by_cat[o.top];
        say_oom_state(c, f, &o, went_on, next, live);
        const md_step *in_opt = went_on ? NULL : in_optimizer_step(c, (long)i);
        int state = in_opt && state_did_not_fit(c, f, in_opt, (long)i);
        if (o.cs.free_total >= o.req && o.cs.largest_free < o.req)
            MD_EVIDENCE(f, "the cache held enough free memory but in pieces: fragmentation");
        if (o.limited)
            MD_EVIDENCE(f, "the device itself had %.1f MiB free: a per-process limit stopped the "
                           "request (set_per_process_memory_fraction, or memory held elsewhere)",
                        md_mib(ev[i].addr));
        if (!state) /* else its advice is the state's */
            say_oom_cause(c, f, &o);
    }
}

/* ---- public ---------------------------------------------------------------------------- */

int md_diagnose(const md_analysis *a, md_finding **out, size_t *n, md_err *err)
{
    fctx c;
    memset(&c, 0, sizeof c);
    c.a = a;
    c.s = md_analysis_snapshot(a);
    c.r = md_analysis_replay(a);
    c.st = md_analysis_steps(a, &c.nst);
    c.it = md_analysis_iterations(a, &c.nit);
    c.nit = md_closed_iterations(c.it, c.nit);
    c.no_backward = -1;
    c.untrained = untrained_grads(&c, &c.untrained_count);
    find_oom(&c);
    find_leak(&c);
    find_optimizer_state(&c);
    find_workspace(&c);
    find_activations(&c);
    find_forward_graphs(&c);
    find_per_sample(&c);
    find_logits(&c);
    find_eval_logits(&c);
    find_generate_scores(&c);
    find_backward_peak(&c);
    find_message_passing(&c);
    find_cast_cache(&c);
    find_fragmentation(&c);
    find_rounding(&c);
    *out = c.out;
    *n = c.n;
    (void)err;
    return MD_OK;
}

/* Where two ranks, or two devices of one process, part: the first phase
 * point of a step at which the higher holds a quarter of the difference
 * more. */
static void parting(md_finding *f, const md_analysis *ah, const md_analysis *al,
                    const char *who, double diff)
{
    static const char *const names[] = {"", "forward", "backward", "optimizer step", "zero_grad"};
    const md_replay *rh = md_analysis_replay(ah), *rl = md_analysis_replay(al);
    size_t nh, nl;
    const md_step *sh = md_analysis_steps(ah, &nh), *sl = md_analysis_steps(al, &nl);
    for (size_t k = 0; k < nh && k < nl; k++) {
        long ih[5] = {sh[k].fwd_start, sh[k].after_forward, sh[k].after_backward,
                      sh[k].after_optim, sh[k].after_zero};
        long il[5] = {sl[k].fwd_start, sl[k].after_forward, sl[k].after_backward,
                      sl[k].after_optim, sl[k].after_zero};
        for (int ph = 0; ph < 5; ph++) {
            double dh = (double)md_replay_at(rh, ih[ph]).allocated -
                        (double)md_replay_at(rl, il[ph]).allocated;
            if (dh >= diff / 4) {
                f->phase = ph == 0 ? -1 : ph - 1;
                if (ph == 0) /* what was made before the step's forward: set-up */
                    MD_EVIDENCE(f, "they part before step %d's forward: %s holds %.1f MiB more "
                                "as it begins", sh[k].number, who, dh / MIB);
                else
                    MD_EVIDENCE(f, "they part in step %d's %s: %s holds %.1f MiB more by its end",
                                sh[k].number, names[ph], who, dh / MIB);
                return;
            }
        }
    }
}

/* The step whose peak is the highest. */
static size_t step_of_peak(const md_step *st, size_t n)
{
    size_t best = 0;
    for (size_t k = 1; k < n; k++)
        best = st[k].peak > st[best].peak ? k : best;
    return best;
}

/* Bytes of category cat live in ls, made at the user frame labelled label
 * ("" for the largest such frame: its label is written there, and one of
 * its stacks to *stack). Sums per interned frame in one pass. */
static uint64_t site_part(const md_analysis *a, const md_live_set *ls, int cat, char *label,
                          size_t n, uint32_t *stack)
{
    const md_snapshot *s = md_analysis_snapshot(a);
    md_stack_cache *cache = md_analysis_cache(a);
    uint64_t *sum = label[0] ? NULL : calloc(s->nframes ? s->nframes : 1, sizeof *sum);
    uint64_t best = 0;
    char lab[512];
    for (size_t i = 0; i < ls->n; i++) {
        const md_frame *fr = ls->live[i].category == cat
                                 ? md_stack_user_frame(cache, s, ls->live[i].stack) : NULL;
        if (!fr)
            continue;
        if (label[0]) {
            best += strcmp(md_frame_label(s, fr, lab, sizeof lab), label) ? 0
                                                                           : ls->live[i].block_size;
        } else if (sum && (sum[fr - s->frames] += ls->live[i].block_size) > best) {
            best = sum[fr - s->frames];
            *stack = ls->live[i].stack;
        }
    }
    free(sum);
    if (!label[0] && best) {
        const md_frame *fr = md_stack_user_frame(cache, s, *stack);
        snprintf(label, n, "%s", md_frame_label(s, fr, lab, sizeof lab));
    }
    return best;
}

/* The category that makes most of the difference between two peaks: the
 * live bytes by category at each analysis' peak; said where one category
 * holds three quarters of diff or more, with the call site that makes
 * most of it where one does (a checkpoint only rank 0 loaded onto its
 * GPU). Returns 1 where that site is torch.load's. */
static int say_category_part(md_finding *f, const md_analysis *ah, const md_analysis *al,
                             const char *who, uint64_t diff)
{
    const md_live_set *lh = md_analysis_live(ah, md_analysis_peak_index(ah));
    const md_live_set *ll = md_analysis_live(al, md_analysis_peak_index(al));
    double by[MD_CAT_COUNT] = {0};
    for (size_t i = 0; lh && ll && i < lh->n; i++)
        by[lh->live[i].category] += (double)lh->live[i].block_size;
    for (size_t i = 0; lh && ll && i < ll->n; i++)
        by[ll->live[i].category] -= (double)ll->live[i].block_size;
    int top = 0;
    for (int k = 1; k < MD_CAT_COUNT; k++)
        top = by[k] > by[top] ? k : top;
    if (!lh || !ll || by[top] < 0.75 * (double)diff)
        return 0;
    char label[512] = "";
    uint32_t stack = 0;
    uint64_t here = site_part(ah, lh, top, label, sizeof label, &stack);
    uint64_t there = here ? site_part(al, ll, top, label, sizeof label, &(uint32_t){0}) : 0;
    double part = (double)here - (double)there;
    if (here && part >= 0.5 * by[top] && f->nsites < MD_FINDING_MAX_SITES) {
        MD_EVIDENCE(f, "at the peaks, %s holds %.1f MiB more %s, %.1f MiB of it made at %s",
                    who, by[top] / MIB, md_category_name((md_category)top), part / MIB, label);
        md_finding_site *x = &f->sites[f->nsites++];
        snprintf(x->site, sizeof x->site, "%s", label);
        x->bytes = (uint64_t)part;
        x->count = 1;
        return in_torch_load(ah, stack);
    }
    MD_EVIDENCE(f, "at the peaks, %s holds %.1f MiB more %s", who, by[top] / MIB,
                md_category_name((md_category)top));
    return 0;
}

/* Whether the two analyses' last steps peak within 1% of each other: the
 * difference was a one-off in an earlier step. Said as evidence. */
static int say_one_off(md_finding *f, const md_analysis *ah, const md_analysis *al)
{
    size_t nh, nl;
    const md_step *sh = md_analysis_steps(ah, &nh), *sl = md_analysis_steps(al, &nl);
    if (nh < 3 || nl < 3)
        return 0;
    double a = (double)sh[nh - 1].peak, b = (double)sl[nl - 1].peak;
    if (fabs(a - b) > 0.01 * b)
        return 0;
    MD_EVIDENCE(f, "a one-off: in the last step both peak at about %.1f MiB (step %d's peak is "
                "the higher one's)", b / MIB, sh[step_of_peak(sh, nh)].number);
    return 1;
}

/* nn.DataParallel, seen at a device's peak: what its stacks made there
 * (the module's replicas, the worker threads' forward, the gathered
 * outputs). */
typedef struct dp_use {
    uint64_t by_cat[MD_CAT_COUNT]; /* all live bytes at the peak, by category */
    uint64_t dp;                   /* made under DataParallel */
    uint64_t gathered;             /* its gather: every replica's outputs */
    uint32_t gather_stack;
} dp_use;

static void dp_use_at_peak(const md_analysis *a, dp_use *u)
{
    memset(u, 0, sizeof *u);
    const md_live_set *ls = md_analysis_live(a, md_analysis_peak_index(a));
    const md_snapshot *s = md_analysis_snapshot(a);
    md_stack_cache *cache = md_analysis_cache(a);
    for (size_t i = 0; ls && i < ls->n; i++) {
        const md_live *l = &ls->live[i];
        unsigned t = md_stack_tags(cache, s, l->stack);
        u->by_cat[l->category] += l->block_size;
        u->dp += (t & MD_TAG_DATAPARALLEL) ? l->block_size : 0;
        if (t & MD_TAG_DP_GATHER) {
            u->gathered += l->block_size;
            u->gather_stack = l->stack;
        }
    }
}

/* Devices of one process under nn.DataParallel, the higher holding the
 * module: its weights, gradients and optimizer state stay there, the
 * replicas elsewhere live for one forward and backward, and the outputs
 * of all are gathered there. Said as evidence and advice; 0 where it is
 * not DataParallel or the higher device is not the module's. */
static int say_data_parallel(md_finding *f, const md_analysis *ah, const md_analysis *al,
                             const char *h, const char *l, uint64_t diff)
{
    dp_use uh, ul;
    dp_use_at_peak(ah, &uh);
    dp_use_at_peak(al, &ul);
    uint64_t kept = uh.by_cat[MD_CAT_PARAMETER] + uh.by_cat[MD_CAT_GRADIENT] +
                    uh.by_cat[MD_CAT_OPTIMIZER_STATE];
    if (!uh.dp && !ul.dp)
        return 0;
    if (uh.by_cat[MD_CAT_PARAMETER] <= ul.by_cat[MD_CAT_PARAMETER] || !kept)
        return 0;
    static const struct { int cat; const char *name; } parts[] = {
        {MD_CAT_PARAMETER, "parameters"}, {MD_CAT_GRADIENT, "gradients"},
        {MD_CAT_OPTIMIZER_STATE, "optimizer state"}};
    char held[160] = "";
    for (size_t k = 0, len = 0; k < 3 && len < sizeof held; k++)
        if (uh.by_cat[parts[k].cat] >= (1 << 20))
            len += (size_t)snprintf(held + len, sizeof held - len, "%s%s %.1f MiB",
                                    len ? ", " : "", parts[k].name,
                                    md_mib(uh.by_cat[parts[k].cat]));
    MD_EVIDENCE(f, "nn.DataParallel (its frames in the stacks): %s holds the module (at its "
                "peak: %s); %s, a replica made for each forward", h, held, l);
    char label[512] = "an unnamed site", lab[512];
    const md_frame *fr = uh.gathered ? md_stack_user_frame(md_analysis_cache(ah),
                                                           md_analysis_snapshot(ah),
                                                           uh.gather_stack)
                                     : NULL;
    if (fr)
        snprintf(label, sizeof label, "%s", md_frame_label(md_analysis_snapshot(ah), fr, lab,
                                                            sizeof lab));
    if (uh.gathered >= (1 << 20))
        MD_EVIDENCE(f, "the replicas' outputs gathered onto %s: %.1f MiB live at its peak (at %s)",
                    h, md_mib(uh.gathered), label);
    MD_ADVICE(f, "nn.DataParallel keeps the module, its gradients and the optimizer state on %s "
              "and gathers every replica's outputs there. DistributedDataParallel (one process "
              "per GPU, started by torchrun; the HF Trainer's too) holds the same on every GPU "
              "and is faster: PyTorch recommends it over DataParallel.%s Balanced, %s would need "
              "about %.1f MiB less.", h,
              uh.gathered >= (1 << 20) ? " Short of that, have the wrapped module's forward "
                                         "return the loss alone (not the logits): only it is "
                                         "gathered."
                                       : "",
              h, md_mib(diff));
    return 1;
}

/* Imbalance: the highest peak against the lowest. ids name ranks, or the
 * CUDA devices of one process (model or pipeline parallelism), whose
 * remedy differs: the split of the model, not work one rank does. */
static int imbalance(const md_analysis *const *as, const int *ids, size_t nr, int devices,
                     md_finding **out, size_t *n)
{
    fctx c;
    memset(&c, 0, sizeof c);
    *out = NULL;
    *n = 0;
    if (nr < 2)
        return MD_OK;
    size_t hi = 0, lo = 0;
    for (size_t i = 1; i < nr; i++) {
        uint64_t p = md_replay_peak_allocated(md_analysis_replay(as[i]));
        if (p > md_replay_peak_allocated(md_analysis_replay(as[hi])))
            hi = i;
        if (p < md_replay_peak_allocated(md_analysis_replay(as[lo])))
            lo = i;
    }
    uint64_t ph = md_replay_peak_allocated(md_analysis_replay(as[hi]));
    uint64_t pl = md_replay_peak_allocated(md_analysis_replay(as[lo]));
    uint64_t diff = ph - pl;
    if (hi == lo || !pl || diff < IMBALANCE_MIN || (double)diff < IMBALANCE_SHARE * (double)pl)
        return MD_OK; /* a rank with nothing allocated is a missing rank, not an imbalance */
    md_finding *f = add(&c, "rank_imbalance",
                        (double)diff >= 0.3 * (double)pl ? MD_SEV_WARNING : MD_SEV_INFO, diff);
    if (!f)
        return MD_E_NOMEM;
    char h[24], l[24];
    snprintf(h, sizeof h, devices ? "cuda:%d" : "rank %d", ids[hi]);
    snprintf(l, sizeof l, devices ? "cuda:%d" : "rank %d", ids[lo]);
    md_say_above(f->summary, sizeof f->summary, h, md_mib(diff), l, md_mib(pl));
    MD_EVIDENCE(f, "peak allocated: %s %.1f MiB, %s %.1f MiB", h, md_mib(ph), l, md_mib(pl));
    parting(f, as[hi], as[lo], h, (double)diff);
    int loaded = say_category_part(f, as[hi], as[lo], h, diff);
    int once = say_one_off(f, as[hi], as[lo]);
    const md_indicators *ih = md_analysis_indicators(as[hi]), *il = md_analysis_indicators(as[lo]);
    if (ih->valid && il->valid)
        MD_EVIDENCE(f, "largest forward increase: %s %.1f MiB, %s %.1f MiB", h,
                    ih->largest_forward_increase_mib, l, il->largest_forward_increase_mib);
    if (devices && say_data_parallel(f, as[hi], as[lo], h, l, diff))
        ; /* its advice said */
    else if (devices)
        MD_ADVICE(f, "One process spreads the model over these devices (model or pipeline "
                  "parallelism, device_map): move layers from %s to %s (another split point, "
                  "or a smaller max_memory for %s). Balanced, %s would need about %.1f MiB less.",
                  h, l, h, h, md_mib(diff));
    else if (loaded)
        MD_ADVICE(f, "%s keeps a checkpoint it loaded onto its GPU (torch.load at %s): load it "
                  "with map_location=\"cpu\" (load_state_dict copies it onto the model's "
                  "device), or del it once loaded. Balanced, %s would need about %.1f MiB less.",
                  h, f->sites[f->nsites - 1].site, h, md_mib(diff));
    else if (once)
        MD_ADVICE(f, "It happens once, early (DDP rebuilding its gradient buckets after the first "
                  "iteration holds the old and the new for a moment; a first-iteration compile "
                  "or autotune), yet it sets %s's peak: budget for it, or look at what %s does "
                  "then. Later steps need about %.1f MiB less.", h, h, md_mib(diff));
    else
        MD_ADVICE(f, "Look for work only %s does in that phase: a larger local batch (uneven "
                  "sharding, rank-0 extras), longer sequences, rank-0 logging/evaluation, or "
                  "gathered checkpoints. Balanced, %s would need about %.1f MiB less.",
                  h, h, md_mib(diff));
    *out = c.out;
    *n = c.n;
    return MD_OK;
}

int md_lone_growth(const md_rank_growth *g, size_t ng, md_finding **out, size_t *n, size_t *cap)
{
    if (ng < 2)
        return MD_OK;
    size_t hi = 0, lo = 0;
    for (size_t i = 1; i < ng; i++) {
        if (g[i].growth_mib > g[hi].growth_mib)
            hi = i;
        if (g[i].growth_mib < g[lo].growth_mib)
            lo = i;
    }
    double gh = g[hi].growth_mib, gl = g[lo].growth_mib;
    if (gh < LONE_GROWTH_MIN_MIB || gl > LONE_GROWTH_OTHERS * gh)
        return MD_OK;
    md_finding *f = md_finding_new(out, n, cap, "rank_imbalance", MD_SEV_WARNING,
                                   (uint64_t)(gh * MIB));
    if (!f)
        return MD_E_NOMEM;
    f->rank = g[hi].rank;
    char who[96] = "";
    size_t growing = 0, len = 0;
    for (size_t i = 0; i < ng; i++) /* the ranks that grow as the most growing one does */
        if (g[i].growth_mib > LONE_GROWTH_OTHERS * gh && len < sizeof who - 16) {
            int w = snprintf(who + len, sizeof who - len, "%s%d", growing ? ", " : "", g[i].rank);
            len += w > 0 ? (size_t)w : 0;
            growing++;
        }
    MD_SUMMARY(f, "rank %d grows by %.1f MiB over the steps, rank %d by %.1f: a leak on rank%s %s's "
               "side only", g[hi].rank, gh, g[lo].rank, gl, growing > 1 ? "s" : "", who);
    for (size_t i = 0; i < ng; i++)
        MD_EVIDENCE(f, "rank %d: allocated after zero_grad grows %.1f MiB from step 0 to the last",
                    g[i].rank, g[i].growth_mib);
    MD_ADVICE(f, "Look for code only rank %d runs every step that keeps tensors: logging, metrics "
              "or evaluation under `if rank == %d`, a rank-local cache or history. That rank runs "
              "out of memory first; its own leak finding names the sites.", g[hi].rank, g[hi].rank);
    return MD_OK;
}

int md_diagnose_ranks(const md_analysis *const *as, const int *ranks, size_t nr,
                      md_finding **out, size_t *n, md_err *err)
{
    (void)err;
    int rc = imbalance(as, ranks, nr, 0, out, n);
    md_rank_growth *g = calloc(nr ? nr : 1, sizeof *g);
    if (!g)
        return MD_E_NOMEM;
    size_t ng = 0, cap = *n;
    for (size_t i = 0; i < nr; i++)
        if (md_analysis_indicators(as[i])->valid)
            g[ng++] = (md_rank_growth){ranks[i], md_analysis_indicators(as[i])->between_step_growth_mib};
    if (!rc)
        rc = md_lone_growth(g, ng, out, n, &cap);
    free(g);
    return rc;
}

int md_diagnose_devices(const md_analysis *const *as, const int *devices, size_t nd,
                        md_finding **out, size_t *n, md_err *err)
{
    (void)err;
    return imbalance(as, devices, nd, 1, out, n);
}

void md_say_above(char *dst, size_t n, const char *hi, double diff_mib, const char *lo,
                  double low_mib)
{
    if (low_mib < 1.0)
        md_fsay(dst, n, "%s peaks %.1f MiB above %s, which holds almost nothing", hi, diff_mib, lo);
    else
        md_fsay(dst, n, "%s peaks %.1f MiB (%.0f%%) above %s", hi, diff_mib,
                100.0 * diff_mib / low_mib, lo);
}

void md_stray_say(md_finding *f, const md_stray *w, double mib)
{
    double owner = md_mib(w->owner_peak);
    f->rank = w->rank;
    f->device = w->device;
    MD_SUMMARY(f, "rank %d holds %.1f MiB on cuda:%d, rank %d's GPU", w->rank, mib, w->device,
               w->owner_rank);
    MD_EVIDENCE(f, "rank %d's process runs on cuda:%d and holds up to %.1f MiB on cuda:%d too",
                w->rank, w->own_device, mib, w->device);
    MD_EVIDENCE(f, "rank %d itself peaks at %.1f MiB on cuda:%d; rank %d's %.1f MiB come on top "
                "(%.1f MiB)", w->owner_rank, owner, w->device, w->rank, mib, owner + mib);
    MD_ADVICE(f, "Keep each rank on its own GPU: torch.cuda.set_device(local_rank) before any "
              "CUDA work; tensors on f\"cuda:{local_rank}\" (not \"cuda\" before set_device, "
              "nor \"cuda:%d\"); torch.load(..., map_location=\"cpu\"); no torch.cuda call "
              "given device %d (mem_get_info, synchronize) in other ranks; "
              "init_process_group(..., device_id=...). That frees %.1f MiB on cuda:%d.",
              w->device, w->device, mib, w->device);
}

/* Memory a rank's process holds on another rank's GPU: the tensor was
 * made before torch.cuda.set_device, on "cuda" or "cuda:0" by name, or
 * loaded from a checkpoint saved on cuda:0 without map_location. The
 * owner loses that much headroom; across many ranks, cuda:0 runs out. */
int md_diagnose_stray(const md_analysis *a, const md_stray *w, md_finding **out, size_t *n,
                      md_err *err)
{
    fctx c;
    memset(&c, 0, sizeof c);
    c.a = a;
    c.s = md_analysis_snapshot(a);
    c.r = md_analysis_replay(a);
    (void)err;
    *out = NULL;
    *n = 0;
    uint64_t peak = md_replay_peak_allocated(c.r);
    if (!peak)
        return MD_OK;
    md_finding *f = add(&c, "rank_imbalance", peak >= IMBALANCE_MIN ? MD_SEV_WARNING : MD_SEV_INFO,
                        peak);
    if (!f)
        return MD_E_NOMEM;
    md_stray_say(f, w, md_mib(peak));
    MD_EVIDENCE(f, "%.1f MiB of it still held at the end of the trace",
                md_mib(md_replay_at(c.r, last_index(&c)).allocated));
    any_arg by = {{0}};
    collect_sites(&c, f, md_analysis_peak_index(c.a), any_pred, &by);
    *out = c.out;
    *n = c.n;
    return MD_OK;
}

const char *md_severity_name(int sev)
{
    return sev == MD_SEV_CRITICAL ? "critical" : sev == MD_SEV_WARNING ? "warning" : "info";
}

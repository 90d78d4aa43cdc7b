/* analyze.h - internal interface of the analysis layer. */
#ifndef MD_ANALYZE_H
#define MD_ANALYZE_H

#include "memdiag.h"
#include "../util/util.h"

enum {
    MD_TAG_FORWARD = 0x1,
    MD_TAG_BACKWARD = 0x2,
    MD_TAG_OPTIM = 0x4,
    MD_TAG_ZERO_GRAD = 0x8,
    MD_TAG_WORKSPACE = 0x10,
    MD_TAG_MODEL_INIT = 0x20,
    MD_TAG_GRAD_ACCUM = 0x40,
    MD_TAG_MATMUL = 0x80,     /* a matmul-like frame (cuBLAS workspace sites) */
    MD_TAG_SHARDED = 0x100,   /* parameters FSDP sharded (fully_shard, FSDP's __init__) */
    MD_TAG_ATTENTION = 0x200, /* attention code: "Attention"/"attn" in a frame's file or name */
    MD_TAG_LOSS = 0x400,      /* a loss over logits: cross_entropy, log_softmax, ForCausalLMLoss... */
    MD_TAG_EVAL_GATHER = 0x800, /* the HF Trainer's evaluation gathering outputs (nested_concat) */
    MD_TAG_GRAD_CALL = 0x1000,  /* inside torch.autograd.grad (a gradient penalty, MAML's inner step) */
    MD_TAG_BACKWARD_CALL = 0x2000, /* inside loss.backward() / torch.autograd.backward */
    MD_TAG_SCALER = 0x4000,     /* torch.amp's GradScaler */
    MD_TAG_MHA = 0x8000,        /* nn.MultiheadAttention's multi_head_attention_forward */
    MD_TAG_SOFTMAX = 0x10000,   /* torch.nn.functional.softmax, called from Python */
    MD_TAG_ODE = 0x20000,       /* torchdiffeq's solvers (odeint) */
    MD_TAG_TORCH_LOAD = 0x40000, /* inside torch.load (torch/serialization.py) */
    MD_TAG_SDPA = 0x80000,      /* a fused attention called: scaled_dot_product_attention
                                   (transformers' sdpa path), FlexAttention */
    MD_TAG_SDPA_MATH = 0x100000, /* its math kernel, which materializes the matrices (C++ stacks) */
    MD_TAG_DATAPARALLEL = 0x200000, /* nn.DataParallel: its forward, replicas, worker threads */
    MD_TAG_DP_GATHER = 0x400000,    /* DataParallel gathering the replicas' outputs */
    MD_TAG_GP = 0x800000,           /* gpytorch / linear_operator: Gaussian processes' kernels */
    MD_TAG_PER_EDGE = 0x1000000,    /* torch_geometric's per-edge work: the gather, message,
                                       edge_update, softmax over edges */
    MD_TAG_EDGE_SOFTMAX = 0x2000000, /* torch_geometric.utils.softmax: attention over edges */
    MD_TAG_GEN_SCORES = 0x4000000,   /* transformers' generate(): its logits processors' scores */
    MD_TAG_KNOWN = 0x80000000u
};

/* Whether live block l is a parameter no frame names (made before
 * training or before the recorded history, found by the gradients and
 * state of its size). */
int md_analysis_unnamed_param(const md_analysis *a, const md_live *l);
/* Whether a backward ran among events (from, to): an allocation of the
 * autograd engine (no frames, where the trace has frames) or an event under
 * a backward frame. */
int md_analysis_backward_between(const md_analysis *a, long from, long to);

/* Per-stack tag cache (one uint32 per stack id). */
typedef struct md_stack_cache {
    uint32_t *tags;   /* per stack id */
    size_t n;
    uint32_t *ftags;  /* per frame id, all computed by md_stack_cache_fill */
    size_t nframes;
    uint32_t *user;   /* per stack id: user frame id + 1, UINT32_MAX = none,
                         0 = not computed */
    md_map files;     /* file name id -> its bits, while the frames' tags are made */
} md_stack_cache;

/* A cache for s's stacks, empty (-1: out of memory, nothing held);
 * md_stack_cache_fill computes every frame's tags, which the rest needs,
 * and with `stacks` every stack's tags and user frame too, as the analysis
 * would one by one when it asks. fill reads s and writes c only, so it can
 * run on a thread of its own while the trace is replayed. */
int md_stack_cache_new(md_stack_cache *c, const md_snapshot *s);
void md_stack_cache_fill(md_stack_cache *c, const md_snapshot *s, int stacks);
void md_stack_cache_free(md_stack_cache *c);
/* Whether s's stacks hold frames enough that classifying them all pays
 * for a thread of its own. */
int md_stack_cache_dear(const md_snapshot *s);
/* md_analyze with the stack cache made already (md_stack_cache_fill),
 * taken over (freed with the analysis, or on failure). */
int md_analyze_with(const md_snapshot *s, const md_replay *r, md_stack_cache *cache,
                    md_analysis **out, md_err *err);

/* Live sets a caller fetches ahead, on a thread of its own while the
 * analysis finds the steps: md_replay_probe of the moments every report
 * looks at that are known once the trace is replayed (its peak and the
 * peak of reserved memory; md_lives_ahead_indices). wait() is called
 * before any is read; the analysis takes the sets it wants (live[j] then
 * NULL) and leaves the rest, and a failed probe (failed), to the caller. */
#define MD_AHEAD_MAX 2
typedef struct md_lives_ahead {
    void (*wait)(struct md_lives_ahead *);
    size_t k;
    long idx[MD_AHEAD_MAX]; /* ascending */
    md_live *live[MD_AHEAD_MAX];
    size_t n[MD_AHEAD_MAX];
    md_cache_state cs[MD_AHEAD_MAX];
    int failed;
} md_lives_ahead;
/* The moments of r worth fetching ahead into idx, ascending; their count. */
size_t md_lives_ahead_indices(const md_replay *r, long idx[MD_AHEAD_MAX]);
/* md_analyze_with, taking live sets from ahead (NULL: none). */
int md_analyze_ahead(const md_snapshot *s, const md_replay *r, md_stack_cache *cache,
                     md_lives_ahead *ahead, md_analysis **out, md_err *err);

/* The innermost frame of the user's own script (not torch, the standard
 * library or an installed package), or NULL. */
const md_frame *md_script_frame(md_stack_cache *c, const md_snapshot *s, uint32_t stack);

/* md_user_frame through the analysis' cache. */
const md_frame *md_stack_user_frame(md_stack_cache *c, const md_snapshot *s, uint32_t stack);
md_stack_cache *md_analysis_cache(const md_analysis *a);

/* A stack's phase tags (MD_TAG_*), computed once per stack: the cached
 * answer inline (a load and a test; the analysis asks for every event),
 * the first out of line. */
unsigned md_stack_tags_first(md_stack_cache *c, const md_snapshot *s, uint32_t stack);
static inline unsigned md_stack_tags(md_stack_cache *c, const md_snapshot *s, uint32_t stack)
{
    if (stack == 0 || stack >= c->n)
        return 0;
    uint32_t t = c->tags[stack];
    return t & MD_TAG_KNOWN ? t & ~MD_TAG_KNOWN : md_stack_tags_first(c, s, stack);
}
const char *md_optimizer_from_stack(const md_snapshot *s, uint32_t stack);

/* Training iterations (iterations.c): where several optimizers step in
 * turn, `period` optimizer steps make one iteration and `site` holds each
 * one's call site; `steps` are the analysis' steps merged per iteration
 * (period 1: a copy of them). */
#define MD_MAX_PERIOD 8
typedef struct md_iterations {
    size_t period;
    const md_frame *site[MD_MAX_PERIOD];
    const char *name[MD_MAX_PERIOD]; /* each one's optimizer class, where its frames say */
    md_step *steps;
    size_t n;
    const md_frame *call; /* a trace without steps: the steps are the calls
                             of this line of the script (md_find_calls) */
} md_iterations;
int md_find_iterations(const md_snapshot *s, md_stack_cache *cache, const md_event *ev,
                       const md_step *st, size_t n, md_iterations *out);
/* The optimizer class of position k of the iteration's cycle, or NULL. */
const char *md_analysis_period_name(const md_analysis *a, size_t k);
/* The shortest cycle (2..MD_MAX_PERIOD) that ids (< 0: unknown) repeat at
 * least twice, every position known and not all one id, with each
 * position's id in rep; 1 when none. Steps' call sites, or the optimizers
 * a capture numbers. */
size_t md_cycle_period(const long *id, size_t n, long rep[MD_MAX_PERIOD]);
/* A trace without training steps (inference: generate() called once per
 * batch): the calls of the script line that allocates most often, each
 * from its first allocation to the last before the next call, as steps
 * whose end (after_zero) is the moment before the next call begins; the
 * last call, with no next one, is left out. Fewer than 3: none (n = 0). */
int md_find_calls(const md_snapshot *s, md_stack_cache *cache, const md_event *ev, size_t nev,
                  md_iterations *out);

/* How many of the n iterations end comparably. Where zero_grad comes first
 * in the loop, a step ends at the next iteration's zero_grad, and the last
 * one, with none after it, ends still holding its gradients (a capture has
 * no sample after its zero_grad at all): it is left out then. */
size_t md_closed_iterations(const md_step *it, size_t n);

/* A categorized live set and the allocator cache after one event, kept
 * by the analysis: the report and the findings look at the same few
 * points (the peak, the end of the last step, the end of the trace). */
typedef struct md_live_set {
    long index;
    md_live *live;      /* category filled in */
    size_t n;
    md_cache_state cache;
    int valid;
} md_live_set;

#define MD_LIVE_CACHE 6

const md_live_set *md_analysis_live(const md_analysis *a, long index);

/* Building findings (findings.c, samples.c): a new zeroed finding
 * appended to a growable array (rank and phase -1), and printf into its
 * fixed-size texts. */
md_finding *md_finding_new(md_finding **arr, size_t *n, size_t *cap, const char *kind,
                           int severity, uint64_t bytes);
void md_fsay(char *dst, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* The memory held between steps (or iterations, or calls), interval by
 * interval, from a replay or from samples alike. A leak when it grew (by
 * more than thr) in every interval, or in steps: it never fell (by more
 * than thr), grew at least 3 times, the last in the run's last third (an
 * evaluation every few steps that keeps what it made; a warm-up grows
 * early and stops, a copy made once grows once). */
typedef struct md_held_growth {
    double sum, lo, hi;     /* over the intervals */
    size_t n, ups, last_up; /* intervals, those it grew in, the last of them (1-based) */
    int fell;
} md_held_growth;
#define MD_HELD_GROWTH_INIT {0, INFINITY, -INFINITY, 0, 0, 0, 0}
void md_held_growth_add(md_held_growth *g, double d, double thr);
/* 0: no leak; else how many intervals it grew in (n: every one). */
size_t md_held_growth_leak(const md_held_growth *g);
/* A leak under the totals' noise is said if it reaches 1 GiB within this
 * many steps (10.5 KiB a step): predictions kept every step are; a kept
 * loss scalar (512 B, 1 GiB after two million steps) is not. */
#define MD_SMALL_LEAK_HORIZON 100000.0
static inline int md_small_leak_said(double mib_per_step)
{
    return mib_per_step * MD_SMALL_LEAK_HORIZON >= 1024.0;
}
/* The summary, first evidence and advice of a stray-device finding
 * (memory on another rank's GPU), from a snapshot or from samples. */
void md_stray_say(md_finding *f, const md_stray *w, double mib);
/* A leak on one rank's side only: growth over the steps on the most
 * growing rank of at least 16 MiB and, on the least growing, under a
 * quarter of it. Adds a rank_imbalance finding naming that rank. */
typedef struct md_rank_growth {
    int rank;
    double growth_mib; /* between_step_growth_mib */
} md_rank_growth;
int md_lone_growth(const md_rank_growth *g, size_t ng, md_finding **out, size_t *n, size_t *cap);
/* "cuda:1 peaks 12.0 MiB (65%) above cuda:0", or, where the lower holds
 * under 1 MiB (a percentage of nearly nothing says nothing), "... above
 * cuda:0, which holds almost nothing". */
void md_say_above(char *dst, size_t n, const char *hi, double diff_mib, const char *lo,
                  double low_mib);
/* Other processes on a rank's device (processes.c): the MiB NVML counted
 * beside the process at sample s (0 where it could not tell, or under
 * NVML's own noise), said in f, a non_framework finding of gap
 * MiB: evidence, each process listed as a site, and, where they hold at
 * least half the gap, the summary and advice by whose they are (this
 * process's children, its siblings, another job). */
double md_other_processes(const md_sample_rank *r, const md_sample *s, double gap,
                          md_finding *f);
/* Ranks of one job whose own GPU is one (same host and device): a
 * rank_imbalance finding for each such group. */
int md_shared_gpus(const md_sample_rank *r, size_t nr, md_finding **out, size_t *n, size_t *cap);
#define MD_SUMMARY(f, ...) md_fsay((f)->summary, sizeof (f)->summary, __VA_ARGS__)
#define MD_ADVICE(f, ...) md_fsay((f)->advice, sizeof (f)->advice, __VA_ARGS__)
#define MD_EVIDENCE(f, ...)                                                             \
    do {                                                                                \
        if ((f)->nevidence < MD_FINDING_MAX_EVIDENCE)                                   \
            md_fsay((f)->evidence[(f)->nevidence++], sizeof (f)->evidence[0], __VA_ARGS__); \
    } while (0)

/* Category of a live allocation given the analysis (steps, lifetimes). */
md_category md_categorize(const md_analysis *a, const md_live *l);

/* Blocks made before a recorded history against what a step of it left
 * live, by size (repeats.c). Zero-initialized; md_repeats_free after. */
typedef struct md_size_tally {
    uint64_t size;
    size_t kept, before; /* blocks the step left, blocks from before */
} md_size_tally;
typedef struct md_repeats {
    md_size_tally *v;
    size_t n, cap;
    int nomem; /* a count was lost for want of memory */
} md_repeats;
void md_repeats_kept(md_repeats *r, uint64_t size);
void md_repeats_before(md_repeats *r, uint64_t size);
/* Whether the blocks from before hold every size kept at least as often
 * for 4/5 of the kept bytes; *before: their bytes in those sizes, *times:
 * how many times over they hold each such size, the least. */
int md_repeats_hold(const md_repeats *r, uint64_t *before, double *times);
/* Whether the blocks from before hold `size` at least as often as kept. */
int md_repeats_size(const md_repeats *r, uint64_t size);
void md_repeats_free(md_repeats *r);
const md_snapshot *md_analysis_snapshot(const md_analysis *a);
const md_replay *md_analysis_replay(const md_analysis *a);

#endif

/* memdiag.h - public API of libmemdiag.
 *
 * libmemdiag reads PyTorch CUDA caching-allocator snapshots (the pickles
 * written by torch.cuda.memory._dump_snapshot) without executing them,
 * replays their allocator history, and derives the facts memdiag reports:
 * allocated/reserved/requested over time, peaks, live sets attributed to
 * stacks and categories, training steps and phases, and the seed exercise's
 * four indicators.
 *
 * Conventions
 * - Every fallible call returns MD_OK (0) or a negative MD_E_* code and fills
 *   the caller's md_err (which may be NULL). The library never prints, logs
 *   or exits.
 * - Objects are opaque handles or read-only structs owned by the handle that
 *   produced them; one *_free call releases everything.
 * - Sizes are bytes, times are microseconds since the Unix epoch (as torch
 *   records them), string and stack ids are indices into the snapshot's
 *   tables (0 means "none").
 */
#ifndef MEMDIAG_H
#define MEMDIAG_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MEMDIAG_VERSION "0.1.0"

/* ---- errors ------------------------------------------------------------ */

enum {
    MD_OK = 0,
    MD_E_IO = -1,      /* cannot open/read the file */
    MD_E_FORMAT = -2,  /* not a pickle, truncated, malformed opcode stream */
    MD_E_UNSAFE = -3,  /* the pickle asks to construct objects: refused */
    MD_E_LIMIT = -4,   /* a safety bound was hit (nesting, memo, length) */
    MD_E_NOMEM = -5,
    MD_E_SCHEMA = -6,  /* a valid pickle that is not an allocator snapshot */
    MD_E_ARG = -7      /* bad argument from the caller */
};

typedef struct md_err {
    int code;
    char file[512];   /* the input the error is about ("" if none) */
    int64_t offset;   /* byte offset in the (decompressed) input, -1 if n/a */
    char msg[320];    /* what is wrong and where (key path, opcode name) */
} md_err;

/* "file:offset: msg" (or "file: msg") into buf; returns buf. */
const char *md_err_format(const md_err *err, char *buf, size_t n);

/* ---- snapshot model ---------------------------------------------------- */

typedef enum md_action {
    MD_ACT_ALLOC = 1,
    MD_ACT_FREE_REQUESTED,
    MD_ACT_FREE_COMPLETED,
    MD_ACT_SEGMENT_ALLOC,
    MD_ACT_SEGMENT_FREE,
    MD_ACT_SEGMENT_MAP,    /* expandable segments, torch >= 2.1 */
    MD_ACT_SEGMENT_UNMAP,
    MD_ACT_SNAPSHOT,
    MD_ACT_OOM,
    MD_ACT_ANNOTATE,       /* torch._annotate_memory, newer torch */
    MD_ACT_UNKNOWN         /* an action this build does not know: kept, ignored */
} md_action;

const char *md_action_name(md_action a);

typedef struct md_frame {
    uint32_t name;     /* string id of the function name */
    uint32_t filename; /* string id */
    int32_t line;
} md_frame;

/* One trace entry. For MD_ACT_OOM, addr holds device_free (bytes free on
 * the device as CUDA reported it) and size the request that failed. */
typedef struct md_event {
    uint64_t addr;
    uint64_t size;     /* requested bytes, as torch records them */
    int64_t time_us;   /* -1 when the snapshot has no times (torch < 2.2) */
    uint32_t stack;    /* stack id, 0 = no frames recorded */
    /* the stream's index among the snapshot's (md_snapshot_stream): 32
     * bytes an event, not 40, where a trace has a few streams at most */
    uint16_t stream;
    uint8_t action;    /* md_action */
    uint8_t flags;     /* MD_EV_* */
} md_event;

#define MD_EV_POOL_PRIVATE 0x1 /* pool_id present and not (0,0) */

typedef enum md_block_state {
    MD_BLOCK_INACTIVE = 0,
    MD_BLOCK_ACTIVE_ALLOCATED,
    MD_BLOCK_ACTIVE_PENDING_FREE
} md_block_state;

typedef struct md_block {
    uint64_t address;
    uint64_t size;
    uint64_t requested_size;
    uint32_t stack;
    uint8_t state; /* md_block_state */
} md_block;

/* 64 bytes: a state-only snapshot lists tens of thousands. Its active
 * and requested bytes are its blocks' (md_snapshot_blocks). */
typedef struct md_segment {
    uint64_t address;
    uint64_t total_size;
    uint64_t allocated_size;
    uint64_t stream;
    int64_t pool_id[2];
    uint32_t first_block; /* index into md_snapshot_blocks() (< 2^30) */
    uint32_t nblocks;
    uint32_t stack;
    int16_t device;       /* -1: not a device index (negative or past 32767) */
    uint8_t is_small;
    uint8_t is_expandable;
} md_segment;

typedef struct md_annotation {
    int device;
    int64_t time_us;
    uint32_t name;  /* string id */
    uint8_t stage;  /* 0 = instant/unknown, 1 = START, 2 = END */
} md_annotation;

typedef struct md_settings {
    int present;             /* allocator_settings was in the file */
    int expandable_segments;
    int64_t max_split_size;  /* -1 = unlimited */
    double gc_threshold;
    uint32_t alloc_conf;     /* string id of PYTORCH_CUDA_ALLOC_CONF */
    uint32_t roundup_divisions[16]; /* per power-of-two interval from 1 MiB */
} md_settings;

typedef struct md_snapshot md_snapshot;

/* Reads a snapshot (pickle protocol 2-5; plain, gzip, zstd or xz). */
int md_snapshot_load(const char *path, md_snapshot **out, md_err *err);
/* How md_snapshot_load_with reads a file. */
typedef struct md_load_opts {
    /* Read (and decompress) the file on a thread of its own, a few chunks
     * ahead of the reader (md_snapshot_load does): a gain where a CPU is
     * free, a cost where every CPU already reads a file (0 then). Pipes
     * and plain files under 4 MiB are read on the caller's thread anyway. */
    int read_ahead;
    /* Told, on the reading thread, of the trace entries read so far: every
     * few thousand (MD_EVENTS_MORE) and when the pickle has been read
     * (MD_EVENTS_END). events[0, n) are complete, in file order (every
     * device's, one after another), and stay where they are until
     * md_snapshot_free or a call with events NULL, which must not return
     * while anything still reads them: MD_EVENTS_PAUSE, the array is about
     * to move (a MORE with its new place follows, unless the read had
     * ended), or MD_EVENTS_GONE, it is about to be freed (nothing follows).
     * expect: the count the file's size suggests (0: unknown, as for a
     * compressed file). NULL: not told. */
    void (*on_events)(void *ctx, const md_event *events, size_t n, size_t expect, int state);
    void *events_ctx;
    /* The events, the stacks' frame ids, the segments and the blocks grow
     * in malloc's heap until they reach 512 KiB, instead of starting in
     * mappings of their own (where a heap array's doublings would copy them
     * into fresh pages, a fault each 4 KiB, and leave the copies resident
     * beside the mapping): for a caller that has put the heap on huge pages
     * (the CLI, for small inputs where faults are dear), or that runs under
     * a limit counting each 2 MB mapping whole (ulimit -d or -v). */
    int heap_first;
    /* Read the trace of a plain file (md_snapshot_load_with) or of input
     * read in place (md_snapshot_read_with over md_input_mem) on two
     * threads at once, the second starting about halfway (split_where of
     * the input, default 0.55) in a snapshot of its own that the first
     * takes in when it arrives there; `split` threads (the second's among
     * them) first count the memo before that place. 0: one reader. From
     * split_min bytes (0: 2 MiB); needs CPUs to spare, and on a 16-CPU
     * host was slower than one reader (bench/RESULTS.md, session 45: the
     * CLI leaves it off unless asked). The snapshot is the same either way. */
    int split;
    double split_where;
    size_t split_min;
} md_load_opts;
enum { MD_EVENTS_MORE, MD_EVENTS_END, MD_EVENTS_PAUSE, MD_EVENTS_GONE };
int md_snapshot_load_with(const char *path, const md_load_opts *opts, md_snapshot **out,
                          md_err *err);
/* Same from memory; name is used in error messages. */
int md_snapshot_load_mem(const void *data, size_t n, const char *name,
                         md_snapshot **out, md_err *err);
void md_snapshot_free(md_snapshot *s);

const char *md_snapshot_path(const md_snapshot *s);
int md_snapshot_ndevices(const md_snapshot *s); /* device_traces length */
const md_event *md_snapshot_events(const md_snapshot *s, int device, size_t *n);
/* The stream (torch's cudaStream_t value, 0: the default stream) of an
 * event's stream index; index 0 is always stream 0. */
uint64_t md_snapshot_stream(const md_snapshot *s, unsigned index);
/* Whether the device's trace is a history (two events or more): 0 for a
 * snapshot taken without one (no _record_memory_history, enabled="state"
 * whose trace keeps only the last event, torch.cuda.memory_snapshot()'s
 * list), which holds only what was live when it was taken: no peak, steps
 * or lifetimes can be known from it. */
int md_snapshot_has_history(const md_snapshot *s, int device);
const md_segment *md_snapshot_segments(const md_snapshot *s, size_t *n);
const md_block *md_snapshot_blocks(const md_snapshot *s, size_t *n);
const md_annotation *md_snapshot_annotations(const md_snapshot *s, size_t *n);
const md_settings *md_snapshot_settings(const md_snapshot *s);
/* Schema features seen, MD_HAS_* bits. */
unsigned md_snapshot_features(const md_snapshot *s);
#define MD_HAS_TIME 0x1
#define MD_HAS_FRAMES 0x2
#define MD_HAS_SETTINGS 0x4
#define MD_HAS_ANNOTATIONS 0x8
#define MD_HAS_LEGACY_HISTORY 0x10 /* torch 2.0 block history */
#define MD_HAS_LEGACY_LIST 0x20    /* bare list of segments */
#define MD_HAS_CPP_FRAMES 0x40     /* stacks='all' */

const char *md_snapshot_string(const md_snapshot *s, uint32_t id);
/* "file:line function" of a frame into buf (n bytes); returns buf. */
const char *md_frame_label(const md_snapshot *s, const md_frame *f, char *buf, size_t n);
/* Frame ids of a stack, innermost first: the i-th of n is md_stack_id(st,
 * i), which md_snapshot_frame resolves. They are held 16 bits each where a
 * snapshot's frames all fit (nearly always: a stack-heavy trace's frame ids
 * were a fifth of its memory at 32), else 32. */
typedef struct md_stack_ids {
    const void *ids;
    size_t n;
    int wide; /* 32-bit ids, else 16-bit */
} md_stack_ids;
static inline uint32_t md_stack_id(md_stack_ids st, size_t i)
{
    return st.wide ? ((const uint32_t *)st.ids)[i] : ((const uint16_t *)st.ids)[i];
}
/* A stack's frame ids ({NULL, 0} for stack 0 and ids past the last). */
md_stack_ids md_snapshot_stack(const md_snapshot *s, uint32_t stack);
const md_frame *md_snapshot_frame(const md_snapshot *s, uint32_t frame);
size_t md_snapshot_nstacks(const md_snapshot *s);

/* ---- replay ------------------------------------------------------------ */

/* Memory categories inferred from frames and lifetimes. */
typedef enum md_category {
    MD_CAT_PARAMETER = 0,
    MD_CAT_GRADIENT,
    MD_CAT_OPTIMIZER_STATE,
    MD_CAT_ACTIVATION,     /* autograd-saved tensors and forward outputs */
    MD_CAT_WORKSPACE,      /* cuBLAS/cuBLASLt/cuDNN workspaces */
    MD_CAT_INPUT,
    MD_CAT_TEMPORARY,      /* backward/optimizer temporaries */
    MD_CAT_OTHER,
    MD_CAT_COUNT
} md_category;
const char *md_category_name(md_category c);

typedef struct md_replay md_replay;

/* A point on the timeline: the state after event `index` (-1 = before the
 * first event). */
typedef struct md_point {
    uint64_t allocated;  /* block bytes, as torch.cuda.memory_allocated */
    uint64_t reserved;   /* segment bytes, as torch.cuda.memory_reserved */
    uint64_t requested;  /* sum of requested sizes of live allocations */
} md_point;

/* Replays one device's trace with the caching allocator's block rules.
 * Allocations made before recording began (ring-buffer overflow or late
 * start) are reconstructed from frees without allocs and from the final
 * segment state, so totals match torch's counters. */
int md_replay_run(const md_snapshot *s, int device, md_replay **out, md_err *err);
void md_replay_free(md_replay *r);
size_t md_replay_nevents(const md_replay *r);
md_point md_replay_at(const md_replay *r, long index);
md_point md_replay_initial(const md_replay *r);
/* Index of the event after which allocated is highest (-1 if none). */
long md_replay_peak_index(const md_replay *r);
uint64_t md_replay_peak_allocated(const md_replay *r);
uint64_t md_replay_peak_reserved(const md_replay *r);
/* Event index of the free of the allocation made at event alloc_index
 * (-1: never freed in the trace, or not an alloc). */
long md_replay_free_index(const md_replay *r, long alloc_index);
/* Problems the replay tolerated (free of an unknown address, ...). */
size_t md_replay_anomalies(const md_replay *r);

/* Stack ids stay below this: the reader refuses a snapshot with more
 * distinct stacks (MD_E_LIMIT), so md_live holds one in 24 bits. */
#define MD_MAX_STACKS ((1u << 24) - 1)

/* One live allocation at a point in time: 32 bytes, as a live set can
 * hold every block of a snapshot (a state-only one's 250 000: 8 MB). */
typedef struct md_live {
    uint64_t addr;
    uint64_t block_size;
    uint64_t requested;
    int32_t alloc_index;     /* event index of the alloc (< 2^30), -1 = before recording */
    uint32_t stack : 24;     /* < MD_MAX_STACKS */
    uint32_t category : 8;   /* md_category */
} md_live;

/* The live set after event `index` (-1 = initial state). The array is
 * malloc'd; the caller frees it. */
int md_replay_live(const md_replay *r, long index, md_live **out, size_t *n,
                   md_err *err);

/* The allocator's cache after event `index`: free blocks inside reserved
 * segments (what a request can reuse without cudaMalloc). */
typedef struct md_cache_state {
    uint64_t largest_free;  /* largest free block */
    uint64_t free_total;    /* all free blocks */
    uint64_t pending_free;  /* freed, waiting on stream events */
    size_t segments;
} md_cache_state;
int md_replay_cache_at(const md_replay *r, long index, md_cache_state *out, md_err *err);
/* Several points in one replay: live[j] (malloc'd, caller frees) and, when
 * cache is not NULL, cache[j] after event idx[j]; idx ascending. */
int md_replay_probe(const md_replay *r, const long *idx, size_t k, md_live **live,
                    size_t *nlive, md_cache_state *cache, md_err *err);

/* The allocator's segments after event `index` (-1 = initial state), each
 * with its blocks in address order: what torch's snapshot would have said
 * then (an expandable segment as its runs of mapped pages, each a segment
 * of its own). Arrays malloc'd; the caller frees both. */
typedef struct md_replay_seg {
    uint64_t addr, size;
    int expandable;
    size_t first_block, nblocks; /* into the blocks array */
} md_replay_seg;
enum { MD_BS_FREE = 0, MD_BS_ALLOCATED = 1, MD_BS_PENDING_FREE = 2 };
typedef struct md_replay_block {
    uint64_t addr, size, requested;
    uint32_t stack;
    uint8_t state; /* MD_BS_* */
} md_replay_block;
int md_replay_segments_at(const md_replay *r, long index, md_replay_seg **segs, size_t *nsegs,
                          md_replay_block **blocks, size_t *nblocks, md_err *err);

/* ---- steps, phases, indicators ----------------------------------------- */

typedef enum md_phase {
    MD_PHASE_FORWARD = 0,
    MD_PHASE_BACKWARD,
    MD_PHASE_OPTIMIZER,
    MD_PHASE_ZERO_GRAD,
    MD_PHASE_COUNT
} md_phase;
const char *md_phase_name(md_phase p);

/* Event-index boundaries of one training step; each is "the state after
 * this event index" (-1 = before the first event). */
typedef struct md_step {
    int number;          /* optimizer step ordinal (counts steps that fell
                            before a truncated history, too) */
    long fwd_start;      /* state before the forward (baseline) */
    long after_forward;  /* state just before backward starts */
    long after_backward; /* state just before the optimizer step */
    long after_optim;    /* state after the optimizer step */
    long after_zero;     /* state after zero_grad (== after_optim if none) */
    uint64_t peak;       /* highest allocated inside the step */
    long peak_index;
} md_step;

#define MD_STEPS_FROM_ANNOTATIONS 1
#define MD_STEPS_FROM_FRAMES 2

typedef struct md_indicators {
    double first_step_persistent_change_mib;
    double between_step_growth_mib;
    double largest_forward_increase_mib;
    double maximum_peak_allocated_mib;
    int valid; /* 0 when no complete step was found */
    int first_step_recorded; /* step 0 is in the history: the first indicator
                                means something only then */
} md_indicators;

typedef struct md_analysis md_analysis;

/* Finds steps and phases in one device's replay and derives indicators. */
int md_analyze(const md_snapshot *s, const md_replay *r, md_analysis **out,
               md_err *err);
void md_analysis_free(md_analysis *a);
const md_step *md_analysis_steps(const md_analysis *a, size_t *n);
/* The event after which memory is reported at its peak: the replay's
 * (md_replay_peak_index), or where the history began inside a step and
 * the peak falls in that step's end, the first moment of a whole step
 * that reaches the same bytes, if any. */
long md_analysis_peak_index(const md_analysis *a);
int md_analysis_step_source(const md_analysis *a); /* MD_STEPS_* or 0 */
/* Several optimizers stepping in turn (a GAN's discriminator and
 * generator, actor-critic): how many optimizer steps make one training
 * iteration, told from the call sites of what each step allocates (1: one
 * optimizer, or no cycle shows). Iterations are the steps merged in
 * groups of that many, ending with the last step (the first one's start
 * and forward, the last one's backward, optimizer step and end; numbered
 * from 0), the same as the steps when the period is 1. The period's k-th
 * call site, or NULL (period 1). */
size_t md_analysis_period(const md_analysis *a);
const md_step *md_analysis_iterations(const md_analysis *a, size_t *n);
const md_frame *md_analysis_period_site(const md_analysis *a, size_t k);
/* The cycle in words: each call site in the order of one iteration, a run
 * of one written once with its count ("gan.py:50 train 5 times, then
 * gan.py:60 train"). Returns how many different sites (0: period 1). */
size_t md_analysis_period_say(const md_analysis *a, char *dst, size_t n);
/* A trace without training steps (an inference loop): the line of the
 * script whose calls the iterations are (each call from its first
 * allocation to the moment before the next), or NULL (steps were found,
 * or fewer than 3 calls). */
const md_frame *md_analysis_call_site(const md_analysis *a);
/* The device whose optimizer annotations gave the steps: the analysed
 * device's own, or, where it has none, the lowest device of the same
 * snapshot that has them (one process: DataParallel, a model split over
 * devices); -1 when the steps came from frames or were not found. */
int md_analysis_step_device(const md_analysis *a);
const md_indicators *md_analysis_indicators(const md_analysis *a);
/* Name of the optimizer class seen in annotations/frames ("" if unknown). */
const char *md_analysis_optimizer(const md_analysis *a);

/* Live bytes grouped by site (first user frame) after event `index`, largest
 * first, each with its dominant category; by_category (may be NULL) gets
 * the live bytes per md_category. The array is malloc'd; the caller frees. */
typedef struct md_site {
    uint32_t frame_name;  /* string ids; 0 when no user frame */
    uint32_t frame_file;
    int32_t frame_line;
    uint64_t bytes;
    uint32_t count;
    uint8_t category;
    uint8_t before_recording; /* 1: allocated before the history began, site unknown;
                                 2: no stack, in a snapshot with no history */
} md_site;

int md_sites_at(const md_analysis *a, long index, md_site **out, size_t *n,
                uint64_t by_category[MD_CAT_COUNT], md_err *err);

/* Live blocks after event `index` grouped by block size, the most bytes
 * first: what is left to go on where blocks carry no stacks (a snapshot
 * taken with no history). The array is malloc'd; the caller frees. */
typedef struct md_size_group {
    uint64_t size;  /* block bytes */
    uint32_t count;
} md_size_group;
int md_sizes_at(const md_analysis *a, long index, md_size_group **out, size_t *n, md_err *err);

/* The caching allocator's private pools on a device at the end of the
 * history (segments whose pool id is not (0, 0)): CUDA graphs
 * (torch.compile mode="reduce-overhead", torch.cuda.graph) and
 * torch.cuda.MemPool. Their memory serves only allocations made in that
 * pool, so it is reserved memory the rest of the job cannot reuse. */
typedef struct md_pools {
    int count;           /* distinct private pools */
    int segments;
    uint64_t reserved;   /* their segments' bytes */
    uint64_t allocated;  /* in use within them */
} md_pools;

md_pools md_private_pools(const md_snapshot *s, int device);

/* A flame graph of the memory live after one event: every live
 * allocation's whole stack, outermost frame first, merged into a tree
 * whose nodes hold the bytes live at or below them. Node 0 is the root
 * (all live memory). */
#define MD_FLAME_NONE UINT32_MAX
enum {
    MD_FLAME_FRAME = 0,      /* a frame of the stacks (frame is its id) */
    MD_FLAME_ROOT,
    MD_FLAME_NO_FRAMES,      /* allocations recorded without frames */
    MD_FLAME_BEFORE_HISTORY, /* allocated before the recorded history began */
    MD_FLAME_CPP_ONLY        /* MD_FLAME_PYTHON_ONLY left none of its frames */
};
#define MD_FLAME_PYTHON_ONLY 0x1 /* leave out C++ frames (stacks='all') */

typedef struct md_flame_node {
    uint8_t kind;            /* MD_FLAME_* */
    uint8_t category;        /* the md_category holding most of its bytes */
    uint32_t frame;          /* MD_FLAME_FRAME: frame id (md_snapshot_frame) */
    uint32_t parent;         /* MD_FLAME_NONE for the root */
    uint32_t first_child;    /* children hold the most bytes first */
    uint32_t next_sibling;
    uint32_t depth;          /* the root is 0 */
    uint64_t bytes;          /* block bytes live at or below this node */
    uint64_t self_bytes;     /* of which allocated right here (the stack ends here) */
    uint32_t count;          /* allocations at or below */
} md_flame_node;

/* The flame graph after event `index` (-1: the initial state). flags:
 * MD_FLAME_*. The array is malloc'd; the caller frees it. */
int md_flame_at(const md_analysis *a, long index, unsigned flags, md_flame_node **out,
                size_t *n, md_err *err);

/* Category of one live allocation (needs the steps found by md_analyze). */
md_category md_analysis_category(const md_analysis *a, const md_live *l);

/* ---- findings ------------------------------------------------------------ */

enum { MD_SEV_INFO = 0, MD_SEV_WARNING = 1, MD_SEV_CRITICAL = 2 };
const char *md_severity_name(int severity);

#define MD_FINDING_MAX_EVIDENCE 8
#define MD_FINDING_MAX_SITES 6

typedef struct md_finding_site {
    char site[320];   /* "file:line function" */
    uint64_t bytes;
    uint32_t count;
} md_finding_site;

/* One named cause (docs/diagnosis.md): kind is one of leak,
 * optimizer_state, library_workspace, activations, logits, fragmentation,
 * rank_imbalance, non_framework, oom. */
typedef struct md_finding {
    char kind[24];
    int severity;               /* MD_SEV_* */
    uint64_t bytes;             /* the memory the finding is about */
    int rank;                   /* -1 unless set by the caller */
    int device;                 /* the GPU it is about where that is not the rank's
                                   own (memory on another rank's GPU); -1 */
    int phase;                  /* rank_imbalance: md_phase where ranks part, -1 */
    char summary[256];
    char evidence[MD_FINDING_MAX_EVIDENCE][256];
    int nevidence;
    md_finding_site sites[MD_FINDING_MAX_SITES];
    int nsites;
    char advice[512];
} md_finding;

/* Findings for one rank. The array is malloc'd; the caller frees it. */
int md_diagnose(const md_analysis *a, md_finding **out, size_t *n, md_err *err);
/* Cross-rank findings (rank_imbalance) over analyses of one job's ranks. */
int md_diagnose_ranks(const md_analysis *const *as, const int *ranks, size_t nranks,
                      md_finding **out, size_t *n, md_err *err);
/* The same over the CUDA devices of one process (one snapshot tracing
 * several devices: model or pipeline parallelism); the finding names
 * devices ("cuda:1") and its advice is about the model's split. */
int md_diagnose_devices(const md_analysis *const *as, const int *devices, size_t ndevices,
                        md_finding **out, size_t *n, md_err *err);
/* A rank's process that also allocates on another rank's GPU (a tensor
 * made before set_device, a checkpoint loaded without map_location). */
typedef struct md_stray {
    int rank, own_device;     /* the process, and the device it runs on */
    int device;               /* the other GPU */
    int owner_rank;           /* whose GPU that is */
    uint64_t owner_peak;      /* that rank's own peak there, bytes */
} md_stray;
/* A rank_imbalance finding from `a`, the analysis of that other device's
 * trace in the process's snapshot (none if it never held memory there). */
int md_diagnose_stray(const md_analysis *a, const md_stray *w, md_finding **out, size_t *n,
                      md_err *err);

/* ---- phase samples (the seed script's JSON reports) ------------------------ */

/* Counters sampled at phase points, as the seed script and memdiag's capture
 * record them: torch's allocated/reserved/peak and the device-wide used
 * memory (which includes the CUDA context, NCCL and other processes). */
typedef enum md_sample_phase {
    MD_SP_AFTER_MODEL = 0,
    MD_SP_AFTER_OPTIMIZER_CREATION,
    MD_SP_AFTER_INPUT,
    MD_SP_AFTER_FORWARD,
    MD_SP_AFTER_BACKWARD,
    MD_SP_AFTER_OPTIMIZER_STEP,
    MD_SP_AFTER_CLEAR_GRADIENTS,
    MD_SP_OTHER
} md_sample_phase;
const char *md_sample_phase_name(md_sample_phase p);

typedef struct md_sample {
    int step;          /* -1 before the first step */
    int phase;         /* md_sample_phase */
    double allocated_mib, reserved_mib, peak_allocated_mib;
    double device_used_mib; /* < 0 when not recorded */
    double process_used_mib; /* this process's use of the device (NVML: PyTorch's
                                reserved memory, its CUDA context, libraries);
                                < 0 when not recorded */
    int64_t time_ns;         /* when (CLOCK_REALTIME, a capture's clock); 0 unknown */
} md_sample;

/* What a capture file holds, read back (tolerates a torn tail). */
typedef struct md_capture_info {
    int complete;            /* END record present */
    int status;              /* from END; -1 if absent */
    int truncated;           /* a torn or corrupt tail was skipped */
    size_t steps;            /* STEP records */
    size_t ooms;
    uint64_t oom_requested, oom_device_free;
    int64_t oom_time_ns;     /* the last OOM record's time */
    uint64_t oom_limit;      /* the allocator's limit: device total or memory fraction */
    size_t steps_after_oom;  /* STEP records after the last OOM: the job caught it */
    char snapshot[512];      /* the last snapshot record's path */
    char snapshot_reason[32];
    int world_size;          /* from META, 0 if absent */
} md_capture_info;

/* Device memory as the CUDA driver handed it out: each successful
 * allocation call of the process, seen by `memdiag run`'s CUPTI tracer
 * (driver-{host}-pid{pid}.mdcap). cuMemCreate is physical memory (expandable
 * segments, NCCL's buffers); the stream-ordered calls are sub-allocations
 * of the driver's pools. */
typedef enum md_drv_op {
    MD_DRV_ALLOC = 1,      /* cuMemAlloc */
    MD_DRV_ALLOC_PITCH,    /* cuMemAllocPitch */
    MD_DRV_FREE,           /* cuMemFree */
    MD_DRV_ALLOC_MANAGED,  /* cuMemAllocManaged */
    MD_DRV_CREATE,         /* cuMemCreate */
    MD_DRV_RELEASE,        /* cuMemRelease */
    MD_DRV_ALLOC_ASYNC,    /* cuMemAllocAsync, cuMemAllocFromPoolAsync */
    MD_DRV_FREE_ASYNC      /* cuMemFreeAsync */
} md_drv_op;

typedef struct md_driver_event {
    int64_t time_ns;
    uint64_t id;           /* address, or the cuMemCreate handle */
    uint64_t bytes;        /* 0 on a free or release */
    int32_t device;        /* -1 when not known */
    uint8_t op;            /* md_drv_op */
    uint32_t caller;       /* index into callers; 0 = "" (frees) */
} md_driver_event;

#define MD_DRIVER_NAME_LEN 64
typedef struct md_driver_log {
    int present;           /* a driver file was read for this process */
    char status[96];       /* the tracer's: "on", or why it was off */
    md_driver_event *ev;
    size_t n;
    char (*callers)[MD_DRIVER_NAME_LEN]; /* library file names; [0] = "" */
    size_t ncallers;
} md_driver_log;

/* An optimizer step in a capture: which optimizer of the process took it,
 * numbered 0, 1, ... in the order they first stepped (a GAN's two). */
typedef struct md_step_optimizer {
    int step;
    int optimizer;
} md_step_optimizer;

/* Another process using a GPU (NVML's compute processes), as described
 * from /proc by the process that saw it. */
typedef struct md_gpu_process {
    uint32_t pid;
    uint32_t ppid;     /* its parent; 0 where /proc did not show it */
    uint64_t used;     /* bytes; UINT64_MAX where NVML could not say */
    char name[64];     /* its command line, cut; "" where unknown */
} md_gpu_process;

typedef struct md_sample_rank {
    int rank;
    int local_rank;
    int device;                /* CUDA device index; -1 when not recorded */
    int further_device;        /* a further device of the process whose capture
                                  this is (DataParallel, a model split), not the
                                  process's own */
    char source[512];
    char gpu[64];
    double device_total_mib;   /* 0 when unknown */
    md_sample *samples;
    size_t nsamples;
    md_indicators indicators;  /* computed from the samples, seed-script rules */
    int has_capture;           /* read from a memdiag capture file */
    md_capture_info capture;
    int pid;                   /* the process's, from its capture file; 0 unknown */
    int ppid;                  /* its parent's; 0 unknown */
    char role[32];             /* "DataLoader worker 0"; "" for a training process */
    char host[64];             /* from its capture's META; "" unknown */
    int helper;                /* its parent process is among the inputs (a DataLoader
                                  worker, a spawned helper): not a rank of its own
                                  (md_sample_ranks_relate) */
    int driver_file;           /* this capture is a driver file (kind=driver) */
    md_driver_log driver;      /* the process's driver-level allocations */
    md_step_optimizer *step_optimizers; /* which optimizer finished each step,
                                           where the capture says (STEP records) */
    size_t nstep_optimizers;
    md_gpu_process *others;    /* other processes seen on its device (PROCESSES
                                  records): each pid once, at its largest use */
    size_t nothers;
} md_sample_rank;

/* Reads a seed-script JSON report (one or several ranks). The array and
 * each rank's samples are malloc'd; md_sample_ranks_free releases them. */
int md_seedjson_load(const char *path, md_sample_rank **ranks, size_t *n, md_err *err);
int md_seedjson_load_mem(const void *data, size_t len, const char *name,
                         md_sample_rank **ranks, size_t *n, md_err *err);
void md_sample_ranks_free(md_sample_rank *ranks, size_t n);
/* Frees what one rank owns (samples, driver log, step optimizers). */
void md_sample_rank_clear(md_sample_rank *r);
void md_driver_log_free(md_driver_log *d);

/* What each library held through the driver (md_driver_analyze). */
typedef struct md_driver_use {
    const char *caller;       /* library file name ("libnccl.so.2"); in the log */
    const char *what;         /* "NCCL communicator buffers", or NULL if unknown */
    uint64_t at_peak;         /* bytes live at the process's driver-level peak */
    uint64_t max_live;        /* its own largest */
    uint64_t at_end;          /* still allocated when the trace ended */
    size_t allocs;
    int physical;             /* through cuMemCreate (virtual memory management) */
    int async;                /* stream-ordered pool allocations */
} md_driver_use;

typedef struct md_driver_stats {
    uint64_t peak;            /* most bytes live at once, all libraries */
    int64_t peak_ns, start_ns, end_ns;
    uint64_t at_end;
    uint64_t outside_peak;    /* most live at once outside PyTorch's caching allocator */
    int64_t outside_peak_ns;
    md_driver_use *use;       /* libraries that allocated, largest at the peak first */
    size_t nuse;
    size_t unmatched;         /* frees of memory allocated before the trace began (a
                                 release of a handle this process did not create,
                                 imported from a peer, is not one) */
} md_driver_stats;

/* Replays a driver log; device -1 for all the process's devices. */
int md_driver_analyze(const md_driver_log *d, int device, md_driver_stats *s, md_err *err);
void md_driver_stats_free(md_driver_stats *s);

/* The live total over time in at most ncols columns of equal time (empty
 * ones left out): *out is malloc'd. */
typedef struct md_driver_col {
    double seconds;           /* the column's first event, after the trace's first */
    uint64_t lo, hi;          /* lowest and highest total live, all libraries */
    uint64_t torch;           /* highest held by PyTorch's caching allocator */
    size_t events;
} md_driver_col;
int md_driver_timeline(const md_driver_log *d, int device, size_t ncols, md_driver_col **out,
                       size_t *n, md_err *err);
/* The total live through the driver at each of the n moments t[] (the
 * trace's clock, ns: a capture's samples), all devices, into out[]. */
int md_driver_live_at(const md_driver_log *d, const int64_t *t, size_t n, uint64_t *out,
                      md_err *err);
/* The same at each of a capture's samples: a malloc'd array of r->nsamples,
 * or NULL (no driver-level trace, out of memory). */
uint64_t *md_driver_at_samples(const md_sample_rank *r);
/* "NCCL communicator buffers" for "libnccl.so.2"; NULL when not known. */
const char *md_driver_caller_what(const char *caller);
/* Libraries whose memory outside PyTorch's allocator has advice of its own. */
typedef enum md_driver_lib {
    MD_LIB_OTHER = 0,
    MD_LIB_NCCL,
    MD_LIB_JAX,  /* JAX/XLA's allocator: 75% of the GPU at its first use */
    MD_LIB_CUPY  /* CuPy's memory pool */
} md_driver_lib;
md_driver_lib md_driver_caller_lib(const char *caller);
int md_driver_is_torch_allocator(const char *caller);
/* Marks each capture whose parent process is another input's (helper),
 * so that it is not compared as a rank, and its memory is said by its
 * parent's non_framework finding. */
void md_sample_ranks_relate(md_sample_rank *r, size_t n);
/* A helper's role as said: "DataLoader worker 0", else "child process". */
const char *md_helper_role(const md_sample_rank *r);
/* Fills r->indicators from the samples (the seed script's rules). */
void md_samples_indicators(md_sample_rank *r);
/* Findings from samples alone: non_framework, leak; and across ranks,
 * rank_imbalance. */
int md_diagnose_samples(const md_sample_rank *r, md_finding **out, size_t *n, md_err *err);
int md_diagnose_sample_ranks(const md_sample_rank *r, size_t nranks, md_finding **out,
                             size_t *n, md_err *err);

/* ---- capture runtime (memdiag run; C/CUDA programs) -------------------------- */

/* A capture file (docs/capture-format.md): phase samples, step marks,
 * snapshot and OOM records, appended one write per record so the file is
 * readable up to its last complete record after a crash. The writer keeps
 * no global state; one md_cap per process and device. */
typedef struct md_cap md_cap;

typedef struct md_cap_sample {
    int step;                 /* -1 before the first optimizer step */
    int phase;                /* md_sample_phase */
    uint64_t allocated, reserved, peak_allocated; /* bytes, torch's counters */
    uint64_t device_used, device_total, process_used; /* UINT64_MAX = n/a */
} md_cap_sample;

/* Creates path; refuses to replace an existing file unless overwrite. */
int md_cap_open(const char *path, int overwrite, md_cap **out, md_err *err);
int md_cap_meta(md_cap *c, const char *key, const char *value);
int md_cap_write_sample(md_cap *c, const md_cap_sample *s);
/* The same phase point on another device the process uses (DataParallel's
 * replicas, a model split over devices): one record per further device. */
int md_cap_write_device_sample(md_cap *c, int device, const md_cap_sample *s);
int md_cap_step(md_cap *c, int step);
/* The same, saying which optimizer took the step (0, 1, ... in the order
 * they first stepped): where several step in turn (a GAN's generator and
 * discriminator), memdiag compares memory from iteration to iteration. */
int md_cap_optimizer_step(md_cap *c, int step, int optimizer);
int md_cap_snapshot(md_cap *c, const char *path, const char *reason);
/* limit: what the allocator may use (the device total, or less under
 * torch.cuda.set_per_process_memory_fraction). */
int md_cap_oom(md_cap *c, uint64_t requested, uint64_t device_free, uint64_t limit);
/* The other processes on a device, written when they change (n may be 0:
 * they are gone). */
int md_cap_processes(md_cap *c, int device, const md_gpu_process *p, size_t n);
/* Writes the END record and closes; status is the process's view
 * (0 normal, 3 out of memory). */
int md_cap_close(md_cap *c, int status);

/* The driver-level tracer (memdiag run loads it into each CUDA process
 * through CUDA_INJECTION64_PATH; driver-{host}-pid{pid}.mdcap): gives CUPTI up,
 * so that a profiler started later in the process (torch.profiler, which
 * CUPTI 13.0 allows one subscriber) gets it; why goes into the file. A
 * no-op where the tracer is not running. */
void md_driver_trace_stop(const char *why);

/* Device memory from NVML (libnvidia-ml.so.1 through dlopen; no CUDA
 * call, no context created). pci_bus_id as "0000:19:00.0"; returns 0 and
 * fills the counters, or -1 where NVML is unavailable. process_used is
 * this process's use when NVML can see it (not in some containers). */
int md_nvml_memory(const char *pci_bus_id, uint64_t *used, uint64_t *total,
                   uint64_t *process_used);
/* The other processes NVML lists on the device (compute processes, this
 * one left out), at most max: returns how many, or -1 where NVML is
 * unavailable. Each is described from /proc (md_gpu_process). */
int md_nvml_processes(const char *pci_bus_id, md_gpu_process *out, int max);

/* Reads a capture file into one sample rank: the process's own device
 * (rank from its META); the _mem form reads bytes already in memory (name
 * is for messages). */
int md_capture_load_mem(const void *data, size_t n, const char *name, md_sample_rank *rank,
                        md_capture_info *info, md_err *err);
int md_capture_load(const char *path, md_sample_rank *rank, md_capture_info *info,
                    md_err *err);
/* The same, with a series for each further device the process used
 * (further_device set, in device order) after its own: *ranks is malloc'd,
 * md_sample_ranks_free releases it. */
int md_capture_load_devices(const char *path, md_sample_rank **ranks, size_t *n,
                            md_capture_info *info, md_err *err);
int md_capture_load_devices_mem(const void *data, size_t len, const char *name,
                                md_sample_rank **ranks, size_t *n, md_capture_info *info,
                                md_err *err);

/* ---- predict: a training step's memory before running it ------------------ */

/* A model's shape, from a Hugging Face config.json or a preset. */
typedef struct md_model {
    char type[32];            /* model_type: gpt2, llama, mistral, qwen2, qwen3,
                                 gemma, gemma2, gemma3_text, olmo2, phi3, gpt_neox,
                                 opt, phi, granite, smollm3, mixtral, qwen3_moe,
                                 qwen2_moe, seed */
    int64_t vocab, hidden, layers, heads, kv_heads, head_dim, intermediate, positions;
    int tied;                 /* lm_head shares the embedding */
    int attention_bias;
    int64_t sliding_window;   /* 0: none (qwen2/qwen3 unless use_sliding_window) */
    int64_t sliding_layers;   /* layers with the window (0: all; gemma2: half) */
    int first_slides, last_slides; /* the first/last layer has the window (where
                                      sliding_layers is not 0) */
    int final_softcap, attn_softcap; /* gemma2's tanh soft-capping of the logits
                                        and of eager attention's scores */
    int serial_residual;      /* gpt_neox: use_parallel_residual false */
    int dropout;              /* opt: dropout, phi: resid_pdrop > 0 (a mask a dropout) */
    int embd_dropout;         /* phi: embd_pdrop > 0 */
    int64_t experts, experts_per_tok; /* mixtral: num_local_experts, num_experts_per_tok;
                                         qwen*_moe: num_experts, num_experts_per_tok
                                         (intermediate is then moe_intermediate_size) */
    int64_t shared_intermediate; /* qwen2_moe: the shared expert's width */
    int64_t classes;          /* seed presets: classifier on token 0 */
} md_model;

/* Reads config.json, a model directory holding one, or "seed:small",
 * "seed:medium". */
int md_model_load(const char *spec, md_model *m, md_err *err);
/* The same from config.json bytes in memory (name is for messages). */
int md_model_load_mem(const void *data, size_t n, const char *name, md_model *m, md_err *err);
/* Trainable parameters, counted as transformers counts them (each tensor
 * once; tied embeddings once). */
int64_t md_model_params(const md_model *m);

typedef enum md_precision { MD_FP32, MD_BF16_AUTOCAST, MD_FP16_AUTOCAST, MD_BF16_PURE } md_precision;
typedef enum md_optimizer { MD_OPT_SGD, MD_OPT_SGD_MOMENTUM, MD_OPT_ADAM, MD_OPT_ADAMW } md_optimizer;

/* Where in a steady-state step the predicted peak falls. */
typedef enum md_step_phase {
    MD_PHASE_NONE,
    MD_PHASE_LOSS_BACKWARD, /* backward through the loss: every activation
                               saved, the loss's logits-sized gradients */
    MD_PHASE_BACKWARD_TOP,  /* the last layer's backward, lm_head gradient made */
    MD_PHASE_BACKWARD_FIRST, /* the first layer's backward, the others' gradients made */
    MD_PHASE_BACKWARD_END,  /* the embedding's backward: all gradients made */
    MD_PHASE_OPTIM          /* optimizer.step(): gradients and its temporaries */
} md_step_phase;
const char *md_step_phase_name(md_step_phase p);

/* What is allocated at a moment of the step, by kind. */
typedef struct md_breakdown {
    uint64_t weights, gradients, optimizer_state, activations, logits, transient, workspace,
        inputs, buckets;
    uint64_t rounding;  /* the caching allocator's block rounding of the
                           parameter-sized tensors (the others are exact) */
} md_breakdown;

/* What predict takes from the machine: measured by `memdiag probe` on a
 * GPU (python/memdiag/probe.py) or the shipped H200 defaults. */
typedef struct md_calibration {
    char gpu[64], torch[32];   /* where it was measured */
    uint64_t context;          /* device memory outside the allocator */
    uint64_t workspace;        /* cuBLAS workspaces a forward+backward leave */
    double loss_per_logit;     /* loss backward's bytes per logit element */
    double math_per_score;     /* SDPA math path: bytes per B*H*S*S score */
} md_calibration;

/* The defaults shipped with memdiag (H200, torch 2.11, transformers 5.17). */
void md_calibration_default(md_calibration *c);
/* A calibration file written by `memdiag probe`; the _mem form parses bytes
 * in memory (name is for messages). Missing fields keep the defaults. */
int md_calibration_load(const char *path, md_calibration *c, md_err *err);
int md_calibration_load_mem(const void *data, size_t n, const char *name, md_calibration *c,
                            md_err *err);

/* LoRA target modules (transformers' names; phi3's qkv_proj is Q|K|V and
 * gate_up_proj GATE|UP, gpt2's c_attn Q|K|V). */
enum { MD_LORA_Q = 1, MD_LORA_K = 2, MD_LORA_V = 4, MD_LORA_O = 8, MD_LORA_GATE = 16,
       MD_LORA_UP = 32, MD_LORA_DOWN = 64 };

/* "q_proj,v_proj" (peft's target_modules, comma-separated; also qkv_proj,
 * gate_up_proj, c_attn, all-linear) -> MD_LORA_* bits for model m; NULL:
 * peft's default for m. -1 with the unknown name's offset in *bad. */
int md_lora_targets(const char *list, const md_model *m, unsigned *out, size_t *bad);

/* Data parallelism, per rank (the batch is the rank's). */
typedef enum md_parallel {
    MD_PAR_NONE,            /* one GPU */
    MD_PAR_DDP,             /* DistributedDataParallel: gradient buckets from construction */
    MD_PAR_DDP_VIEW,        /* ... gradient_as_bucket_view=True: gradients are the buckets */
    MD_PAR_ZERO1,           /* ZeroRedundancyOptimizer over DDP: each rank keeps the
                               optimizer state of its greedy share of the parameters */
    MD_PAR_FSDP,            /* FSDP2 fully_shard per decoder layer and the model:
                               parameters, gradients and state sharded; a layer's
                               parameters gathered for its forward and backward */
    MD_PAR_FSDP_NO_RESHARD  /* ... reshard_after_forward=False: gathered layers stay
                               from their forward to their backward */
} md_parallel;
const char *md_parallel_name(md_parallel p); /* "ddp", ... as --parallel takes them */

/* The training step to predict. */
typedef struct md_step_config {
    int64_t batch, seq;
    md_optimizer optimizer;
    md_precision precision;
    const md_calibration *calibration; /* NULL: md_calibration_default */
    int drop_outputs;   /* 0: the model output (its logits) is kept until after
                           optimizer.step() (`out = model(...)`); 1: only the
                           loss is kept (`loss = model(...).loss`, HF Trainer) */
    int checkpointing;  /* model.gradient_checkpointing_enable() */
    int eager;          /* attn_implementation="eager" instead of SDPA */
    md_parallel parallel;
    int world;          /* ranks (ZeRO-1 and FSDP; >= 2) */
    int rank;           /* the rank predicted (ZeRO-1 shares the parameters
                           unevenly); -1: the rank holding the most */
    int bucket_mb;      /* DDP's bucket_cap_mb (0: torch's 25) */
    int64_t lora_rank;  /* > 0: LoRA (peft, dropout 0) on lora_targets, base frozen */
    unsigned lora_targets;
    int stream_buffers; /* > 0: layer streaming (seed 001): the decoder layers'
                           frozen weights in host memory, this many one-layer
                           GPU buffers filled before each layer's forward and
                           backward; LoRA only */
} md_step_config;

/* A steady-state training step (optimizer state exists; gradients set to
 * None by zero_grad; the model output kept until after optimizer.step(),
 * as `out = model(...); out.loss.backward(); opt.step()` does). */
typedef struct md_prediction {
    int64_t params;
    uint64_t weights, gradients, optimizer_state, workspace, inputs;
    uint64_t buckets;          /* DDP's gradient buckets (0 without DDP) */
    uint64_t gathered;         /* FSDP: parameters all-gathered at the peak
                                  (counted in at_peak.transient) */
    uint64_t floor;            /* weights + optimizer_state + workspace + inputs
                                  (+ buckets): allocated when a step starts */
    uint64_t floor_with_grads; /* + gradients: the end of backward */
    uint64_t context;          /* device memory outside PyTorch's allocator
                                  (CUDA context, kernels, cuBLAS), measured
                                  on an H200 with torch 2.11, one process */
    int64_t trainable;         /* parameters the optimizer updates */
    const char *caveat;        /* NULL, or what of this prediction no measurement
                                  has checked yet */
    int peak_known;            /* 0: unsupported says why there is no peak */
    const char *unsupported;
    uint64_t peak;             /* torch.cuda.max_memory_allocated() of the step */
    md_step_phase phase;       /* where it happens */
    md_breakdown at_peak;      /* what is allocated then (sums to peak) */
    uint64_t activations;      /* saved for backward at the end of forward */
    double loss_bytes_per_logit; /* logits + loss at the peak, per element */
    uint64_t reserved;         /* torch.cuda.max_memory_reserved(), typical */
    uint64_t reserved_high;    /* and its high end (fragmentation) */
    uint64_t device_total;     /* reserved + context: what nvidia-smi shows */
} md_prediction;

int md_predict(const md_model *m, const md_step_config *step, md_prediction *out, md_err *err);

/* A prediction against a measured step (`memdiag predict --validate RUN`):
 * the last complete step after the first (optimizer state exists then),
 * each predicted component next to what the replay attributes to it. */
enum { MD_VAL_WEIGHTS, MD_VAL_OPTIMIZER_STATE, MD_VAL_WORKSPACE, MD_VAL_FLOOR,
       MD_VAL_GRADIENTS, MD_VAL_PEAK, MD_VAL_COUNT };
typedef struct md_validation {
    int step;                         /* the step compared */
    uint64_t predicted[MD_VAL_COUNT];
    uint64_t measured[MD_VAL_COUNT];  /* weights, state, workspace and floor
                                         (allocated) at the step's start;
                                         gradients at the end of backward;
                                         the step's peak (0 predicted: none) */
    uint64_t grads_at_start;          /* gradients kept across steps
                                         (zero_grad(set_to_none=False)) */
    uint64_t measured_peak;           /* highest allocated in the step */
    int from_samples;                 /* phase samples: only floor and peak
                                         were measured */
} md_validation;

const char *md_validation_name(int component); /* "weights", ... */
/* The same against phase samples (a capture file, a seed-script report):
 * only the floor (allocated when the step starts) and the peak are
 * measured there; the rest stays 0 (unknown). */
int md_predict_validate_samples(const md_prediction *p, const md_sample_rank *r,
                                md_validation *out, md_err *err);
/* Whether component c was measured in v. */
int md_validation_measured(const md_validation *v, int c);
int md_predict_validate(const md_prediction *p, const md_replay *r, const md_analysis *a,
                        md_validation *out, md_err *err);

/* The first frame that belongs to user code (not torch, CPython or C++),
 * or NULL. */
const md_frame *md_user_frame(const md_snapshot *s, uint32_t stack);

#ifdef __cplusplus
}
#endif
#endif

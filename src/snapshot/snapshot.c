/* snapshot.c - turns the pickle of torch.cuda.memory._snapshot() into the
 * compact md_snapshot model.
 *
 * Trace entries and blocks are converted while the pickle is read (through
 * the pickle reader's item and record hooks), so they never exist as
 * generic dicts; frames and tracebacks, which torch shares through the
 * memo, are interned once and cached on the shared pickle object. Unknown
 * keys and newer fields are skipped; missing optional fields take
 * documented defaults. Schema history: ../../docs/snapshot-format.md. */
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "../pickle/pickle.h"
#include "../pickle/split.h"
#include "../util/thread.h"
#include "snapshot_int.h"

/* Interned ids of the keys and values we look for, so matching a key is an
 * integer compare. */
enum {
    K_ACTION, K_ADDR, K_SIZE, K_STREAM, K_TIME_US, K_FRAMES, K_DEVICE_FREE,
    K_POOL_ID, K_NAME, K_FILENAME, K_LINE, K_BLOCKS,
    /* segments' and blocks' */
    K_ADDRESS, K_REQUESTED_SIZE, K_STATE, K_HISTORY, K_REAL_SIZE, K_DEVICE,
    K_TOTAL_SIZE, K_ALLOCATED_SIZE, K_ACTIVE_SIZE, K_SEGMENT_TYPE, K_IS_EXPANDABLE,
    K_SEGMENT_POOL_ID, K_COUNT
};
/* Record slots (the record hook's values): a trace entry's keys K_ACTION
 * to K_POOL_ID in their own order, then a block's own three, then a
 * segment's own (SL_BLOCKS to SL_SEGMENT_POOL_ID). */
enum {
    SL_ADDRESS = K_POOL_ID + 1, SL_REQUESTED_SIZE, SL_STATE, SL_BLOCKS, SL_DEVICE,
    SL_TOTAL_SIZE, SL_ALLOCATED_SIZE, SL_ACTIVE_SIZE, SL_SEGMENT_TYPE, SL_IS_EXPANDABLE,
    SL_SEGMENT_POOL_ID, SL_COUNT
};
#define LEAVE MD_PKL_REC_LEAVE
/* Each key's slot, for the record path (set_record_hook) and the dict path
 * (on_item) alike: an OOM's 'device_free' is its addr; a frame's keys and
 * a torch 2.0 block's own leave the dict to on_item. */
static const uint8_t key_slot[K_COUNT] = {
    [K_ACTION] = K_ACTION, [K_ADDR] = K_ADDR, [K_SIZE] = K_SIZE, [K_STREAM] = K_STREAM,
    [K_TIME_US] = K_TIME_US, [K_FRAMES] = K_FRAMES, [K_DEVICE_FREE] = K_ADDR,
    [K_POOL_ID] = K_POOL_ID, [K_NAME] = LEAVE, [K_FILENAME] = LEAVE, [K_LINE] = LEAVE,
    [K_BLOCKS] = SL_BLOCKS, [K_ADDRESS] = SL_ADDRESS, [K_REQUESTED_SIZE] = SL_REQUESTED_SIZE,
    [K_STATE] = SL_STATE, [K_HISTORY] = LEAVE, [K_REAL_SIZE] = LEAVE, [K_DEVICE] = SL_DEVICE,
    [K_TOTAL_SIZE] = SL_TOTAL_SIZE, [K_ALLOCATED_SIZE] = SL_ALLOCATED_SIZE,
    [K_ACTIVE_SIZE] = SL_ACTIVE_SIZE, [K_SEGMENT_TYPE] = SL_SEGMENT_TYPE,
    [K_IS_EXPANDABLE] = SL_IS_EXPANDABLE, [K_SEGMENT_POOL_ID] = SL_SEGMENT_POOL_ID};
#undef LEAVE

/* Stacks a snapshot may hold: an md_live keeps a stack id in 24 bits.
 * tests/unit/test_stack_limit.c compiles this file with a lower one, as a
 * snapshot of 2^24 distinct stacks is half a gigabyte. */
#ifndef STACKS_MAX
#define STACKS_MAX MD_MAX_STACKS
#endif

/* A taken dict's reference (the reader's PV_REF): a trace entry's index,
 * BLK_REF | a block's index, or SEG_REF | a segment's index. */
#define BLK_REF 0x40000000u
#define SEG_REF 0x80000000u
#define REF_TAG 0xc0000000u

static const char *const key_names[K_COUNT] = {
    "action", "addr", "size", "stream", "time_us", "frames", "device_free",
    "pool_id", "name", "filename", "line", "blocks",
    "address", "requested_size", "state", "history", "real_size", "device",
    "total_size", "allocated_size", "active_size", "segment_type", "is_expandable",
    "segment_pool_id"};

static const char *const action_names[] = {
    NULL, "alloc", "free_requested", "free_completed", "segment_alloc",
    "segment_free", "segment_map", "segment_unmap", "snapshot", "oom",
    "annotate"};
#define NACTIONS (sizeof action_names / sizeof action_names[0])

typedef struct loader {
    md_snapshot *s;
    md_pkl *p; /* to release converted frames and tracebacks */
    uint32_t key[K_COUNT];
    uint32_t act_sid[NACTIONS]; /* string id of each action name */
    uint32_t state_sid[3];      /* a block's active states' string ids */
    uint32_t small_sid;         /* "small", a segment's type from the small pool */
    int cpp_seen;
    int block_stacks; /* a block has a stack */
    /* md_load_opts.on_events: told again when nevents reaches note_at
     * (SIZE_MAX: not told) */
    void (*on_events)(void *ctx, const md_event *events, size_t n, size_t expect, int state);
    void *events_ctx;
    size_t note_at;
    /* the arrays' elements up to which their pages are allocated
     * (md_big_ahead): asked again on reaching them */
    size_t blk_ready, seg_ready, ev_ready;
    double bytes; /* the input's size, for the expected count */
    md_omap stream_ix; /* stream -> index in s->streams */
    uint16_t last_stream; /* the index the last event had */
    struct second *second; /* the read split in two: the other reader */
} loader;

#define NOTE_EVERY 2048 /* events between two calls of on_events */

const char *md_action_name(md_action a)
{
    if (a >= MD_ACT_ALLOC && (size_t)a < NACTIONS)
        return action_names[a];
    return "unknown";
}

/* The values of a dict's known keys (K_*), NULL where absent; a repeated
 * key gives its last value, as Python keeps it. One pass over the items,
 * each key an integer compare (key ids are consecutive, loader_init). */
static void known_fields(const loader *L, const md_pv *d, const md_pv *f[K_COUNT])
{
    memset(f, 0, K_COUNT * sizeof *f);
    if (!d || d->t != PV_DICT || d->o->taken)
        return;
    const pv_obj *o = d->o;
    for (uint32_t i = 0; i + 1 < o->n; i += 2) {
        uint32_t kk = o->items[i].s - L->key[0];
        if (o->items[i].t == PV_STR && kk < K_COUNT)
            f[kk] = &o->items[i + 1];
    }
}

/* ---- frames and stacks ------------------------------------------------- */

static uint64_t frame_hash(const md_frame *f)
{
    uint64_t k[2] = {((uint64_t)f->name << 32) | f->filename, (uint64_t)(uint32_t)f->line};
    return md_hash(k, sizeof k, 7);
}

static int rehash_frames(md_snapshot *s)
{
    size_t ns = s->nfslots ? s->nfslots * 2 : 1024;
    uint32_t *sl = calloc(ns, sizeof *sl);
    if (!sl)
        return -1;
    for (size_t id = 0; id < s->nframes; id++) {
        size_t i = frame_hash(&s->frames[id]) & (ns - 1);
        while (sl[i])
            i = (i + 1) & (ns - 1);
        sl[i] = (uint32_t)id + 1;
    }
    free(s->fslots);
    s->fslots = sl;
    s->nfslots = ns;
    return 0;
}

static int64_t intern_frame(md_snapshot *s, const md_frame *f)
{
    if ((s->nframes + 1) * 2 > s->nfslots && rehash_frames(s))
        return -1;
    size_t i = frame_hash(f) & (s->nfslots - 1);
    while (s->fslots[i]) {
        const md_frame *g = &s->frames[s->fslots[i] - 1];
        if (g->name == f->name && g->filename == f->filename && g->line == f->line)
            return s->fslots[i] - 1;
        i = (i + 1) & (s->nfslots - 1);
    }
    if (md_grow((void **)&s->frames, &s->fcap, s->nframes + 1, sizeof *f))
        return -1;
    s->frames[s->nframes] = *f;
    s->fslots[i] = (uint32_t)++s->nframes;
    return (int64_t)s->nframes - 1;
}

/* Bytes a stored frame id takes (md_stack_ids' width). */
static size_t sf_size(const md_snapshot *s) { return s->sf_wide ? 4 : 2; }

/* A stack's frame ids as they are stored, hashed as bytes (md_hash's four
 * lanes take 16 or 32 bytes a step: deep stacks are hashed once per trace
 * entry). */
static uint64_t stack_hash(const void *ids, size_t n, size_t esz)
{
    return md_hash(ids, n * esz, 11);
}

/* The stack intern table remade with ns slots (a power of two), from the
 * hashes kept (a 10 000-entry trace's doublings hashed its 2 673 stacks
 * 3 581 times, 2.6 % of its instructions). */
static int rehash_stacks(md_snapshot *s, size_t ns)
{
    uint32_t *sl = calloc(ns, sizeof *sl);
    if (!sl)
        return -1;
    for (size_t id = 1; id < s->nstacks; id++) {
        size_t i = s->shash[id] & (ns - 1);
        while (sl[i])
            i = (i + 1) & (ns - 1);
        sl[i] = (uint32_t)id;
    }
    free(s->sslots);
    s->sslots = sl;
    s->nsslots = ns;
    return 0;
}

/* The stored frame ids 32 bits wide from now on: a frame id past 16 bits
 * came (once a snapshot, if ever). -1 out of memory. */
static int widen_stacks(md_snapshot *s)
{
    void *w = NULL;
    size_t cap = 0;
    if (s->nsframes && md_big_grow(&w, &cap, s->nsframes, sizeof(uint32_t)))
        return -1;
    const uint16_t *from = s->sframes;
    for (size_t i = 0; i < s->nsframes; i++)
        ((uint32_t *)w)[i] = from[i];
    md_big_free(s->sframes, s->sfcap, sizeof(uint16_t));
    s->sframes = w, s->sfcap = cap, s->sf_wide = 1;
    /* the table's hashes were of the narrow bytes */
    for (size_t id = 1; id < s->nstacks; id++) {
        const md_range *r = &s->stacks[id];
        s->shash[id] = (uint32_t)stack_hash((const uint32_t *)w + r->first, r->n, sizeof(uint32_t));
    }
    return s->nsslots ? rehash_stacks(s, s->nsslots) : 0;
}

/* How many elements of esz bytes an array that needs `need` asks
 * md_big_grow for: once it needs `from` bytes, at least MD_BIG_MIN's
 * worth, which it maps (only what is written is resident), unless the
 * heap comes first (heap_first). */
static size_t mapped_from(const md_snapshot *s, size_t need, size_t esz, size_t from)
{
    return need * esz >= from && need * esz < MD_BIG_MIN && !s->heap_first
               ? (MD_BIG_MIN + esz - 1) / esz
               : need;
}

/* Where the segments and blocks leave the heap: a small snapshot's few
 * fit in pages the heap has anyway (in a mapping of their own the seed
 * exercise's took 128-256 KB more), a large one's are not copied on
 * every doubling up to 512 KiB, copies that stayed resident beside the
 * mapping (a 3.5 MB state-only snapshot: 1.6 MB) */
#define STATE_HEAP_MAX (64 * 1024)

/* What a state-only snapshot costs a block resident: its md_block, its
 * segment's share and its md_live in the analysis (a 3.5 MB one of
 * 62 664 blocks in 21 184 segments: 6.9 MB, 2.0x its size; with 40-byte
 * md_live, 96-byte md_segment and the arrays' heap copies 11.9 MB) */
_Static_assert(sizeof(md_live) == 32 && sizeof(md_segment) == 64 && sizeof(md_block) == 32,
               "md_live, md_segment, md_block sizes");

/* intern_stack of the ids k[0..n) as stored (md_stack_ids' width). */
static int64_t intern_stored(md_snapshot *s, const void *k, size_t n)
{
    size_t esz = sf_size(s);
    if ((s->nstacks + 1) * 2 > s->nsslots &&
        rehash_stacks(s, s->nsslots ? s->nsslots * 2 : 1024))
        return -1;
    uint32_t h = (uint32_t)stack_hash(k, n, esz);
    size_t i = h & (s->nsslots - 1);
    while (s->sslots[i]) {
        uint32_t id = s->sslots[i];
        const md_range *r = &s->stacks[id];
        if (s->shash[id] == h && r->n == n &&
            !memcmp((const char *)s->sframes + r->first * esz, k, n * esz))
            return id;
        i = (i + 1) & (s->nsslots - 1);
    }
    /* the frame ids live in a mapping of their own from the first stack
     * (mapped_from): in the heap each doubling
     * copied them into fresh pages, a third of a 1 MB file's page faults
     * (unless those come 2 MB at a time: heap_first) */
    size_t need = s->nsframes + n;
    if ((need > s->sfcap &&
         md_big_grow(&s->sframes, &s->sfcap, mapped_from(s, need, esz, 0), esz)) ||
        md_grow((void **)&s->stacks, &s->stcap, s->nstacks + 1, sizeof *s->stacks) ||
        md_grow((void **)&s->shash, &s->shcap, s->nstacks + 1, sizeof *s->shash))
        return -1;
    s->shash[s->nstacks] = h;
    memcpy((char *)s->sframes + s->nsframes * esz, k, n * esz);
    s->stacks[s->nstacks].first = s->nsframes;
    s->stacks[s->nstacks].n = n;
    s->nsframes += n;
    s->sslots[i] = (uint32_t)s->nstacks;
    return (int64_t)s->nstacks++;
}

/* ids[0..n) with `less` taken off each, in place. */
static uint32_t *less_taken(uint32_t *ids, size_t n, uint32_t less)
{
    for (size_t j = 0; less && j < n; j++)
        ids[j] -= less;
    return ids;
}

/* key[0..n) := ids[0..n) less `less` each, as 16 bits; returns the ids
 * or'ed (over 0xffff: one did not fit). Eight at a time where the
 * compiler has vectors (7 instructions an id one by one). */
static uint32_t narrow_ids(uint16_t *key, const uint32_t *ids, size_t n, uint32_t less)
{
    uint32_t most = 0;
    size_t j = 0;
#if defined(__GNUC__) && (defined(__clang__) || __GNUC__ >= 9)
    typedef uint32_t u32x8 __attribute__((vector_size(32)));
    typedef uint16_t u16x8 __attribute__((vector_size(16)));
    if (n >= 8) {
        u32x8 acc = {0};
        for (; j + 8 <= n; j += 8) {
            u32x8 v;
            memcpy(&v, ids + j, sizeof v);
            v -= less;
            acc |= v;
            u16x8 k = __builtin_convertvector(v, u16x8);
            memcpy(key + j, &k, sizeof k);
        }
        for (int i = 0; i < 8; i++)
            most |= acc[i];
    }
#endif
    for (; j < n; j++) {
        uint32_t id = ids[j] - less;
        most |= id;
        key[j] = (uint16_t)id;
    }
    return most;
}

/* Interns a sequence of frame ids, each `less` more than the frame's id
 * (the list hook's caches are id + 1); returns the stack id (>= 1), 0 for
 * an empty stack, -1 on allocation failure, -2 past STACKS_MAX. ids may be
 * overwritten. */
static int64_t intern_stack_less(md_snapshot *s, uint32_t *ids, size_t n, uint32_t less)
{
    if (n == 0)
        return 0;
    if (s->nstacks >= STACKS_MAX)
        return -2;
    if (s->sf_wide)
        return intern_stored(s, less_taken(ids, n, less), n);
    /* narrowed into key as they are checked to fit, in one pass */
    uint16_t small[256], *key = small;
    if (n > 256 && !(key = malloc(n * sizeof *key)))
        return -1;
    uint32_t most = narrow_ids(key, ids, n, less);
    int64_t id;
    if (most <= UINT16_MAX) {
        id = intern_stored(s, key, n);
    } else { /* a frame id past 16 bits: the stored ids widen, for good */
        id = widen_stacks(s) ? -1 : intern_stored(s, less_taken(ids, n, less), n);
    }
    if (key != small)
        free(key);
    return id;
}

static int64_t intern_stack(md_snapshot *s, uint32_t *ids, size_t n)
{
    return intern_stack_less(s, ids, n, 0);
}

static int is_cpp_frame(const md_snapshot *s, const md_frame *f)
{
    const char *fn = md_strtab_get(&s->strs, f->filename);
    size_t n = md_strtab_len(&s->strs, f->filename);
    return !(n >= 3 && !strcmp(fn + n - 3, ".py"));
}

/* Frame dict -> frame id (cached on the shared pickle object). */
static int frame_id(loader *L, const md_pv *v, uint32_t *out, int64_t off, md_err *err)
{
    if (v->t != PV_DICT)
        return md_err_set(err, MD_E_SCHEMA, off, "a stack frame is not a dict");
    if (v->o->cache) {
        *out = v->o->cache - 1;
        return MD_OK;
    }
    md_frame f = {0, 0, 0};
    const pv_obj *o = v->o;
    for (uint32_t i = 0; i + 1 < o->n; i += 2) {
        const md_pv *k = &o->items[i], *x = &o->items[i + 1];
        if (k->t != PV_STR)
            continue;
        if (k->s == L->key[K_NAME] && x->t == PV_STR)
            f.name = x->s;
        else if (k->s == L->key[K_FILENAME] && x->t == PV_STR)
            f.filename = x->s;
        else if (k->s == L->key[K_LINE] && x->t == PV_INT)
            f.line = (int32_t)x->i;
    }
    int64_t id = intern_frame(L->s, &f);
    if (id < 0)
        return md_err_set(err, MD_E_NOMEM, off, "out of memory");
    if (!L->cpp_seen && is_cpp_frame(L->s, &f))
        L->cpp_seen = 1;
    v->o->cache = (uint32_t)id + 1;
    if (L->p)
        md_pkl_release(L->p, v->o);
    *out = (uint32_t)id;
    return MD_OK;
}

/* Trace entries kept as a run of references belong in device_traces only. */
static int no_records(const md_pv *list, const char *what, int64_t off, md_err *err)
{
    if ((list->t == PV_LIST || list->t == PV_TUPLE) && list->o->run_n)
        return md_err_set(err, MD_E_SCHEMA, off, "%s holds trace entries", what);
    return MD_OK;
}

/* intern_stack's failure sid as an error. */
static int stack_failed(int64_t sid, int64_t off, md_err *err)
{
    if (sid == -2)
        return md_err_set(err, MD_E_LIMIT, off, "more than %u distinct stacks",
                          (unsigned)STACKS_MAX - 1); /* and the empty one, id 0 */
    return md_err_set(err, MD_E_NOMEM, off, "out of memory");
}

/* Frames list -> stack id, converting a list not seen before (stack_id). */
static int stack_convert(loader *L, const md_pv *v, uint32_t *out, int64_t off, md_err *err)
{
    *out = 0;
    if (!v || v->t == PV_NONE)
        return MD_OK;
    if (v->t != PV_LIST && v->t != PV_TUPLE)
        return md_err_set(err, MD_E_SCHEMA, off, "'frames' is not a list");
    if (v->o->cache) {
        *out = v->o->cache - 1;
        return MD_OK;
    }
    if (no_records(v, "'frames'", off, err))
        return MD_E_SCHEMA;
    uint32_t small[256], *ids = small;
    size_t n = v->o->n;
    if (n > 256 && !(ids = malloc(n * sizeof *ids)))
        return md_err_set(err, MD_E_NOMEM, off, "out of memory");
    int rc = MD_OK;
    for (size_t i = 0; i < n && !rc; i++)
        rc = frame_id(L, &v->o->items[i], &ids[i], off, err);
    int64_t sid = rc ? 0 : intern_stack(L->s, ids, n);
    if (ids != small)
        free(ids);
    if (rc)
        return rc;
    if (sid < 0)
        return stack_failed(sid, off, err);
    v->o->cache = (uint32_t)sid + 1;
    if (L->p)
        md_pkl_release(L->p, v->o);
    *out = (uint32_t)sid;
    return MD_OK;
}

/* Frames list -> stack id (cached on the shared list: most trace entries
 * take it from there, without the call). */
static inline int stack_id(loader *L, const md_pv *v, uint32_t *out, int64_t off,
                           md_err *err)
{
    if (v && v->t == PV_LIST && v->o->cache) {
        *out = v->o->cache - 1;
        return MD_OK;
    }
    return stack_convert(L, v, out, off, err);
}

/* The list hook: a list of converted dicts is a frames list (frame_id is
 * the only conversion of a dict that leaves a cache), so it becomes its
 * stack as it is read, without the list ever being built. */
static int on_list(void *ctx, uint32_t *caches, size_t n, uint32_t *cache, int64_t off,
                   md_err *err)
{
    loader *L = ctx;
    int64_t sid = intern_stack_less(L->s, caches, n, 1); /* cache = frame id + 1 */
    if (sid < 0)
        return stack_failed(sid, off, err);
    *cache = (uint32_t)sid + 1;
    return 1;
}

/* ---- telling md_load_opts.on_events --------------------------------------- */

/* The events read so far, and how many the bytes read (to off) suggest. */
static void note_events(loader *L, int64_t off)
{
    const md_snapshot *s = L->s;
    double per_byte = off > 0 ? (double)s->nevents / (double)off : 0;
    size_t expect = (size_t)(per_byte * L->bytes); /* 0 where the size is unknown */
    L->on_events(L->events_ctx, s->events, s->nevents, expect, MD_EVENTS_MORE);
    L->note_at = s->nevents + NOTE_EVERY;
}

/* The events array grown by one (it may move: whoever reads it pauses
 * meanwhile, and is told where it went). -1 out of memory. */
static int grow_events(loader *L, int64_t off)
{
    md_snapshot *s = L->s;
    if (L->on_events)
        L->on_events(L->events_ctx, NULL, 0, 0, MD_EVENTS_PAUSE);
    if (md_big_grow((void **)&s->events, &s->evcap, s->nevents + 1, sizeof *s->events))
        return -1;
    if (L->on_events)
        note_events(L, off);
    return 0;
}

/* Before the events array moves after the read, or is freed: whoever
 * reads it stops for good. */
static void events_gone(loader *L, int state)
{
    if (L->on_events)
        L->on_events(L->events_ctx, NULL, 0, 0, state);
    L->on_events = NULL;
    L->note_at = SIZE_MAX;
}

/* ---- trace entries (called from inside the pickle reader) --------------- */

/* Action names are interned consecutively (loader_init): one subtraction. */
static md_action action_of(const loader *L, uint32_t sid)
{
    uint32_t k = sid - L->act_sid[1];
    return k < NACTIONS - 1 ? (md_action)(k + 1) : MD_ACT_UNKNOWN;
}

/* The index of stream in s->streams, added if new: 0 with *ix set, else
 * -1 (out of memory, or more streams than an index holds). */
__attribute__((always_inline)) static inline int stream_index(loader *L, uint64_t stream,
                                                          uint16_t *ix)
{
    md_snapshot *s = L->s;
    uint64_t k;
    uint32_t v;
    if (s->streams[L->last_stream] == stream) { /* a trace's streams come in runs */
        *ix = L->last_stream;
        return 0;
    }
    if (!stream || (md_omap_floor(&L->stream_ix, stream, &k, &v) && k == stream)) {
        *ix = L->last_stream = stream ? (uint16_t)v : 0;
        return 0;
    }
    if (s->nstreams > UINT16_MAX ||
        md_grow((void **)&s->streams, &s->strcap, s->nstreams + 1, sizeof *s->streams) ||
        md_omap_put(&L->stream_ix, stream, (uint32_t)s->nstreams))
        return -1;
    s->streams[s->nstreams] = stream;
    *ix = L->last_stream = (uint16_t)s->nstreams++;
    return 0;
}

/* The event of a trace entry's fields (v: by K_*, NULL where absent); -1
 * where its stream cannot be indexed. */
static int entry_fields(loader *L, md_event *e, const md_pv *const v[K_POOL_ID + 1])
{
    uint64_t u = 0;
    *e = (md_event){.time_us = -1};
    e->action = (uint8_t)action_of(L, v[K_ACTION]->s);
    if (md_pv_u64(v[K_ADDR], &u))
        e->addr = u;
    if (md_pv_u64(v[K_SIZE], &u))
        e->size = u;
    if (md_pv_u64(v[K_STREAM], &u) && stream_index(L, u, &e->stream))
        return -1;
    if (md_pv_u64(v[K_TIME_US], &u))
        e->time_us = (int64_t)u;
    const md_pv *pool = v[K_POOL_ID];
    if (pool && pool->t == PV_TUPLE && pool->o->n == 2 &&
        (pool->o->items[0].i != 0 || pool->o->items[1].i != 0))
        e->flags |= MD_EV_POOL_PRIVATE;
    return 0;
}

static int add_segment_fields(loader *L, const md_pv *const f[K_COUNT], md_err *err);

/* A segment dict, with its blocks, converted as soon as it is complete:
 * the reader then frees any blocks left as dicts for the next segment's (a
 * snapshot's segments come before its traces, so otherwise every block
 * dict stays in memory through them), and the list itself: a list got
 * again is empty, not another copy of its blocks (a hostile file could
 * otherwise have a few bytes copy thousands of blocks, again and again). */
static int take_segment(loader *L, const md_pv *const f[K_COUNT], uint32_t *ref, int64_t off,
                        md_err *err)
{
    md_snapshot *s = L->s;
    if (s->nsegs >= BLK_REF - 1)
        return md_err_set(err, MD_E_LIMIT, off, "more than 2^30 segments");
    const md_pv *blocks = f[K_BLOCKS];
    if (!blocks || !f[K_ADDRESS] || !f[K_TOTAL_SIZE] || blocks->t != PV_LIST ||
        (blocks->o->run_n && (blocks->o->run_first & REF_TAG) != BLK_REF))
        return 0; /* not a segment as torch writes one: the final walk will say */
    int rc = add_segment_fields(L, f, err);
    if (rc)
        return rc;
    if (L->p) {
        for (uint32_t i = 0; i < blocks->o->n; i++)
            if (blocks->o->items[i].t == PV_DICT)
                md_pkl_release(L->p, blocks->o->items[i].o);
        md_pkl_release(L->p, blocks->o);
    }
    *ref = SEG_REF | (uint32_t)(s->nsegs - 1);
    return 1;
}

/* A segment dict the item hook was offered. */
static int take_dict_segment(loader *L, const md_pv *item, uint32_t *ref, int64_t off,
                             md_err *err)
{
    const md_pv *f[K_COUNT];
    known_fields(L, item, f);
    return take_segment(L, f, ref, off, err);
}

/* A trace entry's event from its known values (v: by K_*, an OOM's
 * 'device_free' as its addr), if it is one: 1 with *ref its index, 0 if
 * it is not (nothing changed), or an error. */
static int take_entry(loader *L, const md_pv *const v[K_POOL_ID + 1], uint32_t *ref,
                      int64_t off, md_err *err)
{
    md_snapshot *s = L->s;
    if (!v[K_ACTION] || v[K_ACTION]->t != PV_STR || (!v[K_ADDR] && !v[K_SIZE]))
        return 0;
    if (s->nevents >= BLK_REF - 1)
        return md_err_set(err, MD_E_LIMIT, off, "more than 2^30 trace entries");
    if (s->nevents == s->evcap && grow_events(L, off))
        return md_err_set(err, MD_E_NOMEM, off, "out of memory");
    if (s->nevents >= L->ev_ready)
        L->ev_ready = md_big_ahead(s->events, s->evcap, s->nevents, sizeof *s->events);
    /* Filled in place: a local copied into the array would be stored field
     * by field and reloaded whole, which stalls the store buffer. */
    md_event *e = &s->events[s->nevents];
    if (entry_fields(L, e, v))
        return md_err_set(err, MD_E_LIMIT, off, "more than 65536 streams, or out of memory");
    int rc = stack_id(L, v[K_FRAMES], &e->stack, off, err);
    if (rc)
        return rc;
    if (e->time_us >= 0)
        s->features |= MD_HAS_TIME;
    if (e->stack)
        s->features |= MD_HAS_FRAMES;
    *ref = (uint32_t)s->nevents++;
    if (s->nevents >= L->note_at)
        note_events(L, off);
    return 1;
}

/* blk appended to the snapshot's blocks, its index in *at; -1 out of
 * memory. */
static int push_block(loader *L, const md_block *blk, size_t *at)
{
    md_snapshot *s = L->s;
    /* a mapping of its own from STATE_HEAP_MAX: a state-only snapshot of
     * 250 000 blocks wrote 8 MB here a 4 KiB fault at a time */
    size_t need = s->nblocks + 1;
    if (need > s->blkcap &&
        md_big_grow((void **)&s->blocks, &s->blkcap,
                    mapped_from(s, need, sizeof *blk, STATE_HEAP_MAX), sizeof *blk))
        return -1;
    if (need > L->blk_ready)
        L->blk_ready = md_big_ahead(s->blocks, s->blkcap, s->nblocks, sizeof *blk);
    L->block_stacks |= blk->stack != 0;
    *at = s->nblocks;
    s->blocks[s->nblocks++] = *blk;
    return 0;
}

/* A block's 'state' value as md_block_state. */
static uint8_t block_state(const loader *L, const md_pv *st)
{
    if (!st || st->t != PV_STR)
        return MD_BLOCK_INACTIVE;
    if (st->s == L->state_sid[0])
        return MD_BLOCK_ACTIVE_ALLOCATED;
    if (st->s == L->state_sid[1] || st->s == L->state_sid[2])
        return MD_BLOCK_ACTIVE_PENDING_FREE;
    return MD_BLOCK_INACTIVE;
}

/* A block dict the reader read straight from its bytes (v: by record
 * slot), with the values add_block would give it: 1 with *ref its
 * reference, laid in s->blocks as read (add_segment then finds its
 * segment's blocks already there), or 0 where the general path must
 * decide (an address that is not an int: torch 2.0's blocks, laid out by
 * a cursor; a frames list not already a stack, whose errors that path
 * words), nothing changed. */
static int take_block(loader *L, const md_pv *const *v, uint32_t *ref, int64_t off,
                      md_err *err)
{
    md_snapshot *s = L->s;
    const md_pv *fr = v[K_FRAMES];
    md_block blk = {0, 0, 0, 0, 0};
    if (!md_pv_u64(v[SL_ADDRESS], &blk.address) ||
        (fr && fr->t != PV_NONE && ((fr->t != PV_LIST && fr->t != PV_TUPLE) || !fr->o->cache)))
        return 0;
    if (s->nblocks >= BLK_REF - 1)
        return md_err_set(err, MD_E_LIMIT, off, "more than 2^30 blocks");
    md_pv_u64(v[K_SIZE], &blk.size);
    md_pv_u64(v[SL_REQUESTED_SIZE], &blk.requested_size);
    blk.state = block_state(L, v[SL_STATE]);
    blk.stack = fr && fr->t != PV_NONE ? fr->o->cache - 1 : 0;
    size_t at;
    if (push_block(L, &blk, &at))
        return md_err_set(err, MD_E_NOMEM, off, "out of memory");
    *ref = BLK_REF | (uint32_t)at;
    return 1;
}

/* A segment read as a record (v: by record slot), its blocks taken as
 * records before it. */
static int take_segment_slots(loader *L, const md_pv *const *v, uint32_t *ref, int64_t off,
                              md_err *err)
{
    /* the keys add_segment_fields reads, by name: a loop over key_slot
     * cost 5 % of a state-only snapshot's instructions */
    const md_pv *f[K_COUNT];
    md_zero_small(f, sizeof f);
    f[K_STREAM] = v[K_STREAM], f[K_FRAMES] = v[K_FRAMES];
    f[K_ADDRESS] = v[SL_ADDRESS], f[K_BLOCKS] = v[SL_BLOCKS], f[K_DEVICE] = v[SL_DEVICE];
    f[K_TOTAL_SIZE] = v[SL_TOTAL_SIZE], f[K_ALLOCATED_SIZE] = v[SL_ALLOCATED_SIZE];
    f[K_SEGMENT_TYPE] = v[SL_SEGMENT_TYPE], f[K_IS_EXPANDABLE] = v[SL_IS_EXPANDABLE];
    f[K_SEGMENT_POOL_ID] = v[SL_SEGMENT_POOL_ID];
    return take_segment(L, f, ref, off, err);
}

/* A flat dict's values (v: by record slot), as on_item takes the same
 * dict: a segment where it has 'blocks'; a block where it has an
 * 'address', no 'action' and no segment's key; else a trace entry if it is
 * one. */
static int take_flat(loader *L, const md_pv *const *v, uint32_t *ref, int64_t off, md_err *err)
{
    if (v[SL_BLOCKS])
        return take_segment_slots(L, v, ref, off, err);
    if (!v[K_ACTION] && v[SL_ADDRESS]) {
        /* a block-like dict with a segment's key is not a block; the slots
         * or'ed without a branch each (a loop that stopped at the first
         * cost a tenth of a state-only snapshot's block) */
        uintptr_t seg = 0;
        for (int k = SL_DEVICE; k <= SL_SEGMENT_POOL_ID; k++)
            seg |= (uintptr_t)v[k];
        return seg ? 0 : take_block(L, v, ref, off, err);
    }
    return take_entry(L, v, ref, off, err);
}

/* The item hook: a dict with 'blocks' is a segment; else one with a string
 * 'action' and an 'addr', 'size' or 'device_free' a trace entry; else one
 * with an 'address' and no other known key a block. Each becomes what the
 * record hook makes of the same dict read from its bytes (on_record), at
 * the same point (its first SETITEMS, or its append to a list), so both
 * paths take the same dicts; anything else is left alone. */

static int on_item(void *ctx, const md_pv *item, uint32_t *ref, int64_t off, md_err *err)
{
    loader *L = ctx;
    /* one pass over the keys, noting where each value is (the last of a
     * repeated key, as Python keeps it); an OOM's 'device_free' is its addr */
    const md_pv *v[SL_COUNT] = {NULL};
    int other = 0; /* a known key neither an entry nor a block has */
    const pv_obj *o = item->o;
    for (uint32_t i = 0; i + 1 < o->n; i += 2) {
        const md_pv *k = &o->items[i];
        uint32_t kk = k->s - L->key[0];
        if (k->t != PV_STR || kk >= K_COUNT)
            continue;
        if (kk == K_BLOCKS)
            return take_dict_segment(L, item, ref, off, err);
        if (key_slot[kk] <= SL_STATE) /* an entry's or a block's */
            v[key_slot[kk]] = k + 1;
        else
            other = 1;
    }
    if (other && !v[K_ACTION] && v[SL_ADDRESS])
        return 0; /* a block-like dict with a segment's or frame's key */
    return take_flat(L, v, ref, off, err);
}

/* The record hook: a trace entry or block the reader read straight from
 * its bytes, its values slotted as on_item slots them (record_map). */
static int on_record(void *ctx, const md_pv *const *v, uint32_t *ref, int64_t off,
                     md_err *err)
{
    return take_flat(ctx, v, ref, off, err);
}

/* The record hook's slot for each key: trace entries' own keys as on_item
 * reads them, a block's and a segment's; any other known key means a
 * torch 2.0 block (its 'history') or a frame, left to on_item (unknown
 * keys, such as 'compile_context', are skipped). */
_Static_assert(K_COUNT <= MD_PKL_REC_KEYS && SL_COUNT <= MD_PKL_REC_SLOTS,
               "the record map holds every known key and slot");
static void set_record_hook(loader *L, md_pkl *p)
{
    (void)md_pkl_set_record_hook(p, L->key[0], key_slot, K_COUNT, SL_COUNT, on_record, L);
}

/* ---- the read split in two -------------------------------------------------
 * Where a CPU or more is free (md_load_opts.split), a long trace is read by
 * two readers at once: a second one, on a thread of its own, reads from a
 * batch of trace entries about halfway through the input (pickle/split.c)
 * into a snapshot of its own, while this one reads up to there. Arriving
 * there, this one takes the second's part (split_join): its strings,
 * frames and stacks interned in the order the second met them (the order
 * a whole read meets them: their ids come out the same), its events
 * appended with their stacks and streams renumbered, and goes on after it.
 * Anything the second cannot read, or a part this one cannot take, leaves
 * the bytes to this one: a split changes how long a read takes, never what
 * it reads (tests/unit/test_split.c holds every fixture to that). */

static int loader_init(loader *L, md_snapshot *s);

typedef struct second {
    md_split_src src; /* the input in memory, or the file by pread */
    const char *path; /* the file's, for the reader's own input */
    size_t at;
    int threads;
    md_split_frames frames;
    uint32_t *slot_at; /* memo slots before `at`: where each value was written */
    size_t nslots, slots_cap;
    md_snapshot *s;
    loader L;
    md_input *in;
    md_pkl *p;
    md_pkl_part part; /* what the first reader takes (part.records 0: nothing) */
    pthread_t thread;
    int started;
    /* done: its part read (or given up), told the first reader; released:
     * the first took what it wanted, and its thread frees the rest
     * meanwhile, off the first reader's way */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int done, released;
} second;


/* The second reader's input: the memory in place, or its own of the
 * file, standing at its start. */
static int second_input(second *x, md_err *e)
{
    if (x->src.mem)
        return md_input_mem(x->src.mem, x->src.len, &x->in, e);
    int rc = md_input_open(x->path, 0, &x->in, e);
    return rc ? rc : md_input_skip(x->in, x->at, e);
}

/* Reads the second reader's part into x->s (x->part.records 0 where it
 * cannot be taken). */
static void second_read(second *x)
{
    md_err e = {0};
    md_pv top;
    if (md_split_count(&x->src, &x->frames, x->at, x->threads, &x->slot_at, &x->nslots,
                       &x->slots_cap))
        return;
    if (!(x->s = calloc(1, sizeof *x->s)) || md_strtab_init(&x->s->strs) ||
        loader_init(&x->L, x->s) || second_input(x, &e) ||
        md_pkl_new(x->in, &x->s->strs, &x->p, &e))
        return;
    /* its events in room for as many as its bytes could hold, 4 KiB pages:
     * a huge page would be half empty */
    (void)md_big_reserve((void **)&x->s->events, &x->s->evcap, (x->src.len - x->at) / 8 + 1, 0,
                         sizeof *x->s->events);
    md_pkl_set_hook(x->p, on_item, &x->L);
    md_pkl_set_list_hook(x->p, on_list, &x->L);
    set_record_hook(&x->L, x->p);
    x->L.p = x->p;
    if (md_pkl_second(x->p, x->at, x->slot_at, x->nslots, md_split_read, &x->src, &e) ||
        md_pkl_run(x->p, &top, &e))
        return; /* the first reader reads it: any error is its to report */
    md_pkl_second_part(x->p, &x->part);
    if (x->part.records != x->s->nevents || x->s->nblocks || x->s->nsegs)
        x->part.records = 0; /* not a trace's entries alone */
}

/* What the second reader's thread holds, freed (by it once released). */
static void second_drop(second *x)
{
    md_pkl_free(x->p);
    md_input_close(x->in);
    md_omap_free(&x->L.stream_ix);
    md_snapshot_free(x->s);
    md_big_free(x->slot_at, x->slots_cap, sizeof *x->slot_at);
    x->p = NULL, x->in = NULL, x->s = NULL, x->slot_at = NULL;
}

static void *second_main(void *arg)
{
    second *x = arg;
    second_read(x);
    pthread_mutex_lock(&x->mu);
    x->done = 1;
    pthread_cond_broadcast(&x->cv);
    while (!x->released)
        pthread_cond_wait(&x->cv, &x->mu);
    pthread_mutex_unlock(&x->mu);
    second_drop(x);
    return NULL;
}

/* Waits for the second reader's part. */
static void second_ready(second *x)
{
    pthread_mutex_lock(&x->mu);
    while (!x->done)
        pthread_cond_wait(&x->cv, &x->mu);
    pthread_mutex_unlock(&x->mu);
}

/* Lets the second reader's thread free what it holds and end. */
static void second_release(second *x)
{
    pthread_mutex_lock(&x->mu);
    x->released = 1;
    pthread_cond_broadcast(&x->cv);
    pthread_mutex_unlock(&x->mu);
}

static void second_free(second *x)
{
    if (!x)
        return;
    if (x->started) {
        second_release(x);
        pthread_join(x->thread, NULL);
    } else {
        second_drop(x);
    }
    pthread_cond_destroy(&x->cv);
    pthread_mutex_destroy(&x->mu);
    md_split_frames_free(&x->frames);
    free(x);
}

/* The second reader started at the first batch of records near `where`
 * of src, or NULL (no frames, no such batch, no thread). */
static second *second_start(const md_split_src *src, const char *path, int threads,
                            double where)
{
    second *x = calloc(1, sizeof *x);
    if (!x)
        return NULL;
    x->src = *src, x->path = path, x->threads = threads;
    pthread_mutex_init(&x->mu, NULL);
    pthread_cond_init(&x->cv, NULL);
    if (md_split_frames_find(src, &x->frames) ||
        !(x->at = md_split_start(src, &x->frames, where)) ||
        md_thread_start(&x->thread, second_main, x, MD_STACK_WORK)) {
        second_free(x);
        return NULL;
    }
    x->started = 1;
    return x;
}

/* Whether every list the second reader got from before its start is a
 * converted frames list in the first reader's memo. */
static int remotes_known(const md_pkl *pa, const md_snapshot *b)
{
    for (size_t i = 0; i < b->nevents; i++) {
        uint32_t k = b->events[i].stack;
        if ((k & MD_PKL_REMOTE_LIST) && !md_pkl_memo_list(pa, k & ~MD_PKL_REMOTE_LIST))
            return 0;
    }
    return 1;
}

/* Ids of the second reader's strings, frames and stacks in the first's
 * snapshot a, interned in the second's order. */
static int merge_ids(loader *L, const md_snapshot *b, uint32_t *smap, uint32_t *fmap,
                     uint32_t *kmap)
{
    md_snapshot *a = L->s;
    for (size_t i = 0; i < b->strs.n; i++) {
        int64_t id = md_strtab_intern(&a->strs, md_strtab_get(&b->strs, (uint32_t)i),
                                      md_strtab_len(&b->strs, (uint32_t)i));
        if (id < 0)
            return -1;
        smap[i] = (uint32_t)id;
    }
    for (size_t i = 0; i < b->nframes; i++) {
        md_frame f = b->frames[i];
        f.name = smap[f.name], f.filename = smap[f.filename];
        int64_t id = intern_frame(a, &f);
        if (id < 0)
            return -1;
        if (!L->cpp_seen && is_cpp_frame(a, &f))
            L->cpp_seen = 1;
        fmap[i] = (uint32_t)id;
    }
    uint32_t small[256], *ids = small;
    size_t idcap = 256;
    kmap[0] = 0;
    for (uint32_t k = 1; k < b->nstacks; k++) {
        md_stack_ids st = md_snapshot_stack(b, k);
        if (st.n > idcap) {
            uint32_t *w = malloc(st.n * sizeof *w);
            if (!w)
                return ids == small ? -1 : (free(ids), -1);
            if (ids != small)
                free(ids);
            ids = w, idcap = st.n;
        }
        for (size_t j = 0; j < st.n; j++)
            ids[j] = fmap[md_stack_id(st, j)];
        int64_t id = intern_stack(a, ids, st.n);
        if (id < 0) {
            if (ids != small)
                free(ids);
            return (int)id;
        }
        kmap[k] = (uint32_t)id;
    }
    if (ids != small)
        free(ids);
    return 0;
}

/* The second reader's streams' indices in a, added in its order (the
 * order a whole read meets them). */
static uint16_t *merge_streams(loader *L, const md_snapshot *b)
{
    uint16_t *tmap = malloc(b->nstreams * sizeof *tmap);
    for (size_t i = 0; tmap && i < b->nstreams; i++)
        if (stream_index(L, b->streams[i], &tmap[i])) {
            free(tmap);
            return NULL;
        }
    return tmap;
}

/* The second reader's events appended to a's, their stacks and streams
 * a's (kmap, tmap; lists from before its start: the first reader's memo). */
static int merge_events(loader *L, const md_pkl *pa, const md_snapshot *b, const uint32_t *kmap,
                        const uint16_t *tmap, int64_t off)
{
    md_snapshot *a = L->s;
    if (a->nevents + b->nevents > a->evcap) {
        if (L->on_events)
            L->on_events(L->events_ctx, NULL, 0, 0, MD_EVENTS_PAUSE);
        if (md_big_grow((void **)&a->events, &a->evcap, a->nevents + b->nevents,
                        sizeof *a->events))
            return -1;
    }
    for (size_t i = 0; i < b->nevents; i++) {
        md_event e = b->events[i];
        e.stack = e.stack & MD_PKL_REMOTE_LIST
                      ? (uint32_t)md_pkl_memo_list(pa, e.stack & ~MD_PKL_REMOTE_LIST) - 1
                      : kmap[e.stack];
        e.stream = tmap[e.stream];
        if (e.stack)
            a->features |= MD_HAS_FRAMES;
        a->events[a->nevents++] = e;
    }
    a->features |= b->features & MD_HAS_TIME;
    if (L->on_events)
        note_events(L, off);
    return 0;
}

/* The first reader at the second's start (md_pkl_split_fn): the second's
 * part taken (1) where both ends hold, else 0 (this reader reads it). */
static int split_join(void *ctx, md_pkl *pa, md_err *err)
{
    loader *L = ctx;
    second *x = L->second;
    second_ready(x);
    if (!md_pkl_split_can(pa, &x->part, L->s->nevents) || !remotes_known(pa, x->s)) {
        second_release(x); /* this reader reads the part */
        return 0;
    }
    const md_snapshot *b = x->s;
    int64_t off = (int64_t)x->at;
    uint32_t *smap = malloc((b->strs.n + 1) * sizeof *smap);
    uint32_t *fmap = malloc((b->nframes + 1) * sizeof *fmap);
    uint32_t *kmap = malloc((b->nstacks + 1) * sizeof *kmap);
    uint16_t *tmap = NULL;
    int rc = smap && fmap && kmap ? merge_ids(L, b, smap, fmap, kmap) : -1;
    if (!rc)
        rc = (tmap = merge_streams(L, b)) ? merge_events(L, pa, b, kmap, tmap, off) : -1;
    free(smap), free(fmap), free(kmap), free(tmap);
    if (rc == -2)
        return stack_failed(rc, off, err);
    if (rc)
        return md_err_set(err, MD_E_NOMEM, off, "out of memory");
    L->s->nsecond += b->nevents;
    md_pkl_part part = x->part;
    second_release(x); /* its memory freed on its thread, while this one reads on */
    rc = md_pkl_split_take(pa, &part, err);
    return rc ? rc : 1;
}

/* ---- the rest of the schema --------------------------------------------- */

static int add_block(loader *L, const md_pv *b, md_segment *seg, uint64_t *cursor,
                     md_err *err)
{
    md_snapshot *s = L->s;
    md_block blk = {0, 0, 0, 0, 0};
    if (b->t != PV_DICT)
        return md_err_set(err, MD_E_SCHEMA, -1, "segments[].blocks[] is not a dict");
    const md_pv *f[K_COUNT];
    known_fields(L, b, f);
    md_pv_u64(f[K_SIZE], &blk.size);
    md_pv_u64(f[K_REQUESTED_SIZE], &blk.requested_size);
    if (!md_pv_u64(f[K_ADDRESS], &blk.address))
        blk.address = *cursor; /* torch 2.0: blocks are laid out in order */
    *cursor = blk.address + blk.size;
    blk.state = block_state(L, f[K_STATE]);
    const md_pv *fr = f[K_FRAMES];
    const md_pv *hist = f[K_HISTORY];
    if (hist && (hist->t == PV_LIST) && hist->o->n > 0) {
        s->features |= MD_HAS_LEGACY_HISTORY;
        const md_pv *last = &hist->o->items[hist->o->n - 1];
        known_fields(L, last, f);
        fr = f[K_FRAMES];
        if (!blk.requested_size)
            md_pv_u64(f[K_REAL_SIZE], &blk.requested_size);
    }
    int rc = stack_id(L, fr, &blk.stack, -1, err);
    if (rc)
        return rc;
    size_t at;
    if (push_block(L, &blk, &at))
        return md_err_set(err, MD_E_NOMEM, -1, "out of memory");
    seg->nblocks++;
    return MD_OK;
}

/* Block k, taken as it was read, laid again as the next of g's blocks (a
 * block listed twice, or in another list too, as pickle.load reads it). */
static int copy_block(loader *L, size_t k, md_segment *g, uint64_t *cursor, md_err *err)
{
    md_snapshot *s = L->s;
    if (k >= s->nblocks)
        return md_err_set(err, MD_E_SCHEMA, -1, "segments[].blocks[] is not a dict");
    md_block blk = s->blocks[k]; /* a copy: pushing may move the array */
    *cursor = blk.address + blk.size;
    size_t at;
    if (push_block(L, &blk, &at))
        return md_err_set(err, MD_E_NOMEM, -1, "out of memory");
    g->nblocks++;
    return MD_OK;
}

/* A segment's 'blocks'. Blocks read as records are laid in s->blocks as
 * read, so a list of them alone (a run of references: torch's) is where
 * its blocks already are; any other list is laid after the blocks so far,
 * record blocks copied, dicts converted (lay_blocks then drops what the
 * copies left behind). */
static int segment_blocks(loader *L, const md_pv *blocks, md_segment *g, md_err *err)
{
    md_snapshot *s = L->s;
    if (blocks->t != PV_LIST && blocks->t != PV_TUPLE)
        return MD_OK;
    const pv_obj *o = blocks->o;
    uint32_t run = o->run_n, first = o->run_first & ~REF_TAG;
    if (run && (o->run_first & REF_TAG) != BLK_REF)
        return md_err_set(err, MD_E_SCHEMA, -1, "'blocks' holds trace entries");
    if (blocks->t != PV_LIST)
        return MD_OK;
    if (run && !o->n && (size_t)first + run <= s->nblocks) {
        g->first_block = first;
        g->nblocks = run;
        return MD_OK;
    }
    uint64_t cursor = g->address;
    int rc = MD_OK;
    for (uint32_t i = 0; i < run && !rc; i++)
        rc = copy_block(L, (size_t)first + i, g, &cursor, err);
    for (uint32_t i = 0; i < o->n && !rc; i++) {
        const md_pv *it = &o->items[i];
        if (it->t == PV_REF && (it->u & REF_TAG) == BLK_REF)
            rc = copy_block(L, (uint32_t)it->u & ~REF_TAG, g, &cursor, err);
        else
            rc = add_block(L, it, g, &cursor, err);
    }
    return rc;
}

/* lay_blocks where no segment's run starts before the place it goes to:
 * the runs moved down one by one (what earlier ones wrote lies below
 * every later run), the pages past n given back. A copy into a fresh array
 * held both at once: a state-only snapshot of 250 000 blocks (a segment
 * holding a block dict among records is laid by copies, leaving the
 * records behind) peaked 8 MB higher. */
static int lay_blocks_down(md_snapshot *s, size_t n)
{
    for (size_t i = 0, k = 0; i < s->nsegs; i++) {
        md_segment *g = &s->segs[i];
        if (g->nblocks && g->first_block != k)
            memmove(s->blocks + k, s->blocks + g->first_block, g->nblocks * sizeof *s->blocks);
        g->first_block = k;
        k += g->nblocks;
    }
    s->nblocks = n;
    md_big_trim(s->blocks, s->blkcap, n, sizeof *s->blocks);
    return 0;
}

/* Each segment's blocks back to back in segment order, as the general
 * path lays them: blocks read as records stay where they were read, so a
 * segment laid by copies, a run two segments share or blocks outside any
 * segment leave s->blocks otherwise. -1 out of memory. */
static int lay_blocks(md_snapshot *s)
{
    size_t n = 0;
    int laid = 1, ahead = 1;
    for (size_t i = 0; i < s->nsegs; i++) {
        laid &= s->segs[i].first_block == n;
        ahead &= s->segs[i].first_block >= n;
        n += s->segs[i].nblocks;
    }
    if (laid && n == s->nblocks)
        return 0;
    if (ahead) /* each run at or after where it goes: moved down in place */
        return lay_blocks_down(s, n);
    md_block *b = NULL;
    size_t cap = 0;
    if (md_big_grow((void **)&b, &cap, n ? n : 1, sizeof *b))
        return -1;
    for (size_t i = 0, k = 0; i < s->nsegs; i++) {
        md_segment *g = &s->segs[i];
        if (g->nblocks)
            memcpy(b + k, s->blocks + g->first_block, g->nblocks * sizeof *b);
        g->first_block = k;
        k += g->nblocks;
    }
    md_big_free(s->blocks, s->blkcap, sizeof *s->blocks);
    s->blocks = b;
    s->nblocks = n;
    s->blkcap = cap;
    return 0;
}

/* A segment from its known fields (K_*, NULL where absent). */
static int add_segment_fields(loader *L, const md_pv *const f[K_COUNT], md_err *err)
{
    md_snapshot *s = L->s;
    md_segment g;
    memset(&g, 0, sizeof g);
    int64_t dev = 0;
    md_pv_int(f[K_DEVICE], &dev);
    g.device = dev >= 0 && dev <= INT16_MAX ? (int16_t)dev : -1;
    if (!md_pv_u64(f[K_ADDRESS], &g.address) || !md_pv_u64(f[K_TOTAL_SIZE], &g.total_size))
        return md_err_set(err, MD_E_SCHEMA, -1,
                          "segments[%zu] lacks 'address' or 'total_size'", s->nsegs);
    md_pv_u64(f[K_ALLOCATED_SIZE], &g.allocated_size);
    md_pv_u64(f[K_STREAM], &g.stream);
    g.is_small = f[K_SEGMENT_TYPE] && f[K_SEGMENT_TYPE]->t == PV_STR &&
                 f[K_SEGMENT_TYPE]->s == L->small_sid;
    int64_t b = 0;
    if (md_pv_int(f[K_IS_EXPANDABLE], &b))
        g.is_expandable = b != 0;
    const md_pv *pool = f[K_SEGMENT_POOL_ID];
    if (pool && pool->t == PV_TUPLE && pool->o->n == 2) {
        md_pv_int(&pool->o->items[0], &g.pool_id[0]);
        md_pv_int(&pool->o->items[1], &g.pool_id[1]);
    }
    int rc = stack_id(L, f[K_FRAMES], &g.stack, -1, err);
    if (rc)
        return rc;
    g.first_block = s->nblocks;
    const md_pv *blocks = f[K_BLOCKS];
    if (blocks && (rc = segment_blocks(L, blocks, &g, err)))
        return rc;
    size_t need = s->nsegs + 1;
    if (need > s->segcap &&
        md_big_grow((void **)&s->segs, &s->segcap, mapped_from(s, need, sizeof g, STATE_HEAP_MAX),
                    sizeof g))
        return md_err_set(err, MD_E_NOMEM, -1, "out of memory");
    if (need > L->seg_ready)
        L->seg_ready = md_big_ahead(s->segs, s->segcap, s->nsegs, sizeof g);
    s->segs[s->nsegs++] = g;
    return MD_OK;
}

/* A segment left as a dict. */
static int add_segment(loader *L, const md_pv *v, md_err *err)
{
    if (v->t != PV_DICT)
        return md_err_set(err, MD_E_SCHEMA, -1, "segments[] entry is not a dict");
    const md_pv *f[K_COUNT];
    known_fields(L, v, f);
    return add_segment_fields(L, f, err);
}

/* A reference in 'segments' that is not a segment's: as the general path
 * words it, where a block is a dict that lacks 'total_size'. */
static int not_segments(const loader *L, uint32_t ref, md_err *err)
{
    if ((ref & REF_TAG) == BLK_REF)
        return md_err_set(err, MD_E_SCHEMA, -1, "segments[%zu] lacks 'address' or 'total_size'",
                          L->s->nsegs);
    return md_err_set(err, MD_E_SCHEMA, -1, "'segments' holds trace entries");
}

/* The segments list: the segments converted while reading (references:
 * a counted run, then any stored ones) and any left as dicts. */
static int add_segments(loader *L, const md_pv *list, md_err *err)
{
    if (!list)
        return MD_OK;
    if (list->t != PV_LIST)
        return md_err_set(err, MD_E_SCHEMA, -1, "'segments' is not a list");
    const pv_obj *o = list->o;
    if (o->run_n && (o->run_first & REF_TAG) != SEG_REF)
        return not_segments(L, o->run_first, err);
    for (uint32_t i = 0; i < o->n; i++) {
        const md_pv *v = &o->items[i];
        if (v->t == PV_REF && (v->u & REF_TAG) != SEG_REF)
            return not_segments(L, (uint32_t)v->u, err);
        int rc = v->t == PV_REF ? MD_OK : add_segment(L, v, err);
        if (rc)
            return rc;
    }
    return MD_OK;
}

/* device_traces[d] holds references to the events converted on the fly: a
 * run the reader counted, then any stored ones. They are normally one
 * contiguous run per device; otherwise they are gathered. */
static int add_device(loader *L, int d, const md_pv *list, md_err *err)
{
    md_snapshot *s = L->s;
    if (list->t != PV_LIST)
        return md_err_set(err, MD_E_SCHEMA, -1, "device_traces[%d] is not a list", d);
    const pv_obj *o = list->o;
    uint32_t run = o->run_n, n = run + o->n;
    md_range r = {run ? o->run_first : s->nevents, n};
    int contiguous = 1;
    if (run && (o->run_first & REF_TAG) == SEG_REF)
        return md_err_set(err, MD_E_SCHEMA, -1, "device_traces[%d] holds segments", d);
    if (run && (o->run_first & REF_TAG))
        return md_err_set(err, MD_E_SCHEMA, -1, "device_traces[%d][0] is not a trace entry", d);
    for (uint32_t i = 0; i < o->n; i++) {
        if (o->items[i].t != PV_REF || (o->items[i].u & REF_TAG))
            return md_err_set(err, MD_E_SCHEMA, -1,
                              "device_traces[%d][%u] is not a trace entry", d, run + i);
        if (i == 0 && !run)
            r.first = o->items[0].u;
        else if (o->items[i].u != r.first + run + i)
            contiguous = 0;
    }
    if (!contiguous) {
        size_t base = s->nevents;
        events_gone(L, MD_EVENTS_PAUSE); /* after the read's end: no more follows */
        if (md_big_grow((void **)&s->events, &s->evcap, base + n, sizeof *s->events))
            return md_err_set(err, MD_E_NOMEM, -1, "out of memory");
        for (uint32_t i = 0; i < n; i++)
            s->events[base + i] = s->events[i < run ? o->run_first + i : o->items[i - run].u];
        s->nevents += n;
        r.first = base;
    }
    s->dev[d] = r;
    return MD_OK;
}

/* The earlier device whose trace is the same non-empty list as device d's
 * (a memo get of it), -1 if none. torch writes a list per device; a file
 * naming one list for thousands of devices would have it replayed, and
 * held, once for each. */
static int repeated_trace(const pv_obj *traces, int d)
{
    const md_pv *t = &traces->items[d];
    if (t->t != PV_LIST || !(t->o->n + t->o->run_n))
        return -1;
    for (int e = 0; e < d; e++)
        if (traces->items[e].t == PV_LIST && traces->items[e].o == t->o)
            return e;
    return -1;
}

static int add_traces(loader *L, const md_pv *v, md_err *err)
{
    md_snapshot *s = L->s;
    if (!v)
        return MD_OK;
    if (v->t != PV_LIST)
        return md_err_set(err, MD_E_SCHEMA, -1, "'device_traces' is not a list");
    if (v->o->n > 4096)
        return md_err_set(err, MD_E_SCHEMA, -1, "'device_traces' has %u devices", v->o->n);
    s->ndev = (int)v->o->n;
    s->dev = calloc(s->ndev ? (size_t)s->ndev : 1, sizeof *s->dev);
    if (!s->dev)
        return md_err_set(err, MD_E_NOMEM, -1, "out of memory");
    for (int d = 0; d < s->ndev; d++) {
        int rc = add_device(L, d, &v->o->items[d], err);
        if (rc)
            return rc;
        int again = repeated_trace(v->o, d);
        if (again >= 0)
            return md_err_set(err, MD_E_SCHEMA, -1, "device_traces[%d] is device_traces[%d] again",
                              d, again);
    }
    return MD_OK;
}

static int add_annotations(loader *L, const md_pv *v, md_err *err)
{
    md_snapshot *s = L->s;
    const md_strtab *t = &s->strs;
    if (!v || v->t != PV_LIST)
        return MD_OK;
    s->features |= MD_HAS_ANNOTATIONS;
    for (uint32_t i = 0; i < v->o->n; i++) {
        const md_pv *a = &v->o->items[i];
        md_annotation an = {0, -1, 0, 0};
        int64_t x = 0;
        if (a->t != PV_DICT)
            continue;
        if (md_pv_int(md_pv_get(t, a, "device"), &x))
            an.device = (int)x;
        if (md_pv_int(md_pv_get(t, a, "time_us"), &x))
            an.time_us = x;
        const md_pv *nm = md_pv_get(t, a, "name");
        if (nm && nm->t == PV_STR)
            an.name = nm->s;
        const md_pv *st = md_pv_get(t, a, "stage");
        an.stage = md_pv_is_str(t, st, "START") ? 1 : md_pv_is_str(t, st, "END") ? 2 : 0;
        if (md_grow((void **)&s->anns, &s->anncap, s->nanns + 1, sizeof an))
            return md_err_set(err, MD_E_NOMEM, -1, "out of memory");
        s->anns[s->nanns++] = an;
    }
    return MD_OK;
}

static void add_settings(loader *L, const md_pv *v)
{
    md_snapshot *s = L->s;
    const md_strtab *t = &s->strs;
    md_settings *st = &s->settings;
    st->max_split_size = -1;
    if (!v || v->t != PV_DICT)
        return;
    st->present = 1;
    s->features |= MD_HAS_SETTINGS;
    int64_t x;
    if (md_pv_int(md_pv_get(t, v, "expandable_segments"), &x))
        st->expandable_segments = x != 0;
    if (md_pv_int(md_pv_get(t, v, "max_split_size"), &x))
        st->max_split_size = x;
    const md_pv *g = md_pv_get(t, v, "garbage_collection_threshold");
    if (g && g->t == PV_FLOAT)
        st->gc_threshold = g->f;
    const md_pv *c = md_pv_get(t, v, "PYTORCH_CUDA_ALLOC_CONF");
    if (c && c->t == PV_STR)
        st->alloc_conf = c->s;
    const md_pv *r = md_pv_get(t, v, "roundup_power2_divisions");
    for (int i = 0; r && r->t == PV_DICT && i < 16; i++) {
        char key[16];
        snprintf(key, sizeof key, "%d", 1 << i);
        if (md_pv_int(md_pv_get(t, r, key), &x) && x >= 0)
            st->roundup_divisions[i] = (uint32_t)x;
    }
}

static int convert_top(loader *L, const md_pv *top, md_err *err)
{
    md_snapshot *s = L->s;
    const md_strtab *t = &s->strs;
    int rc;
    if (top->t == PV_LIST) { /* legacy: a bare list of segments */
        s->features |= MD_HAS_LEGACY_LIST;
        add_settings(L, NULL);
        return add_segments(L, top, err);
    }
    if (top->t != PV_DICT)
        return md_err_set(err, MD_E_SCHEMA, -1,
                          "the pickle holds no allocator snapshot (top level is not a dict)");
    const md_pv *segs = md_pv_get(t, top, "segments");
    const md_pv *traces = md_pv_get(t, top, "device_traces");
    if (!segs && !traces)
        return md_err_set(err, MD_E_SCHEMA, -1,
                          "not an allocator snapshot: no 'segments' or 'device_traces' key");
    add_settings(L, md_pv_get(t, top, "allocator_settings"));
    if ((rc = add_segments(L, segs, err)) || (rc = add_traces(L, traces, err)))
        return rc;
    return add_annotations(L, md_pv_get(t, top, "external_annotations"), err);
}

static int loader_init(loader *L, md_snapshot *s)
{
    memset(L, 0, sizeof *L);
    L->s = s;
    L->note_at = SIZE_MAX;
    for (int k = 0; k < K_COUNT; k++) {
        int64_t id = md_strtab_intern(&s->strs, key_names[k], strlen(key_names[k]));
        if (id < 0)
            return -1;
        L->key[k] = (uint32_t)id;
        if (L->key[k] != L->key[0] + (uint32_t)k)
            return -1; /* on_item relies on consecutive key ids */
    }
    for (size_t a = 1; a < NACTIONS; a++) {
        int64_t id = md_strtab_intern(&s->strs, action_names[a], strlen(action_names[a]));
        if (id < 0)
            return -1;
        L->act_sid[a] = (uint32_t)id;
        if (L->act_sid[a] != L->act_sid[1] + (uint32_t)(a - 1))
            return -1; /* action_of relies on consecutive ids */
    }
    static const char *const states[3] = {"active_allocated", "active_pending_free",
                                          "active_awaiting_free"};
    for (int k = 0; k < 3; k++) {
        int64_t id = md_strtab_intern(&s->strs, states[k], strlen(states[k]));
        if (id < 0)
            return -1;
        L->state_sid[k] = (uint32_t)id;
    }
    int64_t small = md_strtab_intern(&s->strs, "small", 5);
    if (small < 0)
        return -1;
    L->small_sid = (uint32_t)small;
    /* stream index 0 is the default stream, 0 */
    if (md_grow((void **)&s->streams, &s->strcap, 1, sizeof *s->streams))
        return -1;
    s->streams[0] = 0;
    s->nstreams = 1;
    /* stack id 0 is the empty stack */
    if (md_grow((void **)&s->stacks, &s->stcap, 1, sizeof *s->stacks))
        return -1;
    s->stacks[0].first = s->stacks[0].n = 0;
    s->nstacks = 1;
    return 0;
}

#define GUESS_HUGE_MIN ((size_t)4 << 20) /* input bytes; see md_snapshot_read_with */

/* Has on_events told of the trace as it is read, in an events array
 * reserved for as many as the input could hold (so it need not move while
 * another thread reads it), huge pages only where the usual count fits. */
static void follow_events(loader *L, const md_load_opts *opts, size_t bytes, size_t usual)
{
    md_snapshot *s = L->s;
    if (!opts || !opts->on_events)
        return;
    /* a trace entry takes at least 11 bytes of pickle: room for one per 8
     * (a compressed file's size is unknown: its array grows, pausing the
     * reader of it each time it moves) */
    if (bytes)
        (void)md_big_reserve((void **)&s->events, &s->evcap, bytes / 8 + 1, usual,
                             sizeof *s->events);
    L->on_events = opts->on_events;
    L->events_ctx = opts->events_ctx;
    L->bytes = (double)bytes;
    L->note_at = NOTE_EVERY;
}

int md_snapshot_read(md_input *in, const char *name, int records, md_snapshot **out,
                     md_err *err)
{
    return md_snapshot_read_with(in, name, records, NULL, out, err);
}

#define SPLIT_MIN ((size_t)2 << 20) /* input bytes: below, a split gains nothing */
#define SPLIT_WHERE 0.55               /* where the second reader starts */

/* The second reader of a read split in two, started where opts ask for
 * one: of file (a plain file, read with pread), else of the input where it
 * is read in place; else NULL. */
static second *split_start(md_input *in, int records, const md_load_opts *opts,
                           const md_split_src *file, const char *path)
{
    const unsigned char *buf;
    size_t len;
    md_split_src mem = {NULL, -1, 0};
    if (!opts || opts->split <= 0 || !records)
        return NULL;
    if (!file && md_input_whole(in, &buf, &len))
        mem.mem = buf, mem.len = len, file = &mem;
    if (!file || file->len < (opts->split_min ? opts->split_min : SPLIT_MIN))
        return NULL;
    double where = opts->split_where > 0 && opts->split_where < 1 ? opts->split_where : SPLIT_WHERE;
    return second_start(file, path, opts->split, where);
}

/* One read of in; *again where it failed on a memo slot of the second
 * reader's part (md_pkl_hole_hit): the caller reads it again whole. */
static int read_once(md_input *in, const char *name, int records, const md_load_opts *opts,
                     const md_split_src *file, md_snapshot **out, int *again, md_err *err)
{
    md_snapshot *s = calloc(1, sizeof *s);
    md_pkl *p = NULL;
    loader L;
    int rc;
    *again = 0;
    if (!s || !(s->path = strdup(name ? name : "")) || md_strtab_init(&s->strs) ||
        loader_init(&L, s)) {
        md_snapshot_free(s);
        return md_err_set(err, MD_E_NOMEM, -1, "out of memory");
    }
    /* A snapshot takes 55-180 bytes of pickle per trace entry: an array for
     * size / 60 entries starts out in its own mapping rather than in the
     * heap to be copied there later. Only a guess: too many costs address
     * space and, until md_big_trim, part of a huge page, which a small
     * input cannot afford (beta-medium, 1.8 MB and 190 bytes an entry: a
     * 2 MB page for 0.4 MB of events, 4.2 MB resident instead of 2.8); so
     * huge pages on the guess only from GUESS_HUGE_MIN of input. */
    size_t bytes = md_input_size(in), hint = md_input_size_hint(in), usual = hint / 60;
    follow_events(&L, opts, bytes, usual);
    s->heap_first = opts && opts->heap_first;
    if (!s->heap_first && !s->evcap) /* a hint: on failure the array grows as it fills */
        (void)md_big_reserve((void **)&s->events, &s->evcap, usual,
                             hint >= GUESS_HUGE_MIN ? usual : 0, sizeof *s->events);
    second *x = split_start(in, records, opts, file, name);
    L.second = x;
    if ((rc = md_pkl_new(in, &s->strs, &p, err)) == MD_OK) {
        md_pv top;
        md_pkl_set_hook(p, on_item, &L);
        md_pkl_set_list_hook(p, on_list, &L);
        if (records)
            set_record_hook(&L, p);
        L.p = p;
        if (x)
            md_pkl_set_split(p, x->at, split_join, &L);
        rc = md_pkl_run(p, &top, err);
        *again = rc && md_pkl_hole_hit(p);
        s->nrecords = md_pkl_records(p);
        s->nspills = md_pkl_spills(p);
        if (rc == MD_OK && L.on_events)
            L.on_events(L.events_ctx, s->events, s->nevents, s->nevents, MD_EVENTS_END);
        if (rc == MD_OK)
            rc = convert_top(&L, &top, err);
        if (rc == MD_OK && lay_blocks(s))
            rc = md_err_set(err, MD_E_NOMEM, -1, "out of memory");
    }
    second_free(L.second); /* not taken (or the read failed first) */
    L.p = NULL;
    md_pkl_free(p);
    md_omap_free(&L.stream_ix);
    if (L.cpp_seen)
        s->features |= MD_HAS_CPP_FRAMES;
    /* no trace at all (a recording stopped and cleared, or never kept):
     * the blocks' own stacks are the snapshot's stacks */
    if (!s->nevents && L.block_stacks)
        s->features |= MD_HAS_FRAMES;
    free(s->fslots);
    free(s->sslots);
    free(s->shash);
    s->fslots = s->sslots = s->shash = NULL;
    md_big_trim(s->events, s->evcap, s->nevents, sizeof *s->events);
    md_big_trim(s->sframes, s->sfcap, s->nsframes, sf_size(s));
    md_big_trim(s->segs, s->segcap, s->nsegs, sizeof *s->segs);
    md_big_trim(s->blocks, s->blkcap, s->nblocks, sizeof *s->blocks);
    if (rc) {
        events_gone(&L, MD_EVENTS_GONE);
        md_snapshot_free(s);
        return rc;
    }
    *out = s;
    return MD_OK;
}

/* md_snapshot_read_with, of a plain file also read with pread where file
 * says so (md_load_opts.split). */
static int read_split(md_input *in, const char *name, int records, const md_load_opts *opts,
                      const md_split_src *file, md_snapshot **out, md_err *err)
{
    int again;
    int rc = read_once(in, name, records, opts, file, out, &again, err);
    if (rc && again) { /* whole, and without telling of events: that was ended */
        md_load_opts whole = *opts;
        whole.split = 0;
        whole.on_events = NULL;
        md_input *fresh = NULL; /* a file read through a window: from its start again */
        if (file && (rc = md_input_open(name, opts->read_ahead, &fresh, err)) != MD_OK)
            return rc;
        rc = read_once(fresh ? fresh : in, name, records, &whole, NULL, out, &again, err);
        md_input_close(fresh);
        if (!rc)
            (*out)->split_again = 1;
    }
    return rc;
}

int md_snapshot_read_with(md_input *in, const char *name, int records, const md_load_opts *opts,
                          md_snapshot **out, md_err *err)
{
    return read_split(in, name, records, opts, NULL, out, err);
}

int md_snapshot_load(const char *path, md_snapshot **out, md_err *err)
{
    md_load_opts opts = {.read_ahead = 1};
    return md_snapshot_load_with(path, &opts, out, err);
}

int md_snapshot_load_with(const char *path, const md_load_opts *opts, md_snapshot **out,
                          md_err *err)
{
    md_input *in = NULL;
    md_err_file(err, path);
    int rc = md_input_open(path, opts && opts->read_ahead, &in, err);
    if (rc)
        return rc;
    /* a plain file a second reader may read too (md_load_opts.split) */
    md_split_src file = {NULL, -1, md_input_size(in)};
    if (opts && opts->split > 0 && !strcmp(md_input_codec(in), "raw") && file.len &&
        file.len <= MD_SPLIT_OFFSET) /* a larger one is read whole */
        file.fd = open(path, O_RDONLY | O_CLOEXEC);
    rc = read_split(in, path, 1, opts, file.fd >= 0 ? &file : NULL, out, err);
    if (file.fd >= 0)
        close(file.fd);
    md_input_close(in);
    return rc;
}

int md_snapshot_load_mem(const void *data, size_t n, const char *name,
                         md_snapshot **out, md_err *err)
{
    md_input *in = NULL;
    md_err_file(err, name);
    int rc = md_input_mem(data, n, &in, err);
    if (rc)
        return rc;
    rc = md_snapshot_read(in, name, 1, out, err);
    md_input_close(in);
    return rc;
}

void md_snapshot_free(md_snapshot *s)
{
    if (!s)
        return;
    free(s->path);
    md_strtab_free(&s->strs);
    free(s->frames);
    free(s->fslots);
    md_big_free(s->sframes, s->sfcap, sf_size(s));
    free(s->stacks);
    free(s->sslots);
    free(s->shash);
    md_big_free(s->events, s->evcap, sizeof *s->events);
    free(s->streams);
    free(s->dev);
    md_big_free(s->segs, s->segcap, sizeof *s->segs);
    md_big_free(s->blocks, s->blkcap, sizeof *s->blocks);
    free(s->anns);
    free(s);
}

/* ---- accessors ------------------------------------------------------------- */

const char *md_snapshot_path(const md_snapshot *s) { return s->path; }
int md_snapshot_ndevices(const md_snapshot *s) { return s->ndev; }
unsigned md_snapshot_features(const md_snapshot *s) { return s->features; }
const md_settings *md_snapshot_settings(const md_snapshot *s) { return &s->settings; }
size_t md_snapshot_nstacks(const md_snapshot *s) { return s->nstacks; }

uint64_t md_snapshot_stream(const md_snapshot *s, unsigned index)
{
    return index < s->nstreams ? s->streams[index] : 0;
}

const md_event *md_snapshot_events(const md_snapshot *s, int device, size_t *n)
{
    if (device < 0 || device >= s->ndev) {
        *n = 0;
        return NULL;
    }
    *n = s->dev[device].n;
    return *n ? s->events + s->dev[device].first : NULL;
}

int md_snapshot_has_history(const md_snapshot *s, int device)
{
    /* enabled="state" keeps a trace of one entry (torch's ring of 1: the
     * last event, of any kind); a history is more than that */
    size_t n;
    md_snapshot_events(s, device, &n);
    return n >= 2;
}

const md_segment *md_snapshot_segments(const md_snapshot *s, size_t *n)
{
    *n = s->nsegs;
    return s->segs;
}

const md_block *md_snapshot_blocks(const md_snapshot *s, size_t *n)
{
    *n = s->nblocks;
    return s->blocks;
}

const md_annotation *md_snapshot_annotations(const md_snapshot *s, size_t *n)
{
    *n = s->nanns;
    return s->anns;
}

const char *md_snapshot_string(const md_snapshot *s, uint32_t id)
{
    return md_strtab_get(&s->strs, id);
}

const char *md_frame_label(const md_snapshot *s, const md_frame *f, char *buf, size_t n)
{
    snprintf(buf, n, "%s:%d %s", md_snapshot_string(s, f->filename), f->line,
             md_snapshot_string(s, f->name));
    return buf;
}

md_stack_ids md_snapshot_stack(const md_snapshot *s, uint32_t stack)
{
    if (stack == 0 || stack >= s->nstacks)
        return (md_stack_ids){NULL, 0, 0};
    const md_range *r = &s->stacks[stack];
    return (md_stack_ids){(const char *)s->sframes + r->first * sf_size(s), r->n, s->sf_wide};
}

const md_frame *md_snapshot_frame(const md_snapshot *s, uint32_t frame)
{
    return frame < s->nframes ? &s->frames[frame] : NULL;
}

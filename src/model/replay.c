/* replay.c - replays one device's allocator trace with the caching
 * allocator's block rules, giving allocated/reserved/requested after every
 * event and the live set at any point.
 *
 * Why a block model and not a sum of sizes: a trace entry's `size` is the
 * *requested* size, while torch's memory_allocated and peak statistics count
 * *block* sizes: requests are rounded up (512 B, or power-of-two divisions
 * when configured), and a free block is split only when the remainder is
 * >= 512 B (small pool, requests <= 1 MiB; any pool with expandable
 * segments) or > 1 MiB (large pool, and only below max_split_size).
 * Otherwise the whole block is handed out and counted. Freed blocks merge
 * with free, address-adjacent neighbours of the same segment. Rules from
 * c10/cuda/CUDACachingAllocator.cpp (round_size, should_split,
 * try_merge_blocks). The trace gives each allocation's address, so no
 * best-fit search is needed: the block at that address is the one torch
 * chose.
 *
 * Memory allocated before recording began (late start or ring-buffer
 * overflow) shows up as frees without allocs and as live blocks in the
 * final segment state that no alloc explains; both are placed in the
 * initial state so totals match torch's counters. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include "../snapshot/snapshot_int.h"
#include "model.h"

#define KMIN_BLOCK 512ULL
#define KSMALL_SIZE 1048576ULL
#define NIL UINT32_MAX

enum { B_FREE = 0, B_ALLOC = 1, B_PENDING = 2 };

typedef struct rblock {
    uint64_t addr, size, requested;
    uint32_t prev, next; /* address-ordered neighbours in the segment */
    uint32_t seg;
    uint32_t stack;
    int32_t alloc_index; /* events are fewer than 2^31 (md_replay_run) */
    uint8_t state;
} rblock;

typedef struct rseg {
    uint64_t addr, size;
    uint32_t first; /* lowest block */
    uint32_t last;  /* highest block, a hint: checked before use (last_block) */
    uint32_t nblocks; /* in its list: the smaller of two joined ones moves */
    uint8_t expandable, alive;
} rseg;

typedef struct rstate {
    const md_snapshot *s;
    const md_settings *cfg;
    rblock *b;
    size_t nb, bcap;
    uint32_t freelist;
    rseg *g;
    size_t ng, gcap;
    md_map by_addr; /* block start address -> block index */
    md_map seg_by_addr;
    md_map seg_by_end; /* end address -> index, of expandable segments */
    /* block start -> index of the blocks in segments, ordered: made at the
     * first unmap that starts inside a block, kept from then on (has_order);
     * a copy of the state leaves it behind and makes it again if needed */
    md_omap order;
    int has_order;
    int unmapped; /* an unmap has left holes in expandable segments */
    uint64_t allocated, reserved, requested;
    size_t anomalies;
    int32_t *free_at; /* alloc index -> free index; NULL when not wanted */
    /* the block the last free_requested found, and that event's index: a
     * free_completed right after it (the usual case) needs no lookup */
    long freed_idx;
    uint32_t freed_block;
} rstate;

/* A copy of the state after event `index`, taken by the final pass so a
 * probe can start near the point it wants instead of at the beginning. */
typedef struct rcheck {
    long index;
    rstate st;
} rcheck;
#define NCHECKS 2 /* each costs a copy of the state: 4 made big_gamma 1.2 MB
                    * bigger and no faster */
#define CHECK_MIN_EVENTS 8192

/* The event after which check k of a trace of n events is taken (SIZE_MAX:
 * none): at 10/32 and 27/32 of the trace. Probes aim at the first steps
 * (the peak, often) and the last (its zero_grad, and the peak again):
 * over the 206 traces of the fixtures and benchmarks long enough for
 * checks, probes replayed 0.30 of their events from these, 0.44 from
 * checks at 1/3 and 2/3 (big_gamma 24 797 -> 12 206 events, hf-qwen2-ring
 * 42 620 -> 24 911). 6/32 did best on the real traces (0.27), but
 * synthetic-100000's peak, at 0.37, then replayed from 0.19. */
_Static_assert(NCHECKS == 2, "check_place places two checks");
static size_t check_place(size_t n, size_t k)
{
    /* no table of fractions: one in the read-only data lay outside the
     * hot constants (hot.ld), a fault-around window more on small inputs */
    return n >= CHECK_MIN_EVENTS && k < NCHECKS ? n / 32 * (k ? 27 : 10) - 1 : SIZE_MAX;
}

struct md_replay {
    const md_snapshot *s;
    int device;
    const md_event *ev;
    size_t n;
    md_point initial;
    /* the timeline: allocated and requested after each event, 16 bytes;
     * reserved, which only segment events move, as its changes (a third
     * of the timeline's bytes, a tenth of a small snapshot's resident set,
     * where every event held it) */
    md_tpoint *pts;
    struct rsv_step { size_t at; uint64_t reserved; } *rsv; /* event, value after it */
    size_t nrsv, rsvcap;
    int rsv_failed;    /* no memory for a change: the pass is not kept */
    int32_t *free_at; /* alloc event index -> index of its free, -1 = never */
    size_t ptscap, freecap; /* md_big_grow capacities */
    long peak_index;
    int reconstructed; /* the state before the trace was not empty */
    long peak_reserved_index; /* the first event at peak reserved, -1: none */
    uint64_t peak_alloc, peak_reserved;
    size_t anomalies;
    /* reconstructed initial state, replayed again by md_replay_live */
    md_live *pre;
    size_t npre, precap;
    rseg *preseg;
    size_t npreseg, presegcap;
    /* the state after the last event, from the main pass: probes at the
     * trace's end need not replay it again */
    md_live *final_live;
    size_t nfinal;
    md_cache_state final_cache;
    rcheck checks[NCHECKS];
    int nchecks;
    size_t check_n, check_k, check_at; /* the checks' trace length (check_place),
                                          the next one's number and event */
    int roll; /* the trace's length unknown: checks at doubling indices,
                 the latest NCHECKS kept */
    /* a state whose arrays a probe may replay in (the main pass's final
     * one, then the last probe's): already the size the trace needs and
     * its pages touched, where a fresh one grew by copies into new pages
     * (a fifth of big_gamma's page faults). Taken and given back
     * atomically: probes of one replay may run on several threads. */
    struct spare { _Atomic(rstate *) st; } *spare;
};

/* ---- torch's size rules --------------------------------------------------- */

static uint64_t pow2_floor(uint64_t x)
{
    return x ? 1ULL << (63 - __builtin_clzll(x)) : 0;
}

uint64_t md_round_size(const md_settings *cfg, uint64_t size)
{
    if (size < KMIN_BLOCK)
        return KMIN_BLOCK;
    uint64_t div = 0;
    if (cfg && size >= KSMALL_SIZE) {
        int idx = 63 - __builtin_clzll(size) - 20; /* intervals start at 1 MiB */
        if (idx > 15)
            idx = 15;
        div = cfg->roundup_divisions[idx];
    } else if (cfg) {
        div = cfg->roundup_divisions[0];
    }
    if (div > 1 && size > KMIN_BLOCK * div) {
        if ((size & (size - 1)) == 0)
            return size;
        uint64_t fl = pow2_floor(size);
        uint64_t step = fl >> (63 - __builtin_clzll(div));
        if (step == 0)
            return fl << 1;
        uint64_t r = size & ~(step - 1);
        return r == size ? size : r + step;
    }
    return KMIN_BLOCK * ((size + KMIN_BLOCK - 1) / KMIN_BLOCK);
}

static int should_split(const rstate *st, const rblock *blk, uint64_t size, int small)
{
    uint64_t remaining = blk->size - size;
    if (small || st->cfg->expandable_segments || st->g[blk->seg].expandable)
        return remaining >= KMIN_BLOCK;
    int64_t msplit = st->cfg->max_split_size;
    return (msplit < 0 || size < (uint64_t)msplit) && remaining > KSMALL_SIZE;
}

/* ---- state ------------------------------------------------------------------ */

static uint32_t new_block(rstate *st)
{
    if (st->freelist != NIL) {
        uint32_t i = st->freelist;
        st->freelist = st->b[i].next;
        return i;
    }
    if (st->nb >= NIL - 1 ||
        md_grow((void **)&st->b, &st->bcap, st->nb + 1, sizeof *st->b))
        return NIL;
    return (uint32_t)st->nb++;
}

static void drop_block(rstate *st, uint32_t i)
{
    md_map_del(&st->by_addr, st->b[i].addr);
    if (st->b[i].seg != NIL) {
        st->g[st->b[i].seg].nblocks--;
        if (st->has_order)
            md_omap_del(&st->order, st->b[i].addr);
    }
    st->b[i].next = st->freelist;
    st->b[i].state = B_FREE;
    st->b[i].seg = NIL;
    st->freelist = i;
}

static uint32_t add_free_block(rstate *st, uint32_t seg, uint64_t addr, uint64_t size,
                               uint32_t prev, uint32_t next)
{
    uint32_t i = new_block(st);
    if (i == NIL)
        return NIL;
    rblock *b = &st->b[i];
    memset(b, 0, sizeof *b);
    b->addr = addr;
    b->size = size;
    b->seg = seg;
    b->prev = prev;
    b->next = next;
    b->alloc_index = -1;
    if (prev != NIL)
        st->b[prev].next = i;
    else if (seg != NIL)
        st->g[seg].first = i;
    if (next != NIL)
        st->b[next].prev = i;
    else if (seg != NIL)
        st->g[seg].last = i;
    if (seg != NIL)
        st->g[seg].nblocks++;
    if (md_map_put(&st->by_addr, addr, i) ||
        (st->has_order && seg != NIL && md_omap_put(&st->order, addr, i)))
        return NIL;
    return i;
}

static uint32_t add_segment(rstate *st, uint64_t addr, uint64_t size, int expandable)
{
    if (md_grow((void **)&st->g, &st->gcap, st->ng + 1, sizeof *st->g))
        return NIL;
    uint32_t gi = (uint32_t)st->ng++;
    st->g[gi] = (rseg){.addr = addr, .size = size, .first = NIL, .last = NIL,
                       .expandable = (uint8_t)expandable, .alive = 1};
    if (md_map_put(&st->seg_by_addr, addr, gi) ||
        (expandable && md_map_put(&st->seg_by_end, addr + size, gi)) ||
        add_free_block(st, gi, addr, size, NIL, NIL) == NIL)
        return NIL;
    st->reserved += size;
    return gi;
}

/* Merges block i with its free, address-adjacent neighbours. */
static void merge_free(rstate *st, uint32_t i)
{
    rblock *b = &st->b[i];
    uint32_t n = b->next;
    if (n != NIL && st->b[n].state == B_FREE && b->addr + b->size == st->b[n].addr) {
        b->size += st->b[n].size;
        b->next = st->b[n].next;
        if (b->next != NIL)
            st->b[b->next].prev = i;
        else if (b->seg != NIL)
            st->g[b->seg].last = i;
        drop_block(st, n);
    }
    uint32_t p = b->prev;
    if (p != NIL && st->b[p].state == B_FREE && st->b[p].addr + st->b[p].size == b->addr) {
        st->b[p].size += b->size;
        st->b[p].next = b->next;
        if (b->next != NIL)
            st->b[b->next].prev = p;
        else if (b->seg != NIL)
            st->g[b->seg].last = p;
        drop_block(st, i);
    }
}

/* The size a map of block addresses starts at: the blocks the snapshot
 * ends with, where it is known (a pass fed as the trace is read starts
 * before): each doubling on the way there rehashed into fresh pages
 * (big_gamma's replay 8.1 -> 6.4 ms). */
static size_t blocks_hint(const md_snapshot *s)
{
    return s && s->nblocks > 1024 ? s->nblocks : 1024;
}

static int state_init(rstate *st, const md_snapshot *s, const md_settings *cfg)
{
    memset(st, 0, sizeof *st);
    st->s = s;
    st->cfg = cfg;
    st->freelist = NIL;
    st->freed_idx = -2;
    if (md_map_init(&st->by_addr, blocks_hint(s)) || md_map_init(&st->seg_by_addr, 64) ||
        md_map_init(&st->seg_by_end, 16))
        return -1;
    return 0;
}

/* Empties st for another pass, keeping its arrays: a second pass over
 * the same events needs about the same room, and reusing it costs no
 * fresh pages. */
static void state_reset(rstate *st)
{
    rstate keep = *st;
    memset(st, 0, sizeof *st);
    st->s = keep.s, st->cfg = keep.cfg, st->freelist = NIL, st->free_at = keep.free_at;
    st->freed_idx = -2;
    st->b = keep.b, st->bcap = keep.bcap, st->g = keep.g, st->gcap = keep.gcap;
    st->by_addr = keep.by_addr, st->seg_by_addr = keep.seg_by_addr;
    st->seg_by_end = keep.seg_by_end;
    md_map_clear(&st->by_addr);
    md_map_clear(&st->seg_by_addr);
    md_map_clear(&st->seg_by_end);
    md_omap_free(&keep.order);
}

static void state_free(rstate *st)
{
    free(st->b);
    free(st->g);
    md_map_free(&st->by_addr);
    md_map_free(&st->seg_by_addr);
    md_map_free(&st->seg_by_end);
    md_omap_free(&st->order);
}

/* A copy's fields that are src's alone: its free_at, and its block order
 * (made again where a copy needs it). */
static void unshare(rstate *dst)
{
    dst->free_at = NULL;
    memset(&dst->order, 0, sizeof dst->order);
    dst->has_order = 0;
}

/* dst (uninitialised) = a copy of src (see unshare). */
static int state_copy(rstate *dst, const rstate *src)
{
    *dst = *src;
    unshare(dst);
    dst->bcap = src->nb ? src->nb : 1;
    dst->gcap = src->ng ? src->ng : 1;
    dst->b = md_malloc_filled(dst->bcap * sizeof *dst->b);
    dst->g = md_malloc_filled(dst->gcap * sizeof *dst->g);
    int mb = md_map_copy(&dst->by_addr, &src->by_addr);
    int mg = md_map_copy(&dst->seg_by_addr, &src->seg_by_addr);
    int me = md_map_copy(&dst->seg_by_end, &src->seg_by_end);
    if (!dst->b || !dst->g || mb || mg || me) {
        free(dst->b);
        free(dst->g);
        if (!mb)
            md_map_free(&dst->by_addr);
        if (!mg)
            md_map_free(&dst->seg_by_addr);
        if (!me)
            md_map_free(&dst->seg_by_end);
        memset(dst, 0, sizeof *dst);
        return -1;
    }
    memcpy(dst->b, src->b, src->nb * sizeof *src->b);
    memcpy(dst->g, src->g, src->ng * sizeof *src->g);
    return 0;
}

/* dst (holding arrays of its own) = a copy of src, in dst's arrays where
 * they are big enough; else as state_copy. -1 on allocation failure (dst
 * then freed). */
static int state_copy_into(rstate *dst, const rstate *src)
{
    rstate keep = *dst;
    if (keep.bcap < src->nb || keep.gcap < src->ng || keep.by_addr.cap < src->by_addr.cap ||
        keep.seg_by_addr.cap < src->seg_by_addr.cap || keep.seg_by_end.cap < src->seg_by_end.cap) {
        state_free(dst);
        return state_copy(dst, src);
    }
    md_omap_free(&keep.order);
    *dst = *src;
    unshare(dst);
    dst->b = keep.b, dst->bcap = keep.bcap, dst->g = keep.g, dst->gcap = keep.gcap;
    dst->by_addr = keep.by_addr, dst->seg_by_addr = keep.seg_by_addr;
    dst->seg_by_end = keep.seg_by_end;
    memcpy(dst->b, src->b, src->nb * sizeof *src->b);
    memcpy(dst->g, src->g, src->ng * sizeof *src->g);
    md_map_assign(&dst->by_addr, &src->by_addr);
    md_map_assign(&dst->seg_by_addr, &src->seg_by_addr);
    md_map_assign(&dst->seg_by_end, &src->seg_by_end);
    return 0;
}

/* The spare state's arrays, taken for a probe (0), or none there (-1). */
static int take_spare(const md_replay *r, rstate *st)
{
    rstate *sp = r->spare ? atomic_exchange(&r->spare->st, NULL) : NULL;
    if (!sp)
        return -1;
    *st = *sp;
    free(sp);
    return 0;
}

/* A probe's state, kept as the spare if there is none, else freed; also
 * freed where it holds more blocks than the trace has events (a snapshot
 * whose trace explains little of its state): a probe then lays that state
 * again from the final one, and holding it raised the peak (a 16 MB
 * snapshot of 251k blocks and no trace: 73 -> 64 MB without it). */
static void give_spare(const md_replay *r, rstate *st)
{
    rstate *sp = r->spare && st->nb <= r->n ? malloc(sizeof *sp) : NULL, *none = NULL;
    if (sp) {
        *sp = *st;
        if (atomic_compare_exchange_strong(&r->spare->st, &none, sp))
            return;
        free(sp);
    }
    state_free(st);
}

static void drop_oldest_check(md_replay *r)
{
    state_free(&r->checks[0].st);
    memmove(&r->checks[0], &r->checks[1], (size_t)(r->nchecks - 1) * sizeof r->checks[0]);
    r->nchecks--;
}

static void drop_checks(md_replay *r)
{
    for (int c = 0; c < r->nchecks; c++)
        state_free(&r->checks[c].st);
    r->nchecks = 0;
}

/* ---- events ------------------------------------------------------------------ */

static void ev_alloc(rstate *st, const md_event *e, long idx)
{
    uint64_t rounded = md_round_size(st->cfg, e->size);
    uint64_t bi64;
    if (!md_map_get(&st->by_addr, e->addr, &bi64)) {
        /* No block starts here: the state before recording is not fully
         * known. Count the request as a block of its own. */
        st->anomalies++;
        uint32_t nb = add_free_block(st, NIL, e->addr, rounded, NIL, NIL);
        if (nb == NIL)
            return;
        bi64 = nb;
    } else if (st->b[bi64].state != B_FREE) {
        st->anomalies++; /* already live: a duplicate alloc */
        return;
    } else if (st->b[bi64].size < rounded) {
        st->anomalies++; /* smaller than torch would need: take it whole */
    }
    uint32_t i = (uint32_t)bi64;
    int small = rounded <= KSMALL_SIZE;
    if (st->b[i].seg != NIL && st->b[i].size >= rounded && should_split(st, &st->b[i], rounded, small)) {
        rblock *b = &st->b[i];
        uint32_t r = add_free_block(st, b->seg, b->addr + rounded, b->size - rounded, i,
                                    b->next);
        if (r != NIL)
            st->b[i].size = rounded;
    }
    rblock *b = &st->b[i];
    b->state = B_ALLOC;
    b->requested = e->size;
    b->stack = e->stack;
    b->alloc_index = (int32_t)idx;
    st->allocated += b->size;
    st->requested += b->requested;
}

static void note_free(rstate *st, const rblock *b, long idx)
{
    if (st->free_at && b->alloc_index >= 0)
        st->free_at[b->alloc_index] = (int32_t)idx;
}

static void ev_free_requested(rstate *st, const md_event *e, long idx)
{
    uint64_t bi;
    if (!md_map_get(&st->by_addr, e->addr, &bi) || st->b[bi].state != B_ALLOC) {
        st->anomalies++;
        return;
    }
    st->freed_idx = idx, st->freed_block = (uint32_t)bi;
    rblock *b = &st->b[bi];
    b->state = B_PENDING;
    note_free(st, b, idx);
    st->allocated -= b->size;
    st->requested -= b->requested;
}

static void ev_free_completed(rstate *st, const md_event *e, long idx)
{
    uint64_t bi;
    /* nothing changed the map since the free_requested just before */
    int again = idx >= 0 && st->freed_idx == idx - 1 && st->b[st->freed_block].addr == e->addr;
    if (again)
        bi = st->freed_block;
    if ((!again && !md_map_get(&st->by_addr, e->addr, &bi)) || st->b[bi].state == B_FREE) {
        st->anomalies++;
        return;
    }
    rblock *b = &st->b[bi];
    if (b->state == B_ALLOC) { /* free_requested was not recorded */
        note_free(st, b, idx);
        st->allocated -= b->size;
        st->requested -= b->requested;
    }
    b->state = B_FREE;
    b->requested = 0;
    if (b->seg == NIL) { /* a block we could not place in a segment */
        drop_block(st, (uint32_t)bi);
        return;
    }
    merge_free(st, (uint32_t)bi);
}

/* Forgets that segment gi ends at `end` (another may end there too). */
static void drop_end(rstate *st, uint32_t gi, uint64_t end)
{
    uint64_t at;
    if (md_map_get(&st->seg_by_end, end, &at) && at == gi)
        md_map_del(&st->seg_by_end, end);
}

/* An expandable segment's end moved from `from` to its present end. */
static int move_end(rstate *st, uint32_t gi, uint64_t from)
{
    drop_end(st, gi, from);
    return md_map_put(&st->seg_by_end, st->g[gi].addr + st->g[gi].size, gi);
}

static void ev_segment_free(rstate *st, const md_event *e)
{
    uint64_t gi;
    if (!md_map_get(&st->seg_by_addr, e->addr, &gi) || !st->g[gi].alive) {
        st->anomalies++;
        return;
    }
    rseg *g = &st->g[gi];
    for (uint32_t i = g->first; i != NIL;) {
        uint32_t n = st->b[i].next;
        if (st->b[i].state != B_FREE)
            st->anomalies++;
        drop_block(st, i);
        i = n;
    }
    st->reserved -= g->size;
    g->alive = 0;
    md_map_del(&st->seg_by_addr, e->addr);
    drop_end(st, (uint32_t)gi, g->addr + g->size);
}

/* Segment gi's highest block: its hint where that still holds (the one
 * block of the segment with no next), else found by a walk and kept. */
static uint32_t last_block(rstate *st, uint32_t gi)
{
    uint32_t last = st->g[gi].last;
    if (last != NIL && st->b[last].seg == gi && st->b[last].next == NIL)
        return last;
    last = st->g[gi].first;
    while (last != NIL && st->b[last].next != NIL)
        last = st->b[last].next;
    return st->g[gi].last = last;
}

/* The ordered index of the blocks in segments (see rstate), made now. */
static int make_order(rstate *st)
{
    st->has_order = 1;
    for (size_t i = 0; i < st->nb; i++)
        if (st->b[i].seg != NIL && md_omap_put(&st->order, st->b[i].addr, (uint32_t)i))
            return -1;
    return 0;
}

/* The block of a segment starting nearest at or below addr (the ordered
 * index made if it is not yet), NIL if none. */
static uint32_t block_below(rstate *st, uint64_t addr)
{
    uint64_t start;
    uint32_t i;
    if ((!st->has_order && make_order(st)) || !md_omap_floor(&st->order, addr, &start, &i))
        return NIL;
    return i;
}

/* The block of a segment holding addr, NIL if none: the one starting
 * there, else the nearest start below. */
static uint32_t block_holding(rstate *st, uint64_t addr)
{
    uint64_t bi;
    if (md_map_get(&st->by_addr, addr, &bi) && st->b[bi].seg != NIL)
        return (uint32_t)bi;
    uint32_t i = block_below(st, addr);
    return i != NIL && addr - st->b[i].addr < st->b[i].size ? i : NIL;
}

/* Moves segment `from`'s blocks to the end of segment `to`'s list (from
 * lies above to) or to its front (below). */
static void move_blocks(rstate *st, uint32_t from, uint32_t to)
{
    rseg *f = &st->g[from], *t = &st->g[to];
    if (f->first == NIL)
        return;
    uint32_t flast = last_block(st, from), tlast = last_block(st, to);
    for (uint32_t k = f->first; k != NIL; k = st->b[k].next)
        st->b[k].seg = to;
    t->nblocks += f->nblocks;
    if (t->first == NIL) {
        t->first = f->first, t->last = flast;
    } else if (f->addr > t->addr) {
        st->b[tlast].next = f->first, st->b[f->first].prev = tlast, t->last = flast;
    } else {
        st->b[flast].next = t->first, st->b[t->first].prev = flast, t->first = f->first;
    }
    f->first = f->last = NIL;
    f->nblocks = 0;
}

/* Segment gi's end has come to the start of another expandable segment:
 * pages mapped between two runs a ring's window began with (each run a
 * segment, as torch reports them) make them one reservation again, whose
 * free blocks merge across. The one with fewer blocks moves into the
 * other (each block moves O(log n) times however the joins come); the
 * joined segment is the lower one's start, the upper one's end. */
static void join_next(rstate *st, uint32_t gi)
{
    uint64_t at, end = st->g[gi].addr + st->g[gi].size;
    if (!md_map_get(&st->seg_by_addr, end, &at) || at == gi || !st->g[at].alive ||
        !st->g[at].expandable)
        return;
    uint32_t up = (uint32_t)at, keep = st->g[gi].nblocks >= st->g[up].nblocks ? gi : up;
    uint32_t gone = keep == gi ? up : gi;
    uint64_t lo = st->g[gi].addr, hi = st->g[up].addr + st->g[up].size;
    uint32_t first_up = st->g[up].first; /* to merge with the lower part's last */
    move_blocks(st, gone, keep);
    md_map_del(&st->seg_by_addr, end); /* the upper one's start: no segment's now */
    drop_end(st, gi, end);
    st->g[gone].alive = 0;
    st->g[keep].addr = lo;
    st->g[keep].size = hi - lo;
    if (md_map_put(&st->seg_by_addr, lo, keep) || md_map_put(&st->seg_by_end, hi, keep))
        return;
    if (first_up != NIL && st->b[first_up].state == B_FREE)
        merge_free(st, first_up);
}

/* Where a map inside an expandable segment goes: after the block that
 * ends at addr (torch maps an unmapped block, which begins where a mapped
 * one ends), or first in the segment that starts at addr where its own
 * first pages were unmapped. 1 with *gi and *prev (NIL: first), else 0.
 * Only an unmap makes such holes: until one, no index is made for this. */
static int hole_at(rstate *st, uint64_t addr, uint32_t *gi, uint32_t *prev)
{
    uint64_t at;
    uint32_t i;
    if (md_map_get(&st->seg_by_addr, addr, &at) && st->g[at].alive && st->g[at].expandable &&
        (st->g[at].first == NIL || st->b[st->g[at].first].addr > addr)) {
        *gi = (uint32_t)at, *prev = NIL;
        return 1;
    }
    if (!addr || !st->unmapped || (i = block_below(st, addr - 1)) == NIL ||
        st->b[i].addr + st->b[i].size != addr)
        return 0;
    const rseg *g = &st->g[st->b[i].seg];
    if (!g->alive || !g->expandable || addr >= g->addr + g->size)
        return 0;
    *gi = st->b[i].seg, *prev = i;
    return 1;
}

/* Expandable segments grow by mapping pages at their end, and map again
 * pages unmapped before (empty_cache, or an allocation that failed); a map
 * anywhere else starts a segment. */
static void ev_segment_map(rstate *st, const md_event *e)
{
    uint64_t at, end = e->addr + e->size;
    uint32_t gi, prev;
    if (md_map_get(&st->seg_by_end, e->addr, &at) && st->g[at].alive) {
        gi = (uint32_t)at, prev = last_block(st, gi);
    } else if (!hole_at(st, e->addr, &gi, &prev)) {
        gi = add_segment(st, e->addr, e->size, 1);
        if (gi != NIL)
            join_next(st, gi);
        return;
    }
    rseg *g = &st->g[gi];
    uint32_t next = prev != NIL ? st->b[prev].next : g->first;
    if (end < e->addr || (next != NIL && end > st->b[next].addr)) {
        st->anomalies++; /* over pages our state has mapped */
        return;
    }
    st->reserved += e->size;
    if (end > g->addr + g->size) {
        uint64_t from = g->addr + g->size;
        g->size = end - g->addr;
        if (move_end(st, gi, from))
            return;
    }
    uint32_t nb = add_free_block(st, gi, e->addr, e->size, prev, next);
    if (nb != NIL)
        merge_free(st, nb);
    join_next(st, gi);
}

/* Pages of an expandable segment given back: torch unmaps whole pages of
 * one free block, so the block loses its middle, head or tail. */
static void ev_segment_unmap(rstate *st, const md_event *e)
{
    uint32_t i = block_holding(st, e->addr);
    rblock *b = i != NIL ? &st->b[i] : NULL;
    if (!b || b->state != B_FREE || b->seg == NIL || !st->g[b->seg].alive ||
        e->addr + e->size < e->addr ||
        e->addr + e->size > b->addr + b->size) {
        st->anomalies++;
        return;
    }
    uint32_t gi = b->seg;
    rseg *g = &st->g[gi];
    uint64_t tail = b->addr + b->size - (e->addr + e->size);
    uint32_t next = b->next;
    if (tail)
        next = add_free_block(st, gi, e->addr + e->size, tail, i, b->next);
    b = &st->b[i];
    b->size = e->addr - b->addr;
    if (b->size == 0) { /* the whole free block goes */
        uint32_t p = b->prev;
        if (p != NIL)
            st->b[p].next = next;
        else
            g->first = next;
        if (next != NIL)
            st->b[next].prev = p;
        else
            g->last = p;
        drop_block(st, i);
    }
    st->reserved -= e->size;
    st->unmapped = 1;
    if (e->addr + e->size == g->addr + g->size) {
        uint64_t end = g->addr + g->size;
        g->size -= e->size;
        if (g->expandable)
            move_end(st, gi, end);
    }
}

static void apply(rstate *st, const md_event *e, long idx)
{
    switch (e->action) {
    case MD_ACT_ALLOC: ev_alloc(st, e, idx); break;
    case MD_ACT_FREE_REQUESTED: ev_free_requested(st, e, idx); break;
    case MD_ACT_FREE_COMPLETED: ev_free_completed(st, e, idx); break;
    case MD_ACT_SEGMENT_ALLOC:
        if (md_map_get(&st->seg_by_addr, e->addr, NULL))
            st->anomalies++;
        else
            add_segment(st, e->addr, e->size, st->cfg->expandable_segments);
        break;
    case MD_ACT_SEGMENT_FREE: ev_segment_free(st, e); break;
    case MD_ACT_SEGMENT_MAP: ev_segment_map(st, e); break;
    case MD_ACT_SEGMENT_UNMAP: ev_segment_unmap(st, e); break;
    default: break; /* snapshot, oom, annotate: no state change */
    }
}

/* ---- initial state ------------------------------------------------------------ */

static int cmp_live_addr(const void *a, const void *b)
{
    const md_live *x = a, *y = b;
    return x->addr < y->addr ? -1 : x->addr > y->addr;
}

static int sorted_live(const md_live *l, size_t n)
{
    for (size_t i = 1; i < n; i++)
        if (cmp_live_addr(&l[i - 1], &l[i]) > 0)
            return 0;
    return 1;
}

/* A set of disjoint address ranges: start -> index of its end in end[]
 * (slots are not reused: a set lives for one reconstruction). */
typedef struct ranges {
    md_omap by_start;
    uint64_t *end;
    size_t n, cap;
} ranges;

static int ranges_put(ranges *r, uint64_t a, uint64_t b)
{
    if (md_grow((void **)&r->end, &r->cap, r->n + 1, sizeof *r->end) || r->n >= UINT32_MAX)
        return -1;
    r->end[r->n] = b;
    return md_omap_put(&r->by_start, a, (uint32_t)r->n++);
}

/* r = r with [a, b), joined to the ranges it overlaps or touches. */
static int ranges_add(ranges *r, uint64_t a, uint64_t b)
{
    uint64_t s;
    uint32_t v;
    if (md_omap_floor(&r->by_start, a, &s, &v) && r->end[v] >= a) {
        a = s;
        b = r->end[v] > b ? r->end[v] : b;
        md_omap_del(&r->by_start, s);
    }
    while (md_omap_floor(&r->by_start, b, &s, &v) && s >= a) {
        b = r->end[v] > b ? r->end[v] : b;
        md_omap_del(&r->by_start, s);
    }
    return ranges_put(r, a, b);
}

/* r = r without [a, b). */
static int ranges_cut(ranges *r, uint64_t a, uint64_t b)
{
    uint64_t s;
    uint32_t v;
    while (b > a && md_omap_floor(&r->by_start, b - 1, &s, &v) && r->end[v] > a) {
        uint64_t e = r->end[v];
        md_omap_del(&r->by_start, s);
        if (e > b && ranges_put(r, b, e))
            return -1;
        if (s < a)
            return ranges_put(r, s, a);
    }
    return 0;
}

/* A segment that existed before the first event, appended to v[*n]. */
static int push_preseg(rseg **v, size_t *n, size_t *cap, uint64_t addr, uint64_t size,
                       int expandable)
{
    rseg g = {.addr = addr, .size = size, .first = NIL, .last = NIL,
              .expandable = (uint8_t)expandable, .alive = 1};
    if (md_grow((void **)v, cap, *n + 1, sizeof g))
        return -1;
    (*v)[(*n)++] = g;
    return 0;
}

static int add_preseg(md_replay *r, uint64_t addr, uint64_t size, int expandable)
{
    return push_preseg(&r->preseg, &r->npreseg, &r->presegcap, addr, size, expandable);
}

/* The pages of expandable segments mapped before the first event: those
 * mapped at the end, less what the trace mapped, plus what it unmapped,
 * undone from the last event back. Each run of pages is a segment, as
 * torch's snapshot reports them. maps: whether the trace maps or unmaps
 * any (the walk back cost big_gamma 1.6 M instructions to find none). */
static int expandable_before(md_replay *r, int maps)
{
    const md_snapshot *s = r->s;
    ranges m = {0};
    int rc = 0;
    for (size_t i = 0; i < s->nsegs && !rc; i++) {
        const md_segment *g = &s->segs[i];
        if (g->device == r->device && g->is_expandable && g->address + g->total_size > g->address)
            rc = ranges_add(&m, g->address, g->address + g->total_size);
    }
    for (size_t i = maps ? r->n : 0; i-- > 0 && !rc;) {
        const md_event *e = &r->ev[i];
        if (e->addr + e->size < e->addr)
            continue;
        if (e->action == MD_ACT_SEGMENT_MAP)
            rc = ranges_cut(&m, e->addr, e->addr + e->size);
        else if (e->action == MD_ACT_SEGMENT_UNMAP)
            rc = ranges_add(&m, e->addr, e->addr + e->size);
    }
    for (size_t i = 0; i < m.by_start.nrun && !rc; i++) {
        const md_orun *run = m.by_start.run[i];
        for (uint32_t j = 0; j < run->n && !rc; j++)
            rc = add_preseg(r, run->key[j], m.end[run->val[j]] - run->key[j], 1);
    }
    md_omap_free(&m.by_start);
    free(m.end);
    return rc;
}

/* The actions reconstruct looks at, as bits of 1 << action. */
#define ACT_BIT(a) (1u << (a))
#define ACTS_BLOCK (ACT_BIT(MD_ACT_ALLOC) | ACTS_FREE)
#define ACTS_FREE (ACT_BIT(MD_ACT_FREE_REQUESTED) | ACT_BIT(MD_ACT_FREE_COMPLETED))
#define ACTS_SEG (ACT_BIT(MD_ACT_SEGMENT_ALLOC) | ACT_BIT(MD_ACT_SEGMENT_FREE))
#define ACTS_MAP (ACT_BIT(MD_ACT_SEGMENT_MAP) | ACT_BIT(MD_ACT_SEGMENT_UNMAP))
_Static_assert(MD_ACT_UNKNOWN < 32, "an action is a bit of an unsigned");

/* reconstruct's walk forward through a trace (scan_events), made at once
 * or a batch at a time as the trace is read (md_pass): a block or segment
 * whose first event frees it existed before the first event. Its blocks'
 * sizes are their requests until taken (take_scan rounds them by the
 * file's allocator settings, which come after its trace). */
typedef struct scan {
    md_set seen, segseen; /* the addresses met */
    uint64_t last;        /* a free_completed mostly follows its free_requested */
    unsigned acts;        /* the actions met, as bits */
    size_t done;          /* events walked */
    int failed;           /* out of memory: of no use */
    md_live *pre;
    size_t npre, precap;
    rseg *preseg;
    size_t npreseg, presegcap;
} scan;

static int scan_init(scan *sc, size_t hint)
{
    memset(sc, 0, sizeof *sc);
    /* the set grows with the addresses seen, not the events */
    if (md_set_init(&sc->seen, hint) || md_set_init(&sc->segseen, 64)) {
        sc->failed = 1;
        return -1;
    }
    return 0;
}

static void scan_free(scan *sc)
{
    md_set_free(&sc->seen);
    md_set_free(&sc->segseen);
    free(sc->pre);
    free(sc->preseg);
    memset(sc, 0, sizeof *sc);
}

/* A block freed before it was allocated in the trace. The free's stack
 * says where it was freed, not allocated: it keeps no stack rather than a
 * misleading one. */
static int scan_pre_freed(scan *sc, const md_event *e)
{
    md_live l = {e->addr, e->size, e->size, -1, 0, MD_CAT_OTHER};
    if (md_grow((void **)&sc->pre, &sc->precap, sc->npre + 1, sizeof l))
        return -1;
    sc->pre[sc->npre++] = l;
    return 0;
}

/* Walks events [from, to) (from: sc->done). -1 out of memory. */
static int scan_events(scan *sc, const md_event *ev, size_t from, size_t to)
{
    uint64_t last = sc->last;
    unsigned met = sc->acts;
    for (size_t i = from; i < to && !sc->failed; i++) {
        const md_event *e = &ev[i];
        unsigned bit = ACT_BIT(e->action < 32 ? e->action : MD_ACT_UNKNOWN);
        met |= bit;
        int added = 0;
        if (bit & ACTS_BLOCK) {
            if ((i == 0 || e->addr != last) && (added = md_set_add(&sc->seen, e->addr)) != 0 &&
                (added < 0 || ((bit & ACTS_FREE) && scan_pre_freed(sc, e))))
                sc->failed = 1;
            last = e->addr;
        } else if ((bit & ACTS_SEG) && (added = md_set_add(&sc->segseen, e->addr)) != 0 &&
                   (added < 0 || (e->action == MD_ACT_SEGMENT_FREE &&
                                  push_preseg(&sc->preseg, &sc->npreseg, &sc->presegcap, e->addr,
                                              e->size, 0)))) {
            sc->failed = 1;
        }
    }
    sc->last = last, sc->acts = met, sc->done = to;
    return sc->failed ? -1 : 0;
}

/* r's blocks and segments from before the first event, as the walk
 * found them: moved from sc, the blocks' sizes rounded. */
static void take_scan(md_replay *r, scan *sc)
{
    r->pre = sc->pre, r->npre = sc->npre, r->precap = sc->precap;
    r->preseg = sc->preseg, r->npreseg = sc->npreseg, r->presegcap = sc->presegcap;
    sc->pre = NULL, sc->preseg = NULL;
    sc->npre = sc->precap = sc->npreseg = sc->presegcap = 0;
    for (size_t i = 0; i < r->npre; i++)
        r->pre[i].block_size = md_round_size(&r->s->settings, r->pre[i].requested);
}

/* Finds what existed before the first recorded event (see file comment):
 * from `given`, a walk of the whole trace made as it was read, or from a
 * walk made now (given NULL). */
static int reconstruct(md_replay *r, scan *given)
{
    const md_snapshot *s = r->s;
    scan own, *sc = given ? given : &own;
    if (!given && (scan_init(&own, blocks_hint(s)) || scan_events(&own, r->ev, 0, r->n))) {
        scan_free(&own);
        return -1;
    }
    int rc = 0;
    take_scan(r, sc);
    for (size_t i = 0; i < s->nsegs && !rc; i++) {
        const md_segment *g = &s->segs[i];
        if (g->device != r->device)
            continue;
        if (!g->is_expandable && !md_set_has(&sc->segseen, g->address))
            rc = add_preseg(r, g->address, g->total_size, 0);
        for (size_t k = 0; k < g->nblocks && !rc; k++) {
            const md_block *b = &s->blocks[g->first_block + k];
            if (b->state == MD_BLOCK_INACTIVE || md_set_has(&sc->seen, b->address))
                continue;
            md_live l = {b->address, b->size, b->requested_size, -1, b->stack, MD_CAT_OTHER};
            rc = md_grow((void **)&r->pre, &r->precap, r->npre + 1, sizeof l);
            if (!rc)
                r->pre[r->npre++] = l;
        }
    }
    int maps = (sc->acts & ACTS_MAP) != 0;
    if (!given)
        scan_free(&own);
    if (!rc)
        rc = expandable_before(r, maps);
    if (!rc && !sorted_live(r->pre, r->npre)) /* in segment order, mostly by address already */
        qsort(r->pre, r->npre, sizeof *r->pre, cmp_live_addr);
    return rc;
}

/* A free block of <= 1 MiB cannot exist in a large-pool segment (torch
 * splits off only remainders > 1 MiB, and merged frees are larger), so
 * such a gap after a reconstructed block is that block's unsplit tail:
 * its true size was larger than the rounded request suggested. */
static void absorb_remainders(rstate *st)
{
    for (size_t gi = 0; gi < st->ng; gi++) {
        const rseg *g = &st->g[gi];
        if (!g->alive || g->expandable || st->cfg->expandable_segments)
            continue;
        for (uint32_t k = g->first; k != NIL; k = st->b[k].next) {
            rblock *b = &st->b[k];
            uint32_t nx = b->next;
            if (b->state != B_ALLOC || b->alloc_index >= 0 || b->size <= KSMALL_SIZE ||
                nx == NIL || st->b[nx].state != B_FREE || st->b[nx].size > KSMALL_SIZE ||
                b->addr + b->size != st->b[nx].addr)
                continue;
            b->size += st->b[nx].size;
            st->allocated += st->b[nx].size;
            b->next = st->b[nx].next;
            if (b->next != NIL)
                st->b[b->next].prev = k;
            else
                st->g[gi].last = k;
            drop_block(st, nx);
        }
    }
}

/* A segment's start and index, for a search by address. */
typedef struct seg_key {
    uint64_t addr;
    uint32_t gi;
} seg_key;

static int cmp_seg_key(const void *a, const void *b)
{
    const seg_key *x = a, *y = b;
    if (x->addr != y->addr)
        return x->addr < y->addr ? -1 : 1;
    return x->gi < y->gi ? -1 : x->gi > y->gi;
}

/* The segments of st (all alive, as seed_state lays them) by address, for
 * a binary search: NULL where two overlap (then the first containing an
 * address, by index, is searched for one by one) or on allocation failure. */
static seg_key *segs_by_addr(const rstate *st)
{
    seg_key *o = malloc((st->ng ? st->ng : 1) * sizeof *o);
    if (!o)
        return NULL;
    int sorted = 1;
    for (size_t i = 0; i < st->ng; i++) {
        o[i] = (seg_key){st->g[i].addr, (uint32_t)i};
        sorted &= !i || cmp_seg_key(&o[i - 1], &o[i]) < 0;
    }
    if (!sorted) /* a snapshot's segments come by address */
        qsort(o, st->ng, sizeof *o, cmp_seg_key);
    for (size_t i = 1; i < st->ng; i++)
        if (o[i - 1].addr + st->g[o[i - 1].gi].size > o[i].addr) {
            free(o);
            return NULL;
        }
    return o;
}

/* The segment holding addr, NIL if none. Addresses asked for in
 * ascending order: *at, the segments (by_addr) starting at or below the
 * last one, only moves forward. */
static uint32_t seg_holding(const rstate *st, const seg_key *by_addr, uint64_t addr, size_t *at)
{
    if (!by_addr) {
        for (size_t gi = 0; gi < st->ng; gi++)
            if (addr >= st->g[gi].addr && addr < st->g[gi].addr + st->g[gi].size)
                return (uint32_t)gi;
        return NIL;
    }
    while (*at < st->ng && by_addr[*at].addr <= addr)
        ++*at;
    size_t lo = *at; /* the last segment starting at or below addr, + 1 */
    if (!lo)
        return NIL;
    const seg_key *k = &by_addr[lo - 1];
    return addr < k->addr + st->g[k->gi].size ? k->gi : NIL;
}

/* Lays the reconstructed segments and live blocks into a fresh state. The
 * live blocks come in address order, so each one's free block is sought
 * from the last one laid in the same segment on, and its segment by a
 * binary search: a snapshot whose trace explains little of its final state
 * (thousands of segments and blocks) took a scan of every segment and of
 * its blocks from the first, per block. */
static int seed_state(const md_replay *r, rstate *st)
{
    /* room for a free block a segment and a block a live one at least,
     * not grown (and rehashed) step by step */
    size_t blocks = st->nb + r->npreseg + r->npre;
    if (md_map_reserve(&st->seg_by_addr, st->seg_by_addr.n + r->npreseg) ||
        md_map_reserve(&st->by_addr, blocks) ||
        md_grow((void **)&st->b, &st->bcap, blocks, sizeof *st->b))
        return -1;
    for (size_t i = 0; i < r->npreseg; i++)
        if (add_segment(st, r->preseg[i].addr, r->preseg[i].size, r->preseg[i].expandable) == NIL)
            return -1;
    seg_key *order = st->ng > 8 ? segs_by_addr(st) : NULL;
    size_t at = 0; /* order's cursor (seg_holding) */
    uint32_t cur_seg = NIL, cur = NIL; /* the last block laid, and its segment */
    for (size_t i = 0; i < r->npre; i++) {
        const md_live *l = &r->pre[i];
        md_event e = {.addr = l->addr, .size = l->requested, .time_us = -1, .stack = l->stack,
                      .action = MD_ACT_ALLOC};
        uint64_t bi;
        /* carve the block out of the free block that contains it */
        uint32_t gi = seg_holding(st, order, l->addr, &at);
        if (gi != NIL) {
            uint32_t k = gi == cur_seg && cur != NIL && st->b[cur].addr < l->addr ? cur
                                                                                : st->g[gi].first;
            for (; k != NIL; k = st->b[k].next) {
                rblock *b = &st->b[k];
                if (b->state != B_FREE || l->addr <= b->addr || l->addr >= b->addr + b->size)
                    continue;
                add_free_block(st, gi, l->addr, b->addr + b->size - l->addr, k, b->next);
                st->b[k].size = l->addr - st->b[k].addr;
                break;
            }
        }
        if (md_map_get(&st->by_addr, l->addr, &bi) && st->b[bi].state == B_FREE &&
            st->b[bi].size > l->block_size && st->b[bi].seg != NIL) {
            rblock *b = &st->b[bi];
            add_free_block(st, b->seg, b->addr + l->block_size, b->size - l->block_size,
                           (uint32_t)bi, b->next);
            st->b[bi].size = l->block_size;
        }
        size_t before = st->anomalies;
        ev_alloc(st, &e, -1);
        st->anomalies = before; /* reconstruction gaps are expected, not anomalies */
        cur_seg = NIL;
        if (md_map_get(&st->by_addr, l->addr, &bi)) {
            st->b[bi].alloc_index = -1;
            if (st->b[bi].seg == gi && gi != NIL)
                cur_seg = gi, cur = (uint32_t)bi;
        }
    }
    free(order);
    absorb_remainders(st);
    return 0;
}

/* ---- public -------------------------------------------------------------------- */

/* Is final segment g a run of mapped pages inside one of st's expandable
 * segments? torch reports each such run as a segment of its own once pages
 * between them were unmapped. */
static int mapped_run_at(const rstate *st, const md_segment *g)
{
    uint64_t bi;
    return g->is_expandable && md_map_get(&st->by_addr, g->address, &bi) &&
           st->b[bi].seg != NIL && st->g[st->b[bi].seg].expandable;
}

/* Does the end of a replay from an empty start agree with the snapshot's
 * final segment state? Then nothing was allocated before recording. */
static int matches_final_state(const md_replay *r, const rstate *st)
{
    const md_snapshot *s = r->s;
    for (size_t i = 0; i < s->nsegs; i++) {
        const md_segment *g = &s->segs[i];
        if (g->device != r->device)
            continue;
        if (!md_map_get(&st->seg_by_addr, g->address, NULL) && !mapped_run_at(st, g))
            return 0;
        for (size_t k = 0; k < g->nblocks; k++) {
            const md_block *b = &s->blocks[g->first_block + k];
            uint64_t bi;
            if (b->state != MD_BLOCK_INACTIVE &&
                (!md_map_get(&st->by_addr, b->address, &bi) || st->b[bi].state == B_FREE))
                return 0;
        }
    }
    return 1;
}

/* Notes that reserved stands at v after event i. */
static int rsv_change(md_replay *r, size_t i, uint64_t v)
{
    if (md_grow((void **)&r->rsv, &r->rsvcap, r->nrsv + 1, sizeof *r->rsv)) {
        r->rsv_failed = 1;
        return -1;
    }
    r->rsv[r->nrsv++] = (struct rsv_step){i, v};
    return 0;
}

/* Reserved after event i (i < n): the last change at or before it. */
static uint64_t reserved_at(const md_replay *r, size_t i)
{
    size_t lo = 0, hi = r->nrsv; /* the first change after i: lo */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (r->rsv[mid].at <= i)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo ? r->rsv[lo - 1].reserved : r->initial.reserved;
}

/* A pass's start: the timeline's first point, no peak yet, no checks. */
static void pass_start(md_replay *r, const rstate *st)
{
    r->initial = (md_point){st->allocated, st->reserved, st->requested};
    r->nrsv = 0;
    r->peak_alloc = st->allocated;
    r->peak_reserved = st->reserved;
    r->peak_index = -1;
    drop_checks(r); /* an earlier pass's are not this one's */
}

/* Events [from, to) of a pass, recording the timeline and keeping NCHECKS
 * copies of the state for probes, where check_place puts them (r->check_at: the
 * next). first: a pass from an empty state, which stops at the first
 * anomaly (a free of nothing, an alloc inside a live block): the trace
 * then began after allocations that must be reconstructed, and another
 * pass follows anyway. The event it stopped at, else to. */
static size_t pass_events(md_replay *r, rstate *st, const md_event *ev, size_t from, size_t to,
                       int first)
{
    size_t check_at = r->check_at; /* a compare an event, not a division */
    uint64_t reserved = r->nrsv ? r->rsv[r->nrsv - 1].reserved : r->initial.reserved;
    for (size_t i = from; i < to; i++) {
        apply(st, &ev[i], (long)i);
        if (first && st->anomalies) {
            r->anomalies = st->anomalies;
            return i;
        }
        r->pts[i] = (md_tpoint){st->allocated, st->requested};
        if (st->reserved != reserved) {
            if (rsv_change(r, i, st->reserved))
                return i; /* rsv_failed */
            reserved = st->reserved;
        }
        if (i == check_at) {
            check_at = r->roll ? 2 * check_at + 1 : check_place(r->check_n, ++r->check_k);
            if (r->roll && r->nchecks == NCHECKS)
                drop_oldest_check(r);
            if (r->nchecks < NCHECKS &&
                !state_copy(&r->checks[r->nchecks].st, st)) /* none on failure: only slower */
                r->checks[r->nchecks++].index = (long)i;
        }
        if (st->allocated > r->peak_alloc) {
            r->peak_alloc = st->allocated;
            r->peak_index = (long)i;
        }
        if (st->reserved > r->peak_reserved)
            r->peak_reserved = st->reserved;
    }
    r->check_at = check_at;
    r->anomalies = st->anomalies;
    return to;
}


/* One pass over the whole trace from st (pass_events). */
static void run_pass(md_replay *r, rstate *st, int first)
{
    st->free_at = r->free_at;
    memset(r->free_at, 0xff, (r->n ? r->n : 1) * sizeof *r->free_at); /* all -1 */
    pass_start(r, st);
    r->roll = 0;
    r->check_n = r->n;
    r->check_k = 0;
    r->check_at = check_place(r->check_n, 0);
    pass_events(r, st, r->ev, 0, r->n, first);
}

/* ---- a first pass fed as the trace is read ----------------------------------- */

/* The snapshot's allocator settings come after its trace, so a pass made
 * while the trace is read assumes torch's defaults; it is used only where
 * the file's settings turn out to give the same rules. */
struct md_pass {
    md_replay *r; /* the timeline so far (r->s, ev and n unset) */
    rstate st;
    md_settings cfg;     /* the rules assumed: torch's defaults */
    size_t done;         /* events fed */
    size_t stop;         /* the anomaly it stopped at, SIZE_MAX: none */
    int failed;          /* out of memory */
    /* Once the pass stops at an anomaly (a ring buffer's trace), or from
     * the start where only that is wanted (md_pass_new_scan), the walk
     * reconstruct needs is made instead, so that no walk is left for
     * after the read. */
    int scan_only;
    int scanning;
    scan sc;
};

md_pass *md_pass_new(void)
{
    md_pass *p = calloc(1, sizeof *p);
    if (!p || !(p->r = calloc(1, sizeof *p->r))) {
        free(p);
        return NULL;
    }
    p->cfg.max_split_size = -1; /* as a snapshot without settings reads */
    if (state_init(&p->st, NULL, &p->cfg)) {
        md_pass_free(p);
        return NULL;
    }
    pass_start(p->r, &p->st);
    p->r->check_at = SIZE_MAX;
    p->stop = SIZE_MAX;
    return p;
}

md_pass *md_pass_new_scan(void)
{
    md_pass *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->scan_only = 1;
    p->stop = SIZE_MAX;
    return p;
}

/* The walk, begun where the pass stopped (from the first event: it walks
 * every one) or at the start, and carried on with each feed. */
static void pass_scan(md_pass *p, const md_event *ev, size_t to)
{
    if (!p->scanning) {
        p->scanning = 1;
        if (scan_init(&p->sc, p->scan_only ? 1024 : p->st.bcap))
            return;
    }
    if (!p->sc.failed)
        scan_events(&p->sc, ev, p->sc.done, to);
}

/* Same rules: every setting the replay reads. */
static int same_rules(const md_settings *a, const md_settings *b)
{
    return a->expandable_segments == b->expandable_segments &&
           a->max_split_size == b->max_split_size &&
           !memcmp(a->roundup_divisions, b->roundup_divisions, sizeof a->roundup_divisions);
}

/* Where a pass fed events [from, to) of a trace of about `expect` takes its
 * checks: spaced by the expected length, or where it is unknown (a
 * compressed file) at doubling indices. Where they fall only decides how
 * far a probe replays. */
static void space_checks(md_replay *r, size_t from, size_t to, size_t expect)
{
    if (r->roll)
        return;
    if (!expect) {
        r->roll = 1;
        r->check_at = CHECK_MIN_EVENTS / (NCHECKS + 1) - 1;
        if (r->check_at < from)
            r->check_at = from;
        return;
    }
    size_t n = expect > to ? expect : to;
    if (n != r->check_n && r->nchecks < NCHECKS) {
        r->check_n = n;
        r->check_k = r->nchecks;
        size_t at = check_place(n, r->check_k);
        r->check_at = at == SIZE_MAX || at > from ? at : from;
    }
}

int md_pass_feed(md_pass *p, const md_event *ev, size_t from, size_t to, size_t expect)
{
    md_replay *r = p->r;
    if (p->failed || from != p->done)
        return -1;
    if (to <= from)
        return 0;
    if (p->scan_only || p->stop != SIZE_MAX) {
        p->done = to;
        pass_scan(p, ev, to);
        return 0;
    }
    /* room for the expected count at once, as a whole trace's pass gets:
     * grown a batch at a time, the arrays took thrice the page faults; but
     * not before the second batch, since a ring buffer's pass stops in the
     * first, and arrays mapped for it (big_gamma: 1.5 MB) cost the reader
     * beside it the address space's lock and TLB flushes (bench/contend.c) */
    size_t want = to > r->ptscap && expect > to && from > 0 ? expect + expect / 8 : to;
    if (to >= INT32_MAX || md_big_grow((void **)&r->pts, &r->ptscap, want, sizeof *r->pts) ||
        md_big_grow((void **)&r->free_at, &r->freecap, want, sizeof *r->free_at)) {
        p->failed = 1;
        return -1;
    }
    p->st.free_at = r->free_at;
    memset(r->free_at + from, 0xff, (to - from) * sizeof *r->free_at); /* all -1 */
    space_checks(r, from, to, expect);
    p->done = to;
    size_t at = pass_events(r, &p->st, ev, from, to, 1);
    if (r->rsv_failed) {
        p->failed = 1;
        return -1;
    }
    if (at < to) {
        p->stop = at;
        pass_scan(p, ev, to);
        return 1;
    }
    return 0;
}

void md_pass_free(md_pass *p)
{
    if (!p)
        return;
    state_free(&p->st);
    md_replay_free(p->r);
    scan_free(&p->sc);
    free(p);
}

int md_pass_fits(const md_pass *p, const md_snapshot *s, int device)
{
    size_t n;
    /* fed from the start of the events array, wherever it is now */
    const md_event *ev = md_snapshot_events(s, device, &n);
    return !p->failed && !p->scan_only && ev == s->events &&
           (p->stop != SIZE_MAX ? p->stop < n : p->done == n) && same_rules(&p->cfg, &s->settings);
}

/* Moves p's walk for reconstruct into *walk (for scan_free) where it
 * walked exactly the device's events of s from the start of the array:
 * 1, else 0 (*walk empty). */
static int pass_walk(md_pass *p, const md_snapshot *s, int device, scan *walk)
{
    size_t n;
    const md_event *ev = md_snapshot_events(s, device, &n);
    memset(walk, 0, sizeof *walk);
    if (!p || !p->scanning || p->sc.failed || p->failed || ev != s->events || p->sc.done != n)
        return 0;
    *walk = p->sc;
    memset(&p->sc, 0, sizeof p->sc);
    p->scanning = 0;
    return 1;
}

int md_pass_walked(const md_pass *p)
{
    return p->scanning && !p->sc.failed;
}

int md_pass_stopped(const md_pass *p)
{
    return p->stop != SIZE_MAX;
}

/* The state and timeline of pass p (freed), as a first pass over s would
 * leave them: its rules now s's settings. */
static md_replay *pass_adopt(md_pass *p, const md_snapshot *s, rstate *st)
{
    md_replay *r = p->r;
    *st = p->st;
    scan_free(&p->sc); /* a walk not taken (pass_walk): not of the whole trace */
    free(p);
    st->s = s, st->cfg = &s->settings;
    /* its map began at blocks_hint(NULL), the file's blocks unknown then:
     * sized now as a pass of its own would be, or the pass after a
     * reconstruction grows it by rehashing (big_gamma: +1.3 M instructions) */
    (void)md_map_reserve(&st->by_addr, blocks_hint(s)); /* failing: only slower */
    for (int c = 0; c < r->nchecks; c++)
        r->checks[c].st.s = s, r->checks[c].st.cfg = &s->settings;
    return r;
}

static int snapshot_state(const rstate *st, md_live **live, size_t *nlive, md_cache_state *cs);

/* A device with no trace (torch.cuda.memory_snapshot() without a history):
 * its one state is the snapshot's segments and blocks as listed. They are
 * taken as they are, not laid into a block model, and not kept: for
 * 250 000 blocks that model took 24 MB and 170 ms to say what the file
 * already says, and its live set, kept, was one more copy of the blocks
 * beside the caller's. Probes list them again (listed_live). */
static int state_as_listed(md_replay *r)
{
    md_point p = {0, 0, 0};
    md_cache_state *cs = &r->final_cache;
    for (size_t i = 0; i < r->s->nsegs; i++) {
        const md_segment *g = &r->s->segs[i];
        if (g->device != r->device)
            continue;
        if (!g->is_expandable) /* expandable ones: their mapped runs, below */
            p.reserved += g->total_size, cs->segments++;
        for (size_t k = 0; k < g->nblocks; k++) {
            const md_block *b = &r->s->blocks[g->first_block + k];
            if (b->state == MD_BLOCK_INACTIVE) {
                cs->free_total += b->size;
                cs->largest_free = b->size > cs->largest_free ? b->size : cs->largest_free;
            } else {
                p.allocated += b->size;
                p.requested += b->requested_size;
                r->nfinal++;
            }
        }
    }
    if (expandable_before(r, 0)) /* no trace: nothing to undo */
        return -1;
    for (size_t i = 0; i < r->npreseg; i++)
        p.reserved += r->preseg[i].size;
    cs->segments += r->npreseg;
    free(r->preseg);
    r->preseg = NULL;
    r->npreseg = r->presegcap = 0;
    r->reconstructed = cs->segments > 0;
    r->initial = p;
    r->peak_alloc = p.allocated;
    r->peak_reserved = p.reserved;
    r->peak_index = r->peak_reserved_index = -1;
    return 0;
}

/* The live set of a device with no trace: its blocks in use, by address. */
static int listed_live(const md_replay *r, md_live **live, size_t *nlive)
{
    md_live *v = md_malloc_filled(r->nfinal * sizeof *v);
    size_t k = 0;
    if (!v)
        return -1;
    for (size_t i = 0; i < r->s->nsegs; i++) {
        const md_segment *g = &r->s->segs[i];
        for (size_t j = 0; g->device == r->device && j < g->nblocks && k < r->nfinal; j++) {
            const md_block *b = &r->s->blocks[g->first_block + j];
            if (b->state != MD_BLOCK_INACTIVE)
                v[k++] = (md_live){b->address, b->size, b->requested_size, -1, b->stack,
                                   MD_CAT_OTHER};
        }
    }
    if (!sorted_live(v, k))
        qsort(v, k, sizeof *v, cmp_live_addr);
    *live = v;
    *nlive = k;
    return 0;
}

/* seed_state for a device with no trace, whose replay keeps no
 * reconstruction (state_as_listed): one made for the call. */
static int seed_listed(const md_replay *r, rstate *st)
{
    md_replay t = *r;
    t.pre = NULL, t.npre = t.precap = 0;
    t.preseg = NULL, t.npreseg = t.presegcap = 0;
    int rc = reconstruct(&t, NULL) || seed_state(&t, st) ? -1 : 0;
    free(t.pre);
    free(t.preseg);
    return rc;
}

int md_replay_run(const md_snapshot *s, int device, md_replay **out, md_err *err)
{
    return md_replay_run_with(s, device, NULL, out, err);
}

/* md_replay_run_with, with reconstruct's walk where one was made while
 * the trace was read (NULL: none). Out of line: src/cli/hot.ld lays it by
 * this name. */
__attribute__((noinline)) static int replay_run(const md_snapshot *s, int device, md_pass *first, scan *walk,
                      md_replay **out, md_err *err)
{
    size_t n;
    const md_event *ev = md_snapshot_events(s, device, &n);
    if (first && !md_pass_fits(first, s, device)) {
        md_pass_free(first);
        first = NULL;
    }
    rstate st;
    memset(&st, 0, sizeof st);
    md_replay *r = first ? pass_adopt(first, s, &st) : calloc(1, sizeof *r);
    if (!r)
        return md_err_set(err, MD_E_NOMEM, -1, "out of memory");
    r->s = s;
    r->device = device;
    r->ev = ev;
    r->n = n;
    if (r->n >= INT32_MAX) {
        state_free(&st);
        md_replay_free(r);
        return md_err_set(err, MD_E_LIMIT, -1, "device %d has %zu trace entries (limit 2^31)",
                          device, n);
    }
    size_t n1 = r->n ? r->n : 1;
    if (md_big_grow((void **)&r->pts, &r->ptscap, n1, sizeof *r->pts) ||
        md_big_grow((void **)&r->free_at, &r->freecap, n1, sizeof *r->free_at))
        goto nomem;
    if (r->n == 0) {
        state_free(&st); /* a pass adopted from the read holds nothing to keep */
        r->free_at[0] = -1;
        if (state_as_listed(r))
            goto nomem;
        *out = r;
        return MD_OK;
    }
    if (!first && state_init(&st, s, &s->settings))
        goto nomem;
    /* Usually recording started before the first allocation: one pass from
     * an empty state (or the one made while the trace was read), checked
     * against the final state. Only if they disagree is the pre-recording
     * state reconstructed and replayed. */
    if (!first)
        run_pass(r, &st, 1);
    if (st.anomalies || !matches_final_state(r, &st)) {
        state_reset(&st);
        r->reconstructed = 1;
        if (reconstruct(r, walk) || seed_state(r, &st))
            goto nomem;
        run_pass(r, &st, 0);
    }
    if (r->rsv_failed)
        goto nomem;
    md_big_trim(r->pts, r->ptscap, n1, sizeof *r->pts);
    md_big_trim(r->free_at, r->freecap, n1, sizeof *r->free_at);
    r->peak_reserved_index = -1;
    if (r->initial.reserved == r->peak_reserved) /* the first event leaves it there */
        r->peak_reserved_index = r->nrsv && r->rsv[0].at == 0 ? -1 : 0;
    for (size_t k = 0; k < r->nrsv && r->peak_reserved_index < 0; k++)
        if (r->rsv[k].reserved == r->peak_reserved)
            r->peak_reserved_index = (long)r->rsv[k].at;
    if (snapshot_state(&st, &r->final_live, &r->nfinal, &r->final_cache))
        goto nomem;
    st.free_at = NULL; /* r's, not the state's */
    if ((r->spare = malloc(sizeof *r->spare)) != NULL)
        atomic_init(&r->spare->st, NULL);
    give_spare(r, &st);
    *out = r;
    return MD_OK;
nomem:
    state_free(&st);
    md_replay_free(r);
    return md_err_set(err, MD_E_NOMEM, -1, "out of memory");
}

int md_replay_run_with(const md_snapshot *s, int device, md_pass *first, md_replay **out,
                       md_err *err)
{
    scan walk;
    int walked = pass_walk(first, s, device, &walk);
    int rc = replay_run(s, device, first, walked ? &walk : NULL, out, err);
    scan_free(&walk);
    return rc;
}

void md_replay_free(md_replay *r)
{
    if (!r)
        return;
    md_big_free(r->pts, r->ptscap, sizeof *r->pts);
    free(r->rsv);
    md_big_free(r->free_at, r->freecap, sizeof *r->free_at);
    free(r->pre);
    free(r->preseg);
    free(r->final_live);
    drop_checks(r);
    if (r->spare) {
        rstate st;
        if (!take_spare(r, &st))
            state_free(&st);
        free(r->spare);
    }
    free(r);
}

size_t md_replay_nevents(const md_replay *r) { return r->n; }
md_point md_replay_initial(const md_replay *r) { return r->initial; }
long md_replay_peak_index(const md_replay *r) { return r->peak_index; }
const md_tpoint *md_replay_points(const md_replay *r) { return r->pts; }

long md_replay_peak_reserved_index(const md_replay *r) { return r->peak_reserved_index; }
int md_replay_reconstructed(const md_replay *r) { return r->reconstructed; }
uint64_t md_replay_peak_allocated(const md_replay *r) { return r->peak_alloc; }
uint64_t md_replay_peak_reserved(const md_replay *r) { return r->peak_reserved; }
size_t md_replay_anomalies(const md_replay *r) { return r->anomalies; }
const md_event *md_replay_events(const md_replay *r) { return r->ev; }
int md_replay_device(const md_replay *r) { return r->device; }

long md_replay_free_index(const md_replay *r, long alloc_index)
{
    if (alloc_index < 0 || (size_t)alloc_index >= r->n)
        return -1;
    return r->free_at[alloc_index];
}

md_point md_replay_at(const md_replay *r, long index)
{
    if (index < 0 || r->n == 0)
        return r->initial;
    if ((size_t)index >= r->n)
        index = (long)r->n - 1;
    const md_tpoint *t = &r->pts[index];
    return (md_point){t->allocated, reserved_at(r, (size_t)index), t->requested};
}

int md_replay_live(const md_replay *r, long index, md_live **out, size_t *n, md_err *err)
{
    return md_replay_probe(r, &index, 1, out, n, NULL, err);
}

int md_replay_cache_at(const md_replay *r, long index, md_cache_state *out, md_err *err)
{
    md_live *live;
    size_t n;
    int rc = md_replay_probe(r, &index, 1, &live, &n, out, err);
    if (rc == MD_OK)
        free(live);
    return rc;
}

/* The live set and cache state of rstate st, in the public forms. */
static int snapshot_state(const rstate *st, md_live **live, size_t *nlive, md_cache_state *cs)
{
    size_t cap = 0, k = 0;
    md_live *v = NULL;
    if (cs)
        memset(cs, 0, sizeof *cs);
    if (live) { /* sized once: grown by doubling, each copy went to fresh pages */
        for (size_t i = 0; i < st->nb; i++)
            cap += st->b[i].state == B_ALLOC;
        if (cap && !(v = md_malloc_filled(cap * sizeof *v)))
            return -1;
    }
    for (size_t i = 0; i < st->nb; i++) {
        const rblock *b = &st->b[i];
        if (cs && b->seg != NIL) {
            if (b->state == B_FREE) {
                cs->free_total += b->size;
                cs->largest_free = b->size > cs->largest_free ? b->size : cs->largest_free;
            } else if (b->state == B_PENDING) {
                cs->pending_free += b->size;
            }
        }
        if (live && b->state == B_ALLOC) /* k < cap: counted above */
            v[k++] = (md_live){b->addr, b->size, b->requested, b->alloc_index, b->stack, MD_CAT_OTHER};
    }
    if (cs)
        for (size_t i = 0; i < st->ng; i++)
            cs->segments += st->g[i].alive;
    if (live) {
        *live = v;
        *nlive = k;
    }
    return 0;
}

static int copy_final(const md_replay *r, md_live **live, size_t *nlive, md_cache_state *cache)
{
    *nlive = r->nfinal;
    if (cache)
        *cache = r->final_cache;
    if (r->n == 0)
        return listed_live(r, live, nlive);
    if (!r->nfinal)
        return 0;
    if (!(*live = md_malloc_filled(r->nfinal * sizeof **live)))
        return -1;
    memcpy(*live, r->final_live, r->nfinal * sizeof **live);
    return 0;
}

static int probe_nomem(md_live **live, size_t k, md_err *err)
{
    for (size_t j = 0; j < k; j++) {
        free(live[j]);
        live[j] = NULL;
    }
    return md_err_set(err, MD_E_NOMEM, -1, "out of memory");
}

/* Brings st (*have: initialised) to just after event target (*i: where
 * it is): from the latest kept state at or before target when that is
 * ahead of st, else from st or the start, replaying forward. */
static int probe_seek(const md_replay *r, rstate *st, int *have, long *i, long target)
{
    int c = r->nchecks - 1;
    while (c >= 0 && r->checks[c].index > target)
        c--;
    if (c >= 0 && (!*have || r->checks[c].index > *i)) { /* jump ahead */
        if (!*have && take_spare(r, st) == 0)
            *have = 1;
        *have = !(*have ? state_copy_into(st, &r->checks[c].st)
                        : state_copy(st, &r->checks[c].st));
        if (!*have)
            return -1;
        *i = r->checks[c].index;
    } else if (!*have) {
        *have = 1;
        if (take_spare(r, st) == 0)
            state_reset(st);
        else if (state_init(st, r->s, &r->s->settings))
            return -1;
        if (r->n ? seed_state(r, st) : seed_listed(r, st))
            return -1;
    }
    while (*i < target && *i + 1 < (long)r->n) {
        ++*i;
        apply(st, &r->ev[*i], *i);
    }
    return 0;
}

/* As probe_seek would go for each index: from a kept state ahead of where
 * it is, else on from there, or from the start. */
size_t md_replay_probe_work(const md_replay *r, const long *idx, size_t k)
{
    size_t work = 0;
    long i = -1;
    int have = 0;
    for (size_t j = 0; j < k && idx[j] < (long)r->n - 1; j++) {
        int c = r->nchecks - 1;
        while (c >= 0 && r->checks[c].index > idx[j])
            c--;
        if (c >= 0 && (!have || r->checks[c].index > i))
            i = r->checks[c].index;
        else if (!have)
            work += r->npre;
        have = 1;
        if (idx[j] > i) {
            work += (size_t)(idx[j] - i);
            i = idx[j];
        }
    }
    return work;
}

int md_replay_probe(const md_replay *r, const long *idx, size_t k, md_live **live,
                    size_t *nlive, md_cache_state *cache, md_err *err)
{
    rstate st;
    for (size_t j = 0; j < k; j++) {
        live[j] = NULL;
        nlive[j] = 0;
        if (j && idx[j] < idx[j - 1])
            return md_err_set(err, MD_E_ARG, -1, "md_replay_probe: indices must ascend");
    }
    /* the trace's end is the main pass's final state; replay up to the
     * last index before it */
    size_t kk = k;
    while (kk > 0 && idx[kk - 1] >= (long)r->n - 1)
        kk--;
    for (size_t j = kk; j < k; j++)
        if (copy_final(r, &live[j], &nlive[j], cache ? &cache[j] : NULL))
            return probe_nomem(live, k, err);
    if (kk == 0)
        return MD_OK;
    long i = -1;
    int have = 0;
    for (size_t j = 0; j < kk; j++)
        if (probe_seek(r, &st, &have, &i, idx[j]) ||
            snapshot_state(&st, &live[j], &nlive[j], cache ? &cache[j] : NULL)) {
            if (have)
                state_free(&st);
            return probe_nomem(live, k, err);
        }
    give_spare(r, &st);
    return MD_OK;
}

static int push_seg(md_replay_seg **g, size_t *ng, size_t *cap, md_replay_seg v)
{
    if (md_grow((void **)g, cap, *ng + 1, sizeof **g))
        return -1;
    (*g)[(*ng)++] = v;
    return 0;
}

/* st's alive segments and their blocks in the public forms, as torch's
 * snapshot lists them: an expandable segment as its runs of mapped pages,
 * each a segment (none if all its pages are unmapped). */
static int segments_of(const rstate *st, md_replay_seg **segs, size_t *nsegs,
                       md_replay_block **blocks, size_t *nblocks)
{
    size_t ng = 0, nb = 0, gcap = 0, bcap = 0;
    md_replay_seg *g = NULL;
    md_replay_block *b = NULL;
    for (size_t gi = 0; gi < st->ng; gi++) {
        const rseg *sg = &st->g[gi];
        if (!sg->alive || (sg->expandable && sg->first == NIL))
            continue;
        if (sg->first == NIL &&
            push_seg(&g, &ng, &gcap, (md_replay_seg){sg->addr, sg->size, 0, nb, 0}))
            goto nomem;
        uint64_t end = 0; /* the last block's */
        for (uint32_t k = sg->first; k != NIL; k = st->b[k].next) {
            const rblock *rb = &st->b[k];
            if ((k == sg->first || (sg->expandable && rb->addr != end)) &&
                push_seg(&g, &ng, &gcap,
                         (md_replay_seg){sg->expandable ? rb->addr : sg->addr,
                                         sg->expandable ? 0 : sg->size, sg->expandable, nb, 0}))
                goto nomem;
            if (md_grow((void **)&b, &bcap, nb + 1, sizeof *b))
                goto nomem;
            b[nb++] = (md_replay_block){rb->addr, rb->size, rb->state == B_FREE ? 0 : rb->requested,
                                       rb->state == B_FREE ? 0 : rb->stack, rb->state};
            g[ng - 1].nblocks++;
            g[ng - 1].size += sg->expandable ? rb->size : 0;
            end = rb->addr + rb->size;
        }
    }
    *segs = g, *nsegs = ng, *blocks = b, *nblocks = nb;
    return 0;
nomem:
    free(g);
    free(b);
    return -1;
}

int md_replay_segments_at(const md_replay *r, long index, md_replay_seg **segs, size_t *nsegs,
                          md_replay_block **blocks, size_t *nblocks, md_err *err)
{
    *segs = NULL, *blocks = NULL, *nsegs = *nblocks = 0;
    if (index < -1 || index >= (long)r->n)
        return md_err_set(err, MD_E_ARG, -1, "md_replay_segments_at: event %ld is outside the "
                          "trace", index);
    rstate st;
    long i = -1;
    int have = 0, rc = probe_seek(r, &st, &have, &i, index);
    if (!rc)
        rc = segments_of(&st, segs, nsegs, blocks, nblocks);
    if (have)
        give_spare(r, &st);
    return rc ? md_err_set(err, MD_E_NOMEM, -1, "out of memory") : MD_OK;
}

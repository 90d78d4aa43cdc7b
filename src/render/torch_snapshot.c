/* torch_snapshot.c - a window of one device's history written back in
 * torch's own snapshot format, for torch's viewer and other tools that
 * read it: a multi-GB snapshot the browser viewer cannot open, cut to the
 * steps that matter. The segments are the replayed allocator state at the
 * window's end, so a reader reconstructs what the window began with, as
 * it does for a ring buffer that overflowed. Pickle protocol 2, as torch's
 * C++ pickler writes it; each stack's frames are written once and then
 * referred to through the memo. */
#include <stdlib.h>
#include <string.h>
#include "../util/util.h"
#include "export.h"

typedef struct pw {
    FILE *o;
    md_map memo;   /* stack id -> memo index of its frames list */
    uint32_t next; /* the next memo index */
} pw;

/* one byte out: the writer is the file's one user, so without stdio's lock
 * (fputc's took a third of a 48 MB export's time) */
static inline void put(pw *w, int c) { putc_unlocked(c, w->o); }

#define APPENDS_BATCH 1000 /* items per MARK ... APPENDS, as Python's pickler */

static void le32(pw *w, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        put(w, (int)(v >> (8 * i)) & 0xff);
}

static void p_str(pw *w, const char *s)
{
    size_t n = strlen(s);
    put(w, 'X'); /* BINUNICODE */
    le32(w, (uint32_t)n);
    fwrite(s, 1, n, w->o);
}

/* An integer: BININT when it fits 32 bits, else LONG1 (two's complement,
 * little-endian, as long as it needs). */
static void p_i64(pw *w, int64_t v)
{
    if (v >= INT32_MIN && v <= INT32_MAX) {
        put(w, 'J');
        le32(w, (uint32_t)(int32_t)v);
        return;
    }
    unsigned char b[8];
    int n = 8;
    for (int i = 0; i < 8; i++)
        b[i] = (unsigned char)((uint64_t)v >> (8 * i));
    while (n > 1 && ((b[n - 1] == 0 && !(b[n - 2] & 0x80)) || (b[n - 1] == 0xff && (b[n - 2] & 0x80))))
        n--;
    put(w, 0x8a);
    put(w, n);
    fwrite(b, 1, (size_t)n, w->o);
}

static void p_u64(pw *w, uint64_t v)
{
    if (v <= INT64_MAX) {
        p_i64(w, (int64_t)v);
        return;
    }
    put(w, 0x8a); /* 9 bytes: the sign byte keeps it positive */
    put(w, 9);
    for (int i = 0; i < 8; i++)
        put(w, (int)(v >> (8 * i)) & 0xff);
    put(w, 0);
}

static void p_float(pw *w, double d)
{
    uint64_t u;
    memcpy(&u, &d, sizeof u);
    put(w, 'G'); /* BINFLOAT: big-endian */
    for (int i = 7; i >= 0; i--)
        put(w, (int)(u >> (8 * i)) & 0xff);
}

static void p_bool(pw *w, int v) { put(w, v ? 0x88 : 0x89); }
static void dict_open(pw *w) { fputs("}(", w->o); } /* EMPTY_DICT, MARK */
static void dict_close(pw *w) { put(w, 'u'); }   /* SETITEMS */
static void key(pw *w, const char *k) { p_str(w, k); }

/* Lists: EMPTY_LIST, then MARK ... APPENDS per batch of items. */
typedef struct plist {
    size_t in_batch;
} plist;

static void list_open(pw *w, plist *l)
{
    put(w, ']');
    l->in_batch = 0;
}

static void list_item(pw *w, plist *l) /* before each item */
{
    if (l->in_batch == APPENDS_BATCH) {
        put(w, 'e');
        l->in_batch = 0;
    }
    if (l->in_batch++ == 0)
        put(w, '(');
}

static void list_close(pw *w, plist *l)
{
    if (l->in_batch)
        put(w, 'e');
}

/* A stack's frames, innermost first: the first time in full (then put in
 * the memo), later by reference. */
static int frames(pw *w, const md_snapshot *s, uint32_t stack)
{
    uint64_t at;
    if (stack && md_map_get(&w->memo, stack, &at)) {
        put(w, 'j'); /* LONG_BINGET */
        le32(w, (uint32_t)at);
        return 0;
    }
    md_stack_ids fr = md_snapshot_stack(s, stack);
    plist l;
    list_open(w, &l);
    for (size_t i = 0; i < fr.n; i++) {
        const md_frame *f = md_snapshot_frame(s, md_stack_id(fr, i));
        if (!f)
            continue;
        list_item(w, &l);
        dict_open(w);
        key(w, "name"), p_str(w, md_snapshot_string(s, f->name));
        key(w, "filename"), p_str(w, md_snapshot_string(s, f->filename));
        key(w, "line"), p_i64(w, f->line);
        dict_close(w);
    }
    list_close(w, &l);
    if (!stack)
        return 0;
    put(w, 'r'); /* LONG_BINPUT */
    le32(w, w->next);
    return md_map_put(&w->memo, stack, w->next++);
}

static const char *action_key(const md_event *e) { return e->action == MD_ACT_OOM ? "device_free" : "addr"; }

static int trace_entry(pw *w, const md_snapshot *s, const md_event *e)
{
    dict_open(w);
    key(w, "action"), p_str(w, md_action_name(e->action));
    key(w, action_key(e)), p_u64(w, e->addr);
    key(w, "size"), p_u64(w, e->size);
    key(w, "stream"), p_u64(w, md_snapshot_stream(s, e->stream));
    if (e->time_us >= 0)
        key(w, "time_us"), p_i64(w, e->time_us);
    int rc = 0;
    if (e->stack) {
        key(w, "frames");
        rc = frames(w, s, e->stack);
    }
    dict_close(w);
    return rc;
}

/* The snapshot's final segment at addr, for what the replay does not keep
 * (stream, pool); NULL if it was freed before the end. */
/* A device's final segments by address (then by their order in the file),
 * for final_segment: a scan per segment took 3.6 s for 84 736 of them. */
typedef struct seg_index {
    const md_segment **by_addr;
    size_t n;
} seg_index;

static int cmp_seg_ptr(const void *a, const void *b)
{
    const md_segment *x = *(const md_segment *const *)a, *y = *(const md_segment *const *)b;
    if (x->address != y->address)
        return x->address < y->address ? -1 : 1;
    return (x > y) - (x < y);
}

static int index_segments(const md_snapshot *s, int device, seg_index *ix)
{
    size_t n;
    const md_segment *g = md_snapshot_segments(s, &n);
    ix->n = 0;
    if (!(ix->by_addr = malloc((n ? n : 1) * sizeof *ix->by_addr)))
        return -1;
    for (size_t i = 0; i < n; i++)
        if (g[i].device == device)
            ix->by_addr[ix->n++] = &g[i];
    qsort(ix->by_addr, ix->n, sizeof *ix->by_addr, cmp_seg_ptr);
    return 0;
}

/* The first final segment listed at addr, NULL if none. */
static const md_segment *final_segment(const seg_index *ix, uint64_t addr)
{
    size_t lo = 0, hi = ix->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (ix->by_addr[mid]->address < addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < ix->n && ix->by_addr[lo]->address == addr ? ix->by_addr[lo] : NULL;
}

static int segment(pw *w, const md_snapshot *s, const seg_index *ix, int device,
                   const md_replay_seg *g, const md_replay_block *b)
{
    static const char *state[] = {"inactive", "active_allocated", "active_pending_free"};
    uint64_t alloc = 0, active = 0, requested = 0;
    for (size_t k = 0; k < g->nblocks; k++) {
        alloc += b[k].state == MD_BS_ALLOCATED ? b[k].size : 0;
        active += b[k].state != MD_BS_FREE ? b[k].size : 0;
        requested += b[k].state != MD_BS_FREE ? b[k].requested : 0;
    }
    const md_segment *fin = final_segment(ix, g->addr);
    dict_open(w);
    key(w, "device"), p_i64(w, device);
    key(w, "address"), p_u64(w, g->addr);
    key(w, "total_size"), p_u64(w, g->size);
    key(w, "allocated_size"), p_u64(w, alloc);
    key(w, "active_size"), p_u64(w, active);
    key(w, "requested_size"), p_u64(w, requested);
    key(w, "stream"), p_u64(w, fin ? fin->stream : 0);
    /* the small pool's segments are 2 MiB (torch's kSmallBuffer) */
    key(w, "segment_type"), p_str(w, fin ? (fin->is_small ? "small" : "large")
                                         : g->size == (2u << 20) ? "small" : "large");
    key(w, "segment_pool_id");
    p_i64(w, fin ? fin->pool_id[0] : 0), p_i64(w, fin ? fin->pool_id[1] : 0);
    put(w, 0x86); /* TUPLE2 */
    key(w, "is_expandable"), p_bool(w, g->expandable);
    key(w, "frames"), fputs("]", w->o);
    key(w, "blocks");
    plist l;
    list_open(w, &l);
    int rc = 0;
    for (size_t k = 0; k < g->nblocks && !rc; k++) {
        list_item(w, &l);
        dict_open(w);
        key(w, "address"), p_u64(w, b[k].addr);
        key(w, "size"), p_u64(w, b[k].size);
        key(w, "requested_size"), p_u64(w, b[k].requested);
        key(w, "state"), p_str(w, state[b[k].state <= 2 ? b[k].state : 0]);
        key(w, "frames");
        rc = frames(w, s, b[k].stack);
        dict_close(w);
    }
    list_close(w, &l);
    dict_close(w);
    return rc;
}

static void settings(pw *w, const md_settings *st, const md_snapshot *s)
{
    key(w, "allocator_settings");
    dict_open(w);
    key(w, "PYTORCH_CUDA_ALLOC_CONF"), p_str(w, md_snapshot_string(s, st->alloc_conf));
    key(w, "max_split_size"), p_i64(w, st->max_split_size);
    key(w, "garbage_collection_threshold"), p_float(w, st->gc_threshold);
    key(w, "expandable_segments"), p_bool(w, st->expandable_segments);
    key(w, "roundup_power2_divisions");
    dict_open(w);
    for (int k = 0; k < 16; k++) {
        char name[8];
        snprintf(name, sizeof name, "%d", 1 << k);
        key(w, name), p_i64(w, st->roundup_divisions[k]);
    }
    dict_close(w);
    dict_close(w);
}

/* The annotations in the window's time span (all devices': torch tags
 * them with the current device only). */
static void annotations(pw *w, const md_snapshot *s, int64_t t_lo, int64_t t_hi)
{
    size_t n;
    const md_annotation *a = md_snapshot_annotations(s, &n);
    key(w, "external_annotations");
    plist l;
    list_open(w, &l);
    for (size_t i = 0; i < n; i++) {
        if (a[i].time_us < t_lo || a[i].time_us > t_hi)
            continue;
        list_item(w, &l);
        dict_open(w);
        key(w, "name"), p_str(w, md_snapshot_string(s, a[i].name));
        if (a[i].stage)
            key(w, "stage"), p_str(w, a[i].stage == 1 ? "START" : "END");
        key(w, "device"), p_i64(w, a[i].device);
        key(w, "time_us"), p_i64(w, a[i].time_us);
        dict_close(w);
    }
    list_close(w, &l);
}

/* Each device's segments as replayed after its window's last event. */
static int segments(pw *w, const md_rank *ranks, size_t nr, const long *hi, md_err *err)
{
    key(w, "segments");
    plist l;
    list_open(w, &l);
    int rc = 0;
    for (size_t r = 0; r < nr && !rc; r++) {
        md_replay_seg *g;
        md_replay_block *b;
        size_t ng, nb;
        seg_index ix;
        if (index_segments(ranks[r].s, ranks[r].device, &ix))
            return md_err_set(err, MD_E_NOMEM, -1, "out of memory");
        if (md_replay_segments_at(ranks[r].r, hi[r], &g, &ng, &b, &nb, err)) {
            free(ix.by_addr);
            return -1;
        }
        for (size_t i = 0; i < ng && !rc; i++) {
            list_item(w, &l);
            rc = segment(w, ranks[r].s, &ix, ranks[r].device, &g[i],
                         g[i].nblocks ? &b[g[i].first_block] : NULL);
        }
        free(ix.by_addr);
        free(g);
        free(b);
    }
    list_close(w, &l);
    return rc ? md_err_set(err, MD_E_NOMEM, -1, "out of memory") : 0;
}

/* device_traces: a list per device up to the highest exported, each
 * device's window of entries (other devices' lists empty). */
static int traces(pw *w, const md_rank *ranks, size_t nr, const long *lo, const long *hi)
{
    int maxdev = -1, rc = 0;
    for (size_t r = 0; r < nr; r++)
        maxdev = ranks[r].device > maxdev ? ranks[r].device : maxdev;
    plist devs, tr;
    key(w, "device_traces");
    list_open(w, &devs);
    for (int d = 0; d <= maxdev && !rc; d++) {
        list_item(w, &devs);
        list_open(w, &tr);
        for (size_t r = 0; r < nr && !rc; r++) {
            size_t n;
            const md_event *ev = md_snapshot_events(ranks[r].s, d, &n);
            for (long i = lo[r] + 1; ranks[r].device == d && i <= hi[r] && !rc; i++) {
                list_item(w, &tr);
                rc = trace_entry(w, ranks[r].s, &ev[i]);
            }
        }
        list_close(w, &tr);
    }
    list_close(w, &devs);
    return rc;
}

int md_render_torch_snapshot(FILE *o, const md_rank *ranks, size_t nr, const long *lo,
                             const long *hi, md_err *err)
{
    int64_t t_lo = INT64_MAX, t_hi = INT64_MIN; /* the windows' span, for annotations */
    for (size_t r = 0; r < nr; r++) {
        size_t n;
        const md_event *ev = md_snapshot_events(ranks[r].s, ranks[r].device, &n);
        if (ranks[r].s != ranks[0].s || lo[r] < -1 || hi[r] < lo[r] || hi[r] >= (long)n)
            return md_err_set(err, MD_E_ARG, -1, "cuda:%d: the window (%ld, %ld] is outside its "
                              "trace", ranks[r].device, lo[r], hi[r]);
        if (hi[r] > lo[r] && ev[lo[r] + 1].time_us >= 0) {
            t_lo = ev[lo[r] + 1].time_us < t_lo ? ev[lo[r] + 1].time_us : t_lo;
            t_hi = ev[hi[r]].time_us > t_hi ? ev[hi[r]].time_us : t_hi;
        }
    }
    if (!nr)
        return md_err_set(err, MD_E_ARG, -1, "no device to export");
    const md_snapshot *s = ranks[0].s;
    pw w = {o, {0}, 0};
    if (md_map_init(&w.memo, 1024))
        return md_err_set(err, MD_E_NOMEM, -1, "out of memory");
    fputs("\x80\x02", o); /* PROTO 2 */
    dict_open(&w);
    int rc = segments(&w, ranks, nr, hi, err);
    if (!rc && traces(&w, ranks, nr, lo, hi))
        rc = md_err_set(err, MD_E_NOMEM, -1, "out of memory");
    if (!rc && md_snapshot_settings(s)->present)
        settings(&w, md_snapshot_settings(s), s);
    if (!rc && t_lo <= t_hi)
        annotations(&w, s, t_lo, t_hi);
    dict_close(&w);
    fputc('.', o); /* STOP */
    md_map_free(&w.memo);
    if (!rc && ferror(o))
        rc = md_err_set(err, MD_E_IO, -1, "write failed");
    return rc ? -1 : 0;
}

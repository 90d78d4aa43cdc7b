/* pickle.c - the safe pickle virtual machine.
 *
 * Reads opcodes from a streaming md_input through a growable window, so a
 * compressed multi-GB snapshot is never held whole (bytes already in memory
 * are read where they are). Frames lists of converted frames are handed to
 * the list hook whole instead of being built (fused_list), and flat dicts
 * (trace entries, blocks) to the record hook straight from their bytes
 * (rec_fast), falling back to the opcodes for anything unusual. Every
 * length is checked against the bytes that actually arrive (a hostile
 * length cannot make us allocate more than the input holds), the memo is
 * bounded by the input consumed, and MARK nesting and the value stack are
 * capped. Opcodes that import or construct objects are refused with their
 * name and offset. */
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include "pickle.h"
#include "split.h"

#define WINDOW 262144
/* a plain input under SMALL_INPUT is read through a window an eighth as
 * big: the rest would be a tenth or more of the process's memory (a 0.7 MB
 * snapshot: 1.46 MB resident) */
#define SMALL_WINDOW 32768
#define SMALL_INPUT ((size_t)4 << 20)
#define SMALL_CLASSES 6 /* item arrays of 1..32 values come from slabs */
#define SLAB_BYTES (1 << 20)
#define SLAB_AHEAD ((size_t)16 << 10)
#define SHORT_STR 8     /* strings this short are looked up in short_cache */
#define SHORT_SLOTS 256
#define REC_PAIRS 32    /* a record with more pairs is read as a dict */

/* Bump allocator chunks: containers are created per trace entry, so they
 * must not cost a malloc each. */
struct slab {
    struct slab *next;
    size_t used, cap;
    size_t ready; /* its pages allocated up to here (md_populate) */
    _Alignas(16) unsigned char data[];
};

/* A slot of the table of lists seen (open addressing on hash; o NULL =
 * empty). */
struct list_slot {
    uint64_t hash;
    size_t off;         /* the body's bytes (seen_bytes) */
    uint32_t len, gen;  /* their length, memo_gen when added */
    uint32_t next;      /* slot + 1 of the list read after this one last time, 0: none */
    pv_obj *o;          /* the released list */
};

struct md_pkl {
    md_input *in;
    md_strtab *strs;
    const unsigned char *buf; /* the window, or the whole input (borrowed) */
    unsigned char *own;       /* the window when buf is ours */
    size_t cap, pos, len;
    int64_t base; /* absolute offset of buf[0] */
    int eof;
    md_pv *stack;
    size_t sp, scap;
    size_t *marks;
    size_t nmarks, mcap;
    uint64_t *memo;         /* 8 bytes a slot (memo_encode) */
    /* memocap: the slots whose pages are allocated (memo_room), which
     * every fast path checks; memomap: the array's (md_big_grow's cap) */
    size_t nmemo, memocap, memomap;
    md_pv *memo_full;       /* memo values too wide for a slot */
    size_t nfull, fullcap;
    struct slab *objslab;   /* pv_obj storage, freed all at once */
    struct slab *itemslab;  /* small item arrays */
    md_pv *freelist[SMALL_CLASSES]; /* released small item arrays by class */
    pv_obj *objfree;        /* containers of taken trace entries, for reuse */
    /* Recently interned short strings by content: a snapshot writes the same
     * short value ("N/A", "alloc") afresh in every trace entry, and a full
     * intern per entry (hash, probe, compare) cost more than the entry's
     * other opcodes together. */
    struct { uint64_t w; uint32_t n, id; } short_cache[SHORT_SLOTS];
    md_pkl_item_fn hook;
    void *hook_ctx;
    md_pkl_list_fn list_hook;
    void *list_ctx;
    /* the record hook (md_pkl_set_record_hook): key string ids
     * [rec_key0, rec_key0 + rec_nmap) to value slots by rec_map */
    md_pkl_record_fn rec_fn;
    void *rec_ctx;
    uint32_t rec_key0, rec_nmap;
    size_t nrecords; /* dicts the record hook took */
    size_t nspills;  /* records stopped inside (rec_spill) */
    uint8_t rec_map[MD_PKL_REC_KEYS];
    /* the key opcode each pair of the last record began with, by position
     * (a pickler writes every trace entry's keys in one order): its bytes
     * (pat under mask), length and slot; valid while memo_gen is key_gen.
     * None remembered: mask 0, pat 1, which no bytes match (rec_forget);
     * the last entry stays so, a sentinel past the pairs a record may have */
    struct rec_key { uint64_t pat, mask; uint32_t sid; uint8_t len, slot; } rec_keys[REC_PAIRS + 1];
    struct rec_key rec_keys_in[REC_PAIRS + 1]; /* the records of a record's list (rec_nested) */
    uint32_t key_gen;
    /* the list an empty list ending a dict converts to (a trace entry
     * without frames: most of some traces), once the hook has said which */
    pv_obj *empty_list;
    /* converted lists by cache value (shared[cache - 1]): released lists
     * hold nothing else, so lists converted alike share one (a trace's
     * 70 000 frames lists are a few hundred stacks). Cache values are
     * small (md_pkl_list_fn), so an array, not a hash table. */
    pv_obj **shared;
    size_t nshared, sharedcap; /* entries set (NULL or a list), room */
    /* converted lists by their bytes: a trace writes the same frames list
     * (the same memo references) tens of thousands of times; a list read
     * before is recognised by its bytes alone (seen_find). Valid while no
     * memo slot was overwritten since (memo_gen; Python's pickler never
     * does). off: into the input itself when it is read in place (p->own
     * NULL: it stays put to the end), else into seenbytes, a copy */
    struct list_slot *seen;
    size_t nseen, seencap;   /* seencap: a power of two, or 0 */
    size_t seen_last;        /* the entry found or added last (SIZE_MAX: none):
                                half of a trace's lists repeat the one before */
    unsigned char *seenbytes;
    size_t seenlen, seenbytecap;
    /* The table pays where tracebacks repeat as distinct lists (torch's
     * snapshots: a first repeat within the first ten lists, then thousands);
     * where lists are shared through the memo instead, or never repeat, it
     * is only hashing and copying (15 % of a 1 MB file's time): past
     * SEEN_TRIAL new bodies with under a quarter as many repeats, off. */
    size_t seen_hits, seen_new;
    int seen_off;
    uint32_t memo_gen;
    md_pkl_limits lim;
    int proto;
    int64_t op_off; /* offset of the opcode being executed */
    /* The read split in two (md_pkl_split_*; snapshot/split.c). The first
     * reader: at the MARK at split_at (SIZE_MAX: none) it offers to take
     * the second's part; memo slots [hole_lo, hole_hi) are the second's,
     * which it does not have (a get of one: hole_hit). The second: memo
     * slots below nremote were filled before its start, their values read
     * where remote_at says when first got; it stops after a batch of the
     * list it began in that no MARK follows (ended). */
    size_t split_at;
    md_pkl_split_fn split_fn;
    void *split_ctx;
    size_t hole_lo, hole_hi;
    int hole_hit;
    const uint32_t *remote_at;
    size_t nremote;
    int remote_depth;
    md_pkl_bytes_fn remote_read; /* a window's reader: the bytes before its start */
    const void *remote_ctx;
    int second, ended;
};

static const struct { int op; const char *name; } opnames[] = {
    {'(', "MARK"}, {'.', "STOP"}, {'0', "POP"}, {'1', "POP_MARK"},
    {'2', "DUP"}, {'F', "FLOAT"}, {'I', "INT"}, {'J', "BININT"},
    {'K', "BININT1"}, {'L', "LONG"}, {'M', "BININT2"}, {'N', "NONE"},
    {'P', "PERSID"}, {'Q', "BINPERSID"}, {'R', "REDUCE"}, {'S', "STRING"},
    {'T', "BINSTRING"}, {'U', "SHORT_BINSTRING"}, {'V', "UNICODE"},
    {'X', "BINUNICODE"}, {'a', "APPEND"}, {'b', "BUILD"}, {'c', "GLOBAL"},
    {'d', "DICT"}, {'}', "EMPTY_DICT"}, {'e', "APPENDS"}, {'g', "GET"},
    {'h', "BINGET"}, {'i', "INST"}, {'j', "LONG_BINGET"}, {'l', "LIST"},
    {']', "EMPTY_LIST"}, {'o', "OBJ"}, {'p', "PUT"}, {'q', "BINPUT"},
    {'r', "LONG_BINPUT"}, {'s', "SETITEM"}, {'t', "TUPLE"},
    {')', "EMPTY_TUPLE"}, {'u', "SETITEMS"}, {'G', "BINFLOAT"},
    {0x80, "PROTO"}, {0x81, "NEWOBJ"}, {0x82, "EXT1"}, {0x83, "EXT2"},
    {0x84, "EXT4"}, {0x85, "TUPLE1"}, {0x86, "TUPLE2"}, {0x87, "TUPLE3"},
    {0x88, "NEWTRUE"}, {0x89, "NEWFALSE"}, {0x8a, "LONG1"}, {0x8b, "LONG4"},
    {'B', "BINBYTES"}, {'C', "SHORT_BINBYTES"}, {0x8c, "SHORT_BINUNICODE"},
    {0x8d, "BINUNICODE8"}, {0x8e, "BINBYTES8"}, {0x8f, "EMPTY_SET"},
    {0x90, "ADDITEMS"}, {0x91, "FROZENSET"}, {0x92, "NEWOBJ_EX"},
    {0x93, "STACK_GLOBAL"}, {0x94, "MEMOIZE"}, {0x95, "FRAME"},
    {0x96, "BYTEARRAY8"}, {0x97, "NEXT_BUFFER"}, {0x98, "READONLY_BUFFER"},
};

const char *md_pkl_opname(int op)
{
    for (size_t i = 0; i < sizeof opnames / sizeof opnames[0]; i++)
        if (opnames[i].op == op)
            return opnames[i].name;
    return NULL;
}

/* ---- byte window ------------------------------------------------------ */

/* The window moved on to the next stretch the input read ahead, parsed
 * where it lies (md_input_lend), the bytes not parsed yet put before it:
 * the reading thread copies only those, not the file (big_gamma: 6.4 M
 * instructions of copying). */
static int lend_more(md_pkl *p, md_err *err)
{
    size_t left = p->len - p->pos;
    unsigned char *d;
    long got = md_input_lend(p->in, &d, err);
    if (got < 0) {
        if (err)
            err->offset = p->base + (int64_t)p->len;
        return (int)got;
    }
    if (got == 0) { /* the end: what is left stays where it is, still lent */
        p->eof = 1;
        return MD_OK;
    }
    if (left)
        memcpy(d - left, p->buf + p->pos, left);
    p->base += (int64_t)p->pos;
    p->buf = d - left, p->len = left + (size_t)got, p->pos = 0;
    md_input_lend_done(p->in, 1); /* the one before, now copied from */
    return MD_OK;
}

/* Back from lent bytes to the window of our own, for a value longer than
 * the room before a lent stretch: what is left copied into it. */
static int unlend(md_pkl *p, md_err *err)
{
    size_t left = p->len - p->pos;
    if (left > p->cap) {
        size_t want = p->cap;
        while (want < left)
            want *= 2;
        unsigned char *nb = realloc(p->own, want);
        if (!nb)
            return md_err_set(err, MD_E_NOMEM, p->op_off, "out of memory");
        p->own = nb, p->cap = want;
    }
    if (left) /* the lent ones go back on the next read */
        memcpy(p->own, p->buf + p->pos, left);
    p->base += (int64_t)p->pos;
    p->buf = p->own, p->len = left, p->pos = 0;
    return MD_OK;
}

/* Makes n bytes available at p->buf + p->pos. Grows in steps as data
 * actually arrives, so a forged length cannot reserve memory by itself. */
static int need_slow(md_pkl *p, size_t n, md_err *err)
{
    while (p->len - p->pos < n) {
        if (p->eof)
            return md_err_set(err, MD_E_FORMAT, p->op_off,
                              "truncated: %zu more bytes needed, input ends at byte %lld",
                              n - (p->len - p->pos), (long long)(p->base + (int64_t)p->len));
        if (p->own && p->len - p->pos <= MD_INPUT_LEND_PAD && md_input_can_lend(p->in)) {
            int rc = lend_more(p, err);
            if (rc)
                return rc;
            continue;
        }
        if (p->buf != p->own) { /* lent bytes (or none: the input was skipped) */
            int rc = unlend(p, err);
            if (rc)
                return rc;
        }
        if (p->pos > 0 && p->pos >= p->len / 2) { /* slide the window */
            memmove(p->own, p->buf + p->pos, p->len - p->pos);
            p->base += (int64_t)p->pos;
            p->len -= p->pos;
            p->pos = 0;
        }
        if (p->len == p->cap) {
            size_t want = p->cap * 2;
            unsigned char *nb = realloc(p->own, want);
            if (!nb)
                return md_err_set(err, MD_E_NOMEM, p->op_off, "out of memory");
            p->buf = p->own = nb;
            p->cap = want;
        }
        long r = md_input_read(p->in, p->own + p->len, p->cap - p->len, err);
        if (r < 0) {
            if (err)
                err->offset = p->base + (int64_t)p->len;
            return (int)r;
        }
        if (r == 0)
            p->eof = 1;
        p->len += (size_t)r;
    }
    return MD_OK;
}

/* The common case (bytes already in the window) stays inline. */
static inline int need(md_pkl *p, size_t n, md_err *err)
{
    if (__builtin_expect(p->len - p->pos >= n, 1))
        return MD_OK;
    return need_slow(p, n, err);
}

/* ---- values ------------------------------------------------------------ */

static int push_slow(md_pkl *p, md_pv v, md_err *err)
{
    if (p->sp >= p->lim.max_stack)
        return md_err_set(err, MD_E_LIMIT, p->op_off,
                          "value stack exceeds %zu entries", p->lim.max_stack);
    if (p->sp == p->scap &&
        md_grow((void **)&p->stack, &p->scap, p->sp + 1, sizeof *p->stack))
        return md_err_set(err, MD_E_NOMEM, p->op_off, "out of memory");
    p->stack[p->sp++] = v;
    return MD_OK;
}

static inline int push(md_pkl *p, md_pv v, md_err *err)
{
    if (__builtin_expect(p->sp < p->scap && p->sp < p->lim.max_stack, 1)) {
        p->stack[p->sp++] = v;
        return MD_OK;
    }
    return push_slow(p, v, err);
}

static void *slab_alloc(struct slab **head, size_t size)
{
    size = (size + 7) & ~(size_t)7; /* pv_obj: 40 bytes, not 48 */
    struct slab *sl = *head;
    if (!sl || sl->cap - sl->used < size) {
        size_t cap = size > SLAB_BYTES ? size : SLAB_BYTES;
        sl = malloc(sizeof *sl + cap);
        if (!sl)
            return NULL;
        sl->next = *head;
        sl->used = sl->ready = 0;
        sl->cap = cap;
        *head = sl;
    }
    void *r = sl->data + sl->used;
    sl->used += size;
    if (sl->used > sl->ready) {
        /* the pages of the next stretch at once, not a fault each: as much
         * as is used already, up to 16 KiB (a small snapshot's few objects
         * take no more memory than they did) */
        size_t ahead = sl->used < SLAB_AHEAD ? sl->used : SLAB_AHEAD;
        size_t to = sl->used + ahead < sl->cap ? sl->used + ahead : sl->cap;
        md_populate(sl->data + sl->ready, to - sl->ready);
        sl->ready = to;
    }
    return r;
}

static void slab_free_all(struct slab *sl)
{
    while (sl) {
        struct slab *n = sl->next;
        free(sl);
        sl = n;
    }
}

static int size_class(size_t cap)
{
    int c = 0;
    while (((size_t)1 << c) < cap)
        c++;
    return c;
}

/* Item arrays: capacities are powers of two; up to 32 they come from slabs
 * and go back to a per-class free list, beyond that from malloc. */
static md_pv *items_alloc(md_pkl *p, size_t cap)
{
    int c = size_class(cap);
    if (c >= SMALL_CLASSES)
        return malloc(((size_t)1 << c) * sizeof(md_pv));
    md_pv *v = p->freelist[c];
    if (v) { /* a free array stores the next free array in its first bytes */
        void *next;
        memcpy(&next, (const void *)v, sizeof next);
        p->freelist[c] = next;
        return v;
    }
    return slab_alloc(&p->itemslab, ((size_t)1 << c) * sizeof(md_pv));
}

static void items_release(md_pkl *p, md_pv *v, size_t cap)
{
    if (!v)
        return;
    int c = size_class(cap);
    if (c >= SMALL_CLASSES) {
        free(v);
        return;
    }
    void *next = p->freelist[c];
    memcpy((void *)v, &next, sizeof next);
    p->freelist[c] = v;
}

static int new_obj(md_pkl *p, int kind, md_pv *out, md_err *err)
{
    pv_obj *o = p->objfree;
    if (o)
        memcpy(&p->objfree, &o->items, sizeof o);
    else if (!(o = slab_alloc(&p->objslab, sizeof *o)))
        return md_err_set(err, MD_E_NOMEM, p->op_off, "out of memory");
    memset(o, 0, sizeof *o);
    o->kind = (uint8_t)kind;
    memset(out, 0, sizeof *out);
    out->t = kind == PVO_DICT ? PV_DICT : kind == PVO_TUPLE ? PV_TUPLE : PV_LIST;
    out->o = o;
    return MD_OK;
}

static int obj_add(md_pkl *p, pv_obj *o, const md_pv *v, size_t n, md_err *err)
{
    if (n == 0)
        return MD_OK;
    if ((uint64_t)o->n + n > UINT32_MAX / 2)
        return md_err_set(err, MD_E_LIMIT, p->op_off, "container too large");
    if (o->n + n > o->cap) {
        size_t cap = 1;
        while (cap < o->n + n)
            cap *= 2;
        md_pv *ni;
        if (o->cap > ((size_t)1 << (SMALL_CLASSES - 1))) {
            ni = realloc(o->items, cap * sizeof *ni);
        } else {
            ni = items_alloc(p, cap);
            if (ni && o->n)
                memcpy(ni, o->items, o->n * sizeof *ni);
            if (ni)
                items_release(p, o->items, o->cap);
        }
        if (!ni)
            return md_err_set(err, MD_E_NOMEM, p->op_off, "out of memory");
        o->items = ni;
        o->cap = (uint32_t)cap;
    }
    memcpy(o->items + o->n, v, n * sizeof *v);
    o->n += (uint32_t)n;
    return MD_OK;
}

static int pop_mark(md_pkl *p, size_t *mark, md_err *err)
{
    if (!p->nmarks)
        return md_err_set(err, MD_E_FORMAT, p->op_off, "%s without MARK",
                          md_pkl_opname(p->buf[p->pos - 1]));
    *mark = p->marks[--p->nmarks];
    return MD_OK;
}

static int need_stack(md_pkl *p, size_t n, size_t floor, md_err *err)
{
    if (p->sp < floor + n)
        return md_err_set(err, MD_E_FORMAT, p->op_off, "stack underflow");
    return MD_OK;
}

/* Slot of a short string in short_cache; w holds its n bytes, zero-padded. */
static inline size_t short_slot(uint64_t w, size_t n)
{
    return (size_t)(((w ^ n) * 0x9e3779b97f4a7c15ULL) >> 56) & (SHORT_SLOTS - 1);
}

/* The bits of a word loaded from memory that hold its first n bytes
 * (0 <= n <= 8), whichever the byte order. */
static inline uint64_t first_bytes(unsigned n)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    return n ? ~0ULL << (64 - 8 * n) : 0;
#else
    return n == 8 ? ~0ULL : (1ULL << (n * 8)) - 1;
#endif
}

static inline uint64_t short_word(const unsigned char *s, size_t n)
{
    uint64_t w = 0;
    memcpy(&w, s, n);
    return w;
}

/* The id of the short string whose SHORT_BINUNICODE opcode is at b (16
 * bytes readable there) if short_cache holds it, else -1. */
static inline int64_t short_hit(const md_pkl *p, const unsigned char *b)
{
    size_t n = b[1];
    if (n > SHORT_STR)
        return -1;
    uint64_t w = 0; /* one 8-byte load, masked */
    memcpy(&w, b + 2, 8);
    w &= first_bytes((unsigned)n); /* as short_word leaves them */
    size_t k = short_slot(w, n);
    if (p->short_cache[k].n != n || p->short_cache[k].w != w)
        return -1;
    return p->short_cache[k].id;
}

static int push_str(md_pkl *p, const unsigned char *s, size_t n, int type,
                    md_err *err)
{
    if (n > p->lim.max_str)
        return md_err_set(err, MD_E_LIMIT, p->op_off,
                          "string of %zu bytes exceeds the %zu-byte limit", n,
                          p->lim.max_str);
    int64_t id = md_strtab_intern(p->strs, (const char *)s, n);
    if (id < 0)
        return md_err_set(err, MD_E_NOMEM, p->op_off, "out of memory");
    if (n <= SHORT_STR && type == PV_STR) {
        uint64_t w = short_word(s, n);
        size_t k = short_slot(w, n);
        p->short_cache[k].w = w, p->short_cache[k].n = (uint32_t)n;
        p->short_cache[k].id = (uint32_t)id;
    }
    md_pv v = {0};
    v.t = (uint8_t)type;
    v.s = (uint32_t)id;
    return push(p, v, err);
}

/* Reads an n-byte length-prefixed payload and pushes it as a string. */
static int op_sized(md_pkl *p, int lenbytes, int type, md_err *err)
{
    int rc = need(p, (size_t)lenbytes, err);
    if (rc)
        return rc;
    uint64_t n = md_rd_le(p->buf + p->pos, lenbytes);
    if (lenbytes == 4 && type == PV_NONE) /* BINSTRING: signed length */
        n = (uint64_t)(int64_t)(int32_t)n;
    if (type == PV_NONE)
        type = PV_STR;
    p->pos += (size_t)lenbytes;
    if (n > p->lim.max_str)
        return md_err_set(err, MD_E_LIMIT, p->op_off,
                          "%s length %llu exceeds the %zu-byte limit",
                          md_pkl_opname(p->buf[p->pos - lenbytes - 1]),
                          (unsigned long long)n, p->lim.max_str);
    rc = need(p, (size_t)n, err);
    if (rc)
        return rc;
    const unsigned char *s = p->buf + p->pos;
    p->pos += (size_t)n;
    return push_str(p, s, (size_t)n, type, err);
}

/* Little-endian two's complement integer of n bytes (LONG1/LONG4). */
static md_pv make_long(const unsigned char *b, size_t n)
{
    md_pv v = {0};
    v.t = PV_INT;
    if (n == 0)
        return v;
    int neg = (b[n - 1] & 0x80) != 0;
    if (n <= 8) { /* the common case: fits int64 as written */
        uint64_t u = md_rd_le(b, (int)n);
        if (neg && n < 8)
            u |= ~0ULL << (n * 8);
        v.i = (int64_t)u;
        return v;
    }
    size_t sig = n;
    /* strip redundant sign bytes */
    while (sig > 1 && b[sig - 1] == (neg ? 0xff : 0x00))
        sig--;
    if (sig <= 8) {
        uint64_t u = md_rd_le(b, (int)sig);
        if (neg) {
            if (sig < 8)
                u |= ~0ULL << (sig * 8);
            v.i = (int64_t)u;
            if (sig == 8 && !(b[7] & 0x80)) /* e.g. ff..ff7f.. needs 9 bytes */
                v.big = 1, v.i = INT64_MIN;
        } else if (sig == 8 && (b[7] & 0x80)) {
            v.uns = 1;
            v.u = u;
        } else {
            v.i = (int64_t)u;
        }
        return v;
    }
    v.big = 1;
    v.i = neg ? INT64_MIN : INT64_MAX;
    return v;
}

/* Reads a newline-terminated text argument (protocol 0 opcodes). */
static int read_line(md_pkl *p, const unsigned char **s, size_t *n, md_err *err)
{
    for (size_t i = 0;; i++) {
        int rc = need(p, i + 1, err);
        if (rc)
            return rc;
        if (p->buf[p->pos + i] == '\n') {
            *s = p->buf + p->pos;
            *n = i;
            p->pos += i + 1;
            return MD_OK;
        }
        if (i > 4096)
            return md_err_set(err, MD_E_LIMIT, p->op_off, "text argument too long");
    }
}

static int op_text_int(md_pkl *p, md_err *err)
{
    const unsigned char *s;
    size_t n;
    int rc = read_line(p, &s, &n, err);
    if (rc)
        return rc;
    char tmp[64];
    if (n && s[n - 1] == 'L')
        n--;
    if (n == 0 || n >= sizeof tmp)
        return md_err_set(err, MD_E_FORMAT, p->op_off, "bad INT/LONG argument");
    memcpy(tmp, s, n);
    tmp[n] = 0;
    md_pv v = {0};
    if (!strcmp(tmp, "00") || !strcmp(tmp, "01")) {
        v.t = PV_BOOL;
        v.i = tmp[1] == '1';
        return push(p, v, err);
    }
    char *end;
    v.t = PV_INT;
    v.i = strtoll(tmp, &end, 10);
    if (*end)
        return md_err_set(err, MD_E_FORMAT, p->op_off, "bad INT/LONG argument");
    return push(p, v, err);
}

static int op_text_float(md_pkl *p, md_err *err)
{
    const unsigned char *s;
    size_t n;
    int rc = read_line(p, &s, &n, err);
    if (rc)
        return rc;
    char tmp[128];
    if (n == 0 || n >= sizeof tmp)
        return md_err_set(err, MD_E_FORMAT, p->op_off, "bad FLOAT argument");
    memcpy(tmp, s, n);
    tmp[n] = 0;
    char *end;
    md_pv v = {0};
    v.t = PV_FLOAT;
    v.f = strtod(tmp, &end);
    if (*end)
        return md_err_set(err, MD_E_FORMAT, p->op_off, "bad FLOAT argument");
    return push(p, v, err);
}

/* STRING / UNICODE (protocol 0): quoted or raw text; escapes are kept
 * verbatim, which is enough for keys and names. */
static int op_text_str(md_pkl *p, int quoted, md_err *err)
{
    const unsigned char *s;
    size_t n;
    int rc = read_line(p, &s, &n, err);
    if (rc)
        return rc;
    if (quoted) {
        if (n < 2 || (s[0] != '\'' && s[0] != '"') || s[n - 1] != s[0])
            return md_err_set(err, MD_E_FORMAT, p->op_off, "bad STRING argument");
        s++;
        n -= 2;
    }
    return push_str(p, s, n, PV_STR, err);
}

/* ---- memo ---------------------------------------------------------------- */

/* A memo slot is 8 bytes, not a 16-byte md_pv: snapshots memoize hundreds
 * of thousands of values, and each page of memo is a page fault. The low 3
 * bits tag it: a container is its pointer (slab objects are 16-aligned)
 * tagged with its type, so a get never touches the object; strings,
 * references and small ints are inline; constants and anything wider
 * (floats, 64-bit and big ints) are tag 7, inline or an index into
 * memo_full. 0 = never stored. */
enum { MT_LIST, MT_TUPLE, MT_DICT, MT_STR, MT_BYTES, MT_REF, MT_INT, MT_OTHER };

/* The inline encodings; 0 when v needs the side table. */
__attribute__((always_inline)) static inline int memo_pack(const md_pv *v, uint64_t *out)
{
    int plain = !v->big && !v->uns;
    if ((v->t == PV_DICT || v->t == PV_LIST || v->t == PV_TUPLE) && plain && !v->s &&
        v->o && ((uintptr_t)v->o & 7) == 0) {
        *out = (uint64_t)(uintptr_t)v->o | (uint64_t)(v->t - PV_LIST);
        return 1;
    }
    if ((v->t == PV_STR || v->t == PV_BYTES) && plain && !v->i) {
        *out = (uint64_t)v->s << 3 | (v->t == PV_STR ? MT_STR : MT_BYTES);
        return 1;
    }
    if (v->t == PV_REF && plain && !v->s && v->u < (1ULL << 60)) {
        *out = v->u << 3 | MT_REF;
        return 1;
    }
    if (v->t == PV_INT && plain && !v->s && v->i >= -(1LL << 59) && v->i < (1LL << 59)) {
        *out = (uint64_t)v->i << 3 | MT_INT;
        return 1;
    }
    if ((v->t == PV_NONE || v->t == PV_BOOL) && plain && !v->s && (v->i == 0 || v->i == 1)) {
        *out = (uint64_t)v->i << 9 | (uint64_t)v->t << 4 | MT_OTHER; /* bit 3 clear */
        return 1;
    }
    return 0;
}

/* Memo slot idx (*m) := v in its inline form, noting the slot on a
 * container that has none yet; 0 when v needs the side table. */
__attribute__((always_inline)) static inline int memo_slot(uint64_t *m, size_t idx,
                                                          const md_pv *v)
{
    if (!memo_pack(v, m))
        return 0;
    if ((*m & 7) <= MT_DICT && !v->o->memo)
        v->o->memo = (uint32_t)idx + 1;
    return 1;
}

static inline int memo_encode(md_pkl *p, const md_pv *v, uint64_t *out, md_err *err)
{
    if (memo_pack(v, out))
        return MD_OK;
    if (md_grow((void **)&p->memo_full, &p->fullcap, p->nfull + 1, sizeof *p->memo_full))
        return md_err_set(err, MD_E_NOMEM, p->op_off, "out of memory");
    p->memo_full[p->nfull] = *v;
    *out = (uint64_t)p->nfull++ << 4 | 8 | MT_OTHER;
    return MD_OK;
}

/* Stores a whole value as two 8-byte words (type and string id, then the
 * payload): field by field it was five stores a push. */
_Static_assert(sizeof(md_pv) == 16 && offsetof(md_pv, s) == 4 && offsetof(md_pv, i) == 8,
               "pv_store writes md_pv as two words");
static inline void pv_store(md_pv *d, unsigned t, uint32_t s, uint64_t u)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    uint64_t w[2] = {(uint64_t)t | (uint64_t)s << 32, u};
    memcpy(d, w, sizeof w);
#else
    memset(d, 0, sizeof *d);
    d->t = (uint8_t)t, d->s = s, d->u = u;
#endif
}

/* LONG1 at b (16 bytes readable there) of at most 9 bytes into *d. */
static inline void long1_value(const unsigned char *b, md_pv *d)
{
    unsigned n = b[1];
    if (n > 8) {
        *d = make_long(b + 2, n);
        return;
    }
    uint64_t u = 0; /* one 8-byte load, masked and sign-extended */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    memcpy(&u, b + 2, 8);
#else
    u = md_rd_le(b + 2, 8);
#endif
    /* shifted up and back down: masked and sign-extended with no branch
     * (the masks and tests took 18 instructions a LONG1, big_gamma's
     * addresses and times) */
    unsigned sh = (64 - 8 * n) & 63;
    int64_t s = (int64_t)(u << sh) >> sh;
    pv_store(d, PV_INT, 0, n ? (uint64_t)s : 0);
}

/* Writes slot m (stored, not 0) as a value into *d. */
static inline void memo_decode(const md_pkl *p, uint64_t m, md_pv *d)
{
    unsigned tag = (unsigned)(m & 7);
    if (tag <= MT_DICT)
        pv_store(d, PV_LIST + tag, 0, m & ~7ULL);
    else if (tag <= MT_BYTES)
        pv_store(d, tag == MT_STR ? PV_STR : PV_BYTES, (uint32_t)(m >> 3), 0);
    else if (tag == MT_REF)
        pv_store(d, PV_REF, 0, m >> 3);
    else if (tag == MT_INT)
        pv_store(d, PV_INT, 0, (uint64_t)((int64_t)m >> 3));
    else if (m & 8)
        *d = p->memo_full[m >> 4];
    else
        pv_store(d, (unsigned)(m >> 4 & 31), 0, m >> 9);
}

/* Room in the memo for slot idx: the array grown if it must be, and the
 * pages of the next stretch of it allocated at once (md_big_ahead), not a
 * fault each; memocap is where that stretch ends, so the fast paths come
 * here again at it. -1 out of memory. */
static int memo_room(md_pkl *p, size_t idx)
{
    if (idx >= p->memomap &&
        md_big_grow((void **)&p->memo, &p->memomap, idx + 1, sizeof *p->memo))
        return -1;
    p->memocap = md_big_ahead(p->memo, p->memomap, idx, sizeof *p->memo);
    return 0;
}

/* A memo slot the second reader filled, used after the first took its
 * part: the read is made again whole (md_pkl_hole_hit). */
static int hole(md_pkl *p, uint64_t idx, md_err *err)
{
    p->hole_hit = 1;
    return md_err_set(err, MD_E_FORMAT, p->op_off,
                      "memo slot %llu of the part read on another thread is used after it",
                      (unsigned long long)idx);
}

static int remote_get(md_pkl *p, size_t idx, md_err *err);

static int memo_put(md_pkl *p, uint64_t idx, md_err *err)
{
    if (!p->sp)
        return md_err_set(err, MD_E_FORMAT, p->op_off, "memo store on empty stack");
    /* Bound the memo by the input consumed: an index far beyond anything a
     * real pickler could have numbered is a forged allocation request. */
    uint64_t bound = 2 * (uint64_t)(p->base + (int64_t)p->pos) + 1024;
    if (idx > bound || idx > UINT32_MAX)
        return md_err_set(err, MD_E_LIMIT, p->op_off,
                          "memo index %llu is implausibly large",
                          (unsigned long long)idx);
    if (idx >= p->hole_lo && idx < p->hole_hi)
        return hole(p, idx, err);
    if (idx >= p->memocap && memo_room(p, idx))
        return md_err_set(err, MD_E_NOMEM, p->op_off, "out of memory");
    if (idx < p->nmemo && p->memo[idx])
        p->memo_gen++; /* an overwrite: lists recognised by bytes may differ */
    /* slots past nmemo are uninitialized: mark only the gap as unset, so
     * the untouched capacity costs no page faults */
    for (size_t i = p->nmemo; i < idx; i++)
        p->memo[i] = 0;
    const md_pv *v = &p->stack[p->sp - 1];
    int rc = memo_encode(p, v, &p->memo[idx], err);
    if (rc)
        return rc;
    if ((v->t == PV_DICT || v->t == PV_LIST || v->t == PV_TUPLE) && !v->o->memo)
        v->o->memo = (uint32_t)idx + 1;
    if (idx >= p->nmemo)
        p->nmemo = idx + 1;
    return MD_OK;
}

static inline int memo_get(md_pkl *p, uint64_t idx, md_err *err)
{
    if (idx >= p->nmemo || !p->memo[idx]) {
        if (idx < p->nremote)
            return remote_get(p, (size_t)idx, err);
        if (idx >= p->hole_lo && idx < p->hole_hi)
            return hole(p, idx, err);
        return md_err_set(err, MD_E_FORMAT, p->op_off,
                          "memo index %llu was never stored", (unsigned long long)idx);
    }
    md_pv v;
    memo_decode(p, p->memo[idx], &v);
    return push(p, v, err);
}

static int op_text_memo(md_pkl *p, int put, md_err *err)
{
    const unsigned char *s;
    size_t n;
    int rc = read_line(p, &s, &n, err);
    if (rc)
        return rc;
    uint64_t idx = 0;
    if (n == 0 || n > 10)
        return md_err_set(err, MD_E_FORMAT, p->op_off, "bad memo index");
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return md_err_set(err, MD_E_FORMAT, p->op_off, "bad memo index");
        idx = idx * 10 + (uint64_t)(s[i] - '0');
    }
    return put ? memo_put(p, idx, err) : memo_get(p, idx, err);
}

/* ---- containers ---------------------------------------------------------- */

/* A dict the hook took is now only a record index: its stack slot and its
 * memo slot become PV_REF and the container is reused, so a trace of
 * millions of entries does not keep millions of empty dict headers. */
static void retire_taken(md_pkl *p, md_pv *slot, pv_obj *o, uint32_t ref)
{
    if (o->memo && o->memo - 1 < p->nmemo) {
        uint64_t *m = &p->memo[o->memo - 1];
        if (*m == ((uint64_t)(uintptr_t)o | MT_DICT))
            *m = (uint64_t)ref << 3 | MT_REF;
    }
    memset(slot, 0, sizeof *slot);
    slot->t = PV_REF;
    slot->u = ref;
    items_release(p, o->items, o->cap);
    memset(o, 0, sizeof *o);
    memcpy(&o->items, &p->objfree, sizeof o);
    p->objfree = o;
}

/* A list of consecutive record references (a device trace: millions of
 * them) keeps only their count: extends the list's run with the leading
 * values that continue it and returns how many it took. */
static size_t ref_run(pv_obj *o, const md_pv *v, size_t n)
{
    if (!n || v[0].t != PV_REF)
        return 0;
    if (o->run_n == 0) {
        if (v[0].u > UINT32_MAX)
            return 0;
        o->run_first = (uint32_t)v[0].u;
    }
    /* each reference the next, the run under UINT32_MAX / 2 and its
     * values within 32 bits: one compare an item */
    uint64_t next = (uint64_t)o->run_first + o->run_n;
    size_t room = UINT32_MAX / 2 - o->run_n, k = 0;
    if (next > UINT32_MAX)
        room = 0;
    else if (UINT32_MAX - next + 1 < room)
        room = (size_t)(UINT32_MAX - next + 1);
    if (n > room)
        n = room;
    while (k < n && v[k].t == PV_REF && v[k].u == next + k)
        k++;
    o->run_n += (uint32_t)k;
    return k;
}

/* Appends values [from, sp) to the list at `target`, offering dicts to the
 * hook first. */
static int list_extend(md_pkl *p, md_pv *target, size_t from, md_err *err)
{
    if (target->t != PV_LIST)
        return md_err_set(err, MD_E_FORMAT, p->op_off, "APPEND to a non-list");
    pv_obj *o = target->o;
    if (o->taken)
        return md_err_set(err, MD_E_FORMAT, p->op_off, "APPEND to a consumed list");
    if (p->hook) {
        for (size_t i = from; i < p->sp; i++) {
            md_pv *it = &p->stack[i];
            if (it->t != PV_DICT)
                continue;
            pv_obj *d = it->o;
            if (d->taken == PVO_RELEASED)
                continue; /* converted by its owner, kept as a reference */
            if (d->taken) { /* another reference to a taken dict */
                uint32_t ref = d->cache;
                memset(it, 0, sizeof *it);
                it->t = PV_REF;
                it->u = ref;
                continue;
            }
            if (d->offered) /* declined before (frames, segments): once is enough */
                continue;
            uint32_t ref;
            int rc = p->hook(p->hook_ctx, it, &ref, p->op_off, err);
            if (rc < 0)
                return rc;
            if (rc == 1)
                retire_taken(p, it, d, ref);
            else
                d->offered = 1;
        }
    }
    size_t i = o->n ? from : ref_run(o, p->stack + from, p->sp - from) + from;
    int rc = obj_add(p, o, p->stack + i, p->sp - i, err);
    p->sp = from;
    return rc;
}

/* Whether the dict at target, whose items are the stack's [from, sp), is
 * one to offer the hook whole: fresh (nothing added, never offered) and
 * with whole key-value pairs. */
static inline int offerable(const md_pkl *p, const md_pv *target, size_t from)
{
    return p->hook && target->t == PV_DICT && !target->o->taken && !target->o->offered &&
           target->o->n == 0 && p->sp > from && !((p->sp - from) & 1);
}

/* Offers the fresh dict at target, whose items are the stack's [from, sp),
 * to the hook straight from the stack: a trace entry is then converted
 * without ever being copied into a dict. 1 if taken (the stack ends at
 * from), 0 if declined (marked offered), or the hook's error. */
static int offer_dict(md_pkl *p, md_pv *target, size_t from, md_err *err)
{
    pv_obj *o = target->o, view;
    memset(&view, 0, sizeof view);
    view.items = p->stack + from;
    view.n = view.cap = (uint32_t)(p->sp - from);
    view.kind = PVO_DICT;
    md_pv tmp = *target;
    tmp.o = &view;
    uint32_t ref;
    int rc = p->hook(p->hook_ctx, &tmp, &ref, p->op_off, err);
    if (rc < 0)
        return rc;
    if (rc == 1) {
        retire_taken(p, target, o, ref);
        p->sp = from;
        return 1;
    }
    o->offered = 1;
    return 0;
}

static int dict_update(md_pkl *p, md_pv *target, size_t from, int batch, md_err *err)
{
    if (target->t != PV_DICT)
        return md_err_set(err, MD_E_FORMAT, p->op_off, "SETITEM on a non-dict");
    if (target->o->taken)
        return md_err_set(err, MD_E_FORMAT, p->op_off,
                          "SETITEM on a dict that was already consumed");
    if ((p->sp - from) % 2)
        return md_err_set(err, MD_E_FORMAT, p->op_off, "SETITEMS with an odd item count");
    pv_obj *o = target->o;
    if (batch && offerable(p, target, from)) {
        int rc = offer_dict(p, target, from, err);
        if (rc)
            return rc < 0 ? rc : MD_OK;
    }
    int rc = obj_add(p, o, p->stack + from, p->sp - from, err);
    p->sp = from;
    return rc;
}

static int make_tuple(md_pkl *p, size_t from, md_err *err)
{
    md_pv t;
    memset(&t, 0, sizeof t);
    int rc = new_obj(p, PVO_TUPLE, &t, err);
    if (rc)
        return rc;
    rc = obj_add(p, t.o, p->stack + from, p->sp - from, err);
    if (rc)
        return rc;
    p->sp = from;
    return push(p, t, err);
}

/* The second reader's part ends after a batch of the list it began in
 * that no other batch follows: 1 (as STOP) there, else 0. */
static int second_end(md_pkl *p)
{
    if (p->sp != 1 || p->nmarks || (p->pos < p->len && p->buf[p->pos] == '('))
        return 0;
    p->ended = 1;
    return 1;
}

static int op_collection(md_pkl *p, int op, md_err *err)
{
    size_t mark;
    int rc;
    switch (op) {
    case 'a': /* APPEND */
        if ((rc = need_stack(p, 2, 0, err)))
            return rc;
        rc = list_extend(p, &p->stack[p->sp - 2], p->sp - 1, err);
        return rc || !p->second ? rc : second_end(p);
    case 'e': /* APPENDS */
    case 0x90: /* ADDITEMS (sets are read as lists) */
        if ((rc = pop_mark(p, &mark, err)) || (rc = need_stack(p, 0, mark, err)))
            return rc;
        if (mark == 0)
            return md_err_set(err, MD_E_FORMAT, p->op_off, "APPENDS without a list");
        rc = list_extend(p, &p->stack[mark - 1], mark, err);
        return rc || !p->second ? rc : second_end(p);
    case 's': /* SETITEM */
        if ((rc = need_stack(p, 3, 0, err)))
            return rc;
        return dict_update(p, &p->stack[p->sp - 3], p->sp - 2, 0, err);
    case 'u': /* SETITEMS */
        if ((rc = pop_mark(p, &mark, err)))
            return rc;
        if (mark == 0 || mark > p->sp)
            return md_err_set(err, MD_E_FORMAT, p->op_off, "SETITEMS without a dict");
        return dict_update(p, &p->stack[mark - 1], mark, 1, err);
    case 'l': case 'd': case 0x91: { /* LIST, DICT, FROZENSET from marked items */
        md_pv c;
        if ((rc = pop_mark(p, &mark, err)))
            return rc;
        if ((rc = new_obj(p, op == 'd' ? PVO_DICT : PVO_LIST, &c, err)))
            return rc;
        if (op == 'd' && (p->sp - mark) % 2)
            return md_err_set(err, MD_E_FORMAT, p->op_off, "DICT with an odd item count");
        if ((rc = obj_add(p, c.o, p->stack + mark, p->sp - mark, err)))
            return rc;
        p->sp = mark;
        return push(p, c, err);
    }
    case 't':
        if ((rc = pop_mark(p, &mark, err)))
            return rc;
        return make_tuple(p, mark, err);
    case 0x85: case 0x86: case 0x87: {
        size_t k = (size_t)(op - 0x84);
        if ((rc = need_stack(p, k, p->nmarks ? p->marks[p->nmarks - 1] : 0, err)))
            return rc;
        return make_tuple(p, p->sp - k, err);
    }
    }
    return md_err_set(err, MD_E_FORMAT, p->op_off, "internal: bad collection opcode");
}

/* ---- lists of converted containers (md_pkl_list_fn) ------------------------ */

#define FUSED_MAX 999 /* Python's pickler writes APPENDS in batches of 1000 */

/* Reads a memo index opcode (MEMOIZE, BINPUT, LONG_BINPUT) at b[*q]. */
static int memo_target(const md_pkl *p, const unsigned char *b, size_t len, size_t *q,
                       uint64_t *idx)
{
    if (*q < len && b[*q] == 0x94) {
        *idx = p->nmemo, *q += 1;
    } else if (*q + 2 <= len && b[*q] == 'q') {
        *idx = b[*q + 1], *q += 2;
    } else if (*q + 5 <= len && b[*q] == 'r') {
        *idx = md_le32(b + *q + 1), *q += 5;
    } else {
        return 0;
    }
    return 1;
}

/* The cache of the converted dict memo slot idx (of nm) holds, or 0. */
static inline uint32_t converted_in(const uint64_t *memo, size_t nm, size_t idx)
{
    if (idx >= nm)
        return 0;
    uint64_t m = memo[idx] - MT_DICT; /* a dict's pointer, or low bits set */
    if (m & 7)
        return 0;
    const pv_obj *o = (const pv_obj *)(uintptr_t)m;
    return o->taken == PVO_RELEASED ? o->cache : 0;
}

static uint32_t converted(const md_pkl *p, uint32_t idx)
{
    return converted_in(p->memo, p->nmemo, idx);
}

/* Makes room in the table of list slots for one more (at most half full),
 * rehashing on the stored hashes. 1 if the slots moved, 0 if not, -1 if
 * there is no memory. */
static int slots_room(struct list_slot **t, size_t *cap, size_t n)
{
    if ((n + 1) * 2 <= *cap)
        return 0;
    size_t nc = *cap ? *cap * 2 : 256;
    struct list_slot *nt = calloc(nc, sizeof *nt);
    if (!nt)
        return -1;
    for (size_t i = 0; i < *cap; i++) {
        if (!(*t)[i].o)
            continue;
        size_t k = (size_t)(*t)[i].hash & (nc - 1);
        while (nt[k].o)
            k = (k + 1) & (nc - 1);
        nt[k] = (*t)[i];
        nt[k].next = 0; /* slots moved: the successions start again */
    }
    free(*t);
    *t = nt;
    *cap = nc;
    return 1;
}

/* The released list standing for every list converted to cache. */
static pv_obj *shared_list(md_pkl *p, uint32_t cache, md_err *err)
{
    /* the hook's values count what it converted: never more than bytes read */
    if (cache == 0 || cache > (uint64_t)p->base + p->pos + 1) {
        md_err_set(err, MD_E_LIMIT, p->op_off, "list cache %u out of range", cache);
        return NULL;
    }
    if (cache > p->nshared) {
        if (md_grow((void **)&p->shared, &p->sharedcap, cache, sizeof *p->shared)) {
            md_err_set(err, MD_E_NOMEM, p->op_off, "out of memory");
            return NULL;
        }
        /* each new stack is the next cache: slots set a page at a time,
         * not one a stack (nor the whole room: pages it may never use) */
        size_t upto = cache + 4096 / sizeof *p->shared;
        if (upto > p->sharedcap)
            upto = p->sharedcap;
        memset(p->shared + p->nshared, 0, (upto - p->nshared) * sizeof *p->shared);
        p->nshared = upto;
    }
    pv_obj **slot = &p->shared[cache - 1];
    if (!*slot) {
        md_pv v;
        if (new_obj(p, PVO_LIST, &v, err))
            return NULL;
        v.o->taken = PVO_RELEASED;
        v.o->cache = cache;
        *slot = v.o;
    }
    return *slot;
}

#define SEEN_TRIAL 256

/* Turns the table off for the rest of the input (see seen_off). */
static void seen_stop(md_pkl *p)
{
    free(p->seen);
    free(p->seenbytes);
    p->seen = NULL;
    p->seenbytes = NULL;
    p->nseen = p->seencap = p->seenlen = p->seenbytecap = 0;
    p->seen_last = SIZE_MAX;
    p->seen_off = 1;
}

static const unsigned char *seen_bytes(const md_pkl *p, const struct list_slot *e)
{
    return (p->own ? p->seenbytes : p->buf) + e->off;
}

/* The slot of the list body b[0..n) (hash: md_hash of it) in p->seen, or
 * the empty slot where it would go. */
static size_t seen_slot(const md_pkl *p, const unsigned char *b, size_t n, uint64_t hash)
{
    size_t k = (size_t)hash & (p->seencap - 1);
    while (p->seen[k].o && !(p->seen[k].hash == hash && p->seen[k].len == n &&
                             !memcmp(seen_bytes(p, &p->seen[k]), b, n)))
        k = (k + 1) & (p->seencap - 1);
    return k;
}

/* The converted list whose body is b[0..n), or NULL. */
static const struct list_slot *seen_find(md_pkl *p, const unsigned char *b, size_t n,
                                         uint64_t hash)
{
    if (!p->seencap)
        return NULL;
    size_t k = seen_slot(p, b, n, hash);
    if (!p->seen[k].o || p->seen[k].gen != p->memo_gen)
        return NULL;
    p->seen_last = k;
    return &p->seen[k];
}

static int seen_is(const md_pkl *p, const struct list_slot *e, const unsigned char *b,
                   size_t avail, int term)
{
    return e->o && e->gen == p->memo_gen && e->len < avail && b[e->len] == term &&
           !memcmp(seen_bytes(p, e), b, e->len);
}

/* A guess without a walk or a hash: the list that followed the one read
 * last the time before (a training step allocates in the same order as
 * the step before it, so frames lists recur in sequence), else the one
 * read last again; checked against the body at b (avail bytes there) and
 * the opcode term after it. */
static const struct list_slot *seen_again(md_pkl *p, const unsigned char *b, size_t avail,
                                          int term)
{
    if (p->seen_last >= p->seencap)
        return NULL;
    const struct list_slot *last = &p->seen[p->seen_last];
    if (last->next && seen_is(p, &p->seen[last->next - 1], b, avail, term)) {
        p->seen_last = last->next - 1;
        return &p->seen[p->seen_last];
    }
    return seen_is(p, last, b, avail, term) ? last : NULL;
}

/* Remembers that the list in slot k followed the one in slot prev. */
static void seen_follows(md_pkl *p, size_t prev, size_t k)
{
    if (prev < p->seencap && k < p->seencap)
        p->seen[prev].next = (uint32_t)k + 1;
}

/* Remembers that the list body b[0..n) converted to o. Failing to (no
 * memory) only means the next such list is read anew. */
static void seen_add(md_pkl *p, const unsigned char *b, size_t n, uint64_t hash, pv_obj *o)
{
    if (++p->seen_new >= SEEN_TRIAL && p->seen_hits * 4 < p->seen_new) {
        seen_stop(p);
        return;
    }
    int moved = slots_room(&p->seen, &p->seencap, p->nseen);
    if (moved < 0)
        return;
    if (moved)
        p->seen_last = SIZE_MAX;
    size_t k = seen_slot(p, b, n, hash);
    if (p->seen[k].o) { /* the same bytes, from before a memo overwrite */
        p->seen[k].o = o;
        p->seen[k].gen = p->memo_gen;
        p->seen_last = k;
        return;
    }
    size_t off = (size_t)(b - p->buf);
    if (p->own) { /* the window moves on: keep a copy */
        if (md_grow((void **)&p->seenbytes, &p->seenbytecap, p->seenlen + n, 1))
            return;
        memcpy(p->seenbytes + p->seenlen, b, n);
        off = p->seenlen;
        p->seenlen += n;
    }
    p->seen[k] = (struct list_slot){hash, off, (uint32_t)n, p->memo_gen, 0, o};
    p->nseen++;
    p->seen_last = k;
}

/* The end of a run of up to FUSED_MAX memo gets starting at b[q] (BINGET
 * 2 bytes, LONG_BINGET 5); idx[] gets their memo indices, *n their count. */
static size_t gets_end(const unsigned char *b, size_t len, size_t q, uint32_t *idx, size_t *n)
{
    *n = 0;
    while (*n < FUSED_MAX) {
        if (q + 2 <= len && b[q] == 'h')
            idx[*n] = b[q + 1], q += 2;
        else if (q + 5 <= len && b[q] == 'j')
            idx[*n] = md_le32(b + q + 1), q += 5;
        else
            break;
        ++*n;
    }
    return q;
}

/* The memo get at b[*q] (5 bytes readable there) of a converted dict: 1
 * with *c its cache and *q past it, 0 if b[*q] is not a get, -1 if the
 * get is of anything else. */
static inline int get_converted(const uint64_t *memo, size_t nm, const unsigned char *b,
                                size_t *q, uint32_t *c)
{
    size_t idx;
    if (b[*q] == 'j') /* past the first 256 memo slots: most frames */
        idx = md_le32(b + *q + 1), *q += 5;
    else if (b[*q] == 'h')
        idx = b[*q + 1], *q += 2;
    else
        return 0;
    return (*c = converted_in(memo, nm, idx)) ? 1 : -1;
}

/* gets_end and converted() in one pass, for a list not looked up in
 * p->seen: the end of the run of up to FUSED_MAX gets at b[q] with cache[]
 * their caches and *n their count, or 0 at the first item that is not a
 * converted dict. A get in the last 4 bytes is left to the opcodes, which
 * read it alike. */
static size_t gets_converted(const md_pkl *p, const unsigned char *b, size_t len, size_t q,
                             uint32_t *cache, size_t *n)
{
    const uint64_t *memo = p->memo;
    size_t nm = p->nmemo, k = 0;
    if (len < 5)
        return 0;
    /* one bound a get while FUSED_MAX gets (2 bytes or more each) cannot
     * be passed, then two */
    size_t stop = len - 5;
    if (stop > q && stop - q > 2 * (FUSED_MAX - 1))
        stop = q + 2 * (FUSED_MAX - 1);
    int r = 1;
    while (q <= stop && (r = get_converted(memo, nm, b, &q, &cache[k])) > 0)
        k++;
    while (r > 0 && k < FUSED_MAX && q + 5 <= len &&
           (r = get_converted(memo, nm, b, &q, &cache[k])) > 0)
        k++;
    if (r < 0)
        return 0;
    *n = k;
    return q;
}

/* The list whose body starts at b[q], just after EMPTY_LIST and its memo
 * opcode, if the list hook may convert it (see md_pkl_list_fn): either one
 * APPEND or APPENDS of memo references to converted dicts, or nothing
 * before the SETITEMS that makes it the last value of a dict. A list whose
 * bytes were converted before is that list again. Reads without side
 * effects on the stack or memo; 1 with *out the converted list and *end
 * the position after it, 0 if it is not such a list, or an error. */
static int fuse_body(md_pkl *p, size_t q, pv_obj **out, size_t *end_out, md_err *err)
{
    const unsigned char *b = p->buf;
    size_t len = p->len;
    pv_obj *o = NULL;
    int rc;
    if (q >= len)
        return 0;
    if (b[q] == 'u') { /* empty, ending a dict */
        uint32_t cache;
        if ((rc = p->list_hook(p->list_ctx, NULL, 0, &cache, p->op_off, err)) != 1)
            return rc;
        if (!(o = shared_list(p, cache, err)))
            return MD_E_NOMEM;
        p->empty_list = o; /* the hook's answer for no items does not change */
    } else { /* (MARK gets APPENDS) or (get APPEND) */
        int marked = b[q] == '(', term = marked ? 'e' : 'a';
        size_t body = q + (size_t)marked, n, end;
        int use_seen = !p->seen_off;
        size_t prev = p->seen_last, cap0 = p->seencap;
        const struct list_slot *e = use_seen ? seen_again(p, b + body, len - body, term) : NULL;
        uint32_t caches[FUSED_MAX]; /* memo indices, then their caches */
        if (e) {
            end = body + e->len;
        } else {
            /* looked up by its bytes first, or converted as its end is found */
            if (use_seen)
                end = gets_end(b, len, body, caches, &n);
            else if (!(end = gets_converted(p, b, len, body, caches, &n)))
                return 0; /* an item that is not a converted dict */
            if (end >= len || b[end] != term || (marked ? n < 2 : n != 1))
                return 0;
        }
        uint64_t hash = e || !use_seen ? 0 : md_hash(b + body, end - body, 0);
        if (e || (use_seen && (e = seen_find(p, b + body, end - body, hash)) != NULL)) {
            o = e->o; /* this list's bytes converted before */
            p->seen_hits++;
        } else {
            uint32_t cache;
            if (use_seen)
                for (size_t i = 0; i < n; i++)
                    if (!(caches[i] = converted(p, caches[i])))
                        return 0; /* an item that is not a converted dict */
            if ((rc = p->list_hook(p->list_ctx, caches, n, &cache, p->op_off, err)) != 1)
                return rc;
            if (!(o = shared_list(p, cache, err)))
                return MD_E_NOMEM;
            if (use_seen)
                seen_add(p, b + body, end - body, hash, o);
        }
        if (use_seen && p->seencap == cap0) /* slots not moved since prev was taken */
            seen_follows(p, prev, p->seen_last);
        q = end + 1;
    }
    *out = o;
    *end_out = q;
    return 1;
}

/* After EMPTY_LIST: reads the list whole if it is memoized and one the
 * list hook may convert (fuse_body). Returns 1 if the list was converted
 * and pushed, 0 to read it opcode by opcode. */
static int fused_list(md_pkl *p, md_err *err)
{
    size_t q = p->pos, end;
    uint64_t idx;
    pv_obj *o;
    if (!memo_target(p, p->buf, p->len, &q, &idx) || idx > p->nmemo)
        return 0;
    int rc = fuse_body(p, q, &o, &end, err);
    if (rc != 1)
        return rc;
    md_pv v;
    memset(&v, 0, sizeof v);
    v.t = PV_LIST;
    v.o = o;
    if ((rc = push(p, v, err)) || (rc = memo_put(p, idx, err)))
        return rc;
    p->pos = end;
    return 1;
}

/* GCC merges the handlers' jumps into a shared one unless told not to
 * (its manual's advice for computed gotos); clang takes no such option. */
#if defined(__GNUC__) && !defined(__clang__)
#define THREADED_DISPATCH __attribute__((optimize("no-gcse", "no-crossjumping")))
#else
#define THREADED_DISPATCH
#endif

/* ---- records: trace entries read from their bytes ----------------------- */

/* A record's memoized list at b (`]` MEMOIZE, 16 bytes readable there), one
 * the list hook converts (fuse_body), into *d and memo slot nm: the
 * position after it, NULL where the record path does not read it (*rc 0)
 * or on an error (*rc). */
static const unsigned char *rec_list(md_pkl *p, const unsigned char *b, size_t nm,
                                     md_pv *d, int *rc, md_err *err)
{
    *rc = 0;
    if (b[1] != 0x94 || !p->list_hook || nm >= p->memocap)
        return NULL;
    pv_obj *o = p->empty_list;
    size_t end = (size_t)(b + 2 - p->buf);
    if (!o || b[2] != 'u') {
        p->pos = (size_t)(b + 1 - p->buf); /* as the opcode loop would stand */
        p->op_off = p->base + (b - p->buf);
        int got = fuse_body(p, end, &o, &end, err);
        if (got != 1) {
            *rc = got; /* 0: not such a list, or an error */
            return NULL;
        }
    }
    pv_store(d, PV_LIST, 0, (uint64_t)(uintptr_t)o);
    return memo_slot(&p->memo[nm], nm, d) ? p->buf + end : NULL;
}

/* A remembered key no bytes match. */
static inline void key_forget(struct rec_key *key)
{
    key->mask = 0, key->pat = 1;
}

/* Forgets every remembered key (a memo slot overwritten, a new map). */
static void rec_forget(md_pkl *p)
{
    for (size_t i = 0; i <= REC_PAIRS; i++) {
        key_forget(&p->rec_keys[i]);
        key_forget(&p->rec_keys_in[i]);
    }
}

/* A record's key at b, a memo get of a string, and where its value goes:
 * its slot by the record map, or MD_PKL_REC_SLOTS for a key whose value is
 * dropped. The position after it, or NULL if it is not such a key or one
 * mapped to MD_PKL_REC_LEAVE. A key whose memo slot was stored before this
 * record (below dict) is remembered in *key for the next record's pair at
 * this position. */
static const unsigned char *rec_key(const md_pkl *p, const unsigned char *b, size_t dict,
                                    size_t nm, struct rec_key *key, unsigned *slot)
{
    uint32_t idx;
    unsigned len;
    if (b[0] == 'h')
        idx = b[1], len = 2;
    else if (b[0] == 'j')
        idx = md_le32(b + 1), len = 5;
    else
        return NULL;
    if (idx >= nm || (p->memo[idx] & 7) != MT_STR)
        return NULL;
    uint32_t sid = (uint32_t)(p->memo[idx] >> 3);
    uint32_t k = sid - p->rec_key0;
    *slot = k < p->rec_nmap ? p->rec_map[k] : MD_PKL_REC_SKIP;
    if (*slot == MD_PKL_REC_LEAVE)
        return NULL;
    if (*slot == MD_PKL_REC_SKIP)
        *slot = MD_PKL_REC_SLOTS;
    key_forget(key);
    key->sid = sid; /* this record's, remembered or not (rec_spill) */
    if (idx < dict) {
        uint64_t w;
        memcpy(&w, b, sizeof w);
        key->mask = first_bytes(len);
        key->pat = w & key->mask;
        key->len = (uint8_t)len;
        key->slot = (uint8_t)*slot;
    }
    return b + len;
}

/* What the opcode loop needs of a record read so far, should the record
 * path stop after records of its list were taken (rec_spill). */
struct rec_read {
    size_t dict;                /* the record's memo slot */
    const struct rec_key *keys; /* its keys, by pair (their sid) */
    const md_pv *vals;          /* its values, by pair */
};

/* Where the record path stops after a record's list took records (they
 * cannot be read again), the opcode loop goes on from b with the state its
 * own opcodes would have left there: the dict, built and memoized, its
 * MARK, nkeys keys and nvals values of the record's pairs (nvals is nkeys
 * or nkeys - 1), then, stopped inside the list, its open batch: the
 * batch's MARK (marked) and the references it read, nrefs from first and
 * *extra where set. Returns 2 (read on from p->pos), or an error. */
static int rec_spill(md_pkl *p, const unsigned char *b, const struct rec_read *r,
                     size_t nkeys, size_t nvals, size_t nm, int marked, uint32_t first,
                     uint32_t nrefs, const uint32_t *extra, md_err *err)
{
    size_t n = 1 + nkeys + nvals + nrefs + (extra != NULL);
    if ((p->sp + n > p->scap &&
         md_grow((void **)&p->stack, &p->scap, p->sp + n, sizeof *p->stack)) ||
        (p->nmarks + 2 > p->mcap &&
         md_grow((void **)&p->marks, &p->mcap, p->nmarks + 2, sizeof *p->marks)))
        return md_err_set(err, MD_E_NOMEM, p->op_off, "out of memory");
    md_pv dict;
    int rc = new_obj(p, PVO_DICT, &dict, err);
    if (rc)
        return rc;
    memo_slot(&p->memo[r->dict], r->dict, &dict); /* a container: always inline */
    p->stack[p->sp++] = dict;
    p->marks[p->nmarks++] = p->sp;
    for (size_t i = 0; i < nkeys; i++) {
        pv_store(&p->stack[p->sp++], PV_STR, r->keys[i].sid, 0);
        if (i < nvals)
            p->stack[p->sp++] = r->vals[i];
    }
    if (marked)
        p->marks[p->nmarks++] = p->sp;
    for (uint32_t i = 0; i < nrefs; i++)
        pv_store(&p->stack[p->sp++], PV_REF, 0, (uint64_t)first + i);
    if (extra)
        pv_store(&p->stack[p->sp++], PV_REF, 0, *extra);
    p->nmemo = nm;
    p->pos = (size_t)(b - p->buf);
    p->nspills++;
    return 2;
}

/* An int opcode at b (16 bytes readable): its value into *d and the
 * position after it, or NULL. */
static const unsigned char *rec_int(const unsigned char *b, md_pv *d)
{
    switch (b[0]) {
    case 'K': pv_store(d, PV_INT, 0, b[1]); return b + 2;
    case 'M': pv_store(d, PV_INT, 0, (uint64_t)(b[1] | b[2] << 8)); return b + 3;
    case 'J': pv_store(d, PV_INT, 0, (uint64_t)(int64_t)(int32_t)md_le32(b + 1)); return b + 5;
    case 0x8a:
        if (b[1] > 8)
            return NULL;
        long1_value(b, d);
        return b + 2 + b[1];
    }
    return NULL;
}

/* An int and TUPLE2 at b, after a record's last value *t (torch writes
 * each segment's 'segment_pool_id' afresh): *t becomes the pair as
 * make_tuple builds it. The position after TUPLE2, or NULL (*rc 0, or an
 * error). */
static const unsigned char *rec_tuple2(md_pkl *p, const unsigned char *b, md_pv *t, int *rc,
                                       md_err *err)
{
    md_pv two[2], tup;
    *rc = 0;
    const unsigned char *q = rec_int(b, &two[1]);
    if (!q || q[0] != 0x86)
        return NULL;
    two[0] = *t;
    if ((*rc = new_obj(p, PVO_TUPLE, &tup, err)) || (*rc = obj_add(p, tup.o, two, 2, err)))
        return NULL;
    *t = tup;
    return q + 1;
}

/* An empty list at b that is not a record's last value (EMPTY_LIST
 * MEMOIZE, then the next key: a memo get no APPEND follows; a segment's
 * 'frames' where nothing was recorded), built as the opcodes build it,
 * into *d and memo slot nm. The position after it, or NULL (*rc 0, or an
 * error). */
static const unsigned char *rec_empty_list(md_pkl *p, const unsigned char *b, size_t nm,
                                           md_pv *d, int *rc, md_err *err)
{
    *rc = 0;
    if (b[1] != 0x94 || nm >= p->memocap ||
        !((b[2] == 'h' && b[4] != 'a') || (b[2] == 'j' && b[7] != 'a')))
        return NULL;
    if ((*rc = new_obj(p, PVO_LIST, d, err)))
        return NULL;
    memo_slot(&p->memo[nm], nm, d);
    return b + 2;
}

THREADED_DISPATCH static int rec_fast(md_pkl *p, struct rec_key *keys, int nest, md_err *err);
#define REC_REST 3 /* rec_fast: records taken, the next left to the opcodes */

/* A record of a record's list at q, read and taken (rec_fast) with memo
 * slots from nm, where the opcode loop's stack would hold sp values: 1
 * with its reference, 0 if it is not, or an error. */
static int rec_inner(md_pkl *p, const unsigned char *q, size_t nm, size_t sp, uint32_t *ref,
                     md_err *err)
{
    if (sp + 2 + 2 * REC_PAIRS > p->lim.max_stack) /* rec_fast's own bound, there */
        return 0;
    p->pos = (size_t)(q - p->buf);
    p->nmemo = nm;
    int got = rec_fast(p, p->rec_keys_in, 0, err);
    if (got == 1)
        *ref = (uint32_t)p->stack[--p->sp].u;
    return got;
}

/* A record's list of records at b, its j-th value (a segment's 'blocks'):
 * EMPTY_LIST MEMOIZE, then batches of MARK records APPENDS or a record and
 * APPEND. Each record is read and taken (rec_inner), the list left as
 * list_extend leaves a run of references, in *d and memo slot nm. The
 * position after it (p->nmemo past the memo slots filled), or NULL with
 * *rc: 0 if nothing was taken (the record is read again), 2 where it
 * stopped after taking some (rec_spill), or an error. */
static const unsigned char *rec_nested(md_pkl *p, const unsigned char *b, size_t nm, md_pv *d,
                                       const struct rec_read *r, size_t j, int *rc, md_err *err)
{
    const unsigned char *lim = p->buf + p->len - 16 - 8;
    size_t pos0 = p->pos, sp = p->sp + 3 + 2 * j; /* the loop's: dict, pairs, key, list */
    uint32_t taken = 0;
    md_pv list;
    *rc = 0;
    if (nm >= p->memocap || p->nmarks + 3 > p->lim.max_depth)
        return NULL;
    if ((*rc = new_obj(p, PVO_LIST, &list, err)))
        return NULL;
    memo_slot(&p->memo[nm], nm, &list);
    *d = list;
    nm++;
    pv_obj *o = list.o;
    for (b += 2;;) {
        int marked = b <= lim && b[0] == '(';
        if (b > lim || (!marked && b[0] != '}')) {
            p->nmemo = nm;
            return b; /* the record's next key, or its SETITEMS (or the window's end) */
        }
        const unsigned char *q = b + marked;
        uint32_t first = 0, n = 0, ref; /* the batch's references */
        int got = 0;
        while (q <= lim && q[0] == '}' && q[1] == 0x94 && q[2] == '(' && /* as rec_fast reads */
               (got = rec_inner(p, q, nm, sp + n, &ref, err)) == 1) {
            nm = p->nmemo;
            if (n ? ref != first + n : o->run_n && ref != o->run_first + o->run_n) {
                *rc = rec_spill(p, p->buf + p->pos, r, j + 1, j + 1, nm, marked, first, n,
                                &ref, err); /* not the run's next: list_extend's items */
                return NULL;
            }
            first = n ? first : ref;
            n++, taken++;
            q = p->buf + p->pos;
            if (!marked)
                break;
        }
        if (got < 0) {
            *rc = got;
            return NULL;
        }
        if (q <= lim && q[0] == (marked ? 'e' : 'a') && (marked || n == 1)) {
            if (n && !o->run_n) /* appended, as ref_run counts them */
                o->run_first = first;
            o->run_n += n;
            b = q + 1;
            continue;
        }
        if (!taken) { /* nothing done that cannot be read again */
            p->pos = pos0, p->nmemo = r->dict;
            return NULL;
        }
        *rc = rec_spill(p, q, r, j + 1, j + 1, nm, marked, first, n, NULL, err);
        return NULL;
    }
}

/* At EMPTY_DICT MEMOIZE MARK (p->pos at EMPTY_DICT, 16 bytes readable):
 * a flat dict (a trace entry, a block) read straight from its bytes into
 * the record hook's slots (md_pkl_record_fn), the dict never built; where
 * nest is set, with one value a list of such records (a segment and its
 * blocks: rec_nested). keys: what the pairs at each position were last
 * time. Memo slots it fills count only once the hook takes it. 1 if taken
 * (its PV_REF pushed, memo and position as the opcodes would leave them),
 * 0 to read it opcode by opcode, 2 where it stopped after its list took
 * records (the opcodes' state left at p->pos: rec_spill), or an error.
 * Where nest is set it goes on to the records after it in the same batch:
 * REC_REST where it took some and stopped at one the opcodes must read
 * (p->pos at its EMPTY_DICT; not offered to rec_fast again, since a list
 * it began there moved p->pos and filled memo slots), 1 where it took
 * them all.
 * Short of 2 it never grows the stack or the memo, nor moves the window:
 * the opcode loop reloads only its position, stack top and memo count
 * after it. */
THREADED_DISPATCH static int rec_fast(md_pkl *p, struct rec_key *keys, int nest, md_err *err)
{
    /* each value opcode's handler, reached by its own indirect jump */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Woverride-init"
#ifdef __clang__
#pragma GCC diagnostic ignored "-Winitializer-overrides"
#endif
    static const void *const val[256] = {
        [0 ... 255] = &&other, ['K'] = &&binint1, ['M'] = &&binint2, ['J'] = &&binint,
        [0x8a] = &&long1, ['h'] = &&binget, ['j'] = &&long_binget, [0x8c] = &&short_str,
        ['N'] = &&none, [0x88] = &&newtrue, [0x89] = &&newfalse, [']'] = &&list};
#pragma GCC diagnostic pop
    const unsigned char *buf = p->buf, *b = buf + p->pos + 3, *nb;
    uint64_t *memo = p->memo;
    /* a pair (a key of at most 5 bytes, a value of at most 10, MEMOIZE)
     * starting at or before lim is within the 16 bytes readable past the
     * opcode at buf + len - 16 */
    const unsigned char *lim = buf + p->len - 16 - 8;
    if (p->len < 64)
        return 0;
    if (p->key_gen != p->memo_gen) { /* a memo slot overwritten: keys may read otherwise */
        rec_forget(p);
        p->key_gen = p->memo_gen;
    }
    int taken = 0; /* a record taken: a stop returns REC_REST */
    size_t dict, nm, rec_pos, rec_sp; /* rec_: where the record began */
    md_pv vals[REC_PAIRS], *d;            /* the next pair's value: d - vals pairs read */
    int nested;                           /* a list's records taken: no way back */
    const struct rec_key *key;            /* the next pair's remembered key */
    const md_pv *v[MD_PKL_REC_SLOTS + 1]; /* the last: values dropped */
record:
    dict = p->nmemo, nm = dict + 1, rec_pos = p->pos, rec_sp = p->sp;
    /* bounds the opcodes would meet: the stack (the dict, then its pairs),
     * the MARK, and a memo slot for the dict */
    if (nm > p->memocap || p->sp + 1 >= p->scap || p->nmarks >= p->lim.max_depth ||
        p->sp + 2 + 2 * REC_PAIRS > p->lim.max_stack)
        return taken ? REC_REST : 0;
    memo[dict] = 0; /* the dict's own slot reads as unset until it is taken */
    d = vals, nested = 0, key = keys;
    md_zero_small(v, sizeof v);
/* stops with nk keys and nv values of the pairs read (b where they end) */
#define RR (&(const struct rec_read){dict, keys, vals})
    size_t nk, nv; /* spilled: keys and values read */
#define STOP(k, v_)                       \
    do {                                  \
        if (__builtin_expect(nested, 0)) { \
            nk = (k), nv = (v_);          \
            goto spill;                   \
        }                                 \
        if (taken)                        \
            goto rest;                    \
        return 0;                         \
    } while (0)
    for (;;) {
#define J ((size_t)(d - vals)) /* pairs read */
        if (b > lim)
            STOP(J, J);
        uint64_t w, m;
        uint32_t idx;
        unsigned slot;
        memcpy(&w, b, sizeof w);
        if ((w & key->mask) == key->pat) { /* as in the last record: not SETITEMS */
            slot = key->slot;
            b += key->len;
        } else if (b[0] == 'u') {
            break;
        } else if (b[0] != 'h' && b[0] != 'j') { /* not a key: a pair's second int? */
            int rc = 0;
            if (d == vals || !(nb = rec_tuple2(p, b, d - 1, &rc, err))) {
                if (rc < 0)
                    return rc;
                STOP(J, J);
            }
            b = nb, d--; /* the last value was the pair's first */
            goto memoize;
        } else if (d == vals + REC_PAIRS || !(nb = rec_key(p, b, dict, nm, &keys[J], &slot))) {
            STOP(J, J);
        } else {
            b = nb;
        }
        v[slot] = d;
        key++;
        goto *val[b[0]];
    binint1:
        pv_store(d, PV_INT, 0, b[1]);
        b += 2;
        goto memoize;
    binint2:
        pv_store(d, PV_INT, 0, (uint64_t)(b[1] | b[2] << 8));
        b += 3;
        goto memoize;
    binint:
        pv_store(d, PV_INT, 0, (uint64_t)(int64_t)(int32_t)md_le32(b + 1));
        b += 5;
        goto memoize;
    long1:
        if (b[1] > 9)
            STOP(J + 1, J);
        long1_value(b, d);
        b += 2 + b[1];
        goto memoize;
    binget:
        idx = b[1];
        if (idx >= nm || !(m = memo[idx]))
            STOP(J + 1, J);
        b += 2;
        goto got;
    long_binget:
        idx = md_le32(b + 1);
        if (idx >= nm || !(m = memo[idx]))
            STOP(J + 1, J);
        b += 5;
    got:
        if ((m & 7) == MT_STR) /* most values got are strings */
            pv_store(d, PV_STR, (uint32_t)(m >> 3), 0);
        else
            memo_decode(p, m, d);
        goto memoize;
    short_str: {
        int64_t id = short_hit(p, b);
        if (id < 0)
            STOP(J + 1, J);
        pv_store(d, PV_STR, (uint32_t)id, 0);
        b += 2 + b[1];
        if (b[0] == 0x94) { /* memoized: as memo_slot packs a string */
            if (nm >= p->memocap)
                STOP(J + 1, J + 1);
            memo[nm++] = (uint64_t)id << 3 | MT_STR;
            b++;
        }
        d++;
        continue;
    }
    none:
        pv_store(d, PV_NONE, 0, 0);
        b += 1;
        goto memoize;
    newtrue:
        pv_store(d, PV_BOOL, 0, 1);
        b += 1;
        goto memoize;
    newfalse:
        pv_store(d, PV_BOOL, 0, 0);
        b += 1;
        goto memoize;
    list: {
        int rc;
        if ((b[2] == '}' || (b[2] == '(' && b[3] == '}')) && b[1] == 0x94 && nest && !nested) {
            if (!(nb = rec_nested(p, b, nm, d, RR, J, &rc, err))) {
                if (rc)
                    return rc;
                STOP(0, 0); /* nothing of this record taken (not nested) */
            }
            nested = 1;
            nm = p->nmemo;
        } else if (!(nb = rec_list(p, b, nm, d, &rc, err)) &&
                   (rc || !(nb = rec_empty_list(p, b, nm, d, &rc, err)))) {
            if (rc)
                return rc;
            STOP(J + 1, J);
        } else {
            nm++;
        }
        b = nb, d++;
        continue;
    }
    other:
        STOP(J + 1, J);
    memoize:
        if (b[0] == 0x94) { /* within the 16 bytes: a value is at most 10 */
            if (nm >= p->memocap || !memo_slot(&memo[nm], nm, d))
                STOP(J + 1, J + 1);
            nm++, b++;
        }
        d++;
    }
    if (d == vals) /* SETITEMS of nothing offers nothing */
        STOP(0, 0);
    p->op_off = p->base + (b - buf);
    uint32_t ref;
    int rc = p->rec_fn(p->rec_ctx, v, &ref, p->op_off, err);
    if (rc < 0)
        return rc;
    if (rc == 0)
        STOP(J, J);
    memo[dict] = (uint64_t)ref << 3 | MT_REF; /* as retire_taken leaves it */
    p->nmemo = nm;
    pv_store(&p->stack[p->sp++], PV_REF, 0, ref);
    p->pos = (size_t)(b + 1 - buf);
    p->nrecords++;
    taken = 1;
    /* the next record of a batch (EMPTY_DICT MEMOIZE MARK) straight on:
     * a return to the opcode loop and back was 50 instructions a trace
     * entry. One this cannot take is left to that loop from its first
     * byte, as a first one is (the state stays as this one left it). */
    if (nest && b + 1 <= lim && md_le32(b) == ('u' | '}' << 8 | 0x94 << 16 | (uint32_t)'(' << 24)) {
        b += 4;
        goto record;
    }
    return 1;
spill:
    return rec_spill(p, b, RR, nk, nv, nm, 0, 0, 0, NULL, err);
rest: /* as the last record taken left it (a list begun moves p->pos) */
    p->pos = rec_pos, p->sp = rec_sp, p->nmemo = dict;
    return REC_REST;
#undef J
#undef RR
#undef STOP
}

/* ---- the loop -------------------------------------------------------------- */

static int refused(md_pkl *p, int op, md_err *err)
{
    return md_err_set(err, MD_E_UNSAFE, p->op_off,
                      "opcode %s would import or construct an object; "
                      "memdiag never does that (not an allocator snapshot, or a hostile file)",
                      md_pkl_opname(op));
}

static int step_simple(md_pkl *p, int op, md_err *err)
{
    md_pv v = {0};
    int rc;
    switch (op) {
    case 'N': v.t = PV_NONE; return push(p, v, err);
    case 0x88: case 0x89: v.t = PV_BOOL; v.i = op == 0x88; return push(p, v, err);
    case 'J': case 'K': case 'M': {
        int n = op == 'J' ? 4 : op == 'K' ? 1 : 2;
        if ((rc = need(p, (size_t)n, err)))
            return rc;
        uint64_t u = md_rd_le(p->buf + p->pos, n);
        p->pos += (size_t)n;
        v.t = PV_INT;
        v.i = op == 'J' ? (int64_t)(int32_t)(uint32_t)u : (int64_t)u;
        return push(p, v, err);
    }
    case 0x8a: case 0x8b: {
        int lb = op == 0x8a ? 1 : 4;
        if ((rc = need(p, (size_t)lb, err)))
            return rc;
        uint64_t n = md_rd_le(p->buf + p->pos, lb);
        p->pos += (size_t)lb;
        if (n > p->lim.max_str)
            return md_err_set(err, MD_E_LIMIT, p->op_off, "LONG4 of %llu bytes",
                              (unsigned long long)n);
        if ((rc = need(p, (size_t)n, err)))
            return rc;
        v = make_long(p->buf + p->pos, (size_t)n);
        p->pos += (size_t)n;
        return push(p, v, err);
    }
    case 'G': {
        if ((rc = need(p, 8, err)))
            return rc;
        uint64_t u = 0;
        for (int i = 0; i < 8; i++)
            u = (u << 8) | p->buf[p->pos + i];
        p->pos += 8;
        v.t = PV_FLOAT;
        memcpy(&v.f, &u, 8);
        return push(p, v, err);
    }
    case 'I': case 'L': return op_text_int(p, err);
    case 'F': return op_text_float(p, err);
    case 'S': return op_text_str(p, 1, err);
    case 'V': return op_text_str(p, 0, err);
    case 'X': return op_sized(p, 4, PV_STR, err);
    case 0x8c: return op_sized(p, 1, PV_STR, err);
    case 0x8d: return op_sized(p, 8, PV_STR, err);
    case 'T': return op_sized(p, 4, PV_NONE, err); /* BINSTRING, signed len */
    case 'U': return op_sized(p, 1, PV_STR, err);
    case 'B': return op_sized(p, 4, PV_BYTES, err);
    case 'C': return op_sized(p, 1, PV_BYTES, err);
    case 0x8e: case 0x96: return op_sized(p, 8, PV_BYTES, err);
    case ']': case 0x8f:
        if ((rc = new_obj(p, PVO_LIST, &v, err)))
            return rc;
        return push(p, v, err);
    case '}':
        if ((rc = new_obj(p, PVO_DICT, &v, err)))
            return rc;
        return push(p, v, err);
    case ')':
        return make_tuple(p, p->sp, err);
    }
    return 1; /* not a simple opcode */
}

static int step_stack(md_pkl *p, int op, md_err *err)
{
    int rc;
    size_t mark;
    switch (op) {
    case '(':
        if (p->nmarks >= p->lim.max_depth)
            return md_err_set(err, MD_E_LIMIT, p->op_off,
                              "nesting deeper than %zu MARKs", p->lim.max_depth);
        if (p->nmarks == p->mcap &&
            md_grow((void **)&p->marks, &p->mcap, p->nmarks + 1, sizeof *p->marks))
            return md_err_set(err, MD_E_NOMEM, p->op_off, "out of memory");
        p->marks[p->nmarks++] = p->sp;
        return MD_OK;
    case '0':
        if ((rc = need_stack(p, 1, p->nmarks ? p->marks[p->nmarks - 1] : 0, err)))
            return rc;
        p->sp--;
        return MD_OK;
    case '1':
        if ((rc = pop_mark(p, &mark, err)))
            return rc;
        p->sp = mark;
        return MD_OK;
    case '2':
        if ((rc = need_stack(p, 1, 0, err)))
            return rc;
        return push(p, p->stack[p->sp - 1], err);
    case 'p': case 'g': return op_text_memo(p, op == 'p', err);
    case 'q': case 'r': case 'h': case 'j': {
        int n = (op == 'q' || op == 'h') ? 1 : 4;
        if ((rc = need(p, (size_t)n, err)))
            return rc;
        uint64_t idx = md_rd_le(p->buf + p->pos, n);
        p->pos += (size_t)n;
        return (op == 'q' || op == 'r') ? memo_put(p, idx, err) : memo_get(p, idx, err);
    }
    case 0x94: return memo_put(p, p->nmemo, err);
    case 0x80:
        if ((rc = need(p, 1, err)))
            return rc;
        p->proto = p->buf[p->pos++];
        if (p->proto > 5)
            return md_err_set(err, MD_E_FORMAT, p->op_off,
                              "pickle protocol %d is newer than this reader knows (2-5)",
                              p->proto);
        return MD_OK;
    case 0x95: /* FRAME: an 8-byte length we do not need */
        if ((rc = need(p, 8, err)))
            return rc;
        p->pos += 8;
        return MD_OK;
    }
    return 1;
}

static int step_rest(md_pkl *p, int op, md_err *err)
{
    switch (op) {
    case 'a': case 'e': case 0x90: case 's': case 'u': case 'l':
    case 'd': case 0x91: case 't': case 0x85: case 0x86: case 0x87:
        return op_collection(p, op, err);
    case 'c': case 0x93: case 'R': case 'b': case 'i': case 'o':
    case 0x81: case 0x92: case 'P': case 'Q': case 0x82: case 0x83:
    case 0x84:
        return refused(p, op, err);
    case 0x97: case 0x98:
        return md_err_set(err, MD_E_FORMAT, p->op_off,
                          "opcode %s needs out-of-band buffers; snapshots never use them",
                          md_pkl_opname(op));
    }
    return md_err_set(err, MD_E_FORMAT, p->op_off, "unknown opcode 0x%02x", op);
}

/* At the first reader's split_at: the second reader's part offered
 * (once). 1 if it was taken (p->pos past it), 0 if not, or an error. */
static int split_offer(md_pkl *p, md_err *err)
{
    p->split_at = SIZE_MAX;
    return p->split_fn(p->split_ctx, p, err);
}

/* One dispatch per opcode: the frequent ones first, each family to its
 * handler. Returns 1 only for STOP. */
static inline int dispatch(md_pkl *p, int op, md_err *err)
{
    int rc;
    switch (op) {
    case 'h': /* BINGET */
        if ((rc = need(p, 1, err)))
            return rc;
        return memo_get(p, p->buf[p->pos++], err);
    case 0x94: /* MEMOIZE */
        return memo_put(p, p->nmemo, err);
    case 'j': /* LONG_BINGET */
        if ((rc = need(p, 4, err)))
            return rc;
        p->pos += 4;
        return memo_get(p, md_rd_le(p->buf + p->pos - 4, 4), err);
    case '(': /* MARK */
        if (__builtin_expect((size_t)p->op_off == p->split_at, 0)) {
            if ((rc = split_offer(p, err)) != 0)
                return rc < 0 ? rc : MD_OK;
        }
        if (p->nmarks < p->mcap && p->nmarks < p->lim.max_depth) {
            p->marks[p->nmarks++] = p->sp;
            return MD_OK;
        }
        return step_stack(p, op, err);
    case 'K': { /* BININT1 */
        md_pv v;
        if ((rc = need(p, 1, err)))
            return rc;
        memset(&v, 0, sizeof v);
        v.t = PV_INT;
        v.i = p->buf[p->pos++];
        return push(p, v, err);
    }
    case '0': case '1': case '2': case 'p': case 'g': case 'q': case 'r': case 0x80: case 0x95:
        return step_stack(p, op, err);
    case ']': /* EMPTY_LIST */
        if (p->list_hook && (rc = fused_list(p, err)) != 0)
            return rc < 0 ? rc : MD_OK;
        return step_simple(p, op, err);
    case 'a': case 'e': case 0x90: case 's': case 'u': case 'l':
    case 'd': case 0x91: case 't': case 0x85: case 0x86: case 0x87:
        return op_collection(p, op, err);
    case '.':
        return 1;
    case 'N': case 0x88: case 0x89: case 'J': case 'M': case 0x8a: case 0x8b:
    case 'G': case 'I': case 'L': case 'F': case 'S': case 'V': case 'X': case 0x8c:
    case 0x8d: case 'T': case 'U': case 'B': case 'C': case 0x8e: case 0x96:
    case 0x8f: case '}': case ')':
        return step_simple(p, op, err);
    }
    return step_rest(p, op, err);
}


/* Writes a scalar straight into its stack slot: built in a local and
 * copied, it would be stored in pieces and reloaded whole, which the CPU
 * cannot forward from its store buffer. */
static inline void set_scalar(md_pv *d, uint8_t t, int64_t i)
{
    pv_store(d, t, 0, (uint64_t)i);
}


/* The fast path: the opcodes that make up nearly all of a snapshot
 * (memo gets and puts, small ints, LONG1, MARK, constants), run on local
 * copies of the reader's position and stack so the compiler keeps them in
 * registers. Anything else, or anything unusual about these (a missing
 * memo slot, a full stack, the end of the window), returns to the general
 * path, which re-executes that opcode with full checks and error reports.
 * SETITEMS offers a fresh dict to the item hook from here (a trace entry
 * per SETITEMS), else runs the general handler, and EMPTY_LIST the list
 * fusion (a frames list per entry); their errors are returned. */
THREADED_DISPATCH static int run_fast(md_pkl *p, md_err *err)
{
    /* Threaded dispatch: each handler jumps to the next opcode's handler
     * through its own indirect branch, so the CPU predicts a trace entry's
     * opcode sequence from where it is in it (one shared switch jump
     * mispredicted on most opcodes). */
#pragma GCC diagnostic push /* every opcode to out first, then the handled ones */
#pragma GCC diagnostic ignored "-Woverride-init"
#ifdef __clang__
#pragma GCC diagnostic ignored "-Winitializer-overrides"
#endif
    static const void *const op[256] = {
        [0 ... 255] = &&out, ['h'] = &&binget, ['j'] = &&long_binget,
        [0x94] = &&memoize, ['K'] = &&binint1, ['M'] = &&binint2, ['J'] = &&binint,
        [0x8a] = &&long1, ['('] = &&mark, [0x8c] = &&short_str, ['N'] = &&none,
        [0x88] = &&newtrue, [0x89] = &&newfalse, ['}'] = &&empty_dict, ['u'] = &&setitems,
        [']'] = &&empty_list};
#pragma GCC diagnostic pop
    /* the position and the stack's top as pointers: an opcode is then an
     * add and a store, not an index scaled and added each time */
    const unsigned char *buf, *lim, *b; /* lim: the last opcode with 16 bytes behind it */
    md_pv *stack, *top, *full; /* full: the last slot an opcode may fill */
    uint64_t *memo;
    size_t nmemo, memocap, split;
#define LOAD()                                                              \
    do {                                                                    \
        size_t n_ = p->scap < p->lim.max_stack ? p->scap : p->lim.max_stack; \
        buf = p->buf, lim = buf + p->len - 16, b = buf + p->pos;            \
        split = p->split_at - (size_t)p->base; /* wraps past SIZE_MAX/2: none */ \
        stack = p->stack, top = stack + p->sp;                              \
        full = stack + (n_ ? n_ - 1 : 0);                                   \
        memo = p->memo, nmemo = p->nmemo, memocap = p->memocap;             \
    } while (0)
/* the state as the general path expects it while running the opcode at b */
#define SAVE()                                                                    \
    (p->pos = (size_t)(b + 1 - buf), p->sp = (size_t)(top - stack), p->nmemo = nmemo, \
     p->op_off = p->base + (b - buf))
#define NEXT()                                      \
    do {                                            \
        if (b > lim || top >= full)                 \
            goto out;                               \
        goto *op[b[0]];                             \
    } while (0)
    if (p->len < 16) /* (lim would point before the window) */
        return MD_OK;
    LOAD();
    NEXT();
binget:
    if (b[1] >= nmemo || !memo[b[1]])
        goto out;
    memo_decode(p, memo[b[1]], top++);
    b += 2;
    NEXT();
long_binget: {
    uint32_t idx = md_le32(b + 1);
    if (idx >= nmemo || !memo[idx])
        goto out;
    memo_decode(p, memo[idx], top++);
    b += 5;
    NEXT();
}
memoize: {
    if (top == stack || nmemo >= memocap)
        goto out;
    if (!memo_slot(&memo[nmemo], nmemo, top - 1))
        goto out; /* the side table: the general path */
    nmemo++;
    b += 1;
    NEXT();
}
binint1:
    set_scalar(top++, PV_INT, b[1]);
    b += 2;
    NEXT();
binint2:
    set_scalar(top++, PV_INT, (int64_t)(b[1] | b[2] << 8));
    b += 3;
    NEXT();
binint:
    set_scalar(top++, PV_INT, (int64_t)(int32_t)md_le32(b + 1));
    b += 5;
    NEXT();
long1:
    if (b[1] > 9)
        goto out;
    long1_value(b, top++);
    b += 2 + (size_t)b[1];
    NEXT();
mark:
    if (p->nmarks >= p->mcap || p->nmarks >= p->lim.max_depth || (size_t)(b - buf) == split)
        goto out;
    p->marks[p->nmarks++] = (size_t)(top - stack);
    b += 1;
    NEXT();
short_str: { /* SHORT_BINUNICODE of a string seen recently */
    int64_t id = short_hit(p, b);
    if (id < 0)
        goto out;
    pv_store(top++, PV_STR, (uint32_t)id, 0);
    b += 2 + (size_t)b[1];
    NEXT();
}
none:
    set_scalar(top++, PV_NONE, 0);
    b += 1;
    NEXT();
newtrue:
    set_scalar(top++, PV_BOOL, 1);
    b += 1;
    NEXT();
newfalse:
    set_scalar(top++, PV_BOOL, 0);
    b += 1;
    NEXT();
empty_dict: { /* a record read whole (rec_fast), else a dict from the
                 reused containers of taken entries */
    if (p->rec_fn && b[1] == 0x94 && b[2] == '(') {
        SAVE();
        p->pos = (size_t)(b - buf);
        int rc = rec_fast(p, p->rec_keys, 1, err);
        if (rc < 0)
            return rc;
        if (rc == 2) { /* stopped inside, the opcodes' state left: all of it again */
            LOAD();
            NEXT();
        }
        if (rc) { /* it moved on and pushed; the window, stack and memo stay put */
            b = buf + p->pos, top = stack + p->sp, nmemo = p->nmemo;
            if (rc == 1)
                NEXT();
            if (b > lim || top >= full) /* REC_REST: this dict by its opcodes */
                goto out;
        }
    }
    pv_obj *o = p->objfree;
    if (!o)
        goto out;
    memcpy(&p->objfree, &o->items, sizeof o);
    memset(o, 0, sizeof *o);
    o->kind = PVO_DICT;
    pv_store(top++, PV_DICT, 0, (uint64_t)(uintptr_t)o);
    b += 1;
    NEXT();
}
empty_list: { /* a frames list, converted whole by the list hook (fused_list) */
    if (!p->list_hook)
        goto out;
    pv_obj *o = p->empty_list;
    if (o && b[1] == 0x94 && b[2] == 'u' && nmemo < memocap) { /* memoized, ending a dict */
        pv_store(top, PV_LIST, 0, (uint64_t)(uintptr_t)o);
        if (memo_pack(top, &memo[nmemo])) {
            top++, nmemo++;
            b += 2;
            NEXT();
        }
    }
    SAVE();
    int rc = fused_list(p, err);
    if (rc == 0) /* a list to build (its bytes already looked at: not again) */
        rc = step_simple(p, ']', err);
    if (rc < 0)
        return rc;
    LOAD();
    NEXT();
}
setitems: { /* a trace entry is complete: offered to the hook, else the general handler */
    SAVE();
    size_t mark = p->nmarks ? p->marks[p->nmarks - 1] : 0;
    int taken = 0;
    if (mark > 0 && mark <= p->sp && offerable(p, &stack[mark - 1], mark) &&
        (taken = offer_dict(p, &stack[mark - 1], mark, err)) < 0)
        return taken;
    if (taken) {
        p->nmarks--; /* the mark SETITEMS pops */
    } else {
        int rc = op_collection(p, 'u', err); /* a dict to build (offered already, if fresh) */
        if (rc)
            return rc;
    }
    LOAD(); /* all of it again: whatever the hook does to the reader stays valid */
    NEXT();
}
#undef NEXT
#undef SAVE
#undef LOAD
out:
    p->pos = (size_t)(b - buf);
    p->sp = (size_t)(top - stack);
    p->nmemo = nmemo;
    return MD_OK;
}

/* What a file that is not a pickle looks like, for the error line. */
static const char *not_pickle_hint(const unsigned char *b, size_t n)
{
    if (n >= 4 && !memcmp(b, "PK\x03\x04", 4))
        return ": a zip archive, as torch.save writes (an allocator snapshot is what "
               "torch.cuda.memory._dump_snapshot writes)";
    if (b[0] == '{' || b[0] == '[')
        return ": JSON text (memdiag reads the seed script's JSON reports; other JSON, "
               "such as a profiler trace, is not a snapshot)";
    return "";
}

int md_pkl_run(md_pkl *p, md_pv *result, md_err *err)
{
    int rc = need(p, 1, err);
    if (rc == MD_E_FORMAT && p->eof) /* else a decoder's error, in its own words */
        return md_err_set(err, MD_E_FORMAT, 0, "empty file: not a pickle");
    if (rc)
        return rc;
    int first = p->buf[p->pos];
    if (first != 0x80 && first != '(' && first != '}' && first != ']')
        return md_err_set(err, MD_E_FORMAT, 0, "not a pickle (first byte 0x%02x)%s", first,
                          not_pickle_hint(p->buf + p->pos, p->len - p->pos));
    for (;;) {
        if ((rc = run_fast(p, err)) != MD_OK)
            return rc;
        rc = need(p, 1, err);
        if (rc) {
            if (rc == MD_E_FORMAT && p->eof) /* as above */
                return md_err_set(err, MD_E_FORMAT, p->base + (int64_t)p->len,
                                  "truncated: input ends before the pickle's STOP opcode");
            return rc;
        }
        p->op_off = p->base + (int64_t)p->pos;
        int op = p->buf[p->pos++];
        rc = dispatch(p, op, err);
        if (rc == 1) { /* STOP */
            if (p->sp != 1 || p->nmarks)
                return md_err_set(err, MD_E_FORMAT, p->op_off,
                                  "STOP with %zu values on the stack", p->sp);
            *result = p->stack[0];
            return MD_OK;
        }
        if (rc)
            return rc;
    }
}

int md_pkl_new(md_input *in, md_strtab *strs, md_pkl **out, md_err *err)
{
    md_pkl *p = calloc(1, sizeof *p);
    if (!p || !(p->stack = malloc(1024 * sizeof *p->stack))) {
        free(p);
        return md_err_set(err, MD_E_NOMEM, -1, "out of memory");
    }
    p->scap = 1024;
    /* snapshots memoize a value every 30-60 bytes: a memo this big starts
     * in its own mapping (a hint; see md_big_grow) */
    md_big_grow((void **)&p->memo, &p->memomap, md_input_size_hint(in) / 40, sizeof *p->memo);
    p->memocap = md_big_ahead(p->memo, p->memomap, 0, sizeof *p->memo);
    if (md_input_whole(in, &p->buf, &p->len)) { /* parsed in place: no window */
        p->cap = p->len;
        p->eof = 1;
    } else {
        size_t size = md_input_size_hint(in); /* 0: not a file */
        p->cap = size && size < SMALL_INPUT ? SMALL_WINDOW : WINDOW;
        if (!(p->buf = p->own = malloc(p->cap))) {
            free(p->stack);
            free(p);
            return md_err_set(err, MD_E_NOMEM, -1, "out of memory");
        }
    }
    for (size_t k = 0; k < SHORT_SLOTS; k++)
        p->short_cache[k].n = UINT32_MAX; /* empty */
    rec_forget(p); /* zeroed entries would match anything */
    p->seen_last = SIZE_MAX;
    p->split_at = SIZE_MAX;
    p->in = in;
    p->strs = strs;
    p->lim.max_depth = 512;
    p->lim.max_stack = (size_t)1 << 26;
    p->lim.max_str = (size_t)1 << 30;
    *out = p;
    return MD_OK;
}

void md_pkl_set_hook(md_pkl *p, md_pkl_item_fn fn, void *ctx)
{
    p->hook = fn;
    p->hook_ctx = ctx;
}

void md_pkl_set_list_hook(md_pkl *p, md_pkl_list_fn fn, void *ctx)
{
    p->empty_list = NULL;
    p->list_hook = fn;
    p->list_ctx = ctx;
}

int md_pkl_set_record_hook(md_pkl *p, uint32_t key0, const uint8_t *map, size_t nmap,
                           size_t nslots, md_pkl_record_fn fn, void *ctx)
{
    if (nmap > MD_PKL_REC_KEYS || nslots > MD_PKL_REC_SLOTS)
        return MD_E_ARG;
    for (size_t k = 0; k < nmap; k++)
        if (map[k] >= nslots && map[k] != MD_PKL_REC_SKIP && map[k] != MD_PKL_REC_LEAVE)
            return MD_E_ARG;
    p->rec_fn = fn;
    p->rec_ctx = ctx;
    p->rec_key0 = key0;
    p->rec_nmap = (uint32_t)nmap;
    memcpy(p->rec_map, map, nmap);
    rec_forget(p); /* learnt under the old map */
    return MD_OK;
}

void md_pkl_set_limits(md_pkl *p, const md_pkl_limits *lim)
{
    p->lim = *lim;
}

void md_pkl_release(md_pkl *p, pv_obj *o)
{
    if (o->taken)
        return;
    items_release(p, o->items, o->cap);
    o->items = NULL;
    o->n = o->cap = 0;
    o->run_n = o->run_first = 0; /* a list's records go with it */
    o->taken = PVO_RELEASED;
}

int64_t md_pkl_offset(const md_pkl *p)
{
    return p->base + (int64_t)p->pos;
}

size_t md_pkl_records(const md_pkl *p)
{
    return p->nrecords;
}

size_t md_pkl_spills(const md_pkl *p)
{
    return p->nspills;
}

int md_pkl_protocol(const md_pkl *p)
{
    return p->proto;
}

void md_pkl_free(md_pkl *p)
{
    if (!p)
        return;
    for (struct slab *sl = p->objslab; sl; sl = sl->next)
        for (size_t off = 0; off + sizeof(pv_obj) <= sl->used; off += (sizeof(pv_obj) + 7) & ~(size_t)7) {
            pv_obj *o = (pv_obj *)(void *)(sl->data + off);
            if (o->cap > ((size_t)1 << (SMALL_CLASSES - 1)))
                free(o->items);
        }
    slab_free_all(p->objslab);
    slab_free_all(p->itemslab);
    free(p->stack);
    free(p->marks);
    md_big_free(p->memo, p->memomap, sizeof *p->memo);
    free(p->memo_full);
    free(p->shared);
    free(p->seen);
    free(p->seenbytes);
    free(p->own);
    free(p);
}

/* ---- the read split in two (snapshot/split.c) ------------------------------- */

#define REMOTE_DEPTH 8   /* values got from before the start, one inside another */
#define REMOTE_OPS 4096  /* opcodes of one such value */
#define REMOTE_BYTES 2048 /* bytes read for one (a frame, a string), then 32 times more */
#define REMOTE_BYTES_MAX ((size_t)2 << 20)

static int second_fails(size_t at, const char *what, md_err *err)
{
    return md_err_set(err, MD_E_FORMAT, (int64_t)at, "second reader: %s", what);
}

/* A list filled before the second reader's start: a released list whose
 * cache names its slot (MD_PKL_REMOTE_LIST), for the join to resolve in
 * the first reader's memo (where it is a converted frames list). */
static int remote_list(md_pkl *p, size_t idx, md_err *err)
{
    md_pv v;
    int rc = new_obj(p, PVO_LIST, &v, err);
    if (rc)
        return rc;
    v.o->taken = PVO_RELEASED;
    v.o->cache = MD_PKL_REMOTE_LIST | (uint32_t)(idx + 1);
    memo_slot(&p->memo[idx], idx, &v); /* a container: always inline */
    return push(p, v, err);
}

/* Whether the remote value at p->pos - 1 (its last opcode just run) is
 * complete: one more value than sp0 on the stack, the marks as they were,
 * a dict's batch closed, and no MEMOIZE of it still to come. */
static int remote_done(const md_pkl *p, size_t sp0, size_t nmarks0, int dict, int op)
{
    return p->sp == sp0 + 1 && p->nmarks == nmarks0 && (!dict || op == 'u') &&
           (p->pos >= p->len || p->buf[p->pos] != 0x94);
}

/* The window as it stands, set aside while a value from before the start
 * is read from bytes of its own. */
struct window {
    const unsigned char *buf;
    unsigned char *own;
    size_t cap, pos, len;
    int64_t base;
    int eof;
};

/* Runs the opcodes of the value at `at` (a string, or a dict of one batch)
 * on top of the stack, memo slots from idx, until it is whole. */
static int remote_run(md_pkl *p, size_t idx, size_t at, md_err *err)
{
    size_t sp0 = p->sp, nmarks0 = p->nmarks;
    int dict = (p->remote_at[idx] >> 30) == MD_SPLIT_DICT, rc = MD_OK;
    p->pos = at - (size_t)p->base, p->nmemo = idx;
    for (int k = 0;; k++) {
        if (k == REMOTE_OPS || need(p, 1, err)) {
            rc = second_fails(at, "a value from before its start does not end", err);
            break;
        }
        p->op_off = p->base + (int64_t)p->pos;
        int op = p->buf[p->pos++];
        if ((rc = dispatch(p, op, err)) != 0) {
            if (rc == 1)
                rc = second_fails(at, "STOP inside a value from before its start", err);
            break;
        }
        if (p->sp <= sp0 || p->nmarks < nmarks0) {
            rc = second_fails(at, "a value from before its start is not one", err);
            break;
        }
        if (remote_done(p, sp0, nmarks0, dict, op))
            break;
    }
    if (!rc && !p->memo[idx])
        rc = second_fails(at, "a value from before its start is not memoized", err);
    p->sp = sp0, p->nmarks = nmarks0;
    return rc;
}

/* remote_run over the value's bytes read into a window of their own
 * (REMOTE_BYTES, then more where that cut it short): a reader through a
 * window has only what it read since its start. */
static int remote_windowed(md_pkl *p, size_t idx, size_t at, md_err *err)
{
    struct window w = {p->buf, p->own, p->cap, p->pos, p->len, p->base, p->eof};
    int rc = MD_E_FORMAT;
    for (size_t n = REMOTE_BYTES; n <= REMOTE_BYTES_MAX && rc; n *= 32) {
        unsigned char *b = malloc(n);
        if (!b)
            return md_err_set(err, MD_E_NOMEM, (int64_t)at, "out of memory");
        size_t got = p->remote_read(p->remote_ctx, at, b, n);
        /* eof: need() stops at the value's bytes instead of reading on */
        p->buf = p->own = b, p->cap = n, p->len = got, p->base = (int64_t)at, p->eof = 1;
        rc = remote_run(p, idx, at, err);
        free(p->own);
        p->buf = w.buf, p->own = w.own, p->cap = w.cap, p->pos = w.pos, p->len = w.len;
        p->base = w.base, p->eof = w.eof;
        if (got < n)
            break; /* all there was */
    }
    return rc;
}

/* A string or a dict (a frame) filled before the second reader's start,
 * read again from its bytes on top of the stack, the memo slots it
 * filled then (from idx) filled again; then got as any slot. */
static int remote_read(md_pkl *p, size_t idx, size_t at, md_err *err)
{
    size_t pos0 = p->pos, nmemo0 = p->nmemo;
    int64_t off0 = p->op_off;
    p->remote_depth++;
    int rc = p->own ? remote_windowed(p, idx, at, err) : remote_run(p, idx, at, err);
    p->remote_depth--;
    p->nmemo = nmemo0, p->pos = pos0, p->op_off = off0;
    if (rc)
        return rc;
    md_pv v;
    memo_decode(p, p->memo[idx], &v);
    return push(p, v, err);
}

static int remote_get(md_pkl *p, size_t idx, md_err *err)
{
    size_t at = p->remote_at[idx] & MD_SPLIT_OFFSET;
    unsigned kind = p->remote_at[idx] >> 30;
    if ((!p->own && at >= p->len) || idx >= MD_PKL_REMOTE_LIST - 1)
        return second_fails(at, "a memo slot from before its start out of range", err);
    if (kind == MD_SPLIT_LIST) /* its bytes not read: the join finds it */
        return remote_list(p, idx, err);
    if (kind == MD_SPLIT_OTHER)
        return second_fails(at, "a value from before its start neither a list, a dict "
                                "nor a string", err);
    if (p->remote_depth >= REMOTE_DEPTH)
        return second_fails(at, "values from before its start nest too deep", err);
    return remote_read(p, idx, at, err);
}

void md_pkl_set_split(md_pkl *p, size_t at, md_pkl_split_fn fn, void *ctx)
{
    p->split_at = at;
    p->split_fn = fn;
    p->split_ctx = ctx;
}

int md_pkl_second(md_pkl *p, size_t at, const uint32_t *remote_at, size_t nremote,
                  md_pkl_bytes_fn read, const void *ctx, md_err *err)
{
    md_pv list;
    if (p->own ? !read || p->len || p->base : at >= p->len || p->buf[at] != '(')
        return second_fails(at, "not at a MARK, nor at a window's start", err);
    /* A memo of its own: slots below nremote read as unset until got
     * (remote_get), which a fresh mapping is and a heap array is made;
     * room for a slot a byte to its end, never to move; and 4 KiB pages,
     * as it touches only its own slots and the few it gets */
    size_t esz = sizeof *p->memo, size = p->own ? md_input_size(p->in) : p->len;
    size_t left = size > at ? size - at : 0;
    md_big_free(p->memo, p->memomap, esz);
    p->memo = NULL, p->memomap = 0;
    if (md_big_reserve((void **)&p->memo, &p->memomap, nremote + left + 1, 0, esz))
        return md_err_set(err, MD_E_NOMEM, (int64_t)at, "out of memory");
    if (p->memomap * esz < MD_BIG_MIN)
        memset(p->memo, 0, p->memomap * esz);
    p->memocap = md_big_ahead(p->memo, p->memomap, nremote, esz);
    int rc = new_obj(p, PVO_LIST, &list, err);
    if (rc)
        return rc;
    p->stack[0] = list;
    p->sp = 1;
    if (p->own)
        p->base = (int64_t)at; /* its input stands at `at` */
    else
        p->pos = at;
    p->nmemo = nremote;
    p->remote_at = remote_at;
    p->nremote = nremote;
    p->remote_read = read;
    p->remote_ctx = ctx;
    p->second = 1;
    p->proto = 4;
    return MD_OK;
}

/* The second reader's list: the run of records it took, or NULL where it
 * did not end as a list of records only. */
static const pv_obj *second_list(const md_pkl *b)
{
    if (!b->second || !b->ended || b->sp != 1 || b->stack[0].t != PV_LIST)
        return NULL;
    const pv_obj *o = b->stack[0].o;
    return o->n || o->taken || !o->run_n || o->run_first ? NULL : o;
}

int md_pkl_split_can(const md_pkl *a, const md_pkl_part *part, size_t nrefs)
{
    if (!part->records || a->nmemo != part->nremote || !a->sp ||
        a->stack[a->sp - 1].t != PV_LIST)
        return 0;
    const pv_obj *o = a->stack[a->sp - 1].o;
    return !o->n && !o->taken && o->run_n && (uint64_t)o->run_first + o->run_n == nrefs &&
           (uint64_t)o->run_n + part->records < UINT32_MAX / 2;
}

uint64_t md_pkl_memo_list(const md_pkl *a, size_t idx)
{
    if (idx >= a->nmemo || (a->memo[idx] & 7) != MT_LIST || !a->memo[idx])
        return 0;
    const pv_obj *o = (const pv_obj *)(uintptr_t)(a->memo[idx] & ~7ULL);
    return o->taken == PVO_RELEASED ? o->cache : 0;
}

void md_pkl_second_part(const md_pkl *b, md_pkl_part *part)
{
    const pv_obj *bl = second_list(b);
    part->records = bl ? bl->run_n : 0;
    part->nremote = b->nremote;
    part->nmemo = b->nmemo;
    part->end = (size_t)b->base + b->pos;
    part->taken = b->nrecords;
    part->spills = b->nspills;
}

int md_pkl_split_take(md_pkl *a, const md_pkl_part *part, md_err *err)
{
    size_t lo = a->nmemo, hi = part->nmemo;
    if (hi > a->memocap && memo_room(a, hi))
        return md_err_set(err, MD_E_NOMEM, a->op_off, "out of memory");
    memset(a->memo + lo, 0, (hi - lo) * sizeof *a->memo);
    a->stack[a->sp - 1].o->run_n += part->records;
    a->nmemo = hi;
    a->hole_lo = lo, a->hole_hi = hi;
    size_t held = (size_t)a->base + a->len;
    if (part->end <= held) { /* in the window (or read in place) */
        a->pos = part->end - (size_t)a->base;
    } else { /* the window's rest and the input up to the end skipped */
        int rc = md_input_skip(a->in, part->end - held, err);
        if (rc)
            return rc;
        a->base = (int64_t)part->end, a->pos = a->len = 0;
    }
    a->nrecords += part->taken;
    a->nspills += part->spills;
    return MD_OK;
}

int md_pkl_hole_hit(const md_pkl *p)
{
    return p->hole_hit;
}

/* ---- value helpers ---------------------------------------------------------- */

const md_pv *md_pv_get(const md_strtab *strs, const md_pv *dict, const char *key)
{
    if (!dict || dict->t != PV_DICT || dict->o->taken)
        return NULL;
    size_t kl = strlen(key);
    const pv_obj *o = dict->o;
    for (uint32_t i = 0; i + 1 < o->n; i += 2) {
        const md_pv *k = &o->items[i];
        if (k->t == PV_STR && md_strtab_len(strs, k->s) == kl &&
            !memcmp(md_strtab_get(strs, k->s), key, kl))
            return &o->items[i + 1];
    }
    return NULL;
}

int md_pv_is_str(const md_strtab *strs, const md_pv *v, const char *s)
{
    return v && v->t == PV_STR && !strcmp(md_strtab_get(strs, v->s), s);
}

int md_pv_int(const md_pv *v, int64_t *out)
{
    if (!v || (v->t != PV_INT && v->t != PV_BOOL))
        return 0;
    *out = v->i; /* unsigned values alias: 2^64-1 reads as -1 */
    return 1;
}


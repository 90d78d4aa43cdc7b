/* util.h - internal helpers shared by every layer: error filling, checked
 * allocation, growable arrays, and a string intern table. Nothing here
 * prints or exits. */
#ifndef MD_UTIL_H
#define MD_UTIL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include "memdiag.h"

#define MD_UNUSED(x) (void)(x)

/* Fills err (if not NULL) and returns code. offset -1 = not applicable. */
int md_err_set(md_err *err, int code, int64_t offset, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
void md_err_file(md_err *err, const char *file);

/* Grows *buf (element size esz) so it can hold need elements.
 * Returns 0 on success, -1 on overflow or allocation failure. */
int md_grow(void **buf, size_t *cap, size_t need, size_t esz);
/* Big arrays: for arrays that may grow large and are filled front to back
 * (a snapshot's events, the reader's memo, the replay's timeline). Past
 * 512 KiB one lives in a mapping of its own, asking for transparent huge
 * pages where `need` fills at least half of one, and everywhere it grows to
 * later (filling 2 MiB is then one page fault, not 512: page faults were a
 * third of a 6 MB snapshot's time), grown with mremap and never copied.
 * Below that it is an ordinary heap array. md_big_trim gives back the
 * pages past the first `used` elements once the array is complete; an
 * array from md_big_grow is freed with md_big_free (same cap and esz). */
#define MD_BIG_MIN ((size_t)512 << 10) /* bytes: from here on, a mapping */
#define MD_HUGE_PAGE ((size_t)2 << 20)  /* a transparent huge page (x86-64, arm64 4K) */
int md_big_grow(void **buf, size_t *cap, size_t need, size_t esz);
/* An empty big array (*cap 0) made with room for `room` elements at once,
 * so it need not move until it outgrows them: address space, not memory;
 * huge pages asked for only where the first `hint` elements fill them.
 * -1 where it cannot (then nothing changed). */
int md_big_reserve(void **buf, size_t *cap, size_t room, size_t hint, size_t esz);
void md_big_trim(void *buf, size_t cap, size_t used, size_t esz);
/* For a big array filled front to back: the next 16 KiB of its pages from
 * element `from` on allocated at once (md_populate), where it is a
 * mapping of its own. Returns the element it is to be called at again
 * (cap where it is a heap array: whose pages come with the heap). What
 * it allocates past the end is given back by md_big_trim. */
size_t md_big_ahead(void *buf, size_t cap, size_t from, size_t esz);
void md_big_free(void *buf, size_t cap, size_t esz);
/* malloc(n) for an array about to be written whole that its caller frees
 * with free() (the public API's live sets, a table about to be cleared or
 * copied): from 64 KiB its pages are allocated at once (md_populate);
 * past MD_BIG_MIN, malloc maps it apart, and the whole huge pages inside
 * are asked for as such. */
void *md_malloc_filled(size_t n);
/* The pages wholly inside [p, p + n) allocated now, as one call
 * (MADV_POPULATE_WRITE): memory about to be written, not more; a page
 * fault each costs 2 us on a bare host, 10-15 under shadow paging, where
 * this is 1 and 5. */
void md_populate(void *p, size_t n);
/* bytes zeroed in pieces of 64: gcc makes one memset of more than 128
 * bytes a rep stos, whose start costs tens of cycles, on every record the
 * reader takes where it clears its value slots; pieces of a known size
 * become vector stores. */
static inline void md_zero_small(void *p, size_t bytes)
{
    unsigned char *c = p;
    for (; bytes > 64; bytes -= 64, c += 64)
        memset(c, 0, 64);
    memset(c, 0, bytes);
}

#define MD_PUSH(arr, n, cap, val, fail)                                        \
    do {                                                                       \
        if ((n) >= (cap) &&                                                    \
            md_grow((void **)&(arr), &(cap), (n) + 1, sizeof(*(arr))) != 0)    \
            goto fail;                                                         \
        (arr)[(n)++] = (val);                                                  \
    } while (0)

/* 64-bit hash of bytes (FNV-1a folded with a multiply; good enough for
 * interning, not for adversarial keys). */
uint64_t md_hash(const void *p, size_t n, uint64_t seed);
/* bytes -> MiB, for reports */
double md_mib(uint64_t bytes);
/* MiB (from a report or a capture: any double) as bytes: 0 below zero or
 * NaN, UINT64_MAX past it. */
uint64_t md_bytes_of_mib(double mib);

/* ---- little-endian loads (the pickle's integers) ------------------------ */
/* The n (<= 8) bytes at b as an integer. */
static inline uint64_t md_rd_le(const unsigned char *b, int n)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    uint64_t v = 0;
    memcpy(&v, b, (size_t)n);
    return v;
#else
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--)
        v = (v << 8) | b[i];
    return v;
#endif
}

static inline uint32_t md_le32(const unsigned char *b)
{
    return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

/* ---- string intern table: id 0 is the empty string ------------------- */
typedef struct md_strtab {
    char *data;          /* all strings, NUL-terminated, back to back */
    size_t len, cap;
    uint64_t *off;       /* id -> offset in data */
    uint32_t *slen;      /* id -> length */
    size_t n, ncap;
    uint32_t *slots;     /* open addressing: id+1, 0 = empty */
    size_t nslots;
} md_strtab;

int md_strtab_init(md_strtab *t);
void md_strtab_free(md_strtab *t);
/* Returns the id (>= 0) or -1 on allocation failure. */
int64_t md_strtab_intern(md_strtab *t, const char *s, size_t n);
static inline const char *md_strtab_get(const md_strtab *t, uint32_t id)
{
    return id < t->n ? t->data + t->off[id] : "";
}
static inline size_t md_strtab_len(const md_strtab *t, uint32_t id)
{
    return id < t->n ? t->slen[id] : 0;
}

/* ---- u64 -> u64 hash map: open addressing, linear probing, deletion by
 * backward shift (no tombstones); at most 3/4 full ------------------------ */
#define MD_MAP_LOAD_NUM 3 /* a map or set at most 3/4 full */
#define MD_MAP_LOAD_DEN 4
typedef struct md_map_entry {
    uint64_t key; /* stored form (md_map_key), 0 = empty */
    uint64_t val;
} md_map_entry;
/* A key and its value share a slot: a lookup is one cache miss, not two. */
typedef struct md_map {
    md_map_entry *slot;
    size_t cap, n; /* cap: a power of two */
} md_map;

int md_map_init(md_map *m, size_t hint);
void md_map_free(md_map *m);
/* Empties m, keeping its capacity (and the pages already touched). */
void md_map_clear(md_map *m);
/* dst = a copy of src (dst uninitialised); -1 on allocation failure. */
int md_map_copy(md_map *dst, const md_map *src);
/* dst (a map whose capacity is at least src's) = src's entries, in dst's
 * table: a copy that allocates nothing. */
void md_map_assign(md_map *dst, const md_map *src);
/* Room for n entries in all without growing again. -1 out of memory. */
int md_map_reserve(md_map *m, size_t n);
int md_map_put(md_map *m, uint64_t key, uint64_t val);
int md_map_del(md_map *m, uint64_t key);                      /* 1 removed */
/* Puts key only if absent: 1 added, 0 present (value kept), -1 no memory. */
int md_map_add(md_map *m, uint64_t key, uint64_t val);

/* ---- u64 set: keys only, as md_map stores them (half a map's memory;
 * the replay's reconstruction asks it of nearly every event) ---------- */
typedef struct md_set {
    uint64_t *key; /* stored form (md_map_key), 0 = empty */
    size_t cap, n; /* cap: a power of two, at most 3/4 full */
} md_set;

int md_set_init(md_set *t, size_t hint);
void md_set_free(md_set *t);
/* Grows t to twice its capacity: -1 out of memory. */
int md_set_grow(md_set *t);

/* ---- u64 -> u32 ordered map: sorted runs of at most MD_ORUN keys, found
 * by a binary search of each run's first key. A lookup is O(log n), a
 * change O(MD_ORUN + n / MD_ORUN) at worst, whatever order keys come in
 * (no rebalancing to go wrong on crafted input). Zero-initialised = empty. */
#define MD_ORUN 256
typedef struct md_orun {
    uint32_t n;
    uint32_t val[MD_ORUN];
    uint64_t key[MD_ORUN];
} md_orun;
typedef struct md_omap {
    md_orun **run;
    uint64_t *first; /* run[i]->key[0], searched without touching the runs */
    size_t nrun, cap, count;
} md_omap;

void md_omap_free(md_omap *m);
/* Puts key (a new value where present): 0, or -1 out of memory. */
int md_omap_put(md_omap *m, uint64_t key, uint32_t val);
int md_omap_del(md_omap *m, uint64_t key); /* 1 removed, 0 absent */
/* The greatest key <= key: 1 (*k, *v set), or 0 where none is. */
int md_omap_floor(const md_omap *m, uint64_t key, uint64_t *k, uint32_t *v);

/* A key as stored: +1 so that 0 means empty (UINT64_MAX shares a slot
 * value with UINT64_MAX - 2; neither is ever an address). */
static inline uint64_t md_map_key(uint64_t key)
{
    uint64_t k = key + 1;
    return k ? k : UINT64_MAX - 1;
}

/* Where a stored key's probe run starts. */
static inline size_t md_map_slot(uint64_t k, size_t cap)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    return (size_t)k & (cap - 1);
}

/* 1 (and *val, when not NULL) if key is in m. Inline: the replay looks up
 * an address for every event. */
static inline int md_map_get(const md_map *m, uint64_t key, uint64_t *val)
{
    if (!m->cap)
        return 0;
    uint64_t k = md_map_key(key);
    for (size_t i = md_map_slot(k, m->cap); m->slot[i].key; i = (i + 1) & (m->cap - 1))
        if (m->slot[i].key == k) {
            if (val)
                *val = m->slot[i].val;
            return 1;
        }
    return 0;
}

/* Adds key: 1 added, 0 present, -1 no memory. Inline, the probe for a
 * present key (most) is a few instructions. */
static inline int md_set_add(md_set *t, uint64_t key)
{
    uint64_t k = md_map_key(key);
    size_t i = md_map_slot(k, t->cap);
    for (; t->key[i]; i = (i + 1) & (t->cap - 1))
        if (t->key[i] == k)
            return 0;
    if ((t->n + 1) * MD_MAP_LOAD_DEN > t->cap * MD_MAP_LOAD_NUM) {
        if (md_set_grow(t))
            return -1;
        for (i = md_map_slot(k, t->cap); t->key[i]; i = (i + 1) & (t->cap - 1))
            ;
    }
    t->key[i] = k;
    t->n++;
    return 1;
}

static inline int md_set_has(const md_set *t, uint64_t key)
{
    if (!t->cap)
        return 0;
    uint64_t k = md_map_key(key);
    for (size_t i = md_map_slot(k, t->cap); t->key[i]; i = (i + 1) & (t->cap - 1))
        if (t->key[i] == k)
            return 1;
    return 0;
}

#endif

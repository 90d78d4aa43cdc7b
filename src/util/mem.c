/* mem.c - growable arrays, hashing, the string intern table and a u64 map. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include "util.h"

/* cap doubled (from 8) until it holds need; 0 on overflow. */
static size_t doubled(size_t cap, size_t need)
{
    size_t nc = cap ? cap : 8;
    while (nc < need) {
        if (nc > SIZE_MAX / 2)
            return 0;
        nc *= 2;
    }
    return nc;
}

/* A heap array resized to nc elements. */
static int heap_resize(void **buf, size_t *cap, size_t nc, size_t esz)
{
    if (!nc || nc > SIZE_MAX / esz)
        return -1;
    void *p = realloc(*buf, nc * esz);
    if (!p)
        return -1;
    *buf = p;
    *cap = nc;
    return 0;
}

int md_grow(void **buf, size_t *cap, size_t need, size_t esz)
{
    return need <= *cap ? 0 : heap_resize(buf, cap, doubled(*cap, need), esz);
}

void md_populate(void *p, size_t n)
{
#ifdef MADV_POPULATE_WRITE
    uintptr_t lo = ((uintptr_t)p + 4095) & ~(uintptr_t)4095;
    uintptr_t hi = ((uintptr_t)p + n) & ~(uintptr_t)4095;
    if (hi > lo) /* before Linux 5.14 EINVAL: the writes fault them in */
        madvise((void *)lo, hi - lo, MADV_POPULATE_WRITE);
#else
    (void)p, (void)n;
#endif
}

/* ---- big arrays ---------------------------------------------------------- */

#define BIG_MIN MD_BIG_MIN /* below: the heap (md_grow) */
#define BIG_UNIT MD_HUGE_PAGE
/* md_big_ahead's stretch. 64 KiB made fewer calls (a call costs ~0.3 us
 * beside ~0.9 us a page on the 16-CPU host) but no clear time in two
 * rounds there, for 128 KB more resident (bench/RESULTS.md, session 48) */
#define BIG_AHEAD ((size_t)16 << 10)
/* md_malloc_filled's arrays from here on are allocated in one call: a
 * heap chunk's pages may be there already, which costs the call little */
#define FILLED_POPULATE ((size_t)64 << 10)

static int big_mapped(size_t cap, size_t esz)
{
    return cap * esz >= BIG_MIN;
}

static size_t big_bytes(size_t cap, size_t esz)
{
    return (cap * esz + BIG_UNIT - 1) & ~(BIG_UNIT - 1);
}

/* A fresh mapping of n bytes (a multiple of BIG_UNIT) for an array of
 * `used` bytes: huge pages are asked for where `used` fills at least half
 * of one (a huge page counts whole in the resident set; a mostly empty one
 * would cost more memory than its faults cost time). NULL on failure. */
static void *big_map(size_t n, size_t used)
{
    void *p = mmap(NULL, n, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    size_t huge = (used + BIG_UNIT / 2) & ~(BIG_UNIT - 1);
    if (huge) /* a hint: without THP, 4 KiB pages */
        madvise(p, huge < n ? huge : n, MADV_HUGEPAGE);
    return p;
}

int md_big_grow(void **buf, size_t *cap, size_t need, size_t esz)
{
    if (need <= *cap)
        return 0;
    if (need > SIZE_MAX / 2 / esz)
        return -1;
    if (need * esz < BIG_MIN) { /* small: the heap, capacity kept below BIG_MIN */
        size_t nc = doubled(*cap, need);
        return heap_resize(buf, cap, nc * esz < BIG_MIN ? nc : (BIG_MIN - 1) / esz, esz);
    }
    size_t old = big_mapped(*cap, esz) ? big_bytes(*cap, esz) : 0;
    size_t n = old ? old : BIG_UNIT;
    while (n < need * esz)
        n *= 2;
    void *p;
    if (old) { /* grown in place or moved by the kernel: not copied */
        /* a growing array gets huge pages everywhere; the same advice on all
         * of it also makes it one mapping again (big_map's partial advice
         * split it in two, and mremap moves only a single mapping) */
        madvise(*buf, old, MADV_HUGEPAGE);
        p = mremap(*buf, old, n, MREMAP_MAYMOVE);
        if (p == MAP_FAILED) { /* still split (no THP here?): a copy, then */
            if (!(p = big_map(n, n)))
                return -1;
            memcpy(p, *buf, *cap * esz);
            munmap(*buf, old);
        }
        madvise(p, n, MADV_HUGEPAGE);
    } else {
        if (!(p = big_map(n, need * esz)))
            return -1;
        if (*cap)
            memcpy(p, *buf, *cap * esz);
        free(*buf);
    }
    *buf = p;
    *cap = n / esz;
    return 0;
}

int md_big_reserve(void **buf, size_t *cap, size_t room, size_t hint, size_t esz)
{
    if (*cap || room > SIZE_MAX / 2 / esz)
        return -1;
    if (room * esz < BIG_MIN)
        return md_big_grow(buf, cap, room, esz);
    size_t n = big_bytes(room, esz);
    void *p = big_map(n, (hint < room ? hint : room) * esz);
    if (!p)
        return -1;
    *buf = p;
    *cap = n / esz;
    return 0;
}

void md_big_trim(void *buf, size_t cap, size_t used, size_t esz)
{
    if (!buf || !big_mapped(cap, esz))
        return;
    size_t from = (used * esz + 4095) & ~(size_t)4095, end = big_bytes(cap, esz);
    if (from < end) /* splits a huge page; its unused 4 KiB pages go back */
        madvise((char *)buf + from, end - from, MADV_DONTNEED);
}

size_t md_big_ahead(void *buf, size_t cap, size_t from, size_t esz)
{
    if (!big_mapped(cap, esz))
        return cap; /* the heap's: asked again once it grows into a mapping */
    size_t lo = from * esz & ~(size_t)4095, hi = (lo + BIG_AHEAD + 4095) & ~(size_t)4095;
    size_t end = big_bytes(cap, esz);
    if (hi > end)
        hi = end;
    md_populate((char *)buf + lo, hi - lo);
    return hi / esz < cap ? hi / esz : cap;
}

void *md_malloc_filled(size_t n)
{
    char *p = malloc(n ? n : 1);
    if (p && n >= MD_BIG_MIN) { /* a hint: only whole huge pages, so none counts more */
        uintptr_t lo = ((uintptr_t)p + BIG_UNIT - 1) & ~(uintptr_t)(BIG_UNIT - 1);
        uintptr_t hi = ((uintptr_t)p + n) & ~(uintptr_t)(BIG_UNIT - 1);
        if (hi > lo)
            madvise((void *)lo, hi - lo, MADV_HUGEPAGE);
    }
    /* about to be written whole: its pages allocated at once, no more
     * memory than the writes would take, and each without its fault */
    if (p && n >= FILLED_POPULATE)
        md_populate(p, n);
    return p;
}

void md_big_free(void *buf, size_t cap, size_t esz)
{
    if (!buf)
        return;
    if (big_mapped(cap, esz))
        munmap(buf, big_bytes(cap, esz));
    else
        free(buf);
}

/* Four independent lanes of 8 bytes: one serial multiply chain per 8 bytes
 * left the multiplier idle on the long keys hashed per trace entry. */
uint64_t md_hash(const void *p, size_t n, uint64_t seed)
{
    const unsigned char *s = p;
    const uint64_t K = 0x9e3779b97f4a7c15ULL, M = 0x100000001b3ULL;
    uint64_t a = 1469598103934665603ULL ^ seed, b = a ^ K, c = a + n, d = ~a;
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        uint64_t w[4];
        memcpy(w, s + i, sizeof w);
        a = (a ^ w[0]) * M, b = (b ^ w[1]) * M, c = (c ^ w[2]) * M, d = (d ^ w[3]) * M;
        a ^= a >> 29, b ^= b >> 29, c ^= c >> 29, d ^= d >> 29;
    }
    uint64_t h = a ^ (b * 3) ^ (c * 5) ^ (d * 7) ^ n;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, s + i, 8);
        h = (h ^ w) * M;
        h ^= h >> 29;
    }
    if (i < n) { /* the last 1-7 bytes as one word, read without a call to
                  * memcpy: the key's last 8 (overlapping bytes hashed
                  * already), or, under 8 bytes, two 4-byte or three 1-byte
                  * reads */
        uint64_t w;
        if (n >= 8) {
            memcpy(&w, s + n - 8, 8);
        } else if (n >= 4) {
            uint32_t lo, hi;
            memcpy(&lo, s, 4);
            memcpy(&hi, s + n - 4, 4);
            w = lo | (uint64_t)hi << 32;
        } else {
            w = s[0] | (uint64_t)s[n / 2] << 8 | (uint64_t)s[n - 1] << 16;
        }
        h = (h ^ w) * M;
    }
    h ^= h >> 32;
    h *= K;
    return h ^ (h >> 31);
}

int md_strtab_init(md_strtab *t)
{
    memset(t, 0, sizeof *t);
    return md_strtab_intern(t, "", 0) == 0 ? 0 : -1;
}

void md_strtab_free(md_strtab *t)
{
    free(t->data);
    free(t->off);
    free(t->slen);
    free(t->slots);
    memset(t, 0, sizeof *t);
}

static int strtab_rehash(md_strtab *t)
{
    size_t ns = t->nslots ? t->nslots * 2 : 1024;
    uint32_t *slots = calloc(ns, sizeof *slots);
    if (!slots)
        return -1;
    for (size_t id = 0; id < t->n; id++) {
        uint64_t h = md_hash(t->data + t->off[id], t->slen[id], 0);
        size_t i = h & (ns - 1);
        while (slots[i])
            i = (i + 1) & (ns - 1);
        slots[i] = (uint32_t)id + 1;
    }
    free(t->slots);
    t->slots = slots;
    t->nslots = ns;
    return 0;
}

int64_t md_strtab_intern(md_strtab *t, const char *s, size_t n)
{
    if (n > UINT32_MAX || t->n >= UINT32_MAX - 1)
        return -1;
    if ((t->n + 1) * 2 > t->nslots && strtab_rehash(t) != 0)
        return -1;
    uint64_t h = md_hash(s, n, 0);
    size_t i = h & (t->nslots - 1);
    while (t->slots[i]) {
        uint32_t id = t->slots[i] - 1;
        if (t->slen[id] == n && memcmp(t->data + t->off[id], s, n) == 0)
            return id;
        i = (i + 1) & (t->nslots - 1);
    }
    if (md_grow((void **)&t->data, &t->cap,
                t->len + n + 1, 1) != 0)
        return -1;
    size_t c1 = t->ncap, c2 = t->ncap;
    if (md_grow((void **)&t->off, &c1, t->n + 1, sizeof *t->off) != 0)
        return -1;
    if (md_grow((void **)&t->slen, &c2, t->n + 1, sizeof *t->slen) != 0)
        return -1;
    t->ncap = c1 < c2 ? c1 : c2;
    if (n)
        memcpy(t->data + t->len, s, n);
    t->data[t->len + n] = 0;
    t->off[t->n] = t->len;
    t->slen[t->n] = (uint32_t)n;
    t->len += n + 1;
    t->slots[i] = (uint32_t)t->n + 1;
    return (int64_t)t->n++;
}

/* ---- u64 map ---------------------------------------------------------- */
#define MAP_EMPTY 0
#define MAP_LOAD_NUM MD_MAP_LOAD_NUM
#define MAP_LOAD_DEN MD_MAP_LOAD_DEN

/* The slots a table starts with for about `hint` keys: a power of two, at
 * most half full. */
static size_t table_cap(size_t hint)
{
    size_t cap = 16;
    while (cap < hint * 2)
        cap *= 2;
    return cap;
}

int md_map_init(md_map *m, size_t hint)
{
    memset(m, 0, sizeof *m);
    size_t cap = table_cap(hint);
    /* calloc, not populated: a table sized for the most it may hold
     * (blocks_hint) often fills a part of it, and fresh pages calloc
     * leaves unwritten cost nothing (64 KB more resident when cleared) */
    if (!(m->slot = calloc(cap, sizeof *m->slot)))
        return -1;
    m->cap = cap;
    return 0;
}

int md_set_init(md_set *t, size_t hint)
{
    memset(t, 0, sizeof *t);
    size_t cap = table_cap(hint);
    if (!(t->key = calloc(cap, sizeof *t->key)))
        return -1;
    t->cap = cap;
    return 0;
}

void md_set_free(md_set *t)
{
    free(t->key);
    memset(t, 0, sizeof *t);
}

int md_set_grow(md_set *t)
{
    size_t cap = t->cap * 2;
    uint64_t *key = cap > t->cap ? calloc(cap, sizeof *key) : NULL;
    if (!key)
        return -1;
    for (size_t i = 0; i < t->cap; i++) {
        uint64_t k = t->key[i];
        if (!k)
            continue;
        size_t j = md_map_slot(k, cap);
        while (key[j])
            j = (j + 1) & (cap - 1);
        key[j] = k;
    }
    free(t->key);
    t->key = key;
    t->cap = cap;
    return 0;
}

void md_map_free(md_map *m)
{
    free(m->slot);
    memset(m, 0, sizeof *m);
}

void md_map_clear(md_map *m)
{
    if (m->cap)
        memset(m->slot, 0, m->cap * sizeof *m->slot);
    m->n = 0;
}

int md_map_copy(md_map *dst, const md_map *src)
{
    *dst = *src;
    if (!(dst->slot = md_malloc_filled(src->cap * sizeof *dst->slot))) {
        md_map_free(dst);
        return -1;
    }
    memcpy(dst->slot, src->slot, src->cap * sizeof *dst->slot);
    return 0;
}

void md_map_assign(md_map *dst, const md_map *src)
{
    if (dst->cap == src->cap) {
        memcpy(dst->slot, src->slot, src->cap * sizeof *dst->slot);
        dst->n = src->n;
        return;
    }
    md_map_clear(dst); /* bigger: each entry where it goes at this size */
    for (size_t i = 0; i < src->cap; i++) {
        uint64_t k = src->slot[i].key;
        if (k == MAP_EMPTY)
            continue;
        size_t j = md_map_slot(k, dst->cap);
        while (dst->slot[j].key != MAP_EMPTY)
            j = (j + 1) & (dst->cap - 1);
        dst->slot[j] = src->slot[i];
        dst->n++;
    }
}

static int map_resize(md_map *m, size_t cap)
{
    md_map_entry *ns = calloc(cap, sizeof *ns);
    if (!ns)
        return -1;
    for (size_t i = 0; i < m->cap; i++) {
        uint64_t k = m->slot[i].key;
        if (k != MAP_EMPTY) {
            size_t j = md_map_slot(k, cap);
            while (ns[j].key != MAP_EMPTY)
                j = (j + 1) & (cap - 1);
            ns[j] = m->slot[i];
        }
    }
    free(m->slot);
    m->slot = ns;
    m->cap = cap;
    return 0;
}

int md_map_reserve(md_map *m, size_t n)
{
    size_t cap = m->cap ? m->cap : 16;
    while (n * MAP_LOAD_DEN > cap * MAP_LOAD_NUM)
        cap *= 2;
    return cap == m->cap ? 0 : map_resize(m, cap);
}

/* The slot holding key (stored form), or the empty slot ending its run,
 * after making room for one more; SIZE_MAX if there is no memory. */
static size_t map_probe(md_map *m, uint64_t k)
{
    if ((m->n + 1) * MAP_LOAD_DEN > m->cap * MAP_LOAD_NUM && map_resize(m, m->cap * 2) != 0)
        return SIZE_MAX;
    size_t i = md_map_slot(k, m->cap);
    while (m->slot[i].key != MAP_EMPTY && m->slot[i].key != k)
        i = (i + 1) & (m->cap - 1);
    return i;
}

int md_map_put(md_map *m, uint64_t key, uint64_t val)
{
    uint64_t k = md_map_key(key);
    size_t i = map_probe(m, k);
    if (i == SIZE_MAX)
        return -1;
    m->n += m->slot[i].key == MAP_EMPTY;
    m->slot[i] = (md_map_entry){k, val};
    return 0;
}

int md_map_add(md_map *m, uint64_t key, uint64_t val)
{
    uint64_t k = md_map_key(key);
    size_t i = map_probe(m, k);
    if (i == SIZE_MAX)
        return -1;
    if (m->slot[i].key != MAP_EMPTY)
        return 0;
    m->slot[i] = (md_map_entry){k, val};
    m->n++;
    return 1;
}

/* Deletion by backward shift: later members of the probe run move up into
 * the hole, so no tombstones pile up. The replay frees and merges blocks
 * all the time; with tombstones the address map was rehashed at the same
 * size every few thousand frees (6 % of big_gamma's replay). */
int md_map_del(md_map *m, uint64_t key)
{
    if (!m->cap)
        return 0;
    uint64_t k = md_map_key(key);
    size_t mask = m->cap - 1, i = md_map_slot(k, m->cap);
    while (m->slot[i].key != k) {
        if (m->slot[i].key == MAP_EMPTY)
            return 0;
        i = (i + 1) & mask;
    }
    for (size_t j = i;;) {
        j = (j + 1) & mask;
        if (m->slot[j].key == MAP_EMPTY)
            break;
        size_t h = md_map_slot(m->slot[j].key, m->cap);
        /* the entry at j may fill the hole at i unless its home slot lies
         * cyclically in (i, j] */
        int stays = i < j ? (h > i && h <= j) : (h > i || h <= j);
        if (!stays) {
            m->slot[i] = m->slot[j];
            i = j;
        }
    }
    m->slot[i].key = MAP_EMPTY;
    m->n--;
    return 1;
}

double md_mib(uint64_t bytes)
{
    return (double)bytes / 1048576.0;
}

uint64_t md_bytes_of_mib(double mib)
{
    double b = mib * 1048576.0;
    if (!(b > 0)) /* NaN too */
        return 0;
    return b >= 0x1p64 ? UINT64_MAX : (uint64_t)b;
}

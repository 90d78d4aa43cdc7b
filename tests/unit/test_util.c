/* test_util.c - the memory helpers under the reader: big arrays (heap, then
 * a mapping of their own, grown in place, trimmed, freed), the map's
 * add-if-absent, and the hash's lanes. Synthetic by nature: these are
 * containers, checked on their contracts and edges. */
#include <sys/mman.h>
#include "testutil.h"
#include "util/util.h"

/* Grown one element at a time from nothing to 8 MiB of uint64: it crosses
 * from the heap into its own mapping and grows again by mremap; every value
 * written must survive every move. */
static void test_big_grow_keeps_contents(void **st)
{
    (void)st;
    uint64_t *a = NULL;
    size_t cap = 0, n = (size_t)1 << 20;
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(md_big_grow((void **)&a, &cap, i + 1, sizeof *a), 0);
        assert_true(cap >= i + 1);
        a[i] = i * 0x9e3779b97f4a7c15ULL;
    }
    for (size_t i = 0; i < n; i += 4093)
        assert_true(a[i] == i * 0x9e3779b97f4a7c15ULL);
    assert_true(a[n - 1] == (n - 1) * 0x9e3779b97f4a7c15ULL);
    /* the pages past the used part go; the used part stays */
    md_big_trim(a, cap, n / 2, sizeof *a);
    for (size_t i = 0; i < n / 2; i += 509)
        assert_true(a[i] == i * 0x9e3779b97f4a7c15ULL);
    md_big_free(a, cap, sizeof *a);
}

/* A small array stays on the heap (free()-able by md_big_free with its
 * capacity); a hint that asks for a big one at once maps it, with no copy
 * from a heap phase. */
static void test_big_small_and_hinted(void **st)
{
    (void)st;
    char *s = NULL;
    size_t cap = 0;
    assert_int_equal(md_big_grow((void **)&s, &cap, 100, 1), 0);
    assert_true(cap >= 100 && cap < 512 * 1024);
    memset(s, 'x', cap);
    md_big_trim(s, cap, 10, 1); /* a heap array: nothing to give back */
    assert_int_equal(s[cap - 1], 'x');
    md_big_free(s, cap, 1);

    uint32_t *h = NULL;
    cap = 0;
    assert_int_equal(md_big_grow((void **)&h, &cap, 3u << 20, sizeof *h), 0);
    assert_true(cap >= 3u << 20);
    h[0] = 1, h[cap - 1] = 2;
    assert_int_equal(md_big_grow((void **)&h, &cap, cap + 1, sizeof *h), 0);
    assert_int_equal(h[0], 1);
    md_big_free(h, cap, sizeof *h);
    /* nothing asked, nothing made */
    void *none = NULL;
    cap = 0;
    assert_int_equal(md_big_grow(&none, &cap, 0, 8), 0);
    assert_null(none);
    md_big_free(none, cap, 8);
}

/* Whether the pages of [p, p + n) are all resident. */
static int resident(const void *p, size_t n)
{
    uintptr_t lo = (uintptr_t)p & ~(uintptr_t)4095, hi = ((uintptr_t)p + n + 4095) & ~(uintptr_t)4095;
    unsigned char vec[256];
    assert_true((hi - lo) / 4096 <= sizeof vec);
    assert_int_equal(mincore((void *)lo, hi - lo, vec), 0);
    for (size_t i = 0; i < (hi - lo) / 4096; i++)
        if (!(vec[i] & 1))
            return 0;
    return 1;
}

/* md_big_ahead: a mapped array's next stretch of pages is allocated before
 * it is written, and the call says where to come back; a heap array's
 * answer is its capacity (its pages come with the heap), as is one whose
 * mapping ends within the stretch. Residency is checked only where the
 * kernel allocates on request (MADV_POPULATE_WRITE, Linux 5.14). */
static void test_big_ahead_populates(void **st)
{
    (void)st;
    uint64_t *a = NULL;
    size_t cap = 0;
    assert_int_equal(md_big_grow((void **)&a, &cap, 100000, sizeof *a), 0);
    assert_true(cap * sizeof *a >= 512 * 1024); /* a mapping of its own */
    size_t at = 1000, next = md_big_ahead(a, cap, at, sizeof *a);
    assert_true(next > at && next <= cap);
    assert_true((next - at) * sizeof *a >= 8192); /* most of a 16 KiB stretch */
    void *probe = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    assert_true(probe != MAP_FAILED);
    int can = madvise(probe, 4096, 23 /* MADV_POPULATE_WRITE */) == 0;
    munmap(probe, 4096);
    if (can)
        assert_true(resident(a + at, (next - at) * sizeof *a));
    /* where it is the array is as it was: its values unwritten read 0 */
    assert_true(a[next - 1] == 0);
    assert_int_equal(md_big_ahead(a, cap, cap - 1, sizeof *a), cap); /* the mapping's end */
    md_big_free(a, cap, sizeof *a);

    char *h = NULL;
    cap = 0;
    assert_int_equal(md_big_grow((void **)&h, &cap, 100, 1), 0);
    assert_int_equal(md_big_ahead(h, cap, 0, 1), cap); /* the heap's */
    md_big_free(h, cap, 1);

    /* md_malloc_filled from 64 KiB: allocated at once */
    size_t n = 200 * 1024;
    char *f = md_malloc_filled(n);
    assert_non_null(f);
    if (can)
        assert_true(resident(f + 4096, n - 8192));
    memset(f, 1, n);
    free(f);
}

static void test_big_overflow_refused(void **st)
{
    (void)st;
    void *p = NULL;
    size_t cap = 0;
    assert_int_equal(md_big_grow(&p, &cap, SIZE_MAX / 4, 8), -1);
    assert_null(p);
    assert_int_equal(cap, 0);
}

/* md_map_add: added once, present after (its first value kept), through
 * growth and after deletions (a tombstone slot reused). */
static void test_map_add(void **st)
{
    (void)st;
    md_map m;
    assert_int_equal(md_map_init(&m, 4), 0);
    for (uint64_t k = 0; k < 5000; k++)
        assert_int_equal(md_map_add(&m, k * 512, k), 1);
    for (uint64_t k = 0; k < 5000; k++)
        assert_int_equal(md_map_add(&m, k * 512, 7), 0);
    uint64_t v = 0;
    assert_true(md_map_get(&m, 4999 * 512, &v));
    assert_int_equal(v, 4999);
    assert_int_equal(md_map_del(&m, 512), 1);
    assert_false(md_map_get(&m, 512, NULL));
    assert_int_equal(md_map_add(&m, 512, 9), 1);
    assert_true(md_map_get(&m, 512, &v));
    assert_int_equal(v, 9);
    assert_int_equal(md_map_add(&m, UINT64_MAX, 3), 1); /* the reserved keys work too */
    assert_int_equal(md_map_add(&m, UINT64_MAX, 4), 0);
    md_map_free(&m);
}

/* md_set_add: added once, present after, through growth from 16 slots
 * (5000 keys: nine doublings), at most 3/4 full; 0 and UINT64_MAX (the
 * stored forms' edge cases) are keys like any other. */
static void test_set_add(void **st)
{
    (void)st;
    md_set t;
    assert_int_equal(md_set_init(&t, 4), 0);
    assert_int_equal(t.cap, 16);
    for (uint64_t k = 0; k < 5000; k++) {
        assert_false(md_set_has(&t, 0x7f0000000000ULL + k * 512));
        assert_int_equal(md_set_add(&t, 0x7f0000000000ULL + k * 512), 1);
    }
    for (uint64_t k = 0; k < 5000; k++) {
        assert_int_equal(md_set_add(&t, 0x7f0000000000ULL + k * 512), 0);
        assert_true(md_set_has(&t, 0x7f0000000000ULL + k * 512));
    }
    assert_int_equal(t.n, 5000);
    assert_true(t.n * 4 <= t.cap * 3);
    assert_false(md_set_has(&t, 0x7f0000000000ULL + 5000 * 512));
    assert_false(md_set_has(&t, 0x7f0000000000ULL + 256)); /* between keys */
    assert_int_equal(md_set_add(&t, 0), 1);
    assert_int_equal(md_set_add(&t, 0), 0);
    assert_int_equal(md_set_add(&t, UINT64_MAX), 1);
    assert_int_equal(md_set_add(&t, UINT64_MAX), 0);
    assert_true(md_set_has(&t, 0) && md_set_has(&t, UINT64_MAX));
    md_set_free(&t);
    assert_null(t.key);
}

/* Deletions inside probe runs, including runs that wrap around the end of
 * a small table, leave every other key findable with its value, and the
 * deleted ones gone: random puts and deletes over a few dozen keys (the
 * table stays at 32-64 slots), checked against a plain array after each. */
static void test_map_delete_many(void **st)
{
    (void)st;
    enum { KEYS = 40 };
    uint64_t val[KEYS] = {0}; /* 0 = absent */
    md_map m;
    assert_int_equal(md_map_init(&m, 16), 0);
    uint64_t seed = 12345;
    for (int op = 0; op < 50000; op++) {
        seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
        int i = (int)((seed >> 33) % KEYS);
        uint64_t k = 0x7f0000000000ULL + ((uint64_t)i << 9); /* like block addresses */
        if (val[i] && (seed >> 20) % 2) {
            assert_int_equal(md_map_del(&m, k), 1);
            val[i] = 0;
        } else {
            val[i] = (seed >> 12) | 1;
            assert_int_equal(md_map_put(&m, k, val[i]), 0);
        }
        size_t live = 0;
        for (int x = 0; x < KEYS; x++) {
            uint64_t v = 0;
            int found = md_map_get(&m, 0x7f0000000000ULL + ((uint64_t)x << 9), &v);
            assert_int_equal(found, val[x] != 0);
            if (found)
                assert_true(v == val[x]);
            live += val[x] != 0;
        }
        assert_int_equal(m.n, live);
    }
    assert_true(m.cap <= 128);
    md_map_free(&m);
}

/* The floor of every key against a plain array: value and key of the
 * greatest present key at or below it, none below the least. */
static void check_floors(const md_omap *m, const uint32_t *val, int keys)
{
    uint64_t last = 0;
    uint32_t lastv = 0;
    int seen = 0;
    size_t live = 0;
    for (int x = 0; x < keys; x++) {
        uint64_t k = 1000 + 10 * (uint64_t)x, fk;
        uint32_t fv;
        if (val[x])
            last = k, lastv = val[x], seen = 1, live++;
        for (uint64_t q = k; q < k + 10; q += 9) { /* the key, and one past it */
            int found = md_omap_floor(m, q, &fk, &fv);
            assert_int_equal(found, seen);
            if (found) {
                assert_true(fk == last);
                assert_int_equal(fv, lastv);
            }
        }
    }
    uint64_t fk;
    uint32_t fv;
    assert_int_equal(md_omap_floor(m, 999, &fk, &fv), 0);
    assert_int_equal(m->count, live);
}

/* md_omap: random puts (new keys and new values of present ones) and
 * deletes over more keys than several runs hold, then keys put in
 * ascending and descending order and deleted in the other, so runs split,
 * empty and leave the directory at its front, middle and end; every floor
 * checked against a plain array after each step. */
static void test_omap_floor(void **st)
{
    (void)st;
    enum { KEYS = 3 * MD_ORUN + 17 };
    static uint32_t val[KEYS]; /* 0 = absent */
    md_omap m = {0};
    uint64_t seed = 777;
    for (int op = 0; op < 6000; op++) {
        seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
        int i = (int)((seed >> 33) % KEYS);
        uint64_t k = 1000 + 10 * (uint64_t)i;
        if (val[i] && (seed >> 20) % 3 == 0) {
            assert_int_equal(md_omap_del(&m, k), 1);
            val[i] = 0;
        } else {
            val[i] = (uint32_t)(seed >> 40) | 1;
            assert_int_equal(md_omap_put(&m, k, val[i]), 0);
        }
        assert_int_equal(md_omap_del(&m, k + 5), 0); /* never a key */
        if (op % 16 == 0)
            check_floors(&m, val, KEYS);
    }
    check_floors(&m, val, KEYS);
    for (int i = 0; i < KEYS; i++)
        if (val[i]) {
            assert_int_equal(md_omap_del(&m, 1000 + 10 * (uint64_t)i), 1);
            val[i] = 0;
        }
    check_floors(&m, val, KEYS);
    assert_int_equal(m.nrun, 0);
    for (int dir = 0; dir < 2; dir++) {
        for (int x = 0; x < KEYS; x++) {
            int i = dir ? KEYS - 1 - x : x;
            val[i] = (uint32_t)i + 1;
            assert_int_equal(md_omap_put(&m, 1000 + 10 * (uint64_t)i, val[i]), 0);
        }
        check_floors(&m, val, KEYS);
        for (int x = 0; x < KEYS; x++) {
            int i = dir ? x : KEYS - 1 - x;
            assert_int_equal(md_omap_del(&m, 1000 + 10 * (uint64_t)i), 1);
            val[i] = 0;
            if (x % 97 == 0)
                check_floors(&m, val, KEYS);
        }
        assert_int_equal(m.nrun, 0);
    }
    md_omap_free(&m);
}

/* md_hash: every byte of every length counts (the four lanes, the 8-byte
 * words after them and the 1-7 byte tail), and equal bytes hash equal. */
static void test_hash_lanes(void **st)
{
    (void)st;
    unsigned char b[80];
    for (size_t i = 0; i < sizeof b; i++)
        b[i] = (unsigned char)(i * 31 + 7);
    for (size_t n = 0; n <= sizeof b; n++) {
        uint64_t h = md_hash(b, n, 0);
        assert_true(h == md_hash(b, n, 0));
        if (n < sizeof b)
            assert_true(h != md_hash(b, n + 1, 0));
        for (size_t i = 0; i < n; i++) {
            b[i] ^= 1;
            assert_true(h != md_hash(b, n, 0));
            b[i] ^= 1;
        }
    }
    assert_true(md_hash(b, 40, 0) != md_hash(b, 40, 1));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_big_grow_keeps_contents),
        cmocka_unit_test(test_big_small_and_hinted),
        cmocka_unit_test(test_big_ahead_populates),
        cmocka_unit_test(test_big_overflow_refused),
        cmocka_unit_test(test_map_add),
        cmocka_unit_test(test_set_add),
        cmocka_unit_test(test_map_delete_many),
        cmocka_unit_test(test_omap_floor),
        cmocka_unit_test(test_hash_lanes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

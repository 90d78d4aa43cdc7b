/* test_seed.c - a snapshot whose trace explains none of its final state
 * (no trace at all: torch.cuda.memory_snapshot() of a job recording
 * nothing) replays to exactly that state: its totals, live set and cache
 * as listed (model/replay.c state_as_listed), and its segments as the
 * block model lays them (seed_state, which finds each block's segment by
 * a binary search and its free block from the last one laid there): every
 * live block carved out of its segment at its address and size, the free
 * space between them, every segment. The files come from
 * tests/gen/state_only.py: a real H200 snapshot with its trace emptied,
 * and 40 synthetic segments listed out of address order. */
#include "testutil.h"

static int by_addr(const void *a, const void *b)
{
    const md_block *x = a, *y = b;
    return x->address < y->address ? -1 : x->address > y->address;
}

static int live_by_addr(const void *a, const void *b)
{
    const md_live *x = a, *y = b;
    return x->addr < y->addr ? -1 : x->addr > y->addr;
}

static int replay_block_by_addr(const void *a, const void *b)
{
    const md_replay_block *x = a, *y = b;
    return x->addr < y->addr ? -1 : x->addr > y->addr;
}

/* The final state s records for device d, and the replay's first state. */
static void check_state(const char *rel, int d)
{
    md_snapshot *s = load_ok(rel);
    size_t ns, nb, n = 0;
    const md_segment *g = md_snapshot_segments(s, &ns);
    const md_block *b = md_snapshot_blocks(s, &nb);
    md_block *live = calloc(nb ? nb : 1, sizeof *live);
    assert_non_null(live);
    uint64_t reserved = 0, allocated = 0, free_total = 0, largest_free = 0;
    size_t segs = 0;
    for (size_t i = 0; i < ns; i++) {
        if (g[i].device != d)
            continue;
        segs++;
        reserved += g[i].total_size;
        for (size_t k = g[i].first_block; k < g[i].first_block + g[i].nblocks; k++) {
            if (b[k].state == MD_BLOCK_INACTIVE) {
                free_total += b[k].size;
                largest_free = b[k].size > largest_free ? b[k].size : largest_free;
            } else {
                allocated += b[k].size;
                live[n++] = b[k];
            }
        }
    }
    qsort(live, n, sizeof *live, by_addr);
    assert_true(n >= 40); /* enough blocks, in enough segments, to mean something */
    assert_true(segs >= 10);
    assert_true(md_snapshot_features(s) & MD_HAS_FRAMES); /* the blocks' stacks */

    md_replay *r = replay_ok(s, d);
    assert_int_equal(md_replay_nevents(r), 0);
    md_point p = md_replay_initial(r);
    assert_int_equal(p.allocated, allocated);
    assert_int_equal(p.reserved, reserved);
    md_cache_state c;
    md_live *l = NULL;
    size_t nl = 0;
    md_err e;
    memset(&e, 0, sizeof e);
    assert_int_equal(md_replay_cache_at(r, -1, &c, &e), MD_OK);
    assert_int_equal(c.segments, segs);
    assert_int_equal(c.free_total, free_total);
    assert_int_equal(c.largest_free, largest_free);
    assert_int_equal(c.pending_free, 0);
    assert_int_equal(md_replay_live(r, -1, &l, &nl, &e), MD_OK);
    assert_int_equal(nl, n);
    qsort(l, nl, sizeof *l, live_by_addr);
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(l[i].addr, live[i].address);
        assert_int_equal(l[i].block_size, live[i].size);
        assert_int_equal(l[i].requested, live[i].requested_size);
        assert_int_equal(l[i].stack, live[i].stack);
        assert_int_equal(l[i].alloc_index, -1);
    }
    free(l);

    /* the block model's segments: the same live blocks, the same free space */
    md_replay_seg *rg;
    md_replay_block *rb;
    size_t nrg, nrb, k = 0;
    uint64_t seg_bytes = 0, free_seen = 0, largest_seen = 0;
    assert_int_equal(md_replay_segments_at(r, -1, &rg, &nrg, &rb, &nrb, &e), MD_OK);
    assert_int_equal(nrg, segs);
    for (size_t i = 0; i < nrg; i++)
        seg_bytes += rg[i].size;
    assert_int_equal(seg_bytes, reserved);
    qsort(rb, nrb, sizeof *rb, replay_block_by_addr);
    for (size_t i = 0; i < nrb; i++) {
        if (rb[i].state == MD_BS_FREE) {
            free_seen += rb[i].size;
            largest_seen = rb[i].size > largest_seen ? rb[i].size : largest_seen;
            continue;
        }
        assert_true(k < n);
        assert_int_equal(rb[i].addr, live[k].address);
        assert_int_equal(rb[i].size, live[k].size);
        assert_int_equal(rb[i].stack, live[k].stack);
        k++;
    }
    assert_int_equal(k, n);
    assert_int_equal(free_seen, free_total);
    assert_int_equal(largest_seen, largest_free);
    free(rg);
    free(rb);
    free(live);
    md_replay_free(r);
    md_snapshot_free(s);
}

static void test_synthetic_segments_out_of_order(void **st)
{
    (void)st;
    check_state("synthetic/state_only.pickle", 0);
}

static void test_real_snapshot_without_its_trace(void **st)
{
    (void)st;
    check_state("derived/gamma-medium-stateonly.pickle.xz", 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_synthetic_segments_out_of_order),
        cmocka_unit_test(test_real_snapshot_without_its_trace),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

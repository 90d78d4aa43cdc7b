/* test_flame.c - the flame graph's tree (md_flame_at) and the allocator's
 * segments at a point (md_replay_segments_at), on the synthetic reference
 * trace whose block sizes are stated in tests/gen/make_synthetic.py, and
 * on a real snapshot. */
#include "testutil.h"

#define MIB (1024ull * 1024ull)
#define PEAK (1024ull + 512ull + 5 * MIB + 15 * MIB) /* after the 4th alloc */

static md_analysis *analyze_ok(const md_snapshot *s, const md_replay *r)
{
    md_analysis *a = NULL;
    md_err e;
    memset(&e, 0, sizeof e);
    assert_int_equal(md_analyze(s, r, &a, &e), MD_OK);
    return a;
}

/* One stack [forward, _call_impl, train] (innermost first): the tree is
 * root -> train -> _call_impl -> forward, every byte allocated at forward. */
static void test_flame_of_the_reference_trace(void **state)
{
    (void)state;
    md_snapshot *s = load_ok("synthetic/v2_5.pickle");
    md_replay *r = replay_ok(s, 0);
    md_analysis *a = analyze_ok(s, r);
    md_flame_node *v;
    size_t n;
    md_err e;
    memset(&e, 0, sizeof e);
    assert_int_equal(md_flame_at(a, md_replay_peak_index(r), 0, &v, &n, &e), MD_OK);
    assert_int_equal(n, 4);
    assert_int_equal(v[0].kind, MD_FLAME_ROOT);
    assert_int_equal(v[0].bytes, PEAK);
    assert_int_equal(v[0].count, 4);
    const char *names[] = {"train", "_call_impl", "forward"};
    uint32_t at = 0;
    for (int d = 0; d < 3; d++) { /* a chain, outermost frame first */
        at = v[at].first_child;
        assert_int_not_equal(at, MD_FLAME_NONE);
        assert_int_equal(v[at].next_sibling, MD_FLAME_NONE);
        assert_int_equal(v[at].depth, d + 1);
        assert_int_equal(v[at].bytes, PEAK);
        assert_string_equal(md_snapshot_string(s, md_snapshot_frame(s, v[at].frame)->name),
                            names[d]);
        assert_int_equal(v[at].self_bytes, d == 2 ? PEAK : 0);
    }
    free(v);
    /* after the last event the first block (1024 B) is gone */
    assert_int_equal(md_flame_at(a, (long)md_replay_nevents(r) - 1, 0, &v, &n, &e), MD_OK);
    assert_int_equal(v[0].bytes, PEAK - 1024);
    assert_int_equal(v[0].count, 3);
    free(v);
    assert_int_equal(md_flame_at(a, -1, 0, &v, &n, &e), MD_OK); /* nothing yet */
    assert_int_equal(n, 1);
    assert_int_equal(v[0].bytes, 0);
    free(v);
    assert_int_equal(md_flame_at(a, 99, 0, &v, &n, &e), MD_E_ARG);
    md_analysis_free(a);
    md_replay_free(r);
    md_snapshot_free(s);
}

/* The segments as torch would list them at the peak: the 2 MiB small
 * segment holds 1024 + 512 B allocated and its free rest; the 20 MiB one a
 * 5 MiB block and the 15 MiB rest taken whole (its 599552 B remainder is
 * not split off). */
static void test_segments_at_the_peak(void **state)
{
    (void)state;
    md_snapshot *s = load_ok("synthetic/v2_5.pickle");
    md_replay *r = replay_ok(s, 0);
    md_replay_seg *g;
    md_replay_block *b;
    size_t ng, nb;
    md_err e;
    memset(&e, 0, sizeof e);
    assert_int_equal(md_replay_segments_at(r, md_replay_peak_index(r), &g, &ng, &b, &nb, &e),
                     MD_OK);
    assert_int_equal(ng, 2);
    uint64_t want_small[] = {1024, 512, 2 * MIB - 1536}, want_large[] = {5 * MIB, 15 * MIB};
    int want_state_small[] = {MD_BS_ALLOCATED, MD_BS_ALLOCATED, MD_BS_FREE};
    for (size_t i = 0; i < ng; i++) {
        int small = g[i].size == 2 * MIB;
        assert_true(small || g[i].size == 20 * MIB);
        assert_int_equal(g[i].nblocks, small ? 3 : 2);
        uint64_t at = g[i].addr;
        for (size_t k = 0; k < g[i].nblocks; k++) {
            const md_replay_block *x = &b[g[i].first_block + k];
            assert_int_equal(x->addr, at); /* contiguous, in address order */
            assert_int_equal(x->size, small ? want_small[k] : want_large[k]);
            assert_int_equal(x->state, small ? want_state_small[k] : MD_BS_ALLOCATED);
            at += x->size;
        }
        assert_int_equal(at, g[i].addr + g[i].size);
    }
    free(g);
    free(b);
    assert_int_equal(md_replay_segments_at(r, -1, &g, &ng, &b, &nb, &e), MD_OK);
    assert_int_equal(ng, 0); /* recording began before the first segment */
    free(g);
    free(b);
    assert_int_equal(md_replay_segments_at(r, 1000, &g, &ng, &b, &nb, &e), MD_E_ARG);
    md_replay_free(r);
    md_snapshot_free(s);
}

/* On a real snapshot: the segments at the end agree with the file's own
 * final segment list, block by block. */
static void test_segments_at_the_end_match_the_file(void **state)
{
    (void)state;
    md_snapshot *s = load_ok("seed-exercise/snap-gamma-small-rank0.pickle");
    md_replay *r = replay_ok(s, 0);
    md_replay_seg *g;
    md_replay_block *b;
    size_t ng, nb, nfs, nfb;
    md_err e;
    memset(&e, 0, sizeof e);
    assert_int_equal(md_replay_segments_at(r, (long)md_replay_nevents(r) - 1, &g, &ng, &b, &nb, &e),
                     MD_OK);
    const md_segment *fs = md_snapshot_segments(s, &nfs);
    const md_block *fb = md_snapshot_blocks(s, &nfb);
    assert_int_equal(ng, nfs);
    for (size_t i = 0; i < ng; i++) {
        const md_segment *f = NULL;
        for (size_t k = 0; k < nfs && !f; k++)
            f = fs[k].address == g[i].addr ? &fs[k] : NULL;
        assert_non_null(f);
        assert_int_equal(f->total_size, g[i].size);
        assert_int_equal(f->nblocks, g[i].nblocks);
        for (size_t k = 0; k < g[i].nblocks; k++) {
            const md_block *x = &fb[f->first_block + k];
            assert_int_equal(x->size, b[g[i].first_block + k].size);
            assert_int_equal(x->state != MD_BLOCK_INACTIVE, b[g[i].first_block + k].state != MD_BS_FREE);
        }
    }
    free(g);
    free(b);
    md_replay_free(r);
    md_snapshot_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_flame_of_the_reference_trace),
        cmocka_unit_test(test_segments_at_the_peak),
        cmocka_unit_test(test_segments_at_the_end_match_the_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

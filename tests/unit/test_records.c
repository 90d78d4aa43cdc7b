/* test_records.c - the reader's record path (trace entries read straight
 * from their bytes, src/pickle/pickle.c rec_fast) against its general path
 * (every entry built as a dict and offered to the item hook): the same
 * snapshot, or the same error, from every snapshot under tests/data, in
 * place and through the reader's window; the edge cases of
 * synthetic/odd_records.pickle with the values pickle.load gives them; and
 * the path taken on real traces, so these tests cannot pass by its never
 * running. */
#include "testutil.h"
#include "snapsame.h"

/* Both paths alike on one snapshot file. */
static void alike(const char *path, void *ctx)
{
    (void)ctx;
    const char *why = records_difference(open_file, (void *)path); /* through the window */
    if (why)
        print_error("%s, read through the window: %s\n", path, why);
    assert_null(why);
    if (!strstr(path, ".gz") && !strstr(path, ".xz") && !strstr(path, ".zst")) {
        struct bytes b; /* raw bytes: also in place */
        size_t n;
        unsigned char *data = slurp(path, &n);
        assert_non_null(data);
        b.d = data, b.n = n;
        why = records_difference(open_mem, &b);
        if (why)
            print_error("%s, read in place: %s\n", path, why);
        assert_null(why);
        free(data);
    }
}

static void test_every_file_alike(void **st)
{
    (void)st;
    char root[1024];
    size_t files = each_snapshot(data_path("", root, sizeof root), alike, NULL);
    assert_true(files >= 300); /* tests/data holds 343 pickles and the hostile files */
}

static md_snapshot *read_with(const char *rel, int records)
{
    char p[1024];
    md_input *in = NULL;
    md_snapshot *s = NULL;
    md_err e;
    memset(&e, 0, sizeof e);
    assert_int_equal(md_input_open(data_path(rel, p, sizeof p), 0, &in, &e), MD_OK);
    assert_int_equal(md_snapshot_read(in, rel, records, &s, &e), MD_OK);
    md_input_close(in);
    return s;
}

/* On real traces nearly every entry takes the record path (the few that do
 * not bring a key or frame dict written for the first time). */
static void test_real_traces_take_it(void **st)
{
    (void)st;
    const char *files[] = {"seed-exercise/snap-gamma-medium-rank0.pickle",
                           "builds/causal/rank0.pickle.xz", "patterns/generate/rank0.pickle.xz"};
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        md_snapshot *fast = read_with(files[i], 1), *plain = read_with(files[i], 0);
        assert_true(fast->nrecords * 10 >= fast->nevents * 9);
        assert_int_equal(plain->nrecords, 0);
        md_snapshot_free(fast);
        md_snapshot_free(plain);
    }
}

#define A 0x7F0000000000ULL

/* tests/gen/make_synthetic.py odd_records: which entries the record path
 * takes, and each entry's values as pickle.load reads them. */
static void test_odd_records(void **st)
{
    (void)st;
    md_snapshot *s = read_with("synthetic/odd_records.pickle", 1);
    size_t n;
    const md_event *ev = md_snapshot_events(s, 0, &n);
    assert_int_equal(n, 11);
    assert_int_equal(s->nrecords, 5); /* entries 2, 3, 6, 9 and 10 */
    assert_int_equal(ev[0].addr, A);
    assert_int_equal(ev[1].addr, A + 512);  /* device_free, then addr */
    assert_int_equal(ev[2].addr, 8192);     /* addr, then device_free */
    assert_int_equal(ev[3].size, 1024);     /* the second 'size' */
    assert_int_equal(ev[4].addr, A + 4096); /* a key written afresh */
    assert_int_equal(ev[5].flags, MD_EV_POOL_PRIVATE);
    assert_int_equal(ev[6].addr, 1); /* True */
    assert_int_equal(ev[6].size, 0); /* None */
    assert_int_equal(md_snapshot_stream(s, ev[6].stream), UINT64_MAX);
    assert_int_equal(ev[7].addr, A + 12288);
    for (int i = 8; i < 10; i++) {
        md_stack_ids fr = md_snapshot_stack(s, ev[i].stack);
        size_t nf = fr.n;
        assert_int_equal(nf, 2);
        assert_string_equal(md_snapshot_string(s, md_snapshot_frame(s, md_stack_id(fr, 0))->name), "train");
    }
    assert_int_equal(ev[8].stack, ev[9].stack);
    assert_int_equal(md_snapshot_stream(s, ev[10].stream), 7); /* the key's bytes now name 'stream' */
    assert_int_equal(ev[10].size, 0);
    md_snapshot_free(s);
}

/* tests/gen/make_synthetic.py odd_blocks: blocks read as records among
 * blocks read as dicts, memo gets of blocks (each the same block again, as
 * pickle.load reads it), a torch 2.0 block, a blocks list got again (empty:
 * taken with its segment); each
 * segment's blocks, laid back to back in segment order as the general path
 * lays them (a stray block-like dict outside any segment left out). */
static void test_odd_blocks(void **st)
{
    (void)st;
    md_snapshot *s = read_with("synthetic/odd_blocks.pickle", 1);
    const uint64_t M = 1 << 20, S[7] = {A, A + 4 * M, A + 8 * M, A + 12 * M, A + 16 * M,
                                        A + 20 * M, A + 24 * M};
    const md_block want[] = {
        {S[0], M, M - 8, 0, MD_BLOCK_ACTIVE_ALLOCATED},      /* b0: keys written afresh */
        {S[0] + M, 2 * M, 2 * M - 8, 1, MD_BLOCK_ACTIVE_ALLOCATED}, /* b1: inline frames */
        {S[1], 512, 504, 0, MD_BLOCK_ACTIVE_ALLOCATED},      /* b2: a record */
        {S[1] + 512, 1024, 1016, 0, MD_BLOCK_INACTIVE},      /* b3: 'large', at the cursor */
        {S[1] + 4096, 2048, 2040, 0, MD_BLOCK_ACTIVE_PENDING_FREE}, /* b4 */
        {S[0], M, M - 8, 0, MD_BLOCK_ACTIVE_ALLOCATED},      /* b0 again, as it was */
        {S[2] + 8192, 4096, 4088, 0, MD_BLOCK_ACTIVE_PENDING_FREE}, /* b5 */
        {S[3], 3 * M, 3 * M - 8, 0, MD_BLOCK_ACTIVE_ALLOCATED},  /* b6 */
        {S[3], 3 * M, 3 * M - 8, 0, MD_BLOCK_ACTIVE_ALLOCATED},  /* b6 again */
        {S[4], 6144, 6000, 0, MD_BLOCK_ACTIVE_ALLOCATED},    /* torch 2.0: history */
        {S[1], 512, 504, 0, MD_BLOCK_ACTIVE_ALLOCATED},      /* b2 again */
    };
    const size_t per_seg[7] = {2, 3, 2, 2, 1, 0, 1}; /* S5: S3's list, taken with S3 */
    size_t nb = sizeof want / sizeof *want, ns;
    const md_segment *g = md_snapshot_segments(s, &ns);
    assert_int_equal(s->nrecords, 5); /* b2, b5, b6, the stray one and S5 */
    assert_int_equal(s->nspills, 2);  /* in S1 (at b3) and S3 (at the get of b6) */
    assert_int_equal(ns, 7);
    assert_int_equal(s->nblocks, nb);
    for (size_t i = 0, k = 0; i < ns; k += g[i].nblocks, i++) {
        assert_int_equal(g[i].first_block, k);
        assert_int_equal(g[i].nblocks, per_seg[i]);
    }
    for (size_t i = 0; i < nb; i++) {
        const md_block *b = &s->blocks[i];
        assert_int_equal(b->address, want[i].address);
        assert_int_equal(b->size, want[i].size);
        assert_int_equal(b->requested_size, want[i].requested_size);
        assert_int_equal(b->state, want[i].state);
        assert_int_equal(b->stack != 0, want[i].stack);
    }
    md_snapshot_free(s);
}

/* tests/gen/make_synthetic.py nested_blocks: segments read whole with
 * their blocks as records, and where that path stops part way; each
 * segment's blocks as pickle.load reads them, read in place and through
 * the reader's window (where N3's list crosses the window's end). */
static void check_nested(md_snapshot *s)
{
    static const uint64_t M = 1 << 20;
    static const size_t per_seg[8] = {2, 3, 1, 1501, 2, 2, 3, 0}; /* N0-N6, extra's segment */
    size_t ns, nb;
    const md_segment *g = md_snapshot_segments(s, &ns);
    const md_block *b = md_snapshot_blocks(s, &nb);
    assert_int_equal(ns, 8);
    for (size_t i = 0, k = 0; i < ns; k += g[i].nblocks, i++) {
        assert_int_equal(g[i].address, A + (i < 7 ? i : 9) * 64 * M); /* extra's: S9 */
        assert_int_equal(g[i].first_block, k);
        assert_int_equal(g[i].nblocks, per_seg[i]);
        assert_int_equal(g[i].pool_id[0], 0);
        uint64_t at = g[i].address;
        for (size_t j = 0; j < g[i].nblocks; at += b[k + j].size, j++) {
            assert_int_equal(b[k + j].address, at); /* N6's torch 2.0 block: at the cursor */
            assert_int_equal(b[k + j].requested_size, b[k + j].size - 8);
            assert_int_equal(b[k + j].state, MD_BLOCK_ACTIVE_ALLOCATED);
        }
    }
    assert_int_equal(b[1].size, 2 * M);
    assert_int_equal(b[2 + 3 + 1 + 1500].size, 4096);
    assert_int_equal(b[nb - 1].size, 6144);
    assert_int_equal(nb, 2 + 3 + 1 + 1501 + 2 + 2 + 3);
}

static void test_nested_blocks(void **st)
{
    (void)st;
    char p[1024];
    size_t n;
    unsigned char *data = slurp(data_path("synthetic/nested_blocks.pickle", p, sizeof p), &n);
    assert_non_null(data);
    md_snapshot *s = NULL;
    md_err e;
    assert_int_equal(md_snapshot_load_mem(data, n, "nested", &s, &e), MD_OK);
    check_nested(s);
    /* stopped in N5, N6 and both of extra's, and in N3 where the memo (sized
     * by the file) is full; nearly every block and the other segments taken */
    assert_int_equal(s->nspills, 5);
    assert_true(s->nrecords >= 1510);
    md_snapshot_free(s);
    s = read_with("synthetic/nested_blocks.pickle", 1);
    check_nested(s);
    assert_int_equal(s->nspills, 5); /* N3's where the window ends */
    assert_true(s->nrecords >= 1510);
    md_snapshot_free(s);
    free(data);
}

/* torch's own state-only snapshots (memory_snapshot() of a job recording
 * nothing, one recording the state alone, an OOM dump): each segment read
 * whole with its blocks, but where a block brings a frame written for the
 * first time. */
static void test_real_segments_take_it(void **st)
{
    (void)st;
    const char *files[] = {"snapmodes/norecord.pickle.xz", "snapmodes/state.pickle.xz",
                           "snapmodes/oomdump.pickle.xz", "seed-exercise/snap-gamma-small-rank0.pickle"};
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        md_snapshot *s = read_with(files[i], 1);
        /* blocks and events alone are under 85 % of these files' dicts */
        assert_true(s->nrecords * 10 >= (s->nevents + s->nblocks + s->nsegs) * 9);
        md_snapshot_free(s);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_odd_records),
        cmocka_unit_test(test_odd_blocks),
        cmocka_unit_test(test_nested_blocks),
        cmocka_unit_test(test_real_segments_take_it),
        cmocka_unit_test(test_real_traces_take_it),
        cmocka_unit_test(test_every_file_alike),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

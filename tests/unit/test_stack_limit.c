/* test_stack_limit.c - the reader's bound on distinct stacks. An md_live
 * keeps a stack id in 24 bits, so a snapshot with more stacks than ids
 * below MD_MAX_STACKS (id 0 the empty stack) is refused (MD_E_LIMIT)
 * rather than read with ids that wrap onto other stacks. A pickle with
 * 2^24 distinct stacks is half a gigabyte, so this file compiles the
 * reader itself with the bound at 300 ids (STACKS_MAX,
 * src/snapshot/snapshot.c) and reads synthetic/distinct_stacks.pickle,
 * whose 300 allocations each have a stack of their own: the 300th is one
 * too many, on either of the reader's paths; and the bit field holds the
 * largest id the real bound lets through. */
#define STACKS_MAX 300
#include "snapshot/snapshot.c"
#include "testutil.h"

static void refused_at_300(int records)
{
    char p[1024];
    md_input *in = NULL;
    md_snapshot *s = NULL;
    md_err e;
    memset(&e, 0, sizeof e);
    assert_int_equal(md_input_open(data_path("synthetic/distinct_stacks.pickle", p, sizeof p), 0,
                                   &in, &e), MD_OK);
    int64_t size = (int64_t)md_input_size(in);
    assert_int_equal(md_snapshot_read(in, "distinct_stacks", records, &s, &e), MD_E_LIMIT);
    assert_null(s);
    assert_non_null(strstr(e.msg, "more than 299 distinct stacks"));
    assert_true(e.offset > size / 2 && e.offset < size); /* at the 300th allocation */
    md_input_close(in);
}

static void test_past_the_bound(void **st)
{
    (void)st;
    refused_at_300(1);
    refused_at_300(0);
}

/* Under the bound: a real snapshot with fewer stacks is read whole. */
static void test_within_the_bound(void **st)
{
    (void)st;
    md_snapshot *s = NULL;
    md_err e;
    char p[1024];
    assert_int_equal(md_snapshot_load(data_path("seed-exercise/snap-gamma-small-rank0.pickle", p,
                                                sizeof p), &s, &e), MD_OK);
    assert_true(s->nstacks > 1 && s->nstacks <= 300);
    md_snapshot_free(s);
}

static void test_largest_id_fits(void **st)
{
    (void)st;
    md_live l;
    memset(&l, 0, sizeof l);
    l.stack = MD_MAX_STACKS - 1; /* the last id the reader hands out */
    l.category = 0xff;
    assert_int_equal(l.stack, MD_MAX_STACKS - 1);
    assert_int_equal(l.category, 0xff);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_past_the_bound),
        cmocka_unit_test(test_within_the_bound),
        cmocka_unit_test(test_largest_id_fits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* test_ahead.c - live sets fetched ahead of the analysis (on a thread of
 * the caller's, md_lives_ahead) give what the analysis fetches itself:
 * every fixture's first device with events, replayed, analysed once alone
 * and once with the replay's peak and peak of reserved memory probed
 * beforehand (here on this thread, as the thread would). The analysis must
 * take the sets it wants, leave the others, and give the same live sets,
 * categories and cache states at those moments; a failed fetch is left
 * alone and changes nothing. And the replay each probe would make
 * (md_replay_probe_work, which decides whether the thread pays) keeps
 * within its bounds. And every live set's categories are those
 * md_analysis_category gives each of its blocks alone (categorize_set
 * asks once a run of blocks where the stack decides). */
#include "testutil.h"
#include "analyze/analyze.h"
#include "model/model.h"

typedef struct tally {
    size_t files, taken, left;
} tally;

typedef struct counted {
    md_lives_ahead pub; /* first: wait() is handed it */
    size_t waits;
} counted;

static void count_wait(md_lives_ahead *a)
{
    ((counted *)a)->waits++;
}

static void same_set(const char *path, long index, const md_live_set *x, const md_live_set *y)
{
    if (!x || !y || x->n != y->n || memcmp(&x->cache, &y->cache, sizeof x->cache))
        fail_msg("%s: the live set at %ld differs (%zu / %zu blocks)", path, index,
                 x ? x->n : 0, y ? y->n : 0);
    for (size_t i = 0; i < x->n; i++) {
        const md_live *a = &x->live[i], *b = &y->live[i];
        if (a->addr != b->addr || a->block_size != b->block_size ||
            a->requested != b->requested || a->alloc_index != b->alloc_index ||
            a->stack != b->stack || a->category != b->category)
            fail_msg("%s: at %ld, block %zu differs", path, index, i);
    }
}

/* The analysis of r with sets fetched ahead (failed: a fetch that failed),
 * held to alone's at those moments. */
static void analysed_alike(const char *path, const md_snapshot *s, const md_replay *r,
                           const md_analysis *alone, int failed, tally *t)
{
    counted c = {.pub = {.wait = count_wait}};
    md_lives_ahead *ah = &c.pub;
    md_err e;
    md_analysis *a;
    if (!(ah->k = md_lives_ahead_indices(r, ah->idx)))
        return;
    for (size_t j = 1; j < ah->k; j++)
        assert_true(ah->idx[j] > ah->idx[j - 1]);
    assert_int_equal(md_replay_probe(r, ah->idx, ah->k, ah->live, ah->n, ah->cs, &e), 0);
    ah->failed = failed;
    assert_int_equal(md_analyze_ahead(s, r, NULL, ah, &a, &e), 0);
    assert_int_equal(c.waits, 1);
    for (size_t j = 0; j < ah->k; j++) {
        long index = ah->idx[j];
        int wanted = index == md_analysis_peak_index(a) ||
                     index == md_replay_peak_reserved_index(r);
        if (failed || !wanted || !ah->n[j]) { /* an empty set is fetched again */
            if (ah->n[j] && !ah->live[j])
                fail_msg("%s: the set at %ld taken, failed %d", path, index, failed);
            t->left++;
        } else if (ah->live[j]) {
            fail_msg("%s: the set at %ld, wanted, was not taken", path, index);
        } else {
            t->taken++;
        }
        same_set(path, index, md_analysis_live(a, index), md_analysis_live(alone, index));
        free(ah->live[j]);
    }
    md_analysis_free(a);
}

/* md_replay_probe_work, which decides whether the thread pays: nothing at
 * the trace's end (the final state, copied), at most the events up to a
 * moment (and the blocks laid before them) for one, and no more for two
 * together than apart (the second goes on from the first). */
static void work_bounds(const md_replay *r)
{
    long n = (long)md_replay_nevents(r), last = n - 1, idx[2];
    size_t k = md_lives_ahead_indices(r, idx);
    assert_int_equal(md_replay_probe_work(r, &last, 1), 0);
    size_t apart = 0;
    for (size_t j = 0; j < k; j++) {
        size_t w = md_replay_probe_work(r, &idx[j], 1);
        if (w > (size_t)idx[j] + 1 + (size_t)n * 4)
            fail_msg("probe work %zu for event %ld of %ld", w, idx[j], n);
        apart += w;
    }
    assert_true(md_replay_probe_work(r, idx, k) <= apart);
    /* a long trace (checks from 8192 events) keeps a state at 27/32 of
     * it: the last moment but one is replayed from there, not the start */
    long near_end = n - 2;
    if (n >= 2 * 8192 && md_replay_probe_work(r, &near_end, 1) > (size_t)n / 4)
        fail_msg("probe work %zu for event %ld of %ld", md_replay_probe_work(r, &near_end, 1),
                 near_end, n);
}

static void each_file(const char *path, void *ctx)
{
    tally *t = ctx;
    md_snapshot *s;
    md_err e;
    if (md_snapshot_load(path, &s, &e))
        return; /* the hostile inputs */
    int dev = -1;
    for (int d = 0; d < md_snapshot_ndevices(s) && dev < 0; d++) {
        size_t n;
        if (md_snapshot_events(s, d, &n) && n)
            dev = d;
    }
    md_replay *r;
    md_analysis *alone;
    if (dev < 0 || md_replay_run(s, dev, &r, &e)) {
        md_snapshot_free(s);
        return;
    }
    assert_int_equal(md_analyze(s, r, &alone, &e), 0);
    work_bounds(r);
    analysed_alike(path, s, r, alone, 0, t);
    analysed_alike(path, s, r, alone, 1, t);
    t->files++;
    md_analysis_free(alone);
    md_replay_free(r);
    md_snapshot_free(s);
}

static void test_lives_fetched_ahead(void **st)
{
    (void)st;
    char root[1024];
    tally t = {0};
    each_snapshot(data_path("", root, sizeof root), each_file, &t);
    assert_true(t.files > 200);
    assert_true(t.taken > t.files / 2); /* the peak's set, at least, nearly everywhere */
    assert_true(t.left >= t.files);     /* every failed fetch */
}

typedef struct cat_tally {
    size_t sets, prehistory; /* sets checked; their blocks made before the history */
    size_t stateonly;        /* sets of devices with no events */
} cat_tally;

/* Each block of the sets at the start, the peak and the end of device d
 * has the category it has asked alone. */
static void categories_alone(const char *path, const md_snapshot *s, int d, cat_tally *t)
{
    md_replay *r;
    md_analysis *a;
    md_err e;
    size_t nev;
    if (md_replay_run(s, d, &r, &e))
        return;
    md_snapshot_events(s, d, &nev);
    assert_int_equal(md_analyze(s, r, &a, &e), 0);
    long at[3] = {-1, md_analysis_peak_index(a), (long)md_replay_nevents(r) - 1};
    for (int k = 0; k < 3; k++) {
        const md_live_set *ls = md_analysis_live(a, at[k]);
        assert_non_null(ls);
        for (size_t i = 0; i < ls->n; i++) {
            const md_live *l = &ls->live[i];
            if (l->category != md_analysis_category(a, l))
                fail_msg("%s device %d: at %ld, block %zu is %s, alone %s", path, d, at[k], i,
                         md_category_name(l->category),
                         md_category_name(md_analysis_category(a, l)));
            t->prehistory += l->alloc_index < 0;
        }
        t->sets++;
        t->stateonly += nev == 0;
    }
    md_analysis_free(a);
    md_replay_free(r);
}

static void each_file_categories(const char *path, void *ctx)
{
    md_snapshot *s;
    md_err e;
    if (md_snapshot_load(path, &s, &e))
        return; /* the hostile inputs */
    for (int d = 0; d < md_snapshot_ndevices(s); d++)
        categories_alone(path, s, d, ctx);
    md_snapshot_free(s);
}

static void test_categories_as_alone(void **st)
{
    (void)st;
    char root[1024];
    cat_tally t = {0};
    each_snapshot(data_path("", root, sizeof root), each_file_categories, &t);
    assert_true(t.sets > 600);
    assert_true(t.stateonly > 0);
    assert_true(t.prehistory > 10000);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lives_fetched_ahead),
        cmocka_unit_test(test_categories_as_alone),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* test_follow.c - the replay's first pass made while a snapshot is read
 * (md_load_opts.on_events, md_pass, model/follow.c) against the replay made
 * after it (md_replay_run): the same timeline, peaks, frees, live sets and
 * cache state for every snapshot under tests/data, whether the pass is fed
 * on the reading thread in uneven batches or by the follow thread; a pass
 * the snapshot's settings or device layout rule out is not taken; a read
 * that fails, or moves its events, stops the thread. So too the walk a
 * reconstruction needs, made by a pass that stopped at an anomaly or by one
 * made for it alone (md_pass_new_scan). Counts of passes taken and walks
 * made keep the tests from passing by never taking one. */
#include "testutil.h"
#include "replaysame.h"

typedef struct tally {
    size_t files, taken, stopped, refused, moved, walked;
} tally;

/* Loads path with opts, replays its first device with `pass` and without,
 * and asserts they agree; tallies what became of the pass. */
static void check_alike(const char *path, md_snapshot *s, md_pass *pass, tally *t)
{
    int d = first_device(s);
    if (d < 0) {
        md_pass_free(pass);
        return;
    }
    t->files++;
    t->walked += pass && md_pass_walked(pass);
    if (pass && md_pass_fits(pass, s, d))
        md_pass_stopped(pass) ? t->stopped++ : t->taken++;
    else
        t->refused++;
    const char *why = pass_difference(s, d, pass);
    if (why)
        print_error("%s: the pass made while reading differs: %s\n", path, why);
    assert_null(why);
}

typedef struct walk {
    int threaded; /* the pass fed by the follow thread, else on the reading one */
    int walk_only; /* a pass made only for the walk (md_pass_new_scan) */
    tally t;
    int told, stopped; /* the follow thread's on_first calls for this file, and what it said */
    size_t stops_told; /* over all files: first feeds told as stopped */
} walk;

static void count_first(void *ctx, int stopped)
{
    walk *w = ctx;
    w->told++;
    w->stopped = stopped;
}

/* The follow thread told of its first feed once, if it fed any events,
 * and whether its pass stopped there: a stop later is not told (a trace
 * that began cleanly, its anomaly past the first batch). */
static void check_told(walk *w, const md_pass *pass, const md_snapshot *s)
{
    assert_true(w->told <= 1);
    if (w->walk_only && w->told)
        assert_false(w->stopped); /* a walk never stops */
    if (pass && s && first_device(s) >= 0 && md_pass_fits(pass, s, first_device(s))) {
        size_t n;
        md_snapshot_events(s, first_device(s), &n);
        assert_int_equal(w->told, n > 0);
        if (w->stopped) /* it stopped, and within the first batch */
            assert_true(md_pass_stopped(pass));
    }
    w->stops_told += (size_t)(w->told && w->stopped);
}

/* One snapshot read with a pass made while reading, and held to the
 * replay after it. */
static void read_following(const char *path, void *ctx)
{
    walk *w = ctx;
    int threaded = w->threaded;
    md_load_opts opts = {.read_ahead = threaded};
    feeder fd = {w->walk_only ? md_pass_new_scan() : md_pass_new(), 0, 7, 0, 0, 0, NULL, 0};
    w->told = w->stopped = 0;
    md_follow *fo = threaded ? md_follow_start(w->walk_only, count_first, w) : NULL;
    assert_non_null(threaded ? (void *)fo : (void *)fd.pass);
    opts.on_events = threaded ? md_follow_events : feed_events;
    opts.events_ctx = threaded ? (void *)fo : (void *)&fd;
    md_snapshot *s = NULL;
    md_err e;
    memset(&e, 0, sizeof e);
    int rc = md_snapshot_load_with(path, &opts, &s, &e);
    md_pass *pass = threaded ? md_follow_finish(fo) : fd.pass;
    if (threaded) {
        md_pass_free(fd.pass);
        check_told(w, pass, rc ? NULL : s);
    }
    assert_false(fd.bad);
    if (rc) { /* a hostile file: refused, the thread stopped */
        assert_null(s);
        md_pass_free(pass);
    } else {
        w->t.moved += fd.pauses > 0;
        check_alike(path, s, pass, &w->t);
        md_snapshot_free(s);
    }
    md_follow_free(fo);
}

/* Every snapshot under tests/data read so; what became of the passes. */
static tally every_file(int threaded, int walk_only, const char *how)
{
    char root[1024];
    walk w = {threaded, walk_only, {0, 0, 0, 0, 0, 0}, 0, 0, 0};
    each_snapshot(data_path("", root, sizeof root), read_following, &w);
    print_message("%s: %zu files, %zu passes taken, %zu stopped at an anomaly, %zu refused, "
                  "%zu walks made, %zu stops told; %zu had their events moved while read\n",
                  how, w.t.files, w.t.taken, w.t.stopped, w.t.refused, w.t.walked, w.stops_told,
                  w.t.moved);
    assert_true(w.t.files >= 250);
    if (walk_only) { /* never a first pass; a walk of every trace */
        assert_int_equal(w.t.taken + w.t.stopped, 0);
        assert_true(w.t.walked >= 250);
    } else {
        assert_true(w.t.taken >= 100); /* most real traces need no reconstruction */
        assert_true(w.t.walked >= w.t.stopped && w.t.walked >= 5); /* each stop walks on */
        if (threaded) /* most stops come in the first batch: told */
            assert_true(w.stops_told >= 5 && w.stops_told <= w.t.stopped + w.t.refused);
    }
    return w.t;
}

static void test_every_file_fed_on_the_reading_thread(void **st)
{
    (void)st;
    tally t = every_file(0, 0, "fed on the reading thread");
    assert_true(t.stopped >= 5);
    assert_true(t.refused >= 1); /* settings other than torch's defaults */
    assert_true(t.moved >= 100); /* compressed files: their array grows as read */
}

static void test_every_file_followed_by_the_thread(void **st)
{
    (void)st;
    every_file(1, 0, "followed by the thread");
}

static void test_every_file_walked_only(void **st)
{
    (void)st;
    every_file(0, 1, "walked only, on the reading thread");
    every_file(1, 1, "walked only, by the thread");
}

/* A file never read (no such path): the thread was never told anything and
 * must still stop. */
static void test_follow_of_a_read_that_never_started(void **st)
{
    (void)st;
    md_follow *fo = md_follow_start(0, NULL, NULL);
    assert_non_null(fo);
    md_load_opts opts = {.read_ahead = 1, .on_events = md_follow_events, .events_ctx = fo};
    md_snapshot *s = NULL;
    md_err e;
    memset(&e, 0, sizeof e);
    assert_int_not_equal(md_snapshot_load_with("tests/data/no/such.pickle", &opts, &s, &e), MD_OK);
    assert_null(md_follow_finish(fo));
    md_follow_free(fo);
}

/* A pass fed events that are not the next ones is refused; events that
 * moved are taken where they are now. */
static void test_pass_refusals(void **st)
{
    (void)st;
    md_event ev[4] = {{0x200000, 2 << 20, -1, 0, 0, MD_ACT_SEGMENT_ALLOC, 0},
                      {0x200000, 512, -1, 0, 0, MD_ACT_ALLOC, 0},
                      {0x200000, 512, -1, 0, 0, MD_ACT_FREE_REQUESTED, 0},
                      {0x200000, 512, -1, 0, 0, MD_ACT_FREE_COMPLETED, 0}};
    md_event other[4];
    memcpy(other, ev, sizeof ev);
    md_pass *p = md_pass_new();
    assert_non_null(p);
    assert_int_equal(md_pass_feed(p, ev, 0, 2, 4), 0);
    assert_int_equal(md_pass_feed(p, ev, 3, 4, 4), -1);   /* a gap */
    assert_int_equal(md_pass_feed(p, other, 2, 4, 4), 0); /* the same, moved */
    assert_int_equal(md_pass_feed(p, other, 2, 4, 4), -1); /* again */
    assert_false(md_pass_stopped(p));
    md_pass_free(p);
    /* an alloc where no segment is: the first pass stops there */
    p = md_pass_new();
    assert_int_equal(md_pass_feed(p, ev + 1, 0, 2, 3), 1);
    assert_true(md_pass_stopped(p) && md_pass_walked(p));
    assert_int_equal(md_pass_feed(p, ev + 1, 2, 3, 3), 0); /* walked on */
    assert_int_equal(md_pass_feed(p, ev + 1, 1, 3, 3), -1); /* not the next */
    md_pass_free(p);
    /* a pass only for the walk is never a first pass */
    p = md_pass_new_scan();
    assert_int_equal(md_pass_feed(p, ev, 0, 4, 4), 0);
    assert_true(md_pass_walked(p) && !md_pass_stopped(p));
    md_pass_free(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_file_fed_on_the_reading_thread),
        cmocka_unit_test(test_every_file_followed_by_the_thread),
        cmocka_unit_test(test_every_file_walked_only),
        cmocka_unit_test(test_follow_of_a_read_that_never_started),
        cmocka_unit_test(test_pass_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

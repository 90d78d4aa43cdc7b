/* test_follow.c - the replay's first pass made while a snapshot is read
 * (md_load_opts.on_events, md_pass, model/follow.c) against the replay made
 * after it (md_replay_run): the same timeline, peaks, frees, live sets and
 * cache state for every snapshot under tests/data, whether the pass is fed
 * on the reading thread in uneven batches or by the follow thread; a pass
 * the snapshot's settings or device layout rule out is not taken; a read
 * that fails, or moves its events, stops the thread. Counts of passes
 * taken keep the tests from passing by never taking one. */
#include <dirent.h>
#include <sys/stat.h>
#include "testutil.h"
#include "model/model.h"

/* A feeder on the reading thread: the events told of, fed in batches of
 * uneven length (an LCG), as a thread that lags would feed them. */
typedef struct feeder {
    md_pass *pass;
    size_t done;
    uint32_t seed;
    int ended, gone, moved, paused;
    const md_event *events;
} feeder;

static void feed(void *ctx, const md_event *events, size_t n, size_t expect, int state)
{
    feeder *f = ctx;
    if (state == MD_EVENTS_GONE || state == MD_EVENTS_PAUSE) {
        assert_null(events);
        f->gone += state == MD_EVENTS_GONE;
        f->paused = 1;
        return;
    }
    assert_false(f->gone); /* nothing after GONE */
    if (f->events && events != f->events && !f->paused)
        f->moved = 1; /* must never happen without a PAUSE first */
    f->paused = 0;
    f->events = events;
    while (f->done < n) {
        f->seed = f->seed * 1103515245u + 12345u;
        size_t k = 1 + (f->seed >> 16) % 3000, to = f->done + k < n ? f->done + k : n;
        if (md_pass_feed(f->pass, events, f->done, to, expect) != 0)
            break;
        f->done = to;
    }
    if (state == MD_EVENTS_END)
        f->ended++;
}

/* NULL if the two replays agree, else where they first differ. */
static const char *replay_difference(const md_replay *a, const md_replay *b)
{
    size_t n = md_replay_nevents(a);
    if (n != md_replay_nevents(b))
        return "event count";
    md_point pa = md_replay_initial(a), pb = md_replay_initial(b);
    if (memcmp(&pa, &pb, sizeof pa))
        return "initial point";
    if (md_replay_peak_index(a) != md_replay_peak_index(b) ||
        md_replay_peak_allocated(a) != md_replay_peak_allocated(b) ||
        md_replay_peak_reserved(a) != md_replay_peak_reserved(b))
        return "peak";
    if (md_replay_anomalies(a) != md_replay_anomalies(b))
        return "anomalies";
    for (size_t i = 0; i < n; i++) {
        pa = md_replay_at(a, (long)i), pb = md_replay_at(b, (long)i);
        if (memcmp(&pa, &pb, sizeof pa))
            return "timeline";
        if (md_replay_free_index(a, (long)i) != md_replay_free_index(b, (long)i))
            return "free index";
    }
    long at[4] = {-1, (long)n / 3, md_replay_peak_index(a), (long)n - 1};
    for (int k = 0; k < 4; k++) {
        md_live *la = NULL, *lb = NULL;
        size_t na = 0, nb = 0;
        md_cache_state ca, cb;
        md_err e;
        memset(&e, 0, sizeof e);
        if (md_replay_live(a, at[k], &la, &na, &e) || md_replay_live(b, at[k], &lb, &nb, &e) ||
            md_replay_cache_at(a, at[k], &ca, &e) || md_replay_cache_at(b, at[k], &cb, &e)) {
            free(la);
            free(lb);
            return "a probe failed";
        }
        int same = na == nb && !memcmp(&ca, &cb, sizeof ca);
        for (size_t i = 0; same && i < na; i++)
            same = la[i].addr == lb[i].addr && la[i].block_size == lb[i].block_size &&
                   la[i].requested == lb[i].requested && la[i].alloc_index == lb[i].alloc_index &&
                   la[i].stack == lb[i].stack && la[i].category == lb[i].category;
        free(la);
        free(lb);
        if (!same)
            return "live set or cache state";
    }
    return NULL;
}

typedef struct tally {
    size_t files, taken, stopped, refused, gone;
} tally;

/* The first device with events: where a pass made while reading is given
 * (as the CLI gives it). */
static int first_device(const md_snapshot *s)
{
    for (int d = 0; d < md_snapshot_ndevices(s); d++) {
        size_t n;
        md_snapshot_events(s, d, &n);
        if (n)
            return d;
    }
    return -1;
}

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
    if (pass && md_pass_fits(pass, s, d))
        md_pass_stopped(pass) ? t->stopped++ : t->taken++;
    else
        t->refused++;
    md_replay *with = NULL, *without = NULL;
    md_err e;
    memset(&e, 0, sizeof e);
    int rc = md_replay_run_with(s, d, pass, &with, &e);
    int rc2 = md_replay_run(s, d, &without, &e);
    assert_int_equal(rc, rc2);
    if (!rc) {
        const char *why = replay_difference(with, without);
        if (why)
            print_error("%s: the pass made while reading differs: %s\n", path, why);
        assert_null(why);
    }
    md_replay_free(with);
    md_replay_free(without);
}

static int is_snapshot_name(const char *dir, const char *name)
{
    return strstr(name, ".pickle") || strstr(dir, "synthetic") || strstr(dir, "fuzz-regress") ||
           strstr(dir, "adversarial");
}

/* Every snapshot under dir, read with a pass fed on the reading thread
 * (threaded 0) or by the follow thread (1). */
static void alike_under(const char *dir, int threaded, tally *t)
{
    DIR *dd = opendir(dir);
    assert_non_null(dd);
    struct dirent *de;
    while ((de = readdir(dd)) != NULL) {
        char path[1024];
        struct stat st;
        if (de->d_name[0] == '.')
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        assert_int_equal(stat(path, &st), 0);
        if (S_ISDIR(st.st_mode)) {
            alike_under(path, threaded, t);
            continue;
        }
        if (!is_snapshot_name(dir, de->d_name))
            continue;
        md_load_opts opts = {.read_ahead = threaded};
        feeder fd = {md_pass_new(), 0, 7, 0, 0, 0, 0, NULL};
        md_follow *fo = threaded ? md_follow_start() : NULL;
        assert_non_null(threaded ? (void *)fo : (void *)fd.pass);
        opts.on_events = threaded ? md_follow_events : feed;
        opts.events_ctx = threaded ? (void *)fo : (void *)&fd;
        md_snapshot *s = NULL;
        md_err e;
        memset(&e, 0, sizeof e);
        int rc = md_snapshot_load_with(path, &opts, &s, &e);
        md_pass *pass = threaded ? md_follow_finish(fo) : fd.pass;
        if (threaded)
            md_pass_free(fd.pass);
        assert_false(fd.moved);
        if (rc) { /* a hostile file: refused, the thread stopped */
            assert_null(s);
            md_pass_free(pass);
            md_follow_free(fo);
            continue;
        }
        t->gone += fd.gone;
        check_alike(path, s, pass, t);
        md_follow_free(fo);
        md_snapshot_free(s);
    }
    closedir(dd);
}

static void test_every_file_fed_on_the_reading_thread(void **st)
{
    (void)st;
    char root[1024];
    tally t = {0, 0, 0, 0, 0};
    alike_under(data_path("", root, sizeof root), 0, &t);
    print_message("fed on the reading thread: %zu files, %zu passes taken, %zu stopped at "
                  "an anomaly, %zu refused; %zu told their events moved\n", t.files, t.taken,
                  t.stopped, t.refused, t.gone);
    assert_true(t.files >= 250);
    assert_true(t.taken >= 100); /* most real traces need no reconstruction */
    assert_true(t.stopped >= 5);
    assert_true(t.refused >= 1); /* settings other than torch's defaults */
}

static void test_every_file_followed_by_the_thread(void **st)
{
    (void)st;
    char root[1024];
    tally t = {0, 0, 0, 0, 0};
    alike_under(data_path("", root, sizeof root), 1, &t);
    print_message("followed by the thread: %zu files, %zu passes taken, %zu stopped, "
                  "%zu refused\n", t.files, t.taken, t.stopped, t.refused);
    assert_true(t.files >= 250);
    assert_true(t.taken >= 100);
}

/* A file never read (no such path): the thread was never told anything and
 * must still stop. */
static void test_follow_of_a_read_that_never_started(void **st)
{
    (void)st;
    md_follow *fo = md_follow_start();
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
    assert_int_equal(md_pass_feed(p, ev + 1, 0, 3, 3), 1);
    assert_true(md_pass_stopped(p));
    assert_int_equal(md_pass_feed(p, ev + 1, 3, 3, 3), -1);
    md_pass_free(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_file_fed_on_the_reading_thread),
        cmocka_unit_test(test_every_file_followed_by_the_thread),
        cmocka_unit_test(test_follow_of_a_read_that_never_started),
        cmocka_unit_test(test_pass_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

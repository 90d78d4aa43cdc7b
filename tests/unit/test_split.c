/* test_split.c - the read split in two (md_load_opts.split; snapshot.c,
 * pickle/split.c): the same snapshot, or the same error, as the read
 * whole, from every snapshot under tests/data (compressed ones
 * decompressed first) split at several places, with one and with several
 * threads counting the memo; and the split taken on real traces, so these
 * tests cannot pass by its never happening. */
#include "testutil.h"
#include "snapsame.h"
#include "util/input.h"

/* The input's bytes, decompressed; NULL where it cannot be read. */
static unsigned char *bytes_of(const char *path, size_t *n)
{
    md_input *in = NULL;
    md_err e;
    size_t cap = 1 << 16;
    unsigned char *b = malloc(cap);
    *n = 0;
    if (!b || md_input_open(path, 0, &in, &e)) {
        free(b);
        return NULL;
    }
    for (;;) {
        if (*n == cap) {
            unsigned char *nb = realloc(b, cap *= 2);
            assert_non_null(nb);
            b = nb;
        }
        long r = md_input_read(in, b + *n, cap - *n, &e);
        if (r <= 0) {
            md_input_close(in);
            if (r < 0) {
                free(b);
                return NULL;
            }
            return b;
        }
        *n += (size_t)r;
    }
}

static int read_mem(const unsigned char *d, size_t n, const md_load_opts *o, md_snapshot **s,
                    md_err *e, char *msg, size_t msz)
{
    md_input *in = NULL;
    memset(e, 0, sizeof *e);
    *s = NULL;
    assert_int_equal(md_input_mem(d, n, &in, e), MD_OK);
    int rc = md_snapshot_read_with(in, "same", 1, o, s, e);
    md_input_close(in);
    md_err_format(e, msg, msz);
    return rc;
}

struct tally {
    size_t files, split, events, second;
};

static const double places[] = {0.2, 0.45, 0.55, 0.7, 0.9};

/* The read split at each place alike to the read whole, on one file. */
static void alike(const char *path, void *ctx)
{
    struct tally *t = ctx;
    size_t n;
    unsigned char *d = bytes_of(path, &n);
    if (!d)
        return;
    md_snapshot *whole, *part;
    md_err e;
    char m0[512], m1[512];
    int rc0 = read_mem(d, n, NULL, &whole, &e, m0, sizeof m0);
    for (size_t i = 0; i < sizeof places / sizeof *places; i++) {
        md_load_opts o = {.split = 1 + (int)(i % 3), .split_where = places[i], .split_min = 1};
        int rc1 = read_mem(d, n, &o, &part, &e, m1, sizeof m1);
        const char *why = rc0 != rc1            ? "one read failed, the other did not"
                          : rc0 && strcmp(m0, m1) ? "the errors differ"
                          : rc0                 ? NULL
                                                : snapshot_difference(whole, part);
        if (why)
            print_error("%s split at %.2f: %s (%s | %s)\n", path, places[i], why, m0, m1);
        assert_null(why);
        if (part && part->nsecond) {
            t->split++;
            t->second += part->nsecond;
            t->events += part->nevents;
        }
        md_snapshot_free(part);
    }
    md_snapshot_free(whole);
    free(d);
    t->files++;
}

static void test_every_file_alike(void **st)
{
    (void)st;
    char root[1024];
    struct tally t = {0, 0, 0, 0};
    each_snapshot(data_path("", root, sizeof root), alike, &t);
    print_message("split: %zu files, %zu reads split, %zu of their %zu events read second\n",
                  t.files, t.split, t.second, t.events);
    assert_true(t.files >= 300);
    /* real traces split: most reads of them, and a good share of their events */
    assert_true(t.split >= 300);
    assert_true(t.second * 5 >= t.events);
}

static md_snapshot *load_split(const char *rel, double where)
{
    char p[1024];
    md_snapshot *s = NULL;
    md_err e;
    memset(&e, 0, sizeof e);
    md_load_opts o = {.split = 2, .split_where = where, .split_min = 1};
    assert_int_equal(md_snapshot_load_with(data_path(rel, p, sizeof p), &o, &s, &e), MD_OK);
    return s;
}

/* A file read from a mapping of it, split (the CLI's path): as read whole,
 * and split. */
static void test_mapped_file(void **st)
{
    (void)st;
    const char *rel = "seed-exercise/snap-gamma-medium-rank0.pickle";
    md_snapshot *whole = load_ok(rel), *part = load_split(rel, 0.5);
    assert_null(snapshot_difference(whole, part));
    assert_true(part->nsecond * 4 >= part->nevents); /* a quarter or more read second */
    assert_int_equal(part->split_again, 0);
    md_snapshot_free(whole);
    md_snapshot_free(part);
}

/* tests/gen/make_synthetic.py split_hole: the second device names a
 * frames list the first device's trace wrote after the split: the read
 * is made again whole, to the same snapshot. */
static void test_hole_read_again(void **st)
{
    (void)st;
    const char *rel = "synthetic/split_hole.pickle";
    md_snapshot *whole = load_ok(rel);
    for (double where = 0.3; where < 0.6; where += 0.2) {
        md_snapshot *part = load_split(rel, where);
        assert_null(snapshot_difference(whole, part));
        assert_int_equal(part->split_again, 1);
        assert_int_equal(part->nsecond, 0);
        md_snapshot_free(part);
    }
    md_snapshot_free(whole);
}

/* md_input_skip on a plain file read ahead (5 MB: the thread starts) and
 * not: skips within what the thread holds, past it, and past the end,
 * then reads on exactly there. */
static void test_input_skip(void **st)
{
    (void)st;
    const char *path = "build/tests/skip.bin";
    size_t n = 5u << 20;
    unsigned char *d = malloc(n), buf[1000];
    assert_non_null(d);
    for (size_t i = 0; i < n; i++)
        d[i] = (unsigned char)(i * 7 + i / 251);
    write_file(path, d, n);
    for (int ahead = 0; ahead < 2; ahead++) {
        md_input *in = NULL;
        md_err e;
        memset(&e, 0, sizeof e);
        assert_int_equal(md_input_open(path, ahead, &in, &e), MD_OK);
        size_t at = 0;
        const size_t skips[] = {0, 10, 100000, 300000, 2000000, 1, 65536};
        for (size_t k = 0; k < sizeof skips / sizeof *skips; k++) {
            assert_int_equal(md_input_read(in, buf, sizeof buf, &e), (long)sizeof buf);
            assert_memory_equal(buf, d + at, sizeof buf);
            at += sizeof buf;
            assert_int_equal(md_input_skip(in, skips[k], &e), MD_OK);
            at += skips[k];
        }
        assert_int_equal(md_input_skip(in, n, &e), MD_OK); /* past the end: stops there */
        assert_int_equal(md_input_read(in, buf, sizeof buf, &e), 0);
        md_input_close(in);
    }
    remove(path);
    free(d);
}

/* md_input_lend on a plain file read ahead: every stretch lent is the
 * file's next bytes, with its room before it writable, whether given back
 * at once or held (up to three), between reads and skips, to the end. */
static void test_input_lend(void **st)
{
    (void)st;
    const char *path = "build/tests/lend.bin";
    size_t n = 5u << 20, at = 0, lends = 0;
    unsigned char *d = malloc(n), buf[1000], *p;
    assert_non_null(d);
    for (size_t i = 0; i < n; i++)
        d[i] = (unsigned char)(i * 7 + i / 251);
    write_file(path, d, n);
    md_input *in = NULL;
    md_err e;
    memset(&e, 0, sizeof e);
    assert_int_equal(md_input_open(path, 1, &in, &e), MD_OK);
    assert_true(md_input_can_lend(in));
    for (long got; (got = md_input_lend(in, &p, &e)) != 0; lends++) {
        assert_true(got > 0 && at + (size_t)got <= n);
        assert_memory_equal(p, d + at, (size_t)got);
        memset(p - MD_INPUT_LEND_PAD, 0xAA, MD_INPUT_LEND_PAD); /* the room is ours */
        at += (size_t)got;
        if (lends % 3 != 2) /* else held: two or three lent at once */
            md_input_lend_done(in, 1);
        if (lends % 7 == 3) { /* a read gives back what is lent, then reads on */
            long r = md_input_read(in, buf, sizeof buf, &e);
            assert_true(r > 0 || (r == 0 && at == n)); /* 0: the end */
            if (r > 0)
                assert_memory_equal(buf, d + at, (size_t)r);
            at += (size_t)r;
        }
        if (lends % 11 == 5) { /* and so does a skip */
            assert_int_equal(md_input_skip(in, 70000, &e), MD_OK);
            at = at + 70000 < n ? at + 70000 : n; /* past the end: stops there */
        }
    }
    assert_int_equal(at, n);
    assert_true(lends >= 30);
    md_input_close(in);
    remove(path);
    free(d);
}

/* Every snapshot read ahead on a thread (compressed ones always, parsed in
 * place from its chunks: md_input_lend) reads as read on the caller's:
 * the same snapshot or the same error. long_strings.pickle.gz has names
 * longer than a chunk and than the room before one. */
static void read_ahead_alike(const char *path, void *ctx)
{
    size_t *files = ctx;
    md_snapshot *s[2] = {NULL, NULL};
    md_err e[2];
    char m[2][512];
    int rc[2];
    for (int k = 0; k < 2; k++) {
        md_load_opts o = {.read_ahead = k};
        memset(&e[k], 0, sizeof e[k]);
        rc[k] = md_snapshot_load_with(path, &o, &s[k], &e[k]);
        md_err_format(&e[k], m[k], sizeof m[k]);
    }
    const char *why = rc[0] != rc[1]                 ? "one read failed, the other did not"
                      : rc[0] && strcmp(m[0], m[1]) ? "the errors differ"
                      : rc[0]                       ? NULL
                                                    : snapshot_difference(s[0], s[1]);
    if (why)
        print_error("%s read ahead: %s (%s | %s)\n", path, why, m[0], m[1]);
    assert_null(why);
    md_snapshot_free(s[0]);
    md_snapshot_free(s[1]);
    ++*files;
}

static void test_every_file_read_ahead_alike(void **st)
{
    (void)st;
    char root[1024];
    size_t files = 0;
    each_snapshot(data_path("", root, sizeof root), read_ahead_alike, &files);
    assert_true(files >= 300);
    char p[1024];
    read_ahead_alike(data_path("synthetic/long_strings.pickle.gz", p, sizeof p), &files);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_file_alike),
        cmocka_unit_test(test_mapped_file),
        cmocka_unit_test(test_hole_read_again),
        cmocka_unit_test(test_input_skip),
        cmocka_unit_test(test_input_lend),
        cmocka_unit_test(test_every_file_read_ahead_alike),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* test_pickle.c - the safe pickle reader on hand-built opcode streams:
 * every refused opcode, memo styles, big integers, framing, limits, and
 * malformed input. Synthetic by necessity: these are the edge cases. */
#include "testutil.h"

/* A minimal valid snapshot body around a payload is overkill here: most
 * cases only need the reader to accept or refuse. An accepted pickle that
 * is not a snapshot fails with MD_E_SCHEMA, which proves it parsed. */
static int parse_rc(const void *d, size_t n, md_err *e)
{
    md_snapshot *s = NULL;
    memset(e, 0, sizeof *e);
    int rc = md_snapshot_load_mem(d, n, "t.pickle", &s, e);
    md_snapshot_free(s);
    return rc;
}

static void test_refused_opcodes(void **st)
{
    (void)st;
    static const struct { unsigned char op; const char *name; } ops[] = {
        {'c', "GLOBAL"}, {0x93, "STACK_GLOBAL"}, {'R', "REDUCE"}, {'b', "BUILD"},
        {'i', "INST"}, {'o', "OBJ"}, {0x81, "NEWOBJ"}, {0x92, "NEWOBJ_EX"},
        {'P', "PERSID"}, {'Q', "BINPERSID"}, {0x82, "EXT1"}, {0x83, "EXT2"}, {0x84, "EXT4"}};
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
        /* PROTO 4, EMPTY_DICT, then the hostile opcode at byte 3 */
        unsigned char p[] = {0x80, 4, '}', ops[i].op, 'o', 's', '\n', 's', 'y', 's', 't', 'e', 'm', '\n', '.'};
        md_err e = load_bad(p, sizeof p);
        assert_int_equal(e.code, MD_E_UNSAFE);
        assert_int_equal(e.offset, 3);
        assert_non_null(strstr(e.msg, ops[i].name));
    }
}

static void test_classic_exploit_refused(void **st)
{
    (void)st;
    /* pickle.dumps of an object whose __reduce__ is os.system("id") */
    const char p[] = "\x80\x04\x95\x1d\x00\x00\x00\x00\x00\x00\x00\x8c\x05posix\x94\x8c\x06system"
                     "\x94\x93\x94\x8c\x02id\x94\x85\x94R\x94.";
    md_err e = load_bad(p, sizeof p - 1);
    assert_int_equal(e.code, MD_E_UNSAFE);
    assert_non_null(strstr(e.msg, "STACK_GLOBAL"));
    assert_int_equal(e.offset, 28);
}

static void test_not_a_snapshot(void **st)
{
    (void)st;
    md_err e;
    /* a valid pickle of [1, 2]: parses, then the schema is refused */
    const unsigned char p[] = {0x80, 2, ']', 'q', 0, '(', 'K', 1, 'K', 2, 'e', '.'};
    assert_int_equal(parse_rc(p, sizeof p, &e), MD_E_SCHEMA);
    const unsigned char d[] = {0x80, 4, '}', 0x94, '.'};
    assert_int_equal(parse_rc(d, sizeof d, &e), MD_E_SCHEMA);
    assert_non_null(strstr(e.msg, "segments"));
}

static void test_empty_and_garbage(void **st)
{
    (void)st;
    md_err e = load_bad("", 0);
    assert_int_equal(e.code, MD_E_FORMAT);
    assert_non_null(strstr(e.msg, "empty"));
    const char txt[] = "this is a text file\n";
    e = load_bad(txt, sizeof txt - 1);
    assert_int_equal(e.code, MD_E_FORMAT);
    assert_non_null(strstr(e.msg, "not a pickle"));
    const unsigned char future[] = {0x80, 6, 'N', '.'};
    e = load_bad(future, sizeof future);
    assert_non_null(strstr(e.msg, "protocol 6"));
    const unsigned char unknown[] = {0x80, 4, 0xff, '.'};
    e = load_bad(unknown, sizeof unknown);
    assert_non_null(strstr(e.msg, "unknown opcode 0xff"));
    assert_int_equal(e.offset, 2);
}

static void test_lengths_past_end(void **st)
{
    (void)st;
    /* BINUNICODE claiming 2^31 bytes with 3 present */
    const unsigned char a[] = {0x80, 4, 'X', 0, 0, 0, 0x80, 'a', 'b', 'c'};
    md_err e = load_bad(a, sizeof a);
    assert_true(e.code == MD_E_FORMAT || e.code == MD_E_LIMIT);
    /* BINUNICODE8 claiming 2^62 */
    const unsigned char b[] = {0x80, 4, 0x8d, 0, 0, 0, 0, 0, 0, 0, 0x40, 'x'};
    e = load_bad(b, sizeof b);
    assert_int_equal(e.code, MD_E_LIMIT);
    /* LONG4 of 2^32-1 bytes */
    const unsigned char c[] = {0x80, 4, 0x8b, 0xff, 0xff, 0xff, 0xff, 1};
    e = load_bad(c, sizeof c);
    assert_true(e.code == MD_E_FORMAT || e.code == MD_E_LIMIT);
    /* SHORT_BINUNICODE running past the end */
    const unsigned char d[] = {0x80, 4, 0x8c, 10, 'a', 'b'};
    e = load_bad(d, sizeof d);
    assert_int_equal(e.code, MD_E_FORMAT);
    assert_non_null(strstr(e.msg, "truncated"));
}

static void test_memo_bounds(void **st)
{
    (void)st;
    /* LONG_BINPUT with index 2^32-1 after 4 bytes of input */
    const unsigned char a[] = {0x80, 4, 'N', 'r', 0xff, 0xff, 0xff, 0xff, '.'};
    md_err e = load_bad(a, sizeof a);
    assert_int_equal(e.code, MD_E_LIMIT);
    assert_non_null(strstr(e.msg, "memo index"));
    /* BINGET of an index never stored */
    const unsigned char b[] = {0x80, 4, 'h', 7, '.'};
    e = load_bad(b, sizeof b);
    assert_non_null(strstr(e.msg, "never stored"));
}

static void test_deep_nesting(void **st)
{
    (void)st;
    size_t n = 100000;
    unsigned char *p = malloc(n + 3);
    p[0] = 0x80;
    p[1] = 4;
    memset(p + 2, '(', n);
    p[n + 2] = '.';
    md_err e = load_bad(p, n + 3);
    assert_int_equal(e.code, MD_E_LIMIT);
    assert_non_null(strstr(e.msg, "nesting"));
    /* deep list nesting without MARK: ] ] ] ... is fine (no recursion) */
    memset(p + 2, ']', n);
    e = load_bad(p, n + 3); /* many values left on the stack at STOP */
    assert_int_equal(e.code, MD_E_FORMAT);
    free(p);
}

static void test_stack_misuse(void **st)
{
    (void)st;
    const unsigned char a[] = {0x80, 4, 'a', '.'};          /* APPEND on empty */
    assert_int_equal(load_bad(a, sizeof a).code, MD_E_FORMAT);
    const unsigned char b[] = {0x80, 4, 'K', 1, 'K', 2, 'a', '.'}; /* APPEND to an int */
    assert_non_null(strstr(load_bad(b, sizeof b).msg, "non-list"));
    const unsigned char c[] = {0x80, 4, 'e', '.'};          /* APPENDS without MARK */
    assert_non_null(strstr(load_bad(c, sizeof c).msg, "without MARK"));
    const unsigned char d[] = {0x80, 4, '}', '(', 'K', 1, 'u', '.'}; /* odd SETITEMS */
    assert_non_null(strstr(load_bad(d, sizeof d).msg, "odd"));
    const unsigned char f[] = {0x80, 4, '.'};               /* STOP on empty stack */
    assert_int_equal(load_bad(f, sizeof f).code, MD_E_FORMAT);
    const unsigned char g[] = {0x80, 4, 0x97, '.'};         /* out-of-band buffer */
    assert_non_null(strstr(load_bad(g, sizeof g).msg, "NEXT_BUFFER"));
    const unsigned char h[] = {0x80, 4, '0', '.'};          /* POP on empty */
    assert_non_null(strstr(load_bad(h, sizeof h).msg, "underflow"));
    const unsigned char k[] = {0x80, 4, '(', 'K', 1, '0', '0', '.'}; /* POP past MARK */
    assert_non_null(strstr(load_bad(k, sizeof k).msg, "underflow"));
}

/* POP, POP_MARK and DUP leave what Python's pickle leaves: a dict whose
 * extra values were popped parses (then fails as a snapshot: no
 * 'segments'); without them the STOP would see several values. */
static void test_stack_opcodes(void **st)
{
    (void)st;
    md_err e;
    const unsigned char pop[] = {0x80, 4, '}', 'K', 7, '0', '.'};
    assert_int_equal(parse_rc(pop, sizeof pop, &e), MD_E_SCHEMA);
    const unsigned char popmark[] = {0x80, 4, '}', '(', 'K', 1, 'K', 2, '1', '.'};
    assert_int_equal(parse_rc(popmark, sizeof popmark, &e), MD_E_SCHEMA);
    const unsigned char dup[] = {0x80, 4, '}', '2', '0', '.'};
    assert_int_equal(parse_rc(dup, sizeof dup, &e), MD_E_SCHEMA);
    const unsigned char two[] = {0x80, 4, '}', 'K', 7, '.'}; /* no POP: two values */
    assert_non_null(strstr(load_bad(two, sizeof two).msg, "STOP with 2"));
}

/* Inputs the fuzzer once broke us with (tests/data/fuzz-regress): each
 * must go through load, replay, analysis and sites without a sanitizer
 * report. */
#include <dirent.h>
static void test_fuzz_regressions(void **st)
{
    (void)st;
    char dir[1024];
    DIR *d = opendir(data_path("fuzz-regress", dir, sizeof dir));
    assert_non_null(d);
    struct dirent *e;
    int seen = 0;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char p[2048];
        size_t n;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        unsigned char *b = slurp(p, &n);
        assert_non_null(b);
        md_snapshot *s = NULL;
        md_err er;
        if (md_snapshot_load_mem(b, n, e->d_name, &s, &er) == MD_OK) {
            for (int dev = 0; dev < md_snapshot_ndevices(s) && dev < 4; dev++) {
                md_replay *r;
                md_analysis *a;
                if (md_replay_run(s, dev, &r, &er) != MD_OK)
                    continue;
                if (md_analyze(s, r, &a, &er) == MD_OK) {
                    md_site *sites;
                    size_t ns;
                    if (md_sites_at(a, md_replay_peak_index(r), &sites, &ns, NULL, &er) == MD_OK)
                        free(sites);
                    md_analysis_free(a);
                }
                md_replay_free(r);
            }
            md_snapshot_free(s);
        }
        free(b);
        seen++;
    }
    closedir(d);
    assert_true(seen > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_refused_opcodes),
        cmocka_unit_test(test_classic_exploit_refused),
        cmocka_unit_test(test_not_a_snapshot),
        cmocka_unit_test(test_empty_and_garbage),
        cmocka_unit_test(test_lengths_past_end),
        cmocka_unit_test(test_memo_bounds),
        cmocka_unit_test(test_deep_nesting),
        cmocka_unit_test(test_stack_misuse),
        cmocka_unit_test(test_stack_opcodes),
        cmocka_unit_test(test_fuzz_regressions),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* test_snapshot.c - reading real H200 snapshots and every schema variant:
 * counts, sharing of frames, compression, versions, pickler styles, and
 * truncation of a real file at many offsets. */
#include <sys/stat.h>
#include <unistd.h>
#include "testutil.h"
#include "util/input.h"
#include "model/model.h"

#define MIB (1024ULL * 1024ULL)

typedef struct fixture {
    const char *file;
    int device;
    size_t events, segments;
} fixture;

/* Counts from python3 pickle.load of each file (trusted fixtures):
 * len(device_traces[d]) and len(segments). */
static const fixture fixtures[] = {
    {"seed-exercise/snap-alpha-small-rank0.pickle", 0, 4276, 22},
    {"seed-exercise/snap-alpha-medium-rank0.pickle", 0, 8134, 32},
    {"seed-exercise/snap-beta-small-rank0.pickle", 0, 5024, 30},
    {"seed-exercise/snap-beta-medium-rank0.pickle", 0, 9537, 55},
    {"seed-exercise/snap-gamma-small-rank0.pickle", 0, 3597, 97},
    {"seed-exercise/snap-gamma-medium-rank0.pickle", 0, 6782, 106},
    {"seed-exercise/snap-beta-ddp-rank0.pickle", 0, 5057, 33},
    {"seed-exercise/snap-beta-ddp-rank1.pickle", 1, 5053, 29},
};

static void test_fixture_counts(void **st)
{
    (void)st;
    for (size_t i = 0; i < sizeof fixtures / sizeof fixtures[0]; i++) {
        md_snapshot *s = load_ok(fixtures[i].file);
        size_t n, ns;
        md_snapshot_events(s, fixtures[i].device, &n);
        assert_int_equal(n, fixtures[i].events);
        md_snapshot_segments(s, &ns);
        assert_int_equal(ns, fixtures[i].segments);
        unsigned f = md_snapshot_features(s);
        assert_true(f & MD_HAS_TIME);
        assert_true(f & MD_HAS_FRAMES);
        assert_true(f & MD_HAS_CPP_FRAMES);
        assert_true(f & MD_HAS_SETTINGS);
        assert_true(f & MD_HAS_ANNOTATIONS);
        md_snapshot_free(s);
    }
}

/* torch shares frames and tracebacks; they must stay shared: alpha-small
 * has 4276 entries but only a few hundred distinct stacks. */
static void test_interning(void **st)
{
    (void)st;
    md_snapshot *s = load_ok("seed-exercise/snap-alpha-small-rank0.pickle");
    size_t n;
    const md_event *ev = md_snapshot_events(s, 0, &n);
    assert_true(md_snapshot_nstacks(s) < n / 2);
    assert_int_equal(ev[0].action, MD_ACT_SEGMENT_ALLOC);
    assert_int_equal(ev[0].size, 20971520);
    assert_int_equal(ev[0].time_us, 1795972022102326LL);
    assert_int_equal(ev[1].action, MD_ACT_ALLOC);
    assert_int_equal(ev[1].addr, 139637448245248ULL);
    md_stack_ids fr = md_snapshot_stack(s, ev[1].stack);
    size_t nf = fr.n;
    assert_true(nf > 10);
    const md_frame *f = md_snapshot_frame(s, md_stack_id(fr, 0));
    assert_string_equal(md_snapshot_string(s, f->name), "torch::unwind::unwind()");
    const md_frame *u = md_user_frame(s, ev[1].stack);
    assert_non_null(u);
    assert_string_equal(md_snapshot_string(s, u->name), "make_model");
    assert_int_equal(u->line, 299);
    const md_settings *cfg = md_snapshot_settings(s);
    assert_true(cfg->present);
    assert_int_equal(cfg->max_split_size, -1);
    assert_false(cfg->expandable_segments);
    md_snapshot_free(s);
}

/* Two events' stacks hold the same frames (ids may differ between reads). */
static void assert_same_stack(const md_snapshot *a, uint32_t sa, const md_snapshot *b,
                              uint32_t sb)
{
    md_stack_ids fa = md_snapshot_stack(a, sa), fb = md_snapshot_stack(b, sb);
    assert_int_equal(fa.n, fb.n);
    for (size_t i = 0; i < fa.n; i++) {
        const md_frame *x = md_snapshot_frame(a, md_stack_id(fa, i)),
                       *y = md_snapshot_frame(b, md_stack_id(fb, i));
        assert_int_equal(x->line, y->line);
        assert_string_equal(md_snapshot_string(a, x->name), md_snapshot_string(b, y->name));
        assert_string_equal(md_snapshot_string(a, x->filename), md_snapshot_string(b, y->filename));
    }
}

/* Bytes in memory are parsed in place; files, plain or compressed, go
 * through the reader's window, where lists cut by its end are read opcode
 * by opcode: every event and its frames must come out the same. */
static void assert_same_events(const md_snapshot *a, const md_snapshot *b)
{
    size_t na, nb;
    const md_event *ea = md_snapshot_events(a, 0, &na), *eb = md_snapshot_events(b, 0, &nb);
    assert_int_equal(na, nb);
    for (size_t k = 0; k < na; k++) {
        assert_int_equal(ea[k].addr, eb[k].addr);
        assert_int_equal(ea[k].size, eb[k].size);
        assert_int_equal(ea[k].action, eb[k].action);
        assert_int_equal(md_snapshot_stream(a, ea[k].stream), md_snapshot_stream(b, eb[k].stream));
        assert_same_stack(a, ea[k].stack, b, eb[k].stack);
    }
}

static void test_compressed_equal_raw(void **st)
{
    (void)st;
    const char *names[] = {"seed-exercise/snap-alpha-small-rank0.pickle", "alpha-small.pickle.gz",
                           "alpha-small.pickle.xz", "alpha-small.pickle.zst"};
    char p[1024];
    size_t n;
    unsigned char *d = slurp(data_path(names[0], p, sizeof p), &n);
    assert_non_null(d);
    md_snapshot *mem = NULL;
    md_err e;
    memset(&e, 0, sizeof e);
    assert_int_equal(md_snapshot_load_mem(d, n, "alpha-small", &mem, &e), MD_OK);
    for (int i = 0; i < 4; i++) {
        md_snapshot *c = load_ok(names[i]); /* read ahead on a thread where compressed */
        assert_same_events(c, mem);
        md_snapshot_free(c);
        md_load_opts here = {.read_ahead = 0}; /* all on this thread */
        assert_int_equal(md_snapshot_load_with(data_path(names[i], p, sizeof p), &here, &c, &e),
                         MD_OK);
        assert_same_events(c, mem);
        md_snapshot_free(c);
    }
    md_snapshot_free(mem);
    free(d);
}

/* Arrays begun in the heap (md_load_opts.heap_first, the CLI's choice on
 * a huge-page heap) read the same as arrays begun in mappings of their own:
 * a few thousand events; 44 234 events, past the heap's 512 KiB into a
 * mapping; 60 240 frame ids of distinct stacks. */
static void test_heap_first_alike(void **st)
{
    (void)st;
    const char *names[] = {"seed-exercise/snap-alpha-small-rank0.pickle",
                           "vision/detection/rank0.pickle.xz", "softmaxattn/t5all/rank0.pickle.xz"};
    char p[1024];
    for (int i = 0; i < 3; i++) {
        md_snapshot *a = load_ok(names[i]), *b = NULL;
        md_err e;
        memset(&e, 0, sizeof e);
        md_load_opts heap = {.heap_first = 1};
        assert_int_equal(md_snapshot_load_with(data_path(names[i], p, sizeof p), &heap, &b, &e),
                         MD_OK);
        size_t n;
        assert_non_null(md_snapshot_events(a, 0, &n));
        assert_true(n > 4000);
        assert_same_events(a, b);
        md_snapshot_free(a);
        md_snapshot_free(b);
    }
}

/* A file's bytes, decompressed by the library's own input layer (gzip,
 * zstd, xz); NULL on failure. */
static unsigned char *inflated(const char *path, size_t *n)
{
    md_input *in = NULL;
    md_err e;
    memset(&e, 0, sizeof e);
    unsigned char *out = NULL;
    size_t cap = 0;
    long got = 0;
    *n = 0;
    if (md_input_open(path, 0, &in, &e))
        return NULL;
    do {
        if (*n == cap) {
            unsigned char *grown = realloc(out, cap = cap ? 2 * cap : 1 << 20);
            if (!grown)
                break;
            out = grown;
        }
        if ((got = md_input_read(in, out + *n, cap - *n, &e)) > 0)
            *n += (size_t)got;
    } while (got > 0);
    md_input_close(in);
    if (got != 0) {
        free(out);
        return NULL;
    }
    return out;
}

/* The size the reader plans for: a plain file's own; a compressed file's
 * guessed from its size, low (under the bytes it decodes to: planned too
 * big, a small input would take a huge page it cannot afford), and never
 * 0 (planned from nothing, a 0.9 MB .gz took 0.4-0.6 MB more memory). */
static void test_size_hint(void **st)
{
    (void)st;
    const char *names[] = {"seed-exercise/snap-alpha-small-rank0.pickle", "alpha-small.pickle.gz",
                           "alpha-small.pickle.xz", "alpha-small.pickle.zst"};
    char p[1024];
    for (int i = 0; i < 4; i++) {
        struct stat sb;
        md_input *in = NULL;
        md_err e;
        memset(&e, 0, sizeof e);
        size_t decoded = 0;
        unsigned char *d = inflated(data_path(names[i], p, sizeof p), &decoded);
        assert_non_null(d);
        free(d);
        assert_int_equal(stat(p, &sb), 0);
        assert_int_equal(md_input_open(p, 0, &in, &e), MD_OK);
        size_t hint = md_input_size_hint(in);
        if (i == 0) {
            assert_int_equal(hint, (size_t)sb.st_size);
            assert_int_equal(md_input_size(in), (size_t)sb.st_size);
        } else {
            assert_int_equal(md_input_size(in), 0); /* unknown until decoded */
            assert_true(hint > (size_t)sb.st_size);
            assert_true(hint <= decoded);
        }
        md_input_close(in);
    }
}

/* A real trace whose entries mostly end in an empty frames list, which the
 * reader's fast loop takes whole (tests/data/builds/causal: 5679 of 10435
 * entries, 3698 of those lists written afresh, the rest memo gets; 0.9 MB,
 * read through the window in several pieces): in place and through the
 * window, with and without reading ahead, every event and its frames the
 * same, and the entries without frames without a stack (python3's
 * pickle.load counts). */
static void test_empty_frames_alike(void **st)
{
    (void)st;
    char p[1024];
    size_t n, ne, bare = 0;
    unsigned char *d = inflated(data_path("builds/causal/rank0.pickle.xz", p, sizeof p), &n);
    assert_non_null(d);
    md_snapshot *mem = NULL, *c = NULL;
    md_err e;
    memset(&e, 0, sizeof e);
    assert_int_equal(md_snapshot_load_mem(d, n, "causal", &mem, &e), MD_OK);
    const md_event *ev = md_snapshot_events(mem, 0, &ne);
    assert_int_equal(ne, 10435);
    for (size_t k = 0; k < ne; k++)
        bare += ev[k].stack == 0;
    assert_int_equal(bare, 5679);
    for (int ahead = 0; ahead < 2; ahead++) {
        md_load_opts o = {.read_ahead = ahead};
        assert_int_equal(md_snapshot_load_with(p, &o, &c, &e), MD_OK);
        assert_same_events(c, mem);
        md_snapshot_free(c);
    }
    md_snapshot_free(mem);
    free(d);
}

/* Lists read before are recognised by their bytes; a memo slot overwritten
 * in between (BINPUT) changes what the same bytes mean
 * (tests/gen/make_synthetic.py memo_overwrite): entry 4 is (f2, f1), not
 * entry 2's (f0, f1). Read from a file (the window) and from memory (in
 * place). */
static void check_memo_overwrite(const md_snapshot *s)
{
    static const char *want[4][2] = {{"f0", "f1"}, {"f0", "f1"}, {"f2", NULL}, {"f2", "f1"}};
    size_t n;
    const md_event *ev = md_snapshot_events(s, 0, &n);
    assert_int_equal(n, 4);
    for (size_t i = 0; i < 4; i++) {
        md_stack_ids fr = md_snapshot_stack(s, ev[i].stack);
        size_t nf = fr.n;
        assert_int_equal(nf, want[i][1] ? 2 : 1);
        for (size_t k = 0; k < nf; k++)
            assert_string_equal(md_snapshot_string(s, md_snapshot_frame(s, md_stack_id(fr, k))->name),
                                want[i][k]);
    }
}

static void test_memo_overwrite(void **st)
{
    (void)st;
    md_snapshot *s = load_ok("synthetic/memo_overwrite.pickle");
    check_memo_overwrite(s);
    md_snapshot_free(s);
    char p[1024];
    size_t n;
    unsigned char *d = slurp(data_path("synthetic/memo_overwrite.pickle", p, sizeof p), &n);
    assert_non_null(d);
    md_err e;
    memset(&e, 0, sizeof e);
    assert_int_equal(md_snapshot_load_mem(d, n, "memo_overwrite.pickle", &s, &e), MD_OK);
    check_memo_overwrite(s);
    md_snapshot_free(s);
    free(d);
}

/* Every prefix of a real snapshot must be refused cleanly, never crash,
 * never be taken as complete. */
static void test_truncated_real_file(void **st)
{
    (void)st;
    char p[1024];
    size_t n = 0;
    unsigned char *d = slurp(data_path("seed-exercise/snap-gamma-small-rank0.pickle", p, sizeof p), &n);
    assert_non_null(d);
    size_t step = n / 97 + 1;
    for (size_t cut = 0; cut < n; cut += step) {
        md_err e = load_bad(d, cut);
        assert_true(e.code == MD_E_FORMAT);
    }
    /* the same from files: read through the window, not in place */
    char tmp[] = "/tmp/md_trunc_XXXXXX";
    int fd = mkstemp(tmp);
    assert_true(fd >= 0);
    close(fd);
    for (size_t cut = 0; cut < n; cut += 5 * step) {
        write_file(tmp, d, cut);
        md_snapshot *s = NULL;
        md_err e;
        memset(&e, 0, sizeof e);
        assert_int_equal(md_snapshot_load(tmp, &s, &e), MD_E_FORMAT);
        assert_null(s);
        assert_non_null(strstr(e.msg, cut ? "truncated" : "empty"));
    }
    remove(tmp);
    for (size_t cut = n - 16; cut < n; cut++)
        load_bad(d, cut);
    free(d);
    /* a truncated compressed file */
    d = slurp(data_path("alpha-small.pickle.xz", p, sizeof p), &n);
    assert_non_null(d);
    md_err e = load_bad(d, n / 2);
    assert_int_equal(e.code, MD_E_FORMAT);
    free(d);
}

/* The error of a cut compressed file, loaded from path with or without
 * reading ahead. */
static md_err load_cut_file(const char *path, int read_ahead)
{
    md_snapshot *s = NULL;
    md_err e;
    memset(&e, 0, sizeof e);
    md_load_opts o = {.read_ahead = read_ahead};
    assert_int_not_equal(md_snapshot_load_with(path, &o, &s, &e), MD_OK);
    assert_null(s);
    return e;
}

/* A compressed file cut anywhere fails the same way read from memory, from
 * a file on this thread and from a file read ahead on another (the chunks
 * fall differently on each path): same code, same offset, same words. */
static void test_cut_compressed_alike(void **st)
{
    (void)st;
    const char *names[] = {"alpha-small.pickle.gz", "alpha-small.pickle.xz",
                           "alpha-small.pickle.zst"};
    char p[1024], tmp[] = "/tmp/md_cutz_XXXXXX";
    int fd = mkstemp(tmp);
    assert_true(fd >= 0);
    close(fd);
    for (size_t f = 0; f < 3; f++) {
        size_t n = 0;
        unsigned char *d = slurp(data_path(names[f], p, sizeof p), &n);
        assert_non_null(d);
        for (size_t cut = 1; cut < n; cut += n / 23 + 1) {
            write_file(tmp, d, cut);
            md_err m = load_bad(d, cut), a = load_cut_file(tmp, 1), b = load_cut_file(tmp, 0);
            assert_int_equal(m.code, MD_E_FORMAT);
            assert_int_equal(a.code, m.code);
            assert_int_equal(b.code, m.code);
            assert_true(a.offset == m.offset && b.offset == m.offset);
            assert_string_equal(a.msg, m.msg);
            assert_string_equal(b.msg, m.msg);
        }
        free(d);
    }
    remove(tmp);
}

/* Lists stop being recognised by their bytes after 256 new ones with no
 * repeat (tests/gen/make_synthetic.py distinct_stacks); a list repeated
 * after that still gets its stack, and every stack its own frames. */
static void test_distinct_stacks(void **st)
{
    (void)st;
    md_snapshot *s = load_ok("synthetic/distinct_stacks.pickle");
    size_t n;
    const md_event *ev = md_snapshot_events(s, 0, &n);
    assert_int_equal(n, 351);
    for (size_t k = 0; k < 300; k++) {
        md_stack_ids fr = md_snapshot_stack(s, ev[1 + k].stack);
        size_t nf = fr.n;
        assert_int_equal(nf, 4);
        char want[2][8];
        snprintf(want[0], sizeof want[0], "f%zu", k % 40);
        snprintf(want[1], sizeof want[1], "f%zu", k / 40);
        for (int i = 0; i < 2; i++)
            assert_string_equal(md_snapshot_string(s, md_snapshot_frame(s, md_stack_id(fr, i))->name), want[i]);
        if (k)
            assert_int_not_equal(ev[1 + k].stack, ev[k].stack);
        if (k < 50)
            assert_int_equal(ev[301 + k].stack, ev[1 + k].stack);
    }
    md_snapshot_free(s);
}

/* A pickle of one device's trace: n allocs, the k-th on stream k + 1. */
static unsigned char *many_streams(size_t n, size_t *len)
{
    static const unsigned char entry[] = "}(X\x06\0\0\0actionX\x05\0\0\0allocX\x04\0\0\0addrJ"
                                         "\0\0\0\0X\x04\0\0\0sizeK\x01X\x06\0\0\0streamJ\0\0\0\0u";
    const size_t esz = sizeof entry - 1, addr_at = 33, stream_at = 60;
    unsigned char *p = malloc(64 + n * esz), *w = p;
    assert_non_null(p);
    static const unsigned char head[] = "\x80\x02}X\x08\0\0\0segments]sX\x0d\0\0\0device_traces]](";
    memcpy(w, head, sizeof head - 1), w += sizeof head - 1;
    for (size_t k = 0; k < n; k++, w += esz) {
        uint32_t addr = (uint32_t)(k + 1) * 512, stream = (uint32_t)k + 1;
        memcpy(w, entry, esz);
        memcpy(w + addr_at, &addr, 4); /* BININT: little-endian, as here */
        memcpy(w + stream_at, &stream, 4);
    }
    memcpy(w, "eas.", 4), w += 4;
    *len = (size_t)(w - p);
    return p;
}

/* Events hold a 16-bit stream index: 65 535 streams besides the default
 * one are each known again by it; one more is refused, with where. */
static void test_stream_index_limit(void **st)
{
    (void)st;
    size_t len;
    unsigned char *d = many_streams(65535, &len);
    md_snapshot *s = NULL;
    md_err e = {0};
    assert_int_equal(md_snapshot_load_mem(d, len, "streams", &s, &e), MD_OK);
    size_t n;
    const md_event *ev = md_snapshot_events(s, 0, &n);
    assert_int_equal(n, 65535);
    for (size_t k = 0; k < n; k += 4093)
        assert_int_equal(md_snapshot_stream(s, ev[k].stream), k + 1);
    assert_int_equal(md_snapshot_stream(s, ev[n - 1].stream), n);
    md_snapshot_free(s);
    free(d);
    d = many_streams(65536, &len);
    s = NULL;
    assert_int_not_equal(md_snapshot_load_mem(d, len, "streams", &s, &e), MD_OK);
    assert_null(s);
    assert_non_null(strstr(e.msg, "more than 65536 streams"));
    free(d);
}

/* A pickle of one device's trace: n allocs, the k-th with the stack
 * [f<k>, main] (f<k> a frame of its own: n distinct frames and one), then
 * the first `again` of them once more. */
static unsigned char *many_frames(size_t n, size_t again, size_t *len)
{
#define FRAME(name) "}(X\x04\0\0\0nameX\x06\0\0\0" name "X\x08\0\0\0filenameX\x04\0\0\0x.py" \
                    "X\x04\0\0\0lineJ\0\0\0\0u"
    static const unsigned char entry[] =
        "}(X\x06\0\0\0actionX\x05\0\0\0allocX\x04\0\0\0addrJ\0\0\0\0X\x04\0\0\0sizeK\x01"
        "X\x06\0\0\0frames](" FRAME("f00000") FRAME("main__") "eu";
#undef FRAME
    const size_t esz = sizeof entry - 1, addr_at = 33;
    const unsigned char *name = memmem(entry, esz, "f00000", 6);
    assert_non_null(name);
    size_t name_at = (size_t)(name - entry);
    unsigned char *p = malloc(64 + (n + again) * esz), *w = p;
    assert_non_null(p);
    static const unsigned char head[] = "\x80\x02}X\x08\0\0\0segments]sX\x0d\0\0\0device_traces]](";
    memcpy(w, head, sizeof head - 1), w += sizeof head - 1;
    for (size_t i = 0; i < n + again; i++, w += esz) {
        size_t k = i < n ? i : i - n;
        uint32_t addr = (uint32_t)(i + 1) * 512;
        char nm[8];
        snprintf(nm, sizeof nm, "f%05zu", k % 100000);
        memcpy(w, entry, esz);
        memcpy(w + addr_at, &addr, 4); /* BININT: little-endian, as here */
        memcpy(w + name_at, nm, 6);
    }
    memcpy(w, "eas.", 4), w += 4;
    *len = (size_t)(w - p);
    return p;
}

/* Stacks' frame ids are held 16 bits each until a frame id needs more:
 * past 65 536 distinct frames they are widened, and every stack, those
 * interned before and after and those met again, keeps its frames. */
static void test_frame_ids_widened(void **st)
{
    (void)st;
    size_t len, n = 70000, again = 100;
    unsigned char *d = many_frames(n, again, &len);
    md_snapshot *s = NULL;
    md_err e = {0};
    assert_int_equal(md_snapshot_load_mem(d, len, "frames", &s, &e), MD_OK);
    size_t ne;
    const md_event *ev = md_snapshot_events(s, 0, &ne);
    assert_int_equal(ne, n + again);
    assert_int_equal(md_snapshot_nstacks(s), n + 1); /* and the empty stack */
    for (size_t i = 0; i < ne; i += i < 100 || i > n - 100 ? 1 : 997) {
        md_stack_ids fr = md_snapshot_stack(s, ev[i].stack);
        char want[8];
        snprintf(want, sizeof want, "f%05zu", (i < n ? i : i - n) % 100000);
        assert_int_equal(fr.n, 2);
        assert_int_equal(fr.wide, 1);
        assert_string_equal(md_snapshot_string(s, md_snapshot_frame(s, md_stack_id(fr, 0))->name),
                            want);
        assert_string_equal(md_snapshot_string(s, md_snapshot_frame(s, md_stack_id(fr, 1))->name),
                            "main__");
        if (i >= n)
            assert_int_equal(ev[i].stack, ev[i - n].stack);
    }
    md_snapshot_free(s);
    free(d);
    d = many_frames(1000, 10, &len); /* few frames: narrow */
    assert_int_equal(md_snapshot_load_mem(d, len, "frames", &s, &e), MD_OK);
    ev = md_snapshot_events(s, 0, &ne);
    assert_int_equal(md_snapshot_stack(s, ev[5].stack).wide, 0);
    assert_int_equal(ev[1005].stack, ev[5].stack);
    md_snapshot_free(s);
    free(d);
}

/* md_segment.device is 16 bits: a device index past 32767, or a
 * negative one, reads as -1 (no device's), not as one wrapped onto a real
 * device; 1 stays 1. */
static void test_segment_device_range(void **st)
{
    (void)st;
#define SEG(dev) "}(X\x06\0\0\0device" dev "X\x07\0\0\0addressJ\0\0\x10\0" \
                 "X\x0a\0\0\0total_sizeJ\0\0\x20\0u"
    static const char pkl[] = "\x80\x02}(X\x08\0\0\0segments](" SEG("J\x70\x11\x01\0")
        SEG("J\xfb\xff\xff\xff") SEG("K\x01") "eX\x0d\0\0\0device_traces]u.";
#undef SEG
    md_snapshot *s = NULL;
    md_err e = {0};
    assert_int_equal(md_snapshot_load_mem(pkl, sizeof pkl - 1, "devices", &s, &e), MD_OK);
    size_t n;
    const md_segment *g = md_snapshot_segments(s, &n);
    assert_int_equal(n, 3);
    assert_int_equal(g[0].device, -1); /* 70000 */
    assert_int_equal(g[1].device, -1); /* -5 */
    assert_int_equal(g[2].device, 1);
    assert_int_equal(g[2].total_size, 0x200000);
    md_snapshot_free(s);
}

/* Frames lists guessed from the list that followed the previous one the
 * time before (tests/gen/make_synthetic.py list_sequence): a wrong guess,
 * including one whose bytes start the real list's, is rejected, and every
 * event gets its own frames. */
static void test_list_sequence(void **st)
{
    (void)st;
    static const char *const seq = "ABACADABAC";
    static const char *const names[4] = {"f0 f1", "f2 f3", "f2 f3 f4", "f2 f5"};
    md_snapshot *s = load_ok("synthetic/list_sequence.pickle");
    size_t n;
    const md_event *ev = md_snapshot_events(s, 0, &n);
    assert_int_equal(n, 1 + strlen(seq));
    for (size_t k = 0; seq[k]; k++) {
        md_stack_ids fr = md_snapshot_stack(s, ev[1 + k].stack);
        size_t nf = fr.n;
        char got[64] = "";
        for (size_t i = 0; i < nf; i++)
            snprintf(got + strlen(got), sizeof got - strlen(got), "%s%s", i ? " " : "",
                     md_snapshot_string(s, md_snapshot_frame(s, md_stack_id(fr, i))->name));
        assert_string_equal(got, names[seq[k] - 'A']);
    }
    md_snapshot_free(s);
}

/* Frames lists of 1 to 1500 memo gets, around the reader's fused run of
 * 999, read once it has stopped looking lists up by their bytes
 * (tests/gen/make_synthetic.py long_stacks): each event has all its frames,
 * in order. A reader that cut a long list, or took one past the run as
 * fused, fails here. */
static void test_long_stacks(void **st)
{
    (void)st;
    static const size_t len[] = {1, 2, 3, 400, 998, 999, 1000, 1001, 1500};
    md_snapshot *s = load_ok("synthetic/long_stacks.pickle");
    size_t n;
    const md_event *ev = md_snapshot_events(s, 0, &n);
    assert_int_equal(n, 262 + sizeof len / sizeof len[0]);
    assert_int_equal(md_snapshot_stack(s, ev[1].stack).n, 1600);
    for (size_t k = 0; k < sizeof len / sizeof len[0]; k++) {
        md_stack_ids fr = md_snapshot_stack(s, ev[262 + k].stack);
        assert_int_equal(fr.n, len[k]);
        for (size_t i = 0; i < fr.n; i++) {
            char want[32];
            snprintf(want, sizeof want, "f%zu", i);
            assert_string_equal(
                md_snapshot_string(s, md_snapshot_frame(s, md_stack_id(fr, i))->name), want);
        }
    }
    md_snapshot_free(s);
}

/* The same reference trace in every schema generation and pickler style
 * (tests/gen/make_synthetic.py) must read to the same events. */
static void test_schema_versions(void **st)
{
    (void)st;
    const char *files[] = {"v2_0.pickle", "v2_1.pickle", "v2_3.pickle", "v2_5.pickle",
                           "v2_8.pickle", "v2_10.pickle", "newer.pickle", "cpp_pickler.pickle",
                           "proto0.pickle", "proto1.pickle", "proto2.pickle", "proto3.pickle",
                           "proto5.pickle"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char rel[256];
        snprintf(rel, sizeof rel, "synthetic/%s", files[i]);
        md_snapshot *s = load_ok(rel);
        size_t n, ns, nb;
        const md_event *ev = md_snapshot_events(s, 0, &n);
        int annotate = !strcmp(files[i], "newer.pickle");
        assert_int_equal(n, 8 + annotate);
        assert_int_equal(ev[4 + annotate].action, MD_ACT_ALLOC);
        assert_int_equal(ev[4 + annotate].size, 5 * MIB);
        assert_int_equal(ev[4 + annotate].addr, 0x7F0000200000ULL);
        const md_segment *g = md_snapshot_segments(s, &ns);
        md_snapshot_blocks(s, &nb);
        assert_int_equal(ns, 2);
        assert_int_equal(nb, 5);
        assert_true(g[0].is_small);
        assert_int_equal(g[1].total_size, 20 * MIB);
        md_replay *r = replay_ok(s, 0);
        assert_int_equal(md_replay_peak_allocated(r), 20973056ULL);
        md_point end = md_replay_at(r, (long)n - 1);
        assert_int_equal(end.allocated, 20972032ULL);
        assert_int_equal(end.reserved, 23068672ULL);
        assert_int_equal(end.requested, 512ULL + 5 * MIB + 15128640ULL);
        assert_int_equal(md_replay_anomalies(r), 0);
        md_replay_free(r);
        md_snapshot_free(s);
    }
}

static void test_v2_0_history_blocks(void **st)
{
    (void)st;
    md_snapshot *s = load_ok("synthetic/v2_0.pickle");
    size_t nb;
    const md_block *b = md_snapshot_blocks(s, &nb);
    assert_true(md_snapshot_features(s) & MD_HAS_LEGACY_HISTORY);
    /* addresses are laid out from the segment start */
    assert_int_equal(b[1].address, 0x7F0000000000ULL + 1024);
    assert_int_equal(b[1].requested_size, 512);
    assert_true(b[1].stack != 0);
    assert_int_equal(b[1].state, MD_BLOCK_ACTIVE_ALLOCATED);
    md_snapshot_free(s);
}

/* tests/data/rel is refused as a schema error whose message says msg. */
static void refused_as(const char *rel, const char *msg)
{
    char p[1024];
    md_snapshot *s = NULL;
    md_err e;
    assert_int_equal(md_snapshot_load(data_path(rel, p, sizeof p), &s, &e), MD_E_SCHEMA);
    assert_non_null(strstr(e.msg, msg));
}

static void test_legacy_list_and_devices(void **st)
{
    (void)st;
    md_snapshot *s = load_ok("synthetic/legacy_list.pickle");
    assert_true(md_snapshot_features(s) & MD_HAS_LEGACY_LIST);
    assert_int_equal(md_snapshot_ndevices(s), 0);
    md_replay *r = replay_ok(s, 0);
    md_err e;
    /* no trace: the final state is the initial state, and no history */
    assert_int_equal(md_replay_initial(r).allocated, 512ULL + 20 * MIB);
    assert_false(md_snapshot_has_history(s, 0));
    md_replay_free(r);
    md_snapshot_free(s);

    s = load_ok("synthetic/two_devices.pickle");
    size_t n0, n1;
    md_snapshot_events(s, 0, &n0);
    md_snapshot_events(s, 1, &n1);
    assert_int_equal(md_snapshot_ndevices(s), 2);
    assert_int_equal(n0, 0);
    assert_int_equal(n1, 8);
    assert_int_equal(md_replay_run(s, 1, &r, &e), MD_OK);
    assert_int_equal(md_replay_peak_allocated(r), 20973056ULL);
    md_replay_free(r);
    md_snapshot_free(s);
}

/* Device traces that reference every other entry of a list read earlier:
 * each device gets its own events, in its list's order (the reader keeps a
 * run of consecutive references as a count; these are not consecutive). A
 * trace's list reused as 'segments' is refused, not read as empty. */
static void test_interleaved_devices(void **st)
{
    (void)st;
    md_snapshot *s = load_ok("synthetic/interleaved.pickle");
    static const uint64_t sizes[2][4] = {{2 * MIB, 512, 5 * MIB, 1000},
                                         {1000, 20 * MIB, 15128640, 1000}};
    for (int d = 0; d < 2; d++) {
        size_t n;
        const md_event *ev = md_snapshot_events(s, d, &n);
        assert_int_equal(n, 4);
        for (size_t i = 0; i < n; i++)
            assert_int_equal(ev[i].size, sizes[d][i]);
    }
    md_snapshot_free(s);
    refused_as("synthetic/records_as_segments.refused", "'segments' holds trace entries");
    refused_as("synthetic/segments_as_traces.refused", "device_traces[0] holds segments");
    /* blocks read as records (a run of them, then one among segments) */
    refused_as("synthetic/blocks_as_traces.refused", "device_traces[0][0] is not a trace entry");
    refused_as("synthetic/blocks_as_segments.refused",
               "segments[1] lacks 'address' or 'total_size'");
    /* one trace list named for several devices */
    refused_as("synthetic/aliased_traces.refused", "device_traces[1] is device_traces[0] again");
}

/* Probes start from the states the final pass kept (traces of 8192
 * events and more): at every probed index the live blocks add up to what
 * the pass recorded as allocated, and live + cached free + pending blocks
 * to what it recorded as reserved. A probe that started from the wrong
 * state, or replayed from it wrongly, breaks both. */
static void test_probe_from_kept_states(void **st)
{
    (void)st;
    md_snapshot *s = load_ok("seed-exercise/snap-beta-medium-rank0.pickle");
    md_replay *r = replay_ok(s, 0);
    md_err e;
    long n = (long)md_replay_nevents(r);
    assert_true(n >= 8192);
    long idx[24];
    for (int k = 0; k < 24; k++) /* spread out, with pairs across each fifth */
        idx[k] = k % 2 ? idx[k - 1] + 1 + k : (long)((double)n * (k / 2 + 1) / 13.0);
    md_live *live[24];
    size_t nlive[24];
    md_cache_state cs[24];
    assert_int_equal(md_replay_probe(r, idx, 24, live, nlive, cs, &e), MD_OK);
    for (int k = 0; k < 24; k++) {
        uint64_t sum = 0;
        for (size_t i = 0; i < nlive[k]; i++)
            sum += live[k][i].block_size;
        md_point pt = md_replay_at(r, idx[k]);
        assert_int_equal(sum, pt.allocated);
        assert_int_equal(sum + cs[k].free_total + cs[k].pending_free, pt.reserved);
    }
    /* one at a time, latest first, a segment walk in between: each probe
     * replays in the state the one before left (the replay's spare), from
     * a later point than its own, and must find what the batch found */
    for (int k = 23; k >= 0; k--) {
        md_live *one;
        size_t n1, nsegs, nblocks;
        md_cache_state c1;
        md_replay_seg *segs;
        md_replay_block *blocks;
        assert_int_equal(md_replay_probe(r, &idx[k], 1, &one, &n1, &c1, &e), MD_OK);
        assert_int_equal(n1, nlive[k]);
        for (size_t i = 0; i < n1; i++) {
            assert_int_equal(one[i].addr, live[k][i].addr);
            assert_int_equal(one[i].block_size, live[k][i].block_size);
            assert_int_equal(one[i].alloc_index, live[k][i].alloc_index);
            assert_int_equal(one[i].stack, live[k][i].stack);
        }
        assert_int_equal(c1.free_total, cs[k].free_total);
        assert_int_equal(c1.largest_free, cs[k].largest_free);
        assert_int_equal(c1.segments, cs[k].segments);
        free(one);
        assert_int_equal(md_replay_segments_at(r, idx[(k * 7) % 24], &segs, &nsegs, &blocks,
                                               &nblocks, &e), MD_OK);
        free(segs);
        free(blocks);
    }
    for (int k = 0; k < 24; k++)
        free(live[k]);
    md_replay_free(r);
    md_snapshot_free(s);
}

/* The first event after which reserved stands at its peak, as a scan of
 * the timeline finds it: on a real trace, on one whose reserved never
 * moves (its first event), and -1 where the peak is only the initial
 * state's (the ring's first event frees a segment). */
static long first_at_peak_reserved(const md_replay *r)
{
    for (long i = 0; i < (long)md_replay_nevents(r); i++)
        if (md_replay_at(r, i).reserved == md_replay_peak_reserved(r))
            return i;
    return -1;
}

static void test_peak_reserved_index(void **st)
{
    (void)st;
    const char *files[] = {"seed-exercise/snap-beta-medium-rank0.pickle", "synthetic/overflow.pickle",
                           "synthetic/segment_free_first.pickle"};
    const long want[] = {-2, 0, -1}; /* -2: whatever the scan says, not 0 or -1 */
    for (int k = 0; k < 3; k++) {
        md_snapshot *s = load_ok(files[k]);
        md_replay *r = replay_ok(s, 0);
        long got = md_replay_peak_reserved_index(r);
        assert_int_equal(got, first_at_peak_reserved(r));
        if (want[k] != -2)
            assert_int_equal(got, want[k]);
        else
            assert_true(got > 0);
        md_replay_free(r);
        md_snapshot_free(s);
    }
}

/* Expandable segments' pages unmapped and mapped again (real H200 runs
 * calling empty_cache() every step): torch reports each run of mapped pages
 * as a segment, which the replay's one segment a reservation must match
 * without a reconstruction; the ring of the same run's last events is
 * reconstructed, its pages at the start those mapped at the end with the
 * trace's maps and unmaps undone (figures: compare_samples in test_cli). */
static void test_expandable_runs_match(void **st)
{
    (void)st;
    const char *files[] = {"captured/ragged-unmap.pickle.xz", "captured/ragged-expandable.pickle.xz",
                           "captured/ragged-unmap-ring.pickle.xz"};
    for (int k = 0; k < 3; k++) {
        md_snapshot *s = load_ok(files[k]);
        md_replay *r = replay_ok(s, 0);
        assert_int_equal(md_replay_reconstructed(r), k == 2);
        assert_int_equal(md_replay_anomalies(r), 0);
        md_replay_free(r);
        md_snapshot_free(s);
    }
}

/* Segment runs after event idx: n runs, run j at E + at[j] MiB of sz[j] MiB. */
static void check_runs(const md_replay *r, long idx, size_t n, const int *at, const int *sz)
{
    const uint64_t E = 0x7F8000000000ULL;
    md_replay_seg *g;
    md_replay_block *b;
    size_t ng, nb;
    md_err e;
    assert_int_equal(md_replay_segments_at(r, idx, &g, &ng, &b, &nb, &e), MD_OK);
    assert_int_equal(ng, n);
    for (size_t j = 0; j < ng; j++) {
        assert_true(g[j].addr == E + (uint64_t)at[j] * MIB);
        assert_true(g[j].size == (uint64_t)sz[j] * MIB);
        uint64_t sum = 0; /* blocks cover the run, from its start */
        for (size_t k = 0; k < g[j].nblocks; k++) {
            assert_true(b[g[j].first_block + k].addr == g[j].addr + sum);
            sum += b[g[j].first_block + k].size;
        }
        assert_true(sum == g[j].size);
    }
    free(g);
    free(b);
}

/* Pages unmapped inside a free block and mapped again (synthetic
 * unmap_remap, see tests/gen/make_synthetic.py): reserved falls and rises,
 * the hole's free neighbours merge with the pages mapped again, so the
 * 4 MiB block fits where it did; the unmapped reservation lists as two runs.
 * Its last two events alone: the window's start is two runs, joined by the
 * map, with the same end. */
static void test_unmap_remap(void **st)
{
    (void)st;
    const uint64_t alloc[] = {0, 1, 5, 6, 2, 2, 2, 2, 6}, resv[] = {6, 6, 6, 6, 6, 6, 4, 6, 6};
    md_snapshot *s = load_ok("synthetic/unmap_remap.pickle");
    md_replay *r = replay_ok(s, 0);
    assert_int_equal(md_replay_nevents(r), 9);
    for (long i = 0; i < 9; i++) {
        assert_true(md_replay_at(r, i).allocated == alloc[i] * MIB);
        assert_true(md_replay_at(r, i).reserved == resv[i] * MIB);
    }
    assert_int_equal(md_replay_anomalies(r), 0);
    assert_int_equal(md_replay_reconstructed(r), 0);
    check_runs(r, 6, 2, (const int[]){0, 4}, (const int[]){2, 2});
    check_runs(r, 8, 1, (const int[]){0}, (const int[]){6});
    md_replay_free(r);
    md_snapshot_free(s);

    s = load_ok("synthetic/unmap_remap_window.pickle");
    r = replay_ok(s, 0);
    assert_int_equal(md_replay_reconstructed(r), 1);
    assert_int_equal(md_replay_anomalies(r), 0);
    assert_true(md_replay_initial(r).allocated == 2 * MIB && md_replay_initial(r).reserved == 4 * MIB);
    assert_true(md_replay_at(r, 0).reserved == 6 * MIB && md_replay_at(r, 0).allocated == 2 * MIB);
    assert_true(md_replay_at(r, 1).allocated == 6 * MIB);
    check_runs(r, -1, 2, (const int[]){0, 4}, (const int[]){2, 2});
    check_runs(r, 1, 1, (const int[]){0}, (const int[]){6});
    md_replay_free(r);
    md_snapshot_free(s);
}

static void test_overflow_reconstruction(void **st)
{
    (void)st;
    md_snapshot *s = load_ok("synthetic/overflow.pickle");
    md_replay *r = replay_ok(s, 0);
    md_err e;
    assert_int_equal(md_replay_initial(r).allocated, 2048 + 4096);
    assert_int_equal(md_replay_initial(r).reserved, 2 * MIB);
    assert_int_equal(md_replay_at(r, 0).allocated, 4096);
    assert_int_equal(md_replay_at(r, 1).allocated, 4096);
    /* frees alone are still a history: memory fell over the window */
    assert_true(md_snapshot_has_history(s, 0));
    assert_int_equal(md_replay_anomalies(r), 0);
    md_live *live;
    size_t n;
    assert_int_equal(md_replay_live(r, 1, &live, &n, &e), MD_OK);
    assert_int_equal(n, 1);
    assert_int_equal(live[0].block_size, 4096);
    assert_int_equal(live[0].alloc_index, -1);
    free(live);
    md_replay_free(r);
    md_snapshot_free(s);
}

static void test_expandable_and_oom(void **st)
{
    (void)st;
    md_snapshot *s = load_ok("synthetic/expandable.pickle");
    md_replay *r;
    md_err e;
    assert_true(md_snapshot_settings(s)->expandable_segments);
    assert_int_equal(md_replay_run(s, 0, &r, &e), MD_OK);
    assert_int_equal(md_replay_peak_allocated(r), 1572864ULL + 2 * MIB);
    assert_int_equal(md_replay_peak_reserved(r), 4 * MIB);
    md_point end = md_replay_at(r, 6);
    assert_int_equal(end.allocated, 2 * MIB);
    assert_int_equal(end.reserved, 3 * MIB);
    assert_int_equal(md_replay_anomalies(r), 0);
    md_replay_free(r);
    md_snapshot_free(s);

    s = load_ok("synthetic/oom.pickle");
    size_t n;
    const md_event *ev = md_snapshot_events(s, 0, &n);
    assert_int_equal(ev[n - 1].action, MD_ACT_OOM);
    assert_int_equal(ev[n - 1].addr, 123 * MIB); /* device_free */
    assert_int_equal(ev[n - 1].size, 80ULL * 1024 * MIB);
    md_snapshot_free(s);
}

static void test_round_size(void **st)
{
    (void)st;
    /* torch's round_size with no roundup_power2_divisions */
    md_snapshot *s = load_ok("synthetic/v2_3.pickle");
    md_replay *r = replay_ok(s, 0);
    assert_int_equal(md_replay_at(r, 1).allocated, 1024);      /* 1000 -> 1024 */
    assert_int_equal(md_replay_at(r, 2).allocated, 1024 + 512); /* 512 -> 512 */
    md_replay_free(r);
    md_snapshot_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixture_counts),
        cmocka_unit_test(test_interning),
        cmocka_unit_test(test_compressed_equal_raw),
        cmocka_unit_test(test_size_hint),
        cmocka_unit_test(test_heap_first_alike),
        cmocka_unit_test(test_empty_frames_alike),
        cmocka_unit_test(test_memo_overwrite),
        cmocka_unit_test(test_truncated_real_file),
        cmocka_unit_test(test_cut_compressed_alike),
        cmocka_unit_test(test_distinct_stacks),
        cmocka_unit_test(test_stream_index_limit),
        cmocka_unit_test(test_frame_ids_widened),
        cmocka_unit_test(test_segment_device_range),
        cmocka_unit_test(test_list_sequence),
        cmocka_unit_test(test_long_stacks),
        cmocka_unit_test(test_schema_versions),
        cmocka_unit_test(test_v2_0_history_blocks),
        cmocka_unit_test(test_legacy_list_and_devices),
        cmocka_unit_test(test_interleaved_devices),
        cmocka_unit_test(test_expandable_runs_match),
        cmocka_unit_test(test_unmap_remap),
        cmocka_unit_test(test_overflow_reconstruction),
        cmocka_unit_test(test_peak_reserved_index),
        cmocka_unit_test(test_probe_from_kept_states),
        cmocka_unit_test(test_expandable_and_oom),
        cmocka_unit_test(test_round_size),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

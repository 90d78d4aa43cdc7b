/* split.c - where a pickle can be split between two readers, and the memo
 * before that place, counted on several threads.
 *
 * Protocol 4 and 5 pickles come in FRAMEs of ~64 KB, each cut at an opcode
 * boundary and saying its length, so the frames are found by hopping from
 * one to the next, and any frame's start is a place to walk opcodes from
 * without reading what came before. A second reader starts at the first
 * batch of records (MARK, EMPTY_DICT MEMOIZE MARK) after the frame
 * nearest the place asked for; to read there it needs the memo count at
 * its start and, for each slot before, where its value was written (it
 * reads again the few it gets: pickle.c, remote_get). Those come from
 * walks of the frames before, one span of frames a thread, that note the
 * opcode before each MEMOIZE. A pickle with explicit memo stores (the C++
 * pickler's BINPUT), text opcodes or no frames is not split. A file is
 * read with pread, a chunk at a time, never mapped: a file truncated while
 * it is read (a job writing its next snapshot over it) gives short reads,
 * where a mapping would give SIGBUS. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "../util/thread.h"
#include "../util/util.h"
#include "split.h"

#define FRAME 0x95
#define SPLIT_SEEK ((size_t)1 << 20) /* bytes walked for a batch's start */
#define CHUNK ((size_t)256 << 10)     /* bytes of a file a walk holds at once */
/* bytes readable past an opcode the walks read: its whole argument, but a string's */
#define MARGIN 16
#define MEMOIZE 0x94

/* The length of the opcode at b (avail bytes there), its argument
 * included; 0 for one a split does not walk over (text opcodes, explicit
 * memo stores, the refused ones, anything cut short). */
static size_t op_len(const unsigned char *b, size_t avail)
{
    size_t head, n;
    switch (b[0]) {
    case '(': case '.': case '0': case '1': case '2': case 'N': case ')': case ']':
    case '}': case 'a': case 'e': case 'l': case 'd': case 's': case 't': case 'u':
    case 0x85: case 0x86: case 0x87: case 0x88: case 0x89: case 0x8f: case 0x90:
    case 0x91: case MEMOIZE:
        return 1;
    case 'K': case 'h': return avail >= 2 ? 2 : 0;
    case 0x80: return avail >= 2 ? 2 : 0;
    case 'M': return avail >= 3 ? 3 : 0;
    case 'J': case 'j': return avail >= 5 ? 5 : 0;
    case 'G': case FRAME: return avail >= 9 ? 9 : 0;
    case 0x8a: case 0x8c: case 'C': case 'U': head = 2; break;
    case 'X': case 'B': case 0x8b: head = 5; break;
    case 0x8d: case 0x8e: case 0x96: head = 9; break;
    default: return 0;
    }
    if (avail < head)
        return 0;
    n = (size_t)md_rd_le(b + 1, (int)head - 1);
    return n <= avail - head ? head + n : 0;
}

static int frames_add(md_split_frames *f, size_t off)
{
    if (f->n == f->cap) {
        size_t nc = f->cap ? f->cap * 2 : 256;
        size_t *no = realloc(f->off, nc * sizeof *no);
        if (!no)
            return -1;
        f->off = no, f->cap = nc;
    }
    f->off[f->n++] = off;
    return 0;
}

size_t md_split_read(const void *ctx, size_t off, unsigned char *buf, size_t n)
{
    const md_split_src *src = ctx;
    if (off >= src->len)
        return 0;
    if (n > src->len - off)
        n = src->len - off;
    if (src->mem) {
        memcpy(buf, src->mem + off, n);
        return n;
    }
    size_t got = 0;
    while (got < n) {
        ssize_t r = pread(src->fd, buf + got, n - got, (off_t)(off + got));
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break; /* cut short: the walks fail where they need more */
        got += (size_t)r;
    }
    return got;
}

/* A walk's window on src: bytes [lo, hi) at p (the memory itself, or a
 * chunk of the file in buf). */
typedef struct view {
    const md_split_src *src;
    unsigned char *buf;
    size_t lo, hi;
    const unsigned char *p;
} view;

/* The chunk buffer a walk reads a file through, mapped apart: a thread
 * that mallocs gets an arena of its own, which keeps what it frees
 * resident. */
static unsigned char *chunk_new(const md_split_src *src)
{
    if (src->mem)
        return NULL;
    void *b = mmap(NULL, CHUNK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return b == MAP_FAILED ? NULL : b;
}

static void chunk_free(unsigned char *b)
{
    if (b)
        munmap(b, CHUNK);
}

/* v holding q onwards (as much of CHUNK as the input has): 0 where it
 * cannot (no chunk buffer). */
static int view_fill(view *v, size_t q)
{
    if (v->src->mem) {
        v->lo = 0, v->hi = v->src->len, v->p = v->src->mem;
        return 1;
    }
    if (!v->buf)
        return 0;
    v->lo = q;
    v->hi = q + md_split_read(v->src, q, v->buf, CHUNK);
    v->p = v->buf;
    return 1;
}

int md_split_frames_find(const md_split_src *src, md_split_frames *f)
{
    unsigned char h[11];
    memset(f, 0, sizeof *f);
    if (md_split_read(src, 0, h, sizeof h) < sizeof h || h[0] != 0x80 || h[1] < 4 || h[2] != FRAME)
        return -1;
    for (size_t q = 2; q + 9 <= src->len;) {
        unsigned char b[9];
        if (md_split_read(src, q, b, 9) < 9 || b[0] != FRAME)
            break;
        uint64_t n = md_rd_le(b + 1, 8);
        if (n > src->len - q - 9 || frames_add(f, q))
            break;
        q += 9 + (size_t)n;
    }
    return f->n >= 2 ? 0 : -1;
}

void md_split_frames_free(md_split_frames *f)
{
    free(f->off);
    memset(f, 0, sizeof *f);
}

/* The frame starting nearest `want`, past the first. */
static size_t nearest_frame(const md_split_frames *f, size_t want)
{
    size_t best = 1;
    for (size_t i = 2; i < f->n; i++)
        if ((f->off[i] > want ? f->off[i] - want : want - f->off[i]) <
            (f->off[best] > want ? f->off[best] - want : want - f->off[best]))
            best = i;
    return best;
}

size_t md_split_start(const md_split_src *src, const md_split_frames *f, double where)
{
    if (f->n < 2 || !(where > 0 && where < 1))
        return 0;
    size_t i = nearest_frame(f, (size_t)(where * (double)src->len)), len = src->len;
    /* Python's pickler writes a batch every 1000 records (150-400 KB of
     * trace entries) */
    size_t end = len - f->off[i] > SPLIT_SEEK ? f->off[i] + SPLIT_SEEK : len, found = 0;
    unsigned char *chunk = chunk_new(src);
    view v = {src, chunk, 0, 0, NULL};
    for (size_t q = f->off[i]; q + 4 <= end;) {
        if ((q < v.lo || q + MARGIN > v.hi) && (v.hi >= len || !view_fill(&v, q)))
            break; /* the end of the input (no batch starts in its last bytes) */
        const unsigned char *b = v.p + (q - v.lo);
        if (b[0] == '(' && b[1] == '}' && b[2] == MEMOIZE && b[3] == '(') {
            found = q;
            break;
        }
        size_t n = op_len(b, v.hi - q);
        if (!n)
            break;
        q += n;
    }
    chunk_free(chunk);
    return found;
}

/* One thread's walk of [from, to): the offset of the opcode before each
 * MEMOIZE and what it makes (UINT32_MAX for one before the span's first
 * opcode: the previous span's last, fixed up after), and its own last
 * opcode's. */
typedef struct span {
    const md_split_src *src;
    unsigned char *chunk; /* a file's chunk buffer */
    size_t from, to;
    uint32_t *at;
    size_t n, cap;
    uint32_t last; /* the last opcode other than MEMOIZE and FRAME, and its kind; UINT32_MAX none */
    int failed;
    pthread_t thread;
    int started;
} span;

/* Each opcode's length where it is fixed, and where it is not the bytes
 * of its length after it (1 + those + the length); 0 in both: not walked
 * over (op_len says why). */
static const uint8_t fixed_len[256] = {
    ['('] = 1, ['.'] = 1, ['0'] = 1, ['1'] = 1, ['2'] = 1, ['N'] = 1, [')'] = 1, [']'] = 1,
    ['}'] = 1, ['a'] = 1, ['e'] = 1, ['l'] = 1, ['d'] = 1, ['s'] = 1, ['t'] = 1, ['u'] = 1,
    [0x85] = 1, [0x86] = 1, [0x87] = 1, [0x88] = 1, [0x89] = 1, [0x8f] = 1, [0x90] = 1,
    [0x91] = 1, [MEMOIZE] = 1, ['K'] = 2, ['h'] = 2, [0x80] = 2, ['M'] = 3, ['J'] = 5,
    ['j'] = 5, ['G'] = 9, [FRAME] = 9};
static const uint8_t len_bytes[256] = {[0x8a] = 1, [0x8c] = 1, ['C'] = 1, ['U'] = 1,
                                       ['X'] = 4, ['B'] = 4, [0x8b] = 4, [0x8d] = 8,
                                       [0x8e] = 8, [0x96] = 8};
/* What a memo slot holds by the opcode before its MEMOIZE (MD_SPLIT_*),
 * so that the second reader need not look at the bytes of a list. */
static const uint8_t kind_of[256] = {[']'] = MD_SPLIT_LIST, ['}'] = MD_SPLIT_DICT,
                                     [0x8c] = MD_SPLIT_STR, ['X'] = MD_SPLIT_STR,
                                     [0x8d] = MD_SPLIT_STR};

/* The opcode at b's length (avail bytes there, MARGIN or more in the
 * walk's fast loop): a table lookup but for lengths that follow it. */
static inline size_t walk_len(const unsigned char *b, size_t avail)
{
    size_t len = fixed_len[b[0]];
    if (len)
        return len;
    unsigned lb = len_bytes[b[0]];
    if (avail >= MARGIN && lb && lb < 8)
        return 1 + lb + (lb == 1 ? b[1] : md_le32(b + 1));
    return op_len(b, avail);
}

/* The walk of s's span, a chunk at a time (11 instructions an opcode) */
static void *span_walk(void *arg)
{
    span *s = arg;
    size_t q = s->from, to = s->to, len = s->src->len;
    uint32_t prev = UINT32_MAX, *at = s->at;
    size_t n = 0, cap = s->cap;
    view v = {s->src, s->chunk, 0, 0, NULL};
    while (q < to) {
        if (q < v.lo || q + MARGIN > v.hi) { /* the next chunk, unless it is the last */
            if ((v.hi < len || q < v.lo) && !view_fill(&v, q))
                break;
            if (q >= v.hi)
                break;
        }
        const unsigned char *b = v.p + (q - v.lo), *b0 = b;
        /* ops starting before end have MARGIN bytes readable, or are the input's last */
        size_t room = v.hi - q > MARGIN ? v.hi - q - MARGIN : v.hi >= len ? v.hi - q : 0;
        const unsigned char *end = b + (room < to - q ? room : to - q);
        if (end == b) { /* the input's last bytes: op_len's checks */
            size_t l = op_len(b, v.hi - q);
            if (!l)
                break;
            end = b + 1; /* walked below as one */
        }
        while (b < end) {
            unsigned op = b[0];
            if (op == MEMOIZE) {
                if (n == cap)
                    break; /* more MEMOIZEs than bytes: cannot be */
                at[n++] = prev;
                b++;
                continue;
            }
            size_t l = walk_len(b, (size_t)(v.p + (v.hi - v.lo) - b));
            if (!l)
                break;
            uint32_t here = (uint32_t)(q + (size_t)(b - b0)) | (uint32_t)kind_of[op] << 30;
            prev = op == FRAME ? prev : here;
            b += l;
        }
        if (b < end)
            break; /* an opcode not walked over */
        q += (size_t)(b - b0);
    }
    s->n = n;
    s->failed = q != to; /* spans end where frames start: at an opcode */
    s->last = prev;
    return NULL;
}

/* The spans' notes as one array, each span's first notes without an
 * opcode given the one before them. */
static int spans_join(span *sp, int k, uint32_t **out, size_t *nout, size_t *outcap)
{
    size_t total = 0;
    for (int i = 0; i < k; i++) {
        if (sp[i].failed)
            return -1;
        total += sp[i].n;
    }
    uint32_t *all = NULL;
    size_t cap = 0;
    if (md_big_grow((void **)&all, &cap, total + 1, sizeof *all))
        return -1;
    size_t at = 0;
    uint32_t last = UINT32_MAX;
    for (int i = 0; i < k; i++) {
        for (size_t j = 0; j < sp[i].n; j++)
            all[at++] = sp[i].at[j] != UINT32_MAX ? sp[i].at[j] : last;
        if (sp[i].last != UINT32_MAX)
            last = sp[i].last;
        if (last == UINT32_MAX && sp[i].n) {
            md_big_free(all, cap, sizeof *all);
            return -1; /* MEMOIZE with nothing before it */
        }
    }
    *out = all;
    *nout = total;
    *outcap = cap;
    return 0;
}

static void spans_free(span *sp, int k)
{
    for (int i = 0; i < k; i++) {
        md_big_free(sp[i].at, sp[i].cap, sizeof *sp[i].at);
        chunk_free(sp[i].chunk);
    }
}

int md_split_count(const md_split_src *src, const md_split_frames *f, size_t at, int threads,
                   uint32_t **slot_at, size_t *nslots, size_t *slots_cap)
{
    if (at > MD_SPLIT_OFFSET || threads < 1)
        return -1;
    if (threads > MD_SPLIT_THREADS)
        threads = MD_SPLIT_THREADS;
    span sp[MD_SPLIT_THREADS];
    memset(sp, 0, sizeof sp);
    /* spans of about equal bytes, cut where frames start */
    size_t from = 0, fi = 0;
    int k = 0;
    for (; k < threads && from < at; k++) {
        size_t want = at / (size_t)threads * (size_t)(k + 1), to = at;
        while (k + 1 < threads && fi < f->n && f->off[fi] <= from)
            fi++;
        while (k + 1 < threads && fi < f->n && f->off[fi] < want)
            fi++;
        if (k + 1 < threads && fi < f->n && f->off[fi] < at)
            to = f->off[fi];
        sp[k].src = src, sp[k].from = from, sp[k].to = to, sp[k].last = UINT32_MAX;
        from = to;
    }
    /* each span's notes in room for one a byte and its chunk buffer, made
     * here (only the notes written are resident) */
    for (int i = 0; i < k; i++)
        if (md_big_reserve((void **)&sp[i].at, &sp[i].cap, sp[i].to - sp[i].from + 1, 0,
                           sizeof *sp[i].at) ||
            (!src->mem && !(sp[i].chunk = chunk_new(src)))) {
            spans_free(sp, k);
            return -1;
        }
    for (int i = 1; i < k; i++)
        sp[i].started = !md_thread_start(&sp[i].thread, span_walk, &sp[i], MD_STACK_HELPER);
    span_walk(&sp[0]);
    for (int i = 1; i < k; i++) {
        if (sp[i].started)
            pthread_join(sp[i].thread, NULL);
        else
            span_walk(&sp[i]);
    }
    int rc = spans_join(sp, k, slot_at, nslots, slots_cap);
    spans_free(sp, k);
    return rc;
}

/* input.c - file/memory byte source with streaming decompression.
 * Compressed data is never inflated whole into memory: the pickle reader
 * pulls decompressed bytes in chunks, so peak memory follows what the
 * reader keeps, not the file size.
 *
 * A file is read (and decompressed) on a thread of its own, a few chunks
 * ahead of the reader: decompression, and for a plain file the kernel's
 * copy out of the page cache, then cost the reader nothing where a second
 * CPU is free (bench/RESULTS.md, session 6). Memory input and pipes are
 * read on the caller's thread. */
#include <errno.h>
#include <stdarg.h>
#include <lzma.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>
#include <zstd.h>
#include <zstd_errors.h>
#include "input.h"
#include "thread.h"
#include "util.h"

enum codec { C_RAW, C_GZIP, C_ZSTD, C_XZ };

#define NCHUNK 4            /* chunks read ahead */
#define CHUNK (128u << 10) /* bytes a chunk holds */
/* writable bytes before each chunk's data: a reader parsing the chunk in
 * place (md_input_lend) puts the bytes it has not parsed of the last one
 * there, so that they and this chunk's lie end to end */
#define PAD MD_INPUT_LEND_PAD
/* plain files from here (the CLI's HELPERS_INPUT_MIN): a 3.5 MB one read
 * ahead was no faster on a 16-CPU host (8.27 -> 8.18 ms min without) and
 * held 384 KB more (bench/RESULTS.md, session 44) */
#define AHEAD_RAW_MIN ((size_t)4 << 20)

/* The chunks the file's thread fills and md_input_read empties, in order:
 * chunk `next % NCHUNK` is the reader's; filled counts those handed over;
 * lent, those from next on that md_input_lend handed the reader whole
 * (their pos counted as taken), not given back yet.
 * The thread stops at the end, on an error (kept in err for the reader to
 * meet where it happened), or when told to. */
struct ahead {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    unsigned char *data[NCHUNK];
    size_t len[NCHUNK];
    uint64_t filled, next; /* chunks filled / taken by the reader */
    unsigned lent;         /* chunks from next on that the reader parses in place */
    size_t pos;            /* bytes of the reader's chunk already taken */
    int ended, stop;       /* ended: no more chunks (see err) */
    md_err err;            /* code 0 at the end, else the error met there */
};

struct md_input {
    enum codec codec;
    FILE *fp;                 /* NULL for memory input */
    const unsigned char *mem; /* memory input */
    size_t mem_len, mem_pos;
    size_t file_size;         /* a regular file's size, else 0 */
    unsigned char *ibuf;      /* compressed bytes */
    size_t ibuf_cap, ilen, ipos;
    int eof_in, done;
    z_stream z;
    ZSTD_DCtx *zs;
    size_t zlast;
    lzma_stream xz;
    struct ahead *ahead; /* NULL: read on the caller's thread */
    /* an error met after some bytes were decoded: those bytes are
     * returned first, the error on the next read (code 0: none) */
    md_err pending;
};

static void ahead_start(md_input *in);

#define IBUF 262144
/* The first read only has to show the magic bytes: a small one, so that an
 * uncompressed file goes from the kernel straight into the reader's window
 * instead of through ibuf (a second copy and 64 more page faults). */
#define SNIFF 4096

/* A decoder's error after `made` bytes of this read: they are still
 * returned (the reader then fails exactly where the data ends, however the
 * reads fall), the error with the next read. */
__attribute__((format(printf, 5, 6)))
static long codec_fail(md_input *in, size_t made, md_err *err, int code, const char *fmt, ...)
{
    char what[sizeof err->msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    md_err_set(made ? &in->pending : err, code, -1, "%s", what);
    return made ? (long)made : code;
}

static long raw_fill(md_input *in, void *buf, size_t n)
{
    if (in->fp) {
        size_t r = fread(buf, 1, n, in->fp);
        if (r == 0 && ferror(in->fp))
            return -1;
        return (long)r;
    }
    size_t left = in->mem_len - in->mem_pos;
    if (n > left)
        n = left;
    memcpy(buf, in->mem + in->mem_pos, n);
    in->mem_pos += n;
    return (long)n;
}

/* Refill the compressed-input buffer when it is drained. */
static int refill(md_input *in)
{
    if (in->ipos < in->ilen || in->eof_in)
        return 0;
    long r = raw_fill(in, in->ibuf, in->ibuf_cap);
    if (r < 0)
        return -1;
    in->ilen = (size_t)r;
    in->ipos = 0;
    if (r == 0)
        in->eof_in = 1;
    return 0;
}

static int alloc_ibuf(md_input *in, md_err *err)
{
    in->ibuf = malloc(IBUF);
    if (!in->ibuf)
        return md_err_set(err, MD_E_NOMEM, -1, "out of memory");
    in->ibuf_cap = IBUF;
    return MD_OK;
}

static int setup(md_input *in, md_err *err)
{
    unsigned char magic[6] = {0};
    size_t got = 0;
    if (!in->mem && alloc_ibuf(in, err))
        return MD_E_NOMEM;
    if (in->mem) { /* peek: the bytes stay where they are */
        got = in->mem_len < 6 ? in->mem_len : 6;
        memcpy(magic, in->mem, got);
    } else {
        long r = raw_fill(in, in->ibuf, SNIFF);
        if (r < 0)
            return md_err_set(err, MD_E_IO, -1, "read failed: %s", strerror(errno));
        in->ilen = (size_t)r;
        got = in->ilen < 6 ? in->ilen : 6;
        memcpy(magic, in->ibuf, got);
    }
    if (got >= 2 && magic[0] == 0x1f && magic[1] == 0x8b) {
        in->codec = C_GZIP;
        if (inflateInit2(&in->z, 15 + 32) != Z_OK)
            return md_err_set(err, MD_E_NOMEM, -1, "zlib init failed");
    } else if (got >= 4 && magic[0] == 0x28 && magic[1] == 0xb5 &&
               magic[2] == 0x2f && magic[3] == 0xfd) {
        in->codec = C_ZSTD;
        in->zs = ZSTD_createDCtx();
        in->zlast = 1;
        if (!in->zs)
            return md_err_set(err, MD_E_NOMEM, -1, "zstd init failed");
    } else if (got >= 6 && !memcmp(magic, "\xfd" "7zXZ\0", 6)) {
        in->codec = C_XZ;
        lzma_stream init = LZMA_STREAM_INIT;
        in->xz = init;
        if (lzma_stream_decoder(&in->xz, UINT64_MAX, LZMA_CONCATENATED) != LZMA_OK)
            return md_err_set(err, MD_E_NOMEM, -1, "xz init failed");
    } else {
        in->codec = C_RAW;
    }
    /* compressed memory input goes through the buffer; raw memory is read in place */
    if (!in->ibuf && in->codec != C_RAW && alloc_ibuf(in, err))
        return MD_E_NOMEM;
    return MD_OK;
}

int md_input_open(const char *path, int read_ahead, md_input **out, md_err *err)
{
    md_input *in = calloc(1, sizeof *in);
    if (!in)
        return md_err_set(err, MD_E_NOMEM, -1, "out of memory");
    in->fp = fopen(path, "rb");
    if (!in->fp) {
        int e = errno;
        free(in);
        return md_err_set(err, MD_E_IO, -1, "cannot open: %s", strerror(e));
    }
    /* Files are read, not mapped: a mapped file truncated while being read
     * (a training job dumping its next snapshot over it) kills the reader
     * with SIGBUS. */
    struct stat st;
    if (!fstat(fileno(in->fp), &st) && S_ISREG(st.st_mode) && st.st_size > 0)
        in->file_size = (size_t)st.st_size;
    int rc = setup(in, err);
    if (rc) {
        md_input_close(in);
        return rc;
    }
    /* A pipe is read here: its thread could block in read() after the
     * reader stopped early, and closing would wait for it. A plain file
     * under AHEAD_RAW_MIN is too: there the thread's start and its chunks
     * cost more than the copy it takes over (+0.3 ms on a 0.9 MB file), or
     * as much, for 384 KB of chunks resident (3.5 MB). */
    if (read_ahead && in->file_size && (in->codec != C_RAW || in->file_size >= AHEAD_RAW_MIN))
        ahead_start(in);
    *out = in;
    return MD_OK;
}

int md_input_mem(const void *data, size_t n, md_input **out, md_err *err)
{
    md_input *in = calloc(1, sizeof *in);
    if (!in)
        return md_err_set(err, MD_E_NOMEM, -1, "out of memory");
    in->mem = data;
    in->mem_len = n;
    int rc = setup(in, err);
    if (rc) {
        md_input_close(in);
        return rc;
    }
    *out = in;
    return MD_OK;
}

static long read_gzip(md_input *in, unsigned char *buf, size_t n, md_err *err)
{
    in->z.next_out = buf;
    in->z.avail_out = (uInt)(n > UINT32_MAX ? UINT32_MAX : n);
    while (in->z.avail_out > 0 && !in->done) {
        if (refill(in))
            return md_err_set(err, MD_E_IO, -1, "read failed");
        in->z.next_in = in->ibuf + in->ipos;
        in->z.avail_in = (uInt)(in->ilen - in->ipos);
        int zr = inflate(&in->z, Z_NO_FLUSH);
        in->ipos = in->ilen - in->z.avail_in;
        if (zr == Z_STREAM_END) {
            /* concatenated gzip members: continue if more input follows */
            if (refill(in) == 0 && in->ipos < in->ilen) {
                inflateReset(&in->z);
                continue;
            }
            in->done = 1;
        } else if (zr == Z_BUF_ERROR && in->eof_in) {
            return codec_fail(in, (size_t)(in->z.next_out - buf), err, MD_E_FORMAT,
                              "gzip stream is truncated");
        } else if (zr == Z_MEM_ERROR) {
            return codec_fail(in, (size_t)(in->z.next_out - buf), err, MD_E_NOMEM,
                              "out of memory for the gzip decoder");
        } else if (zr != Z_OK && zr != Z_BUF_ERROR) {
            return codec_fail(in, (size_t)(in->z.next_out - buf), err, MD_E_FORMAT,
                              "gzip data is corrupt");
        }
    }
    return (long)(in->z.next_out - buf);
}

static long read_zstd(md_input *in, unsigned char *buf, size_t n, md_err *err)
{
    ZSTD_outBuffer ob = {buf, n, 0};
    while (ob.pos < ob.size) {
        if (refill(in))
            return md_err_set(err, MD_E_IO, -1, "read failed");
        ZSTD_inBuffer ib = {in->ibuf, in->ilen, in->ipos};
        size_t before = ob.pos, consumed = in->ipos;
        size_t r = ZSTD_decompressStream(in->zs, &ob, &ib);
        in->ipos = ib.pos;
        if (ZSTD_isError(r) && ZSTD_getErrorCode(r) == ZSTD_error_memory_allocation)
            return codec_fail(in, ob.pos, err, MD_E_NOMEM, "out of memory for the zstd decoder");
        if (ZSTD_isError(r))
            return codec_fail(in, ob.pos, err, MD_E_FORMAT, "zstd data is corrupt: %s",
                              ZSTD_getErrorName(r));
        if (ob.pos == before && in->ipos == consumed && in->eof_in) {
            /* no progress and no input left: done only if the last frame
             * was complete (zlast == 0) */
            if (in->zlast != 0)
                return codec_fail(in, ob.pos, err, MD_E_FORMAT, "zstd stream is truncated");
            break;
        }
        in->zlast = r;
    }
    return (long)ob.pos;
}

static long read_xz(md_input *in, unsigned char *buf, size_t n, md_err *err)
{
    in->xz.next_out = buf;
    in->xz.avail_out = n;
    while (in->xz.avail_out > 0 && !in->done) {
        if (refill(in))
            return md_err_set(err, MD_E_IO, -1, "read failed");
        in->xz.next_in = in->ibuf + in->ipos;
        in->xz.avail_in = in->ilen - in->ipos;
        lzma_ret r = lzma_code(&in->xz, in->eof_in ? LZMA_FINISH : LZMA_RUN);
        in->ipos = in->ilen - in->xz.avail_in;
        if (r == LZMA_STREAM_END)
            in->done = 1;
        else if (r == LZMA_BUF_ERROR && in->eof_in)
            return codec_fail(in, n - in->xz.avail_out, err, MD_E_FORMAT,
                              "xz stream is truncated");
        else if (r == LZMA_MEM_ERROR) /* a dictionary of up to 64 MiB (xz -9) */
            return codec_fail(in, n - in->xz.avail_out, err, MD_E_NOMEM,
                              "out of memory for the xz decoder (it needs %llu MiB)",
                              (unsigned long long)((lzma_memusage(&in->xz) + (1 << 20) - 1) >> 20));
        else if (r != LZMA_OK && r != LZMA_BUF_ERROR)
            return codec_fail(in, n - in->xz.avail_out, err, MD_E_FORMAT,
                              "xz data is corrupt (code %d)", (int)r);
    }
    return (long)(n - in->xz.avail_out);
}

/* Up to n decoded bytes, on the calling thread. */
static long decode(md_input *in, void *buf, size_t n, md_err *err)
{
    if (in->pending.code) {
        md_err_set(err, in->pending.code, -1, "%s", in->pending.msg);
        return in->pending.code;
    }
    if (n > (size_t)1 << 30)
        n = (size_t)1 << 30;
    switch (in->codec) {
    case C_GZIP: return read_gzip(in, buf, n, err);
    case C_ZSTD: return read_zstd(in, buf, n, err);
    case C_XZ: return read_xz(in, buf, n, err);
    case C_RAW: break;
    }
    size_t got = 0;
    if (in->ipos < in->ilen) {
        got = in->ilen - in->ipos;
        if (got > n)
            got = n;
        memcpy(buf, in->ibuf + in->ipos, got);
        in->ipos += got;
    }
    if (got < n) {
        long r = raw_fill(in, (unsigned char *)buf + got, n - got);
        if (r < 0)
            return md_err_set(err, MD_E_IO, -1, "read failed: %s", strerror(errno));
        got += (size_t)r;
    }
    return (long)got;
}

/* ---- reading ahead on a thread ------------------------------------------- */

static void *ahead_main(void *arg)
{
    md_input *in = arg;
    struct ahead *a = in->ahead;
    pthread_mutex_lock(&a->mu);
    for (;;) {
        while (!a->stop && a->filled - a->next == NCHUNK)
            pthread_cond_wait(&a->cv, &a->mu);
        if (a->stop)
            break;
        size_t k = a->filled % NCHUNK;
        pthread_mutex_unlock(&a->mu); /* the chunk is this thread's alone */
        md_err e;
        memset(&e, 0, sizeof e);
        long r = decode(in, a->data[k], CHUNK, &e);
        pthread_mutex_lock(&a->mu);
        if (r > 0) {
            a->len[k] = (size_t)r;
            a->filled++;
        } else {
            a->ended = 1;
            a->err = e; /* decode's error code is what it returned */
        }
        pthread_cond_broadcast(&a->cv);
        if (r <= 0)
            break;
    }
    pthread_mutex_unlock(&a->mu);
    return NULL;
}

static void ahead_free(struct ahead *a)
{
    for (int i = 0; i < NCHUNK; i++)
        free(a->data[i] ? a->data[i] - PAD : NULL);
    free(a);
}

/* Starts the thread; on any failure the input is read on the caller's
 * thread instead (slower, not wrong). */
static void ahead_start(md_input *in)
{
    struct ahead *a = calloc(1, sizeof *a);
    if (!a)
        return;
    for (int i = 0; i < NCHUNK; i++) {
        unsigned char *c = malloc(PAD + CHUNK);
        if (!c) {
            ahead_free(a);
            return;
        }
        a->data[i] = c + PAD;
    }
    pthread_mutex_init(&a->mu, NULL);
    pthread_cond_init(&a->cv, NULL);
    in->ahead = a;
    if (md_thread_start(&a->thread, ahead_main, in, MD_STACK_HELPER)) {
        pthread_cond_destroy(&a->cv);
        pthread_mutex_destroy(&a->mu);
        ahead_free(a);
        in->ahead = NULL;
    }
}

/* The bytes the thread read ahead that the reader has not taken (the
 * chunks lent to it it has). */
static size_t ahead_held(const struct ahead *a)
{
    size_t n = 0;
    for (uint64_t c = a->next + a->lent; c < a->filled; c++)
        n += a->len[c % NCHUNK] - (c == a->next ? a->pos : 0);
    return n;
}

/* Stops the thread and frees its chunks: *held (if asked) the bytes they
 * held that the reader had not taken, *failed whether it met an error. */
static void ahead_halt(md_input *in, size_t *held, md_err *failed)
{
    struct ahead *a = in->ahead;
    pthread_mutex_lock(&a->mu);
    a->stop = 1;
    pthread_cond_broadcast(&a->cv);
    pthread_mutex_unlock(&a->mu);
    pthread_join(a->thread, NULL);
    if (held)
        *held = ahead_held(a);
    if (failed)
        *failed = a->err;
    pthread_cond_destroy(&a->cv);
    pthread_mutex_destroy(&a->mu);
    ahead_free(a);
    in->ahead = NULL;
}

static void ahead_stop(md_input *in)
{
    ahead_halt(in, NULL, NULL);
}

/* Up to n bytes from the chunks read ahead: what the reader's chunk has
 * left, waiting for it only when none is ready. */
static long ahead_read(struct ahead *a, unsigned char *buf, size_t n, md_err *err)
{
    pthread_mutex_lock(&a->mu);
    while (a->next == a->filled && !a->ended)
        pthread_cond_wait(&a->cv, &a->mu);
    uint64_t ready = a->filled;
    pthread_mutex_unlock(&a->mu);
    if (a->next == ready) { /* nothing more: the end, or the error met there */
        if (a->err.code) /* not *err = a->err: that would wipe the file's name */
            md_err_set(err, a->err.code, a->err.offset, "%s", a->err.msg);
        return a->err.code;
    }
    size_t got = 0;
    while (got < n && a->next < ready) { /* chunks handed over are the reader's */
        size_t k = a->next % NCHUNK, take = a->len[k] - a->pos;
        if (take > n - got)
            take = n - got;
        memcpy(buf + got, a->data[k] + a->pos, take);
        got += take;
        if ((a->pos += take) == a->len[k]) {
            a->pos = 0;
            pthread_mutex_lock(&a->mu);
            a->next++;
            pthread_cond_broadcast(&a->cv);
            pthread_mutex_unlock(&a->mu);
        }
    }
    return (long)got;
}

long md_input_read(md_input *in, void *buf, size_t n, md_err *err)
{
    if (in->ahead) {
        md_input_lend_done(in, 0);
        return ahead_read(in->ahead, buf, n, err);
    }
    return decode(in, buf, n, err);
}

int md_input_can_lend(const md_input *in)
{
    return in->ahead != NULL;
}

long md_input_lend(md_input *in, unsigned char **data, md_err *err)
{
    struct ahead *a = in->ahead;
    if (!a || a->lent >= NCHUNK - 1)
        return md_err_set(err, MD_E_ARG, -1, "no chunk to lend");
    pthread_mutex_lock(&a->mu);
    while (a->next + a->lent == a->filled && !a->ended)
        pthread_cond_wait(&a->cv, &a->mu);
    uint64_t ready = a->filled;
    pthread_mutex_unlock(&a->mu);
    uint64_t c = a->next + a->lent;
    if (c == ready) { /* nothing more: the end, or the error met there */
        if (a->err.code)
            md_err_set(err, a->err.code, a->err.offset, "%s", a->err.msg);
        return a->err.code;
    }
    size_t k = c % NCHUNK, from = a->lent ? 0 : a->pos; /* the first: past what was read */
    a->lent++;
    if (a->lent == 1)
        a->pos = a->len[k]; /* handed over whole: none of it is held any more */
    *data = a->data[k] + from;
    return (long)(a->len[k] - from);
}

void md_input_lend_done(md_input *in, int keep_last)
{
    struct ahead *a = in->ahead;
    if (!a || a->lent <= (unsigned)(keep_last != 0))
        return;
    unsigned back = a->lent - (keep_last != 0);
    pthread_mutex_lock(&a->mu);
    a->next += back;
    a->lent -= back;
    a->pos = a->lent ? a->len[a->next % NCHUNK] : 0;
    pthread_cond_broadcast(&a->cv);
    pthread_mutex_unlock(&a->mu);
}

/* Skips n bytes of a plain file: what ibuf holds first, the rest by
 * seeking. */
static int raw_seek(md_input *in, size_t n, md_err *err)
{
    size_t held = in->ilen - in->ipos;
    if (n <= held) {
        in->ipos += n;
        return MD_OK;
    }
    in->ipos = in->ilen;
    n -= held;
    if (n > (size_t)INT64_MAX || fseeko(in->fp, (off_t)n, SEEK_CUR))
        return md_err_set(err, MD_E_IO, -1, "seek failed: %s", strerror(errno));
    return MD_OK;
}

int md_input_skip(md_input *in, size_t n, md_err *err)
{
    if (in->codec == C_RAW && in->fp) {
        int again = in->ahead != NULL;
        if (in->ahead) { /* stopped, what it held counted, started again past the skip */
            size_t held;
            md_err met;
            ahead_halt(in, &held, &met);
            if (met.code && n >= held) /* an error it met before the skip's end */
                return md_err_set(err, met.code, met.offset, "%s", met.msg);
            if (n < held) { /* within what it read: back to there */
                if (fseeko(in->fp, -(off_t)(held - n), SEEK_CUR))
                    return md_err_set(err, MD_E_IO, -1, "seek failed: %s", strerror(errno));
                n = 0;
            } else {
                n -= held;
            }
        }
        int rc = raw_seek(in, n, err);
        if (!rc && again)
            ahead_start(in);
        return rc;
    }
    if (in->codec == C_RAW && in->mem) {
        size_t left = in->mem_len - in->mem_pos;
        in->mem_pos += n < left ? n : left;
        return MD_OK;
    }
    unsigned char tmp[4096]; /* compressed: decoded and dropped */
    while (n) {
        long r = md_input_read(in, tmp, n < sizeof tmp ? n : sizeof tmp, err);
        if (r <= 0)
            return r < 0 ? (int)r : MD_OK;
        n -= (size_t)r;
    }
    return MD_OK;
}

int md_input_whole(const md_input *in, const unsigned char **data, size_t *n)
{
    if (in->codec != C_RAW || !in->mem || in->mem_pos > 0)
        return 0;
    *data = in->mem;
    *n = in->mem_len;
    return 1;
}

/* the bytes as stored: a regular file's size or the memory's, else 0 */
static size_t stored_size(const md_input *in)
{
    return in->mem ? in->mem_len : in->file_size;
}

size_t md_input_size(const md_input *in)
{
    return in->codec == C_RAW ? stored_size(in) : 0;
}

/* snapshot pickles shrink 4.6x under gzip -6 and more under zstd and xz
 * (big_gamma: 19x under xz -6): 4 is low for all of them */
#define LOW_RATIO 4

size_t md_input_size_hint(const md_input *in)
{
    size_t n = stored_size(in);
    if (in->codec == C_RAW)
        return n;
    return n < SIZE_MAX / LOW_RATIO ? n * LOW_RATIO : SIZE_MAX;
}

const char *md_input_codec(const md_input *in)
{
    static const char *names[] = {"raw", "gzip", "zstd", "xz"};
    return names[in->codec];
}

void md_input_close(md_input *in)
{
    if (!in)
        return;
    if (in->ahead)
        ahead_stop(in);
    if (in->codec == C_GZIP)
        inflateEnd(&in->z);
    if (in->zs)
        ZSTD_freeDCtx(in->zs);
    if (in->codec == C_XZ)
        lzma_end(&in->xz);
    if (in->fp)
        fclose(in->fp);
    free(in->ibuf);
    free(in);
}

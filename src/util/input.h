/* input.h - a byte stream over a file or memory, decompressing gzip, zstd
 * and xz transparently (detected by magic bytes, not by file name). */
#ifndef MD_INPUT_H
#define MD_INPUT_H

#include <stddef.h>
#include <stdint.h>
#include "memdiag.h"

typedef struct md_input md_input;

/* read_ahead: read and decompress on a thread of its own (a regular file
 * only: compressed, or plain from 4 MiB). */
int md_input_open(const char *path, int read_ahead, md_input **out, md_err *err);
int md_input_mem(const void *data, size_t n, md_input **out, md_err *err);
/* Reads up to n bytes; returns bytes read (0 at end) or a negative md code. */
long md_input_read(md_input *in, void *buf, size_t n, md_err *err);
/* Parsing a file read ahead in place, without copying it out: whether this
 * input can (it is read ahead on a thread of its own); md_input_lend hands
 * over the next bytes where they lie (*data; returns their count, 0 at the
 * end, or a negative md code), with MD_INPUT_LEND_PAD writable bytes before
 * them, and they stay put until given back; md_input_lend_done gives back
 * every lent stretch but (keep_last) the latest. md_input_read and
 * md_input_skip give back every one first. At most three lent at once. */
/* room for what a chunk's end leaves of a record (a longer value is read
 * through a window as before); with 64 KiB, the 192 KiB chunks in the heap
 * cost big_gamma 1.3 MB more resident */
#define MD_INPUT_LEND_PAD ((size_t)4 << 10)
int md_input_can_lend(const md_input *in);
long md_input_lend(md_input *in, unsigned char **data, md_err *err);
void md_input_lend_done(md_input *in, int keep_last);
/* Skips the next n bytes (a plain file: by seeking, its reading ahead
 * started again past them; else read and dropped). Past the end it stops
 * there. */
int md_input_skip(md_input *in, size_t n, md_err *err);
/* The whole input as bytes in memory, when it is uncompressed memory input
 * and nothing was read yet: returns 1 and sets *data, *n (valid until
 * md_input_close), else 0. */
int md_input_whole(const md_input *in, const unsigned char **data, size_t *n);
/* The uncompressed input's size when known (a plain regular file, memory),
 * else 0: for what needs the true size (progress, reserving room for every
 * event); the reader's arrays are sized by md_input_size_hint. */
size_t md_input_size(const md_input *in);
/* The size to plan the reader's arrays for: md_input_size, or for a
 * compressed file a low guess from its size (0 where unknown). Planning
 * from nothing cost a 0.9 MB snapshot read from .gz 0.4-0.6 MB more memory
 * (its arrays grown by copying, a large window); a guess too low only
 * leaves them to grow as before. */
size_t md_input_size_hint(const md_input *in);
const char *md_input_codec(const md_input *in); /* "raw", "gzip", ... */
void md_input_close(md_input *in);

#endif

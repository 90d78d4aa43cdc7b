/* split.h - where a pickle read in place splits between two readers, and
 * the memo before there (split.c; the readers: pickle.h, md_pkl_second). */
#ifndef MD_SPLIT_H
#define MD_SPLIT_H

#include <stddef.h>
#include <stdint.h>

#define MD_SPLIT_THREADS 8 /* threads counting the memo, at most */
/* A slot's entry: the offset of the opcode it holds (a file of up to
 * 1 GiB), and above it what that opcode makes */
#define MD_SPLIT_OFFSET 0x3fffffffu
enum { MD_SPLIT_OTHER, MD_SPLIT_LIST, MD_SPLIT_DICT, MD_SPLIT_STR };

/* The bytes a split reads: in memory, or a file of len bytes read with
 * pread on fd. */
typedef struct md_split_src {
    const unsigned char *mem;
    int fd;
    size_t len;
} md_split_src;

/* n bytes of the md_split_src ctx from off into buf (a file's by pread):
 * how many there were (an md_pkl_bytes_fn). */
size_t md_split_read(const void *ctx, size_t off, unsigned char *buf, size_t n);

/* The offsets of a pickle's FRAME opcodes, first to last. */
typedef struct md_split_frames {
    size_t *off;
    size_t n, cap;
} md_split_frames;

/* Finds the frames by hopping from one to the next: 0, or -1 where there
 * are fewer than two (not protocol 4 or 5 framed). */
int md_split_frames_find(const md_split_src *src, md_split_frames *f);
void md_split_frames_free(md_split_frames *f);
/* The offset of the first batch of records (MARK, EMPTY_DICT MEMOIZE
 * MARK) in the MB from the frame nearest `where` (a fraction of the
 * input), 0 if none. */
size_t md_split_start(const md_split_src *src, const md_split_frames *f, double where);
/* The memo before offset `at` (a frame's opcode boundary), counted on
 * `threads` threads (the caller's one of them): *slot_at (md_big_free'd
 * with *slots_cap) holds, for each of the *nslots slots, the offset of the
 * opcode whose value it holds, and in the top two bits its kind
 * (MD_SPLIT_*). -1 where the bytes before are not walked (an explicit
 * memo store, a text opcode, a file cut short) or memory runs out. */
int md_split_count(const md_split_src *src, const md_split_frames *f, size_t at, int threads,
                   uint32_t **slot_at, size_t *nslots, size_t *slots_cap);

#endif

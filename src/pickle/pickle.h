/* pickle.h - a safe pickle reader (protocols 0-5 data subset).
 *
 * It understands the data opcodes (containers, strings, bytes, ints of any
 * length, floats, bools, None, memo, framing) and refuses every opcode that
 * would import or construct an object (GLOBAL, REDUCE, BUILD, ...), naming
 * the opcode and its byte offset. Values live in a small tagged form; all
 * strings are interned into a caller-owned md_strtab so the repeated keys,
 * file names and function names of a snapshot exist once in memory.
 *
 * Streaming hook: when a dict is appended to a list, the reader can hand it
 * to the caller (on_item), who may convert it into its own compact record
 * and replace it with a PV_REF. The snapshot loader uses this for trace
 * entries so a multi-GB trace never exists as generic dicts. */
#ifndef MD_PICKLE_H
#define MD_PICKLE_H

#include <stdint.h>
#include "../util/input.h"
#include "../util/util.h"

typedef enum pv_type {
    PV_UNSET = 0, /* memo slot never written */
    PV_NONE,
    PV_BOOL,
    PV_INT,
    PV_FLOAT,
    PV_STR,
    PV_BYTES,
    PV_LIST,
    PV_TUPLE,
    PV_DICT,
    PV_REF,       /* a record the on_item hook took over (u = its index) */
    PV_MARKER     /* internal */
} pv_type;

typedef struct pv_obj pv_obj;

typedef struct md_pv {
    uint8_t t;
    uint8_t big;  /* PV_INT: value did not fit 64 bits (i is clamped) */
    uint8_t uns;  /* PV_INT: value is u, in (INT64_MAX, UINT64_MAX] */
    uint32_t s;   /* PV_STR/PV_BYTES: string id */
    union {
        int64_t i;
        uint64_t u;
        double f;
        pv_obj *o;
    };
} md_pv;

enum { PVO_LIST, PVO_TUPLE, PVO_DICT };
enum { PVO_TAKEN = 1, PVO_RELEASED = 2 }; /* pv_obj.taken */

struct pv_obj {
    md_pv *items;     /* dict: key,value,key,value... */
    uint32_t n, cap;
    uint32_t run_first, run_n; /* list: run_n references to records run_first,
                                  run_first+1, ... the hook took, kept as a
                                  count before items (a device trace) */
    uint32_t cache;   /* owner's cached conversion (frame id, stack id);
                         the PV_REF index once taken */
    uint32_t memo;    /* memo index + 1 of its first memo slot, 0 = none */
    uint8_t kind;
    uint8_t offered;  /* the item hook saw it and left it */
    uint8_t taken;    /* PVO_TAKEN by the item hook, or PVO_RELEASED by
                         its owner: contents gone either way */
};

/* Offered each dict when its first SETITEMS batch arrives and each dict
 * appended to a list (whichever comes first). Returns 1 if it took the dict
 * (then *ref is its record index and the reader releases the dict's
 * contents, leaving a PV_REF), 0 to leave it, or a negative md error. */
typedef int (*md_pkl_item_fn)(void *ctx, const md_pv *item, uint32_t *ref,
                              int64_t offset, md_err *err);

/* Offered a list as it is read, when it is memoized and either built by one
 * APPEND or APPENDS of 1..999 memo references (a pickler's whole list:
 * Python writes APPENDS in batches of 1000) to dicts their owner already
 * converted (md_pkl_release after setting their cache), or left empty as
 * the last value of a dict (SETITEMS follows). caches[] holds the items'
 * cache values (n may be 0; the hook may overwrite them). Returns 1 with
 * *cache set to convert the list likewise: it is then never built, but
 * stands as a released list with that cache (shared by all lists converted
 * alike); 0 to have it built; or a negative md error. A snapshot's frames
 * lists are nearly all such lists. Cache values index an array: they are to
 * count up from 1 (a value past the bytes read so far is an error). The
 * answer must depend on the items alone: a list whose bytes were read
 * before, and every empty one after the first, is not offered again. */
typedef int (*md_pkl_list_fn)(void *ctx, uint32_t *caches, size_t n, uint32_t *cache,
                              int64_t offset, md_err *err);

/* The item hook's fast form, for a flat dict (a trace entry, a block): a
 * fresh dict written as
 * EMPTY_DICT MEMOIZE MARK, pairs, SETITEMS whose keys are all memoized
 * strings and whose values are scalars, memo references, short strings or
 * a list the list hook converts is read straight from its bytes, without
 * being built on the stack. v[slot] points at the value of the key mapped
 * to that slot (the last one where a key repeats), NULL where absent;
 * keys the map does not cover are skipped. The answer is the item hook's
 * for the same dict (1 taken with *ref, 0 left, or an error), and must be:
 * a dict left, or one the reader cannot take this way (any other opcode,
 * a key mapped to MD_PKL_REC_LEAVE), is read again opcode by opcode and
 * offered to the item hook, so the hook must decide before it changes
 * anything. Offsets are the SETITEMS opcode's, as the item hook's. */
typedef int (*md_pkl_record_fn)(void *ctx, const md_pv *const *v, uint32_t *ref,
                                int64_t offset, md_err *err);
#define MD_PKL_REC_KEYS 32   /* keys the map covers, at most */
#define MD_PKL_REC_SLOTS 20  /* value slots, at most */
#define MD_PKL_REC_SKIP 0xfe  /* map: a key whose value is read and dropped */
#define MD_PKL_REC_LEAVE 0xff /* map: a key no record has: read the dict as a dict */

typedef struct md_pkl_limits {
    size_t max_depth;   /* open MARKs */
    size_t max_stack;   /* values on the stack */
    size_t max_str;     /* bytes in one string */
} md_pkl_limits;

typedef struct md_pkl md_pkl;

int md_pkl_new(md_input *in, md_strtab *strs, md_pkl **out, md_err *err);
void md_pkl_set_hook(md_pkl *p, md_pkl_item_fn fn, void *ctx);
void md_pkl_set_list_hook(md_pkl *p, md_pkl_list_fn fn, void *ctx);
/* Key string id key0 + k goes to slot map[k] (< nslots, or MD_PKL_REC_SKIP
 * or _LEAVE) for k < nmap; other keys are skipped. fn NULL turns it off.
 * Returns MD_E_ARG if nmap or nslots is over its bound. */
int md_pkl_set_record_hook(md_pkl *p, uint32_t key0, const uint8_t *map, size_t nmap,
                           size_t nslots, md_pkl_record_fn fn, void *ctx);
void md_pkl_set_limits(md_pkl *p, const md_pkl_limits *lim);
/* Runs to STOP; *result is valid until md_pkl_free. */
int md_pkl_run(md_pkl *p, md_pv *result, md_err *err);
/* Drops a container's contents once its owner has converted it (its cache
 * field holds the result); later use of it as a container is an error. */
void md_pkl_release(md_pkl *p, pv_obj *o);
int64_t md_pkl_offset(const md_pkl *p);
int md_pkl_protocol(const md_pkl *p);
/* Dicts the record hook took (read by the record path). */
size_t md_pkl_records(const md_pkl *p);
/* Records the record path stopped inside after records of their list
 * were taken, leaving the rest to the opcodes. */
size_t md_pkl_spills(const md_pkl *p);
void md_pkl_free(md_pkl *p);

/* Dict lookup by key string (linear; snapshot dicts are small). */
const md_pv *md_pv_get(const md_strtab *strs, const md_pv *dict, const char *key);
int md_pv_is_str(const md_strtab *strs, const md_pv *v, const char *s);
/* Integer value as int64 (unsigned 2^64-1 reads as -1, torch's spelling of
 * -1). Returns 0 if v is not an int/bool. */
int md_pv_int(const md_pv *v, int64_t *out);
/* As uint64 (negative values alias); 0 if not an int/bool or too big. */
static inline int md_pv_u64(const md_pv *v, uint64_t *out)
{
    if (!v || (v->t != PV_INT && v->t != PV_BOOL) || v->big)
        return 0;
    *out = v->u;
    return 1;
}

/* ---- the read split in two (snapshot/split.c) --------------------------------
 * A second reader reads a stretch of a list of records (a device's trace)
 * from a MARK opening one of its batches, while the first reads the bytes
 * before; the first, arriving at that MARK, takes the second's part (its
 * records, its memo slots as a hole) and goes on after it. */

/* A second reader's list got from before its start: its cache is this |
 * (memo slot + 1); the join finds the stack in the first reader's memo. */
#define MD_PKL_REMOTE_LIST 0x80000000u

/* Called by the first reader at the MARK at its split offset: 1 if it
 * took the second's part (md_pkl_split_take), 0 to read on itself, or a
 * negative md error. */
typedef int (*md_pkl_split_fn)(void *ctx, md_pkl *p, md_err *err);
/* The first reader offers fn the part at byte `at`. */
void md_pkl_set_split(md_pkl *p, size_t at, md_pkl_split_fn fn, void *ctx);
/* Reads n bytes of the input from byte `at` into buf: how many there were. */
typedef size_t (*md_pkl_bytes_fn)(const void *ctx, size_t at, unsigned char *buf, size_t n);
/* Makes p (fresh) the second reader, to start at the MARK at byte `at`
 * with nremote memo slots filled before it, slot k by the opcode at
 * remote_at[k] & MD_SPLIT_OFFSET (kept by the caller; pickle/split.h). A
 * reader in place starts there; one through a window must have its input
 * standing at `at` (md_input_skip), and reads the bytes before it with
 * read. md_pkl_run then reads to the end of the list's batches. */
int md_pkl_second(md_pkl *p, size_t at, const uint32_t *remote_at, size_t nremote,
                  md_pkl_bytes_fn read, const void *ctx, md_err *err);
/* The cache of the converted list in a's memo slot idx, 0 if none. */
uint64_t md_pkl_memo_list(const md_pkl *a, size_t idx);
/* What the first reader takes of the second's part (md_pkl_second_part),
 * so the second can be freed first. */
typedef struct md_pkl_part {
    size_t records;     /* the run of records its list took, 0: unusable */
    size_t nremote;     /* its memo count at its start */
    size_t nmemo;       /* and at its end */
    size_t end;         /* where it ended */
    size_t taken, spills; /* md_pkl_records, md_pkl_spills */
} md_pkl_part;
void md_pkl_second_part(const md_pkl *b, md_pkl_part *part);
/* Whether the first reader, at the split offset, can take the part: its
 * memo count is the part's start's, and the list open on its stack holds
 * only the run of records [.., nrefs). */
int md_pkl_split_can(const md_pkl *a, const md_pkl_part *part, size_t nrefs);
/* Takes the second reader's part into a (after md_pkl_split_can): the
 * list's run grows by its records (the caller appended them), its memo
 * slots become a hole, a goes on where it ended. */
int md_pkl_split_take(md_pkl *a, const md_pkl_part *part, md_err *err);
/* Whether a read failed on a slot of the hole: it must be made again whole. */
int md_pkl_hole_hit(const md_pkl *p);

/* Opcode name for messages ("GLOBAL", "0x??"). */
const char *md_pkl_opname(int op);

#endif

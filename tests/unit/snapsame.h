/* snapsame.h - whether two loads of the same bytes made the same snapshot:
 * the reader's record path (trace entries straight from their bytes) held
 * to its general path (every entry a dict first). Used by test_records.c
 * and by the fuzzer, so it returns where they differ instead of asserting.
 * Both loads intern in the same order, so ids must match, not only the
 * strings behind them. */
#ifndef MD_SNAPSAME_H
#define MD_SNAPSAME_H

#include <string.h>
#include "snapshot/snapshot_int.h"

#define SAME_ARRAY(a, b, field, n) \
    ((a)->n == (b)->n && (!(a)->n || !memcmp((a)->field, (b)->field, (a)->n * sizeof *(a)->field)))

static inline int same_event(const md_event *x, const md_event *y)
{
    return x->addr == y->addr && x->size == y->size && x->time_us == y->time_us &&
           x->stream == y->stream && x->stack == y->stack && x->action == y->action &&
           x->flags == y->flags; /* streams by index: snapshot_difference compares the tables */
}

static inline int same_segment(const md_segment *x, const md_segment *y)
{
    return x->device == y->device && x->address == y->address &&
           x->total_size == y->total_size && x->allocated_size == y->allocated_size &&
           x->stream == y->stream && x->pool_id[0] == y->pool_id[0] &&
           x->pool_id[1] == y->pool_id[1] && x->is_small == y->is_small &&
           x->is_expandable == y->is_expandable && x->stack == y->stack &&
           x->first_block == y->first_block && x->nblocks == y->nblocks;
}

static inline int same_block(const md_block *x, const md_block *y)
{
    return x->address == y->address && x->size == y->size &&
           x->requested_size == y->requested_size && x->stack == y->stack &&
           x->state == y->state;
}

static inline int same_annotation(const md_annotation *x, const md_annotation *y)
{
    return x->device == y->device && x->time_us == y->time_us && x->name == y->name &&
           x->stage == y->stage;
}

/* NULL if a and b hold the same snapshot, else what differs first. */
static inline const char *snapshot_difference(const md_snapshot *a, const md_snapshot *b)
{
    if (a->strs.n != b->strs.n || a->strs.len != b->strs.len ||
        memcmp(a->strs.data, b->strs.data, a->strs.len))
        return "strings";
    if (!SAME_ARRAY(a, b, frames, nframes))
        return "frames";
    if (a->sf_wide != b->sf_wide || a->nsframes != b->nsframes ||
        (a->nsframes && memcmp(a->sframes, b->sframes, a->nsframes * (a->sf_wide ? 4 : 2))) ||
        !SAME_ARRAY(a, b, stacks, nstacks))
        return "stacks";
    if (!SAME_ARRAY(a, b, streams, nstreams))
        return "streams";
    if (a->nevents != b->nevents)
        return "event count";
    for (size_t i = 0; i < a->nevents; i++)
        if (!same_event(&a->events[i], &b->events[i]))
            return "an event";
    if (a->ndev != b->ndev || (a->ndev && memcmp(a->dev, b->dev, (size_t)a->ndev * sizeof *a->dev)))
        return "devices";
    if (a->nsegs != b->nsegs || a->nblocks != b->nblocks || a->nanns != b->nanns)
        return "segment, block or annotation count";
    for (size_t i = 0; i < a->nsegs; i++)
        if (!same_segment(&a->segs[i], &b->segs[i]))
            return "a segment";
    for (size_t i = 0; i < a->nblocks; i++)
        if (!same_block(&a->blocks[i], &b->blocks[i]))
            return "a block";
    for (size_t i = 0; i < a->nanns; i++)
        if (!same_annotation(&a->anns[i], &b->anns[i]))
            return "an annotation";
    if (a->features != b->features)
        return "features";
    return NULL;
}

/* Openers for records_difference: bytes in memory (read in place), and a
 * file (read through the reader's window). */
struct bytes {
    const unsigned char *d;
    size_t n;
};

static inline int open_mem(void *ctx, md_input **in)
{
    md_err e;
    const struct bytes *b = ctx;
    return md_input_mem(b->d, b->n, in, &e);
}

static inline int open_file(void *ctx, md_input **in)
{
    md_err e;
    return md_input_open(ctx, 0, in, &e);
}

/* NULL if reading in with and without the record path gives the same
 * result: the same snapshot, or the same error in the same words. open
 * makes a fresh md_input of the same bytes for each read. */
static inline const char *records_difference(int (*open)(void *ctx, md_input **in), void *ctx)
{
    md_snapshot *s[2] = {NULL, NULL};
    md_err e[2];
    int rc[2];
    char msg[2][512];
    for (int k = 0; k < 2; k++) {
        md_input *in = NULL;
        memset(&e[k], 0, sizeof e[k]);
        if (open(ctx, &in))
            return "cannot open the input";
        rc[k] = md_snapshot_read(in, "same", k == 0, &s[k], &e[k]);
        md_input_close(in);
        md_err_format(&e[k], msg[k], sizeof msg[k]);
    }
    const char *why = NULL;
    if (rc[0] != rc[1])
        why = "one read failed, the other did not";
    else if (rc[0] && strcmp(msg[0], msg[1]))
        why = "the errors differ";
    else if (!rc[0])
        why = snapshot_difference(s[0], s[1]);
    md_snapshot_free(s[0]);
    md_snapshot_free(s[1]);
    return why;
}

#endif

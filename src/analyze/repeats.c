/* repeats.c - whether the blocks made before a recorded history repeat
 * what a step of it left live: every size the step left held by them at
 * least as often, for four fifths of the step's bytes (the steps before
 * the history left theirs the same way). The window leak (findings.c)
 * says so; the categories (steps.c) name those blocks by it. */
#include <stdlib.h>
#include "../util/util.h"
#include "analyze.h"

/* The tally of `size`, added where new; NULL out of memory (then nomem). */
static md_size_tally *tally_of(md_repeats *r, uint64_t size)
{
    for (size_t i = 0; i < r->n; i++) /* a few sizes: a scan */
        if (r->v[i].size == size)
            return &r->v[i];
    if (md_grow((void **)&r->v, &r->cap, r->n + 1, sizeof *r->v)) {
        r->nomem = 1;
        return NULL;
    }
    r->v[r->n] = (md_size_tally){size, 0, 0};
    return &r->v[r->n++];
}

void md_repeats_kept(md_repeats *r, uint64_t size)
{
    md_size_tally *t = tally_of(r, size);
    if (t)
        t->kept++;
}

void md_repeats_before(md_repeats *r, uint64_t size)
{
    md_size_tally *t = tally_of(r, size);
    if (t)
        t->before++;
}

static int repeated(const md_size_tally *t)
{
    return t->kept && t->before >= t->kept;
}

int md_repeats_hold(const md_repeats *r, uint64_t *before, double *times)
{
    uint64_t kept = 0, matched = 0;
    *before = 0;
    *times = 0;
    for (size_t i = 0; i < r->n; i++) {
        const md_size_tally *t = &r->v[i];
        kept += t->kept * t->size;
        if (repeated(t)) {
            double x = (double)t->before / (double)t->kept;
            matched += t->kept * t->size;
            *before += t->before * t->size;
            *times = *times == 0 || x < *times ? x : *times;
        }
    }
    return kept && 5 * matched >= 4 * kept;
}

int md_repeats_size(const md_repeats *r, uint64_t size)
{
    for (size_t i = 0; i < r->n; i++)
        if (r->v[i].size == size)
            return repeated(&r->v[i]);
    return 0;
}

void md_repeats_free(md_repeats *r)
{
    free(r->v);
    r->v = NULL;
    r->n = r->cap = 0;
}

/* sites.c - who holds the memory at a point in time: the live set grouped
 * by first user frame, with a dominant category per site and totals per
 * category. */
#include <stdlib.h>
#include <string.h>
#include "../snapshot/snapshot_int.h"
#include "analyze.h"
#include "../model/model.h"

static int cmp_site(const void *a, const void *b)
{
    const md_site *x = a, *y = b;
    return x->bytes < y->bytes ? 1 : x->bytes > y->bytes ? -1 : 0;
}

int md_sites_at(const md_analysis *an, long index, md_site **out, size_t *n,
                uint64_t by_cat[MD_CAT_COUNT], md_err *err)
{
    const md_snapshot *s = md_analysis_snapshot(an);
    const md_live_set *ls = md_analysis_live(an, index);
    if (!ls)
        return md_err_set(err, MD_E_NOMEM, -1, "out of memory");
    const md_live *live = ls->live;
    size_t nl = ls->n;
    md_map idx;
    md_site *sites = NULL;
    size_t ns = 0, cap = 0;
    uint64_t (*catb)[MD_CAT_COUNT] = NULL;
    size_t catcap = 0;
    if (md_map_init(&idx, 256)) {
        return md_err_set(err, MD_E_NOMEM, -1, "out of memory");
    }
    if (by_cat)
        memset(by_cat, 0, MD_CAT_COUNT * sizeof *by_cat);
    /* a block with no stack in a snapshot with no history was not made
     * "before" anything: nothing was ever recorded */
    int before = md_snapshot_has_history(s, md_replay_device(md_analysis_replay(an))) ? 1 : 2;
    /* neighbours mostly share a stack and a site (a layer's tensors; a
     * state-only snapshot's blocks, none with a stack): the last of each
     * is kept, and the cache and the map are asked only when they change */
    uint32_t last_stack = UINT32_MAX;
    const md_frame *f = NULL;
    uint64_t last_key = 0, at = 0;
    for (size_t i = 0; i < nl; i++) {
        md_category c = (md_category)live[i].category;
        if (live[i].stack != last_stack) {
            last_stack = live[i].stack;
            f = md_stack_user_frame(md_analysis_cache(an), s, last_stack);
        }
        /* one site per (frame, category): a line that holds both a
         * workspace and activations shows as two rows; so do the
         * parameters found among blocks made before the history began */
        int pre = live[i].alloc_index < 0 && live[i].stack == 0;
        uint64_t key = pre ? UINT64_MAX - 1 - c
                           : (f ? (uint64_t)(f - s->frames) + 1 : 0) * MD_CAT_COUNT + c;
        if (by_cat)
            by_cat[c] += live[i].block_size;
        /* the last block's site: at already */
        if ((!ns || key != last_key) && !md_map_get(&idx, key, &at)) {
            if (md_grow((void **)&sites, &cap, ns + 1, sizeof *sites) ||
                md_grow((void **)&catb, &catcap, ns + 1, sizeof *catb) ||
                md_map_put(&idx, key, ns))
                goto nomem;
            memset(&sites[ns], 0, sizeof sites[ns]);
            sites[ns].before_recording = (uint8_t)(pre ? before : 0);
            memset(catb[ns], 0, sizeof catb[ns]);
            if (f) {
                sites[ns].frame_name = f->name;
                sites[ns].frame_file = f->filename;
                sites[ns].frame_line = f->line;
            }
            at = ns++;
        }
        last_key = key;
        sites[at].bytes += live[i].block_size;
        sites[at].count++;
        catb[at][c] += live[i].block_size;
    }
    for (size_t i = 0; i < ns; i++) {
        int best = MD_CAT_OTHER;
        for (int c = 0; c < MD_CAT_COUNT; c++)
            if (catb[i][c] > catb[i][best])
                best = c;
        sites[i].category = (uint8_t)best;
    }
    if (ns > 1)
        qsort(sites, ns, sizeof *sites, cmp_site);
    free(catb);
    md_map_free(&idx);
    *out = sites;
    *n = ns;
    return MD_OK;
nomem:
    free(catb);
    free(sites);
    md_map_free(&idx);
    return md_err_set(err, MD_E_NOMEM, -1, "out of memory");
}

static int cmp_size_group(const void *a, const void *b)
{
    const md_size_group *x = a, *y = b;
    uint64_t bx = x->size * x->count, by = y->size * y->count;
    return bx < by ? 1 : bx > by ? -1 : (x->size < y->size) - (x->size > y->size);
}

/* The live set's block sizes counted by a map of the sizes seen (a few
 * hundred), not by sorting a copy of all of them: a state-only snapshot's
 * 62 000 blocks took 1 MB more at the end for the copy and the sort. */
int md_sizes_at(const md_analysis *an, long index, md_size_group **out, size_t *n, md_err *err)
{
    const md_live_set *ls = md_analysis_live(an, index);
    md_size_group *g = NULL;
    size_t ng = 0, cap = 0;
    md_map at;
    *out = NULL;
    *n = 0;
    if (!ls || md_map_init(&at, 64))
        return md_err_set(err, MD_E_NOMEM, -1, "out of memory");
    for (size_t i = 0; i < ls->n; i++) {
        uint64_t size = ls->live[i].block_size, k;
        if (md_map_get(&at, size, &k)) {
            g[k].count++;
            continue;
        }
        if (md_grow((void **)&g, &cap, ng + 1, sizeof *g) || md_map_put(&at, size, ng) < 0) {
            free(g);
            md_map_free(&at);
            return md_err_set(err, MD_E_NOMEM, -1, "out of memory");
        }
        g[ng++] = (md_size_group){size, 1};
    }
    md_map_free(&at);
    if (ng > 1)
        qsort(g, ng, sizeof *g, cmp_size_group);
    *out = g;
    *n = ng;
    return MD_OK;
}

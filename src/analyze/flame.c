/* flame.c - the memory live at one moment, by whole stack: the tree a
 * flame graph draws. Each live allocation's frames, outermost first, are a
 * path from the root; allocations with the same stack share a path, found
 * once. Children are ordered by bytes, the most first. */
#include <stdlib.h>
#include <string.h>
#include "../util/util.h"
#include "analyze.h"

typedef struct builder {
    const md_snapshot *s;
    unsigned flags;
    md_flame_node *v;
    size_t n, cap;
    uint64_t (*cat)[MD_CAT_COUNT]; /* bytes per category, per node */
    size_t catcap;
    md_map child; /* parent << 32 | key -> node; key: a frame id or a kind */
    md_map leaf;  /* stack id -> the node its path ends at */
} builder;

static int is_cpp(const md_snapshot *s, uint32_t frame)
{
    const md_frame *f = md_snapshot_frame(s, frame);
    const char *fn = f ? md_snapshot_string(s, f->filename) : "";
    size_t n = strlen(fn);
    return !(n >= 3 && !strcmp(fn + n - 3, ".py"));
}

/* The child of `parent` for `key` (a frame id, or UINT32_MAX - kind),
 * made if new; MD_FLAME_NONE when out of memory. */
static uint32_t child(builder *b, uint32_t parent, uint32_t key, uint8_t kind)
{
    uint64_t k = (uint64_t)parent << 32 | key, got;
    if (md_map_get(&b->child, k, &got))
        return (uint32_t)got;
    if (b->n >= MD_FLAME_NONE - 1 || md_grow((void **)&b->v, &b->cap, b->n + 1, sizeof *b->v) ||
        md_grow((void **)&b->cat, &b->catcap, b->n + 1, sizeof *b->cat) ||
        md_map_put(&b->child, k, b->n))
        return MD_FLAME_NONE;
    uint32_t i = (uint32_t)b->n++;
    b->v[i] = (md_flame_node){kind, MD_CAT_OTHER, kind == MD_FLAME_FRAME ? key : 0, parent,
                              MD_FLAME_NONE, MD_FLAME_NONE, b->v[parent].depth + 1, 0, 0, 0};
    memset(b->cat[i], 0, sizeof b->cat[i]);
    return i;
}

/* The node a live allocation's path ends at. */
static uint32_t leaf_of(builder *b, const md_live *l)
{
    uint64_t got;
    if (l->alloc_index < 0 && l->stack == 0)
        return child(b, 0, UINT32_MAX - MD_FLAME_BEFORE_HISTORY, MD_FLAME_BEFORE_HISTORY);
    if (md_map_get(&b->leaf, l->stack, &got))
        return (uint32_t)got;
    md_stack_ids fr = md_snapshot_stack(b->s, l->stack);
    size_t nf = fr.n;
    uint32_t at = 0;
    for (size_t i = nf; i-- > 0 && at != MD_FLAME_NONE;) /* innermost first in the file */
        if (!(b->flags & MD_FLAME_PYTHON_ONLY) || !is_cpp(b->s, md_stack_id(fr, i)))
            at = child(b, at, md_stack_id(fr, i), MD_FLAME_FRAME);
    if (at == 0) { /* no frames, or only C++ ones and those left out */
        uint8_t kind = nf ? MD_FLAME_CPP_ONLY : MD_FLAME_NO_FRAMES;
        at = child(b, 0, UINT32_MAX - kind, kind);
    }
    if (at != MD_FLAME_NONE && md_map_put(&b->leaf, l->stack, at))
        return MD_FLAME_NONE;
    return at;
}

static int add_live(builder *b, const md_live *l)
{
    uint32_t at = leaf_of(b, l);
    if (at == MD_FLAME_NONE)
        return -1;
    b->v[at].self_bytes += l->block_size;
    for (;; at = b->v[at].parent) {
        b->v[at].bytes += l->block_size;
        b->v[at].count++;
        b->cat[at][l->category < MD_CAT_COUNT ? l->category : MD_CAT_OTHER] += l->block_size;
        if (at == 0)
            return 0;
    }
}

typedef struct ranked {
    uint64_t bytes;
    uint32_t node;
} ranked;

/* The most bytes first; ties by node order, so the output is stable. */
static int by_bytes(const void *x, const void *y)
{
    const ranked *p = x, *q = y;
    if (p->bytes != q->bytes)
        return p->bytes < q->bytes ? 1 : -1;
    return p->node < q->node ? -1 : p->node > q->node;
}

/* Links each node's children, the most bytes first, and names each
 * node's category: the one holding most of its bytes. */
static int finish(builder *b)
{
    ranked *order = malloc((b->n ? b->n : 1) * sizeof *order);
    if (!order)
        return -1;
    for (uint32_t i = 0; i < b->n; i++)
        order[i] = (ranked){b->v[i].bytes, i};
    qsort(order + 1, b->n - 1, sizeof *order, by_bytes);
    for (size_t j = b->n; j-- > 1;) { /* prepended in reverse: the largest ends up first */
        md_flame_node *c = &b->v[order[j].node];
        c->next_sibling = b->v[c->parent].first_child;
        b->v[c->parent].first_child = order[j].node;
    }
    for (size_t i = 0; i < b->n; i++) {
        int best = MD_CAT_OTHER;
        for (int c = 0; c < MD_CAT_COUNT; c++)
            if (b->cat[i][c] > b->cat[i][best])
                best = c;
        b->v[i].category = (uint8_t)best;
    }
    free(order);
    return 0;
}

int md_flame_at(const md_analysis *a, long index, unsigned flags, md_flame_node **out,
                size_t *n, md_err *err)
{
    builder b;
    memset(&b, 0, sizeof b);
    b.s = md_analysis_snapshot(a);
    b.flags = flags;
    *out = NULL;
    *n = 0;
    if (index < -1 || index >= (long)md_replay_nevents(md_analysis_replay(a)))
        return md_err_set(err, MD_E_ARG, -1, "md_flame_at: event %ld is outside the trace", index);
    const md_live_set *ls = md_analysis_live(a, index);
    int rc = !ls || md_map_init(&b.child, 1024) || md_map_init(&b.leaf, 1024) ||
             md_grow((void **)&b.v, &b.cap, 1, sizeof *b.v) ||
             md_grow((void **)&b.cat, &b.catcap, 1, sizeof *b.cat);
    if (!rc) {
        b.v[0] = (md_flame_node){MD_FLAME_ROOT, MD_CAT_OTHER, 0, MD_FLAME_NONE, MD_FLAME_NONE,
                                 MD_FLAME_NONE, 0, 0, 0, 0};
        memset(b.cat[0], 0, sizeof b.cat[0]);
        b.n = 1;
        for (size_t i = 0; i < ls->n && !rc; i++)
            rc = add_live(&b, &ls->live[i]);
    }
    if (!rc)
        rc = finish(&b);
    md_map_free(&b.child);
    md_map_free(&b.leaf);
    free(b.cat);
    if (rc) {
        free(b.v);
        return md_err_set(err, MD_E_NOMEM, -1, "out of memory");
    }
    *out = b.v;
    *n = b.n;
    return MD_OK;
}

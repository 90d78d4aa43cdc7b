/* diff.c - "did my fix help?": the same job measured before and after a
 * change. Each rank of one report is paired with the same rank of the
 * other, and what changed is put side by side: the peak and the
 * indicators, memory by category and by site at the peak, and which
 * findings went away, appeared or stayed. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "diff.h"

int md_side_present(const md_side *s) { return s->rk || s->sr; }

const char *md_side_kind(const md_side *s)
{
    if (s->rk)
        return "snapshot";
    return s->sr && s->sr->has_capture ? "capture" : "samples";
}

const char *md_side_source(const md_side *s) { return s->rk ? s->rk->path : s->sr->source; }
int md_side_rank(const md_side *s) { return s->rk ? s->rk->rank : s->sr->rank; }
int md_side_further(const md_side *s) { return s->rk ? s->rk->further : s->sr->further_device; }

int md_side_device(const md_side *s)
{
    if (s->rk)
        return s->rk->device;
    return s->sr->device >= 0 ? s->sr->device : s->sr->local_rank;
}

static void rank_figs(const md_rank *rk, md_figs *f)
{
    size_t nst;
    md_analysis_steps(rk->a, &nst);
    md_point end = rk->nevents ? md_replay_at(rk->r, (long)rk->nevents - 1)
                               : md_replay_initial(rk->r);
    f->peak = md_mib(md_replay_peak_allocated(rk->r));
    f->peak_reserved = md_mib(md_replay_peak_reserved(rk->r));
    f->end_allocated = md_mib(end.allocated);
    f->ind = *md_analysis_indicators(rk->a);
    f->steps = (long)nst;
}

static void sample_figs(const md_sample_rank *r, md_figs *f)
{
    f->peak = r->indicators.maximum_peak_allocated_mib;
    f->ind = r->indicators;
    int last_step = -1;
    for (size_t i = 0; i < r->nsamples; i++) {
        const md_sample *x = &r->samples[i];
        if (isnan(f->peak_reserved) || x->reserved_mib > f->peak_reserved)
            f->peak_reserved = x->reserved_mib;
        if (x->process_used_mib >= 0 &&
            (isnan(f->process_used_peak) || x->process_used_mib > f->process_used_peak))
            f->process_used_peak = x->process_used_mib;
        if (x->step > last_step)
            last_step = x->step;
    }
    if (r->nsamples)
        f->end_allocated = r->samples[r->nsamples - 1].allocated_mib;
    f->steps = r->has_capture ? (long)r->capture.steps : last_step + 1;
    md_driver_stats d;
    md_err err;
    if (r->driver.n && md_driver_analyze(&r->driver, -1, &d, &err) == MD_OK) {
        f->driver_peak = md_mib(d.peak);
        f->driver_outside = md_mib(d.outside_peak);
        md_driver_stats_free(&d);
    }
}

/* One side's libraries into v (by name), their largest into before or after. */
static int driver_side(const md_sample_rank *r, int after, md_site_diff **v, size_t *n, size_t *cap)
{
    md_driver_stats d;
    md_err err;
    if (!r || !r->driver.n)
        return 0;
    if (md_driver_analyze(&r->driver, -1, &d, &err))
        return -1;
    int rc = 0;
    for (size_t i = 0; i < d.nuse && !rc; i++) {
        size_t k = 0;
        while (k < *n && strcmp((*v)[k].site, d.use[i].caller))
            k++;
        if (k == *n) {
            rc = md_grow((void **)v, cap, *n + 1, sizeof **v);
            if (rc)
                break;
            memset(&(*v)[k], 0, sizeof **v);
            snprintf((*v)[k].site, sizeof (*v)[k].site, "%s", d.use[i].caller);
            (*n)++;
        }
        *(after ? &(*v)[k].after : &(*v)[k].before) = d.use[i].max_live;
    }
    md_driver_stats_free(&d);
    return rc ? -1 : 0;
}

static int by_change(const void *x, const void *y);

int md_diff_driver(const md_sample_rank *before, const md_sample_rank *after, md_site_diff **out,
                   size_t *n)
{
    size_t cap = 0;
    *out = NULL;
    *n = 0;
    if (driver_side(before, 0, out, n, &cap) || driver_side(after, 1, out, n, &cap)) {
        free(*out);
        *out = NULL;
        return -1;
    }
    if (*n)
        qsort(*out, *n, sizeof **out, by_change);
    return 0;
}

void md_side_figs(const md_side *s, md_figs *f)
{
    memset(f, 0, sizeof *f);
    f->peak = f->peak_reserved = f->end_allocated = f->process_used_peak = NAN;
    f->driver_peak = f->driver_outside = NAN;
    f->steps = -1;
    if (s->rk)
        rank_figs(s->rk, f);
    else if (s->sr)
        sample_figs(s->sr, f);
}

/* ---- pairing -------------------------------------------------------------- */

/* Every rank of a report as a side, snapshots first. */
static md_side *sides_of(const md_report *rep, size_t *n)
{
    *n = rep->n + rep->nsranks;
    md_side *v = calloc(*n ? *n : 1, sizeof *v);
    if (!v)
        return NULL;
    for (size_t i = 0; i < rep->n; i++)
        v[i] = (md_side){&rep->ranks[i], NULL, rep->ranks[i].findings, rep->ranks[i].nfindings};
    for (size_t i = 0; i < rep->nsranks; i++)
        v[rep->n + i] = (md_side){NULL, &rep->sranks[i], rep->sfindings[i], rep->nsfindings[i]};
    return v;
}

static int same_place(const md_side *x, const md_side *y, int same_kind)
{
    return md_side_rank(x) == md_side_rank(y) && md_side_device(x) == md_side_device(y) &&
           (!same_kind || !strcmp(md_side_kind(x), md_side_kind(y)));
}

/* Pairs b[i] with the first unused a[k] at the same place. */
static void pair_up(const md_side *b, size_t nb, const md_side *a, size_t na, char *bused,
                  char *aused, md_diff_pair *out, size_t *n, int same_kind)
{
    for (size_t i = 0; i < nb; i++) {
        if (bused[i])
            continue;
        for (size_t k = 0; k < na; k++) {
            if (aused[k] || !same_place(&b[i], &a[k], same_kind))
                continue;
            bused[i] = aused[k] = 1;
            out[(*n)++] = (md_diff_pair){b[i], a[k]};
            break;
        }
    }
}

int md_diff_pairs(const md_report *before, const md_report *after, md_diff_pair **out,
                  size_t *n)
{
    size_t nb, na;
    md_side *b = sides_of(before, &nb), *a = sides_of(after, &na);
    char *bused = calloc(nb + 1, 1), *aused = calloc(na + 1, 1);
    md_diff_pair *p = calloc(nb + na + 1, sizeof *p);
    int rc = !b || !a || !bused || !aused || !p ? -1 : 0;
    *n = 0;
    if (!rc) {
        pair_up(b, nb, a, na, bused, aused, p, n, 1);
        pair_up(b, nb, a, na, bused, aused, p, n, 0);
        for (size_t i = 0; i < nb; i++)
            if (!bused[i])
                p[(*n)++] = (md_diff_pair){.before = b[i]};
        for (size_t k = 0; k < na; k++)
            if (!aused[k])
                p[(*n)++] = (md_diff_pair){.after = a[k]};
    }
    free(b);
    free(a);
    free(bused);
    free(aused);
    if (rc)
        free(p);
    *out = rc ? NULL : p;
    return rc;
}

/* ---- sites ----------------------------------------------------------------- */

static int by_site(const void *x, const void *y)
{
    return strcmp(((const md_site_diff *)x)->site, ((const md_site_diff *)y)->site);
}

static uint64_t change_of(const md_site_diff *d)
{
    return d->after > d->before ? d->after - d->before : d->before - d->after;
}

/* Largest change first; equal changes by label, so the order is stable. */
static int by_change(const void *x, const void *y)
{
    uint64_t cx = change_of(x), cy = change_of(y);
    if (cx != cy)
        return cx < cy ? 1 : -1;
    return by_site(x, y);
}

/* rk's sites at its peak, one entry per label (sites whose frames print
 * alike are one), sorted by label, bytes on side `after`. */
static int side_sites(const md_rank *rk, int after, md_site_diff **out, size_t *n)
{
    size_t k = rk ? rk->nsites : 0, u = 0;
    md_site_diff *v = calloc(k ? k : 1, sizeof *v);
    if (!v)
        return -1;
    for (size_t i = 0; i < k; i++) {
        md_site_label(rk->s, &rk->sites[i], v[i].site, sizeof v[i].site);
        *(after ? &v[i].after : &v[i].before) = rk->sites[i].bytes;
    }
    if (k)
        qsort(v, k, sizeof *v, by_site);
    for (size_t i = 0; i < k; i++) {
        if (u && !strcmp(v[u - 1].site, v[i].site)) {
            v[u - 1].before += v[i].before;
            v[u - 1].after += v[i].after;
        } else {
            v[u++] = v[i];
        }
    }
    *out = v;
    *n = u;
    return 0;
}

/* A label "file:line name" in parts; a label without a frame ("(no
 * frames ...)") is all name, line -1. */
typedef struct code {
    const char *s;
    size_t file_len;
    long line;
    const char *name;
} code;

static code code_of(const char *s)
{
    for (const char *c = strchr(s, ':'); c; c = strchr(c + 1, ':')) {
        char *end;
        if (c[1] < '0' || c[1] > '9')
            continue;
        long line = strtol(c + 1, &end, 10);
        if (*end == ' ')
            return (code){s, (size_t)(c - s), line, end};
    }
    return (code){s, 0, -1, s};
}

static int same_file(const code *x, const code *y)
{
    return x->file_len == y->file_len && !strncmp(x->s, y->s, x->file_len);
}

/* A site before and a site after in the same file and function: one site
 * whose line moved by d (0: the same line), perhaps. */
typedef struct site_match {
    size_t b, a;
    long d;
    size_t file;  /* the file's number among before's sites */
    size_t votes; /* matches in the same file that moved by the same d */
} site_match;

/* Likeliest first: the shift most sites of the file share (an edit moves
 * every line below it alike, and most often none), then the smallest. */
static int by_votes(const void *x, const void *y)
{
    const site_match *p = x, *q = y;
    long dp = p->d < 0 ? -p->d : p->d, dq = q->d < 0 ? -q->d : q->d;
    if (p->votes != q->votes)
        return p->votes < q->votes ? 1 : -1;
    if (dp != dq)
        return dp < dq ? -1 : 1;
    if (p->b != q->b)
        return p->b < q->b ? -1 : 1;
    return p->a < q->a ? -1 : p->a > q->a;
}

#define MAX_MATCHES 100000 /* beyond: sites are matched on the same line only */

static int same_site(const code *b, const code *a, int exact)
{
    if (b->line < 0 || a->line < 0)
        return !strcmp(b->s, a->s);
    return same_file(b, a) && !strcmp(b->name, a->name) && (!exact || b->line == a->line);
}

/* Every possible match of b's and a's sites: same file and function, any
 * line (exact: the same line only, where the former are too many); NULL
 * when out of memory (then *n = 0 and sites stay one-sided, none lost). */
static site_match *matches_of(const code *cb, size_t nb, const code *ca, size_t na, int exact,
                              size_t *n)
{
    site_match *m = NULL;
    size_t cap = 0;
    *n = 0;
    for (size_t i = 0; i < nb; i++)
        for (size_t k = 0; k < na; k++) {
            if (!same_site(&cb[i], &ca[k], exact))
                continue;
            if (*n == MAX_MATCHES && !exact) {
                free(m);
                return matches_of(cb, nb, ca, na, 1, n);
            }
            if (md_grow((void **)&m, &cap, *n + 1, sizeof *m)) {
                free(m);
                *n = 0;
                return NULL;
            }
            m[(*n)++] = (site_match){i, k, ca[k].line - cb[i].line, 0, 0};
        }
    return m;
}

typedef struct file_key {
    const char *s;
    size_t len, site;
} file_key;

static int by_file(const void *x, const void *y)
{
    const file_key *p = x, *q = y;
    int c = memcmp(p->s, q->s, p->len < q->len ? p->len : q->len);
    return c ? c : p->len < q->len ? -1 : p->len > q->len;
}

/* Numbers before's sites by file (the same number for the same file). */
static int file_numbers(const code *cb, size_t nb, size_t *num)
{
    file_key *k = malloc((nb ? nb : 1) * sizeof *k);
    if (!k)
        return -1;
    for (size_t i = 0; i < nb; i++)
        k[i] = (file_key){cb[i].s, cb[i].file_len, i};
    qsort(k, nb, sizeof *k, by_file);
    for (size_t i = 0, f = 0; i < nb; i++) {
        f += i && by_file(&k[i - 1], &k[i]);
        num[k[i].site] = f;
    }
    free(k);
    return 0;
}

static int by_file_shift(const void *x, const void *y)
{
    const site_match *p = x, *q = y;
    if (p->file != q->file)
        return p->file < q->file ? -1 : 1;
    return p->d < q->d ? -1 : p->d > q->d;
}

/* Each match's votes: the matches of its file with the same shift. */
static int count_votes(const code *cb, size_t nb, site_match *m, size_t nm)
{
    size_t *num = malloc((nb ? nb : 1) * sizeof *num);
    if (!num)
        return -1;
    if (file_numbers(cb, nb, num)) {
        free(num);
        return -1;
    }
    for (size_t x = 0; x < nm; x++)
        m[x].file = num[m[x].b];
    free(num);
    qsort(m, nm, sizeof *m, by_file_shift);
    for (size_t x = 0, y; x < nm; x = y) {
        for (y = x; y < nm && !by_file_shift(&m[x], &m[y]); y++)
            ;
        for (size_t z = x; z < y; z++)
            m[z].votes = y - x;
    }
    return 0;
}

/* Joins before's and after's sites into v: the likeliest matches first,
 * each site at most once; what is left is one-sided. */
static void join(const md_site_diff *b, const code *cb, size_t nb, const md_site_diff *a,
                 const code *ca, size_t na, site_match *m, size_t nm, md_site_diff *v, size_t *n)
{
    char *bused = calloc(nb + 1, 1), *aused = calloc(na + 1, 1);
    if (!bused || !aused)
        nm = 0;
    if (nm)
        qsort(m, nm, sizeof *m, by_votes);
    for (size_t x = 0; x < nm; x++) {
        const site_match *p = &m[x];
        if (bused[p->b] || aused[p->a])
            continue;
        bused[p->b] = aused[p->a] = 1;
        md_site_diff *d = &v[(*n)++];
        *d = b[p->b];
        d->after = a[p->a].after;
        if (p->d)
            snprintf(d->site, sizeof d->site, "%.*s:%ld->%ld%s", (int)cb[p->b].file_len,
                     cb[p->b].s, cb[p->b].line, ca[p->a].line, cb[p->b].name);
    }
    for (size_t i = 0; i < nb; i++)
        if (!bused || !bused[i])
            v[(*n)++] = b[i];
    for (size_t k = 0; k < na; k++)
        if (!aused || !aused[k])
            v[(*n)++] = a[k];
    free(bused);
    free(aused);
}

int md_diff_sites(const md_rank *before, const md_rank *after, md_site_diff **out, size_t *n)
{
    md_site_diff *b = NULL, *a = NULL, *v = NULL;
    size_t nb = 0, na = 0, nm = 0;
    code *cb = NULL, *ca = NULL;
    *n = 0;
    int rc = side_sites(before, 0, &b, &nb) || side_sites(after, 1, &a, &na) ||
             !(v = calloc(nb + na + 1, sizeof *v)) || !(cb = calloc(nb + 1, sizeof *cb)) ||
             !(ca = calloc(na + 1, sizeof *ca));
    if (!rc) {
        for (size_t i = 0; i < nb; i++)
            cb[i] = code_of(b[i].site);
        for (size_t k = 0; k < na; k++)
            ca[k] = code_of(a[k].site);
        site_match *m = matches_of(cb, nb, ca, na, 0, &nm);
        if (m && count_votes(cb, nb, m, nm)) {
            free(m); /* out of memory: no site joined, none lost */
            m = NULL;
            nm = 0;
        }
        join(b, cb, nb, a, ca, na, m, nm, v, n);
        free(m);
        if (*n)
            qsort(v, *n, sizeof *v, by_change);
    }
    free(b);
    free(a);
    free(cb);
    free(ca);
    if (rc) {
        free(v);
        return -1;
    }
    *out = v;
    return 0;
}

/* ---- findings -------------------------------------------------------------- */

static int same_finding(const md_finding *x, const md_finding *y)
{
    return !strcmp(x->kind, y->kind) && x->device == y->device && x->rank == y->rank;
}

int md_diff_findings(const md_finding *b, size_t nb, const md_finding *a, size_t na,
                     md_finding_diff **out, size_t *n)
{
    md_finding_diff *v = calloc(nb + na + 1, sizeof *v);
    char *aused = calloc(na + 1, 1);
    const md_finding **match_of = calloc(nb + 1, sizeof *match_of);
    *n = 0;
    if (!v || !aused || !match_of) {
        free(v);
        free(aused);
        free((void *)match_of);
        return -1;
    }
    for (size_t i = 0; i < nb; i++)
        for (size_t k = 0; k < na && !match_of[i]; k++)
            if (!aused[k] && same_finding(&b[i], &a[k])) {
                aused[k] = 1;
                match_of[i] = &a[k];
            }
    for (size_t i = 0; i < nb; i++)
        if (!match_of[i])
            v[(*n)++] = (md_finding_diff){MD_DIFF_GONE, &b[i], NULL};
    for (size_t k = 0; k < na; k++)
        if (!aused[k])
            v[(*n)++] = (md_finding_diff){MD_DIFF_NEW, NULL, &a[k]};
    for (size_t i = 0; i < nb; i++)
        if (match_of[i])
            v[(*n)++] = (md_finding_diff){MD_DIFF_KEPT, &b[i], match_of[i]};
    free(aused);
    free((void *)match_of);
    *out = v;
    return 0;
}

/* iterations.c - training iterations where several optimizers step in
 * turn: a GAN steps its discriminator's optimizer and then its
 * generator's, actor-critic an actor's and a critic's. Each optimizer
 * step stays a step of the analysis (what it allocates is categorized by
 * its own phases), but the memory held between steps then alternates
 * with the optimizer that just stepped, so growth must be compared from
 * iteration to iteration. The optimizers are told apart by where they
 * are called from: the first user frame of what each step allocates
 * (Adam's foreach intermediates, every optimizer's state at its first
 * step). A step that allocates nothing says nothing; a cycle must show
 * in the steps that do, twice. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "../snapshot/snapshot_int.h"
#include "analyze.h"

/* The first user frame of an allocation inside step st's optimizer
 * phase, or NULL. */
static const md_frame *step_site(const md_snapshot *s, md_stack_cache *cache,
                                 const md_event *ev, const md_step *st)
{
    for (long i = st->after_backward + 1; i >= 0 && i <= st->after_optim; i++)
        if (ev[i].action == MD_ACT_ALLOC && ev[i].stack) {
            const md_frame *fr = md_stack_user_frame(cache, s, ev[i].stack);
            if (fr)
                return fr;
        }
    return NULL;
}

/* The optimizer class that step st's optimizer phase runs in, from the
 * first allocation whose frames name one (torch/optim/adamw.py: AdamW), or
 * NULL: optimizers stepped from one line (`for opt in opts: opt.step()`,
 * Muon beside AdamW) are told apart by it. The names are static. */
static const char *step_optimizer(const md_snapshot *s, md_stack_cache *cache,
                                  const md_event *ev, const md_step *st)
{
    for (long i = st->after_backward + 1; i >= 0 && i <= st->after_optim; i++)
        if (ev[i].action == MD_ACT_ALLOC && ev[i].stack &&
            (md_stack_tags(cache, s, ev[i].stack) & MD_TAG_OPTIM)) /* tags are cached */
            return md_optimizer_from_stack(s, ev[i].stack); /* one file scan a step */
    return NULL;
}

static int same_site(const md_frame *x, const md_frame *y)
{
    return x->filename == y->filename && x->line == y->line && x->name == y->name;
}

/* Whether the known ids (>= 0) repeat with period p, every position of
 * the cycle known at least once, and not all the same (WGAN's critic
 * steps five times for each generator step: a cycle of 6, two ids); rep
 * gets each position's id. */
static int cycles(const long *id, size_t n, size_t p, long *rep)
{
    for (size_t k = 0; k < p; k++)
        rep[k] = -1;
    for (size_t k = 0; k < n; k++) {
        if (id[k] < 0)
            continue;
        if (rep[k % p] < 0)
            rep[k % p] = id[k];
        else if (rep[k % p] != id[k])
            return 0;
    }
    int differ = 0;
    for (size_t k = 0; k < p; k++) {
        if (rep[k] < 0)
            return 0;
        differ |= rep[k] != rep[0];
    }
    return differ;
}

size_t md_cycle_period(const long *id, size_t n, long rep[MD_MAX_PERIOD])
{
    for (size_t p = 2; p <= MD_MAX_PERIOD && n >= 2 * p; p++)
        if (cycles(id, n, p, rep))
            return p;
    return 1;
}

/* Steps first..first+p-1 as one iteration: the first one's start and
 * forward, the last one's backward, optimizer step and end. */
static md_step merged(const md_step *st, size_t first, size_t p, int number)
{
    md_step it = st[first];
    const md_step *last = &st[first + p - 1];
    it.number = number;
    it.after_backward = last->after_backward;
    it.after_optim = last->after_optim;
    it.after_zero = last->after_zero;
    for (size_t k = first + 1; k < first + p; k++)
        if (st[k].peak > it.peak) {
            it.peak = st[k].peak;
            it.peak_index = st[k].peak_index;
        }
    return it;
}

int md_find_iterations(const md_snapshot *s, md_stack_cache *cache, const md_event *ev,
                       const md_step *st, size_t n, md_iterations *out)
{
    memset(out, 0, sizeof *out);
    out->period = 1;
    long *id = n >= 2 * 2 ? malloc(n * sizeof *id) : NULL, rep[MD_MAX_PERIOD];
    if (n >= 2 * 2 && !id)
        return -1;
    const char **name = id ? malloc(n * sizeof *name) : NULL;
    const md_frame **site = id ? malloc(n * sizeof *site) : NULL;
    if (id && (!name || !site)) {
        free(id);
        free(name);
        free(site);
        return -1;
    }
    for (size_t k = 0; id && k < n; k++) { /* frames are interned: an index is a site */
        site[k] = step_site(s, cache, ev, &st[k]);
        name[k] = step_optimizer(s, cache, ev, &st[k]);
        id[k] = site[k] ? (long)(site[k] - s->frames) : -1;
    }
    out->period = id ? md_cycle_period(id, n, rep) : 1;
    if (id && out->period == 1) { /* one call site: the optimizers' classes */
        for (size_t k = 0; k < n; k++)
            id[k] = name[k] ? (long)(intptr_t)name[k] : -1;
        out->period = md_cycle_period(id, n, rep);
    }
    size_t p = out->period;
    for (size_t k = 0; p > 1 && k < p; k++) { /* each position's site and class */
        out->site[k] = NULL;
        out->name[k] = NULL;
        for (size_t j = k; j < n; j += p) {
            out->site[k] = out->site[k] ? out->site[k] : site[j];
            out->name[k] = out->name[k] ? out->name[k] : name[j];
        }
        if (!out->site[k]) /* a position no allocation names: no cycle to say */
            out->period = 1;
    }
    p = out->period;
    free(id);
    free(name);
    free(site);
    /* iterations end with the last step: a run stops at an iteration's end;
     * a first group cut short by where recording began is left out */
    size_t first = n % p, count = n / p;
    const md_frame *cycle[MD_MAX_PERIOD]; /* the sites in an iteration's order */
    const char *names[MD_MAX_PERIOD];
    for (size_t k = 0; k < p; k++) {
        cycle[k] = out->site[(first + k) % p];
        names[k] = out->name[(first + k) % p];
    }
    memcpy(out->site, cycle, p * sizeof *cycle);
    memcpy(out->name, names, p * sizeof *names);
    out->steps = malloc((count ? count : 1) * sizeof *out->steps);
    if (!out->steps)
        return -1;
    for (size_t k = 0; k < count; k++)
        out->steps[k] = merged(st, first + k * p, p, p == 1 ? st[first + k].number : (int)k);
    out->n = count;
    return 0;
}

/* Position k and j of the cycle: one optimizer (one call site, one class). */
static int same_position(const md_analysis *a, size_t k, size_t j)
{
    const char *x = md_analysis_period_name(a, k), *y = md_analysis_period_name(a, j);
    return same_site(md_analysis_period_site(a, k), md_analysis_period_site(a, j)) &&
           (x == y || (x && y && !strcmp(x, y)));
}

size_t md_analysis_period_say(const md_analysis *a, char *dst, size_t n)
{
    size_t period = md_analysis_period(a), used = 0, distinct = 0;
    const md_snapshot *s = md_analysis_snapshot(a);
    dst[0] = '\0';
    for (size_t k = 0; period > 1 && k < period;) {
        const md_frame *fr = md_analysis_period_site(a, k);
        const char *cls = md_analysis_period_name(a, k);
        size_t run = 1, seen = 0;
        while (k + run < period && same_position(a, k + run, k))
            run++;
        for (size_t j = 0; j < k; j++)
            seen |= same_position(a, j, k);
        distinct += !seen;
        char times[32] = "", label[512];
        if (run > 1)
            snprintf(times, sizeof times, " %zu times", run);
        if (used < n)
            used += (size_t)snprintf(dst + used, n - used, "%s%s%s%s%s", k ? ", then " : "",
                                     cls ? cls : "", cls ? " at " : "",
                                     md_frame_label(s, fr, label, sizeof label), times);
        k += run;
    }
    return distinct;
}

size_t md_closed_iterations(const md_step *it, size_t n)
{
    if (n >= 2 && it[n - 1].after_zero == it[n - 1].after_optim &&
        it[n - 2].after_zero != it[n - 2].after_optim)
        return n - 1;
    return n;
}

/* The script line of each stack, looked up once per stack. */
typedef struct script_cache {
    const md_frame **frame;
    unsigned char *known;
    size_t n;
    md_stack_cache *tags; /* the frames' own, shared with the analysis */
} script_cache;

static const md_frame *script_of(const md_snapshot *s, script_cache *sc, uint32_t stack)
{
    if (!stack || stack >= sc->n)
        return NULL;
    if (!sc->known[stack]) {
        sc->frame[stack] = md_script_frame(sc->tags, s, stack);
        sc->known[stack] = 1;
    }
    return sc->frame[stack];
}

/* The script line that allocates most often, where it makes at least
 * half of the script's allocations (a loop around one call: generate(),
 * a forward; not any line of a job that does many things). */
static const md_frame *busiest_line(const md_snapshot *s, script_cache *sc, const md_event *ev,
                                    size_t nev)
{
    uint32_t *count = calloc(s->nframes ? s->nframes : 1, sizeof *count);
    const md_frame *best = NULL;
    size_t total = 0;
    for (size_t i = 0; count && i < nev; i++) {
        const md_frame *f = ev[i].action == MD_ACT_ALLOC ? script_of(s, sc, ev[i].stack) : NULL;
        if (!f)
            continue;
        total++;
        if (++count[f - s->frames] > (best ? count[best - s->frames] : 0))
            best = f;
    }
    if (best && 2 * (size_t)count[best - s->frames] < total)
        best = NULL;
    free(count);
    return best;
}

/* Appends a call, from its first allocation to just before the next
 * call's (end). */
static int add_call(md_iterations *out, size_t *cap, long first, long last, long end)
{
    if (md_grow((void **)&out->steps, cap, out->n + 1, sizeof *out->steps))
        return -1;
    md_step *c = &out->steps[out->n];
    memset(c, 0, sizeof *c);
    c->number = (int)out->n++;
    c->fwd_start = first - 1;
    c->after_forward = last;
    c->after_backward = c->after_optim = c->after_zero = end;
    return 0;
}

int md_find_calls(const md_snapshot *s, md_stack_cache *cache, const md_event *ev, size_t nev,
                  md_iterations *out)
{
    memset(out, 0, sizeof *out);
    out->period = 1;
    script_cache sc = {calloc(s->nstacks ? s->nstacks : 1, sizeof *sc.frame),
                       calloc(s->nstacks ? s->nstacks : 1, 1), s->nstacks, cache};
    size_t cap = 0;
    int rc = sc.frame && sc.known ? 0 : -1;
    const md_frame *line = rc ? NULL : busiest_line(s, &sc, ev, nev);
    long first = -1, last = -1;
    int between = 0; /* another line of the script allocated since the last */
    /* a call: consecutive allocations from that line; one from another line
     * of the script ends it, one with no script frame (C++) does not */
    for (size_t i = 0; line && !rc && i < nev; i++) {
        const md_frame *f = ev[i].action == MD_ACT_ALLOC ? script_of(s, &sc, ev[i].stack) : NULL;
        if (!f)
            continue;
        if (!same_site(f, line)) {
            between = first >= 0;
            continue;
        }
        if (between) {
            rc = add_call(out, &cap, first, last, (long)i - 1);
            first = -1;
            between = 0;
        }
        if (first < 0)
            first = (long)i;
        last = (long)i;
    }
    /* the last call has no next one: what is live after it is the job's
     * end (and its teardown), not comparable; it is left out */
    free(sc.frame);
    free(sc.known);
    if (!rc && out->n >= 3)
        out->call = line;
    else
        out->n = 0;
    return rc;
}

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
#include <stdlib.h>
#include <string.h>
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

static int same_site(const md_frame *x, const md_frame *y)
{
    return x->filename == y->filename && x->line == y->line && x->name == y->name;
}

/* Whether the known sites repeat with period p, every position of the
 * cycle known at least once, and not all the same (WGAN's critic steps
 * five times for each generator step: a cycle of 6, two sites). */
static int cycles(const md_frame *const *site, size_t n, size_t p, const md_frame **rep)
{
    for (size_t k = 0; k < p; k++)
        rep[k] = NULL;
    for (size_t k = 0; k < n; k++) {
        if (!site[k])
            continue;
        const md_frame **r = &rep[k % p];
        if (!*r)
            *r = site[k];
        else if (!same_site(*r, site[k]))
            return 0;
    }
    int differ = 0;
    for (size_t k = 0; k < p; k++) {
        if (!rep[k])
            return 0;
        differ |= !same_site(rep[k], rep[0]);
    }
    return differ;
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
    const md_frame **site = n >= 2 * 2 ? calloc(n, sizeof *site) : NULL;
    if (n >= 2 * 2 && !site)
        return -1;
    for (size_t k = 0; site && k < n; k++)
        site[k] = step_site(s, cache, ev, &st[k]);
    for (size_t p = 2; site && p <= MD_MAX_PERIOD && n >= 2 * p; p++)
        if (cycles(site, n, p, out->site)) {
            out->period = p;
            break;
        }
    free(site);
    size_t p = out->period;
    /* iterations end with the last step: a run stops at an iteration's end;
     * a first group cut short by where recording began is left out */
    size_t first = n % p, count = n / p;
    const md_frame *cycle[MD_MAX_PERIOD]; /* the sites in an iteration's order */
    for (size_t k = 0; k < p; k++)
        cycle[k] = out->site[(first + k) % p];
    memcpy(out->site, cycle, p * sizeof *cycle);
    out->steps = malloc((count ? count : 1) * sizeof *out->steps);
    if (!out->steps)
        return -1;
    for (size_t k = 0; k < count; k++)
        out->steps[k] = merged(st, first + k * p, p, p == 1 ? st[first + k].number : (int)k);
    out->n = count;
    return 0;
}

size_t md_analysis_period_say(const md_analysis *a, char *dst, size_t n)
{
    size_t period = md_analysis_period(a), used = 0, distinct = 0;
    const md_snapshot *s = md_analysis_snapshot(a);
    dst[0] = '\0';
    for (size_t k = 0; period > 1 && k < period;) {
        const md_frame *fr = md_analysis_period_site(a, k);
        size_t run = 1, seen = 0;
        while (k + run < period && same_site(md_analysis_period_site(a, k + run), fr))
            run++;
        for (size_t j = 0; j < k; j++)
            seen |= same_site(md_analysis_period_site(a, j), fr);
        distinct += !seen;
        char times[32] = "";
        if (run > 1)
            snprintf(times, sizeof times, " %zu times", run);
        if (used < n)
            used += (size_t)snprintf(dst + used, n - used, "%s%s:%d %s%s", k ? ", then " : "",
                                     md_snapshot_string(s, fr->filename), fr->line,
                                     md_snapshot_string(s, fr->name), times);
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

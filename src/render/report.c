/* report.c - gathers one rank's facts: replay, steps, live set at peak. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include "report.h"
#include "../analyze/analyze.h"
#include "../model/model.h"
#include "../util/thread.h"

int md_rank_from_name(const char *path)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    const char *p = base, *hit = NULL;
    while ((p = strstr(p, "rank")) != NULL) {
        p += 4;
        if (*p == '_' || *p == '-')
            p++;
        if (isdigit((unsigned char)*p))
            hit = p;
    }
    return hit ? atoi(hit) : -1;
}

int md_rank_phase_of(const md_step *st, long i)
{
    if (i <= st->fwd_start)
        return -1;
    if (i <= st->after_forward)
        return MD_PHASE_FORWARD;
    if (i <= st->after_backward)
        return MD_PHASE_BACKWARD;
    if (i <= st->after_optim)
        return MD_PHASE_OPTIMIZER;
    if (i <= st->after_zero)
        return MD_PHASE_ZERO_GRAD;
    return -1;
}

/* Whether the peak p, in step st's forward phase, was a pass whose memory
 * the backward never used (an evaluation, a no_grad forward run before the
 * training forward): most of what the phase added by the peak is
 * temporaries (freed within it, where a training forward's activations
 * live on), and memory fell back to where the phase began (within 1 MiB)
 * before the backward. (A graph kept from the step before, freed as the
 * new forward runs, also falls back: its memory at the peak is
 * activations.) */
static int freed_before_backward(const md_rank *rk, const md_step *st, long p)
{
    uint64_t base = md_replay_at(rk->r, st->fwd_start).allocated;
    uint64_t added = md_replay_at(rk->r, p).allocated - base;
    if (2 * rk->by_cat[MD_CAT_TEMPORARY] < added)
        return 0;
    for (long i = p + 1; i <= st->after_forward; i++)
        if (md_replay_at(rk->r, i).allocated <= base + (1u << 20))
            return 1;
    return 0;
}

/* The highest allocated from the first forward on: the training's peak,
 * set-up aside. */
static uint64_t training_peak(const md_rank *rk, const md_step *st, size_t n)
{
    uint64_t m = 0;
    for (long i = st[0].fwd_start; i <= st[0].after_zero; i++)
        m = md_replay_at(rk->r, i).allocated > m ? md_replay_at(rk->r, i).allocated : m;
    for (size_t k = 1; k < n; k++)
        m = st[k].peak > m ? st[k].peak : m;
    return m;
}

static void locate_peak(md_rank *rk)
{
    size_t n;
    const md_step *st = md_analysis_steps(rk->a, &n);
    long p = md_analysis_peak_index(rk->a);
    rk->peak_step = -1;
    rk->peak_phase = -1;
    rk->peak_failed = 0;
    rk->peak_unused = 0;
    rk->setup_peak_over = 0;
    rk->peak_before_history = 0;
    long lo = -1;
    size_t nev;
    const md_event *ev = md_snapshot_events(rk->s, rk->device, &nev);
    for (size_t k = 0; k < n; k++) {
        if (p > lo && p <= st[k].after_zero) {
            rk->peak_step = st[k].number;
            rk->peak_phase = md_rank_phase_of(&st[k], p);
            for (long i = p + 1; rk->peak_phase < 0 && i <= st[k].fwd_start && i < (long)nev; i++)
                rk->peak_failed |= ev[i].action == MD_ACT_OOM;
            if (rk->peak_phase == MD_PHASE_FORWARD)
                rk->peak_unused = freed_before_backward(rk, &st[k], p);
            /* before the first forward: set-up, unless steps ran before the
             * history began (the annotations number the run's steps: the
             * first one recorded is numbered above 0) */
            if (k == 0 && p <= st[0].fwd_start && !rk->peak_failed) {
                if (st[0].number > 0)
                    rk->peak_before_history = 1;
                else
                    rk->setup_peak_over = training_peak(rk, st, n);
            }
            return;
        }
        lo = st[k].after_zero;
    }
}

const char *md_rank_peak_where(const md_rank *rk, char *dst, size_t n)
{
    if (rk->peak_failed)
        snprintf(dst, n, " (before step %ld, in an attempt that ran out of memory)", rk->peak_step);
    else if (rk->setup_peak_over)
        snprintf(dst, n, " (before the first forward pass: set-up; the training's own peak "
                 "is %.1f MiB)", md_mib(rk->setup_peak_over));
    else if (rk->peak_before_history)
        snprintf(dst, n, " (before step %ld's forward pass, in work begun before the recorded "
                 "history)", rk->peak_step);
    else if (rk->peak_unused)
        snprintf(dst, n, " (step %ld, forward: in a pass all freed before the backward: an "
                 "evaluation or other no_grad work)", rk->peak_step);
    else if (rk->peak_step >= 0)
        snprintf(dst, n, " (step %ld, %s)", rk->peak_step,
                 rk->peak_phase >= 0 ? md_phase_name(rk->peak_phase) : "between phases");
    else if (n)
        dst[0] = '\0';
    return dst;
}

int md_rank_build(md_rank *rk, const md_snapshot *s, int device, int rank, md_err *err)
{
    return md_rank_build_with(rk, s, device, rank, NULL, 0, err);
}

/* The stacks classified on a thread of their own while the trace is
 * replayed: the analysis asks every event's stack its phase, and the
 * frames' names and files take searches (a synthetic 10 000-entry trace:
 * 2 672 stacks of 34 frames, 2.0 M instructions beside the replay's 2.2 M;
 * the seed exercise's 380 frames, most of them C++ signatures, 1.45 M). */
typedef struct aside {
    md_stack_cache c;
    const md_snapshot *s;
    pthread_t tid;
    int have, running;
} aside;

static void *aside_main(void *arg)
{
    aside *a = arg;
    md_stack_cache_fill(&a->c, a->s, 1);
    return NULL;
}

/* The cache's arrays are made here, so the thread allocates nothing
 * (a thread's first malloc makes it an arena of its own). */
static void aside_start(aside *a, const md_snapshot *s, int on)
{
    a->s = s;
    a->have = on && md_stack_cache_dear(s) && !md_stack_cache_new(&a->c, s);
    a->running = a->have && !md_thread_start(&a->tid, aside_main, a, MD_STACK_HELPER);
    if (a->have && !a->running)
        md_stack_cache_fill(&a->c, s, 0); /* the rest as the analysis asks */
}

/* The cache for md_analyze_with once the thread is done (NULL: none). */
static md_stack_cache *aside_finish(aside *a)
{
    if (a->running)
        pthread_join(a->tid, NULL);
    a->running = 0;
    return a->have ? &a->c : NULL;
}

/* The live sets at the replay's peak and where reserved memory peaked,
 * fetched on a thread of their own while the analysis finds the steps:
 * each probe replays from the nearest state kept (big_gamma: 10 939
 * events, 3.2 M instructions of the analysis' 8.4 M). Under AHEAD_MIN_WORK
 * events to replay the thread's start would cost about what it saves
 * (hf-qwen2-ring's 756 took 0.3 M: the main thread's total rose by 0.1 M;
 * synthetic-10000's 1 363: 0.25 M less, a few tens of us). */
#define AHEAD_MIN_WORK 2048
typedef struct probes_ahead {
    md_lives_ahead pub; /* first: wait() is handed it */
    const md_replay *r;
    pthread_t tid;
    int running;
} probes_ahead;

static void *probes_main(void *arg)
{
    probes_ahead *p = arg;
    md_lives_ahead *a = &p->pub;
    md_err e;
    a->failed = md_replay_probe(p->r, a->idx, a->k, a->live, a->n, a->cs, &e) != 0;
    return NULL;
}

static void probes_wait(md_lives_ahead *a)
{
    probes_ahead *p = (probes_ahead *)a;
    if (p->running)
        pthread_join(p->tid, NULL);
    p->running = 0;
}

/* The sets for md_analyze_ahead, being fetched (NULL: none). */
static md_lives_ahead *probes_start(probes_ahead *p, const md_replay *r, int on)
{
    memset(p, 0, sizeof *p);
    p->r = r;
    p->pub.wait = probes_wait;
    if (!on || !(p->pub.k = md_lives_ahead_indices(r, p->pub.idx)) ||
        md_replay_probe_work(r, p->pub.idx, p->pub.k) < AHEAD_MIN_WORK)
        return NULL;
    p->running = !md_thread_start(&p->tid, probes_main, p, MD_STACK_HELPER);
    return p->running ? &p->pub : NULL;
}

/* Once the analysis is done: the sets it did not take freed. */
static void probes_finish(probes_ahead *p)
{
    probes_wait(&p->pub);
    for (size_t j = 0; j < p->pub.k; j++)
        free(p->pub.live[j]);
}

int md_rank_build_with(md_rank *rk, const md_snapshot *s, int device, int rank, md_pass *first,
                       int classify_aside, md_err *err)
{
    memset(rk, 0, sizeof *rk);
    rk->path = md_snapshot_path(s);
    rk->s = s;
    rk->device = device;
    rk->rank = rank;
    md_snapshot_events(s, device, &rk->nevents);
    rk->history = md_snapshot_has_history(s, device);
    aside as;
    aside_start(&as, s, classify_aside);
    int rc = md_replay_run_with(s, device, first, &rk->r, err);
    md_stack_cache *cache = aside_finish(&as);
    if (!rc) {
        probes_ahead pa;
        md_lives_ahead *ahead = probes_start(&pa, rk->r, classify_aside);
        rc = md_analyze_ahead(s, rk->r, cache, ahead, &rk->a, err);
        probes_finish(&pa);
    } else if (cache) {
        md_stack_cache_free(cache);
    }
    if (!rc)
        rc = md_sites_at(rk->a, md_analysis_peak_index(rk->a), &rk->sites, &rk->nsites,
                         rk->by_cat, err);
    if (!rc)
        rc = md_diagnose(rk->a, &rk->findings, &rk->nfindings, err);
    for (size_t i = 0; !rc && i < rk->nfindings; i++)
        rk->findings[i].rank = rank;
    if (rc) {
        md_rank_free(rk);
        return rc;
    }
    locate_peak(rk);
    return MD_OK;
}

void md_rank_free(md_rank *rk)
{
    free(rk->findings);
    rk->findings = NULL;
    free(rk->sites);
    md_analysis_free(rk->a);
    md_replay_free(rk->r);
    rk->sites = NULL;
    rk->a = NULL;
    rk->r = NULL;
}

const char *md_site_label(const md_snapshot *s, const md_site *site, char *buf, size_t n)
{
    if (site->before_recording) {
        snprintf(buf, n, site->before_recording == 2 ? "(no stack recorded)"
                                                     : "(allocated before the recorded history began)");
        return buf;
    }
    if (!site->frame_file) {
        snprintf(buf, n, "(no frames outside torch: autograd engine or C++)");
        return buf;
    }
    const char *file = md_snapshot_string(s, site->frame_file);
    snprintf(buf, n, "%s:%d %s", file, site->frame_line,
             md_snapshot_string(s, site->frame_name));
    return buf;
}

int md_rank_is_rank(const md_rank *rk)
{
    return !rk->further && !rk->helper_of;
}

int md_ranks_one_process(const md_rank *ranks, size_t n)
{
    for (size_t i = 1; i < n; i++)
        if (strcmp(ranks[i].path, ranks[0].path) || ranks[i].device == ranks[0].device)
            return 0;
    return n > 1;
}

/* A further device of one file that is another file's own: memory a
 * rank's process put on another rank's GPU. */
static int strays(const md_rank *ranks, size_t n, md_finding **out, size_t *nout)
{
    for (size_t i = 0; i < n; i++) {
        if (!ranks[i].further)
            continue;
        const md_rank *own = NULL, *owner = NULL;
        for (size_t k = 0; k < n; k++) {
            if (!ranks[k].further && ranks[k].s == ranks[i].s)
                own = &ranks[k];
            if (md_rank_is_rank(&ranks[k]) && ranks[k].s != ranks[i].s &&
                ranks[k].device == ranks[i].device)
                owner = &ranks[k];
        }
        if (!own || !owner)
            continue; /* a device no other rank runs on: the model's split */
        md_stray w = {ranks[i].rank, own->device, ranks[i].device, owner->rank,
                      md_replay_peak_allocated(owner->r)};
        md_finding *f;
        size_t nf;
        md_err err;
        if (md_diagnose_stray(ranks[i].a, &w, &f, &nf, &err))
            return MD_E_NOMEM;
        md_finding *all = nf ? realloc(*out, (*nout + nf) * sizeof **out) : *out;
        if (!all) {
            free(f);
            return MD_E_NOMEM;
        }
        *out = all;
        memcpy(all + *nout, f, nf * sizeof *f);
        *nout += nf;
        free(f);
    }
    return MD_OK;
}

/* Ranks compare by their own devices (their files' further devices are not
 * ranks); the devices of one process compare as devices. */
int md_ranks_cross(const md_rank *ranks, size_t n, md_finding **out, size_t *nout, md_err *err)
{
    *out = NULL;
    *nout = 0;
    int devices = md_ranks_one_process(ranks, n);
    for (size_t i = 0; i < n && !devices; i++)
        for (size_t j = i + 1; j < n; j++)
            if (md_rank_is_rank(&ranks[i]) && md_rank_is_rank(&ranks[j]) &&
                ranks[i].rank == ranks[j].rank)
                return MD_OK; /* not one job's ranks: nothing to compare */
    const md_analysis **as = calloc(n ? n : 1, sizeof *as);
    int *nums = calloc(n ? n : 1, sizeof *nums);
    size_t m = 0;
    int rc = MD_OK;
    if (!as || !nums) {
        rc = MD_E_NOMEM;
    } else {
        for (size_t i = 0; i < n; i++) {
            if (ranks[i].helper_of || (!devices && ranks[i].further))
                continue;
            as[m] = ranks[i].a;
            nums[m++] = devices ? ranks[i].device : ranks[i].rank;
        }
        rc = devices ? md_diagnose_devices(as, nums, m, out, nout, err)
                     : md_diagnose_ranks(as, nums, m, out, nout, err);
        if (!rc && !devices)
            rc = strays(ranks, n, out, nout);
    }
    free(as);
    free(nums);
    return rc;
}

/* steps.c - training steps and phases from a snapshot alone, and the seed
 * exercise's four indicators.
 *
 * Step ends come from the optimizer's record_function annotations
 * ("Optimizer.step#AdamW.step" START/END, "Optimizer.zero_grad#..."), which
 * torch >= 2.5 writes into external_annotations. Without them, from frames:
 * runs of events inside torch/optim (step), zero_grad, or, failing both, the
 * ends of autograd backward runs. Inside a step, the forward starts at the
 * first module call (nn.Module._call_impl) and the backward at the first
 * autograd frame (or the first frame-less event after the forward: with
 * stacks='python' the autograd engine's thread has no Python frames).
 *
 * The phase points mirror the seed script's samples: after_forward is the
 * state just before backward starts, after_backward just before the
 * optimizer step, after_optimizer_step at its end, after_clear_gradients
 * after zero_grad. */
#include <stdlib.h>
#include <string.h>
#include "../model/model.h"
#include "../snapshot/snapshot_int.h"
#include "analyze.h"

#define MIB (1024.0 * 1024.0)

/* A block made before the recorded history, and the category its fate in
 * the history gives it. */
typedef struct pre_fate {
    uint64_t addr;
    uint8_t category; /* md_category */
} pre_fate;

struct md_analysis {
    const md_snapshot *s;
    const md_replay *r;
    const md_event *ev;
    size_t n;
    const md_event *const *order; /* where set, event i is *order[i] (several
                                     devices' events in time order), not ev[i] */
    md_step *steps;
    size_t nsteps, stepcap;
    long *zero_bwd; /* per step: the first backward event after its optimizer step (in its
                       zero_grad phase: a pass run ahead of it; or later), n if none; -2
                       until first needed (zero_phase_lived) */
    int source;
    int step_device; /* whose annotations gave the steps; -1 if none did */
    int history;     /* the device has a history (md_snapshot_has_history) */
    md_iterations iters; /* the steps per training iteration */
    md_indicators ind;
    char optimizer[32];
    md_stack_cache cache;
    md_live_set lives[MD_LIVE_CACHE]; /* filled lazily; mutable behind const */
    int next_live;
    md_live_set held; /* fetched before the blocks from before the history were
                         named (repeats_at_last_step), not yet categorized: a
                         live set prefetch_lives then need not replay again */
    uint8_t *set_cat; /* by allocation index: its block's category + 1 in a live
                         set, 0 not yet (categorize_set) */
    long pre_oom; /* the last out-of-memory error before the first step's
                     forward (an attempt tried again smaller), or -1 */
    long start;   /* the state training starts from: before the first step's
                     forward, or before the first attempt where one failed */
    long *unnamed; /* parameters no frame names (unnamed_params), by allocation
                      index, sorted */
    size_t nunnamed;
    uint64_t *unnamed_addr; /* those made before the recorded history, by address */
    size_t nunnamed_addr;
    uint64_t *state_addr;   /* optimizer state made before the recorded history
                               (prehistory_state), by address, sorted */
    size_t nstate_addr;
    pre_fate *pre_fates; /* other blocks made before the recorded history
                            whose fate in it tells what they were
                            (prehistory_fates), by address, sorted */
    size_t npre_fates;
    long peak_index; /* the moment reported as the peak (peak_moment) */
};

/* A moment given by an annotation: the state before time t, or up to and
 * including it (incl); t < 0 where a boundary came from frames. */
typedef struct moment {
    int64_t t;
    int incl;
} moment;

typedef struct step_end {
    long opt_s, opt_e, zero_e; /* state indices */
    int number;
    int partial; /* not a full step: began before the recorded history, or
                    an out-of-memory error ended it (number -1) */
    moment m_opt_s, m_opt_e, m_zero_e; /* what the three indices stand for */
} step_end;

#define NO_MOMENT ((moment){-1, 0})

static inline const md_event *ev_at(const md_analysis *a, long i)
{
    return a->order ? a->order[i] : &a->ev[i];
}

/* Last event index whose time is < t (strict) or <= t; -1 if none. */
static long index_before(const md_analysis *a, int64_t t, int inclusive)
{
    size_t lo = 0, hi = a->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int64_t x = ev_at(a, (long)mid)->time_us;
        if (x < t || (inclusive && x == t))
            lo = mid + 1;
        else
            hi = mid;
    }
    return (long)lo - 1;
}

static int match_prefix(const char *s, const char *p)
{
    return !strncmp(s, p, strlen(p));
}

/* Whether event i is backward work: an autograd frame, or, where stacks
 * were recorded, an allocation with none (stacks='python': the autograd
 * engine's thread has no Python frames). */
static inline int backward_event(const md_analysis *a, long i)
{
    const md_event *e = ev_at(a, i);
    if (e->stack == 0)
        return (a->s->features & MD_HAS_FRAMES) && e->action == MD_ACT_ALLOC;
    return (md_stack_tags((md_stack_cache *)&a->cache, a->s, e->stack) & MD_TAG_BACKWARD) != 0;
}

/* Whether events (lo, hi] hold a forward and, after it, a backward: a
 * training iteration whose optimizer step did not run. */
static int forward_then_backward(md_analysis *a, long lo, long hi)
{
    int fwd = 0;
    for (long i = lo + 1; i <= hi; i++) {
        if (!fwd)
            fwd = (md_stack_tags(&a->cache, a->s, ev_at(a, i)->stack) & MD_TAG_FORWARD) != 0;
        else if (backward_event(a, i))
            return 1;
    }
    return 0;
}

/* Whether a forward or a backward event lies among events (lo, hi]. */
static int forward_or_backward(md_analysis *a, long lo, long hi)
{
    for (long i = lo + 1; i <= hi; i++)
        if ((md_stack_tags(&a->cache, a->s, ev_at(a, i)->stack) & MD_TAG_FORWARD) ||
            backward_event(a, i))
            return 1;
    return 0;
}

/* Whether an allocation failed (out of memory) among events (lo, hi]. */
static int oom_between(md_analysis *a, long lo, long hi)
{
    for (long i = lo + 1; i <= hi; i++)
        if (ev_at(a, i)->action == MD_ACT_OOM)
            return 1;
    return 0;
}

/* Whether the first forward or backward event after event z is a
 * backward: a zero_grad between a forward and its backward (or a gradient
 * penalty's autograd.grad before it), which closes no skipped step. */
static int backward_follows(md_analysis *a, long z)
{
    for (long i = z + 1; i < (long)a->n; i++) {
        if (md_stack_tags(&a->cache, a->s, ev_at(a, i)->stack) & MD_TAG_FORWARD)
            return 0;
        if (backward_event(a, i))
            return 1;
    }
    return 0;
}

/* Whether iteration (lo, hi], which ran no optimizer step, ended a step:
 * GradScaler skipped its optimizer step (the scaler's frames are there,
 * where frames were recorded), or an out-of-memory error failed it. Else
 * the iteration goes on past the zero_grad (sharpness-aware minimization
 * clears its first pass's gradients before a second forward/backward). */
static int skipped_or_failed(md_analysis *a, long lo, long hi)
{
    if (!(a->s->features & MD_HAS_FRAMES) || oom_between(a, lo, hi))
        return 1;
    for (long i = lo + 1; i <= hi; i++)
        if (md_stack_tags(&a->cache, a->s, ev_at(a, i)->stack) & MD_TAG_SCALER)
            return 1;
    return 0;
}

/* Whether events (lo, hi] hold a backward and, after it, GradScaler's
 * work but no optimizer step: an iteration whose step the scaler skipped,
 * ended where the next iteration's zero_grad comes (PyTorch Lightning's
 * 16-mixed runs its closure, forward, zero_grad and backward, outside the
 * optimizer step, so a backward follows every zero_grad). */
static int backward_then_scaler(md_analysis *a, long lo, long hi)
{
    int bwd = 0;
    for (long i = lo + 1; i <= hi; i++) {
        if (backward_event(a, i))
            bwd = 1;
        else if (bwd && (md_stack_tags(&a->cache, a->s, ev_at(a, i)->stack) & MD_TAG_SCALER))
            return 1;
    }
    return 0;
}

/* Optimizer/zero_grad intervals from annotations, for one device. With a
 * truncated history (ring buffer), steps whose previous boundary lies
 * before the first recorded event are marked partial. A zero_grad that
 * closes no optimizer step but follows a forward and a backward closes a
 * step whose optimizer step was skipped (GradScaler skips it when the
 * gradients overflow, typically at the first steps of fp16 training): it
 * counts, with an empty optimizer phase; unless a backward comes next (the
 * zero_grad then sits inside an iteration, after a forward and an
 * autograd.grad, as in a gradient penalty) or, with frames, no GradScaler
 * ran (see skipped_or_failed). */
static size_t ends_from_annotations(md_analysis *a, int device, step_end **out, size_t *cap)
{
    const md_snapshot *s = a->s;
    size_t n = 0;
    int ord = 0;
    int64_t open_opt = -1, open_zero = -1, prev_end = -1;
    int64_t t0 = a->n ? ev_at(a, 0)->time_us : -1;
    for (size_t i = 0; i < s->nanns; i++) {
        const md_annotation *an = &s->anns[i];
        if (an->device != device || an->time_us < 0)
            continue;
        const char *name = md_strtab_get(&s->strs, an->name);
        int is_opt = match_prefix(name, "Optimizer.step#");
        int is_zero = match_prefix(name, "Optimizer.zero_grad#");
        if (is_opt && !a->optimizer[0]) {
            const char *cls = name + strlen("Optimizer.step#");
            size_t k = strcspn(cls, ".");
            snprintf(a->optimizer, sizeof a->optimizer, "%.*s", (int)k, cls);
        }
        if (is_opt && an->stage == 1) {
            open_opt = an->time_us;
        } else if (is_opt && an->stage == 2 && open_opt >= 0) {
            if (md_grow((void **)out, cap, n + 1, sizeof **out))
                return n;
            long s0 = index_before(a, open_opt, 0);
            long e0 = index_before(a, an->time_us, 1);
            int partial = t0 >= 0 && (open_opt < t0 || (prev_end >= 0 && prev_end < t0));
            moment ms = {open_opt, 0}, me = {an->time_us, 1};
            (*out)[n++] = (step_end){s0, e0, e0, ord++, partial, ms, me, me};
            open_opt = -1;
            prev_end = an->time_us;
        } else if (is_zero && an->stage == 1) {
            open_zero = an->time_us;
        } else if (is_zero && an->stage == 2 && open_zero >= 0 && open_opt >= 0) {
            open_zero = -1; /* inside optimizer.step: a closure's zero_grad closes nothing */
        } else if (is_zero && an->stage == 2 && open_zero >= 0) {
            long z = index_before(a, an->time_us, 1);
            long zs = index_before(a, open_zero, 0);
            /* a zero_grad after step k and before step k+1 closes step k;
             * another right after it (each optimizer's, after optimizers
             * that stepped back to back) closes it later */
            if (n > 0 && z >= (*out)[n - 1].opt_e &&
                ((*out)[n - 1].zero_e == (*out)[n - 1].opt_e ||
                 !forward_or_backward(a, (*out)[n - 1].zero_e, zs))) {
                (*out)[n - 1].zero_e = z;
                (*out)[n - 1].m_zero_e = (moment){an->time_us, 1};
                prev_end = an->time_us;
            } else if ((forward_then_backward(a, n ? (*out)[n - 1].zero_e : -1, zs) &&
                        !backward_follows(a, z) &&
                        skipped_or_failed(a, n ? (*out)[n - 1].zero_e : -1, zs)) ||
                       backward_then_scaler(a, n ? (*out)[n - 1].zero_e : -1, zs)) {
                if (md_grow((void **)out, cap, n + 1, sizeof **out))
                    return n;
                /* an attempt that ran out of memory (caught, the batch
                 * halved, tried again) is no step; its end bounds the next */
                int failed = oom_between(a, n ? (*out)[n - 1].zero_e : -1, zs);
                int partial = failed || (t0 >= 0 && (prev_end >= 0 ? prev_end < t0 : open_zero < t0));
                moment ms = {open_zero, 0}, me = {an->time_us, 1};
                (*out)[n++] = (step_end){zs, zs, z, failed ? -1 : ord++, partial, ms, ms, me};
                prev_end = an->time_us;
            }
            open_zero = -1;
        }
    }
    return n;
}

/* The device whose annotations mark this device's steps. torch tags an
 * annotation with the device current when it ran, but optimizer.step and
 * zero_grad are calls of the process and drive every device it uses (one
 * process, one clock): a device with no step annotations of its own
 * (DataParallel's replicas, a model split over devices) takes those of the
 * lowest device that has them. -1: no device has any. */
static int annotation_device(const md_snapshot *s, int device)
{
    int best = -1;
    for (size_t i = 0; i < s->nanns; i++) {
        const char *name = md_strtab_get(&s->strs, s->anns[i].name);
        if (!match_prefix(name, "Optimizer.step#") && !match_prefix(name, "Optimizer.zero_grad#"))
            continue;
        if (s->anns[i].device == device)
            return device;
        if (best < 0 || s->anns[i].device < best)
            best = s->anns[i].device;
    }
    return best;
}

/* Steps from optimizer annotations that no zero_grad annotation closed:
 * the gradients were cleared through the model (module.zero_grad, as
 * Hugging Face's Trainer does), which torch does not annotate. Such a step
 * ends with the run of zero_grad frames' events after its optimizer step,
 * if one comes before the next forward. */
static void zero_grad_from_frames(md_analysis *a, step_end *e, size_t n)
{
    for (size_t k = 0; k < n; k++) {
        if (e[k].zero_e != e[k].opt_e)
            continue;
        long hi = k + 1 < n ? e[k + 1].opt_s : (long)a->n - 1, last = -1;
        for (long i = e[k].opt_e + 1; i <= hi; i++) {
            unsigned t = md_stack_tags(&a->cache, a->s, ev_at(a, i)->stack);
            if (t & MD_TAG_ZERO_GRAD)
                last = i;
            else if (last >= 0 || (t & MD_TAG_FORWARD))
                break;
        }
        if (last >= 0) {
            e[k].zero_e = last;
            e[k].m_zero_e = NO_MOMENT;
        }
    }
}

/* Optimizer/zero_grad runs from frames when there are no annotations (torch
 * before 2.5). */
static size_t ends_from_frames(md_analysis *a, step_end **out, size_t *cap)
{
    size_t n = 0;
    int in_opt = 0, in_zero = 0, have_opt = 0, closure = 0, bwd = 0;
    for (size_t i = 0; i < a->n; i++) {
        unsigned t = md_stack_tags(&a->cache, a->s, ev_at(a, i)->stack);
        /* a forward, backward or zero_grad with optimizer.step on the stack
         * runs in a closure (PyTorch Lightning): the step's own work, not
         * its update; the closure's zero_grad closes nothing. Then only
         * optimizer work after a backward is an update (the closure's own
         * bookkeeping between forward and backward has the step's frames) */
        if ((t & MD_TAG_OPTIM) && (t & (MD_TAG_FORWARD | MD_TAG_BACKWARD | MD_TAG_ZERO_GRAD))) {
            closure = 1;
            if (t & MD_TAG_ZERO_GRAD)
                continue;
            t &= ~(unsigned)MD_TAG_OPTIM;
        }
        if (backward_event(a, (long)i))
            bwd = 1;
        if ((t & MD_TAG_OPTIM) && closure && !in_opt && !bwd)
            continue;
        if (t & MD_TAG_OPTIM) {
            if (!have_opt) {
                const char *o = md_optimizer_from_stack(a->s, ev_at(a, i)->stack);
                if (o)
                    snprintf(a->optimizer, sizeof a->optimizer, "%s", o);
            }
            have_opt = 1;
            if (!in_opt) {
                if (md_grow((void **)out, cap, n + 1, sizeof **out))
                    return n;
                (*out)[n] = (step_end){(long)i - 1, (long)i, (long)i, (int)n, 0,
                                        NO_MOMENT, NO_MOMENT, NO_MOMENT};
                n++;
                in_opt = 1;
                bwd = 0;
            } else {
                (*out)[n - 1].opt_e = (*out)[n - 1].zero_e = (long)i;
            }
            in_zero = 0;
        } else if (t & MD_TAG_ZERO_GRAD) {
            if (!in_zero && (n == 0 || !in_opt)) { /* zero_grad with no step seen */
                if (md_grow((void **)out, cap, n + 1, sizeof **out))
                    return n;
                (*out)[n] = (step_end){(long)i - 1, (long)i - 1, (long)i, (int)n, 0,
                                        NO_MOMENT, NO_MOMENT, NO_MOMENT};
                n++;
            }
            (*out)[n - 1].zero_e = (long)i;
            in_zero = 1;
            in_opt = 0;
        } else if (t & (MD_TAG_FORWARD | MD_TAG_BACKWARD)) {
            in_opt = in_zero = 0;
        }
    }
    return n;
}

/* First event in (lo, hi] with any of the tags; hi+1 if none. */
static long first_tagged(md_analysis *a, long lo, long hi, unsigned tags, int frameless_ok)
{
    for (long i = lo + 1; i <= hi; i++) {
        uint32_t st = ev_at(a, i)->stack;
        if (md_stack_tags(&a->cache, a->s, st) & tags)
            return i;
        if (frameless_ok && st == 0 && ev_at(a, i)->action == MD_ACT_ALLOC)
            return i;
    }
    return hi + 1;
}

/* A step whose forward and backward run inside optimizer.step, in the
 * closure PyTorch Lightning passes it (automatic optimization): the
 * forward is the first module call inside the step, the backward its
 * first autograd event after that, and the optimizer's own phase begins
 * after the backward's last event. 1 with *fwd, *bwd and *opt_s set. */
static int closure_step(md_analysis *a, const step_end *e, int frames, long *fwd, long *bwd,
                        long *opt_s)
{
    long f = first_tagged(a, e->opt_s, e->opt_e, MD_TAG_FORWARD, 0);
    long b = f <= e->opt_e ? first_tagged(a, f, e->opt_e, MD_TAG_BACKWARD, frames) : e->opt_e + 1;
    if (b > e->opt_e)
        return 0;
    long last = b;
    for (long i = b + 1; i <= e->opt_e; i++) {
        uint32_t st = ev_at(a, i)->stack;
        if ((md_stack_tags(&a->cache, a->s, st) & MD_TAG_BACKWARD) || (frames && st == 0))
            last = i;
    }
    *fwd = f;
    *bwd = b;
    *opt_s = last;
    return 1;
}

/* Where a step's backward starts when its first backward work is a
 * torch.autograd.grad call (a gradient penalty, MAML's inner steps, a
 * Hessian-vector product): at the first loss.backward() (or
 * torch.autograd.backward) after it, where the capture and the seed
 * script sample "after forward"; the autograd.grad calls before it are
 * the forward's work. Without such a call (gradients assigned by hand)
 * the backward starts at the autograd.grad. */
static long past_grad_calls(md_analysis *a, long bwd, long hi)
{
    if (bwd > hi || !(md_stack_tags(&a->cache, a->s, ev_at(a, bwd)->stack) & MD_TAG_GRAD_CALL))
        return bwd;
    long b = first_tagged(a, bwd, hi, MD_TAG_BACKWARD_CALL, 0);
    return b <= hi ? b : bwd;
}

#define TEMPLATE_ALLOCS 8

#define FIRST_TIME_ALLOCS 2 /* a first step's own: cuBLAS's workspace, a lazy init */

/* Whether the allocations from event i on (before hi) are made at the
 * stacks of the m allocations at tmpl, in order, the first at i, with at
 * most FIRST_TIME_ALLOCS others among them. */
static int allocs_recur(md_analysis *a, long i, long hi, const long *tmpl, size_t m)
{
    size_t j = 0, extra = 0;
    for (; i < hi && j < m && extra <= FIRST_TIME_ALLOCS; i++) {
        if (ev_at(a, i)->action != MD_ACT_ALLOC)
            continue;
        if (ev_at(a, i)->stack == ev_at(a, tmpl[j])->stack)
            j++;
        else if (j == 0)
            return 0;
        else
            extra++;
    }
    return j == m;
}

/* The first step's forward when no module call marks it (a model of raw
 * tensors, only the script's own lines): every step runs one loop body,
 * so it starts where the next step's first allocations (next_lo, next_bwd)
 * recur before this step's backward (bwd); of several places, the one
 * whose forward is nearest the next's in allocations (a forward's layers
 * repeat too). lo + 1 where they recur nowhere. */
static long recurring_start(md_analysis *a, long lo, long bwd, long next_lo, long next_bwd)
{
    long tmpl[TEMPLATE_ALLOCS];
    size_t m = 0, want = 0, after = 0, best_d = SIZE_MAX;
    for (long i = next_lo + 1; i < next_bwd; i++)
        if (ev_at(a, i)->action == MD_ACT_ALLOC && want++ < TEMPLATE_ALLOCS)
            tmpl[m++] = i;
    long best = lo + 1;
    for (long i = bwd - 1; m >= 2 && i > lo; i--) {
        if (ev_at(a, i)->action != MD_ACT_ALLOC)
            continue;
        after++;
        if (!allocs_recur(a, i, bwd, tmpl, m))
            continue;
        size_t d = after > want ? after - want : want - after;
        if (d < best_d)
            best_d = d, best = i;
    }
    return best;
}

/* Where step k's peak search starts (after lo), and the step end it came from. */
typedef struct step_src {
    long lo;
    size_t end;
} step_src;

/* The phase points of each full step, as indices into a->ev, into
 * a->steps, with each one's step_src. */
static int phase_steps(md_analysis *a, const step_end *e, size_t n, step_src **src_out)
{
    long lo = -1;
    step_src *los = NULL;
    size_t locap = 0;
    int frames = (a->s->features & MD_HAS_FRAMES) != 0;
    for (size_t k = 0; k < n; k++) {
        md_step st = {0};
        if (e[k].partial) {
            lo = e[k].zero_e;
            continue;
        }
        st.number = e[k].number;
        long opt_s = e[k].opt_s;
        long fwd = first_tagged(a, lo, opt_s, MD_TAG_FORWARD, 0), bwd;
        if (fwd > opt_s && closure_step(a, &e[k], frames, &fwd, &bwd, &opt_s)) {
            st.fwd_start = fwd - 1;
            goto phases;
        }
        int unmarked = fwd > opt_s;
        if (unmarked) /* no forward seen: the step starts at lo */
            fwd = lo + 1;
        else if (first_tagged(a, lo, fwd, MD_TAG_BACKWARD_CALL, 0) < fwd)
            fwd = lo + 1; /* a backward() before any forward: the step's forward ran before
                             the zero_grad that began it (PyTorch Lightning's 16-mixed) */
        st.fwd_start = fwd - 1;
        bwd = past_grad_calls(a, first_tagged(a, st.fwd_start, opt_s, MD_TAG_BACKWARD, frames),
                              opt_s);
        if (fwd == lo + 1 && bwd > e[k].opt_s && a->n && lo + 1 <= e[k].opt_s &&
            !(md_stack_tags(&a->cache, a->s, ev_at(a, lo + 1)->stack) & MD_TAG_FORWARD)) {
            /* neither forward nor backward: e.g. zero_grad before the first
             * step. Not a step; its end still bounds the next one. */
            lo = e[k].zero_e;
            continue;
        }
        if (unmarked && lo < 0 && !a->nsteps && bwd <= opt_s && k + 1 < n && !e[k + 1].partial) {
            long next_bwd = first_tagged(a, e[k].zero_e, e[k + 1].opt_s, MD_TAG_BACKWARD, frames);
            st.fwd_start = recurring_start(a, lo, bwd, e[k].zero_e, next_bwd) - 1;
        }
phases:
        st.after_forward = bwd - 1;
        st.after_backward = opt_s;
        st.after_optim = e[k].opt_e;
        st.after_zero = e[k].zero_e;
        if (md_grow((void **)&a->steps, &a->stepcap, a->nsteps + 1, sizeof st) ||
            md_grow((void **)&los, &locap, a->nsteps + 1, sizeof *los)) {
            free(los);
            return -1;
        }
        los[a->nsteps] = (step_src){lo, k};
        a->steps[a->nsteps++] = st;
        lo = st.after_zero;
    }
    *src_out = los;
    return 0;
}

/* Each step's highest allocated, from the state it starts in (a step may
 * allocate nothing on this device) to its end. */
static void step_peaks(md_analysis *a, const step_src *src)
{
    const md_tpoint *pts = md_replay_points(a->r);
    for (size_t k = 0; k < a->nsteps; k++) {
        md_step *st = &a->steps[k];
        st->peak = md_replay_at(a->r, src[k].lo).allocated;
        st->peak_index = src[k].lo;
        for (long i = src[k].lo + 1; i <= st->after_zero && i < (long)a->n; i++) {
            uint64_t v = pts[i].allocated;
            if (v > st->peak) {
                st->peak = v;
                st->peak_index = i;
            }
        }
    }
}

/* The events of every device of the snapshot in time order (one process,
 * one clock), and own_at[i]: the last of this device's events at or
 * before merged event i (-1: none yet), so that a phase point found in
 * the process's events is the same moment on this device. */
typedef struct merged {
    const md_event **ev; /* pointers into the devices' own arrays: 8 bytes an event */
    int32_t *own_at; /* (cursors() merges no device of 2^31 events or more) */
    size_t n;
} merged;

/* One process drives a few GPUs; a snapshot that traces more devices is
 * not one to merge (each device analysis merges again: the cost grows with
 * their square). */
#define MERGE_MAX_DEVICES 16

typedef struct cursor {
    const md_event *ev;
    size_t n, at;
    int device;
} cursor;

/* The devices with events, as cursors; 0 when fewer than two, more than
 * MERGE_MAX_DEVICES, or events without times. */
static int cursors(const md_snapshot *s, cursor *c, size_t *total)
{
    int used = 0;
    *total = 0;
    for (int d = 0; d < md_snapshot_ndevices(s); d++) {
        size_t n;
        const md_event *ev = md_snapshot_events(s, d, &n);
        if (!n)
            continue;
        if (used == MERGE_MAX_DEVICES || n > INT32_MAX)
            return 0;
        for (size_t i = 0; i < n; i++)
            if (ev[i].time_us < 0)
                return 0;
        c[used++] = (cursor){ev, n, 0, d};
        *total += n;
    }
    return used >= 2 ? used : 0;
}

/* 1 when built; 0 when the snapshot is not one to merge (see cursors);
 * -1 out of memory. */
static int merge_devices(const md_snapshot *s, int own, merged *m)
{
    cursor c[MERGE_MAX_DEVICES];
    size_t total;
    int nc = cursors(s, c, &total);
    if (!nc)
        return 0;
    m->ev = malloc(total * sizeof *m->ev);
    m->own_at = malloc(total * sizeof *m->own_at);
    if (!m->ev || !m->own_at) {
        free(m->ev);
        free(m->own_at);
        return -1;
    }
    int32_t last = -1;
    for (m->n = 0; m->n < total; m->n++) { /* the earliest head each time */
        int best = -1;
        for (int k = 0; k < nc; k++)
            if (c[k].at < c[k].n &&
                (best < 0 || c[k].ev[c[k].at].time_us < c[best].ev[c[best].at].time_us))
                best = k;
        m->ev[m->n] = &c[best].ev[c[best].at++];
        if (c[best].device == own)
            last++;
        m->own_at[m->n] = last;
    }
    return 1;
}

/* A merged phase point as this device's: an annotation's own time where
 * the boundary is one (ann_i: the index it gave), else own_at. */
static long at_moment(const md_analysis *a, const merged *m, long i, moment mo, long ann_i)
{
    if (mo.t >= 0 && i == ann_i)
        return index_before(a, mo.t, mo.incl);
    return i < 0 ? -1 : m->own_at[i];
}

/* Steps and phases of one device of a snapshot that traces several: found
 * in all its devices' events (the phases are the process's moments: the
 * forward starts on the first GPU, the backward on the last; memdiag's
 * capture samples every device at once), with the optimizer annotations
 * of the device that has them (torch tags them with the current device),
 * then placed on this device. A device whose history misses its start (a
 * ring buffer that overflowed: allocations before its first event) keeps
 * only the steps that begin after that event. */
static int process_steps(md_analysis *a, step_end **ends, size_t *cap, step_src **src)
{
    merged m = {0};
    int rc = merge_devices(a->s, md_replay_device(a->r), &m);
    if (rc <= 0)
        return rc;
    md_analysis proc = *a; /* shares the tag caches */
    proc.order = m.ev;
    proc.n = m.n;
    size_t n = ends_from_annotations(&proc, a->step_device, ends, cap);
    memcpy(a->optimizer, proc.optimizer, sizeof a->optimizer);
    if (n)
        zero_grad_from_frames(&proc, *ends, n);
    rc = n ? phase_steps(&proc, *ends, n, src) : 0;
    a->steps = proc.steps; /* freed with a, whatever happened */
    a->nsteps = proc.nsteps;
    a->stepcap = proc.stepcap;
    int truncated = md_replay_initial(a->r).allocated > 0;
    size_t kept = 0;
    for (size_t k = 0; !rc && k < a->nsteps; k++) {
        md_step st = a->steps[k];
        const step_end *e = &(*ends)[(*src)[k].end];
        long lo = at_moment(a, &m, (*src)[k].lo, NO_MOMENT, -1);
        /* the step began before this device's history but after the
         * process's: the device's part of it is missing. A step the whole
         * process history begins with (a window cut at a step) is kept. */
        if (truncated && lo < 0 && st.fwd_start >= 0)
            continue;
        st.fwd_start = at_moment(a, &m, st.fwd_start, NO_MOMENT, -1);
        st.after_forward = at_moment(a, &m, st.after_forward, NO_MOMENT, -1);
        st.after_backward = at_moment(a, &m, st.after_backward, e->m_opt_s, e->opt_s);
        st.after_optim = at_moment(a, &m, st.after_optim, e->m_opt_e, e->opt_e);
        st.after_zero = at_moment(a, &m, st.after_zero, e->m_zero_e, e->zero_e);
        (*src)[kept] = (step_src){lo, (*src)[k].end};
        a->steps[kept++] = st;
    }
    a->nsteps = kept;
    free(m.ev);
    free(m.own_at);
    return rc ? -1 : (int)kept;
}

static double mib_at(const md_analysis *a, long idx)
{
    return (double)md_replay_at(a->r, idx).allocated / MIB;
}

/* The run ended in an out-of-memory error inside its last step's
 * optimizer step (Adam's first step making its state): that step never
 * finished, and, as a capture (which samples no end of it), the
 * indicators leave it out. */
static int last_step_failed(const md_analysis *a)
{
    const md_step *s = &a->steps[a->nsteps - 1];
    for (long i = s->after_backward + 1; i >= 0 && i <= s->after_optim; i++)
        if (ev_at(a, i)->action == MD_ACT_OOM)
            return 1;
    return 0;
}

static void indicators(md_analysis *a)
{
    md_indicators *in = &a->ind;
    memset(in, 0, sizeof *in);
    in->maximum_peak_allocated_mib = (double)md_replay_peak_allocated(a->r) / MIB;
    if (a->nsteps == 0)
        return;
    const md_step *s = a->steps;
    int failed = last_step_failed(a);
    size_t n = a->nsteps - (size_t)failed;
    /* where several optimizers step in turn, a training step is an
     * iteration of them all: its end is the last one's (one optimizer: the
     * iterations are the steps) */
    const md_step *it = a->iters.steps;
    size_t ni = md_closed_iterations(it, a->iters.n);
    if (failed && ni && it[ni - 1].after_optim >= s[a->nsteps - 1].after_optim)
        ni--;
    if (n == 0 || ni == 0)
        return;
    in->valid = 1;
    in->first_step_recorded = s[0].number == 0;
    long start = it[0].fwd_start == s[0].fwd_start ? a->start : it[0].fwd_start;
    in->first_step_persistent_change_mib = mib_at(a, it[0].after_zero) - mib_at(a, start);
    in->between_step_growth_mib = mib_at(a, it[ni - 1].after_zero) - mib_at(a, it[0].after_zero);
    double best = -1e300;
    for (size_t k = 0; k < n; k++) {
        long base = k == 0 ? a->start : s[k - 1].after_zero;
        double inc = mib_at(a, s[k].after_forward) - mib_at(a, base);
        if (inc > best)
            best = inc;
    }
    in->largest_forward_increase_mib = best;
}

static int cmp_long(const void *x, const void *y)
{
    long a = *(const long *)x, b = *(const long *)y;
    return a < b ? -1 : a > b;
}

static md_live_set *take_slot(md_analysis *a)
{
    md_live_set *ls = &a->lives[a->next_live];
    a->next_live = (a->next_live + 1) % MD_LIVE_CACHE;
    free(ls->live);
    memset(ls, 0, sizeof *ls);
    return ls;
}

/* The category of each block of a live set. A block recorded in the trace
 * is the same block in every set it is live in (its allocation's index):
 * categorized once (the sets at the peak, the end and the last step share
 * most of theirs: 21 775 calls for big_gamma's three). */
static void categorize_set(md_analysis *a, md_live_set *ls)
{
    if (!a->set_cat && a->n)
        a->set_cat = calloc(a->n, 1); /* none: each is categorized each time */
    /* without a history, parameters or optimizer state found by address,
     * a block made before recording has its stack's category
     * (md_categorize): asked once a run of blocks with one stack (a
     * state-only snapshot's 57 704 live blocks: 3.7 M instructions) */
    int by_stack = !a->history && !a->nunnamed_addr && !a->nstate_addr;
    uint32_t last_stack = UINT32_MAX;
    uint8_t last_cat = 0;
    for (size_t i = 0; i < ls->n; i++) {
        md_live *l = &ls->live[i];
        long k = l->alloc_index;
        if (k < 0 && by_stack) {
            if (l->stack != last_stack)
                last_stack = l->stack, last_cat = (uint8_t)md_categorize(a, l);
            l->category = last_cat;
            continue;
        }
        uint8_t *memo = a->set_cat && k >= 0 && (size_t)k < a->n ? &a->set_cat[k] : NULL;
        if (!memo || !*memo) {
            l->category = (uint8_t)md_categorize(a, l);
            if (memo)
                *memo = (uint8_t)(l->category + 1);
        } else {
            l->category = (uint8_t)(*memo - 1);
        }
    }
    ls->valid = 1;
}

/* The moment reported as the peak: the first at which allocated memory
 * reaches its maximum; where the history began inside a step (a ring of
 * the last events, a recording started mid-run) and that moment is in the
 * step's end, the first in a whole step that reaches it too, if one does:
 * what is live there was all made in sight (frames, phases), where half
 * of that first step was made before the history began. */
static long peak_moment(const md_analysis *a)
{
    long p = md_replay_peak_index(a->r);
    if (p < 0 || !a->nsteps || p >= a->steps[0].fwd_start || !md_replay_reconstructed(a->r))
        return p;
    const md_tpoint *pts = md_replay_points(a->r);
    for (long i = a->steps[0].fwd_start; i < (long)a->n; i++)
        if (pts[i].allocated == pts[p].allocated)
            return i;
    return p;
}

long md_analysis_peak_index(const md_analysis *a)
{
    return a->peak_index;
}

/* The moments the caller may fetch ahead: those prefetch_lives wants that
 * are known once the trace is replayed, other than its end (the final
 * state, copied). Where the history began inside a step the peak reported
 * may move (peak_moment): the analysis then fetches that one itself. */
size_t md_lives_ahead_indices(const md_replay *r, long idx[MD_AHEAD_MAX])
{
    long n = (long)md_replay_nevents(r), at[2] = {md_replay_peak_index(r),
                                                   md_replay_peak_reserved_index(r)};
    size_t k = 0;
    qsort(at, 2, sizeof *at, cmp_long);
    for (size_t i = 0; i < 2; i++)
        if (at[i] >= 0 && at[i] < n - 1 && (!k || at[i] != idx[k - 1]))
            idx[k++] = at[i];
    return k;
}

/* Where ahead fetched the live set at index, its slot, else -1. */
static int ahead_slot(const md_lives_ahead *ahead, long index)
{
    for (size_t j = 0; ahead && !ahead->failed && j < ahead->k; j++)
        if (ahead->idx[j] == index && ahead->live[j])
            return (int)j;
    return -1;
}

/* A live set fetched for index into a slot, categorized. */
static void keep_live(md_analysis *a, long index, md_live *live, size_t n, const md_cache_state *cs)
{
    md_live_set *ls = take_slot(a);
    ls->index = index;
    ls->live = live, ls->n = n, ls->cache = *cs;
    categorize_set(a, ls);
}

/* One replay for the points every report needs: the peak, the end of the
 * last step, the end of the trace, and where reserved memory peaked; less
 * those fetched already (the held set, and ahead's). */
static void prefetch_lives(md_analysis *a, md_lives_ahead *ahead)
{
    long idx[4];
    size_t k = 0;
    idx[k++] = a->peak_index;
    idx[k++] = (long)a->n - 1;
    if (a->nsteps)
        idx[k++] = a->steps[a->nsteps - 1].after_zero;
    long at_pres = md_replay_peak_reserved_index(a->r);
    if (at_pres >= 0)
        idx[k++] = at_pres;
    qsort(idx, k, sizeof *idx, cmp_long);
    size_t u = 0;
    for (size_t i = 0; i < k; i++)
        if ((!u || idx[i] != idx[u - 1]) && (!a->held.valid || idx[i] != a->held.index))
            idx[u++] = idx[i];
    if (a->held.valid) { /* fetched already */
        md_live_set *ls = take_slot(a);
        *ls = a->held;
        ls->valid = 0;
        memset(&a->held, 0, sizeof a->held);
        categorize_set(a, ls);
    }
    if (ahead)
        ahead->wait(ahead);
    long want[4];
    int from[4];
    size_t nw = 0;
    for (size_t i = 0; i < u; i++)
        if ((from[i] = ahead_slot(ahead, idx[i])) < 0)
            want[nw++] = idx[i];
    md_live *live[4];
    size_t nlive[4];
    md_cache_state cs[4];
    md_err e;
    if (nw && md_replay_probe(a->r, want, nw, live, nlive, cs, &e))
        return; /* the lazy path will compute them one by one */
    for (size_t i = 0, b = 0; i < u; i++) {
        int j = from[i];
        if (j >= 0) {
            keep_live(a, idx[i], ahead->live[j], ahead->n[j], &ahead->cs[j]);
            ahead->live[j] = NULL; /* the analysis' now */
        } else {
            keep_live(a, idx[i], live[b], nlive[b], &cs[b]);
            b++;
        }
    }
}

const md_live_set *md_analysis_live(const md_analysis *ca, long index)
{
    md_analysis *a = (md_analysis *)ca;
    for (int i = 0; i < MD_LIVE_CACHE; i++)
        if (a->lives[i].valid && a->lives[i].index == index)
            return &a->lives[i];
    md_live *live;
    size_t n;
    md_cache_state cs;
    md_err e;
    if (md_replay_probe(a->r, &index, 1, &live, &n, &cs, &e))
        return NULL;
    md_live_set *ls = take_slot(a);
    ls->index = index;
    ls->live = live;
    ls->n = n;
    ls->cache = cs;
    categorize_set(a, ls);
    return ls;
}

/* ---- parameters no frame names ---------------------------------------------------- */

typedef struct sized {
    uint64_t size;
    long index;    /* its allocation event; -1: made before the recorded history */
    uint64_t addr; /* where index is -1 */
} sized;

static int by_size(const void *x, const void *y)
{
    const sized *a = x, *b = y;
    if (a->size != b->size)
        return a->size < b->size ? -1 : 1;
    if (a->index != b->index) /* then by address: blocks made before the history tie */
        return (a->index > b->index) - (a->index < b->index);
    return (a->addr > b->addr) - (a->addr < b->addr);
}

/* The allocations of [lo, hi] still live after `past`, each with its size,
 * sorted by size, those `keep` says yes to. */
static size_t kept_allocs(md_analysis *a, long lo, long hi, long past,
                          int (*keep)(md_analysis *, long), sized **out)
{
    size_t n = 0, cap = 0;
    *out = NULL;
    for (long i = lo < 0 ? 0 : lo; i <= hi && i < (long)a->n; i++) {
        long fr = a->ev[i].action == MD_ACT_ALLOC ? md_replay_free_index(a->r, i) : -2;
        if (fr == -2 || (fr >= 0 && fr <= past) || !keep(a, i))
            continue;
        if (md_grow((void **)out, &cap, n + 1, sizeof **out))
            return SIZE_MAX;
        (*out)[n++] = (sized){a->ev[i].size, i, 0};
    }
    if (n)
        qsort(*out, n, sizeof **out, by_size);
    return n;
}

static unsigned tags_of(md_analysis *a, long i)
{
    return md_stack_tags(&a->cache, a->s, a->ev[i].stack);
}
static int named_param(md_analysis *a, long i) { return (tags_of(a, i) & MD_TAG_MODEL_INIT) != 0; }
static int unnamed_candidate(md_analysis *a, long i)
{
    return !(tags_of(a, i) & (MD_TAG_MODEL_INIT | MD_TAG_WORKSPACE));
}
static int any_alloc(md_analysis *a, long i) { (void)a, (void)i; return 1; }
static int is_gradient(md_analysis *a, long i)
{
    md_live l = {.requested = a->ev[i].size, .alloc_index = i, .stack = a->ev[i].stack};
    return md_categorize(a, &l) == MD_CAT_GRADIENT;
}

static int push_sized(sized **v, size_t *n, size_t *cap, sized x)
{
    if (md_grow((void **)v, cap, *n + 1, sizeof **v))
        return -1;
    (*v)[(*n)++] = x;
    return 0;
}

/* Blocks made before the recorded history began (a recording started
 * after the model was built, a ring buffer that overflowed) and still live
 * after `past`: those frames name as parameters into named, the rest but
 * workspaces into cand; both sorted again. */
static int add_prehistory(md_analysis *a, long past, sized **cand, size_t *nc, sized **named,
                          size_t *np)
{
    md_live *live = NULL;
    size_t n = 0, capc = *nc, capn = *np;
    md_err e;
    if (!md_replay_initial(a->r).allocated)
        return 0;
    int rc = md_replay_live(a->r, past, &live, &n, &e) ? -1 : 0;
    for (size_t i = 0; !rc && i < n; i++) {
        if (live[i].alloc_index >= 0)
            continue;
        unsigned t = md_stack_tags(&a->cache, a->s, live[i].stack);
        sized x = {live[i].requested, -1, live[i].addr};
        if (t & MD_TAG_MODEL_INIT)
            rc = push_sized(named, np, &capn, x);
        else if (!(t & MD_TAG_WORKSPACE))
            rc = push_sized(cand, nc, &capc, x);
    }
    free(live);
    if (*nc)
        qsort(*cand, *nc, sizeof **cand, by_size);
    if (*np)
        qsort(*named, *np, sizeof **named, by_size);
    return rc;
}

static int cmp_addr(const void *x, const void *y)
{
    uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
    return (a > b) - (a < b);
}

/* Marks cand (taken as a parameter) in a->unnamed or a->unnamed_addr. */
static int take_param(md_analysis *a, const sized *cand, size_t *cap, size_t *cap_addr)
{
    if (cand->index >= 0) {
        if (md_grow((void **)&a->unnamed, cap, a->nunnamed + 1, sizeof *a->unnamed))
            return -1;
        a->unnamed[a->nunnamed++] = cand->index;
    } else {
        if (md_grow((void **)&a->unnamed_addr, cap_addr, a->nunnamed_addr + 1,
                    sizeof *a->unnamed_addr))
            return -1;
        a->unnamed_addr[a->nunnamed_addr++] = cand->addr;
    }
    return 0;
}

/* The optimizer's state made before the recorded history (the first step
 * made none: the recording began mid-training), told by sizes alone: what
 * is left, of each parameter size, among the blocks made before the
 * history once its parameters are taken. Said only where every parameter
 * size has it, k buffers per gradient, one k for all (SGD's momentum: 1,
 * Adam's moments: 2). A size may hold a few more blocks than its k per
 * gradient (a ring buffer's window also catches blocks of the step before
 * it, of a weight's size): those few stay unnamed. Where a size holds
 * fewer, or a k+1-th set (an EMA copy beside the state), nothing is said. */
typedef struct state_guess {
    const sized **rest; /* per size: its leftovers */
    size_t *n, *g;      /* per size: how many leftovers, how many gradients */
    size_t nsizes, cap_rest, cap_n, cap_g;
    int k;              /* 0: none yet; -1: sizes disagree */
} state_guess;

static int guess_state(state_guess *sg, const sized *rest, size_t n, size_t grads)
{
    if (!grads || sg->k < 0)
        return 0;
    size_t per = n / grads;
    int k = per == 1 || per == 2 ? (int)per : -1;
    for (size_t j = 0; j < n && k > 0; j++)
        k = rest[j].index < 0 ? k : -1; /* made within the history: not this */
    sg->k = sg->k && sg->k != k ? -1 : k;
    if (sg->k < 0)
        return 0;
    if (md_grow((void **)&sg->rest, &sg->cap_rest, sg->nsizes + 1, sizeof *sg->rest) ||
        md_grow((void **)&sg->n, &sg->cap_n, sg->nsizes + 1, sizeof *sg->n) ||
        md_grow((void **)&sg->g, &sg->cap_g, sg->nsizes + 1, sizeof *sg->g))
        return -1;
    sg->rest[sg->nsizes] = rest, sg->n[sg->nsizes] = n, sg->g[sg->nsizes++] = grads;
    return 0;
}

/* The guess taken where it covers every gradient (k each) and the blocks
 * it leaves unnamed are at most an eighth of those it names. */
static int prehistory_state(md_analysis *a, const state_guess *sg, size_t grads)
{
    size_t k = sg->k > 0 ? (size_t)sg->k : 0, named = 0, extra = 0;
    for (size_t i = 0; i < sg->nsizes; i++)
        named += k * sg->g[i], extra += sg->n[i] - k * sg->g[i];
    if (!k || named != k * grads || extra > named / 8)
        return 0;
    a->state_addr = malloc(named * sizeof *a->state_addr);
    if (!a->state_addr)
        return -1;
    for (size_t i = 0; i < sg->nsizes; i++)
        for (size_t j = 0; j < k * sg->g[i]; j++)
            a->state_addr[a->nstate_addr++] = sg->rest[i][j].addr;
    qsort(a->state_addr, a->nstate_addr, sizeof *a->state_addr, cmp_addr);
    return 0;
}

/* How many entries of sorted v[*at..n) have size `size` (advancing *at). */
static size_t count_size(const sized *v, size_t n, size_t *at, uint64_t size)
{
    while (*at < n && v[*at].size < size)
        ++*at;
    size_t k = 0;
    while (*at + k < n && v[*at + k].size == size)
        k++;
    return k;
}

/* State tensors per named parameter, the same for every size the named
 * parameters have (AdamW: 2), where the first backward allocated no
 * gradients to count by (DDP's gradients are views of its buckets); 0 where
 * the sizes disagree or give more than 3. */
static int state_per_param(const sized *named, size_t np, const sized *state, size_t ns)
{
    int k = 0;
    for (size_t i = 0, is = 0; i < np;) {
        uint64_t sz = named[i].size;
        size_t p = count_size(named, np, &i, sz), st = count_size(state, ns, &is, sz);
        i += p;
        if (!sz)
            continue;
        if (st % p || !st || st / p > 3 || (k && (size_t)k != st / p))
            return 0;
        k = (int)(st / p);
    }
    return k;
}

/* Parameters no frame names (raw tensors made with requires_grad, a
 * script's own module built on the GPU, fp32 master copies, weights made
 * before the recorded history began): made before training and kept
 * through its first step, each the size of a gradient the first backward
 * made, and of a state tensor where the optimizer keeps state (and made
 * some in the first step), beyond those the named parameters account for.
 * Counted per size, so an input that merely shares a weight's size is not
 * taken for one. Where the first backward allocated no gradients (DDP's
 * are views of its buckets), by the state alone: the state tensors of a
 * size beyond the named parameters', as many per parameter as theirs. */
static int unnamed_params(md_analysis *a)
{
    if (!a->nsteps)
        return 0;
    const md_step *s0 = &a->steps[0];
    sized *cand, *named, *grads, *state;
    size_t nc = kept_allocs(a, 0, s0->fwd_start, s0->after_zero, unnamed_candidate, &cand);
    size_t np = kept_allocs(a, 0, s0->fwd_start, s0->after_zero, named_param, &named);
    size_t ng = kept_allocs(a, s0->after_forward + 1, s0->after_backward, s0->after_backward,
                            is_gradient, &grads);
    size_t ns = kept_allocs(a, s0->after_backward + 1, s0->after_optim, s0->after_optim,
                            any_alloc, &state);
    int rc = nc == SIZE_MAX || np == SIZE_MAX || ng == SIZE_MAX || ns == SIZE_MAX ? -1 : 0;
    if (!rc && ng)
        rc = add_prehistory(a, s0->after_zero, &cand, &nc, &named, &np);
    int per = rc || ng || !ns ? 0 : state_per_param(named, np, state, ns);
    size_t ip = 0, ig = 0, is = 0, cap = 0, cap_addr = 0;
    state_guess sg = {0};
    for (size_t i = 0; !rc && (ng || per) && i < nc;) {
        uint64_t sz = cand[i].size;
        size_t same = count_size(cand, nc, &i, sz), p = count_size(named, np, &ip, sz);
        size_t g = count_size(grads, ng, &ig, sz), st = count_size(state, ns, &is, sz);
        size_t take = sz && g > p ? g - p : 0; /* an empty tensor says nothing */
        if (ns && take > (st > p ? st - p : 0))
            take = st > p ? st - p : 0;
        size_t kp = (size_t)per * p; /* the named parameters' state */
        if (per) /* no gradients to count: `per` state tensors each, beyond the named ones' */
            take = sz && st > kp && (st - kp) % (size_t)per == 0 ? (st - kp) / (size_t)per : 0;
        take = take < same ? take : same;
        for (size_t k = 0; !rc && k < take; k++)
            rc = take_param(a, &cand[i + k], &cap, &cap_addr);
        if (!rc && !ns && sz)
            rc = guess_state(&sg, cand + i + take, same - take, g);
        i += same;
    }
    if (!rc && !ns && ng)
        rc = prehistory_state(a, &sg, ng);
    free(sg.rest), free(sg.n), free(sg.g);
    if (a->nunnamed)
        qsort(a->unnamed, a->nunnamed, sizeof(long), cmp_long);
    if (a->nunnamed_addr)
        qsort(a->unnamed_addr, a->nunnamed_addr, sizeof(uint64_t), cmp_addr);
    free(cand), free(named), free(grads), free(state);
    return rc;
}

/* The first event of the history's first optimizer step, n if none: an
 * optimizer.step annotation's or an optimizer frame's, whichever is first. */
static long first_optimizer_event(const md_analysis *a)
{
    long at = (long)a->n;
    int64_t t0 = a->n ? a->ev[0].time_us : -1;
    const md_snapshot *s = a->s;
    for (size_t i = 0; t0 >= 0 && i < s->nanns; i++) {
        const md_annotation *an = &s->anns[i];
        if (an->device == a->step_device && an->stage == 1 && an->time_us >= t0 &&
            match_prefix(md_strtab_get(&s->strs, an->name), "Optimizer.step#")) {
            long k = index_before(a, an->time_us, 0) + 1;
            at = k < at ? k : at;
        }
    }
    for (long i = 0; i < at; i++)
        if (md_stack_tags((md_stack_cache *)&a->cache, s, a->ev[i].stack) & MD_TAG_OPTIM)
            return i;
    return at;
}

static int cmp_fate(const void *x, const void *y)
{
    const pre_fate *a = x, *b = y;
    return (a->addr > b->addr) - (a->addr < b->addr);
}

static pre_fate *find_fate(const md_analysis *a, uint64_t addr)
{
    pre_fate key = {addr, 0};
    return a->npre_fates ? bsearch(&key, a->pre_fates, a->npre_fates, sizeof key, cmp_fate)
                         : NULL;
}

/* Blocks made before the history in the sizes its first step left live
 * (live[0..n): after the last step) as activations, repeating them
 * (md_repeats_hold): the steps before it left theirs the same way (a
 * graph kept every step, a ring buffer's window of the last steps), so
 * they are activations too, not "other" (the seed's gamma ring: 198.8
 * MiB). Fates still `unseen` only; -1 out of memory. */
static int repeat_fates(md_analysis *a, const md_live *live, size_t n, uint8_t unseen)
{
    const md_step *s0 = &a->steps[0];
    md_repeats r = {0};
    uint64_t before;
    double times;
    for (size_t i = 0; i < n; i++)
        if (live[i].alloc_index > s0->fwd_start && live[i].alloc_index <= s0->after_zero &&
            md_categorize(a, &live[i]) == MD_CAT_ACTIVATION)
            md_repeats_kept(&r, live[i].block_size);
    for (size_t i = 0; r.n && i < n; i++) {
        pre_fate *f = live[i].alloc_index < 0 ? find_fate(a, live[i].addr) : NULL;
        if (f && f->category == unseen)
            md_repeats_before(&r, live[i].block_size);
    }
    int hold = r.n && md_repeats_hold(&r, &before, &times);
    for (size_t i = 0; hold && i < n; i++) {
        pre_fate *f = live[i].alloc_index < 0 ? find_fate(a, live[i].addr) : NULL;
        if (f && f->category == unseen && md_repeats_size(&r, live[i].block_size))
            f->category = MD_CAT_ACTIVATION;
    }
    int rc = r.nomem ? -1 : 0;
    md_repeats_free(&r);
    return rc;
}

/* repeat_fates on what is live after the last step's zero_grad, where there
 * are two steps or more: what the first left is then what outlived a step. */
static int repeats_at_last_step(md_analysis *a, uint8_t unseen)
{
    md_live_set *h = &a->held;
    md_err e;
    if (a->nsteps < 2)
        return 0;
    h->index = a->steps[a->nsteps - 1].after_zero;
    if (md_replay_probe(a->r, &h->index, 1, &h->live, &h->n, &h->cache, &e))
        return -1;
    h->valid = 1; /* kept for prefetch_lives, which categorizes it */
    return repeat_fates(a, h->live, h->n, unseen);
}

/* What the history tells of the blocks made before it (by then parameters
 * and optimizer state are named): one freed before the history's first
 * optimizer step, once a backward was under way, is what the forward saved
 * for that backward (a ring buffer's window opening in a backward: the
 * step before's activations); one never freed, of a cuBLAS workspace's
 * size, is that workspace (one per handle and stream: the autograd
 * engine's thread has its own), where there are a few such: many are a
 * frozen model's weights of that size (a 4096 x 4096 bf16 matrix is 32
 * MiB); ones in the sizes the first step leaves live are what the steps
 * before left (repeat_fates). Others stay "other". */
#define MAX_PRE_WORKSPACES 4

static int prehistory_fates(md_analysis *a)
{
    enum { UNSEEN = MD_CAT_COUNT, FREED };
    md_live *live = NULL;
    size_t n = 0;
    md_err e;
    if (!md_replay_initial(a->r).allocated || !a->nsteps)
        return 0;
    if (md_replay_live(a->r, -1, &live, &n, &e))
        return -1;
    a->pre_fates = malloc((n ? n : 1) * sizeof *a->pre_fates);
    for (size_t i = 0; a->pre_fates && i < n; i++)
        a->pre_fates[i] = (pre_fate){live[i].addr, UNSEEN};
    free(live);
    if (!a->pre_fates)
        return -1;
    a->npre_fates = n;
    qsort(a->pre_fates, n, sizeof *a->pre_fates, cmp_fate);
    long opt0 = first_optimizer_event(a);
    for (long i = 0, bwd = 0; i < opt0; i++) {
        const md_event *ev = &a->ev[i];
        bwd = bwd || backward_event(a, i);
        pre_fate *f;
        if ((ev->action == MD_ACT_FREE_REQUESTED || ev->action == MD_ACT_FREE_COMPLETED) &&
            (f = find_fate(a, ev->addr)) && f->category == UNSEEN)
            f->category = bwd ? MD_CAT_ACTIVATION : FREED;
    }
    if (md_replay_live(a->r, (long)a->n - 1, &live, &n, &e))
        return -1;
    pre_fate *ws[MAX_PRE_WORKSPACES + 1];
    size_t nws = 0;
    for (size_t i = 0; i < n && nws <= MAX_PRE_WORKSPACES; i++) {
        uint64_t rq = live[i].requested;
        pre_fate *f = live[i].alloc_index < 0 ? find_fate(a, live[i].addr) : NULL;
        if (f && f->category == UNSEEN && (rq == 33554432ULL || rq == 8519680ULL))
            ws[nws++] = f;
    }
    for (size_t i = 0; nws <= MAX_PRE_WORKSPACES && i < nws; i++)
        ws[i]->category = MD_CAT_WORKSPACE;
    free(live);
    if (repeats_at_last_step(a, UNSEEN))
        return -1;
    size_t k = 0;
    for (size_t i = 0; i < a->npre_fates; i++)
        if (a->pre_fates[i].category < MD_CAT_COUNT)
            a->pre_fates[k++] = a->pre_fates[i];
    a->npre_fates = k;
    return 0;
}

int md_analysis_unnamed_param(const md_analysis *a, const md_live *l)
{
    if (l->alloc_index < 0)
        return a->nunnamed_addr && bsearch(&l->addr, a->unnamed_addr, a->nunnamed_addr,
                                           sizeof(uint64_t), cmp_addr) != NULL;
    long k = l->alloc_index; /* a->unnamed holds longs */
    return a->nunnamed && bsearch(&k, a->unnamed, a->nunnamed, sizeof k, cmp_long) != NULL;
}

/* Room for each step's first backward event after its optimizer step,
 * found when first needed (zero_phase_lived): -2 until then. */
static int zero_phase_backwards(md_analysis *a)
{
    a->zero_bwd = malloc((a->nsteps ? a->nsteps : 1) * sizeof *a->zero_bwd);
    if (!a->zero_bwd)
        return -1;
    for (size_t k = 0; k < a->nsteps; k++)
        a->zero_bwd[k] = -2;
    return 0;
}

static int lived_into_backward(const md_analysis *a, long i, long fr);

/* Whether the allocation at i in step k's zero_grad phase (freed at fr,
 * or kept) lived into a backward: the first after the optimizer step
 * where none came between (a pass ahead of the zero_grad, or an
 * evaluation's output kept), else a scan to the next. */
static int zero_phase_lived(const md_analysis *a, long k, long i, long fr)
{
    long end = fr < 0 ? (long)a->n : fr, *first = &a->zero_bwd[k];
    if (*first == -2) { /* a cache: the analysis is otherwise read-only here */
        long j = a->steps[k].after_optim + 1;
        while (j < (long)a->n && !backward_event(a, j))
            j++;
        *first = j;
    }
    if (*first > i)
        return *first < end;
    return lived_into_backward(a, i, end);
}

int md_analyze(const md_snapshot *s, const md_replay *r, md_analysis **out, md_err *err)
{
    return md_analyze_with(s, r, NULL, out, err);
}

int md_analyze_with(const md_snapshot *s, const md_replay *r, md_stack_cache *cache,
                    md_analysis **out, md_err *err)
{
    return md_analyze_ahead(s, r, cache, NULL, out, err);
}

int md_analyze_ahead(const md_snapshot *s, const md_replay *r, md_stack_cache *cache,
                     md_lives_ahead *ahead, md_analysis **out, md_err *err)
{
    md_analysis *a = calloc(1, sizeof *a);
    step_end *ends = NULL;
    step_src *lo = NULL;
    size_t cap = 0, n;
    if (!a) {
        if (cache)
            md_stack_cache_free(cache);
        return md_err_set(err, MD_E_NOMEM, -1, "out of memory");
    }
    a->s = s;
    a->r = r;
    a->ev = md_replay_events(r);
    a->n = md_replay_nevents(r);
    if (cache)
        a->cache = *cache;
    else if (md_stack_cache_new(&a->cache, s))
        goto nomem;
    else
        md_stack_cache_fill(&a->cache, s, 0);
    /* no history, no steps: a snapshot's annotations without its trace
     * gave steps whose every phase was the state when it was taken */
    a->history = md_snapshot_has_history(s, md_replay_device(r));
    a->step_device = a->history ? annotation_device(s, md_replay_device(r)) : -1;
    int got = a->step_device >= 0 ? process_steps(a, &ends, &cap, &lo) : 0;
    if (got < 0)
        goto nomem;
    a->source = got ? MD_STEPS_FROM_ANNOTATIONS : 0;
    if (!got) {
        free(lo); /* what the process-wide search left, if anything */
        lo = NULL;
        a->nsteps = 0;
        a->step_device = md_replay_device(r);
        n = a->history ? ends_from_annotations(a, a->step_device, &ends, &cap) : 0;
        if (n > 0) {
            a->source = MD_STEPS_FROM_ANNOTATIONS;
            zero_grad_from_frames(a, ends, n);
        } else if (a->history) {
            n = ends_from_frames(a, &ends, &cap);
            if (n > 0)
                a->source = MD_STEPS_FROM_FRAMES;
        }
        if (phase_steps(a, ends, n, &lo))
            goto nomem;
    }
    if (a->source != MD_STEPS_FROM_ANNOTATIONS)
        a->step_device = -1;
    step_peaks(a, lo);
    free(lo);
    free(ends);
    if (zero_phase_backwards(a))
        goto nomem_after;
    a->pre_oom = -1;
    for (long i = 0; a->nsteps && i <= a->steps[0].fwd_start && i < (long)a->n; i++)
        if (a->ev[i].action == MD_ACT_OOM)
            a->pre_oom = i;
    a->start = a->nsteps ? a->steps[0].fwd_start : -1;
    if (a->pre_oom >= 0) /* the indicators count from before the attempts, as a capture does */
        a->start = first_tagged(a, -1, a->pre_oom, MD_TAG_FORWARD, 0) - 1;
    a->peak_index = peak_moment(a);
    if (unnamed_params(a) || prehistory_fates(a))
        goto nomem_after;
    if (a->nsteps ? md_find_iterations(s, &a->cache, a->ev, a->steps, a->nsteps, &a->iters)
                  : md_find_calls(s, &a->cache, a->ev, a->n, &a->iters))
        goto nomem_after;
    indicators(a);
    prefetch_lives(a, ahead);
    *out = a;
    return MD_OK;
nomem:
    free(ends);
    free(lo);
nomem_after:
    md_analysis_free(a);
    return md_err_set(err, MD_E_NOMEM, -1, "out of memory");
}

void md_analysis_free(md_analysis *a)
{
    if (!a)
        return;
    for (int i = 0; i < MD_LIVE_CACHE; i++)
        free(a->lives[i].live);
    free(a->held.live);
    free(a->steps);
    free(a->zero_bwd);
    free(a->unnamed);
    free(a->unnamed_addr);
    free(a->state_addr);
    free(a->pre_fates);
    free(a->iters.steps);
    md_stack_cache_free(&a->cache);
    free(a->set_cat);
    free(a);
}

const md_step *md_analysis_steps(const md_analysis *a, size_t *n)
{
    *n = a->nsteps;
    return a->steps;
}

int md_analysis_step_source(const md_analysis *a) { return a->source; }
size_t md_analysis_period(const md_analysis *a) { return a->iters.period; }

const md_step *md_analysis_iterations(const md_analysis *a, size_t *n)
{
    *n = a->iters.n;
    return a->iters.steps;
}

const md_frame *md_analysis_call_site(const md_analysis *a) { return a->iters.call; }

const md_frame *md_analysis_period_site(const md_analysis *a, size_t k)
{
    return k < a->iters.period && a->iters.period > 1 ? a->iters.site[k] : NULL;
}
const char *md_analysis_period_name(const md_analysis *a, size_t k)
{
    return k < a->iters.period && a->iters.period > 1 ? a->iters.name[k] : NULL;
}
int md_analysis_step_device(const md_analysis *a) { return a->source ? a->step_device : -1; }
const md_indicators *md_analysis_indicators(const md_analysis *a) { return &a->ind; }
const char *md_analysis_optimizer(const md_analysis *a) { return a->optimizer; }
const md_snapshot *md_analysis_snapshot(const md_analysis *a) { return a->s; }
md_stack_cache *md_analysis_cache(const md_analysis *a) { return (md_stack_cache *)&a->cache; }
const md_replay *md_analysis_replay(const md_analysis *a) { return a->r; }

md_category md_analysis_category(const md_analysis *a, const md_live *l)
{
    return md_categorize(a, l);
}

const char *md_phase_name(md_phase p)
{
    static const char *names[] = {"forward", "backward", "optimizer_step", "zero_grad"};
    return p < MD_PHASE_COUNT ? names[p] : "?";
}

/* ---- categories ------------------------------------------------------------ */

const char *md_category_name(md_category c)
{
    static const char *names[] = {"parameters", "gradients", "optimizer_state",
                                  "activations", "library_workspace", "inputs",
                                  "temporaries", "other"};
    return c < MD_CAT_COUNT ? names[c] : "?";
}

/* A never-freed allocation of a known cuBLAS/cuBLASLt workspace size made
 * from a matmul, or made in the first forward of the trace (the first
 * matmul on a stream creates it; an `a @ b` in a model's forward leaves no
 * frame named after it, as in transformers' rotary embedding): the
 * workspace even when no C++ frames were recorded.
 * Sizes: CublasHandlePool.cpp (32 MiB per handle and stream on sm90, else
 * 4096*1024*2 + 16*1024*8 bytes; cuBLASLt 4 MiB, 32 MiB on sm90). */
static int workspace_by_size(const md_analysis *a, const md_live *l)
{
    if (l->requested != 33554432ULL && l->requested != 8519680ULL &&
        l->requested != 4194304ULL)
        return 0;
    if (l->alloc_index < 0 || md_replay_free_index(a->r, l->alloc_index) >= 0)
        return 0;
    if (a->nsteps && l->alloc_index > a->steps[0].fwd_start &&
        l->alloc_index <= a->steps[0].after_forward)
        return 1; /* the first forward: no frame scan needed */
    if (md_snapshot_stack(a->s, l->stack).n == 0)
        return 1; /* autograd engine thread, no Python frames */
    /* the frames' names are checked once per frame, in the tag cache */
    return (md_stack_tags(md_analysis_cache(a), a->s, l->stack) & MD_TAG_MATMUL) != 0;
}

static long step_of(const md_analysis *a, long idx)
{
    size_t lo = 0, hi = a->nsteps;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (a->steps[mid].after_zero < idx)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < a->nsteps ? (long)lo : -1;
}

/* Whether a backward began while the allocation at i lived (before fr,
 * or for one kept past the backward phase, before the phase's end): what
 * a forward inside a step's backward phase keeps that long, it kept for a
 * backward (gradient accumulation: a later micro-batch's forward runs
 * after the first backward; one it keeps for good is still its output,
 * where a module called after the last backward, a cache filled there,
 * is not). */
static int lived_into_backward(const md_analysis *a, long i, long fr)
{
    for (long j = i + 1; j < fr; j++)
        if (backward_event(a, j))
            return 1;
    return 0;
}

int md_analysis_backward_between(const md_analysis *a, long from, long to)
{
    return lived_into_backward(a, from, to);
}

/* A history that began inside a step (a ring of the last events, a
 * recording started mid-run) opens with that step's end: what its forward
 * made there and its backward freed was saved for that backward, as in
 * any recorded step (a transformers ring window's first loss and layers:
 * 734 MiB of its peak, counted as temporaries). */
static int saved_before_steps(const md_analysis *a, unsigned tags, long i, long fr)
{
    return md_replay_reconstructed(a->r) && (tags & MD_TAG_FORWARD) && !(tags & MD_TAG_BACKWARD) &&
           lived_into_backward(a, i, fr);
}

md_category md_categorize(const md_analysis *a, const md_live *l)
{
    unsigned tags = md_stack_tags((md_stack_cache *)&a->cache, a->s, l->stack);
    if ((tags & MD_TAG_WORKSPACE) || workspace_by_size(a, l))
        return MD_CAT_WORKSPACE;
    long i = l->alloc_index;
    if (i < 0) { /* made before the recorded history: its frames, if it kept them */
        if ((tags & MD_TAG_MODEL_INIT) || md_analysis_unnamed_param(a, l))
            return MD_CAT_PARAMETER;
        int state = (tags & MD_TAG_OPTIM) ||
                    (a->nstate_addr && bsearch(&l->addr, a->state_addr, a->nstate_addr,
                                               sizeof(uint64_t), cmp_addr));
        const pre_fate *f;
        if (state || a->history)
            return state                           ? MD_CAT_OPTIMIZER_STATE
                   : (f = find_fate(a, l->addr)) ? (md_category)f->category
                                                   : MD_CAT_OTHER;
        /* no history at all (enabled="state"): the block's own stack is all
         * there is; a history's blocks from before it are left as they were */
        return (tags & (MD_TAG_GRAD_ACCUM | MD_TAG_BACKWARD)) ? MD_CAT_GRADIENT
               : (tags & MD_TAG_FORWARD)                     ? MD_CAT_ACTIVATION
                                                             : MD_CAT_OTHER;
    }
    long fr = md_replay_free_index(a->r, i);
    if (tags & MD_TAG_GRAD_ACCUM)
        return MD_CAT_GRADIENT;
    if (a->nsteps && i <= a->steps[0].fwd_start) {
        if (tags & MD_TAG_MODEL_INIT)
            return MD_CAT_PARAMETER;
        /* gone before training began: no input of it; made by an attempt
         * that ran out of memory and was tried again smaller, or by the
         * set-up (a buffer to hold the GPU, a checkpoint copied in) */
        if (fr >= 0 && fr <= a->steps[0].fwd_start)
            return ((i < a->pre_oom && (tags & MD_TAG_FORWARD)) || saved_before_steps(a, tags, i, fr))
                       ? MD_CAT_ACTIVATION
                       : MD_CAT_TEMPORARY;
        return md_analysis_unnamed_param(a, l) ? MD_CAT_PARAMETER : MD_CAT_INPUT;
    }
    long k = step_of(a, i);
    if (k < 0) /* no steps, or after the last: a model moved or built late is still one */
        return (tags & MD_TAG_MODEL_INIT) ? MD_CAT_PARAMETER
               : (tags & MD_TAG_FORWARD) ? MD_CAT_ACTIVATION : MD_CAT_OTHER;
    const md_step *s = &a->steps[k];
    if (i <= s->fwd_start) /* between steps: a model built or cast mid-run is still one */
        return (tags & MD_TAG_MODEL_INIT) ? MD_CAT_PARAMETER : MD_CAT_OTHER;
    if (i <= s->after_forward) {
        if ((tags & MD_TAG_MODEL_INIT) && (fr < 0 || fr > s->after_zero))
            return MD_CAT_PARAMETER; /* LazyLinear's weights: made by the forward, kept */
        return (fr < 0 || fr > s->after_forward) ? MD_CAT_ACTIVATION : MD_CAT_TEMPORARY;
    }
    if (i <= s->after_backward) {
        int forward = (tags & MD_TAG_FORWARD) && !(tags & MD_TAG_BACKWARD);
        if (fr < 0 || fr > s->after_backward) /* a later micro-batch's kept output, or a gradient */
            return forward && lived_into_backward(a, i, s->after_backward) ? MD_CAT_ACTIVATION
                                                                          : MD_CAT_GRADIENT;
        if (forward && lived_into_backward(a, i, fr))
            return MD_CAT_ACTIVATION;
        return MD_CAT_TEMPORARY;
    }
    if (i <= s->after_optim)
        return (fr < 0 || fr > s->after_optim) ? MD_CAT_OPTIMIZER_STATE : MD_CAT_TEMPORARY;
    /* before the zero_grad that closes the step: a pass of the next
     * iteration run ahead of it (adversarial training's attack, a GAN's
     * generator) saves for its backward as any forward does */
    if ((tags & MD_TAG_FORWARD) && !(tags & MD_TAG_BACKWARD) && zero_phase_lived(a, k, i, fr))
        return MD_CAT_ACTIVATION;
    return MD_CAT_OTHER;
}

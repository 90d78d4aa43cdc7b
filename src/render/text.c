/* text.c - the terminal summary: per rank the peak and when it happened,
 * memory per phase per step, the indicators, who holds memory at the peak,
 * notable allocator settings; then a cross-rank comparison. Plain text that
 * survives a Slurm log. */
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include "report.h"

static double secs(const md_rank *rk, long idx)
{
    size_t n;
    const md_event *ev = md_snapshot_events(rk->s, rk->device, &n);
    if (!n || idx < 0 || ev[0].time_us < 0 || ev[idx].time_us < 0)
        return -1;
    return (double)(ev[idx].time_us - ev[0].time_us) / 1e6;
}

static const char *stacks_kind(const md_snapshot *s)
{
    unsigned f = md_snapshot_features(s);
    if (!(f & MD_HAS_FRAMES))
        return "none recorded";
    return (f & MD_HAS_CPP_FRAMES) ? "Python + C++" : "Python";
}

/* A snapshot without a history holds what was live when it was taken:
 * said first, since no peak, step or lifetime can follow from it. */
static void no_history(FILE *o, const md_rank *rk)
{
    if (md_snapshot_features(rk->s) & MD_HAS_FRAMES) /* enabled="state" keeps one event */
        fprintf(o, "  trace       none: the blocks live when the snapshot was taken, each with its "
                   "stack (%s%s)\n", stacks_kind(rk->s),
                rk->nevents ? "; recorded with enabled=\"state\"" : "");
    else
        fprintf(o, "  trace       none, and no stacks: the blocks live when the snapshot was taken "
                   "(no history was recorded)\n");
    fprintf(o, "  note        the peak, the steps and the allocations' lifetimes are not in this "
               "file: record the history first (torch.cuda.memory._record_memory_history("
               "max_entries=100000) before the work, or memdiag run)\n");
}

/* devices: the ranks are devices of one process, not a job's ranks */
static void header(FILE *o, const md_rank *rk, int devices)
{
    size_t n;
    const md_event *ev = md_snapshot_events(rk->s, rk->device, &n);
    double span = n && ev[0].time_us >= 0 ? (double)(ev[n - 1].time_us - ev[0].time_us) / 1e6 : -1;
    if (devices)
        fprintf(o, "== cuda:%d  %s\n", rk->device, rk->path);
    else if (rk->further)
        fprintf(o, "== rank %d (cuda:%d, a further GPU of the process)  %s\n", rk->rank, rk->device,
                rk->path);
    else if (rk->helper_of)
        fprintf(o, "== %s of pid %d (rank %d, cuda:%d)  %s\n", rk->role, rk->helper_of, rk->rank,
                rk->device, rk->path);
    else
        fprintf(o, "== rank %d (cuda:%d)  %s\n", rk->rank, rk->device, rk->path);
    if (!rk->history) {
        no_history(o, rk);
        return;
    }
    fprintf(o, "  trace       %zu events", n);
    if (span >= 0)
        fprintf(o, " over %.2f s", span);
    fprintf(o, ", stacks: %s\n", stacks_kind(rk->s));
    if (md_replay_anomalies(rk->r))
        fprintf(o, "  note        %zu events did not fit the replayed allocator state "
                   "(history recorded after the allocations it frees)\n",
                md_replay_anomalies(rk->r));
}

static void peak_line(FILE *o, const md_rank *rk)
{
    long p = md_analysis_peak_index(rk->a);
    md_point end = md_replay_at(rk->r, (long)rk->nevents - 1);
    if (!rk->history) {
        fprintf(o, "  live        %.1f MiB allocated, %.1f MiB reserved when the snapshot was taken "
                   "(its peak is not in the file)\n", md_mib(end.allocated), md_mib(end.reserved));
        return;
    }
    fprintf(o, "  peak        %.1f MiB allocated", md_mib(md_replay_peak_allocated(rk->r)));
    if (secs(rk, p) >= 0)
        fprintf(o, " at +%.3f s", secs(rk, p));
    char where[160];
    fputs(md_rank_peak_where(rk, where, sizeof where), o);
    fprintf(o, "; reserved peak %.1f MiB\n", md_mib(md_replay_peak_reserved(rk->r)));
    fprintf(o, "  at end      %.1f MiB allocated, %.1f MiB reserved\n", md_mib(end.allocated),
            md_mib(end.reserved));
    if (rk->setup_peak_over && end.reserved >= 2 * rk->setup_peak_over)
        fprintf(o, "  note        the cache kept what the set-up freed: %.1f MiB reserved to the "
                   "end, %.1fx the training's peak; torch.cuda.empty_cache() after the set-up "
                   "returns it to the GPU\n", md_mib(end.reserved),
                (double)end.reserved / (double)rk->setup_peak_over);
}

/* A trace without steps: the calls leaks are judged by. */
static void calls_line(FILE *o, const md_rank *rk)
{
    const md_frame *call = md_analysis_call_site(rk->a);
    size_t n;
    char site[512];
    md_analysis_iterations(rk->a, &n);
    if (call)
        fprintf(o, "  calls       %zu and the last of %s (the line of the script that "
                "allocates most often): leaks are judged call to call\n", n,
                md_frame_label(rk->s, call, site, sizeof site));
}

/* Several optimizers stepping in turn: which, and what an iteration is. */
static void period_line(FILE *o, const md_rank *rk, size_t nsteps)
{
    size_t period = md_analysis_period(rk->a), nit;
    if (period < 2)
        return;
    char sites[1024];
    size_t distinct = md_analysis_period_say(rk->a, sites, sizeof sites);
    md_analysis_iterations(rk->a, &nit);
    fprintf(o, "              %zu optimizers step in turn (%s): %zu iterations of %zu steps%s; "
            "leaks and indicators count iterations\n", distinct, sites, nit, period,
            nit * period < nsteps ? " (the first cut short)" : "");
}

static void steps_table(FILE *o, const md_rank *rk)
{
    size_t n;
    const md_step *st = md_analysis_steps(rk->a, &n);
    int src = md_analysis_step_source(rk->a);
    const char *opt = md_analysis_optimizer(rk->a);
    if (!rk->history) {
        fprintf(o, "  steps       not known without a history\n");
        return;
    }
    if (n == 0) {
        fprintf(o, "  steps       none found (no optimizer annotations or optimizer/backward frames)\n");
        calls_line(o, rk);
        return;
    }
    char from[64] = "";
    int dev = md_analysis_step_device(rk->a);
    if (src == MD_STEPS_FROM_ANNOTATIONS && dev != rk->device)
        snprintf(from, sizeof from, " (cuda:%d's; this device has none)", dev);
    fprintf(o, "  steps       %zu, found from %s%s%s%s\n", n,
            src == MD_STEPS_FROM_ANNOTATIONS ? "optimizer annotations" : "stack frames", from,
            opt[0] ? ", optimizer " : "", opt);
    period_line(o, rk, n);
    fprintf(o, "\n  MiB allocated   before-fwd  after-fwd  after-bwd  after-opt  after-zero   peak\n");
    for (size_t k = 0; k < n; k++)
        fprintf(o, "    step %-6d %12.1f %10.1f %10.1f %10.1f %11.1f %7.1f\n", st[k].number,
                md_mib(md_replay_at(rk->r, st[k].fwd_start).allocated),
                md_mib(md_replay_at(rk->r, st[k].after_forward).allocated),
                md_mib(md_replay_at(rk->r, st[k].after_backward).allocated),
                md_mib(md_replay_at(rk->r, st[k].after_optim).allocated),
                md_mib(md_replay_at(rk->r, st[k].after_zero).allocated), md_mib(st[k].peak));
}

/* Growth between steps made in one interval alone (an EMA copy or a cache
 * made once after step 0), flat before and after: said so, since the
 * indicator alone reads like a leak. zero[k]: MiB allocated after step
 * number[k]'s zero_grad. */
static void growth_note(FILE *o, const double *zero, const int *number, size_t n,
                        double growth_mib)
{
    if (n < 3 || growth_mib < 1.0)
        return;
    size_t at = 0;
    double big = 0, rest = 0;
    for (size_t k = 1; k < n; k++) {
        double d = zero[k] - zero[k - 1];
        if (d > big)
            rest += big, big = d, at = k;
        else
            rest += fabs(d);
    }
    if (at && big >= 0.9 * growth_mib && rest <= 0.1 * growth_mib)
        fprintf(o, "      all of it between steps %d and %d (%.1f MiB), none after: made once, "
                "not a leak\n", number[at - 1], number[at], big);
}

/* growth_note over a snapshot's steps; nothing said without memory */
static void replay_growth_note(FILE *o, const md_rank *rk, double growth_mib)
{
    size_t n;
    const md_step *st = md_analysis_steps(rk->a, &n);
    double *zero = malloc((n ? n : 1) * sizeof *zero);
    int *number = malloc((n ? n : 1) * sizeof *number);
    for (size_t k = 0; zero && number && k < n; k++) {
        zero[k] = md_mib(md_replay_at(rk->r, st[k].after_zero).allocated);
        number[k] = st[k].number;
    }
    if (zero && number)
        growth_note(o, zero, number, n, growth_mib);
    free(zero);
    free(number);
}

/* growth_note over a rank's after_clear_gradients samples */
static void sample_growth_note(FILE *o, const md_sample_rank *r, double growth_mib)
{
    double *zero = malloc((r->nsamples ? r->nsamples : 1) * sizeof *zero);
    int *number = malloc((r->nsamples ? r->nsamples : 1) * sizeof *number);
    size_t n = 0;
    for (size_t i = 0; zero && number && i < r->nsamples; i++)
        if (r->samples[i].phase == MD_SP_AFTER_CLEAR_GRADIENTS && r->samples[i].step >= 0) {
            zero[n] = r->samples[i].allocated_mib;
            number[n++] = r->samples[i].step;
        }
    if (zero && number)
        growth_note(o, zero, number, n, growth_mib);
    free(zero);
    free(number);
}

static void indicators(FILE *o, const md_rank *rk)
{
    const md_indicators *in = md_analysis_indicators(rk->a);
    if (!rk->history) {
        fprintf(o, "\n  indicators  need a history (maximum_peak_allocated_mib too: the peak is not "
                   "in the file)\n");
        return;
    }
    if (!in->valid) {
        fprintf(o, "\n  indicators  need at least one complete step; peak allocated %.1f MiB\n",
                in->maximum_peak_allocated_mib);
        return;
    }
    fprintf(o, "\n  indicators\n");
    if (in->first_step_recorded)
        fprintf(o, "    first_step_persistent_change_mib  %9.1f\n", in->first_step_persistent_change_mib);
    else
        fprintf(o, "    first_step_persistent_change_mib        n/a (step 0 is not in the recorded history)\n");
    fprintf(o, "    between_step_growth_mib           %9.1f\n", in->between_step_growth_mib);
    replay_growth_note(o, rk, in->between_step_growth_mib);
    fprintf(o, "    largest_forward_increase_mib      %9.1f\n", in->largest_forward_increase_mib);
    fprintf(o, "    maximum_peak_allocated_mib        %9.1f\n", in->maximum_peak_allocated_mib);
}

/* Blocks with no stacks: their sizes are what is left to go on. */
static void sizes_when_taken(FILE *o, const md_rank *rk, int top)
{
    md_size_group *g;
    size_t n;
    md_err err;
    if (md_sizes_at(rk->a, (long)rk->nevents - 1, &g, &n, &err) || !n)
        return;
    fprintf(o, "  largest live blocks by size (no stacks to name sites)\n");
    for (size_t i = 0; i < n && (int)i < top; i++)
        fprintf(o, "    %9.1f MiB %5u x  %.1f MiB\n", md_mib(g[i].size * g[i].count), g[i].count,
                md_mib(g[i].size));
    free(g);
}

static void at_peak(FILE *o, const md_rank *rk, int top)
{
    const char *when = rk->history ? "at peak" : "when taken";
    fprintf(o, "\n  live %s by category:", when);
    int any = 0;
    for (int c = 0; c < MD_CAT_COUNT; c++) {
        if (rk->by_cat[c] < 1024 * 1024 / 10)
            continue;
        fprintf(o, "%s %s %.1f MiB", any ? "," : "", md_category_name(c), md_mib(rk->by_cat[c]));
        any = 1;
    }
    fprintf(o, "%s\n", any ? "" : " (nothing live)");
    if (!rk->history && !(md_snapshot_features(rk->s) & MD_HAS_FRAMES)) {
        sizes_when_taken(o, rk, top);
        return;
    }
    if (!rk->nsites)
        return;
    fprintf(o, "  top sites %s\n", when);
    for (size_t i = 0; i < rk->nsites && (int)i < top; i++) {
        char lab[512];
        fprintf(o, "    %9.1f MiB %5u x  %-17s %s\n", md_mib(rk->sites[i].bytes), rk->sites[i].count,
                md_category_name(rk->sites[i].category),
                md_site_label(rk->s, &rk->sites[i], lab, sizeof lab));
    }
}

/* Private pools hold reserved memory only their own allocations reuse:
 * the answer to "reserved is far above allocated" under CUDA graphs. */
static void pools(FILE *o, const md_rank *rk)
{
    md_pools p = md_private_pools(rk->s, rk->device);
    if (!p.count)
        return;
    fprintf(o, "  pools       %.1f MiB reserved at the end is in %d private pool%s (CUDA graphs, "
               "MemPool), %.1f MiB of it allocated; only allocations in %s can use it\n",
            md_mib(p.reserved), p.count, p.count > 1 ? "s" : "", md_mib(p.allocated),
            p.count > 1 ? "those pools" : "that pool");
}

static void settings(FILE *o, const md_rank *rk)
{
    const md_settings *st = md_snapshot_settings(rk->s);
    if (!st->present) {
        fprintf(o, "\n  allocator   settings not recorded (%s)\n",
                md_snapshot_features(rk->s) & MD_HAS_LEGACY_LIST
                    ? "a bare list of segments, as torch.cuda.memory_snapshot() returns"
                    : "torch < 2.3");
        return;
    }
    const char *conf = md_snapshot_string(rk->s, st->alloc_conf);
    int rounding = 0;
    for (int i = 0; i < 16; i++)
        rounding |= st->roundup_divisions[i] > 1;
    fprintf(o, "\n  allocator   PYTORCH_CUDA_ALLOC_CONF=%s%s%s", conf[0] ? "'" : "", conf[0] ? conf : "(unset)",
            conf[0] ? "'" : "");
    fprintf(o, "; expandable_segments %s", st->expandable_segments ? "on" : "off");
    if (st->max_split_size >= 0)
        fprintf(o, "; max_split_size %.0f MiB", md_mib((uint64_t)st->max_split_size));
    if (rounding)
        fprintf(o, "; roundup_power2_divisions set");
    if (st->gc_threshold > 0)
        fprintf(o, "; garbage_collection_threshold %.2f", st->gc_threshold);
    fprintf(o, "\n");
    pools(o, rk);
}

/* Whether the inputs' own devices (their files' further devices aside)
 * are one job's ranks, each once. */
static int distinct_ranks(const md_rank *rk, size_t n)
{
    for (size_t i = 0; i < n; i++)
        for (size_t j = i + 1; j < n; j++)
            if (md_rank_is_rank(&rk[i]) && md_rank_is_rank(&rk[j]) && rk[i].rank == rk[j].rank)
                return 0;
    return 1;
}

/* devices: the ranks are devices of one process (md_ranks_one_process) */
static void compare(FILE *o, const md_rank *rk, size_t n, int devices)
{
    int ranked = distinct_ranks(rk, n);
    fprintf(o, "\n== %s compared\n", devices ? "devices" : ranked ? "ranks" : "inputs");
    fprintf(o, "  rank  device   peak MiB   reserved   fwd-increase  persistent   growth  file\n");
    size_t hi = n, lo = n; /* over the devices compared: ranks by their own GPUs */
    for (size_t i = 0; i < n; i++) {
        const md_indicators *in = md_analysis_indicators(rk[i].a);
        const char *base = strrchr(rk[i].path, '/');
        int other = !devices && rk[i].further;
        char note[64] = "";
        if (other || rk[i].helper_of)
            snprintf(note, sizeof note, other ? "  (a further GPU of the process)"
                                              : "  (%s of pid %d)", rk[i].role, rk[i].helper_of);
        fprintf(o, "  %-5d %-6d %10.1f %10.1f %14.1f %11.1f %8.1f  %s%s\n", rk[i].rank, rk[i].device,
                in->maximum_peak_allocated_mib, md_mib(md_replay_peak_reserved(rk[i].r)),
                in->largest_forward_increase_mib, in->first_step_persistent_change_mib,
                in->between_step_growth_mib, base ? base + 1 : rk[i].path, note);
        if (other || rk[i].helper_of)
            continue;
        if (hi == n || md_replay_peak_allocated(rk[i].r) > md_replay_peak_allocated(rk[hi].r))
            hi = i;
        if (lo == n || md_replay_peak_allocated(rk[i].r) < md_replay_peak_allocated(rk[lo].r))
            lo = i;
    }
    if (hi == n)
        return;
    uint64_t a = md_replay_peak_allocated(rk[hi].r), b = md_replay_peak_allocated(rk[lo].r);
    if (devices && hi != lo && b < (1u << 20))
        fprintf(o, "  cuda:%d peaks %.1f MiB above cuda:%d, which holds almost nothing\n",
                rk[hi].device, md_mib(a - b), rk[lo].device);
    else if (devices && hi != lo && b)
        fprintf(o, "  cuda:%d peaks %.1f MiB above cuda:%d (%.0f%% more)\n", rk[hi].device,
                md_mib(a - b), rk[lo].device, 100.0 * (double)(a - b) / (double)b);
    else if (ranked && hi != lo && b)
        fprintf(o, "  rank %d peaks %.1f MiB above rank %d (%.0f%% more)\n", rk[hi].rank,
                md_mib(a - b), rk[lo].rank, 100.0 * (double)(a - b) / (double)b);
}

static void finding(FILE *o, const md_finding *f, int detail)
{
    fprintf(o, "    [%s] %s: %s\n", md_severity_name(f->severity), f->kind, f->summary);
    if (!detail)
        return;
    for (int i = 0; i < f->nevidence; i++)
        fprintf(o, "        - %s\n", f->evidence[i]);
    for (int i = 0; i < f->nsites; i++)
        fprintf(o, "        %s %9.1f MiB %5u x  %s\n", i ? "     " : "sites", md_mib(f->sites[i].bytes),
                f->sites[i].count, f->sites[i].site);
    fprintf(o, "        advice: %s\n", f->advice);
}

static void findings(FILE *o, const md_finding *f, size_t n, int detail, const char *title)
{
    fprintf(o, "\n  %s\n", title);
    if (!n)
        fprintf(o, "    none: nothing above the thresholds of docs/diagnosis.md\n");
    for (size_t i = 0; i < n; i++)
        finding(o, &f[i], detail);
}

/* Each step's phases; reserved, device-used and (with a driver-level
 * trace) the memory live through the driver at the step's end. */
/* A sample of a step's phase (not CUDA's start or the exit). */
static int step_sample(const md_sample *s)
{
    return s->step >= 0 && s->phase >= MD_SP_AFTER_FORWARD && s->phase <= MD_SP_AFTER_CLEAR_GRADIENTS;
}

static void samples_table(FILE *o, const md_sample_rank *r)
{
    size_t k0 = 0;
    while (k0 < r->nsamples && !step_sample(&r->samples[k0]))
        k0++;
    if (k0 == r->nsamples) /* a process that never stepped (a DataLoader worker) */
        return;
    uint64_t *drv = md_driver_at_samples(r);
    fprintf(o, "\n  MiB allocated   after-fwd  after-bwd  after-opt  after-zero   reserved  device-used%s\n",
            drv ? "   driver" : "");
    for (int k = 0; k < 100000; k++) {
        double v[7] = {-1, -1, -1, -1, -1, -1, -1};
        int any = 0;
        for (size_t i = 0; i < r->nsamples; i++) {
            const md_sample *s = &r->samples[i];
            if (s->step != k || !step_sample(s))
                continue;
            any = 1;
            if (s->phase >= MD_SP_AFTER_FORWARD && s->phase <= MD_SP_AFTER_CLEAR_GRADIENTS)
                v[s->phase - MD_SP_AFTER_FORWARD] = s->allocated_mib;
            if (s->phase == MD_SP_AFTER_CLEAR_GRADIENTS) {
                v[4] = s->reserved_mib;
                v[5] = s->device_used_mib;
                v[6] = drv ? md_mib(drv[i]) : -1;
            }
        }
        if (!any)
            break;
        fprintf(o, "    step %-6d %10.1f %10.1f %10.1f %11.1f %10.1f %12.1f", k, v[0], v[1], v[2],
                v[3], v[4], v[5]);
        if (drv)
            fprintf(o, " %8.1f", v[6]);
        fputc('\n', o);
    }
    free(drv);
}

/* What a helper process held of the GPU: its parent's non_framework
 * finding counts it; here, how much of it was PyTorch's. */
static void helper_use(FILE *o, const md_sample_rank *r)
{
    double used = -1, reserved = 0;
    for (size_t i = 0; i < r->nsamples; i++) {
        used = fmax(used, r->samples[i].process_used_mib);
        reserved = fmax(reserved, r->samples[i].reserved_mib);
    }
    if (used > 0)
        fprintf(o, "  uses        %.1f MiB of cuda:%d at most (NVML), %.1f MiB of it reserved by "
                   "PyTorch: the rest is its CUDA context\n", used, r->device, reserved);
}

static void sample_rank(FILE *o, const md_sample_rank *r, const md_finding *f, size_t nf,
                        const md_out_opts *opt)
{
    const md_indicators *in = &r->indicators;
    if (r->further_device)
        fprintf(o, "== rank %d cuda:%d  %s  [phase samples of a further device of the process]\n",
                r->rank, r->device, r->source);
    else if (r->driver_file)
        fprintf(o, "== rank %d pid %d  %s  [driver-level allocations only: no phase samples "
                   "from this process]\n", r->rank, r->pid, r->source);
    else if (r->helper)
        fprintf(o, "== %s of pid %d (rank %d)  %s  [phase samples, no allocator history]\n",
                md_helper_role(r), r->ppid, r->rank, r->source);
    else if (r->device >= 0 && r->device != r->local_rank) /* a process over several GPUs */
        fprintf(o, "== rank %d (local %d) cuda:%d  %s  [phase samples, no allocator history]\n",
                r->rank, r->local_rank, r->device, r->source);
    else
        fprintf(o, "== rank %d (local %d)  %s  [phase samples, no allocator history]\n", r->rank,
                r->local_rank, r->source);
    if (r->has_capture && !r->driver_file) {
        const md_capture_info *ci = &r->capture;
        fprintf(o, "  capture     %s", ci->complete ? "complete"
                                     : r->helper ? "INCOMPLETE: the process never closed it "
                                                   "(stopped by its parent, killed or crashed)"
                                                 : "INCOMPLETE: the process never closed it "
                                                   "(killed or crashed)");
        if (ci->complete)
            fprintf(o, ", status %d", ci->status);
        fprintf(o, ", %zu optimizer steps", ci->steps);
        if (ci->truncated)
            fprintf(o, "; a torn last record was skipped");
        fprintf(o, "\n");
        if (ci->snapshot[0])
            fprintf(o, "  snapshot    %s (%s)\n", ci->snapshot, ci->snapshot_reason);
    }
    if (r->gpu[0])
        fprintf(o, "  device      %s, %.0f MiB\n", r->gpu, r->device_total_mib);
    if (r->nsamples)
        fprintf(o, "  peak        %.1f MiB allocated (max of the samples' peaks)\n",
                in->maximum_peak_allocated_mib);
    if (r->helper)
        helper_use(o, r);
    if (opt->detail)
        findings(o, f, nf, 1, "findings");
    md_render_driver(o, r, 0);
    if (!r->nsamples) {
        if (!opt->detail)
            findings(o, f, nf, 0, "findings (memdiag diagnose for evidence)");
        return;
    }
    samples_table(o, r);
    if (in->valid) {
        fprintf(o, "\n  indicators\n");
        fprintf(o, "    first_step_persistent_change_mib  %9.1f\n", in->first_step_persistent_change_mib);
        fprintf(o, "    between_step_growth_mib           %9.1f\n", in->between_step_growth_mib);
        sample_growth_note(o, r, in->between_step_growth_mib);
        fprintf(o, "    largest_forward_increase_mib      %9.1f\n", in->largest_forward_increase_mib);
        fprintf(o, "    maximum_peak_allocated_mib        %9.1f\n", in->maximum_peak_allocated_mib);
    }
    if (!opt->detail)
        findings(o, f, nf, 0, "findings (memdiag diagnose for evidence)");
}

static void brief_rank(FILE *o, md_rank *rk, int devices)
{
    const md_indicators *in = md_analysis_indicators(rk->a);
    header(o, rk, devices);
    peak_line(o, rk);
    if (in->valid)
        fprintf(o, "  indicators  persistent after step %d %.1f MiB, growth %.1f MiB, "
                   "largest forward %.1f MiB\n",
                md_analysis_steps(rk->a, &(size_t){0})[0].number,
                in->first_step_persistent_change_mib, in->between_step_growth_mib,
                in->largest_forward_increase_mib);
    if (in->valid)
        replay_growth_note(o, rk, in->between_step_growth_mib);
    for (size_t i = 0; i < rk->nfindings; i++)
        finding(o, &rk->findings[i], 0);
}

static void brief_samples(FILE *o, const md_sample_rank *r, const md_finding *f, size_t nf)
{
    char dev[96] = "";
    if (r->further_device)
        snprintf(dev, sizeof dev, " (cuda:%d)", r->device);
    if (r->helper)
        snprintf(dev + strlen(dev), sizeof dev - strlen(dev), " %s of pid %d", md_helper_role(r),
                 r->ppid);
    fprintf(o, "== rank %d %s %s%s: %s", r->rank, r->driver_file ? "driver trace" : "capture",
            r->source, dev,
            !r->has_capture                 ? "samples"
            : r->capture.complete           ? "complete"
            : r->helper                     ? "INCOMPLETE (stopped by its parent?)"
                                            : "INCOMPLETE (killed?)");
    if (r->has_capture && !r->driver_file)
        fprintf(o, ", %zu steps", r->capture.steps);
    fprintf(o, "\n");
    md_render_driver(o, r, 1);
    for (size_t i = 0; i < nf; i++)
        finding(o, &f[i], 0);
}


void md_render_text(FILE *o, const md_report *rep, const md_out_opts *opt)
{
    int devices = md_ranks_one_process(rep->ranks, rep->n);
    if (opt->brief) {
        for (size_t i = 0; i < rep->n; i++)
            brief_rank(o, &rep->ranks[i], devices);
        for (size_t i = 0; i < rep->nsranks; i++)
            brief_samples(o, &rep->sranks[i], rep->sfindings[i], rep->nsfindings[i]);
        if (rep->n > 1)
            compare(o, rep->ranks, rep->n, devices);
        if (rep->ncross)
            findings(o, rep->cross, rep->ncross, 0,
                     devices ? "cross-device findings" : "cross-rank findings");
        return;
    }
    md_rank *ranks = rep->ranks;
    size_t n = rep->n;
    for (size_t i = 0; i < n; i++) {
        md_rank *rk = &ranks[i];
        if (i)
            fprintf(o, "\n");
        header(o, rk, devices);
        peak_line(o, rk);
        if (opt->detail)
            findings(o, rk->findings, rk->nfindings, 1, "findings");
        steps_table(o, rk);
        indicators(o, rk);
        at_peak(o, rk, opt->top);
        settings(o, rk);
        if (!opt->detail)
            findings(o, rk->findings, rk->nfindings, 0, "findings (memdiag diagnose for evidence)");
    }
    for (size_t i = 0; i < rep->nsranks; i++) {
        if (i || n)
            fprintf(o, "\n");
        sample_rank(o, &rep->sranks[i], rep->sfindings[i], rep->nsfindings[i], opt);
    }
    if (n > 1)
        compare(o, ranks, n, devices);
    if (rep->ncross)
        findings(o, rep->cross, rep->ncross, opt->detail,
                 devices ? "cross-device findings" : "cross-rank findings");
}

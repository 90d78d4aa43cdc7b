/* json.c - `diagnose --json`: the facts of text.c, machine-readable, in the
 * schema of docs/json-schema.md (schema 1): top-level schema, tool, ranks[]
 * with indicators and findings, and cross-rank findings. */
#include <math.h>
#include <string.h>
#include "jw.h"
#include "report.h"

#define KV MD_KV

static void indicators(md_jw *w, const md_rank *rk)
{
    const md_indicators *in = md_analysis_indicators(rk->a);
    md_jw_key(w, "indicators");
    md_jw_open(w, '{');
    if (in->valid) {
        if (in->first_step_recorded)
            KV(w, "first_step_persistent_change_mib",
               md_jw_mib(w, in->first_step_persistent_change_mib));
        KV(w, "between_step_growth_mib", md_jw_mib(w, in->between_step_growth_mib));
        KV(w, "largest_forward_increase_mib", md_jw_mib(w, in->largest_forward_increase_mib));
    }
    if (rk->history) /* else the peak is not in the file */
        KV(w, "maximum_peak_allocated_mib", md_jw_mib(w, in->maximum_peak_allocated_mib));
    md_jw_close(w, '}');
}

static void steps(md_jw *w, const md_rank *rk)
{
    size_t n;
    const md_step *st = md_analysis_steps(rk->a, &n);
    int src = md_analysis_step_source(rk->a);
    KV(w, "steps_source", md_jw_str(w, src == MD_STEPS_FROM_ANNOTATIONS ? "annotations"
                                    : src == MD_STEPS_FROM_FRAMES    ? "frames"
                                                                     : "none"));
    if (src == MD_STEPS_FROM_ANNOTATIONS && md_analysis_step_device(rk->a) != rk->device)
        KV(w, "steps_device", md_jw_int(w, md_analysis_step_device(rk->a)));
    KV(w, "optimizer", md_jw_str(w, md_analysis_optimizer(rk->a)));
    const md_frame *call = md_analysis_call_site(rk->a);
    if (call) {
        char site[512];
        size_t ncalls;
        md_analysis_iterations(rk->a, &ncalls);
        md_jw_key(w, "calls");
        md_jw_open(w, '{');
        KV(w, "site", md_jw_str(w, md_frame_label(rk->s, call, site, sizeof site)));
        KV(w, "compared", md_jw_int(w, (long)ncalls));
        md_jw_close(w, '}');
    }
    size_t period = md_analysis_period(rk->a);
    if (period > 1) {
        md_jw_key(w, "optimizers_in_turn");
        md_jw_open(w, '[');
        char site[512];
        for (size_t k = 0; k < period; k++)
            md_jw_str(w, md_frame_label(rk->s, md_analysis_period_site(rk->a, k), site,
                                        sizeof site));
        md_jw_close(w, ']');
    }
    md_jw_key(w, "steps");
    md_jw_open(w, '[');
    for (size_t k = 0; k < n; k++) {
        md_jw_open(w, '{');
        KV(w, "step", md_jw_int(w, st[k].number));
        KV(w, "before_forward_mib", md_jw_mib(w, md_mib(md_replay_at(rk->r, st[k].fwd_start).allocated)));
        KV(w, "after_forward_mib", md_jw_mib(w, md_mib(md_replay_at(rk->r, st[k].after_forward).allocated)));
        KV(w, "after_backward_mib", md_jw_mib(w, md_mib(md_replay_at(rk->r, st[k].after_backward).allocated)));
        KV(w, "after_optimizer_step_mib", md_jw_mib(w, md_mib(md_replay_at(rk->r, st[k].after_optim).allocated)));
        KV(w, "after_clear_gradients_mib", md_jw_mib(w, md_mib(md_replay_at(rk->r, st[k].after_zero).allocated)));
        KV(w, "reserved_mib", md_jw_mib(w, md_mib(md_replay_at(rk->r, st[k].after_zero).reserved)));
        KV(w, "peak_allocated_mib", md_jw_mib(w, md_mib(st[k].peak)));
        md_jw_close(w, '}');
    }
    md_jw_close(w, ']');
}

static void peak(md_jw *w, const md_rank *rk)
{
    size_t n;
    const md_event *ev = md_snapshot_events(rk->s, rk->device, &n);
    long p = md_analysis_peak_index(rk->a);
    md_jw_key(w, "peak");
    md_jw_open(w, '{');
    KV(w, "allocated_mib", md_jw_mib(w, md_mib(md_replay_peak_allocated(rk->r))));
    KV(w, "reserved_peak_mib", md_jw_mib(w, md_mib(md_replay_peak_reserved(rk->r))));
    KV(w, "event", md_jw_int(w, p));
    KV(w, "time_us", md_jw_int(w, p >= 0 ? ev[p].time_us : -1));
    KV(w, "step", md_jw_int(w, rk->peak_step));
    KV(w, "phase", md_jw_str(w, rk->peak_phase >= 0    ? md_phase_name(rk->peak_phase)
                                : rk->setup_peak_over      ? "setup"
                                : rk->peak_before_history ? "before_history"
                                                           : ""));
    if (rk->setup_peak_over)
        KV(w, "training_peak_mib", md_jw_mib(w, md_mib(rk->setup_peak_over)));
    md_jw_key(w, "by_category_mib");
    md_jw_open(w, '{');
    for (int c = 0; c < MD_CAT_COUNT; c++)
        KV(w, md_category_name(c), md_jw_mib(w, md_mib(rk->by_cat[c])));
    md_jw_close(w, '}');
    md_jw_key(w, "sites");
    md_jw_open(w, '[');
    for (size_t i = 0; i < rk->nsites && i < 20; i++) {
        const md_site *s = &rk->sites[i];
        char lab[512];
        md_jw_open(w, '{');
        KV(w, "site", md_jw_str(w, md_site_label(rk->s, s, lab, sizeof lab)));
        KV(w, "file", md_jw_str(w, md_snapshot_string(rk->s, s->frame_file)));
        KV(w, "line", md_jw_int(w, s->frame_line));
        KV(w, "function", md_jw_str(w, md_snapshot_string(rk->s, s->frame_name)));
        KV(w, "bytes", md_jw_int(w, (long long)s->bytes));
        KV(w, "count", md_jw_int(w, s->count));
        KV(w, "category", md_jw_str(w, md_category_name(s->category)));
        md_jw_close(w, '}');
    }
    md_jw_close(w, ']');
    md_jw_close(w, '}');
}

static void settings(md_jw *w, const md_rank *rk)
{
    const md_settings *st = md_snapshot_settings(rk->s);
    md_jw_key(w, "allocator_settings");
    if (!st->present) {
        md_jw_null(w);
        return;
    }
    md_jw_open(w, '{');
    KV(w, "PYTORCH_CUDA_ALLOC_CONF", md_jw_str(w, md_snapshot_string(rk->s, st->alloc_conf)));
    KV(w, "expandable_segments", md_jw_int(w, st->expandable_segments));
    KV(w, "max_split_size", md_jw_int(w, st->max_split_size));
    KV(w, "garbage_collection_threshold", md_jw_num(w, st->gc_threshold));
    md_jw_close(w, '}');
}

static void pools(md_jw *w, const md_rank *rk)
{
    md_pools p = md_private_pools(rk->s, rk->device);
    md_jw_key(w, "private_pools");
    md_jw_open(w, '{');
    KV(w, "count", md_jw_int(w, p.count));
    KV(w, "segments", md_jw_int(w, p.segments));
    KV(w, "reserved_mib", md_jw_mib(w, md_mib(p.reserved)));
    KV(w, "allocated_mib", md_jw_mib(w, md_mib(p.allocated)));
    md_jw_close(w, '}');
}

static void findings(md_jw *w, const md_finding *f, size_t n)
{
    md_jw_key(w, "findings");
    md_jw_open(w, '[');
    for (size_t i = 0; i < n; i++) {
        md_jw_open(w, '{');
        KV(w, "kind", md_jw_str(w, f[i].kind));
        KV(w, "severity", md_jw_str(w, md_severity_name(f[i].severity)));
        KV(w, "bytes", md_jw_int(w, (long long)f[i].bytes));
        if (f[i].rank >= 0)
            KV(w, "rank", md_jw_int(w, f[i].rank));
        if (f[i].device >= 0)
            KV(w, "device", md_jw_int(w, f[i].device));
        KV(w, "summary", md_jw_str(w, f[i].summary));
        md_jw_key(w, "evidence");
        md_jw_open(w, '[');
        for (int k = 0; k < f[i].nevidence; k++)
            md_jw_str(w, f[i].evidence[k]);
        md_jw_close(w, ']');
        md_jw_key(w, "sites");
        md_jw_open(w, '[');
        for (int k = 0; k < f[i].nsites; k++) {
            md_jw_open(w, '{');
            KV(w, "site", md_jw_str(w, f[i].sites[k].site));
            KV(w, "bytes", md_jw_int(w, (long long)f[i].sites[k].bytes));
            KV(w, "count", md_jw_int(w, f[i].sites[k].count));
            md_jw_close(w, '}');
        }
        md_jw_close(w, ']');
        KV(w, "advice", md_jw_str(w, f[i].advice));
        md_jw_close(w, '}');
    }
    md_jw_close(w, ']');
}

static void rank(md_jw *w, const md_rank *rk)
{
    md_jw_open(w, '{');
    KV(w, "rank", md_jw_int(w, rk->rank));
    KV(w, "device", md_jw_int(w, rk->device));
    KV(w, "source", md_jw_str(w, rk->path));
    KV(w, "kind", md_jw_str(w, "snapshot"));
    if (rk->helper_of) { /* a helper process (a DataLoader worker): not a rank */
        KV(w, "helper_of", md_jw_int(w, rk->helper_of));
        KV(w, "role", md_jw_str(w, rk->role));
    }
    KV(w, "events", md_jw_int(w, (long long)rk->nevents));
    KV(w, "history", md_jw_bool(w, rk->history));
    KV(w, "replay_anomalies", md_jw_int(w, (long long)md_replay_anomalies(rk->r)));
    indicators(w, rk);
    peak(w, rk);
    steps(w, rk);
    settings(w, rk);
    pools(w, rk);
    findings(w, rk->findings, rk->nfindings);
    md_jw_close(w, '}');
}

static void driver_use(md_jw *w, const md_driver_use *u)
{
    md_jw_open(w, '{');
    KV(w, "library", md_jw_str(w, u->caller));
    KV(w, "what", md_jw_str(w, u->what ? u->what : ""));
    KV(w, "at_peak_mib", md_jw_mib(w, (double)u->at_peak / 1048576.0));
    KV(w, "max_mib", md_jw_mib(w, (double)u->max_live / 1048576.0));
    KV(w, "at_end_mib", md_jw_mib(w, (double)u->at_end / 1048576.0));
    KV(w, "calls", md_jw_int(w, (long long)u->allocs));
    KV(w, "physical", md_jw_int(w, u->physical));
    md_jw_close(w, '}');
}

/* The process's driver-level trace: its peak and each library's part. */
static void driver(md_jw *w, const md_sample_rank *r)
{
    md_driver_stats s;
    md_err err;
    if (!r->driver.present || md_driver_analyze(&r->driver, -1, &s, &err))
        return;
    md_jw_key(w, "driver");
    md_jw_open(w, '{');
    KV(w, "status", md_jw_str(w, r->driver.status));
    KV(w, "calls", md_jw_int(w, (long long)r->driver.n));
    KV(w, "peak_mib", md_jw_mib(w, (double)s.peak / 1048576.0));
    KV(w, "outside_torch_peak_mib", md_jw_mib(w, (double)s.outside_peak / 1048576.0));
    KV(w, "at_end_mib", md_jw_mib(w, (double)s.at_end / 1048576.0));
    md_jw_key(w, "libraries");
    md_jw_open(w, '[');
    for (size_t i = 0; i < s.nuse; i++)
        driver_use(w, &s.use[i]);
    md_jw_close(w, ']');
    md_jw_close(w, '}');
    md_driver_stats_free(&s);
}

static void sample_rank(md_jw *w, const md_sample_rank *r, const md_finding *f, size_t nf)
{
    const md_indicators *in = &r->indicators;
    md_jw_open(w, '{');
    KV(w, "rank", md_jw_int(w, r->rank));
    KV(w, "device", md_jw_int(w, r->device >= 0 ? r->device : r->local_rank));
    KV(w, "source", md_jw_str(w, r->source));
    KV(w, "kind", md_jw_str(w, r->driver_file ? "driver" : r->has_capture ? "capture" : "samples"));
    if (r->helper) { /* a helper process (a DataLoader worker): not a rank */
        KV(w, "helper_of", md_jw_int(w, r->ppid));
        KV(w, "role", md_jw_str(w, md_helper_role(r)));
    }
    if (r->has_capture) {
        KV(w, "complete", md_jw_int(w, r->capture.complete));
        KV(w, "status", md_jw_int(w, r->capture.status));
        KV(w, "snapshot", md_jw_str(w, r->capture.snapshot));
    }
    KV(w, "events", md_jw_int(w, 0));
    md_jw_key(w, "indicators");
    md_jw_open(w, '{');
    if (in->valid) {
        KV(w, "first_step_persistent_change_mib", md_jw_mib(w, in->first_step_persistent_change_mib));
        KV(w, "between_step_growth_mib", md_jw_mib(w, in->between_step_growth_mib));
        KV(w, "largest_forward_increase_mib", md_jw_mib(w, in->largest_forward_increase_mib));
    }
    KV(w, "maximum_peak_allocated_mib", md_jw_mib(w, in->maximum_peak_allocated_mib));
    md_jw_close(w, '}');
    driver(w, r);
    findings(w, f, nf);
    md_jw_close(w, '}');
}

void md_render_json(FILE *o, const md_report *rep, const md_out_opts *opt)
{
    (void)opt;
    md_jw w;
    md_jw_init(&w, o);
    md_jw_open(&w, '{');
    KV(&w, "schema", md_jw_int(&w, 1));
    KV(&w, "tool", md_jw_str(&w, "memdiag " MEMDIAG_VERSION));
    md_jw_key(&w, "ranks");
    md_jw_open(&w, '[');
    for (size_t i = 0; i < rep->n; i++)
        rank(&w, &rep->ranks[i]);
    for (size_t i = 0; i < rep->nsranks; i++)
        sample_rank(&w, &rep->sranks[i], rep->sfindings[i], rep->nsfindings[i]);
    md_jw_close(&w, ']');
    findings(&w, rep->cross, rep->ncross);
    md_jw_close(&w, '}');
    fputc('\n', o);
}

/* json.c - `diagnose --json`: the facts of text.c, machine-readable, in the
 * schema of docs/json-schema.md (schema 1): top-level schema, tool, ranks[]
 * with indicators and findings, and cross-rank findings. */
#include <math.h>
#include <string.h>
#include "report.h"

/* A minimal streaming JSON writer: per depth, whether a comma is due. */
typedef struct jw {
    FILE *o;
    int depth;
    int after_key;
    unsigned char started[64];
} jw;

/* Prefix of any value or key: a comma unless first at this depth or
 * right after a key. */
static void jw_prefix(jw *w)
{
    if (w->after_key) {
        w->after_key = 0;
        return;
    }
    if (w->started[w->depth])
        fputc(',', w->o);
    w->started[w->depth] = 1;
}

static void jw_str_raw(jw *w, const char *s)
{
    fputc('"', w->o);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(w->o, "\\%c", *p);
        else if (*p < 0x20)
            fprintf(w->o, "\\u%04x", *p);
        else
            fputc(*p, w->o);
    }
    fputc('"', w->o);
}

static void jw_key(jw *w, const char *k)
{
    jw_prefix(w);
    jw_str_raw(w, k);
    fputc(':', w->o);
    w->after_key = 1;
}

static void jw_open(jw *w, int c)
{
    jw_prefix(w);
    fputc(c, w->o);
    if (w->depth < 63)
        w->depth++;
    w->started[w->depth] = 0;
}

static void jw_close(jw *w, int c)
{
    fputc(c, w->o);
    if (w->depth > 0)
        w->depth--;
}

static void jw_str(jw *w, const char *s)
{
    jw_prefix(w);
    jw_str_raw(w, s);
}

static void jw_num(jw *w, double v)
{
    jw_prefix(w);
    if (isfinite(v))
        fprintf(w->o, "%.6g", v);
    else
        fputs("null", w->o);
}

static void jw_mib(jw *w, double v)
{
    jw_prefix(w);
    fprintf(w->o, "%.4f", isfinite(v) ? v : 0.0);
}

static void jw_int(jw *w, long long v)
{
    jw_prefix(w);
    fprintf(w->o, "%lld", v);
}

static void jw_null(jw *w)
{
    jw_prefix(w);
    fputs("null", w->o);
}

#define KV(w, k, call) do { jw_key(w, k); call; } while (0)

static void indicators(jw *w, const md_rank *rk)
{
    const md_indicators *in = md_analysis_indicators(rk->a);
    jw_key(w, "indicators");
    jw_open(w, '{');
    if (in->valid) {
        if (in->first_step_recorded)
            KV(w, "first_step_persistent_change_mib",
               jw_mib(w, in->first_step_persistent_change_mib));
        KV(w, "between_step_growth_mib", jw_mib(w, in->between_step_growth_mib));
        KV(w, "largest_forward_increase_mib", jw_mib(w, in->largest_forward_increase_mib));
    }
    KV(w, "maximum_peak_allocated_mib", jw_mib(w, in->maximum_peak_allocated_mib));
    jw_close(w, '}');
}

static void steps(jw *w, const md_rank *rk)
{
    size_t n;
    const md_step *st = md_analysis_steps(rk->a, &n);
    int src = md_analysis_step_source(rk->a);
    KV(w, "steps_source", jw_str(w, src == MD_STEPS_FROM_ANNOTATIONS ? "annotations"
                                    : src == MD_STEPS_FROM_FRAMES    ? "frames"
                                                                     : "none"));
    if (src == MD_STEPS_FROM_ANNOTATIONS && md_analysis_step_device(rk->a) != rk->device)
        KV(w, "steps_device", jw_int(w, md_analysis_step_device(rk->a)));
    KV(w, "optimizer", jw_str(w, md_analysis_optimizer(rk->a)));
    jw_key(w, "steps");
    jw_open(w, '[');
    for (size_t k = 0; k < n; k++) {
        jw_open(w, '{');
        KV(w, "step", jw_int(w, st[k].number));
        KV(w, "before_forward_mib", jw_mib(w, md_mib(md_replay_at(rk->r, st[k].fwd_start).allocated)));
        KV(w, "after_forward_mib", jw_mib(w, md_mib(md_replay_at(rk->r, st[k].after_forward).allocated)));
        KV(w, "after_backward_mib", jw_mib(w, md_mib(md_replay_at(rk->r, st[k].after_backward).allocated)));
        KV(w, "after_optimizer_step_mib", jw_mib(w, md_mib(md_replay_at(rk->r, st[k].after_optim).allocated)));
        KV(w, "after_clear_gradients_mib", jw_mib(w, md_mib(md_replay_at(rk->r, st[k].after_zero).allocated)));
        KV(w, "reserved_mib", jw_mib(w, md_mib(md_replay_at(rk->r, st[k].after_zero).reserved)));
        KV(w, "peak_allocated_mib", jw_mib(w, md_mib(st[k].peak)));
        jw_close(w, '}');
    }
    jw_close(w, ']');
}

static void peak(jw *w, const md_rank *rk)
{
    size_t n;
    const md_event *ev = md_snapshot_events(rk->s, rk->device, &n);
    long p = md_replay_peak_index(rk->r);
    jw_key(w, "peak");
    jw_open(w, '{');
    KV(w, "allocated_mib", jw_mib(w, md_mib(md_replay_peak_allocated(rk->r))));
    KV(w, "reserved_peak_mib", jw_mib(w, md_mib(md_replay_peak_reserved(rk->r))));
    KV(w, "event", jw_int(w, p));
    KV(w, "time_us", jw_int(w, p >= 0 ? ev[p].time_us : -1));
    KV(w, "step", jw_int(w, rk->peak_step));
    KV(w, "phase", jw_str(w, rk->peak_phase >= 0 ? md_phase_name(rk->peak_phase) : ""));
    jw_key(w, "by_category_mib");
    jw_open(w, '{');
    for (int c = 0; c < MD_CAT_COUNT; c++)
        KV(w, md_category_name(c), jw_mib(w, md_mib(rk->by_cat[c])));
    jw_close(w, '}');
    jw_key(w, "sites");
    jw_open(w, '[');
    for (size_t i = 0; i < rk->nsites && i < 20; i++) {
        const md_site *s = &rk->sites[i];
        char lab[512];
        jw_open(w, '{');
        KV(w, "site", jw_str(w, md_site_label(rk->s, s, lab, sizeof lab)));
        KV(w, "file", jw_str(w, md_snapshot_string(rk->s, s->frame_file)));
        KV(w, "line", jw_int(w, s->frame_line));
        KV(w, "function", jw_str(w, md_snapshot_string(rk->s, s->frame_name)));
        KV(w, "bytes", jw_int(w, (long long)s->bytes));
        KV(w, "count", jw_int(w, s->count));
        KV(w, "category", jw_str(w, md_category_name(s->category)));
        jw_close(w, '}');
    }
    jw_close(w, ']');
    jw_close(w, '}');
}

static void settings(jw *w, const md_rank *rk)
{
    const md_settings *st = md_snapshot_settings(rk->s);
    jw_key(w, "allocator_settings");
    if (!st->present) {
        jw_null(w);
        return;
    }
    jw_open(w, '{');
    KV(w, "PYTORCH_CUDA_ALLOC_CONF", jw_str(w, md_snapshot_string(rk->s, st->alloc_conf)));
    KV(w, "expandable_segments", jw_int(w, st->expandable_segments));
    KV(w, "max_split_size", jw_int(w, st->max_split_size));
    KV(w, "garbage_collection_threshold", jw_num(w, st->gc_threshold));
    jw_close(w, '}');
}

static void pools(jw *w, const md_rank *rk)
{
    md_pools p = md_private_pools(rk->s, rk->device);
    jw_key(w, "private_pools");
    jw_open(w, '{');
    KV(w, "count", jw_int(w, p.count));
    KV(w, "segments", jw_int(w, p.segments));
    KV(w, "reserved_mib", jw_mib(w, md_mib(p.reserved)));
    KV(w, "allocated_mib", jw_mib(w, md_mib(p.allocated)));
    jw_close(w, '}');
}

static void findings(jw *w, const md_finding *f, size_t n)
{
    jw_key(w, "findings");
    jw_open(w, '[');
    for (size_t i = 0; i < n; i++) {
        jw_open(w, '{');
        KV(w, "kind", jw_str(w, f[i].kind));
        KV(w, "severity", jw_str(w, md_severity_name(f[i].severity)));
        KV(w, "bytes", jw_int(w, (long long)f[i].bytes));
        if (f[i].rank >= 0)
            KV(w, "rank", jw_int(w, f[i].rank));
        if (f[i].device >= 0)
            KV(w, "device", jw_int(w, f[i].device));
        KV(w, "summary", jw_str(w, f[i].summary));
        jw_key(w, "evidence");
        jw_open(w, '[');
        for (int k = 0; k < f[i].nevidence; k++)
            jw_str(w, f[i].evidence[k]);
        jw_close(w, ']');
        jw_key(w, "sites");
        jw_open(w, '[');
        for (int k = 0; k < f[i].nsites; k++) {
            jw_open(w, '{');
            KV(w, "site", jw_str(w, f[i].sites[k].site));
            KV(w, "bytes", jw_int(w, (long long)f[i].sites[k].bytes));
            KV(w, "count", jw_int(w, f[i].sites[k].count));
            jw_close(w, '}');
        }
        jw_close(w, ']');
        KV(w, "advice", jw_str(w, f[i].advice));
        jw_close(w, '}');
    }
    jw_close(w, ']');
}

static void rank(jw *w, const md_rank *rk)
{
    jw_open(w, '{');
    KV(w, "rank", jw_int(w, rk->rank));
    KV(w, "device", jw_int(w, rk->device));
    KV(w, "source", jw_str(w, rk->path));
    KV(w, "kind", jw_str(w, "snapshot"));
    KV(w, "events", jw_int(w, (long long)rk->nevents));
    KV(w, "replay_anomalies", jw_int(w, (long long)md_replay_anomalies(rk->r)));
    indicators(w, rk);
    peak(w, rk);
    steps(w, rk);
    settings(w, rk);
    pools(w, rk);
    findings(w, rk->findings, rk->nfindings);
    jw_close(w, '}');
}

static void sample_rank(jw *w, const md_sample_rank *r, const md_finding *f, size_t nf)
{
    const md_indicators *in = &r->indicators;
    jw_open(w, '{');
    KV(w, "rank", jw_int(w, r->rank));
    KV(w, "device", jw_int(w, r->device >= 0 ? r->device : r->local_rank));
    KV(w, "source", jw_str(w, r->source));
    KV(w, "kind", jw_str(w, r->has_capture ? "capture" : "samples"));
    if (r->has_capture) {
        KV(w, "complete", jw_int(w, r->capture.complete));
        KV(w, "status", jw_int(w, r->capture.status));
        KV(w, "snapshot", jw_str(w, r->capture.snapshot));
    }
    KV(w, "events", jw_int(w, 0));
    jw_key(w, "indicators");
    jw_open(w, '{');
    if (in->valid) {
        KV(w, "first_step_persistent_change_mib", jw_mib(w, in->first_step_persistent_change_mib));
        KV(w, "between_step_growth_mib", jw_mib(w, in->between_step_growth_mib));
        KV(w, "largest_forward_increase_mib", jw_mib(w, in->largest_forward_increase_mib));
    }
    KV(w, "maximum_peak_allocated_mib", jw_mib(w, in->maximum_peak_allocated_mib));
    jw_close(w, '}');
    findings(w, f, nf);
    jw_close(w, '}');
}

void md_render_json(FILE *o, const md_report *rep, const md_out_opts *opt)
{
    (void)opt;
    jw w;
    memset(&w, 0, sizeof w);
    w.o = o;
    jw_open(&w, '{');
    KV(&w, "schema", jw_int(&w, 1));
    KV(&w, "tool", jw_str(&w, "memdiag " MEMDIAG_VERSION));
    jw_key(&w, "ranks");
    jw_open(&w, '[');
    for (size_t i = 0; i < rep->n; i++)
        rank(&w, &rep->ranks[i]);
    for (size_t i = 0; i < rep->nsranks; i++)
        sample_rank(&w, &rep->sranks[i], rep->sfindings[i], rep->nsfindings[i]);
    jw_close(&w, ']');
    findings(&w, rep->cross, rep->ncross);
    jw_close(&w, '}');
    fputc('\n', o);
}

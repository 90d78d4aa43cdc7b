/* report_html.c - `memdiag report`: everything summary and diagnose say,
 * as one HTML page that works offline: per rank, memory over time with
 * the steps and phases shaded, the findings with their evidence and
 * advice, what is live at the peak by category and site, and a flame
 * graph of it. A trace of any length is reduced here to at most
 * MAX_COLUMNS columns (min and max per column), so the page stays small. */
#include <stdlib.h>
#include <string.h>
#include "flame.h"
#include "page.h"
#include "report.h"

#define MAX_COLUMNS 1000

/* ---- timelines ------------------------------------------------------------- */

typedef struct axis {
    const md_event *ev;
    size_t n;
    int timed;    /* x in seconds from the first event, else event numbers */
    double span;  /* of x */
} axis;

static axis axis_of(const md_rank *rk)
{
    axis a;
    a.ev = md_snapshot_events(rk->s, rk->device, &a.n);
    a.timed = a.n > 1 && a.ev[0].time_us >= 0 && a.ev[a.n - 1].time_us > a.ev[0].time_us;
    a.span = a.timed ? ((double)a.ev[a.n - 1].time_us - (double)a.ev[0].time_us) / 1e6
                     : (double)a.n;
    return a;
}

/* x of the state after event i (-1: before the first) */
static double x_of(const axis *a, long i)
{
    if (i < 0)
        return 0;
    if (!a->timed)
        return (double)(i + 1);
    double x = ((double)a->ev[i].time_us - (double)a->ev[0].time_us) / 1e6; /* no overflow */
    return x < 0 ? 0 : x > a->span ? a->span : x;
}

typedef struct col {
    double x, amin, amax, rmax;
    double alast, rlast; /* after the column's last event */
    int seen;
} col;

/* The states after events lo..hi (lo = -1: the initial state too), each
 * in the column of its x; an empty column keeps the state before it. */
static col *columns(const md_rank *rk, const axis *a, long lo, long hi, size_t *nc)
{
    size_t n = (size_t)(hi - lo + 1), c = n < MAX_COLUMNS ? n : MAX_COLUMNS;
    double x0 = x_of(a, lo), w = x_of(a, hi) - x0;
    col *v = calloc(c, sizeof *v);
    if (!v)
        return NULL;
    for (size_t k = 0; k < c; k++)
        v[k].x = x0 + w * (double)k / (double)c;
    for (long i = lo; i <= hi; i++) {
        md_point p = i < 0 ? md_replay_initial(rk->r) : md_replay_at(rk->r, i);
        double x = x_of(a, i), al = md_mib(p.allocated), re = md_mib(p.reserved);
        size_t k = w > 0 && x > x0 ? (size_t)((x - x0) / w * (double)c) : 0;
        col *d = &v[k < c ? k : c - 1];
        d->amin = d->seen && d->amin < al ? d->amin : al;
        d->amax = d->seen && d->amax > al ? d->amax : al;
        d->rmax = d->seen && d->rmax > re ? d->rmax : re;
        d->alast = al;
        d->rlast = re;
        d->seen = 1;
    }
    for (size_t k = 1; k < c; k++)
        if (!v[k].seen) { /* nothing happened: the state after the last event holds */
            v[k].amin = v[k].amax = v[k].alast = v[k - 1].alast;
            v[k].rmax = v[k].rlast = v[k - 1].rlast;
            v[k].seen = 1;
        }
    *nc = c;
    return v;
}

enum { C_AMIN, C_AMAX, C_RMAX };

static void numbers(FILE *o, const char *key, const col *v, size_t n, int which)
{
    fprintf(o, "%s:[", key);
    for (size_t k = 0; k < n; k++) {
        double x = which == C_AMIN ? v[k].amin : which == C_AMAX ? v[k].amax : v[k].rmax;
        fprintf(o, k ? ",%.2f" : "%.2f", x);
    }
    fputs("],", o);
}

static void phase_x(FILE *o, const axis *a, long i, long lo)
{
    if (i < lo) /* the phase is absent: the step's start */
        fputs(",null", o);
    else
        fprintf(o, ",%.6g", x_of(a, i));
}

/* Events lo..hi of rk's trace: the columns, the steps that lie inside,
 * and the peak at event peak (MiB) if it does. */
static int rank_timeline(FILE *o, const md_rank *rk, long lo, long hi, long peak, double peak_mib)
{
    axis a = axis_of(rk);
    size_t nc, nst;
    col *v = columns(rk, &a, lo, hi, &nc);
    if (!v)
        return -1;
    fprintf(o, "{unit:\"%s\",", a.timed ? "s" : "event");
    fputs("xs:[", o);
    for (size_t k = 0; k < nc; k++)
        fprintf(o, k ? ",%.6g" : "%.6g", v[k].x);
    fputs("],", o);
    numbers(o, "amin", v, nc, C_AMIN);
    numbers(o, "amax", v, nc, C_AMAX);
    numbers(o, "rmax", v, nc, C_RMAX);
    free(v);
    const md_step *st = md_analysis_steps(rk->a, &nst);
    fputs("steps:[", o);
    for (size_t i = 0, first = 1; i < nst; i++) {
        if (st[i].fwd_start < lo || st[i].after_zero > hi)
            continue;
        fprintf(o, "%s[%.6g,%.6g,%d", first ? "" : ",", x_of(&a, st[i].fwd_start),
                x_of(&a, st[i].after_zero), st[i].number);
        first = 0;
        phase_x(o, &a, st[i].after_forward, st[i].fwd_start);
        phase_x(o, &a, st[i].after_backward, st[i].after_forward);
        phase_x(o, &a, st[i].after_optim, st[i].after_backward);
        fputc(']', o);
    }
    if (peak >= lo && peak <= hi)
        fprintf(o, "],peak:[%.6g,%.2f]}", x_of(&a, peak), peak_mib);
    else
        fputs("],peak:null}", o);
    return 0;
}

/* The step holding the peak, or NULL. */
static const md_step *peak_step(const md_rank *rk)
{
    size_t n;
    const md_step *st = md_analysis_steps(rk->a, &n);
    for (size_t i = 0; i < n && rk->peak_step >= 0; i++)
        if (st[i].number == rk->peak_step)
            return &st[i];
    return NULL;
}

/* With a driver-level trace: what was live through the driver at each
 * sample ("drv", drawn beside reserved and the NVML figure). */
static void sample_driver_series(FILE *o, const md_sample_rank *r)
{
    uint64_t *live = md_driver_at_samples(r);
    if (live) {
        fputs("],drv:[", o);
        for (size_t i = 0; i < r->nsamples; i++)
            fprintf(o, i ? ",%.2f" : "%.2f", md_mib(live[i]));
    }
    free(live);
}

/* A capture's or seed report's samples: one column each. */
static void sample_timeline(FILE *o, const md_sample_rank *r)
{
    const md_sample *s = r->samples;
    size_t n = r->nsamples, peak = 0;
    int used = n > 0;
    for (size_t i = 0; i < n; i++) {
        used = used && s[i].process_used_mib >= 0;
        if (s[i].peak_allocated_mib > s[peak].peak_allocated_mib)
            peak = i;
    }
    fputs("{unit:\"sample\",xs:[", o);
    for (size_t i = 0; i < n; i++)
        fprintf(o, i ? ",%zu" : "%zu", i);
    const char *keys[] = {"],amin:[", "],amax:[", "],rmax:[", "],used:["};
    for (int k = 0; k < 3 + used; k++) {
        fputs(keys[k], o);
        for (size_t i = 0; i < n; i++)
            fprintf(o, i ? ",%.2f" : "%.2f",
                    k < 2 ? s[i].allocated_mib : k == 2 ? s[i].reserved_mib : s[i].process_used_mib);
    }
    sample_driver_series(o, r);
    fputs("],names:[", o);
    for (size_t i = 0; i < n; i++) {
        char name[64];
        snprintf(name, sizeof name, "step %d %s", s[i].step, md_sample_phase_name(s[i].phase));
        fputs(i ? "," : "", o);
        md_js_string(o, name);
    }
    fputs("],steps:[", o);
    int first = 1;
    for (size_t i = 0, k = 0; i < n; i = k) { /* a step: its run of samples */
        for (k = i; k < n && s[k].step == s[i].step; k++)
            ;
        if (s[i].step < 0)
            continue;
        long ph[3] = {-1, -1, -1};
        for (size_t j = i; j < k; j++)
            if (s[j].phase >= MD_SP_AFTER_FORWARD && s[j].phase <= MD_SP_AFTER_OPTIMIZER_STEP)
                ph[s[j].phase - MD_SP_AFTER_FORWARD] = (long)j;
        fprintf(o, "%s[%zu,%zu,%d", first ? "" : ",", i, k - 1, s[i].step);
        first = 0;
        for (int j = 0; j < 3; j++) {
            if (ph[j] < 0)
                fputs(",null", o);
            else
                fprintf(o, ",%ld", ph[j]);
        }
        fputc(']', o);
    }
    if (n)
        fprintf(o, "],peak:[%zu,%.2f]}", peak, s[peak].peak_allocated_mib);
    else
        fputs("],peak:null}", o);
}

/* ---- sections ------------------------------------------------------------- */

static void finding_html(FILE *o, const md_finding *f)
{
    fprintf(o, "<div class=\"md-finding\"><span class=\"sev-%s\">[%s] %s</span>: ",
            md_severity_name(f->severity), md_severity_name(f->severity), f->kind);
    md_html_text(o, f->summary);
    fputs("\n<ul>", o);
    for (int i = 0; i < f->nevidence; i++) {
        fputs("<li>", o);
        md_html_text(o, f->evidence[i]);
        fputs("</li>", o);
    }
    for (int i = 0; i < f->nsites; i++) {
        fprintf(o, "<li>site: %.1f MiB in %u allocations at ", md_mib(f->sites[i].bytes),
                f->sites[i].count);
        md_html_text(o, f->sites[i].site);
        fputs("</li>", o);
    }
    fputs("</ul><div class=\"md-advice\">advice: ", o);
    md_html_text(o, f->advice);
    fputs("</div></div>\n", o);
}

static void findings_html(FILE *o, const md_finding *f, size_t n)
{
    if (!n)
        fputs("<div>none: nothing above the thresholds of docs/diagnosis.md</div>\n", o);
    for (size_t i = 0; i < n; i++)
        finding_html(o, &f[i]);
}

static void live_html(FILE *o, const md_rank *rk, int top)
{
    fprintf(o, "<h3>Live %s</h3>\n<table><tr><th>category</th><th>MiB</th></tr>\n",
            rk->history ? "at the peak" : "when the snapshot was taken");
    for (int c = 0; c < MD_CAT_COUNT; c++)
        if (rk->by_cat[c] >= (1u << 20) / 10)
            fprintf(o, "<tr><td>%s</td><td class=\"n\">%.1f</td></tr>\n", md_category_name(c),
                    md_mib(rk->by_cat[c]));
    fputs("</table>\n<table><tr><th>MiB</th><th>allocations</th><th>category</th><th>site</th>"
          "</tr>\n", o);
    for (size_t i = 0; i < rk->nsites && (int)i < top; i++) {
        char lab[512];
        fprintf(o, "<tr><td class=\"n\">%.1f</td><td class=\"n\">%u</td><td>%s</td><td>",
                md_mib(rk->sites[i].bytes), rk->sites[i].count,
                md_category_name(rk->sites[i].category));
        md_html_text(o, md_site_label(rk->s, &rk->sites[i], lab, sizeof lab));
        fputs("</td></tr>\n", o);
    }
    fputs("</table>\n", o);
}

static void compare_html(FILE *o, const md_rank *rk, size_t n)
{
    fputs("<h2>Ranks compared</h2>\n<table><tr><th>rank</th><th>device</th><th>peak MiB</th>"
          "<th>reserved</th><th>largest forward increase</th><th>persistent after step 0</th>"
          "<th>growth per step</th><th>file</th></tr>\n", o);
    for (size_t i = 0; i < n; i++) {
        const md_indicators *in = md_analysis_indicators(rk[i].a);
        fprintf(o, "<tr><td>%d</td><td>cuda:%d%s</td><td class=\"n\">%.1f</td>"
                   "<td class=\"n\">%.1f</td><td class=\"n\">%.1f</td><td class=\"n\">%.1f</td>"
                   "<td class=\"n\">%.1f</td><td>", rk[i].rank, rk[i].device,
                rk[i].further ? " (further)" : rk[i].helper_of ? " (helper)" : "",
                in->maximum_peak_allocated_mib,
                md_mib(md_replay_peak_reserved(rk[i].r)), in->largest_forward_increase_mib,
                in->first_step_persistent_change_mib, in->between_step_growth_mib);
        md_html_text(o, rk[i].path);
        fputs("</td></tr>\n", o);
    }
    fputs("</table>\n", o);
}

static void rank_head(FILE *o, const md_rank *rk)
{
    axis a = axis_of(rk);
    long p = md_analysis_peak_index(rk->a);
    size_t nst;
    md_analysis_steps(rk->a, &nst);
    fprintf(o, "<h2>rank %d (cuda:%d%s): ", rk->rank, rk->device,
            rk->further ? ", a further GPU of the process" : "");
    if (rk->helper_of) { /* a DataLoader worker's snapshot: its parent's helper */
        md_html_text(o, rk->role); /* from a capture file: escaped */
        fprintf(o, " of pid %d: ", rk->helper_of);
    }
    md_html_text(o, rk->path);
    if (!rk->history) {
        md_point end = md_replay_at(rk->r, (long)rk->nevents - 1);
        fprintf(o, "</h2>\n<div class=\"md-sub\">no history: %.1f MiB allocated, %.1f MiB "
                   "reserved when the snapshot was taken (its peak, steps and lifetimes are not "
                   "in the file: record with torch.cuda.memory._record_memory_history() before "
                   "the work, or memdiag run)</div>\n", md_mib(end.allocated), md_mib(end.reserved));
        return;
    }
    fprintf(o, "</h2>\n<div class=\"md-sub\">%zu events, peak %.1f MiB allocated", rk->nevents,
            md_mib(md_replay_peak_allocated(rk->r)));
    if (a.timed && p >= 0)
        fprintf(o, " at +%.3f s", x_of(&a, p));
    char where[160];
    fputs(md_rank_peak_where(rk, where, sizeof where), o);
    fprintf(o, ", reserved peak %.1f MiB; %zu steps</div>\n",
            md_mib(md_replay_peak_reserved(rk->r)), nst);
    const md_settings *st = md_snapshot_settings(rk->s);
    if (st->present) {
        const char *conf = md_snapshot_string(rk->s, st->alloc_conf);
        fputs("<div class=\"md-sub\">PYTORCH_CUDA_ALLOC_CONF=", o);
        md_html_text(o, conf[0] ? conf : "(unset)");
        fprintf(o, "; expandable_segments %s", st->expandable_segments ? "on" : "off");
        if (st->max_split_size >= 0)
            fprintf(o, "; max_split_size %.0f MiB", md_mib((uint64_t)st->max_split_size));
        fputs("</div>\n", o);
    }
}

/* What leaks are judged by where it is not every step: the calls of a
 * trace without steps, or the iterations of optimizers stepping in turn. */
static void iterations_html(FILE *o, const md_rank *rk)
{
    const md_frame *call = md_analysis_call_site(rk->a);
    char text[1024];
    size_t nit, distinct = md_analysis_period_say(rk->a, text, sizeof text);
    md_analysis_iterations(rk->a, &nit);
    if (call) {
        fprintf(o, "<div>%zu calls and the last of ", nit);
        md_html_text(o, md_frame_label(rk->s, call, text, sizeof text));
        fputs(" (the line of the script that allocates most often): leaks are judged call to "
              "call</div>\n", o);
    } else if (distinct) {
        fprintf(o, "<div>%zu optimizers step in turn (", distinct);
        md_html_text(o, text);
        fprintf(o, "): %zu iterations of %zu steps; leaks and indicators count iterations</div>\n",
                nit, md_analysis_period(rk->a));
    }
}

static void steps_html(FILE *o, const md_rank *rk)
{
    size_t n;
    const md_step *st = md_analysis_steps(rk->a, &n);
    const md_indicators *in = md_analysis_indicators(rk->a);
    fputs("<h3>Steps and indicators</h3>\n", o);
    if (!n) {
        fputs("<div>no steps found (no optimizer annotations or optimizer/backward frames)"
              "</div>\n", o);
        iterations_html(o, rk);
        return;
    }
    iterations_html(o, rk);
    fputs("<table><tr><th>MiB allocated</th><th>before forward</th><th>after forward</th>"
          "<th>after backward</th><th>after optimizer</th><th>after zero_grad</th>"
          "<th>peak</th></tr>\n", o);
    for (size_t k = 0; k < n; k++) {
        long at[5] = {st[k].fwd_start, st[k].after_forward, st[k].after_backward,
                      st[k].after_optim, st[k].after_zero};
        fprintf(o, "<tr><td>step %d</td>", st[k].number);
        for (int j = 0; j < 5; j++)
            fprintf(o, "<td class=\"n\">%.1f</td>", md_mib(md_replay_at(rk->r, at[j]).allocated));
        fprintf(o, "<td class=\"n\">%.1f</td></tr>\n", md_mib(st[k].peak));
    }
    fputs("</table>\n<table>", o);
    if (in->valid) {
        if (in->first_step_recorded)
            fprintf(o, "<tr><td>first_step_persistent_change_mib</td><td class=\"n\">%.1f</td>"
                       "</tr>", in->first_step_persistent_change_mib);
        fprintf(o, "<tr><td>between_step_growth_mib</td><td class=\"n\">%.1f</td></tr>"
                   "<tr><td>largest_forward_increase_mib</td><td class=\"n\">%.1f</td></tr>",
                in->between_step_growth_mib, in->largest_forward_increase_mib);
    }
    fprintf(o, "<tr><td>maximum_peak_allocated_mib</td><td class=\"n\">%.1f</td></tr></table>\n",
            in->maximum_peak_allocated_mib);
}

#define TIMELINE_KEY                                                                      \
    "<div class=\"md-sub\">allocated: blue (the band spans each column's lowest and "    \
    "highest), reserved: orange, the process's GPU use (NVML): gray, through the CUDA "    \
    "driver (a driver-level trace): purple; steps shaded, phase ends as lines, the peak "  \
    "in red</div>\n"

/* One snapshot rank: its section, and the calls that draw it into calls. */
static int rank_section(FILE *o, FILE *calls, const md_rank *rk, size_t k, int top)
{
    rank_head(o, rk);
    fprintf(o, "<h3>Memory over time</h3>\n" TIMELINE_KEY "<div id=\"t%zu\"></div>\n"
               "<script>\nconst T%zu = ", k, k);
    if (rank_timeline(o, rk, -1, (long)rk->nevents - 1, md_analysis_peak_index(rk->a),
                      md_mib(md_replay_peak_allocated(rk->r))))
        return -1;
    fputs(";\n</script>\n", o);
    fprintf(calls, "mdTimeline(document.getElementById('t%zu'), T%zu),\n", k, k);
    const md_step *ps = peak_step(rk);
    if (ps && ps->after_zero - ps->fwd_start >= 2) { /* the step that peaked, in detail */
        fprintf(o, "<h3>Step %d, where the peak is</h3>\n<div id=\"s%zu\"></div>\n"
                   "<script>\nconst S%zu = ", ps->number, k, k);
        if (rank_timeline(o, rk, ps->fwd_start, ps->after_zero, ps->peak_index, md_mib(ps->peak)))
            return -1;
        fputs(";\n</script>\n", o);
        fprintf(calls, "mdTimeline(document.getElementById('s%zu'), S%zu),\n", k, k);
    }
    fputs("<h3>Findings</h3>\n", o);
    findings_html(o, rk->findings, rk->nfindings);
    steps_html(o, rk);
    live_html(o, rk, top);
    md_flame_node *v;
    size_t n;
    md_err err;
    if (md_flame_at(rk->a, md_analysis_peak_index(rk->a), 0, &v, &n, &err))
        return -1;
    fprintf(o, "<h3>Flame graph at the peak</h3>\n<div id=\"f%zu\"></div>\n<script>\n"
               "const F%zu = ", k, k);
    int rc = md_page_flame_data(o, rk->s, v, n);
    free(v);
    fputs(";\n</script>\n", o);
    fprintf(calls, "mdFlame(document.getElementById('f%zu'), F%zu),\n", k, k);
    return rc;
}

/* The driver-level trace over time, in mdTimeline's form. */
static void driver_timeline(FILE *o, FILE *calls, const md_sample_rank *r, const md_driver_stats *s,
                            size_t k)
{
    md_driver_col *c;
    size_t n;
    md_err err;
    if (md_driver_timeline(&r->driver, -1, 1000, &c, &n, &err) || !n)
        return;
    fprintf(o, "<div class=\"md-sub\">all libraries: blue (each column's lowest to highest); "
               "PyTorch's caching allocator (its reserved memory): orange</div>\n"
               "<div id=\"d%zu\"></div>\n<script>\nconst D%zu = {unit:\"s\",xs:[", k, k);
    for (size_t i = 0; i < n; i++)
        fprintf(o, i ? ",%.6g" : "%.6g", c[i].seconds);
    const char *keys[] = {"],amin:[", "],amax:[", "],rmax:["};
    for (int j = 0; j < 3; j++) {
        fputs(keys[j], o);
        for (size_t i = 0; i < n; i++)
            fprintf(o, i ? ",%.2f" : "%.2f", md_mib(j == 0 ? c[i].lo : j == 1 ? c[i].hi : c[i].torch));
    }
    fprintf(o, "],steps:[],peak:[%.6g,%.2f]};\n</script>\n",
            ((double)s->peak_ns - (double)s->start_ns) / 1e9, md_mib(s->peak));
    fprintf(calls, "mdTimeline(document.getElementById('d%zu'), D%zu),\n", k, k);
    free(c);
}

/* The process's driver-level trace: each library's device memory. */
static void driver_html(FILE *o, FILE *calls, const md_sample_rank *r, size_t k)
{
    md_driver_stats s;
    md_err err;
    if (!r->driver.present)
        return;
    fputs("<h3>Device memory through the CUDA driver</h3>\n<div class=\"md-sub\">", o);
    if (md_driver_analyze(&r->driver, -1, &s, &err)) {
        md_html_text(o, err.msg);
        fputs("</div>\n", o);
        return;
    }
    fprintf(o, "tracer %s; %zu calls; peak %.1f MiB, %.1f MiB outside PyTorch's caching "
               "allocator at most, %.1f MiB at the end</div>\n<table><tr><th>library</th>"
               "<th></th><th>MiB at the peak</th><th>largest</th><th>at the end</th>"
               "<th>calls</th></tr>", r->driver.status[0] ? r->driver.status : "on", r->driver.n,
            md_mib(s.peak), md_mib(s.outside_peak), md_mib(s.at_end));
    for (size_t i = 0; i < s.nuse; i++) {
        const md_driver_use *u = &s.use[i];
        fputs("<tr><td>", o);
        md_html_text(o, u->caller[0] ? u->caller : "?");
        fputs("</td><td>", o);
        md_html_text(o, u->what ? u->what : "");
        fprintf(o, "%s</td><td class=\"n\">%.1f</td><td class=\"n\">%.1f</td>"
                   "<td class=\"n\">%.1f</td><td class=\"n\">%zu</td></tr>",
                u->physical ? " (cuMemCreate)" : u->async ? " (stream-ordered pool)" : "",
                md_mib(u->at_peak), md_mib(u->max_live), md_mib(u->at_end), u->allocs);
    }
    fputs("</table>\n", o);
    driver_timeline(o, calls, r, &s, k);
    md_driver_stats_free(&s);
}

static void sample_section(FILE *o, FILE *calls, const md_sample_rank *r, const md_finding *f,
                           size_t nf, size_t k)
{
    fprintf(o, "<h2>rank %d (cuda:%d%s): ", r->rank, r->device >= 0 ? r->device : r->local_rank,
            r->further_device ? ", a further GPU of the process" : "");
    if (r->helper) {
        md_html_text(o, md_helper_role(r));
        fprintf(o, " of pid %d: ", r->ppid);
    }
    md_html_text(o, r->source);
    if (r->driver_file)
        fprintf(o, "</h2>\n<div class=\"md-sub\">driver-level trace of pid %d (no phase samples "
                   "from this process)", r->pid);
    else
        fprintf(o, "</h2>\n<div class=\"md-sub\">%s, %zu phase samples, peak %.1f MiB allocated",
                r->has_capture ? "memdiag capture" : "seed-script report", r->nsamples,
                r->indicators.maximum_peak_allocated_mib);
    if (r->has_capture && !r->driver_file)
        fprintf(o, "; %s, %zu steps", r->capture.complete ? "complete" : "incomplete",
                r->capture.steps);
    fputs("</div>\n", o);
    if (r->nsamples) {
        fprintf(o, "<h3>Memory at each phase sample</h3>\n" TIMELINE_KEY
                   "<div id=\"t%zu\"></div>\n<script>\nconst T%zu = ", k, k);
        sample_timeline(o, r);
        fputs(";\n</script>\n", o);
        fprintf(calls, "mdTimeline(document.getElementById('t%zu'), T%zu),\n", k, k);
    }
    fputs("<h3>Findings</h3>\n", o);
    findings_html(o, f, nf);
    driver_html(o, calls, r, k);
}

int md_render_report_html(FILE *o, const md_report *rep, const md_out_opts *opt,
                          const char *title)
{
    char *calls = NULL;
    size_t ncalls = 0;
    FILE *c = open_memstream(&calls, &ncalls);
    if (!c)
        return -1;
    fputs("window.memdiag = [\n", c);
    md_page_begin(o, title);
    fputs("<h1>", o);
    md_html_text(o, title);
    fprintf(o, "</h1>\n<div class=\"md-sub\">%zu snapshot trace%s, %zu sample series; "
               "memdiag " MEMDIAG_VERSION "</div>\n", rep->n, rep->n == 1 ? "" : "s", rep->nsranks);
    if (rep->ncross) {
        fputs("<h2>Across ranks</h2>\n", o);
        findings_html(o, rep->cross, rep->ncross);
    }
    if (rep->n > 1)
        compare_html(o, rep->ranks, rep->n);
    int rc = 0;
    size_t k = 0;
    for (size_t i = 0; i < rep->n && !rc; i++)
        rc = rank_section(o, c, &rep->ranks[i], k++, opt->top);
    for (size_t i = 0; i < rep->nsranks && !rc; i++)
        sample_section(o, c, &rep->sranks[i], rep->sfindings[i], rep->nsfindings[i], k++);
    fputs("];\n", c);
    if (fclose(c))
        rc = -1;
    if (!rc)
        rc = md_page_end(o, calls);
    free(calls);
    return rc;
}

/* diffout.c - `memdiag diff` as text (a headline per rank, then the
 * figures side by side) or JSON (docs/json-schema.md, "diff"). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "diff.h"
#include "jw.h"

static double pct(double b, double a) { return b > 0 ? 100.0 * (a - b) / b : 0; }

/* ---- text ------------------------------------------------------------------ */

static void place(FILE *o, const md_side *s)
{
    fprintf(o, "== rank %d (cuda:%d%s), %s", md_side_rank(s), md_side_device(s),
            md_side_further(s) ? ", a further GPU of the process" : "", md_side_kind(s));
}

static void cell(FILE *o, double v)
{
    if (isnan(v))
        fprintf(o, " %10s", "-");
    else
        fprintf(o, " %10.1f", v);
}

/* One figure on both sides (NAN: the side lacks it) and its change. */
static void row(FILE *o, const char *what, double b, double a, int with_pct)
{
    if (isnan(b) && isnan(a))
        return;
    fprintf(o, "  %-30s", what);
    cell(o, b);
    cell(o, a);
    if (!isnan(b) && !isnan(a)) {
        fprintf(o, " %+10.1f", a - b);
        if (with_pct && b > 0)
            fprintf(o, "  %+.1f%%", pct(b, a));
    }
    fputc('\n', o);
}

static double ind_or_none(const md_indicators *in, double v, int needs_first)
{
    return in->valid && (!needs_first || in->first_step_recorded) ? v : NAN;
}

static void figures(FILE *o, const md_figs *b, const md_figs *a)
{
    fprintf(o, "  %-30s %10s %10s %10s\n", "MiB", "before", "after", "change");
    row(o, "peak allocated", b->peak, a->peak, 1);
    row(o, "peak reserved", b->peak_reserved, a->peak_reserved, 1);
    row(o, "allocated at the end", b->end_allocated, a->end_allocated, 0);
    row(o, "process's GPU use, peak (NVML)", b->process_used_peak, a->process_used_peak, 1);
    row(o, "through the driver, peak", b->driver_peak, a->driver_peak, 1);
    row(o, "  outside PyTorch's allocator", b->driver_outside, a->driver_outside, 1);
    const md_indicators *ib = &b->ind, *ia = &a->ind;
    row(o, "persistent after step 0",
        ind_or_none(ib, ib->first_step_persistent_change_mib, 1),
        ind_or_none(ia, ia->first_step_persistent_change_mib, 1), 0);
    row(o, "growth between steps", ind_or_none(ib, ib->between_step_growth_mib, 0),
        ind_or_none(ia, ia->between_step_growth_mib, 0), 0);
    row(o, "largest forward increase", ind_or_none(ib, ib->largest_forward_increase_mib, 0),
        ind_or_none(ia, ia->largest_forward_increase_mib, 0), 0);
    if (b->steps >= 0 || a->steps >= 0)
        fprintf(o, "  %-30s %10ld %10ld\n", "steps", b->steps, a->steps);
}

static void categories(FILE *o, const md_rank *b, const md_rank *a)
{
    fprintf(o, "  live at peak by category, MiB\n");
    for (int c = 0; c < MD_CAT_COUNT; c++) {
        if (b->by_cat[c] < (1u << 20) / 10 && a->by_cat[c] < (1u << 20) / 10)
            continue;
        char what[40];
        snprintf(what, sizeof what, "  %s", md_category_name(c));
        row(o, what, md_mib(b->by_cat[c]), md_mib(a->by_cat[c]), 0);
    }
}

static int sites(FILE *o, const md_rank *b, const md_rank *a, int top)
{
    md_site_diff *v;
    size_t n;
    if (top <= 0)
        return 0;
    if (md_diff_sites(b, a, &v, &n))
        return -1;
    int shown = 0;
    for (size_t i = 0; i < n && shown < top; i++) {
        double cb = md_mib(v[i].before), ca = md_mib(v[i].after);
        if (ca - cb < 0.05 && cb - ca < 0.05)
            break; /* sorted: the rest did not change */
        if (!shown++)
            fprintf(o, "  sites at peak, largest change first, MiB\n");
        fprintf(o, "    %+10.1f  %9.1f -> %9.1f  %s\n", ca - cb, cb, ca, v[i].site);
    }
    free(v);
    return 0;
}

/* Each library's largest through the driver, where either side traced it. */
static int driver_libraries(FILE *o, const md_sample_rank *b, const md_sample_rank *a)
{
    md_site_diff *v;
    size_t n;
    if (md_diff_driver(b, a, &v, &n))
        return -1;
    if (n)
        fprintf(o, "  through the driver by library, largest held, MiB\n");
    for (size_t i = 0; i < n; i++) {
        char what[64]; /* a library's file name: MD_DRIVER_NAME_LEN */
        snprintf(what, sizeof what, "  %.*s", (int)sizeof what - 3, v[i].site);
        row(o, what, md_mib(v[i].before), md_mib(v[i].after), 0);
    }
    free(v);
    return 0;
}

static void finding_line(FILE *o, const md_finding_diff *d)
{
    static const char *word[] = {"gone", "new", "kept"};
    const md_finding *f = d->after ? d->after : d->before;
    fprintf(o, "    %-5s [%s", word[d->status], md_severity_name(f->severity));
    if (d->status == MD_DIFF_KEPT && d->before->severity != d->after->severity)
        fprintf(o, ", was %s", md_severity_name(d->before->severity));
    fprintf(o, "] %s", f->kind);
    if (f->device >= 0)
        fprintf(o, " (cuda:%d)", f->device);
    if (d->status == MD_DIFF_KEPT)
        fprintf(o, ": %.1f -> %.1f MiB\n", md_mib(d->before->bytes), md_mib(d->after->bytes));
    else
        fprintf(o, ": %s\n", f->summary);
}

static void finding_lines(FILE *o, const md_finding_diff *v, size_t n, const char *title)
{
    if (n)
        fprintf(o, "  %s\n", title);
    for (size_t i = 0; i < n; i++)
        finding_line(o, &v[i]);
}

static int findings(FILE *o, const md_finding *b, size_t nb, const md_finding *a, size_t na,
                    const char *title)
{
    md_finding_diff *v;
    size_t n;
    if (md_diff_findings(b, nb, a, na, &v, &n))
        return -1;
    finding_lines(o, v, n, title);
    free(v);
    return 0;
}

/* "peak allocated 1934.5 -> 671.7 MiB (-1262.8, -65.3%); gone: leak" */
static void headline(FILE *o, const md_figs *b, const md_figs *a, const md_finding_diff *v,
                     size_t n)
{
    fprintf(o, "  =>  peak allocated ");
    if (b->peak - a->peak < 0.05 && a->peak - b->peak < 0.05)
        fprintf(o, "unchanged at %.1f MiB", a->peak);
    else
        fprintf(o, "%.1f -> %.1f MiB (%+.1f, %+.1f%%)", b->peak, a->peak, a->peak - b->peak,
                pct(b->peak, a->peak));
    for (int status = MD_DIFF_GONE; status <= MD_DIFF_NEW; status++) {
        int any = 0;
        for (size_t i = 0; i < n; i++) {
            if (v[i].status != status)
                continue;
            const md_finding *f = v[i].after ? v[i].after : v[i].before;
            fprintf(o, "%s%s", any ? ", " : status == MD_DIFF_GONE ? "; gone: " : "; new: ",
                    f->kind);
            any = 1;
        }
    }
    fputc('\n', o);
}

static int pair_text(FILE *o, const md_diff_pair *p, const md_out_opts *opt)
{
    const md_side *one = md_side_present(&p->before) ? &p->before : &p->after;
    place(o, one);
    if (!md_side_present(&p->before) || !md_side_present(&p->after)) {
        fprintf(o, ": only %s\n  %-7s %s\n", one == &p->before ? "before" : "after",
                one == &p->before ? "before" : "after", md_side_source(one));
        return 0;
    }
    if (strcmp(md_side_kind(&p->before), md_side_kind(&p->after)))
        fprintf(o, " before, %s after", md_side_kind(&p->after));
    fprintf(o, "\n  before  %s\n  after   %s\n", md_side_source(&p->before),
            md_side_source(&p->after));
    md_figs b, a;
    md_side_figs(&p->before, &b);
    md_side_figs(&p->after, &a);
    md_finding_diff *v; /* once: the headline names them, the list details them */
    size_t n;
    if (md_diff_findings(p->before.f, p->before.nf, p->after.f, p->after.nf, &v, &n))
        return -1;
    headline(o, &b, &a, v, n);
    figures(o, &b, &a);
    int rc = 0;
    if (p->before.rk && p->after.rk) {
        categories(o, p->before.rk, p->after.rk);
        rc = sites(o, p->before.rk, p->after.rk, opt->top);
    } else if (p->before.sr && p->after.sr) {
        rc = driver_libraries(o, p->before.sr, p->after.sr);
    }
    if (!rc)
        finding_lines(o, v, n, "findings");
    free(v);
    return rc;
}

int md_render_diff_text(FILE *o, const md_diff_pair *p, size_t n, const md_report *before,
                        const md_report *after, const md_out_opts *opt)
{
    for (size_t i = 0; i < n; i++) {
        if (i)
            fputc('\n', o);
        if (pair_text(o, &p[i], opt))
            return -1;
    }
    if (before->ncross || after->ncross) {
        fprintf(o, "\n== the job\n");
        return findings(o, before->cross, before->ncross, after->cross, after->ncross,
                        "findings across ranks");
    }
    return 0;
}

/* ---- JSON ------------------------------------------------------------------ */

static void jw_fig(md_jw *w, const char *k, double v)
{
    md_jw_key(w, k);
    if (isnan(v))
        md_jw_null(w);
    else
        md_jw_mib(w, v);
}

static void side_json(md_jw *w, const md_side *s)
{
    if (!md_side_present(s)) {
        md_jw_null(w);
        return;
    }
    md_figs f;
    md_side_figs(s, &f);
    const md_indicators *in = &f.ind;
    md_jw_open(w, '{');
    MD_KV(w, "source", md_jw_str(w, md_side_source(s)));
    MD_KV(w, "kind", md_jw_str(w, md_side_kind(s)));
    jw_fig(w, "peak_allocated_mib", f.peak);
    jw_fig(w, "peak_reserved_mib", f.peak_reserved);
    jw_fig(w, "end_allocated_mib", f.end_allocated);
    jw_fig(w, "process_used_peak_mib", f.process_used_peak);
    jw_fig(w, "driver_peak_mib", f.driver_peak);
    jw_fig(w, "driver_outside_torch_peak_mib", f.driver_outside);
    MD_KV(w, "steps", md_jw_int(w, f.steps));
    md_jw_key(w, "indicators");
    md_jw_open(w, '{');
    jw_fig(w, "first_step_persistent_change_mib",
           ind_or_none(in, in->first_step_persistent_change_mib, 1));
    jw_fig(w, "between_step_growth_mib", ind_or_none(in, in->between_step_growth_mib, 0));
    jw_fig(w, "largest_forward_increase_mib", ind_or_none(in, in->largest_forward_increase_mib, 0));
    jw_fig(w, "maximum_peak_allocated_mib", in->maximum_peak_allocated_mib);
    md_jw_close(w, '}');
    md_jw_close(w, '}');
}

static void finding_json(md_jw *w, const md_finding *f)
{
    if (!f) {
        md_jw_null(w);
        return;
    }
    md_jw_open(w, '{');
    MD_KV(w, "severity", md_jw_str(w, md_severity_name(f->severity)));
    MD_KV(w, "bytes", md_jw_int(w, (long long)f->bytes));
    MD_KV(w, "summary", md_jw_str(w, f->summary));
    md_jw_close(w, '}');
}

static int findings_json(md_jw *w, const md_finding *b, size_t nb, const md_finding *a,
                         size_t na, int job)
{
    static const char *word[] = {"gone", "new", "kept"};
    md_finding_diff *v;
    size_t n = 0;
    if (md_diff_findings(b, nb, a, na, &v, &n))
        return -1;
    md_jw_key(w, "findings");
    md_jw_open(w, '[');
    for (size_t i = 0; i < n; i++) {
        const md_finding *f = v[i].after ? v[i].after : v[i].before;
        md_jw_open(w, '{');
        MD_KV(w, "kind", md_jw_str(w, f->kind));
        MD_KV(w, "status", md_jw_str(w, word[v[i].status]));
        if (f->device >= 0)
            MD_KV(w, "device", md_jw_int(w, f->device));
        if (job && f->rank >= 0)
            MD_KV(w, "rank", md_jw_int(w, f->rank));
        MD_KV(w, "before", finding_json(w, v[i].before));
        MD_KV(w, "after", finding_json(w, v[i].after));
        md_jw_close(w, '}');
    }
    free(v);
    md_jw_close(w, ']');
    return 0;
}

static void categories_json(md_jw *w, const md_rank *b, const md_rank *a)
{
    md_jw_key(w, "categories");
    md_jw_open(w, '[');
    for (int c = 0; c < MD_CAT_COUNT; c++) {
        if (!b->by_cat[c] && !a->by_cat[c])
            continue;
        md_jw_open(w, '{');
        MD_KV(w, "category", md_jw_str(w, md_category_name(c)));
        MD_KV(w, "before_mib", md_jw_mib(w, md_mib(b->by_cat[c])));
        MD_KV(w, "after_mib", md_jw_mib(w, md_mib(a->by_cat[c])));
        md_jw_close(w, '}');
    }
    md_jw_close(w, ']');
}

static int sites_json(md_jw *w, const md_rank *b, const md_rank *a, int top)
{
    md_site_diff *v;
    size_t n;
    if (md_diff_sites(b, a, &v, &n))
        return -1;
    md_jw_key(w, "sites");
    md_jw_open(w, '[');
    for (size_t i = 0; i < n && (int)i < top; i++) {
        md_jw_open(w, '{');
        MD_KV(w, "site", md_jw_str(w, v[i].site));
        MD_KV(w, "before_mib", md_jw_mib(w, md_mib(v[i].before)));
        MD_KV(w, "after_mib", md_jw_mib(w, md_mib(v[i].after)));
        md_jw_close(w, '}');
    }
    free(v);
    md_jw_close(w, ']');
    return 0;
}

static int pair_json(md_jw *w, const md_diff_pair *p, const md_out_opts *opt)
{
    const md_side *one = md_side_present(&p->before) ? &p->before : &p->after;
    md_jw_open(w, '{');
    MD_KV(w, "rank", md_jw_int(w, md_side_rank(one)));
    MD_KV(w, "device", md_jw_int(w, md_side_device(one)));
    MD_KV(w, "before", side_json(w, &p->before));
    MD_KV(w, "after", side_json(w, &p->after));
    if (p->before.rk && p->after.rk) {
        categories_json(w, p->before.rk, p->after.rk);
        if (sites_json(w, p->before.rk, p->after.rk, opt->top))
            return -1;
    }
    if (findings_json(w, p->before.f, p->before.nf, p->after.f, p->after.nf, 0))
        return -1;
    md_jw_close(w, '}');
    return 0;
}

int md_render_diff_json(FILE *o, const md_diff_pair *p, size_t n, const md_report *before,
                        const md_report *after, const md_out_opts *opt)
{
    md_jw w;
    md_jw_init(&w, o);
    md_jw_open(&w, '{');
    MD_KV(&w, "schema", md_jw_int(&w, 1));
    MD_KV(&w, "tool", md_jw_str(&w, "memdiag " MEMDIAG_VERSION));
    MD_KV(&w, "kind", md_jw_str(&w, "diff"));
    md_jw_key(&w, "ranks");
    md_jw_open(&w, '[');
    for (size_t i = 0; i < n; i++)
        if (pair_json(&w, &p[i], opt))
            return -1;
    md_jw_close(&w, ']');
    if (findings_json(&w, before->cross, before->ncross, after->cross, after->ncross, 1))
        return -1;
    md_jw_close(&w, '}');
    fputc('\n', o);
    return 0;
}

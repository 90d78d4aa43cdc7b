/* export.c - a snapshot's replayed history for other tools: CSV (one row
 * per trace entry with the allocator's state after it, for pandas or a
 * spreadsheet) and the Chrome/Perfetto trace format (memory as counter
 * tracks, steps and phases as slices, for ui.perfetto.dev or
 * chrome://tracing). */
#include <string.h>
#include "export.h"
#include "page.h"

/* A CSV field: quoted where it holds a comma, a quote or a line break. */
static void csv_field(FILE *o, const char *s)
{
    if (!strpbrk(s, ",\"\r\n")) {
        fputs(s, o);
        return;
    }
    fputc('"', o);
    for (; *s; s++) {
        if (*s == '"')
            fputc('"', o);
        fputc(*s, o);
    }
    fputc('"', o);
}

/* The step and phase holding event i, as the text report names them. */
static void step_phase(const md_step *st, size_t nst, size_t *k, long i, long *step,
                       const char **phase)
{
    while (*k < nst && st[*k].after_zero < i)
        ++*k;
    *step = -1;
    *phase = "";
    if (*k < nst && i > st[*k].fwd_start) {
        int p = md_rank_phase_of(&st[*k], i);
        *step = st[*k].number;
        *phase = p >= 0 ? md_phase_name(p) : "";
    }
}

int md_render_csv(FILE *o, const md_rank *rk)
{
    size_t n, nst, k = 0;
    const md_event *ev = md_snapshot_events(rk->s, rk->device, &n);
    const md_step *st = md_analysis_steps(rk->a, &nst);
    fputs("index,time_us,action,address,size,stream,allocated,reserved,requested,step,phase,"
          "site\n", o);
    for (size_t i = 0; i < n; i++) {
        const md_event *e = &ev[i];
        md_point p = md_replay_at(rk->r, (long)i);
        long step;
        const char *phase;
        step_phase(st, nst, &k, (long)i, &step, &phase);
        fprintf(o, "%zu,%lld,%s,%llu,%llu,%llu,%llu,%llu,%llu,", i, (long long)e->time_us,
                md_action_name(e->action), (unsigned long long)e->addr,
                (unsigned long long)e->size, (unsigned long long)md_snapshot_stream(rk->s, e->stream),
                (unsigned long long)p.allocated, (unsigned long long)p.reserved,
                (unsigned long long)p.requested);
        if (step >= 0)
            fprintf(o, "%ld", step);
        fprintf(o, ",%s,", phase);
        const md_frame *f = e->stack ? md_user_frame(rk->s, e->stack) : NULL;
        if (f) {
            char site[640];
            csv_field(o, md_frame_label(rk->s, f, site, sizeof site));
        }
        fputc('\n', o);
    }
    return ferror(o) ? -1 : 0;
}

/* ---- Chrome/Perfetto trace ------------------------------------------------ */

static void counter(FILE *o, int pid, double ts, md_point p, int *first)
{
    fprintf(o, "%s{\"name\":\"memory\",\"ph\":\"C\",\"pid\":%d,\"ts\":%.3f,\"args\":{"
               "\"allocated MiB\":%.3f,\"reserved MiB\":%.3f}}",
            *first ? "" : ",\n", pid, ts, md_mib(p.allocated), md_mib(p.reserved));
    *first = 0;
}

static void slice(FILE *o, int pid, int tid, const char *name, double ts, double end, int *first)
{
    if (end < ts)
        return;
    fprintf(o, "%s{\"name\":", *first ? "" : ",\n");
    md_js_string(o, name);
    fprintf(o, ",\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f}", pid, tid, ts,
            end - ts);
    *first = 0;
}

/* Microseconds from t0 of the state after event i (-1, or an event
 * without a time: t0). In doubles: hostile times do not overflow. */
static double ts_of(const md_event *ev, long i, int64_t t0)
{
    if (i < 0 || ev[i].time_us < 0 || ev[i].time_us < t0)
        return 0;
    return (double)ev[i].time_us - (double)t0;
}

/* Memory of one device: every event's state where they are few, else per
 * time bucket the lowest and the highest, in their order (peaks kept). */
static void counters(FILE *o, const md_rank *rk, int pid, int64_t t0, size_t max_points,
                     int *first)
{
    size_t n;
    const md_event *ev = md_snapshot_events(rk->s, rk->device, &n);
    size_t per = n / (max_points / 2 ? max_points / 2 : 1) + 1; /* events per bucket */
    counter(o, pid, ts_of(ev, -1, t0), md_replay_initial(rk->r), first);
    for (size_t lo = 0; lo < n; lo += per) {
        size_t hi = lo + per < n ? lo + per : n, imin = lo, imax = lo;
        uint64_t vmin = md_replay_at(rk->r, (long)lo).allocated, vmax = vmin;
        for (size_t i = lo + 1; i < hi; i++) {
            uint64_t v = md_replay_at(rk->r, (long)i).allocated;
            if (v < vmin)
                vmin = v, imin = i;
            if (v > vmax)
                vmax = v, imax = i;
        }
        size_t a = imin < imax ? imin : imax, b = imin < imax ? imax : imin;
        counter(o, pid, ts_of(ev, (long)a, t0), md_replay_at(rk->r, (long)a), first);
        if (b != a)
            counter(o, pid, ts_of(ev, (long)b, t0), md_replay_at(rk->r, (long)b), first);
    }
}

static void steps(FILE *o, const md_rank *rk, int pid, int64_t t0, int *first)
{
    size_t n, nst;
    const md_event *ev = md_snapshot_events(rk->s, rk->device, &n);
    const md_step *st = md_analysis_steps(rk->a, &nst);
    for (size_t k = 0; k < nst; k++) {
        const md_step *s = &st[k];
        char name[32];
        snprintf(name, sizeof name, "step %d", s->number);
        slice(o, pid, 1, name, ts_of(ev, s->fwd_start, t0), ts_of(ev, s->after_zero, t0), first);
        long b[5] = {s->fwd_start, s->after_forward, s->after_backward, s->after_optim,
                     s->after_zero};
        for (int p = 0; p < MD_PHASE_COUNT; p++)
            if (b[p + 1] > b[p])
                slice(o, pid, 2, md_phase_name(p), ts_of(ev, b[p], t0), ts_of(ev, b[p + 1], t0),
                      first);
    }
}

static void names(FILE *o, const md_rank *rk, int pid, int *first)
{
    char name[96];
    snprintf(name, sizeof name, "rank %d cuda:%d", rk->rank, rk->device);
    fprintf(o, "%s{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"args\":{\"name\":",
            *first ? "" : ",\n", pid);
    md_js_string(o, name);
    fprintf(o, "}},\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":1,\"args\":"
               "{\"name\":\"steps\"}},\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,"
               "\"tid\":2,\"args\":{\"name\":\"phases\"}}", pid, pid);
    *first = 0;
}

int md_render_trace_json(FILE *o, const md_rank *ranks, size_t nranks, size_t max_points)
{
    int64_t t0 = INT64_MAX; /* one clock for all devices of the process */
    for (size_t r = 0; r < nranks; r++) {
        size_t n;
        const md_event *ev = md_snapshot_events(ranks[r].s, ranks[r].device, &n);
        if (n && ev[0].time_us >= 0 && ev[0].time_us < t0)
            t0 = ev[0].time_us;
    }
    if (t0 == INT64_MAX) /* no times: everything at 0 (the CLI refuses such traces) */
        t0 = 0;
    int first = 1;
    fputs("{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n", o);
    for (size_t r = 0; r < nranks; r++) {
        size_t n;
        md_snapshot_events(ranks[r].s, ranks[r].device, &n);
        if (!n)
            continue;
        names(o, &ranks[r], (int)r, &first);
        counters(o, &ranks[r], (int)r, t0, max_points, &first);
        steps(o, &ranks[r], (int)r, t0, &first);
    }
    fputs("\n]}\n", o);
    return ferror(o) ? -1 : 0;
}

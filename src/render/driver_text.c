/* driver_text.c - the driver-level lines of a process in the terminal
 * summary: which library holds how much device memory through the CUDA
 * driver, at the process's peak and at the end. */
#include <stdlib.h>
#include <string.h>
#include "report.h"

#define MIB(b) ((double)(b) / 1048576.0)
#define SHOWN 8 /* libraries listed; the rest summed */

static void use_line(FILE *o, const md_driver_use *u)
{
    fprintf(o, "    %10.1f %10.1f %10.1f %6zu  %-22s %s%s%s\n", MIB(u->at_peak), MIB(u->max_live),
            MIB(u->at_end), u->allocs, u->caller[0] ? u->caller : "?", u->what ? u->what : "",
            u->physical ? " [cuMemCreate]" : "", u->async ? " [stream-ordered pool]" : "");
}

static void table(FILE *o, const md_driver_stats *s)
{
    fprintf(o, "    MiB at peak    largest     at end  calls  library\n");
    size_t shown = s->nuse < SHOWN ? s->nuse : SHOWN;
    for (size_t i = 0; i < shown; i++)
        use_line(o, &s->use[i]);
    if (s->nuse > shown) {
        md_driver_use rest = {.caller = "(others)"};
        for (size_t i = shown; i < s->nuse; i++) {
            rest.at_peak += s->use[i].at_peak, rest.max_live += s->use[i].max_live;
            rest.at_end += s->use[i].at_end, rest.allocs += s->use[i].allocs;
        }
        use_line(o, &rest);
    }
}

/* A process that allocated on several GPUs: each one's peak. */
static void by_device(FILE *o, const md_driver_log *d)
{
    int devs[8], n = 0;
    for (size_t i = 0; i < d->n && n < 8; i++) {
        int dev = d->ev[i].device, seen = dev < 0 || d->ev[i].bytes == 0;
        for (int k = 0; k < n && !seen; k++)
            seen = devs[k] == dev;
        if (!seen)
            devs[n++] = dev;
    }
    if (n < 2)
        return;
    fprintf(o, "    by GPU:");
    for (int k = 0; k < n; k++) {
        md_driver_stats s;
        md_err err;
        if (md_driver_analyze(d, devs[k], &s, &err))
            return;
        fprintf(o, "%s cuda:%d peak %.1f MiB", k ? "," : "", devs[k], MIB(s.peak));
        md_driver_stats_free(&s);
    }
    fprintf(o, "\n");
}

void md_render_driver(FILE *o, const md_sample_rank *r, int brief)
{
    const md_driver_log *d = &r->driver;
    if (!d->present)
        return;
    md_driver_stats s;
    md_err err;
    if (d->status[0] && strncmp(d->status, "on", 2) && !d->n) {
        fprintf(o, "  driver      %s\n", d->status);
        return;
    }
    if (md_driver_analyze(d, -1, &s, &err)) {
        fprintf(o, "  driver      %s\n", err.msg);
        return;
    }
    double at = ((double)s.peak_ns - (double)s.start_ns) / 1e9; /* a file's times may be anything */
    if (brief) {
        fprintf(o, "  driver      peak %.1f MiB through the CUDA driver", MIB(s.peak));
        if (s.outside_peak != s.peak)
            fprintf(o, "; outside PyTorch's allocator at most %.1f MiB", MIB(s.outside_peak));
        fprintf(o, "\n");
    } else {
        fprintf(o, "\n  driver-level allocations (CUPTI%s%s): %zu calls, peak %.1f MiB %.1f s after "
                   "the first, %.1f MiB at the end\n", strcmp(d->status, "on") ? ", " : "",
                strcmp(d->status, "on") ? d->status : "", d->n, MIB(s.peak), at, MIB(s.at_end));
        table(o, &s);
        by_device(o, d);
        if (s.outside_peak != s.peak)
            fprintf(o, "    outside PyTorch's caching allocator: %.1f MiB at most\n",
                    MIB(s.outside_peak));
        if (s.unmatched)
            fprintf(o, "    %zu frees of memory allocated before the trace began (not counted)\n",
                    s.unmatched);
    }
    md_driver_stats_free(&s);
}

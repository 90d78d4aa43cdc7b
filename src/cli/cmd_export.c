/* cmd_export.c - `memdiag export PATH --format csv|perfetto|folded`: a
 * snapshot's replayed history for other tools (render/export.c); folded
 * stacks are the flame graph's (cmd_flamegraph.c). */
#include <stdlib.h>
#include <string.h>
#include "../render/export.h"
#include "cli.h"
#include "load.h"

typedef struct ex_opts {
    const char *path, *out, *format, *at, *steps, *events;
    long device, points;
    int force;
} ex_opts;

static void help(void)
{
    printf("usage: memdiag export PATH --format csv|perfetto|folded|torch-snapshot\n"
           "                      [-o FILE [--force]] [--device N] [--points N] [--at WHEN]\n"
           "                      [--steps A-B | --events LO-HI]\n\n"
           "PATH: one allocator snapshot (or a 'memdiag run' directory holding one).\n"
           "  csv       a row per trace entry: action, address, size, stream, then\n"
           "            allocated/reserved/requested bytes after it, step, phase, the user\n"
           "            frame (--device N: that GPU's trace; default the process's own)\n"
           "  perfetto  Chrome/Perfetto trace-event JSON for ui.perfetto.dev or\n"
           "            chrome://tracing: memory per GPU as a counter track (at most\n"
           "            --points points, default 200000: beyond, each time bucket's lowest\n"
           "            and highest), steps and phases as slices\n"
           "  folded    the flame graph's stacks at --at WHEN (memdiag flamegraph --folded)\n"
           "  torch-snapshot  the trace in torch's own snapshot format (a pickle torch's\n"
           "            viewer reads), every traced GPU (--device N: one), cut to --steps\n"
           "            A-B (step numbers, inclusive) or --events LO-HI (one GPU's trace\n"
           "            entries); segments as replayed at the window's end: a multi-GB\n"
           "            snapshot made small enough to open\n"
           "  -o FILE   write there (--force replaces it), else standard output\n");
}

static int parse(int argc, char **argv, ex_opts *o)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            help();
            return 1;
        } else if (!strcmp(a, "--force")) {
            o->force = 1;
        } else if (val && (!strcmp(a, "-o") || !strcmp(a, "--format") || !strcmp(a, "--at") ||
                           !strcmp(a, "--steps") || !strcmp(a, "--events"))) {
            *(!strcmp(a, "-o")         ? &o->out
              : !strcmp(a, "--format") ? &o->format
              : !strcmp(a, "--at")     ? &o->at
              : !strcmp(a, "--steps")  ? &o->steps
                                       : &o->events) = val;
            i++;
        } else if (val && !strcmp(a, "--device")) {
            if (cli_number("--device", argv[++i], 0, 4095, &o->device))
                return -1;
        } else if (val && !strcmp(a, "--points")) {
            if (cli_number("--points", argv[++i], 2, 100000000, &o->points))
                return -1;
        } else if (a[0] == '-' && a[1]) {
            cli_fail("unknown option or missing value: '%s' (see 'memdiag export --help')", a);
            return -1;
        } else if (o->path) {
            cli_fail("export reads one snapshot; a second was given: '%s'", a);
            return -1;
        } else {
            o->path = a;
        }
    }
    if (!o->path || !o->format) {
        cli_fail("export needs a snapshot and --format csv|perfetto|folded|torch-snapshot");
        return -1;
    }
    if (strcmp(o->format, "csv") && strcmp(o->format, "perfetto") && strcmp(o->format, "folded") &&
        strcmp(o->format, "torch-snapshot")) {
        cli_fail("--format wants csv, perfetto, folded or torch-snapshot, got '%s'", o->format);
        return -1;
    }
    if ((o->steps || o->events) && strcmp(o->format, "torch-snapshot")) {
        cli_fail("--steps and --events cut a torch-snapshot export");
        return -1;
    }
    if (!strcmp(o->format, "torch-snapshot") && !o->out) {
        cli_fail("a torch-snapshot export is a binary pickle: -o FILE.pickle");
        return -1;
    }
    return 0;
}

/* The flame graph command does folded stacks: the same options. */
static int folded(const ex_opts *o)
{
    char dev[24];
    char *args[10];
    int n = 0;
    args[n++] = "flamegraph";
    args[n++] = "--folded";
    if (o->at) {
        args[n++] = "--at";
        args[n++] = (char *)o->at;
    }
    if (o->device >= 0) {
        snprintf(dev, sizeof dev, "%ld", o->device);
        args[n++] = "--device";
        args[n++] = dev;
    }
    if (o->out) {
        args[n++] = "-o";
        args[n++] = (char *)o->out;
    }
    if (o->force)
        args[n++] = "--force";
    args[n++] = (char *)o->path;
    return cmd_flamegraph(n, args);
}

typedef struct job {
    const ex_opts *o;
    const cli_inputs *in;
    const md_rank *rk;   /* csv: the device */
    const md_rank *tr;   /* torch-snapshot: its devices, ntr of them */
    size_t ntr;
    long *lo, *hi;       /* and each one's window (lo, hi] */
} job;

static int write_export(FILE *f, void *arg)
{
    const job *j = arg;
    md_err err = {0};
    if (!strcmp(j->o->format, "csv"))
        return md_render_csv(f, j->rk);
    if (!strcmp(j->o->format, "perfetto"))
        return md_render_trace_json(f, j->in->ranks, j->in->nranks, (size_t)j->o->points);
    if (md_render_torch_snapshot(f, j->tr, j->ntr, j->lo, j->hi, &err)) {
        cli_fail_err(&err);
        return -1;
    }
    return 0;
}

/* "A-B" (or "A") as two numbers; 0, or -1 after an error line. */
static int range(const char *opt, const char *s, long *a, long *b)
{
    char *end;
    *a = strtol(s, &end, 10);
    *b = *a;
    if (end != s && *end == '-')
        *b = strtol(end + 1, &end, 10);
    if (end == s || *end || *a < 0 || *b < *a) {
        cli_fail("%s wants A-B (A <= B), got '%s'", opt, s);
        return -1;
    }
    return 0;
}

/* The window (lo, hi] of rk's events that --steps or --events names. */
static int window(const ex_opts *o, const md_rank *rk, long *lo, long *hi)
{
    long a, b;
    *lo = -1;
    *hi = (long)rk->nevents - 1;
    if (o->events) {
        if (range("--events", o->events, &a, &b))
            return -1;
        if (b >= (long)rk->nevents) {
            cli_fail("--events %s: the trace has %zu entries (0-%zu)", o->events, rk->nevents,
                     rk->nevents ? rk->nevents - 1 : 0);
            return -1;
        }
        *lo = a - 1, *hi = b;
    } else if (o->steps) {
        size_t n;
        const md_step *st = md_analysis_steps(rk->a, &n);
        if (range("--steps", o->steps, &a, &b))
            return -1;
        const md_step *first = NULL, *last = NULL;
        for (size_t k = 0; k < n; k++) {
            if (st[k].number == a)
                first = &st[k];
            if (st[k].number == b)
                last = &st[k];
        }
        if (!first || !last) {
            cli_fail("--steps %s: the trace holds %s", o->steps,
                     n ? "other steps (memdiag summary lists them)" : "no steps");
            return -1;
        }
        *lo = first->fwd_start, *hi = last->after_zero;
    }
    return 0;
}

/* The trace to export and whether it can be: one snapshot; for perfetto,
 * times. NULL after an error line. */
static const md_rank *check(const cli_inputs *in, const ex_opts *o)
{
    const md_rank *rk = cli_one_snapshot_rank(in, o->path, o->device, "export",
                                              "trace to export");
    if (!rk)
        return NULL;
    size_t n;
    const md_event *ev = md_snapshot_events(rk->s, rk->device, &n);
    if (!strcmp(o->format, "perfetto") && n && ev[0].time_us < 0) {
        cli_fail("%s: the trace has no times (torch < 2.2): a Perfetto trace needs them; "
                 "--format csv exports it by event", o->path);
        return NULL;
    }
    return rk;
}

/* A torch-snapshot export's devices (the one --device names, else every
 * traced device of the snapshot) and their windows; -1 after an error. */
static int torch_windows(const ex_opts *o, const cli_inputs *in, const md_rank *rk, job *j)
{
    j->tr = o->device >= 0 ? rk : in->ranks;
    j->ntr = o->device >= 0 ? 1 : in->nranks;
    if (o->events && j->ntr > 1) {
        cli_fail("--events counts one GPU's trace entries and %s traces %zu: add --device N",
                 o->path, j->ntr);
        return -1;
    }
    j->lo = calloc(j->ntr, sizeof *j->lo);
    j->hi = calloc(j->ntr, sizeof *j->hi);
    if (!j->lo || !j->hi) {
        cli_fail("out of memory");
        return -1;
    }
    for (size_t i = 0; i < j->ntr; i++)
        if (window(o, &j->tr[i], &j->lo[i], &j->hi[i]))
            return -1;
    return 0;
}

int cmd_export(int argc, char **argv)
{
    ex_opts o = {.device = -1, .points = 200000};
    int rc = parse(argc, argv, &o);
    if (rc)
        return rc > 0 ? 0 : EXIT_USAGE;
    if (!strcmp(o.format, "folded"))
        return folded(&o);
    cli_inputs in;
    char *arg = (char *)o.path;
    if (cli_inputs_load(&arg, 1, &in))
        return EXIT_USAGE;
    const md_rank *rk = check(&in, &o);
    job j = {&o, &in, rk, NULL, 0, NULL, NULL};
    rc = EXIT_USAGE;
    if (rk && !strcmp(o.format, "torch-snapshot") && torch_windows(&o, &in, rk, &j))
        rk = NULL;
    if (rk && o.out)
        rc = cli_write_file(o.out, o.force, write_export, &j);
    else if (rk)
        rc = write_export(stdout, &j) ? EXIT_USAGE : 0;
    free(j.lo);
    free(j.hi);
    cli_inputs_free(&in);
    return rc;
}

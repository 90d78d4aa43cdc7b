/* cmd_flamegraph.c - `memdiag flamegraph PATH`: who holds the memory at
 * one moment (the peak by default), by whole stack, as a self-contained
 * HTML page or as folded stacks for other flame graph tools. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "../render/flame.h"
#include "cli.h"
#include "load.h"

typedef struct fg_opts {
    const char *path, *out, *at;
    int device; /* -1: the process's own */
    int folded, force;
    unsigned flags;
} fg_opts;

static void help(void)
{
    printf("usage: memdiag flamegraph PATH [--at peak|end|oom|SECONDS] [--device N] [--python]\n"
           "                          (-o FILE.html [--force] | --folded [-o FILE])\n\n"
           "The memory live at one moment of a snapshot, by whole stack (outermost frame\n"
           "first), each frame as wide as the bytes live under it, colored by category.\n\n"
           "  PATH          one allocator snapshot (or a 'memdiag run' directory holding one)\n"
           "  --at WHEN     peak (highest allocated, the default), end, oom (just before the\n"
           "                first out-of-memory), or SECONDS after the trace's first event\n"
           "  --device N    the GPU's trace (default: the process's own, the most events)\n"
           "  --python      leave out C++ frames (snapshots recorded with stacks='all')\n"
           "  -o FILE       where to write: an HTML page (works offline), or with --folded\n"
           "                the folded stacks; --force replaces an existing file\n"
           "  --folded      'outer;...;inner bytes' lines (flamegraph.pl, inferno, speedscope)\n"
           "                on standard output unless -o is given\n");
}

static int parse(int argc, char **argv, fg_opts *o)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            help();
            return 1;
        } else if (!strcmp(a, "--folded")) {
            o->folded = 1;
        } else if (!strcmp(a, "--force")) {
            o->force = 1;
        } else if (!strcmp(a, "--python")) {
            o->flags |= MD_FLAME_PYTHON_ONLY;
        } else if ((!strcmp(a, "-o") || !strcmp(a, "--at") || !strcmp(a, "--device")) && val) {
            long d;
            i++;
            if (!strcmp(a, "-o")) {
                o->out = val;
            } else if (!strcmp(a, "--at")) {
                o->at = val;
            } else if (cli_number("--device", val, 0, 4095, &d)) {
                return -1;
            } else {
                o->device = (int)d;
            }
        } else if (a[0] == '-' && a[1]) {
            cli_fail("unknown option or missing value: '%s' (see 'memdiag flamegraph --help')", a);
            return -1;
        } else if (o->path) {
            cli_fail("flamegraph reads one snapshot; a second was given: '%s'", a);
            return -1;
        } else {
            o->path = a;
        }
    }
    if (!o->path) {
        cli_fail("flamegraph needs a snapshot (see 'memdiag flamegraph --help')");
        return -1;
    }
    if (!o->folded && !o->out) {
        cli_fail("flamegraph writes an HTML page to a file: -o FILE.html (or --folded for text)");
        return -1;
    }
    return 0;
}

/* The event index --at names in rk's trace, or -2 after an error line. */
static long moment(const md_rank *rk, const char *at, char *what, size_t nwhat)
{
    size_t n;
    const md_event *ev = md_snapshot_events(rk->s, rk->device, &n);
    if (!at || !strcmp(at, "peak")) {
        snprintf(what, nwhat, "at the peak");
        return md_analysis_peak_index(rk->a);
    }
    if (!strcmp(at, "end")) {
        snprintf(what, nwhat, "at the end of the trace");
        return (long)n - 1;
    }
    if (!strcmp(at, "oom")) {
        for (size_t i = 0; i < n; i++)
            if (ev[i].action == MD_ACT_OOM) {
                snprintf(what, nwhat, "just before the out-of-memory error");
                return (long)i - 1;
            }
        cli_fail("%s: the trace of cuda:%d holds no out-of-memory event (--at oom)", rk->path,
                 rk->device);
        return -2;
    }
    char *end;
    double secs = strtod(at, &end);
    if (*end || end == at || !isfinite(secs) || secs < 0) {
        cli_fail("--at wants peak, end, oom or a number of seconds, got '%s'", at);
        return -2;
    }
    if (!n || ev[0].time_us < 0) {
        cli_fail("%s: the trace has no times (torch < 2.2): use --at peak, end or oom", rk->path);
        return -2;
    }
    long i = -1; /* the state after the last event at or before the time */
    while (i + 1 < (long)n && (double)ev[i + 1].time_us - (double)ev[0].time_us <= secs * 1e6)
        i++;
    snprintf(what, nwhat, "at +%.3f s", secs);
    return i;
}

typedef struct page {
    const fg_opts *o;
    const md_rank *rk;
    const md_flame_node *v;
    size_t n;
    const char *title, *sub;
} page;

static int write_page(FILE *f, void *arg)
{
    const page *p = arg;
    return p->o->folded ? md_render_flame_folded(f, p->rk->s, p->v, p->n)
                        : md_render_flame_html(f, p->rk->s, p->v, p->n, p->title, p->sub);
}

static int write_out(const fg_opts *o, const md_rank *rk, const md_flame_node *v, size_t n,
                     const char *when)
{
    if (!o->out)
        return md_render_flame_folded(stdout, rk->s, v, n) ? EXIT_USAGE : 0;
    char title[600], sub[400];
    snprintf(title, sizeof title, "memdiag flame graph: %s (rank %d, cuda:%d)", rk->path, rk->rank,
             rk->device);
    snprintf(sub, sizeof sub, "%.1f MiB live %s, in %u allocations", md_mib(v[0].bytes), when,
             v[0].count);
    page p = {o, rk, v, n, title, sub};
    int rc = cli_write_file(o->out, o->force, write_page, &p);
    if (!rc)
        printf("memdiag: wrote %s: %s (%zu frames)\n", o->out, sub, n - 1);
    return rc;
}

int cmd_flamegraph(int argc, char **argv)
{
    fg_opts o = {NULL, NULL, NULL, -1, 0, 0, 0};
    int rc = parse(argc, argv, &o);
    if (rc)
        return rc > 0 ? 0 : EXIT_USAGE;
    cli_inputs in;
    char *arg = (char *)o.path;
    if (cli_inputs_load(&arg, 1, &in))
        return EXIT_USAGE;
    const md_rank *rk = cli_one_snapshot_rank(&in, o.path, o.device, "flamegraph", "stacks");
    char when[96];
    long idx = rk ? moment(rk, o.at, when, sizeof when) : -2;
    md_flame_node *v = NULL;
    size_t n = 0;
    md_err err = {0};
    rc = EXIT_USAGE;
    if (idx >= -1 && md_flame_at(rk->a, idx, o.flags, &v, &n, &err))
        cli_fail_err(&err);
    else if (idx >= -1)
        rc = write_out(&o, rk, v, n, when);
    free(v);
    cli_inputs_free(&in);
    return rc;
}

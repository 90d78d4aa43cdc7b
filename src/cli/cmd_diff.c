/* cmd_diff.c - `memdiag diff BEFORE AFTER`: did the change help? Reads
 * both sides as summary does (inputs.c) and renders what changed per rank
 * (render/diff.c). */
#include <stdlib.h>
#include <string.h>
#include "../render/diff.h"
#include "cli.h"
#include "load.h"

static void help(void)
{
    printf("usage: memdiag diff BEFORE AFTER [--top N] [--json] [--fail-above PCT]\n\n"
           "BEFORE, AFTER: the same job measured twice, before and after a change: each a\n"
           "snapshot, a capture file, a seed-script report or a 'memdiag run' directory.\n"
           "Each rank of one is paired with the same rank (and GPU) of the other; for each\n"
           "pair: the peak and the indicators side by side, memory at the peak by category\n"
           "and by site (snapshots), and the findings gone, new and kept.\n\n"
           "  --top N   sites to list, largest change first (default 8)\n"
           "  --json    machine-readable output (docs/json-schema.md, \"diff\")\n"
           "  --fail-above PCT  exit status 1 when a rank's peak allocated grew by more\n"
           "            than PCT percent (a memory regression gate for CI), one line each\n");
}

static int parse(int argc, char **argv, char *side[2], md_out_opts *opt, int *json,
                 long *fail_above)
{
    int nside = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            help();
            return 1;
        } else if (!strcmp(argv[i], "--json")) {
            *json = 1;
        } else if (!strcmp(argv[i], "--fail-above") && i + 1 < argc) {
            if (cli_number("--fail-above", argv[++i], 0, 100000, fail_above))
                return -1;
        } else if (!strcmp(argv[i], "--top") && i + 1 < argc) {
            long v;
            if (cli_number("--top", argv[++i], 0, 1000, &v))
                return -1;
            opt->top = (int)v;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            cli_fail("unknown option '%s' (see 'memdiag diff --help')", argv[i]);
            return -1;
        } else if (nside < 2) {
            side[nside++] = argv[i];
        } else {
            cli_fail("diff compares two inputs, BEFORE and AFTER; a third was given: '%s'",
                     argv[i]);
            return -1;
        }
    }
    if (nside < 2) {
        cli_fail("diff needs two inputs, BEFORE and AFTER (see 'memdiag diff --help')");
        return -1;
    }
    if (!strcmp(side[0], "-") && !strcmp(side[1], "-")) {
        cli_fail("diff: only one side can be read from standard input");
        return -1;
    }
    return 0;
}

/* Ranks whose peak grew by more than pct percent, named on stderr; 1 if
 * any did. */
static int regressions(const md_diff_pair *p, size_t n, long pct)
{
    int found = 0;
    for (size_t i = 0; i < n; i++) {
        if (!md_side_present(&p[i].before) || !md_side_present(&p[i].after))
            continue;
        md_figs b, a;
        md_side_figs(&p[i].before, &b);
        md_side_figs(&p[i].after, &a);
        if (!(b.peak > 0) || !(a.peak > b.peak * (1 + (double)pct / 100)))
            continue;
        cli_fail("rank %d (cuda:%d, %s): peak allocated grew %.1f%%, %.1f -> %.1f MiB (above "
                 "--fail-above %ld)", md_side_rank(&p[i].after), md_side_device(&p[i].after),
                 md_side_kind(&p[i].after), 100 * (a.peak - b.peak) / b.peak, b.peak, a.peak, pct);
        found = 1;
    }
    return found;
}

int cmd_diff(int argc, char **argv)
{
    md_out_opts opt = {8, 0, 0};
    int json = 0;
    long fail_above = -1;
    char *side[2] = {NULL, NULL};
    int rc = parse(argc, argv, side, &opt, &json, &fail_above);
    if (rc)
        return rc > 0 ? 0 : EXIT_USAGE;
    cli_inputs before, after;
    if (cli_inputs_load(&side[0], 1, &before))
        return EXIT_USAGE;
    if (cli_inputs_load(&side[1], 1, &after)) {
        cli_inputs_free(&before);
        return EXIT_USAGE;
    }
    md_report b = cli_inputs_report(&before), a = cli_inputs_report(&after);
    md_diff_pair *p;
    size_t n;
    if (md_diff_pairs(&b, &a, &p, &n)) {
        cli_fail("out of memory");
        rc = EXIT_USAGE;
    } else {
        if (json ? md_render_diff_json(stdout, p, n, &b, &a, &opt)
                 : md_render_diff_text(stdout, p, n, &b, &a, &opt)) {
            fflush(stdout);
            cli_fail("out of memory while comparing: the output above is incomplete");
            rc = EXIT_USAGE;
        }
        fflush(stdout);
        if (!rc && fail_above >= 0 && regressions(p, n, fail_above))
            rc = 1;
        free(p);
    }
    cli_inputs_free(&after);
    cli_inputs_free(&before);
    return rc;
}

/* cmd_report.c - `memdiag report PATH... -o report.html`: what summary and
 * diagnose say, with memory over time and flame graphs, as one page that
 * works offline (render/report_html.c). */
#include <stdlib.h>
#include <string.h>
#include "cli.h"
#include "load.h"

static void help(void)
{
    printf("usage: memdiag report PATH... -o FILE.html [--force] [--top N]\n\n"
           "PATH: snapshots, capture files, seed reports or 'memdiag run' directories, as for\n"
           "summary. One HTML page that loads nothing (it works offline and can be mailed):\n"
           "per rank, memory over time with steps and phases, the findings with evidence and\n"
           "advice, what is live at the peak by category and site, and a flame graph of it.\n\n"
           "  -o FILE   the page to write; --force replaces an existing file\n"
           "  --top N   sites to list at the peak (default 15)\n");
}

typedef struct page {
    const md_report *rep;
    const md_out_opts *opt;
    const char *title;
} page;

static int write_page(FILE *f, void *arg)
{
    const page *p = arg;
    return md_render_report_html(f, p->rep, p->opt, p->title);
}

int cmd_report(int argc, char **argv)
{
    md_out_opts opt = {15, 1, 0};
    const char *out = NULL;
    int force = 0, nargs = 0;
    char **args = calloc((size_t)argc + 1, sizeof *args);
    if (!args)
        return EXIT_USAGE;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            help();
            free(args);
            return 0;
        } else if (!strcmp(a, "--force")) {
            force = 1;
        } else if (!strcmp(a, "-o") && i + 1 < argc) {
            out = argv[++i];
        } else if (!strcmp(a, "--top") && i + 1 < argc) {
            long v;
            if (cli_number("--top", argv[++i], 0, 1000, &v)) {
                free(args);
                return EXIT_USAGE;
            }
            opt.top = (int)v;
        } else if (a[0] == '-' && a[1]) {
            cli_fail("unknown option or missing value: '%s' (see 'memdiag report --help')", a);
            free(args);
            return EXIT_USAGE;
        } else {
            args[nargs++] = argv[i];
        }
    }
    if (!nargs || !out) {
        cli_fail(!nargs ? "report needs at least one snapshot file or directory"
                        : "report writes an HTML page: -o FILE.html");
        free(args);
        return EXIT_USAGE;
    }
    char title[512]; /* what the user named: a run directory, or the first file */
    snprintf(title, sizeof title, "memdiag report: %s%s", args[0], nargs > 1 ? " and more" : "");
    cli_inputs in;
    int rc = cli_inputs_load(args, nargs, &in);
    free(args);
    if (rc)
        return rc;
    md_report rep = cli_inputs_report(&in);
    page p = {&rep, &opt, title};
    rc = cli_write_file(out, force, write_page, &p);
    if (!rc)
        printf("memdiag: wrote %s (%zu snapshot traces, %zu sample series)\n", out, rep.n,
               rep.nsranks);
    cli_inputs_free(&in);
    return rc;
}

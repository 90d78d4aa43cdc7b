/* cmd_summary.c - `memdiag summary` and `memdiag diagnose`: read the inputs
 * (inputs.c) and render the report as text or JSON. */
#include <stdlib.h>
#include <string.h>
#include "../render/report.h"
#include "cli.h"
#include "load.h"

static void help(int diagnose)
{
    printf("usage: memdiag %s PATH... [--top N]%s\n\n", diagnose ? "diagnose" : "summary",
           diagnose ? " [--json]" : " [--json]");
    printf("PATH: allocator snapshot files (torch.cuda.memory._dump_snapshot output,\n"
           "plain or .gz/.zst/.xz) or directories of per-rank snapshots.\n\n"
           "  --top N   sites to list at the peak (default 8)\n"
           "  --json    machine-readable output (schema 1, docs/json-schema.md)\n"
           "  --brief   a few lines per rank (what memdiag run prints)\n\n"
           "Several files are read at once, one per CPU, and where a CPU is left over a\n"
           "file is read and decompressed ahead on another, and an uncompressed file of\n"
           "16 MB or more replayed there as it is read (with a third CPU, a smaller one's\n"
           "trace walked there for the reconstruction a ring buffer's trace needs);\n"
           "MEMDIAG_THREADS=N caps the CPUs used (1: one file after another, nothing read\n"
           "ahead, each replayed after its read).\n");
}

int cmd_summary(int argc, char **argv, int diagnose)
{
    md_out_opts opt = {8, diagnose, 0};
    int json = 0;
    char **args = calloc((size_t)argc + 1, sizeof *args);
    int nargs = 0;
    if (!args)
        return EXIT_USAGE;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            help(diagnose);
            free(args);
            return 0;
        } else if (!strcmp(argv[i], "--json")) {
            json = 1;
        } else if (!strcmp(argv[i], "--brief")) {
            opt.brief = 1;
        } else if (!strcmp(argv[i], "--top") && i + 1 < argc) {
            long v;
            if (cli_number("--top", argv[++i], 0, 1000, &v)) {
                free(args);
                return EXIT_USAGE;
            }
            opt.top = (int)v;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            cli_fail("unknown option '%s' (see 'memdiag %s --help')", argv[i], argv[0]);
            free(args);
            return EXIT_USAGE;
        } else {
            args[nargs++] = argv[i];
        }
    }
    if (nargs == 0) {
        cli_fail("%s needs at least one snapshot file or directory", argv[0]);
        free(args);
        return EXIT_USAGE;
    }
    cli_inputs in;
    int rc = cli_inputs_load(args, nargs, &in);
    free(args);
    if (rc)
        return rc;
    md_report rep = cli_inputs_report(&in);
    if (json)
        md_render_json(stdout, &rep, &opt);
    else
        md_render_text(stdout, &rep, &opt);
    cli_inputs_free(&in);
    return 0;
}

/* main.c - memdiag: find out where a training job's GPU memory goes.
 * Dispatches subcommands; each lives in its own cmd_*.c file. */
#include <malloc.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli.h"

static void usage(FILE *o)
{
    fprintf(o,
            "usage: memdiag <command> [options]\n"
            "\n"
            "commands:\n"
            "  run [options] -- COMMAND  run a job with memory capture, no code changes\n"
            "  summary  PATH...          peak, steps, phases, indicators and top sites per rank\n"
            "  diagnose PATH... [--json] the same facts, and findings; --json for machines\n"
            "  diff     BEFORE AFTER     what changed between two runs of a job, per rank\n"
            "  flamegraph PATH -o F.html who holds the memory at the peak, by whole stack\n"
            "                            (--at end|oom|SECONDS; --folded for other tools)\n"
            "  report PATH... -o F.html  all of it as one page: memory over time, findings,\n"
            "                            sites and flame graphs per rank (works offline)\n"
            "  export PATH --format F    the history for other tools: csv, perfetto, folded,\n"
            "                            torch-snapshot (a window in torch's own format)\n"
            "  predict  --model M --batch B --seq S ...  a training step's peak before running it;\n"
            "                            --validate RUN compares it with a measured run\n"
            "  probe    [-o FILE]        measure predict's constants on this GPU (needs torch)\n"
            "  version                   print the version\n"
            "\n"
            "PATH is a PyTorch allocator snapshot (torch.cuda.memory._dump_snapshot;\n"
            "plain, .gz, .zst or .xz), a memdiag capture file (.mdcap), a directory of them\n"
            "(a 'memdiag run' output), or a seed-script JSON report; - reads standard input.\n"
            "'memdiag COMMAND --help' shows a command's options.\n"
            "Exit status: 0 success, 1 (diff --fail-above) a rank's peak grew past the\n"
            "limit, 2 unusable input or arguments, 3 (run) the job ran out of GPU memory.\n");
}

void cli_fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("memdiag: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

void cli_fail_err(const md_err *err)
{
    char buf[1024];
    cli_fail("%s", md_err_format(err, buf, sizeof buf));
}

int cli_number(const char *opt, const char *s, long lo, long hi, long *out)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (*end || end == s || v < lo || v > hi) {
        cli_fail("%s wants a number %ld..%ld, got '%s'", opt, lo, hi, s);
        return -1;
    }
    *out = v;
    return 0;
}

void cli_json_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            fprintf(f, "\\%c", *s);
        else if ((unsigned char)*s < 0x20)
            fprintf(f, "\\u%04x", (unsigned char)*s);
        else
            fputc(*s, f);
    }
    fputc('"', f);
}

int main(int argc, char **argv)
{
    /* Big arrays (events, timeline) grow by realloc; a fixed mmap threshold
     * keeps them in mmap'd chunks that mremap grows without copying
     * (glibc would otherwise raise the threshold after the first free). */
    mallopt(M_MMAP_THRESHOLD, CLI_MMAP_THRESHOLD);
    /* and the heap is not given back to the kernel between stages: the
     * next stage's arrays reuse its pages instead of faulting in new ones */
    mallopt(M_TRIM_THRESHOLD, 256 << 20);
    if (argc < 2) {
        usage(stderr);
        return EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help") || !strcmp(cmd, "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(cmd, "version") || !strcmp(cmd, "--version")) {
        printf("memdiag %s\n", MEMDIAG_VERSION);
        return 0;
    }
    if (!strcmp(cmd, "run"))
        return cmd_run(argc - 1, argv + 1);
    if (!strcmp(cmd, "predict"))
        return cmd_predict(argc - 1, argv + 1);
    if (!strcmp(cmd, "probe"))
        return cmd_probe(argc - 1, argv + 1);
    if (!strcmp(cmd, "summary"))
        return cmd_summary(argc - 1, argv + 1, 0);
    if (!strcmp(cmd, "diagnose"))
        return cmd_summary(argc - 1, argv + 1, 1);
    if (!strcmp(cmd, "diff"))
        return cmd_diff(argc - 1, argv + 1);
    if (!strcmp(cmd, "flamegraph"))
        return cmd_flamegraph(argc - 1, argv + 1);
    if (!strcmp(cmd, "report"))
        return cmd_report(argc - 1, argv + 1);
    if (!strcmp(cmd, "export"))
        return cmd_export(argc - 1, argv + 1);
    cli_fail("unknown command '%s' (see 'memdiag --help')", cmd);
    return EXIT_USAGE;
}

/* cmd_probe.c - `memdiag probe`: measures predict's machine-dependent
 * constants on this GPU. Measuring needs torch on the device, so the work
 * is memdiag's Python glue (python/memdiag/probe.py); this command finds
 * it and runs it with the user's python. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "cli.h"

static void help(void)
{
    printf("usage: memdiag probe [-o FILE]\n\n"
           "Measures on this machine's GPU, with its torch, what `memdiag predict` assumes:\n"
           "the CUDA context, cuBLAS workspaces, the loss's bytes per logit element and the\n"
           "math attention path's bytes per score. Writes them to FILE (default\n"
           "memdiag-calibration.json) for `memdiag predict --calibration FILE`.\n"
           "Runs python3 (or $MEMDIAG_PYTHON) with torch importable; takes seconds.\n");
}

int cmd_probe(int argc, char **argv)
{
    const char *out = "memdiag-calibration.json";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            help();
            return 0;
        } else if ((!strcmp(argv[i], "-o") || !strcmp(argv[i], "--out")) && i + 1 < argc) {
            out = argv[++i];
        } else {
            cli_fail("unknown or incomplete option '%s' (see 'memdiag probe --help')", argv[i]);
            return EXIT_USAGE;
        }
    }
    char py[PATH_MAX], env[2 * PATH_MAX + 16];
    if (cli_find_python(py)) {
        cli_fail("cannot find memdiag's Python glue next to this executable");
        return EXIT_USAGE;
    }
    const char *old = getenv("PYTHONPATH");
    snprintf(env, sizeof env, "%s%s%s", py, old && *old ? ":" : "", old ? old : "");
    const char *python = getenv("MEMDIAG_PYTHON") ? getenv("MEMDIAG_PYTHON") : "python3";
    if (setenv("PYTHONPATH", env, 1)) {
        cli_fail("cannot set PYTHONPATH: %s", strerror(errno));
        return EXIT_USAGE;
    }
    pid_t pid = fork();
    if (pid < 0) {
        cli_fail("cannot start %s: %s", python, strerror(errno));
        return EXIT_USAGE;
    }
    if (pid == 0) {
        execlp(python, python, "-m", "memdiag.probe", "--out", out, (char *)NULL);
        fprintf(stderr, "memdiag: cannot run %s: %s\n", python, strerror(errno));
        _exit(127);
    }
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return EXIT_USAGE;
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : EXIT_USAGE;
}

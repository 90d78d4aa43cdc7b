/* cmd_run.c - `memdiag run [options] -- COMMAND...`: runs an unmodified
 * job (python, torchrun, srun, ...) with memdiag's capture armed in every
 * Python process that imports torch, then summarizes what was recorded.
 *
 * The capture travels by environment: PYTHONPATH gains memdiag's
 * sitecustomize (which chains to the user's own), MEMDIAG_* carry the
 * options, and every descendant (torchrun workers, srun tasks) inherits
 * them. memdiag writes manifest.json; each process writes its own
 * rank-named capture file and snapshot. */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <dirent.h>
#include <unistd.h>
#include "cli.h"

typedef struct run_opts {
    const char *out;
    int force, quiet, driver;
    const char *stacks, *context, *max_entries, *skip, *record, *name;
    char **cmd;
} run_opts;

static void help(void)
{
    printf("usage: memdiag run [options] -- COMMAND [ARGS...]\n\n"
           "Runs COMMAND (python, python -m, torchrun, srun, ...) with memory capture in every\n"
           "process that uses torch and CUDA, without code changes, then prints the summary.\n\n"
           "  -o, --out DIR        output directory (default memdiag-YYYYmmdd-HHMMSS)\n"
           "  --force              reuse a non-empty output directory\n"
           "  --stacks KIND        python (default), all (with C++; slower), none\n"
           "  --context WHAT       stacks for all events (default) or alloc only (cheaper)\n"
           "  --max-entries N      allocator history ring buffer per process (default 1000000)\n"
           "  --skip-steps N       start recording after N optimizer steps\n"
           "  --record-steps M     record M steps, then dump the snapshot (default: to the end)\n"
           "  --name TEMPLATE      file names, from {run} {rank} {local_rank} {step} {host} {pid}\n"
           "                       (default rank{rank})\n"
           "  --driver on|off      driver-level tracing (CUPTI): every device allocation of\n"
           "                       every CUDA process, by library (default on)\n"
           "  --quiet              no line from the job when recording starts\n\n"
           "Exit status: the command's, or 3 when it ran out of GPU memory and did not go on\n"
           "(the evidence is written; an error the job caught, with steps after it, keeps the\n"
           "command's status), 2 for unusable arguments. Snapshots are also written on SIGUSR1.\n");
}

/* {run} {rank} {local_rank} {step} {host} {pid} only, as the glue expands */
static int valid_template(const char *t)
{
    static const char *const names[] = {"run", "rank", "local_rank", "step", "host", "pid"};
    for (const char *p = strchr(t, '{'); p; p = strchr(p + 1, '{')) {
        const char *e = strchr(p, '}');
        if (!e)
            return 0;
        size_t n = (size_t)(e - p - 1), k = 0;
        for (; k < sizeof names / sizeof names[0]; k++)
            if (strlen(names[k]) == n && !strncmp(p + 1, names[k], n))
                break;
        if (k == sizeof names / sizeof names[0])
            return 0;
    }
    return *t != 0;
}

static int numeric(const char *s)
{
    if (!*s)
        return 0;
    for (; *s; s++)
        if (*s < '0' || *s > '9')
            return 0;
    return 1;
}

static int parse(int argc, char **argv, run_opts *o)
{
    memset(o, 0, sizeof *o);
    o->stacks = "python";
    o->context = "all";
    o->max_entries = "1000000";
    o->skip = "0";
    o->record = "0";
    o->name = "rank{rank}";
    o->driver = 1;
    int i = 1;
    for (; i < argc; i++) {
        const char *a = argv[i];
        int more = i + 1 < argc;
        if (!strcmp(a, "--")) {
            i++;
            break;
        } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            help();
            return 1;
        } else if ((!strcmp(a, "-o") || !strcmp(a, "--out")) && more) {
            o->out = argv[++i];
        } else if (!strcmp(a, "--force")) {
            o->force = 1;
        } else if (!strcmp(a, "--quiet")) {
            o->quiet = 1;
        } else if (!strcmp(a, "--driver") && more) {
            const char *v = argv[++i];
            if (strcmp(v, "on") && strcmp(v, "off")) {
                cli_fail("--driver wants on or off, got '%s'", v);
                return -1;
            }
            o->driver = !strcmp(v, "on");
        } else if (!strcmp(a, "--stacks") && more) {
            o->stacks = argv[++i];
            if (strcmp(o->stacks, "python") && strcmp(o->stacks, "all") && strcmp(o->stacks, "none")) {
                cli_fail("--stacks wants python, all or none, got '%s'", o->stacks);
                return -1;
            }
        } else if (!strcmp(a, "--context") && more) {
            o->context = argv[++i];
            if (strcmp(o->context, "all") && strcmp(o->context, "alloc")) {
                cli_fail("--context wants all or alloc, got '%s'", o->context);
                return -1;
            }
        } else if ((!strcmp(a, "--max-entries") || !strcmp(a, "--skip-steps") ||
                    !strcmp(a, "--record-steps")) && more) {
            const char *v = argv[++i];
            if (!numeric(v)) {
                cli_fail("%s wants a whole number, got '%s'", a, v);
                return -1;
            }
            if (!strcmp(a, "--max-entries"))
                o->max_entries = v;
            else if (!strcmp(a, "--skip-steps"))
                o->skip = v;
            else
                o->record = v;
        } else if (!strcmp(a, "--name") && more) {
            o->name = argv[++i];
            if (strchr(o->name, '/') || !valid_template(o->name)) {
                cli_fail("--name: a file name template without '/', using {run} {rank} "
                         "{local_rank} {step} {host} {pid}; got '%s'", o->name);
                return -1;
            }
        } else if (a[0] == '-') {
            cli_fail("unknown option '%s' (see 'memdiag run --help'; put the command after --)", a);
            return -1;
        } else {
            break; /* the command starts here */
        }
    }
    if (i >= argc) {
        cli_fail("run needs a command: memdiag run [options] -- COMMAND [ARGS...]");
        return -1;
    }
    o->cmd = argv + i;
    return 0;
}

/* A driver file is named by host and pid, which the next run does not
 * repeat: a reused directory's old ones would read as processes of this
 * run. */
static int is_driver_file(const char *name)
{
    size_t n = strlen(name);
    return !strncmp(name, "driver-", 7) && n > 13 && !strcmp(name + n - 6, ".mdcap");
}

/* The directory must be new, or empty, or --force (which removes the
 * previous run's driver files). */
static int prepare_dir(const char *dir, int force)
{
    DIR *d = opendir(dir);
    if (d) {
        struct dirent *e;
        int used = 0;
        while ((e = readdir(d)) != NULL) {
            used |= strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
            if (force && is_driver_file(e->d_name)) {
                char path[PATH_MAX + 256];
                snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
                unlink(path);
            }
        }
        closedir(d);
        if (used && !force) {
            cli_fail("%s: output directory is not empty; use --force to reuse it, or -o NEW", dir);
            return -1;
        }
        return 0;
    }
    if (mkdir(dir, 0755) != 0) {
        cli_fail("%s: cannot create output directory: %s", dir, strerror(errno));
        return -1;
    }
    return 0;
}

/* memdiag's Python glue and libmemdiag.so, located from this executable:
 * a checkout (build/memdiag beside python/) or an install (bin/, lib/). */
static int find_support(char py[PATH_MAX], char lib[PATH_MAX])
{
    static const char *const libs[] = {"%s/libmemdiag_capture.so", "%s/../lib/libmemdiag_capture.so"};
    if (cli_find_python(py))
        return -1;
    return cli_find_beside_exe(libs, 2, "", lib);
}

static void manifest(const char *dir, const run_opts *o, time_t start, time_t end, int status)
{
    char path[PATH_MAX + 32], host[256] = "";
    snprintf(path, sizeof path, "%s/manifest.json", dir);
    FILE *f = fopen(path, "w");
    if (!f)
        return;
    gethostname(host, sizeof host - 1);
    const char *conf = getenv("PYTORCH_CUDA_ALLOC_CONF");
    fprintf(f, "{\n  \"tool\": \"memdiag %s\",\n  \"command\": [", MEMDIAG_VERSION);
    for (char **c = o->cmd; *c; c++) {
        if (c != o->cmd)
            fputs(", ", f);
        cli_json_string(f, *c);
    }
    fprintf(f, "],\n  \"host\": ");
    cli_json_string(f, host);
    fprintf(f, ",\n  \"start\": %lld,\n  \"end\": %lld,\n  \"exit_status\": %d,\n", (long long)start,
            (long long)end, status);
    fprintf(f, "  \"stacks\": \"%s\",\n  \"context\": \"%s\",\n  \"max_entries\": %s,\n  \"skip_steps\": %s,\n"
               "  \"record_steps\": %s,\n  \"name\": ", o->stacks, o->context, o->max_entries,
            o->skip, o->record);
    cli_json_string(f, o->name);
    fprintf(f, ",\n  \"driver\": \"%s\"", o->driver ? "on" : "off");
    fprintf(f, ",\n  \"PYTORCH_CUDA_ALLOC_CONF\": ");
    cli_json_string(f, conf ? conf : "");
    fprintf(f, "\n}\n");
    fclose(f);
}

static int set_env(const run_opts *o, const char *dir, const char *py, const char *lib)
{
    char buf[3 * PATH_MAX + 64];
    const char *old = getenv("PYTHONPATH");
    snprintf(buf, sizeof buf, "%s/memdiag/_site:%s%s%s", py, py, old && *old ? ":" : "",
             old ? old : "");
    const char *run = strrchr(dir, '/');
    return setenv("PYTHONPATH", buf, 1) || setenv("MEMDIAG_OUT", dir, 1) ||
           setenv("MEMDIAG_LIB", lib, 1) || setenv("MEMDIAG_STACKS", o->stacks, 1) ||
           setenv("MEMDIAG_CONTEXT", o->context, 1) ||
           setenv("MEMDIAG_MAX_ENTRIES", o->max_entries, 1) ||
           setenv("MEMDIAG_SKIP_STEPS", o->skip, 1) || setenv("MEMDIAG_RECORD_STEPS", o->record, 1) ||
           setenv("MEMDIAG_NAME", o->name, 1) || setenv("MEMDIAG_RUN", run ? run + 1 : dir, 1) ||
           setenv("MEMDIAG_FORCE", o->force ? "1" : "", 1) ||
           setenv("MEMDIAG_QUIET", o->quiet ? "1" : "", 1);
}

/* A libcupti for processes that have not loaded one (torch's wheel
 * brings its own, which the tracer prefers): the toolkit's. */
static void find_cupti(char out[PATH_MAX])
{
    static const char *const dirs[] = {"/usr/local/cuda/lib64", "/usr/local/cuda/extras/CUPTI/lib64",
                                       "/usr/local/cuda/lib", "/usr/lib/x86_64-linux-gnu"};
    out[0] = 0;
    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0] && !out[0]; i++) {
        snprintf(out, PATH_MAX, "%s/libcupti.so", dirs[i]);
        if (access(out, R_OK))
            out[0] = 0;
    }
}

/* Driver-level tracing: the CUDA driver loads the capture library in each
 * process that calls cuInit. A tool already injected (Nsight) keeps its
 * place, and the trace is off. */
static int set_driver_env(const run_opts *o, const char *lib)
{
    const char *held = getenv("CUDA_INJECTION64_PATH");
    if (!o->driver)
        return 0;
    if (held && *held) {
        fprintf(stderr, "memdiag: CUDA_INJECTION64_PATH is set (%s): driver-level tracing "
                "is off\n", held);
        return 0;
    }
    char cupti[PATH_MAX];
    find_cupti(cupti);
    return setenv("CUDA_INJECTION64_PATH", lib, 1) ||
           (cupti[0] && !getenv("MEMDIAG_CUPTI") && setenv("MEMDIAG_CUPTI", cupti, 1));
}

static pid_t child_pid;

static void forward(int sig)
{
    if (child_pid > 0)
        kill(child_pid, sig);
}

/* Runs the command; returns its exit status (128+signal if killed). */
static int run_child(char **cmd)
{
    child_pid = fork();
    if (child_pid < 0) {
        cli_fail("cannot start %s: %s", cmd[0], strerror(errno));
        return 127;
    }
    if (child_pid == 0) {
        execvp(cmd[0], cmd);
        fprintf(stderr, "memdiag: cannot run %s: %s\n", cmd[0], strerror(errno));
        _exit(127);
    }
    /* Ctrl-C reaches the whole foreground group already; pass on the rest */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = forward;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGUSR1, &sa, NULL);
    sa.sa_handler = SIG_IGN;
    sigaction(SIGINT, &sa, NULL);
    int st;
    while (waitpid(child_pid, &st, 0) < 0)
        if (errno != EINTR)
            return 127;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* Out-of-memory errors the processes recorded: how many, and whether any
 * process ended with one (END status 3: no step completed after it; or no
 * END at all after one) rather than catching it and going on. */
typedef struct ooms {
    size_t n;
    int fatal;
} ooms;

static ooms count_ooms(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    ooms o = {0, 0};
    while (d && (e = readdir(d)) != NULL) {
        size_t n = strlen(e->d_name);
        if (n < 7 || strcmp(e->d_name + n - 6, ".mdcap") || is_driver_file(e->d_name))
            continue; /* a driver file records no OOM, and can be large */
        char path[PATH_MAX + 256];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        md_sample_rank r;
        md_capture_info info;
        md_err err;
        if (md_capture_load(path, &r, &info, &err) == MD_OK) {
            o.n += info.ooms;
            o.fatal |= info.status == 3 || (info.ooms && !info.complete);
            md_sample_rank_clear(&r);
        }
    }
    if (d)
        closedir(d);
    return o;
}

static int has_outputs(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int any = 0;
    while (d && (e = readdir(d)) != NULL)
        any |= strstr(e->d_name, ".mdcap") || strstr(e->d_name, ".pickle");
    if (d)
        closedir(d);
    return any;
}

int cmd_run(int argc, char **argv)
{
    run_opts o;
    int rc = parse(argc, argv, &o);
    if (rc)
        return rc > 0 ? 0 : EXIT_USAGE;
    char def[64], dir[PATH_MAX], py[PATH_MAX], lib[PATH_MAX];
    if (!o.out) {
        time_t t = time(NULL);
        strftime(def, sizeof def, "memdiag-%Y%m%d-%H%M%S", localtime(&t));
        o.out = def;
    }
    if (prepare_dir(o.out, o.force) || !realpath(o.out, dir))
        return EXIT_USAGE;
    if (find_support(py, lib)) {
        cli_fail("cannot find memdiag's Python glue and libmemdiag_capture.so next to this executable "
                 "(run 'make', or install memdiag)");
        return EXIT_USAGE;
    }
    if (set_env(&o, dir, py, lib) || set_driver_env(&o, lib)) {
        cli_fail("cannot set the environment: %s", strerror(errno));
        return EXIT_USAGE;
    }
    time_t start = time(NULL);
    int status = run_child(o.cmd);
    manifest(dir, &o, start, time(NULL), status);
    ooms oom = count_ooms(dir);
    fflush(stdout);
    if (has_outputs(dir)) {
        char went_on[96] = "";
        if (oom.n && !oom.fatal)
            snprintf(went_on, sizeof went_on, " after %zu out-of-memory error%s it went on from",
                     oom.n, oom.n == 1 ? "" : "s");
        printf("\nmemdiag: %s finished with status %d%s; recorded in %s\n\n", o.cmd[0], status,
               oom.fatal ? " (out of GPU memory)" : went_on, dir);
        fflush(stdout);
        char *sargs[] = {"summary", dir, "--brief", NULL};
        cmd_summary(3, sargs, 0);
        printf("\nnext: memdiag diagnose %s     evidence and advice for each finding\n"
               "      memdiag summary %s      steps, phases and sites per rank\n"
               "      memdiag report %s -o report.html   all of it on one page, with graphs\n",
               dir, dir, dir);
    } else {
        printf("\nmemdiag: %s finished with status %d; no process used torch with CUDA, "
               "nothing recorded in %s\n", o.cmd[0], status, dir);
    }
    return oom.fatal ? 3 : status;
}

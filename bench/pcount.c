/* pcount.c - where a short command's time goes, on a host without perf:
 * runs COMMAND RUNS times and prints, per run, its wall time and what the
 * kernel counted for it and its threads (perf_event_open, inherited):
 * task-clock, page faults, context switches, CPU migrations, and where the
 * PMU is there, cycles and instructions in user and kernel mode apart;
 * and the user and system time wait4 reports (tick-sampled on some
 * kernels, exact on others).
 * The median of each column last.
 *
 *   cc -O2 -static -o build/pcount bench/pcount.c
 *   build/pcount 21 build/memdiag summary F >/dev/null
 *
 * The command's stdout goes to /dev/null; the table to stderr. */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/perf_event.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <time.h>
#include <unistd.h>

enum { TASK_CLOCK, FAULTS, CSW, MIGR, CYC_U, CYC_K, INS_U, INS_K, NEV };
static const char *const names[NEV + 2] = {"task_ms", "faults", "csw",    "migr", "Mcyc_u",
                                           "Mcyc_k",  "Mins_u", "Mins_k", "usr_ms", "sys_ms"};
#define NCOL (NEV + 3) /* the counters, user and system ms (rusage), wall ms */
#define USR NEV
#define SYS (NEV + 1)
#define WALL (NEV + 2)

struct ev {
    uint32_t type;
    uint64_t config;
    int user, kernel;
};
static const struct ev evs[NEV] = {
    {PERF_TYPE_SOFTWARE, PERF_COUNT_SW_TASK_CLOCK, 1, 1},
    {PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS, 1, 1},
    {PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CONTEXT_SWITCHES, 1, 1},
    {PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_MIGRATIONS, 1, 1},
    {PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES, 1, 0},
    {PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES, 0, 1},
    {PERF_TYPE_HARDWARE, PERF_COUNT_HW_INSTRUCTIONS, 1, 0},
    {PERF_TYPE_HARDWARE, PERF_COUNT_HW_INSTRUCTIONS, 0, 1},
};

/* A counter for pid from its exec on, its threads included; -1 if the
 * kernel has none such (no PMU in the guest, or not allowed). */
static int open_ev(const struct ev *e, pid_t pid)
{
    struct perf_event_attr a;
    memset(&a, 0, sizeof a);
    a.size = sizeof a;
    a.type = e->type;
    a.config = e->config;
    a.disabled = 1;
    a.enable_on_exec = 1;
    a.inherit = 1;
    a.exclude_user = !e->user;
    a.exclude_kernel = !e->kernel;
    a.exclude_hv = 1;
    return (int)syscall(SYS_perf_event_open, &a, pid, -1, -1, PERF_FLAG_FD_CLOEXEC);
}

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* One run: the counters in v[0..NEV) (-1: none), then user, system and
 * wall ms. */
static int run_once(char **argv, double v[NCOL])
{
    int go[2];
    if (pipe(go))
        return -1;
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) { /* waits until the counters are on it, then execs */
        char c;
        close(go[1]);
        if (read(go[0], &c, 1) != 1)
            _exit(127);
        int null = open("/dev/null", O_WRONLY);
        if (null >= 0)
            dup2(null, 1);
        execvp(argv[0], argv);
        _exit(127);
    }
    close(go[0]);
    int fd[NEV];
    for (int i = 0; i < NEV; i++)
        fd[i] = open_ev(&evs[i], pid);
    double t0 = now_ms();
    if (write(go[1], "x", 1) != 1)
        return -1;
    close(go[1]);
    int st;
    struct rusage ru;
    if (wait4(pid, &st, 0, &ru) < 0)
        return -1;
    v[WALL] = now_ms() - t0;
    v[USR] = ru.ru_utime.tv_sec * 1e3 + ru.ru_utime.tv_usec / 1e3;
    v[SYS] = ru.ru_stime.tv_sec * 1e3 + ru.ru_stime.tv_usec / 1e3;
    for (int i = 0; i < NEV; i++) {
        uint64_t x = 0;
        v[i] = fd[i] >= 0 && read(fd[i], &x, sizeof x) == sizeof x ? (double)x : -1;
        if (fd[i] >= 0)
            close(fd[i]);
    }
    if (v[TASK_CLOCK] >= 0)
        v[TASK_CLOCK] /= 1e6;
    for (int i = CYC_U; i < NEV; i++)
        if (v[i] >= 0)
            v[i] /= 1e6;
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 1;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void row(const char *label, const double v[NCOL])
{
    fprintf(stderr, "%-7s %8.3f", label, v[WALL]);
    for (int i = 0; i < WALL; i++)
        fprintf(stderr, i == FAULTS || i == CSW || i == MIGR ? " %8.0f" : " %8.3f", v[i]);
    fputc('\n', stderr);
}

int main(int argc, char **argv)
{
    if (argc < 3 || atoi(argv[1]) <= 0) {
        fprintf(stderr, "usage: pcount RUNS COMMAND [ARG...]\n");
        return 2;
    }
    int runs = atoi(argv[1]);
    double (*all)[NCOL] = calloc((size_t)runs, sizeof *all);
    if (!all)
        return 1;
    fprintf(stderr, "%-7s %8s", "run", "wall_ms");
    for (int i = 0; i < WALL; i++)
        fprintf(stderr, " %8s", names[i]);
    fputc('\n', stderr);
    for (int r = 0; r < runs; r++) {
        if (run_once(argv + 2, all[r])) {
            fprintf(stderr, "pcount: run %d failed\n", r);
            return 1;
        }
        char label[16];
        snprintf(label, sizeof label, "%d", r);
        row(label, all[r]);
    }
    double med[NCOL], *col = malloc((size_t)runs * sizeof *col);
    for (int i = 0; col && i < NCOL; i++) {
        for (int r = 0; r < runs; r++)
            col[r] = all[r][i];
        qsort(col, (size_t)runs, sizeof *col, cmp_d);
        med[i] = col[runs / 2];
    }
    row("median", med);
    free(col);
    free(all);
    return 0;
}

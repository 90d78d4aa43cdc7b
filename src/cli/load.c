/* load.c - reads several snapshot files at once: each file is read and its
 * ranks built (replay and analysis) on a worker thread of its own, up to
 * one per CPU. A job's per-rank files (8 ranks of a few hundred MB each)
 * then take about as long as the largest one instead of all of them in a
 * row. The library keeps no global state, so jobs share nothing; results
 * are taken in file order, so output and the error reported (the first
 * failing file's) are what a sequential read would give. Where a CPU is
 * left over for a file, its trace is replayed there as it is read (plain
 * files of 16 MB and more, model/follow.c; with a third CPU, a smaller
 * file's trace is walked there for a reconstruction), and the ranks of its
 * devices (one process on several GPUs) are built two at a time. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include "../model/model.h"
#include "../util/thread.h"
#include "../util/util.h"
#include "load.h"
#include "prefault.h"

#define MAX_WORKERS 16 /* bounds the readers' working memory held at once */
/* how far the heap grows ahead of malloc's need, faulted in meanwhile:
 * 0.5, 1, 2 and 4 MB ran alike on big_gamma and synthetic-100000, 1 MB with
 * the best medians; it is also at most what more memory is resident */
#define PREFAULT_LEAD ((size_t)1 << 20)
#define FOLLOW_MIN_BYTES ((off_t)16 << 20) /* see worth_following */
#define FOLLOW_SMALL_CPUS 4 /* and from HELPERS_INPUT_MIN with this many CPUs */
/* the heap put on huge pages where faults are dear (huge_heap_bytes): a
 * large input's first stretch; a small input's all of it (2-5 MB, its
 * arrays' doublings among it) only when asked (MEMDIAG_HUGEHEAP=1) */
#define HUGE_HEAP_SMALL ((size_t)8 << 20)
#define HUGE_HEAP_LARGE ((size_t)2 << 20)
/* Under this much input, a "small" one (plain bytes, guessed where compressed), no
 * helper runs unless asked: each adds resident memory (the huge heap its
 * 2 MB pages, the prefault thread its 1 MB lead) that would take a small
 * snapshot past twice its size (0.73 MB gamma-small: 1.35 MB alone, 4.6
 * with the huge heap, 2.4 with the prefault thread), for 1-3 ms saved */
#define HELPERS_INPUT_MIN ((size_t)4 << 20)
/* and the huge heap's 2 MB only from here, where they add at most a
 * quarter of the input: a 4.2 MB state-only snapshot (8 copies of
 * big_gamma's blocks, no trace) was 2.19x its size with them, 1.75x
 * without, for 10 % of its time (27 -> 31 ms); big_gamma (6.4 MB) 1.69x
 * and 1.50x, 16 -> 18 ms */
#define HUGE_HEAP_INPUT_MIN ((size_t)8 << 20)
/* A plain file's read splits in two (split_threads, where asked) from this
 * size, where the file has SPLIT_CPUS */
#define SPLIT_MIN_BYTES ((size_t)4 << 20)
#define SPLIT_CPUS 2
#define PREFAULT_DEAR_US 3.0 /* a fault this dear: 0.6-2 us where measured cheap, 11-15 dear */
enum { FOLLOW_BY_SIZE = 1, FOLLOW_ALL = 2, FOLLOW_WALK = 3 }; /* pool.follow, 0: none */

/* The prefault thread, and the smaller followed files whose first
 * events are still to come, that stop it if they begin cleanly (first_fed). */
typedef struct prefault_watch {
    cli_prefault *pf;
    atomic_int left, ring;
} prefault_watch;

typedef struct pool {
    cli_snap_job *jobs;
    size_t n;
    atomic_size_t next;   /* the next job to start */
    atomic_size_t failed; /* the lowest failed job's index, n if none */
    md_load_opts opts;
    int follow; /* FOLLOW_*: replay files while they are read, on a CPU of their own */
    int walks;  /* and where not, walk their traces for a reconstruction (walk_pays) */
    int rank_threads; /* threads building one file's ranks (its devices) */
    size_t job_cpus;  /* the CPUs each file being read has */
    int aside;        /* stacks classified aside: -1 where CPUs allow, 0 never, 1 always */
    int split;        /* md_load_opts.split for plain files of SPLIT_MIN_BYTES and more */
    double split_where; /* and where the second reader starts (0: the library's) */
    const off_t *plain; /* each job's plain_size, NULL: none known */
    const off_t *guess; /* and its plain bytes, guessed where compressed */
    prefault_watch *watch; /* the prefault thread, stopped by the followers (first_fed) */
} pool;

/* The devices of a snapshot whose ranks are built at once: each thread
 * takes the next device; each rank's error stays with it. */
typedef struct rank_builds {
    const md_snapshot *s;
    md_rank *ranks;
    const int *dev;
    int rank; /* every device's: one process */
    md_err *errs;
    int *failed;
    size_t n;
    atomic_size_t next;
    md_pass *first; /* for devices[0], the pass made while reading */
    const md_err *err0; /* each rank's error starts as this */
    int aside; /* each rank's stacks classified on a thread of its own */
} rank_builds;

static void *build_some(void *arg)
{
    rank_builds *B = arg;
    for (size_t k; (k = atomic_fetch_add(&B->next, 1)) < B->n;) {
        md_pass *pass = k == 0 ? B->first : NULL;
        B->errs[k] = *B->err0; /* the file's name, for the message */
        B->failed[k] = md_rank_build_with(&B->ranks[k], B->s, B->dev[k], B->rank, pass,
                                          B->aside, &B->errs[k]) != 0;
    }
    return NULL;
}

/* Builds the ranks of B's devices, on a second thread too where one is
 * allowed (a snapshot of several devices: one process on several GPUs).
 * Where some fail, the first one's error goes to *err and every rank is
 * freed: the result is what building them one after another in order
 * would report. */
static int build_all(rank_builds *B, int threads, md_err *err)
{
    pthread_t tid;
    int helper = threads > 1 && B->n > 1 && !md_thread_start(&tid, build_some, B, MD_STACK_WORK);
    build_some(B);
    if (helper)
        pthread_join(tid, NULL);
    for (size_t k = 0; k < B->n; k++)
        if (B->failed[k]) {
            *err = B->errs[k];
            for (size_t i = 0; i < B->n; i++)
                if (!B->failed[i])
                    md_rank_free(&B->ranks[i]);
            return -1;
        }
    return 0;
}

/* The devices that hold data: a trace where any device has one, else
 * segments; into dev[] (room for maxdev + 1), their count. */
static size_t devices_with_data(const md_snapshot *s, int maxdev, int *dev)
{
    int traces = 0;
    size_t n = 0;
    for (int d = 0; d <= maxdev; d++)
        traces |= cli_device_has_data(s, d, 1);
    for (int d = 0; d <= maxdev; d++)
        if (cli_device_has_data(s, d, traces))
            dev[n++] = d;
    return n;
}

/* A rank for each device that holds data. A file is one process: its
 * devices share its rank, taken from the file name ("rank3") when it has
 * one, else the number of its first device. threads: how many may build
 * them at once; cpus: the CPUs this file has (each rank being built takes
 * a second one for its stacks where there are enough). */
static int build_ranks(cli_snap_job *j, md_pass *first, int threads, size_t cpus, int aside)
{
    const md_snapshot *s = j->snap;
    int named = md_rank_from_name(j->path), maxdev = md_snapshot_ndevices(s) - 1;
    size_t ns;
    const md_segment *g = md_snapshot_segments(s, &ns);
    for (size_t i = 0; i < ns; i++)
        if (g[i].device > maxdev && g[i].device < 4096)
            maxdev = g[i].device;
    size_t m = (size_t)maxdev + 1 > 0 ? (size_t)maxdev + 1 : 1;
    int *dev = malloc(m * sizeof *dev), *failed = calloc(m, sizeof *failed);
    md_err *errs = calloc(m, sizeof *errs);
    j->ranks = calloc(m, sizeof *j->ranks);
    int rc = 0;
    if (!dev || !failed || !errs || !j->ranks) {
        md_pass_free(first);
        rc = md_err_set(&j->err, MD_E_NOMEM, -1, "out of memory");
        goto out;
    }
    size_t n = devices_with_data(s, maxdev, dev);
    /* the pass made while reading covers the first device with events, if
     * any (md_replay_run_with checks); each rank being built classifies its
     * stacks on a CPU of its own where the file has three CPUs for each (as
     * for the walk, walk_pays): on a 2-CPU VM the thread cost more than it
     * took off (synthetic-10000 3.33 -> 3.45 ms, its idle vCPU slow to wake) */
    size_t at_once = n < (size_t)threads ? n : (size_t)threads;
    rank_builds B = {s, j->ranks, dev, named >= 0 ? named : n ? dev[0] : 0, errs, failed, n, 0,
                     first, &j->err, aside >= 0 ? aside : cpus >= 3 * at_once};
    if (n && build_all(&B, threads, &j->err)) {
        rc = -1;
        goto out;
    }
    if (!n)
        md_pass_free(first); /* no device with data took it */
    j->nranks = n;
    size_t own = 0; /* the process's own device: where most of its work is */
    for (size_t i = 1; i < j->nranks; i++)
        if (j->ranks[i].nevents > j->ranks[own].nevents)
            own = i;
    for (size_t i = 0; i < j->nranks; i++)
        j->ranks[i].further = i != own;
    if (!j->nranks)
        rc = md_err_set(&j->err, MD_E_FORMAT, -1,
                        "the snapshot holds no segments and no allocator history (record "
                        "with torch.cuda.memory._record_memory_history() before the work)");
out:
    free(dev);
    free(failed);
    free(errs);
    return rc;
}

/* A plain pickle's size (it begins with PROTO), else -1: compressed, or
 * not a file that can be read. *guess: its plain bytes, a compressed
 * file's guessed at 20x its size (the seed exercise's: 16x gzip, 27x xz);
 * -1 where it is not a regular file. */
static off_t plain_size(const char *path, off_t *guess)
{
    struct stat st;
    *guess = -1;
    if (stat(path, &st) || !S_ISREG(st.st_mode))
        return -1;
    FILE *f = fopen(path, "rb");
    int first = f ? fgetc(f) : EOF;
    if (f)
        fclose(f);
    *guess = first == 0x80 ? st.st_size : 20 * st.st_size;
    return first == 0x80 ? st.st_size : -1;
}

/* Whether a file of plain_size `plain`, with `cpus` CPUs, is worth
 * replaying as it is read: a plain pickle (it begins with PROTO), since a
 * compressed file's spare CPU is already decompressing it (a gzipped
 * 56 MB snapshot: median 125 -> 141 ms when followed); of 16 MB and more,
 * where the replay's arrays beside the reader's add +0.2x of the file's
 * size; or of 4 MB and more where the file has FOLLOW_SMALL_CPUS: there
 * the follower's pass took a 6 MB trace's 13-15 % off (the 16-CPU host,
 * session 46), its arrays 0.8 MB more resident (1.84x the file), where a
 * ring buffer's trace (which begins with an anomaly: the pass stops and
 * walks) lost nothing. On fewer CPUs the follower shares the reader's. */
static int worth_following(off_t plain, size_t cpus)
{
    return plain >= FOLLOW_MIN_BYTES ||
           (plain >= (off_t)HELPERS_INPUT_MIN && cpus >= FOLLOW_SMALL_CPUS);
}

/* Whether a file is replayed as it is read, under follow (FOLLOW_*). */
static int passes(int follow, off_t plain, size_t cpus)
{
    return follow == FOLLOW_ALL ||
           ((follow == FOLLOW_BY_SIZE || follow == FOLLOW_WALK) && worth_following(plain, cpus));
}

/* Whether a file of `guess` plain bytes, not replayed as it is read, is
 * worth walking through as it is read for the reconstruction a ring
 * buffer's trace needs (model/follow.c, md_follow_start(1)): with a CPU of
 * its own (beside the reading one and the one reading ahead: walks), and
 * large enough that a thread's start is small beside the walk it saves
 * (big_gamma, 6.4 MB: 3.6 M instructions, ~1 ms here; a trace that needs
 * none wastes the walk, on a CPU otherwise idle). Its memory is the
 * addresses seen, a few hundred KB. */
static int walk_pays(int walks, int follow, off_t guess)
{
    return walks && (follow == FOLLOW_WALK || (guess >= 0 && (size_t)guess >= HELPERS_INPUT_MIN));
}

/* Whether a first write to a fresh page is dear here (prefault.c's probe,
 * made once: *dear starts at -1). */
static int faults_dear(int *dear)
{
    if (*dear < 0)
        *dear = cli_fault_cost_us() >= PREFAULT_DEAR_US;
    return *dear;
}

/* Whether faulting the heap in on the spare CPU pays (prefault.c): for an
 * input (plain bytes, guessed) under HELPERS_INPUT_MIN never; above it,
 * where a fault is dear (shadow page tables, 11-15 us) always; where cheap
 * (0.6-2 us) only for plain files of 4 MB or more that no follower takes
 * that CPU from. On a 1 us host: big_gamma (6.4 MB) -5 %; 0.9-1.8 MB files
 * +8 % (the thread's start and its 1 MB lead cost more than a few hundred
 * faults, and the lead is 1 MB more resident); a followed 45 MB file +13 %;
 * compressed files 0 to +5 %. A smaller file followed (worth_following)
 * leaves the CPU to it only once its trace begins cleanly: *nsmall, where
 * faults are cheap, the files whose first events may stop the thread
 * (first_fed). */
static int prefault_pays(const off_t *sizes, size_t n, size_t input, int follow, size_t cpus,
                         int *dear, int *nsmall)
{
    *nsmall = 0;
    if (input < HELPERS_INPUT_MIN)
        return 0; /* memory first; so plain files reaching below hold 4 MB or more */
    off_t plain = sizes ? 0 : -1;
    int followed = follow == FOLLOW_ALL, small = 0;
    for (size_t i = 0; i < n && plain >= 0; i++) {
        plain = sizes[i] < 0 ? -1 : plain + sizes[i];
        int pass = passes(follow, sizes[i], cpus);
        followed |= pass && sizes[i] >= FOLLOW_MIN_BYTES;
        small += pass && sizes[i] < FOLLOW_MIN_BYTES;
    }
    if (plain >= 0 && !followed) {
        *nsmall = small && !faults_dear(dear) ? small : 0;
        return 1;
    }
    return faults_dear(dear);
}

/* A followed file's first events fed (md_follow_start's on_first, on its
 * follower): the prefault thread stops once every smaller file followed
 * (prefault_pays' nsmall) began its trace cleanly, so its pass goes on
 * beside the read: with the thread beside such a pass, a 6 MB trace took
 * 13 % longer and 2.04x its size (the 16-CPU host, session 46). Where a
 * trace begins with an anomaly (a ring buffer's: the pass stops and walks,
 * as the walk thread would) it keeps running, as for an unfollowed file. */
static void first_fed(void *arg, int stopped)
{
    prefault_watch *w = arg;
    if (stopped)
        atomic_store(&w->ring, 1);
    if (atomic_fetch_sub(&w->left, 1) == 1 && !atomic_load(&w->ring))
        cli_prefault_halt(w->pf);
}

/* Job i of P: its file read, its trace replayed on another thread as it is
 * read where P->follow says (model/follow.c), else walked for a
 * reconstruction where that pays (walk_pays), then its ranks built. */
static void run_job(const pool *P, size_t i)
{
    cli_snap_job *j = &P->jobs[i];
    off_t plain = P->plain ? P->plain[i] : -1, guess = P->guess ? P->guess[i] : -1;
    md_load_opts o = P->opts;
    o.split = P->split;
    o.split_min = SPLIT_MIN_BYTES;
    o.split_where = P->split_where;
    int pass = passes(P->follow, plain, P->job_cpus);
    int walk = !pass && walk_pays(P->walks, P->follow, guess);
    int small = pass && plain < FOLLOW_MIN_BYTES && P->watch;
    md_follow *f = pass || walk ? md_follow_start(walk, small ? first_fed : NULL, P->watch) : NULL;
    if (f)
        o.on_events = md_follow_events, o.events_ctx = f;
    memset(&j->err, 0, sizeof j->err);
    if (md_snapshot_load_with(j->path, &o, &j->snap, &j->err)) {
        md_follow_free(f);
        j->snap = NULL;
        j->failed = 1;
        return;
    }
    md_err_file(&j->err, j->path); /* the file's name in build_ranks' errors */
    j->failed = build_ranks(j, md_follow_finish(f), P->rank_threads, P->job_cpus, P->aside) != 0;
    md_follow_free(f);
}

/* Lowers *failed to i (an atomic minimum). */
static void note_failed(atomic_size_t *failed, size_t i)
{
    size_t cur = atomic_load(failed);
    while (i < cur && !atomic_compare_exchange_weak(failed, &cur, i))
        ;
}

static void *worker(void *arg)
{
    pool *P = arg;
    for (;;) {
        size_t i = atomic_fetch_add(&P->next, 1);
        /* a job after a failed one would not be reported: not started */
        if (i >= P->n || i > atomic_load(&P->failed))
            return NULL;
        run_job(P, i);
        if (P->jobs[i].failed)
            note_failed(&P->failed, i);
    }
}

/* The CPUs to use: the online ones, or MEMDIAG_THREADS (1: one file
 * after another and no reading ahead, for a machine short of memory or
 * CPU: every file being read at once holds its reader's working memory). */
static size_t cpu_count(void)
{
    const char *env = getenv("MEMDIAG_THREADS");
    long cpus = env && atol(env) > 0 ? atol(env) : sysconf(_SC_NPROCESSORS_ONLN);
    return cpus > 0 ? (size_t)cpus : 1;
}

/* The threads a file's read split in two takes (md_load_opts.split): the
 * second reader and the memo's other counters. Off unless asked
 * (MEMDIAG_SPLIT=N: N threads, where the file has SPLIT_CPUS): on a
 * 16-CPU H100 host it made 6-9 MB traces 1-2.5 ms slower (bench/RESULTS.md,
 * session 45: the first reader slowed by the others beside it, the memo's
 * count 3 ms before the second may start, the join 0.6-0.9 ms). */
static int split_threads(size_t job_cpus)
{
    const char *env = getenv("MEMDIAG_SPLIT");
    int n = env && *env ? atoi(env) : 0;
    return n > 0 && job_cpus >= SPLIT_CPUS ? n : 0;
}

/* MEMDIAG_ASIDE: 0 never classifies a rank's stacks on a thread beside its
 * replay, 1 always (where they are worth it: md_stack_cache_dear), unset:
 * where the file has three CPUs a rank being built (build_ranks). */
static int aside_mode(void)
{
    const char *env = getenv("MEMDIAG_ASIDE");
    return env && *env ? strcmp(env, "0") != 0 : -1;
}

/* The plain bytes of these files (plain_size's guesses); SIZE_MAX where
 * one is not a regular file or none are known. */
static size_t input_estimate(const off_t *guess, size_t n)
{
    size_t bytes = 0;
    for (size_t i = 0; i < n; i++)
        if (!guess || guess[i] < 0)
            return SIZE_MAX;
        else
            bytes += (size_t)guess[i];
    return bytes;
}

/* Whether data size or address space is limited (ulimit -d, -v): the
 * huge heap's address space counts against either, all of it, though only
 * what malloc writes is resident, and left too little for a 1.3 MB
 * snapshot under 10 MB that 8 MB (no huge heap) had been enough for; so
 * do the reader's arrays' mappings (md_load_opts.heap_first). */
static int memory_limited(void)
{
    struct rlimit d, as;
    return (!getrlimit(RLIMIT_DATA, &d) && d.rlim_cur != RLIM_INFINITY) ||
           (!getrlimit(RLIMIT_AS, &as) && as.rlim_cur != RLIM_INFINITY);
}

/* How much of malloc's heap goes on huge pages (prefault.c), 0: none;
 * where faults are dear and the input is 8 MB or more (HUGE_HEAP_INPUT_MIN;
 * MEMDIAG_HUGEHEAP=0/1 to say otherwise), where a page costs 10-12 us and
 * 2 MB 0.1 ms. An input under 4 MB (*small), when asked: 8 MB
 * (only what malloc writes is resident), with the events and frame ids in
 * it (md_load_opts.heap_first) and no prefault thread: a 1.3 MB snapshot
 * 8.7 -> 4.3 ms, 3 MB more resident (the prefault thread: 9.4; both: 7.0);
 * synthetic-10000 10.4 -> 5.2 ms (4 MB of huge pages: 6.1, its events'
 * doublings outgrew them). A larger one: its first 2 MB, the thread taking
 * the rest: 6-67 MB snapshots 6-17 % faster, up to 1.8 MB more resident
 * (4 MB made a 6 MB snapshot 2.05x its size). Where faults are cheap
 * (1.4 us) it gained nothing and cost 3 MB. */
static size_t huge_heap_bytes(size_t input, int limited, int *dear, int *small)
{
    const char *env = getenv("MEMDIAG_HUGEHEAP");
    if (env && *env ? !strcmp(env, "0")
                    : input < HUGE_HEAP_INPUT_MIN || limited || !faults_dear(dear))
        return 0;
    *small = input < HELPERS_INPUT_MIN;
    return *small ? HUGE_HEAP_SMALL : HUGE_HEAP_LARGE;
}

void *cli_load_snapshots(cli_snap_job *jobs, size_t n)
{
    size_t cpus = cpu_count(), nw = cpus < n ? cpus : n;
    if (nw > MAX_WORKERS)
        nw = MAX_WORKERS;
    /* each file's read-ahead thread needs a CPU of its own to gain: with
     * every CPU reading a file it only adds a copy (two 56 MB files on two
     * CPUs: 88 -> 96 ms) */
    /* and so does the replay that follows each file's read (of plain files
     * of 16 MB and more, worth_following; MEMDIAG_FOLLOW=1: any file, 0:
     * none, every replay after its read on the reading thread), and a third
     * CPU the walk of a smaller one (walk_pays; MEMDIAG_FOLLOW=walk: of
     * every file not followed, whatever the CPUs) */
    const char *fo_env = getenv("MEMDIAG_FOLLOW");
    int follow = !fo_env || !*fo_env     ? FOLLOW_BY_SIZE
                 : !strcmp(fo_env, "0")    ? 0
                 : !strcmp(fo_env, "walk") ? FOLLOW_WALK
                                           : FOLLOW_ALL;
    /* each file's size if plain, and its plain bytes guessed, looked at
     * once (following, prefaulting, the huge heap) */
    off_t *plain = malloc((n ? 2 * n : 1) * sizeof *plain), *guess = plain ? plain + n : NULL;
    for (size_t i = 0; plain && i < n; i++)
        plain[i] = plain_size(jobs[i].path, &guess[i]);
    int spare = 2 * nw <= cpus;
    pool P = {jobs, n, 0, n, {.read_ahead = spare}, spare ? follow : 0,
              follow == FOLLOW_WALK || (follow && 3 * nw <= cpus), spare ? 2 : 1,
              nw ? cpus / nw : cpus, aside_mode(), 0, 0, plain, guess, NULL};
    P.split = split_threads(P.job_cpus);
    const char *at_env = getenv("MEMDIAG_SPLIT_AT"); /* a fraction of the file, for benchmarks */
    P.split_where = at_env && *at_env ? atof(at_env) : 0;
    pthread_t tid[MAX_WORKERS];
    size_t started = 0;
    /* where page faults are dear, the heap goes on huge pages, a small
     * input's all of it (huge_heap_bytes); the block malloc keeps below them
     * is the caller's */
    int dear = -1, small = 0;
    size_t input = input_estimate(guess, n);
    int limited = memory_limited();
    size_t huge = huge_heap_bytes(input, limited, &dear, &small);
    void *below = huge ? cli_heap_on_huge_pages(huge) : NULL;
    /* and the arrays start in the heap too under a limit that counts
     * every mapping whole (a 2 MB one each, which the 1.3 MB snapshot
     * under ulimit -d 8000 cannot afford) */
    P.opts.heap_first = (below && small) || limited;
    /* and, with a CPU to spare, the rest of a larger one's faults are taken
     * there where that pays (prefault.c, prefault_pays); MEMDIAG_PREFAULT=0
     * leaves them where they fall (a benchmark's baseline), =1 takes them
     * there whenever it can */
    cli_prefault pf = {.running = 0};
    const char *pf_env = getenv("MEMDIAG_PREFAULT");
    int nsmall = 0;
    if (nw < cpus && (pf_env && *pf_env ? strcmp(pf_env, "0") != 0
                                        : !P.opts.heap_first &&
                                              prefault_pays(plain, n, input, P.follow,
                                                            P.job_cpus, &dear, &nsmall)))
        cli_prefault_start(&pf, PREFAULT_LEAD);
    prefault_watch watch = {.pf = &pf};
    atomic_init(&watch.left, nsmall);
    atomic_init(&watch.ring, 0);
    P.watch = pf.running && nsmall ? &watch : NULL;
    /* the calling thread is a worker too; without threads it does it all */
    while (started + 1 < nw && !md_thread_start(&tid[started], worker, &P, MD_STACK_WORK))
        started++;
    worker(&P);
    for (size_t k = 0; k < started; k++)
        pthread_join(tid[k], NULL);
    cli_prefault_stop(&pf); /* after the followers that could halt it */
    free(plain);
    return below;
}

void cli_snap_job_free(cli_snap_job *j)
{
    for (size_t i = 0; i < j->nranks; i++)
        md_rank_free(&j->ranks[i]);
    free(j->ranks);
    md_snapshot_free(j->snap);
    memset(j, 0, sizeof *j);
}

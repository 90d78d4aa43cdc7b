/* follow.c - the replay's first pass, made on a thread of its own while the
 * trace is still being read: md_snapshot_read_with tells of the events read
 * so far (md_load_opts.on_events, md_follow_events here) and this thread
 * applies them (md_pass_feed), a few thousand behind the reader. Where a
 * CPU is free the pass then costs no time after the read (a sixth to a
 * fifth of a summary's work on traces that need no reconstruction). Where
 * the pass stops at an anomaly (a ring buffer's trace), or where only
 * that is asked for (a smaller file: md_follow_start(1, ...)), it makes the
 * walk through the trace that the reconstruction needs instead.
 *
 * The reader publishes a count with release order after writing the
 * events below it; this thread reads only below the count it acquired.
 * Before the array moves the reader says MD_EVENTS_PAUSE and waits for
 * this thread to acknowledge that pause (by its number: an old
 * acknowledgement does not answer a new pause); before it is freed,
 * MD_EVENTS_GONE, which joins this thread. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>
#include "../util/thread.h"
#include "model.h"

#define FEED_MAX 4096 /* events fed at once: how long a GONE may wait */
#define SPINS 64      /* polls before sleeping, when caught up */

struct md_follow {
    pthread_t thread;
    int running;                      /* started and not yet joined */
    _Atomic(const md_event *) events; /* the array told of */
    atomic_size_t n, expect;          /* events complete; the count expected */
    atomic_int state;                 /* MD_EVENTS_*: the last told */
    atomic_uint pauses, acked;        /* pauses asked for; the last acknowledged */
    atomic_int exited;                /* the thread has returned */
    md_pass *pass;                    /* the thread's until joined */
    int usable;                       /* the pass saw every event, or stopped */
    void (*on_first)(void *, int);    /* told after the first feed, on this thread; then NULL */
    void *first_ctx;
};

static void idle_wait(unsigned *idle)
{
    if (++*idle < SPINS) {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
        return;
    }
    struct timespec ts = {0, 20000}; /* the reader hands over a batch every 100-200 us */
    nanosleep(&ts, NULL);
}

static void *follow_loop(md_follow *f)
{
    size_t done = 0;
    unsigned idle = 0;
    for (;;) {
        int state = atomic_load_explicit(&f->state, memory_order_acquire);
        if (state == MD_EVENTS_GONE)
            return NULL;
        if (state == MD_EVENTS_PAUSE) { /* not reading: say so, and wait */
            unsigned k = atomic_load_explicit(&f->pauses, memory_order_acquire);
            atomic_store_explicit(&f->acked, k, memory_order_release);
            idle_wait(&idle);
            continue;
        }
        size_t n = atomic_load_explicit(&f->n, memory_order_acquire);
        if (done < n) {
            size_t to = n - done > FEED_MAX ? done + FEED_MAX : n;
            const md_event *ev = atomic_load_explicit(&f->events, memory_order_relaxed);
            size_t expect = atomic_load_explicit(&f->expect, memory_order_relaxed);
            /* stopped at an anomaly (1), it is still the first pass, and
             * goes on with reconstruct's walk */
            int fed = md_pass_feed(f->pass, ev, done, to, expect);
            if (fed < 0)
                return NULL;
            if (f->on_first)
                f->on_first(f->first_ctx, fed > 0);
            f->on_first = NULL; /* once */
            done = to;
            idle = 0;
        } else if (state == MD_EVENTS_END) {
            f->usable = 1;
            return NULL;
        } else {
            idle_wait(&idle);
        }
    }
}

static void *follow_main(void *arg)
{
    md_follow *f = arg;
    follow_loop(f);
    atomic_store_explicit(&f->exited, 1, memory_order_release);
    return NULL;
}

md_follow *md_follow_start(int walk_only, void (*on_first)(void *, int), void *ctx)
{
    md_follow *f = calloc(1, sizeof *f);
    if (!f || !(f->pass = walk_only ? md_pass_new_scan() : md_pass_new())) {
        free(f);
        return NULL;
    }
    f->on_first = on_first, f->first_ctx = ctx;
    atomic_init(&f->events, NULL);
    atomic_init(&f->n, 0);
    atomic_init(&f->expect, 0);
    atomic_init(&f->state, MD_EVENTS_MORE);
    atomic_init(&f->pauses, 0);
    atomic_init(&f->acked, 0);
    atomic_init(&f->exited, 0);
    if (md_thread_start(&f->thread, follow_main, f, MD_STACK_WORK)) {
        md_pass_free(f->pass);
        free(f);
        return NULL;
    }
    f->running = 1;
    return f;
}

/* Tells the thread to stop and waits for it. */
static void stop(md_follow *f)
{
    atomic_store_explicit(&f->state, MD_EVENTS_GONE, memory_order_release);
    if (f->running)
        pthread_join(f->thread, NULL);
    f->running = 0;
}

/* Returns once the thread reads no events until told more (or has
 * returned). */
static void pause_reading(md_follow *f)
{
    unsigned k = atomic_load_explicit(&f->pauses, memory_order_relaxed) + 1, idle = 0;
    atomic_store_explicit(&f->pauses, k, memory_order_relaxed);
    atomic_store_explicit(&f->state, MD_EVENTS_PAUSE, memory_order_release);
    while (atomic_load_explicit(&f->acked, memory_order_acquire) != k &&
           !atomic_load_explicit(&f->exited, memory_order_acquire))
        idle_wait(&idle);
}

void md_follow_events(void *ctx, const md_event *events, size_t n, size_t expect, int state)
{
    md_follow *f = ctx;
    int was = atomic_load_explicit(&f->state, memory_order_relaxed);
    if (state == MD_EVENTS_GONE || (state == MD_EVENTS_PAUSE && was == MD_EVENTS_END)) {
        stop(f); /* freed, or moved after the read: the pass is of no use */
        f->usable = 0;
        return;
    }
    if (state == MD_EVENTS_PAUSE) {
        pause_reading(f);
        return;
    }
    atomic_store_explicit(&f->events, events, memory_order_relaxed);
    atomic_store_explicit(&f->expect, expect, memory_order_relaxed);
    atomic_store_explicit(&f->n, n, memory_order_release);
    if (state == MD_EVENTS_END || was == MD_EVENTS_PAUSE)
        atomic_store_explicit(&f->state, state, memory_order_release);
}

md_pass *md_follow_finish(md_follow *f)
{
    if (!f)
        return NULL;
    if (f->running) {
        /* the read is over: without an END nothing more will come */
        if (atomic_load_explicit(&f->state, memory_order_acquire) != MD_EVENTS_END)
            atomic_store_explicit(&f->state, MD_EVENTS_GONE, memory_order_release);
        pthread_join(f->thread, NULL);
        f->running = 0;
    }
    md_pass *p = f->usable ? f->pass : NULL;
    if (p)
        f->pass = NULL;
    return p;
}

void md_follow_free(md_follow *f)
{
    if (!f)
        return;
    stop(f);
    md_pass_free(f->pass);
    free(f);
}

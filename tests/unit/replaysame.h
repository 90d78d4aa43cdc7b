/* replaysame.h - whether the replay's first pass made while a snapshot is
 * read (md_load_opts.on_events feeding an md_pass) gives the replay made
 * after it. Used by test_follow.c and by the fuzzer, so it returns where
 * they differ instead of asserting. */
#ifndef MD_REPLAYSAME_H
#define MD_REPLAYSAME_H

#include <stdlib.h>
#include <string.h>
#include "memdiag.h"
#include "model/model.h"

/* A feeder on the reading thread: the events told of, fed in batches of
 * uneven length (an LCG), as a thread that lags would feed them. bad: it
 * was told something out of order (events moved without a PAUSE first,
 * anything after GONE). */
typedef struct feeder {
    md_pass *pass;
    size_t done;
    uint32_t seed;
    int gone, paused, bad;
    const md_event *events;
    size_t pauses; /* times told the events would move */
} feeder;

static inline void feed_events(void *ctx, const md_event *events, size_t n, size_t expect,
                               int state)
{
    feeder *f = ctx;
    int stop = state == MD_EVENTS_PAUSE || state == MD_EVENTS_GONE;
    if (f->gone || (stop && events) || (!stop && n && !events)) {
        f->bad = 1;
        return;
    }
    if (stop) {
        f->gone = state == MD_EVENTS_GONE;
        f->paused = 1;
        f->pauses += state == MD_EVENTS_PAUSE;
        return;
    }
    if (f->events && events != f->events && !f->paused)
        f->bad = 1;
    f->paused = 0;
    f->events = events;
    while (f->done < n) {
        f->seed = f->seed * 1103515245u + 12345u;
        size_t k = 1 + (f->seed >> 16) % 3000, to = f->done + k < n ? f->done + k : n;
        if (md_pass_feed(f->pass, events, f->done, to, expect) < 0)
            break; /* stopped at an anomaly (1), it goes on with its walk */
        f->done = to;
    }
}

/* NULL if the two replays agree, else where they first differ. */
static inline const char *replay_difference(const md_replay *a, const md_replay *b)
{
    size_t n = md_replay_nevents(a);
    if (n != md_replay_nevents(b))
        return "event count";
    md_point pa = md_replay_initial(a), pb = md_replay_initial(b);
    if (memcmp(&pa, &pb, sizeof pa))
        return "initial point";
    if (md_replay_peak_index(a) != md_replay_peak_index(b) ||
        md_replay_peak_allocated(a) != md_replay_peak_allocated(b) ||
        md_replay_peak_reserved(a) != md_replay_peak_reserved(b))
        return "peak";
    if (md_replay_anomalies(a) != md_replay_anomalies(b))
        return "anomalies";
    for (size_t i = 0; i < n; i++) {
        pa = md_replay_at(a, (long)i), pb = md_replay_at(b, (long)i);
        if (memcmp(&pa, &pb, sizeof pa))
            return "timeline";
        if (md_replay_free_index(a, (long)i) != md_replay_free_index(b, (long)i))
            return "free index";
    }
    long at[4] = {-1, (long)n / 3, md_replay_peak_index(a), (long)n - 1};
    for (int k = 0; k < 4; k++) {
        md_live *la = NULL, *lb = NULL;
        size_t na = 0, nb = 0;
        md_cache_state ca, cb;
        md_err e;
        memset(&e, 0, sizeof e);
        int ra = md_replay_live(a, at[k], &la, &na, &e) || md_replay_cache_at(a, at[k], &ca, &e);
        int rb = md_replay_live(b, at[k], &lb, &nb, &e) || md_replay_cache_at(b, at[k], &cb, &e);
        int same = ra == rb && (ra || (na == nb && !memcmp(&ca, &cb, sizeof ca)));
        for (size_t i = 0; same && !ra && i < na; i++)
            same = la[i].addr == lb[i].addr && la[i].block_size == lb[i].block_size &&
                   la[i].requested == lb[i].requested && la[i].alloc_index == lb[i].alloc_index &&
                   la[i].stack == lb[i].stack && la[i].category == lb[i].category;
        free(la);
        free(lb);
        if (!same)
            return "live set or cache state";
    }
    return NULL;
}

/* The first device with events: where a pass made while reading is given
 * (as the CLI gives it); -1 if none. */
static inline int first_device(const md_snapshot *s)
{
    for (int d = 0; d < md_snapshot_ndevices(s); d++) {
        size_t n;
        md_snapshot_events(s, d, &n);
        if (n)
            return d;
    }
    return -1;
}

/* Replays device d of s with pass (freed) and without: NULL if they
 * agree (or both fail alike), else where they differ. */
static inline const char *pass_difference(const md_snapshot *s, int d, md_pass *pass)
{
    md_replay *with = NULL, *without = NULL;
    md_err e;
    memset(&e, 0, sizeof e);
    int rc = md_replay_run_with(s, d, pass, &with, &e);
    int rc2 = md_replay_run(s, d, &without, &e);
    const char *why = rc != rc2 ? "one replay failed" : NULL;
    if (!rc && !rc2)
        why = replay_difference(with, without);
    md_replay_free(with);
    md_replay_free(without);
    return why;
}

#endif

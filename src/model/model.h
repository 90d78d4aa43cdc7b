/* model.h - internal interface of the replay model. */
#ifndef MD_MODEL_H
#define MD_MODEL_H

#include "memdiag.h"

/* torch's round_size(): the block size a request of `size` bytes gets. */
uint64_t md_round_size(const md_settings *cfg, uint64_t size);
const md_event *md_replay_events(const md_replay *r);
int md_replay_device(const md_replay *r);
/* The timeline: allocated and requested after each of md_replay_nevents
 * events (md_replay_at adds reserved, one call at a time), for loops over
 * whole stretches. */
typedef struct md_tpoint {
    uint64_t allocated, requested;
} md_tpoint;
const md_tpoint *md_replay_points(const md_replay *r);
/* The first event after which reserved stands at its peak, -1 if none
 * (the peak is the initial state's, never met again after an event). */
long md_replay_peak_reserved_index(const md_replay *r);
/* 1 where the trace did not explain the final state from an empty start,
 * so the state before its first event was reconstructed (and replayed). */
int md_replay_reconstructed(const md_replay *r);
/* What md_replay_probe of idx[0..k) (ascending) replays: the events it
 * applies from the kept states it starts from, and the blocks it lays where
 * it starts from the state before the trace. */
size_t md_replay_probe_work(const md_replay *r, const long *idx, size_t k);

/* A first pass over a trace made while the trace is read (model/follow.c
 * feeds it on a thread of its own): events[from, to) applied in order, the
 * rules torch's defaults (a snapshot's settings come after its trace).
 * It stops at the first anomaly, as md_replay_run's first pass does.
 * md_pass_feed: 0 fed, 1 stopped at an anomaly in this feed (further
 * feeds go on with the walk only), -1 refused (out of memory, not the
 * next events). events may
 * have moved since the last feed (the same ones, elsewhere). expect: the
 * trace's expected length, for spacing the kept states (0: unknown). */
typedef struct md_pass md_pass;
md_pass *md_pass_new(void);
/* A pass that makes only the walk through the trace a reconstruction of
 * the state before it needs (which every pass makes once it stops at an
 * anomaly: a ring buffer's trace), for md_replay_run_with to take where
 * it must reconstruct; never taken as a first pass (md_pass_fits). */
md_pass *md_pass_new_scan(void);
int md_pass_feed(md_pass *p, const md_event *events, size_t from, size_t to, size_t expect);
void md_pass_free(md_pass *p);
/* Whether p stands for the first pass over the device's events of s: the
 * device's are the first of the array (p was fed from its start, moved or
 * not), p saw all of them (or stopped within them), and s's settings give
 * the rules p assumed; whether it stopped at an anomaly. */
int md_pass_fits(const md_pass *p, const md_snapshot *s, int device);
int md_pass_stopped(const md_pass *p);
/* Whether p is making that walk (so far without running out of memory). */
int md_pass_walked(const md_pass *p);
/* md_replay_run, taking over `first` (NULL: none; freed either way) where
 * it covers the device's events under the snapshot's settings, else
 * making its own first pass: the same replay either way. */
int md_replay_run_with(const md_snapshot *s, int device, md_pass *first, md_replay **out,
                       md_err *err);

/* A thread making that first pass while a snapshot is read (follow.c):
 * md_follow_events is the md_load_opts.on_events to read with (ctx: the
 * follow). After the read, md_follow_finish waits for the pass and gives
 * it (NULL: none to give: the read failed, was never told of, or moved
 * its events after its end); md_follow_free stops the thread and frees
 * what is left, before the snapshot read is freed. md_follow_start: NULL
 * on failure; walk_only: the thread makes only reconstruct's walk
 * (md_pass_new_scan), for a file whose pass would cost too much memory
 * beside its read; on_first (NULL: none): called once, on the thread,
 * after the first events fed, with ctx and whether the pass stopped in
 * them (a trace that begins with an anomaly: a ring buffer's). */
typedef struct md_follow md_follow;
md_follow *md_follow_start(int walk_only, void (*on_first)(void *, int), void *ctx);
void md_follow_events(void *ctx, const md_event *events, size_t n, size_t expect, int state);
md_pass *md_follow_finish(md_follow *f);
void md_follow_free(md_follow *f);

#endif

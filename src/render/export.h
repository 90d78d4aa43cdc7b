/* export.h - a snapshot's replayed history for other tools (export.c). */
#ifndef MD_EXPORT_H
#define MD_EXPORT_H

#include "report.h"

/* One row per trace entry of rk's device: what happened, and allocated,
 * reserved and requested bytes after it, its step and phase, and the
 * first user frame of its stack. -1 when writing failed. */
int md_render_csv(FILE *o, const md_rank *rk);
/* The Chrome/Perfetto trace-event JSON of these devices of one process:
 * a memory counter track each (at most max_points points: beyond, per
 * time bucket its lowest and highest), steps and phases as slices. The
 * traces must have times. -1 when writing failed. */
int md_render_trace_json(FILE *o, const md_rank *ranks, size_t nranks, size_t max_points);

/* Devices of one snapshot as a torch allocator snapshot (pickle, protocol
 * 2): for each, its trace entries (lo[i], hi[i]] and its segments and
 * blocks as the replay has them after event hi[i]; the allocator settings;
 * the annotations in the windows' time span. -1 after filling err. */
int md_render_torch_snapshot(FILE *o, const md_rank *ranks, size_t n, const long *lo,
                             const long *hi, md_err *err);

#endif

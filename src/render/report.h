/* report.h - the facts memdiag reports about one rank, computed once and
 * rendered as text (text.c) or JSON (json.c). A rank is one device trace of
 * one snapshot file. */
#ifndef MD_REPORT_H
#define MD_REPORT_H

#include <stdio.h>
#include "memdiag.h"
#include "../util/util.h"

typedef struct md_rank {
    const char *path;
    int rank;               /* from RANK in the file name, else the device */
    int device;
    int further;            /* a device of its file other than the process's own
                               (the one with the most events) */
    int helper_of;          /* the snapshot of a helper process (a DataLoader worker:
                               its capture's parent is another input's): the parent's
                               pid; not a rank. 0 otherwise */
    char role[32];          /* a helper's: "DataLoader worker 0", "child process" */
    int history;            /* the device's trace records allocations (else only what
                               was live when the snapshot was taken) */
    const md_snapshot *s;   /* borrowed */
    md_replay *r;
    md_analysis *a;
    md_site *sites;         /* live at peak, largest first */
    size_t nsites;
    uint64_t by_cat[MD_CAT_COUNT];
    md_finding *findings;
    size_t nfindings;
    long peak_step;         /* -1 = outside any step */
    int peak_phase;         /* md_phase, -1 = between phases */
    int peak_failed;        /* the peak came before peak_step's forward, in an
                               attempt an out-of-memory error ended */
    uint64_t setup_peak_over; /* the peak came before the first step's forward (set-up:
                                 a buffer made and freed before training): the
                                 training's own peak, which it rises above; 0 else */
    int peak_unused;        /* in the forward phase, in a pass all freed before
                               the backward (an evaluation, a no_grad forward) */
    int peak_before_history; /* before the first step's forward, where steps ran
                                before the recorded history began (a ring buffer's
                                window): the end of work begun before it, not set-up */
    size_t nevents;
} md_rank;

/* Builds the facts for one device of a snapshot. */
int md_rank_build(md_rank *rk, const md_snapshot *s, int device, int rank, md_err *err);
/* Same, taking over a replay pass made while the snapshot was read (NULL:
 * none; see md_replay_run_with); classify_aside: the stacks are classified
 * on a thread of its own while the trace is replayed (a CPU is free). */
typedef struct md_pass md_pass;
int md_rank_build_with(md_rank *rk, const md_snapshot *s, int device, int rank, md_pass *first,
                       int classify_aside, md_err *err);
void md_rank_free(md_rank *rk);
/* A rank of the job: its process's own device, not a helper's. */
int md_rank_is_rank(const md_rank *rk);
/* Whether these are several devices of one snapshot (one process), not
 * the ranks of a job. */
int md_ranks_one_process(const md_rank *ranks, size_t n);
/* Rank number from a file name ("...rank3..." -> 3), or -1. */
int md_rank_from_name(const char *path);

/* Phase containing event index i within step k's boundaries, or -1. */
int md_rank_phase_of(const md_step *st, long i);
/* Where the peak came, as " (step 3, backward)" (plain text, no markup;
 * "" outside any step), into dst. */
const char *md_rank_peak_where(const md_rank *rk, char *dst, size_t n);

typedef struct md_out_opts {
    int top;      /* sites to list */
    int detail;   /* findings in full (diagnose) or one line each (summary) */
    int brief;    /* a few lines per rank: what memdiag run prints at the end */
} md_out_opts;

/* Cross-rank findings of ranks that belong to one job (distinct rank
 * numbers); none otherwise. The array is malloc'd. */
int md_ranks_cross(const md_rank *ranks, size_t n, md_finding **out, size_t *nout, md_err *err);

/* Everything one command reports: snapshot ranks, sample-only ranks (seed
 * JSON reports) with their findings, and cross-rank findings. */
typedef struct md_report {
    md_rank *ranks;
    size_t n;
    md_sample_rank *sranks;
    size_t nsranks;
    md_finding **sfindings;   /* per sample rank */
    size_t *nsfindings;
    md_finding *cross;
    size_t ncross;
} md_report;

void md_render_text(FILE *out, const md_report *rep, const md_out_opts *o);
/* A process's driver-level allocations by library (nothing without a
 * driver trace); brief: one line. */
void md_render_driver(FILE *out, const md_sample_rank *r, int brief);
void md_render_json(FILE *out, const md_report *rep, const md_out_opts *o);
/* One self-contained HTML page (report_html.c); -1 when writing failed or
 * memory ran out. */
int md_render_report_html(FILE *out, const md_report *rep, const md_out_opts *o,
                          const char *title);

/* Formatting helpers shared by the renderers. */
const char *md_site_label(const md_snapshot *s, const md_site *site, char *buf, size_t n);

#endif

/* diff.h - two reports of one job, before and after a change (diff.c),
 * and their rendering as text or JSON (diffout.c). */
#ifndef MD_DIFF_H
#define MD_DIFF_H

#include "report.h"

/* One rank on one side: a snapshot's device, or phase samples (a capture
 * file or a seed-script report); neither when the other side has it alone. */
typedef struct md_side {
    const md_rank *rk;
    const md_sample_rank *sr;
    const md_finding *f;
    size_t nf;
} md_side;

typedef struct md_diff_pair {
    md_side before, after;
} md_diff_pair;

/* The figures both kinds of source give, in MiB; NAN where unknown. */
typedef struct md_figs {
    double peak, peak_reserved, end_allocated;
    double process_used_peak; /* NVML: the process's use of its GPU */
    double driver_peak;       /* the driver-level trace: all libraries */
    double driver_outside;    /* its most outside PyTorch's caching allocator */
    md_indicators ind;
    long steps;               /* -1 unknown */
} md_figs;

/* A site at the peak (snapshots), in bytes on each side. */
typedef struct md_site_diff {
    char site[320];
    uint64_t before, after;
} md_site_diff;

enum { MD_DIFF_GONE, MD_DIFF_NEW, MD_DIFF_KEPT };

/* A finding kind on one GPU, gone, new or on both sides. */
typedef struct md_finding_diff {
    int status;                      /* MD_DIFF_* */
    const md_finding *before, *after; /* NULL on the side without it */
} md_finding_diff;

/* Pairs the ranks of two reports: same source kind, rank and device first,
 * then what is left by rank and device alone; the rest is unpaired (one
 * side empty). The array is malloc'd; -1 when out of memory. */
int md_diff_pairs(const md_report *before, const md_report *after, md_diff_pair **out,
                  size_t *n);

int md_side_present(const md_side *s);
const char *md_side_kind(const md_side *s); /* snapshot, capture or samples */
const char *md_side_source(const md_side *s);
int md_side_rank(const md_side *s);
int md_side_device(const md_side *s);
int md_side_further(const md_side *s);
void md_side_figs(const md_side *s, md_figs *out);

/* Every site live at either peak, the largest change first; -1 when out
 * of memory. */
int md_diff_sites(const md_rank *before, const md_rank *after, md_site_diff **out, size_t *n);
/* Every library of either driver-level trace, its largest on each side in
 * site form, the largest change first; -1 when out of memory. */
int md_diff_driver(const md_sample_rank *before, const md_sample_rank *after, md_site_diff **out,
                   size_t *n);
/* Findings matched by kind and GPU (and rank, for a job's findings): gone,
 * then new, then kept; -1 when out of memory. */
int md_diff_findings(const md_finding *b, size_t nb, const md_finding *a, size_t na,
                     md_finding_diff **out, size_t *n);

/* -1 when memory ran out (the output then stops where it failed). */
int md_render_diff_text(FILE *o, const md_diff_pair *p, size_t n, const md_report *before,
                        const md_report *after, const md_out_opts *opt);
int md_render_diff_json(FILE *o, const md_diff_pair *p, size_t n, const md_report *before,
                        const md_report *after, const md_out_opts *opt);

#endif

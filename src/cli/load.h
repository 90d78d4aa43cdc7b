/* load.h - reading several snapshot files at once (load.c). */
#ifndef MD_CLI_LOAD_H
#define MD_CLI_LOAD_H

#include "../render/report.h"
#include "cli.h"

/* One snapshot file: read, and a rank built for each device with data. */
typedef struct cli_snap_job {
    const char *path;  /* in: the file */
    md_snapshot *snap; /* out: owned by the job until moved */
    md_rank *ranks;
    size_t nranks;
    int failed;        /* err says why */
    md_err err;
} cli_snap_job;

/* Runs the jobs on up to one thread per CPU. Once a job fails, later jobs
 * are not started (their results would not be reported): take the results
 * in order and stop at the first failed one. Returns a block of malloc's
 * to free with the snapshots (the heap below the huge pages their reading
 * took, prefault.c), or NULL. */
void *cli_load_snapshots(cli_snap_job *jobs, size_t n);
/* Frees what a job holds that was not moved out. */
void cli_snap_job_free(cli_snap_job *j);

/* Everything the inputs of summary, diagnose or diff hold (inputs.c). */
typedef struct cli_inputs {
    char **paths;             /* the expanded input files */
    size_t npaths;
    md_snapshot **snaps;
    size_t nsnaps;
    md_rank *ranks;
    size_t nranks, cap;
    md_sample_rank *sranks;   /* from capture files and seed JSON reports */
    size_t nsranks;
    md_finding **sfind;       /* per sample rank */
    size_t *nsfind;
    md_finding *cross;        /* the job's cross-rank findings */
    size_t ncross;
    void *heap_below;         /* malloc's block below the huge pages (load.c) */
} cli_inputs;

/* Expands and reads args (files, directories), builds every rank and the
 * findings. Returns 0, or EXIT_USAGE after one error line. */
int cli_inputs_load(char **args, int nargs, cli_inputs *in);
md_report cli_inputs_report(const cli_inputs *in);
void cli_inputs_free(cli_inputs *in);
/* The one snapshot flamegraph and export read, and its device's rank:
 * device's (-1: the process's own, the most events); NULL after one error
 * line (no snapshot: captures and reports have no `lacks`; several). */
const md_rank *cli_one_snapshot_rank(const cli_inputs *in, const char *path, long device,
                                     const char *cmd, const char *lacks);

#endif

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
 * in order and stop at the first failed one. */
void cli_load_snapshots(cli_snap_job *jobs, size_t n);
/* Frees what a job holds that was not moved out. */
void cli_snap_job_free(cli_snap_job *j);

#endif

/* inputs.c - what summary, diagnose and diff read: snapshots (in parallel,
 * load.c), capture files and seed-script reports, in the order given, with
 * each rank's findings and the job's cross-rank findings. Any unreadable
 * input stops the command with one error line: a report silently missing
 * a rank would look complete and mislead. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "load.h"

static void unload(cli_inputs *L)
{
    for (size_t i = 0; i < L->nsranks; i++)
        free(L->sfind ? L->sfind[i] : NULL);
    free(L->sfind);
    free(L->nsfind);
    md_sample_ranks_free(L->sranks, L->nsranks);
    for (size_t i = 0; i < L->nranks; i++)
        md_rank_free(&L->ranks[i]);
    for (size_t i = 0; i < L->nsnaps; i++)
        md_snapshot_free(L->snaps[i]);
    free(L->ranks);
    free(L->snaps);
}

static int push_sample_rank(cli_inputs *L, const md_sample_rank *r)
{
    md_sample_rank *all = realloc(L->sranks, (L->nsranks + 1) * sizeof *all);
    if (all)
        L->sranks = all;
    md_finding **f = realloc(L->sfind, (L->nsranks + 1) * sizeof *f);
    if (f)
        L->sfind = f;
    size_t *nf = realloc(L->nsfind, (L->nsranks + 1) * sizeof *nf);
    if (nf)
        L->nsfind = nf;
    if (!all || !f || !nf)
        return -1;
    md_sample_rank *x = &L->sranks[L->nsranks];
    *x = *r;
    md_samples_indicators(x);
    L->sfind[L->nsranks] = NULL;
    L->nsfind[L->nsranks] = 0;
    L->nsranks++;
    return 0;
}

/* A driver file (driver-*.mdcap) joins the capture of the same process;
 * a process with none (a CUDA program without torch) stands as its own
 * rank, unless it allocated nothing (a helper that only initialised CUDA). */
static void attach_drivers(cli_inputs *L)
{
    size_t k = 0;
    for (size_t i = 0; i < L->nsranks; i++) {
        md_sample_rank *d = &L->sranks[i];
        md_sample_rank *to = NULL;
        for (size_t j = 0; d->driver_file && d->pid && j < L->nsranks && !to; j++) {
            md_sample_rank *x = &L->sranks[j];
            if (j != i && x->has_capture && !x->driver_file && !x->further_device && x->pid == d->pid)
                to = x;
        }
        if (to) { /* the log moves: d is left an empty driver file */
            md_driver_log_free(&to->driver);
            to->driver = d->driver;
            memset(&d->driver, 0, sizeof d->driver);
        }
        if (d->driver_file && !d->driver.n) {
            md_sample_rank_clear(d);
            continue;
        }
        L->sranks[k++] = *d;
    }
    L->nsranks = k;
}

/* Whether a snapshot file is the one a capture names (it may since have
 * been compressed: rank0.pickle.xz for rank0.pickle). */
static int names_snapshot(const char *recorded, const char *path)
{
    const char *a = strrchr(recorded, '/'), *b = strrchr(path, '/');
    a = a ? a + 1 : recorded;
    b = b ? b + 1 : path;
    size_t la = strlen(a);
    return !strncmp(a, b, la) && (!b[la] || !strcmp(b + la, ".xz") || !strcmp(b + la, ".gz") ||
                                  !strcmp(b + la, ".zst"));
}

/* A helper process's snapshot (its capture's parent is another input's:
 * md_sample_ranks_relate) is no rank of the job either. */
static void mark_helper_snapshots(cli_inputs *L)
{
    for (size_t i = 0; i < L->nsranks; i++) {
        const md_sample_rank *h = &L->sranks[i];
        if (!h->helper || !h->has_capture || !h->capture.snapshot[0])
            continue;
        for (size_t k = 0; k < L->nranks; k++)
            if (names_snapshot(h->capture.snapshot, L->ranks[k].path)) {
                L->ranks[k].helper_of = h->ppid;
                snprintf(L->ranks[k].role, sizeof L->ranks[k].role, "%s", md_helper_role(h));
            }
    }
}

static void diagnose_sample_ranks(cli_inputs *L)
{
    for (size_t i = 0; i < L->nsranks; i++) {
        md_err err = {0};
        md_diagnose_samples(&L->sranks[i], &L->sfind[i], &L->nsfind[i], &err);
    }
}

/* Moves the ranks' samples into L and frees the array. */
static int push_sample_ranks(cli_inputs *L, md_sample_rank *r, size_t n)
{
    size_t i = 0;
    for (; i < n; i++)
        if (push_sample_rank(L, &r[i]))
            break;
    for (size_t k = i; k < n; k++) /* out of memory: free what was not moved */
        md_sample_rank_clear(&r[k]);
    free(r);
    return i < n ? -1 : 0;
}

/* The process's own device, then each further device it used. */
static int add_capture(cli_inputs *L, const char *path)
{
    md_err err = {0};
    md_sample_rank *r;
    size_t n;
    md_capture_info info;
    if (md_capture_load_devices(path, &r, &n, &info, &err)) {
        cli_fail_err(&err);
        return -1;
    }
    return push_sample_ranks(L, r, n);
}

static int add_json(cli_inputs *L, const char *path)
{
    md_err err = {0};
    md_sample_rank *r;
    size_t n;
    if (md_seedjson_load(path, &r, &n, &err)) {
        cli_fail_err(&err);
        return -1;
    }
    return push_sample_ranks(L, r, n);
}

/* Moves a finished job's snapshot and ranks into L. */
static int take_job(cli_inputs *L, cli_snap_job *j)
{
    if (md_grow((void **)&L->ranks, &L->cap, L->nranks + j->nranks, sizeof *L->ranks))
        return -1;
    L->snaps[L->nsnaps++] = j->snap;
    memcpy(L->ranks + L->nranks, j->ranks, j->nranks * sizeof *j->ranks);
    L->nranks += j->nranks;
    free(j->ranks);
    memset(j, 0, sizeof *j);
    return 0;
}

/* Snapshots are read in parallel (load.c); seed JSON reports and capture
 * files, small, here. Everything is taken in the order given. */
static int load_all(char **paths, size_t n, cli_inputs *L)
{
    L->snaps = calloc(n ? n : 1, sizeof *L->snaps);
    cli_snap_job *jobs = calloc(n ? n : 1, sizeof *jobs);
    enum { SNAPSHOT, SEED_REPORT, CAPTURE } *kind = calloc(n ? n : 1, sizeof *kind);
    int rc = !L->snaps || !jobs || !kind ? -1 : 0;
    size_t nj = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        kind[i] = cli_is_seed_report(paths[i]) ? SEED_REPORT
                  : cli_is_capture(paths[i])   ? CAPTURE
                                               : SNAPSHOT;
        if (kind[i] == SNAPSHOT)
            jobs[nj++].path = paths[i];
    }
    if (!rc)
        L->heap_below = cli_load_snapshots(jobs, nj);
    for (size_t i = 0, j = 0; i < n && !rc; i++) {
        if (kind[i] == SEED_REPORT) {
            rc = add_json(L, paths[i]);
        } else if (kind[i] == CAPTURE) {
            rc = add_capture(L, paths[i]);
        } else if (jobs[j].failed) {
            cli_fail_err(&jobs[j].err);
            rc = -1;
        } else {
            rc = take_job(L, &jobs[j++]);
        }
    }
    for (size_t j = 0; j < nj; j++)
        cli_snap_job_free(&jobs[j]);
    free(jobs);
    free(kind);
    return rc;
}

/* Ranks named in file names should run 0..max; name the gaps. */
static void report_missing(const cli_inputs *L)
{
    int max = -1;
    for (size_t i = 0; i < L->nranks; i++)
        if (L->ranks[i].rank > max)
            max = L->ranks[i].rank;
    /* capture files know the job's world size: every rank should have one */
    int world = 0;
    for (size_t i = 0; i < L->nsranks; i++)
        if (L->sranks[i].has_capture && L->sranks[i].capture.world_size > world)
            world = L->sranks[i].capture.world_size;
    for (int r = 0; r < world && world <= 100000; r++) {
        int seen = 0;
        for (size_t i = 0; i < L->nsranks && !seen; i++)
            seen = L->sranks[i].has_capture && L->sranks[i].rank == r;
        if (!seen)
            cli_fail("warning: rank %d of %d has no capture file among the inputs "
                     "(the process did not start, or its file is elsewhere)", r, world);
    }
    if (L->nranks < 2 || max < 1 || max > 100000)
        return;
    for (int r = 0; r <= max; r++) {
        int seen = 0;
        for (size_t i = 0; i < L->nranks && !seen; i++)
            seen = L->ranks[i].rank == r;
        if (!seen)
            cli_fail("warning: rank %d has no snapshot among the inputs (ranks up to %d given)", r, max);
    }
}

/* One list of cross-rank findings from snapshots and from samples: a kind
 * the snapshots found is not repeated, except memory on another rank's
 * GPU, where the samples' NVML figure (which counts the CUDA context made
 * there) replaces the snapshot's, whose sites it keeps. */
static int merge_cross(md_finding **cross, size_t *ncross, const md_finding *s, size_t ns)
{
    md_finding *all = realloc(*cross, (*ncross + ns) * sizeof *all);
    if (!all)
        return -1;
    *cross = all;
    size_t base = *ncross;
    for (size_t i = 0; i < ns; i++) {
        md_finding *same = NULL;
        for (size_t k = 0; k < base && !same; k++)
            if (!strcmp(all[k].kind, s[i].kind) && all[k].device == s[i].device &&
                (s[i].device < 0 || all[k].rank == s[i].rank))
                same = &all[k];
        if (!same) {
            all[(*ncross)++] = s[i];
        } else if (s[i].device >= 0 && s[i].bytes > same->bytes) {
            md_finding keep = *same;
            *same = s[i];
            memcpy(same->sites, keep.sites, sizeof keep.sites);
            same->nsites = keep.nsites;
        }
    }
    return 0;
}

int cli_inputs_load(char **args, int nargs, cli_inputs *L)
{
    memset(L, 0, sizeof *L);
    int rc = cli_expand_paths(args, nargs, &L->paths, &L->npaths);
    if (rc)
        return rc;
    rc = load_all(L->paths, L->npaths, L);
    if (!rc) {
        attach_drivers(L);
        md_sample_ranks_relate(L->sranks, L->nsranks);
        mark_helper_snapshots(L);
        diagnose_sample_ranks(L);
    }
    md_finding *scross = NULL;
    size_t nscross = 0;
    if (!rc) {
        md_err err = {0};
        if (md_ranks_cross(L->ranks, L->nranks, &L->cross, &L->ncross, &err) ||
            md_diagnose_sample_ranks(L->sranks, L->nsranks, &scross, &nscross, &err)) {
            cli_fail_err(&err);
            rc = -1;
        }
    }
    if (!rc && nscross && merge_cross(&L->cross, &L->ncross, scross, nscross)) {
        cli_fail("out of memory");
        rc = -1;
    }
    free(scross);
    if (!rc)
        report_missing(L);
    else
        cli_inputs_free(L);
    return rc ? EXIT_USAGE : 0;
}

md_report cli_inputs_report(const cli_inputs *L)
{
    md_report rep = {L->ranks, L->nranks, L->sranks, L->nsranks, L->sfind, L->nsfind,
                     L->cross, L->ncross};
    return rep;
}

void cli_inputs_free(cli_inputs *L)
{
    unload(L);
    free(L->cross);
    free(L->heap_below);
    cli_free_paths(L->paths, L->npaths);
    memset(L, 0, sizeof *L);
}

const md_rank *cli_one_snapshot_rank(const cli_inputs *in, const char *path, long device,
                                     const char *cmd, const char *lacks)
{
    if (in->nsnaps != 1) {
        if (in->nsnaps == 0)
            cli_fail("%s: no allocator snapshot (capture files and seed reports have no %s)",
                     path, lacks);
        else
            cli_fail("%s holds %zu snapshots; %s reads one: name it (e.g. %s)", path,
                     in->nsnaps, cmd, md_snapshot_path(in->snaps[0]));
        return NULL;
    }
    for (size_t i = 0; i < in->nranks; i++)
        if (device < 0 ? !in->ranks[i].further : in->ranks[i].device == device)
            return &in->ranks[i];
    cli_fail("%s: no trace of cuda:%ld", path, device);
    return NULL;
}

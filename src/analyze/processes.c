/* processes.c - other processes on a rank's GPU: what NVML counted beside
 * the process (device used less the process's own use) and, where the
 * capture listed them (PROCESSES records), whose they are: a child of
 * this process (a DataLoader worker or a spawned helper that touched
 * CUDA), a sibling (another process of the same launch: a sweep started
 * by torch.multiprocessing, ranks that never chose their GPU), or another
 * job. Said in the non_framework finding (samples.c). */
#include <stdio.h>
#include <string.h>
#include "../util/util.h"
#include "analyze.h"

#define OTHERS_MIN_MIB 64.0 /* NVML's used runs ~10 MiB above the processes' sum */

typedef enum { REL_OTHER, REL_CHILD, REL_SIBLING, REL_COUNT } relation;

static const char *const rel_name[REL_COUNT] = {
    [REL_OTHER] = "another job",
    [REL_CHILD] = "a child of this process",
    [REL_SIBLING] = "a sibling: same parent",
};

static const char *const rel_advice[REL_COUNT] = {
    [REL_OTHER] = "Another job shares this GPU: what it holds is headroom this one does not "
                  "have, and it can take more at any time. Give each job its own GPU "
                  "(CUDA_VISIBLE_DEVICES, the scheduler's GPU request), or, where you "
                  "administer the machine, nvidia-smi -c EXCLUSIVE_PROCESS.",
    [REL_CHILD] = "Child processes of this one use the GPU, each with a CUDA context of its "
                  "own (~500 MiB) besides what it allocates. DataLoader workers get one when "
                  "the Dataset, a transform or collate_fn touches CUDA: keep them on the CPU "
                  "(return CPU tensors; pin_memory=True and .to(device, non_blocking=True) in "
                  "the loop). A helper that needs no GPU can start with "
                  "CUDA_VISIBLE_DEVICES=\"\".",
    [REL_SIBLING] = "Processes started together share this GPU (torch.multiprocessing.spawn, "
                    "a launcher's workers, ranks that never chose a device): each should take "
                    "its own, torch.cuda.set_device(rank) before any CUDA call, or run with "
                    "its own CUDA_VISIBLE_DEVICES.",
};

void md_sample_ranks_relate(md_sample_rank *r, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        r[i].helper = 0;
        for (size_t j = 0; j < n && !r[i].helper; j++)
            r[i].helper = j != i && r[i].ppid > 0 && r[j].pid == r[i].ppid &&
                          !r[j].further_device && !r[j].driver_file;
    }
}

const char *md_helper_role(const md_sample_rank *r)
{
    return r->role[0] ? r->role : "child process";
}

static relation relation_of(const md_sample_rank *r, const md_gpu_process *p)
{
    if (r->pid > 0 && p->ppid == (uint32_t)r->pid)
        return REL_CHILD;
    if (r->ppid > 1 && p->ppid == (uint32_t)r->ppid)
        return REL_SIBLING; /* children of init are not one launch */
    return REL_OTHER;
}

static double others_mib(const md_sample_rank *r, const md_sample *s)
{
    if (r->further_device || s->process_used_mib < 0 || s->device_used_mib < 0)
        return 0;
    double d = s->device_used_mib - s->process_used_mib;
    return d >= OTHERS_MIN_MIB ? d : 0;
}

/* "pid 568 (a child of this process): python3 -B -c from ..." */
static void process_site(md_finding *f, const md_gpu_process *p, relation rel)
{
    if (f->nsites >= MD_FINDING_MAX_SITES)
        return;
    md_finding_site *x = &f->sites[f->nsites++];
    md_fsay(x->site, sizeof x->site, "pid %u (%s)%s%s", p->pid, rel_name[rel],
            p->name[0] ? ": " : "", p->name);
    x->bytes = p->used == UINT64_MAX ? 0 : p->used;
    x->count = 1;
}

/* The largest listed first, as sites; the MiB each relation holds. */
static void list_processes(const md_sample_rank *r, md_finding *f, double by[REL_COUNT],
                           size_t count[REL_COUNT])
{
    unsigned char done[64] = {0};
    size_t n = r->nothers < sizeof done ? r->nothers : sizeof done;
    for (size_t k = 0; k < n; k++) {
        size_t best = n;
        for (size_t i = 0; i < n; i++)
            if (!done[i] && (best == n || r->others[i].used + 1 > r->others[best].used + 1))
                best = i; /* +1: "not available" (2^64-1) sorts last */
        done[best] = 1;
        const md_gpu_process *p = &r->others[best];
        relation rel = relation_of(r, p);
        by[rel] += p->used == UINT64_MAX ? 0 : md_mib(p->used);
        count[rel]++;
        process_site(f, p, rel);
    }
}

/* The largest process of that relation: the one a summary names. */
static const md_gpu_process *largest(const md_sample_rank *r, relation rel)
{
    const md_gpu_process *best = NULL;
    for (size_t i = 0; i < r->nothers; i++)
        if (relation_of(r, &r->others[i]) == rel && r->others[i].used != UINT64_MAX &&
            (!best || r->others[i].used > best->used))
            best = &r->others[i];
    return best;
}

/* Every child runs multiprocessing's spawn or forkserver entry point. */
static int all_spawned(const md_sample_rank *r)
{
    int any = 0;
    for (size_t i = 0; i < r->nothers; i++) {
        if (relation_of(r, &r->others[i]) != REL_CHILD)
            continue;
        if (!strstr(r->others[i].name, "from multiprocessing."))
            return 0;
        any = 1;
    }
    return any;
}

/* Sites largest first: the libraries and the processes were added apart. */
static void sort_sites(md_finding *f)
{
    for (int i = 1; i < f->nsites; i++)
        for (int j = i; j > 0 && f->sites[j].bytes > f->sites[j - 1].bytes; j--) {
            md_finding_site t = f->sites[j];
            f->sites[j] = f->sites[j - 1];
            f->sites[j - 1] = t;
        }
}

static void say_summary(md_finding *f, double gap, double mib, relation top, size_t n,
                        const md_sample_rank *r)
{
    const md_gpu_process *p = largest(r, top);
    char who[96];
    if (!n || !p)
        md_fsay(who, sizeof who, "other processes on this GPU");
    else if (top == REL_CHILD)
        md_fsay(who, sizeof who, "%zu child process%s of this one%s", n, n == 1 ? "" : "es",
                all_spawned(r) ? " (started by multiprocessing: DataLoader workers, a Pool)" : "");
    else if (top == REL_SIBLING)
        md_fsay(who, sizeof who, "%s started by this one's parent (pid %u%s)",
                n == 1 ? "another process" : "other processes", p->pid, n == 1 ? "" : ", ...");
    else
        md_fsay(who, sizeof who, "%s on this GPU (pid %u%s)",
                n == 1 ? "another process" : "other processes", p->pid, n == 1 ? "" : ", ...");
    md_fsay(f->summary, sizeof f->summary, "%.1f MiB of device memory is used outside "
            "PyTorch's allocator, %.1f MiB of it by %s", gap, mib, who);
}

double md_other_processes(const md_sample_rank *r, const md_sample *s, double gap,
                          md_finding *f)
{
    double mib = others_mib(r, s);
    if (mib <= 0)
        return 0;
    double by[REL_COUNT] = {0};
    size_t count[REL_COUNT] = {0};
    list_processes(r, f, by, count);
    sort_sites(f);
    MD_EVIDENCE(f, "NVML at that point: this process %.1f MiB of the device, other processes "
                "%.1f MiB%s", s->process_used_mib, mib,
                r->nothers ? " (sites: each one at its largest)" : "");
    relation top = REL_OTHER;
    for (int k = 0; k < REL_COUNT; k++)
        top = by[k] > by[top] ? (relation)k : top;
    if (mib < 0.5 * gap)
        return mib;
    say_summary(f, gap, mib, top, count[top], r);
    md_fsay(f->advice, sizeof f->advice, "%s This process's own part (%.0f MiB) is its CUDA "
            "context and libraries.", rel_advice[top], gap - mib > 0 ? gap - mib : 0);
    if (mib >= 1024) /* a GiB of the card lost to other processes */
        f->severity = MD_SEV_WARNING;
    return mib;
}

/* The most NVML saw a rank's process use of its own GPU, or its peak
 * allocated where NVML could not say. */
static double process_mib(const md_sample_rank *r)
{
    double m = -1;
    for (size_t i = 0; i < r->nsamples; i++)
        m = r->samples[i].process_used_mib > m ? r->samples[i].process_used_mib : m;
    return m > 0 ? m : r->indicators.maximum_peak_allocated_mib;
}

static int shares_with(const md_sample_rank *a, const md_sample_rank *b)
{
    return a->has_capture && b->has_capture && !a->further_device && !b->further_device &&
           !a->helper && !b->helper && !a->driver_file && !b->driver_file && a->device >= 0 &&
           a->device == b->device && a->rank != b->rank && a->host[0] && !strcmp(a->host, b->host);
}

/* "0, 1 and 2" (the first 16 of them). */
static void say_ranks(char *dst, size_t n, const int *rank, size_t count)
{
    size_t len = 0;
    dst[0] = 0;
    for (size_t i = 0; i < count && i < 16 && len < n; i++)
        len += (size_t)snprintf(dst + len, n - len, "%s%d",
                                !i ? "" : i + 1 == count ? " and " : ", ", rank[i]);
    if (count > 16 && len < n)
        snprintf(dst + len, n - len, " and %zu more", count - 16);
}

/* Ranks of one job whose own GPU is one GPU (ranks that never chose a
 * device: with gloo the job runs, each rank with what the others leave). */
static int shared_gpu(const md_sample_rank *r, size_t nr, size_t first, md_finding **out,
                      size_t *n, size_t *cap)
{
    int rank[16];
    char uses[200] = "";
    size_t count = 0, ulen = 0;
    double total = 0, largest = 0;
    const md_sample_rank *moved = NULL; /* a rank whose local rank names another GPU */
    for (size_t j = first; j < nr; j++) {
        if (j != first && !shares_with(&r[first], &r[j]))
            continue;
        double mib = process_mib(&r[j]);
        total += mib;
        largest = mib > largest ? mib : largest;
        if (count < 16)
            rank[count] = r[j].rank;
        if (count < 4 && ulen < sizeof uses)
            ulen += (size_t)snprintf(uses + ulen, sizeof uses - ulen, "%srank %d %.1f MiB",
                                     count ? ", " : "", r[j].rank, mib);
        count++;
        if (!moved && r[j].local_rank != r[j].device)
            moved = &r[j];
    }
    md_finding *f = md_finding_new(out, n, cap, "rank_imbalance", MD_SEV_WARNING,
                                   md_bytes_of_mib(total - largest));
    if (!f)
        return MD_E_NOMEM;
    char said[160];
    say_ranks(said, sizeof said, rank, count);
    f->device = r[first].device;
    md_fsay(f->summary, sizeof f->summary, "ranks %s run on one GPU, cuda:%d of %s: each has "
            "what the others leave of it", said, r[first].device, r[first].host);
    if (moved)
        MD_EVIDENCE(f, "rank %d's local rank is %d, yet its process runs on cuda:%d", moved->rank,
                    moved->local_rank, moved->device);
    MD_EVIDENCE(f, "each process at its largest (NVML): %s%s; %.1f MiB of cuda:%d together",
                uses, count > 4 ? ", ..." : "", total, r[first].device);
    md_fsay(f->advice, sizeof f->advice, "Give each rank its own GPU: "
            "torch.cuda.set_device(int(os.environ[\"LOCAL_RANK\"])) before any CUDA call, "
            "or init_process_group(..., device_id=torch.device(\"cuda\", local_rank)); tensors "
            "on \"cuda\" then follow it. NCCL refuses ranks on one GPU (\"Duplicate GPU "
            "detected\"); gloo runs them, each with a share of one GPU's memory.");
    return MD_OK;
}

int md_shared_gpus(const md_sample_rank *r, size_t nr, md_finding **out, size_t *n, size_t *cap)
{
    for (size_t i = 0; i < nr; i++) {
        int earlier = 0, later = 0;
        for (size_t j = 0; j < nr; j++) {
            earlier |= j < i && shares_with(&r[j], &r[i]);
            later |= j > i && shares_with(&r[i], &r[j]);
        }
        if (!earlier && later && shared_gpu(r, nr, i, out, n, cap))
            return MD_E_NOMEM;
    }
    return MD_OK;
}

/* samples.c - indicators and findings from phase samples alone (the seed
 * script's JSON, memdiag's capture files): what can be said without an
 * allocator history. The device-wide counter adds one thing snapshots
 * cannot see: memory outside PyTorch's allocator. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "../util/util.h"
#include "analyze.h"

#define NONFW_MIN_MIB 256.0  /* below this, the context of a small job */

/* The sample of a step's phase; where there are two, the later (a step
 * that ran out of memory and was tried again samples its forward again). */
static const md_sample *find(const md_sample_rank *r, int step, int phase)
{
    for (size_t i = r->nsamples; i-- > 0;)
        if (r->samples[i].step == step && r->samples[i].phase == phase)
            return &r->samples[i];
    return NULL;
}

static int max_step(const md_sample_rank *r)
{
    int m = -1;
    for (size_t i = 0; i < r->nsamples; i++)
        if (r->samples[i].phase == MD_SP_AFTER_CLEAR_GRADIENTS && r->samples[i].step > m)
            m = r->samples[i].step;
    return m;
}

/* Several optimizers stepping in turn, as the capture's STEP records say
 * which took each step (a GAN; WGAN's critic five times a generator
 * step): the length of their cycle, not all one optimizer; 1 when one
 * optimizer or no cycle shows twice. */
static size_t optimizer_period(const md_sample_rank *r)
{
    size_t n = r->nstep_optimizers;
    long *id = n ? malloc(n * sizeof *id) : NULL, rep[MD_MAX_PERIOD];
    for (size_t k = 0; id && k < n; k++)
        id[k] = r->step_optimizers[k].optimizer;
    size_t p = id ? md_cycle_period(id, n, rep) : 1;
    free(id);
    return p;
}

/* The training iterations' ends: every step (period 1), or each
 * period-th step ending with the last (a first group cut short by where
 * recording began is left out), up to the last step sampled after its
 * zero_grad (where zero_grad comes first in the loop, the last step has
 * none). */
typedef struct iterations {
    size_t period, n, first;
    const md_step_optimizer *so;
} iterations;

/* How many different optimizers one iteration steps. */
static size_t distinct_optimizers(const iterations *it)
{
    size_t d = 0;
    for (size_t k = 0; k < it->period; k++) {
        size_t j = 0;
        while (j < k && it->so[it->first + j].optimizer != it->so[it->first + k].optimizer)
            j++;
        d += j == k;
    }
    return d;
}

/* The step that ends iteration j, and the one that begins it. */
static int iteration_end(const iterations *it, size_t j)
{
    return it->period == 1 ? (int)j : it->so[it->first + (j + 1) * it->period - 1].step;
}

static iterations iterations_of(const md_sample_rank *r, int last)
{
    iterations it = {optimizer_period(r), (size_t)last + 1, 0, r->step_optimizers};
    if (it.period > 1) {
        it.first = r->nstep_optimizers % it.period;
        it.n = r->nstep_optimizers / it.period;
        while (it.n && iteration_end(&it, it.n - 1) > last)
            it.n--;
    }
    return it;
}

static int iteration_start(const iterations *it, size_t j)
{
    return it->period == 1 ? (int)j : it->so[it->first + j * it->period].step;
}

/* The state the first step starts from: the sample after the input (the
 * first module's forward), else, where no module ran (a model of raw
 * tensors), the one after the first optimizer was made. */
static const md_sample *baseline(const md_sample_rank *r)
{
    const md_sample *b = find(r, -1, MD_SP_AFTER_INPUT);
    return b ? b : find(r, -1, MD_SP_AFTER_OPTIMIZER_CREATION);
}

/* What step k's forward pass added over the end of the step before (step
 * 0: over the baseline); NAN where a sample is missing. */
static double forward_increase(const md_sample_rank *r, int k)
{
    const md_sample *f = find(r, k, MD_SP_AFTER_FORWARD);
    const md_sample *b = k ? find(r, k - 1, MD_SP_AFTER_CLEAR_GRADIENTS) : baseline(r);
    return f && b ? f->allocated_mib - b->allocated_mib : NAN;
}

/* The seed script's derive_indicators, over complete steps. */
void md_samples_indicators(md_sample_rank *r)
{
    md_indicators *in = &r->indicators;
    memset(in, 0, sizeof *in);
    for (size_t i = 0; i < r->nsamples; i++)
        in->maximum_peak_allocated_mib = fmax(in->maximum_peak_allocated_mib,
                                              r->samples[i].peak_allocated_mib);
    const md_sample *init = baseline(r);
    const md_sample *c0 = find(r, 0, MD_SP_AFTER_CLEAR_GRADIENTS);
    int last = max_step(r);
    if (!init || last < 0)
        return;
    /* where several optimizers step in turn, a training step is an
     * iteration of them all: its end is the last one's (optimizers that
     * step back to back, their gradients cleared after both, leave no
     * sample between them) */
    iterations it = iterations_of(r, last);
    if (it.period > 1 && it.n && it.first == 0) {
        const md_sample *e0 = find(r, iteration_end(&it, 0), MD_SP_AFTER_CLEAR_GRADIENTS);
        const md_sample *en = find(r, iteration_end(&it, it.n - 1), MD_SP_AFTER_CLEAR_GRADIENTS);
        if (e0 && en) {
            c0 = e0;
            last = iteration_end(&it, it.n - 1);
        }
    }
    if (!c0)
        return;
    in->valid = 1;
    in->first_step_recorded = 1;
    in->first_step_persistent_change_mib = c0->allocated_mib - init->allocated_mib;
    in->between_step_growth_mib =
        find(r, last, MD_SP_AFTER_CLEAR_GRADIENTS)->allocated_mib - c0->allocated_mib;
    in->largest_forward_increase_mib = -INFINITY;
    for (int k = 0; k <= last; k++)
        if (!isnan(forward_increase(r, k)))
            in->largest_forward_increase_mib =
                fmax(in->largest_forward_increase_mib, forward_increase(r, k));
    if (!isfinite(in->largest_forward_increase_mib))
        in->largest_forward_increase_mib = 0;
}

static md_finding *add(md_finding **out, size_t *n, size_t *cap, const char *kind, int sev,
                       double mib)
{
    return md_finding_new(out, n, cap, kind, sev, md_bytes_of_mib(mib));
}


/* What is used of the device: all of it (the process's own device: its
 * context, NCCL, and other processes are all headroom lost), or, on a
 * further device of the process, its own use where NVML measured it
 * (another rank's GPU: that rank's memory is not this process's). */
/* "after_backward of step 2"; a sample of the set-up (no step yet):
 * "after_input (before any step)". */
static const char *phase_at(const md_sample *s, char *buf, size_t n)
{
    if (s->step < 0)
        snprintf(buf, n, "%s (before any step)", md_sample_phase_name(s->phase));
    else
        snprintf(buf, n, "%s of step %d", md_sample_phase_name(s->phase), s->step);
    return buf;
}

static double used_mib(const md_sample_rank *r, const md_sample *s)
{
    return r->further_device && s->process_used_mib >= 0 ? s->process_used_mib : s->device_used_mib;
}

/* Where one library holds the most memory outside PyTorch's allocator. */
static const char *const lib_advice[] = {
    [MD_LIB_NCCL] = "NCCL holds the most: its buffers grow with communicators, channels and "
                    "peers (NCCL_BUFFSIZE, NCCL_MAX_NCHANNELS; NCCL_NVLS_ENABLE=0 drops NVLink "
                    "SHARP's). Fewer process groups, or destroying unused ones, frees them.",
    [MD_LIB_JAX] = "JAX holds the most: its allocator takes 75% of the GPU at its first use, "
                   "whatever it needs. Set XLA_PYTHON_CLIENT_PREALLOCATE=false (it allocates as "
                   "it goes) or XLA_PYTHON_CLIENT_MEM_FRACTION (e.g. .15) before JAX starts, or "
                   "keep JAX off this GPU (JAX_PLATFORMS=cpu).",
    [MD_LIB_CUPY] = "CuPy holds the most: its memory pool keeps freed arrays' blocks for reuse, "
                    "and PyTorch cannot use them. cupy.get_default_memory_pool().free_all_blocks() "
                    "returns them; or let CuPy allocate through PyTorch (cupy.cuda.set_allocator "
                    "with a PyTorch-backed allocator) so one cache serves both.",
};

/* "libnccl.so.2 (NCCL communicator buffers)": a library and what it is. */
static void caller_label(char *dst, size_t n, const md_driver_use *u)
{
    md_fsay(dst, n, "%s%s%s%s", u->caller, u->what ? " (" : "", u->what ? u->what : "",
            u->what ? ")" : "");
}

/* A library's bytes as a finding's site. */
static void driver_site(md_finding *f, const md_driver_use *u, uint64_t bytes)
{
    if (f->nsites >= MD_FINDING_MAX_SITES)
        return;
    md_finding_site *x = &f->sites[f->nsites++];
    caller_label(x->site, sizeof x->site, u);
    x->bytes = bytes;
    x->count = (uint32_t)u->allocs;
}

/* What the driver-level trace adds: the libraries that allocated device
 * memory outside PyTorch's caching allocator, as sites; the advice names
 * NCCL's settings when NCCL holds the most. Returns the bytes it explains. */
static uint64_t driver_evidence(const md_sample_rank *r, md_finding *f)
{
    md_driver_stats s;
    md_err err;
    if (!r->driver.n || md_driver_analyze(&r->driver, -1, &s, &err))
        return 0;
    int torch = 0; /* a program without PyTorch's allocator: all of it is its own */
    for (size_t i = 0; i < s.nuse; i++)
        torch |= md_driver_is_torch_allocator(s.use[i].caller);
    if (!torch) {
        md_driver_stats_free(&s);
        return 0;
    }
    const md_driver_use *top = NULL;
    for (size_t i = 0; i < s.nuse; i++) {
        const md_driver_use *u = &s.use[i];
        if (md_driver_is_torch_allocator(u->caller) || !u->max_live)
            continue;
        if (!top || u->max_live > top->max_live)
            top = u;
        driver_site(f, u, u->max_live);
    }
    if (top)
        MD_EVIDENCE(f, "driver-level trace: at most %.1f MiB allocated through the CUDA driver "
                       "outside PyTorch's caching allocator; the most by %s (%.1f MiB)",
                    md_mib(s.outside_peak), top->caller, md_mib(top->max_live));
    md_driver_lib lib = top ? md_driver_caller_lib(top->caller) : MD_LIB_OTHER;
    if (lib != MD_LIB_OTHER)
        md_fsay(f->advice, sizeof f->advice, "%s The rest of the gap is the CUDA context and "
                "loaded kernels, which no allocation call shows.", lib_advice[lib]);
    uint64_t b = s.outside_peak;
    md_driver_stats_free(&s);
    return b;
}

/* No device-wide figure (NVML unavailable: some containers), or a gap
 * below the threshold: the driver-level trace alone can still show a
 * library's memory outside the allocator (a torch process only: a CUDA
 * program's memory is all its own). */
static void driver_only(const md_sample_rank *r, md_finding **out, size_t *n, size_t *cap)
{
    if (!r->nsamples || r->driver_file)
        return;
    md_finding *f = add(out, n, cap, "non_framework", MD_SEV_INFO, 0);
    if (!f)
        return;
    double mib = md_mib(driver_evidence(r, f));
    if (mib < NONFW_MIN_MIB) { /* nothing worth saying: taken back */
        (*n)--;
        return;
    }
    f->bytes = md_bytes_of_mib(mib);
    f->rank = r->rank;
    md_fsay(f->summary, sizeof f->summary, "%.1f MiB of device memory was allocated through the "
            "CUDA driver outside PyTorch's allocator (libraries: see sites)", mib);
    if (!f->advice[0])
        md_fsay(f->advice, sizeof f->advice, "Snapshots cannot see this memory: keep it out of "
                "any batch-size budget, and look at the libraries listed for their own settings.");
}

static void non_framework(const md_sample_rank *r, md_finding **out, size_t *n, size_t *cap)
{
    if (r->helper) /* its parent's finding names it, with what it holds */
        return;
    const md_sample *first = NULL, *worst = NULL;
    for (size_t i = 0; i < r->nsamples; i++) {
        const md_sample *s = &r->samples[i];
        if (used_mib(r, s) < 0)
            continue;
        if (!first)
            first = s;
        if (!worst || used_mib(r, s) - s->reserved_mib > used_mib(r, worst) - worst->reserved_mib)
            worst = s;
    }
    if (!worst) {
        driver_only(r, out, n, cap);
        return;
    }
    int own_use = r->further_device && worst->process_used_mib >= 0;
    const char *what = own_use ? "this process uses" : "device used";
    double gap = used_mib(r, worst) - worst->reserved_mib;
    if (gap < NONFW_MIN_MIB) {
        driver_only(r, out, n, cap);
        return;
    }
    /* judged against the device: a context that is large next to a small
     * job is still normal; a tenth of the card is worth a warning */
    int sev = (r->device_total_mib > 0 ? gap >= 0.10 * r->device_total_mib : gap >= 4096)
                  ? MD_SEV_WARNING : MD_SEV_INFO;
    md_finding *f = add(out, n, cap, "non_framework", sev, gap);
    if (!f)
        return;
    f->rank = r->rank;
    if (own_use)
        md_fsay(f->summary, sizeof f->summary, "%.1f MiB of cuda:%d is used by this process "
                "outside PyTorch's allocator (its CUDA context there, libraries)", gap, r->device);
    else
        md_fsay(f->summary, sizeof f->summary,
            "%.1f MiB of device memory is used outside PyTorch's allocator (CUDA context, "
            "libraries, NCCL, other processes)", gap);
    char at[96];
    MD_EVIDENCE(f, "%s: %s %.1f MiB, PyTorch reserved %.1f MiB", phase_at(worst, at, sizeof at),
                what, used_mib(r, worst), worst->reserved_mib);
    if (first && first != worst)
        MD_EVIDENCE(f, "already at %s: %s %.1f MiB against %.1f MiB reserved (%.1f MiB outside)",
           md_sample_phase_name(first->phase), what, used_mib(r, first), first->reserved_mib,
           used_mib(r, first) - first->reserved_mib);
    if (r->device_total_mib > 0)
        MD_EVIDENCE(f, "that is %.1f%% of the device's %.1f MiB", 100.0 * gap / r->device_total_mib,
           r->device_total_mib);
    md_fsay(f->advice, sizeof f->advice,
        "Snapshots cannot see this memory. A CUDA context takes roughly 300-600 MiB with lazy "
        "module loading (CUDA >= 12.2); NCCL adds buffers per communicator and channel "
        "(NCCL_BUFFSIZE); cuDNN/cuBLAS load kernels. Check nvidia-smi for other processes "
        "on the GPU, and keep this %.0f MiB out of any batch-size budget.", gap);
    double explained = md_mib(driver_evidence(r, f));
    const md_finding_site *most = NULL;
    for (int i = 0; i < f->nsites; i++)
        most = !most || f->sites[i].bytes > most->bytes ? &f->sites[i] : most;
    double others = md_other_processes(r, worst, gap, f);
    explained += others;
    if (others < 0.5 * gap && most && md_mib(most->bytes) >= 0.5 * gap) /* one library holds most of it: say so */
        md_fsay(f->summary, sizeof f->summary, "%.1f MiB of %s is used outside PyTorch's "
                "allocator, %.1f MiB of it by %s", gap,
                own_use ? "this process's device memory" : "device memory", md_mib(most->bytes),
                most->site);
    if (explained > 0 && gap > explained)
        MD_EVIDENCE(f, "the other %.1f MiB of the gap: the CUDA context, loaded kernels and the "
                       "driver's own memory, which no allocation call shows", gap - explained);
}

/* How memory after clearing gradients moved from one iteration's end to
 * the next; follows_inputs: never faster than the forward pass grew (the
 * inputs grow, and each step's outputs are held until the next:
 * findings.c). A missing sample counts as memory that fell. */
/* How memory after clearing gradients moved over interval j (iteration
 * j-1's end to iteration j's), MiB; -INFINITY where a sample is missing. */
static double held_delta(const md_sample_rank *r, const iterations *it, size_t j)
{
    const md_sample *a = find(r, iteration_end(it, j - 1), MD_SP_AFTER_CLEAR_GRADIENTS);
    const md_sample *b = find(r, iteration_end(it, j), MD_SP_AFTER_CLEAR_GRADIENTS);
    return a && b ? b->allocated_mib - a->allocated_mib : -INFINITY;
}

static md_held_growth growth_of(const md_sample_rank *r, const iterations *it, double thr,
                                int *follows_inputs)
{
    md_held_growth g = MD_HELD_GROWTH_INIT;
    *follows_inputs = 1;
    for (size_t j = 1; j < it->n && !g.fell; j++) {
        double d = held_delta(r, it, j);
        md_held_growth_add(&g, d, thr);
        *follows_inputs &= d <= forward_increase(r, iteration_start(it, j)) -
                                forward_increase(r, iteration_start(it, j - 1));
    }
    return g;
}

/* Whether every interval the held memory grew in (by more than thr) grew
 * by the optimizer step's own growth there (90-110% of it, after the
 * backward to after the step): the optimizer's state grew, parameters
 * joining it (layers unfrozen one by one). One optimizer only. */
static int state_growth(const md_sample_rank *r, const iterations *it, double thr)
{
    int grew = 0;
    for (size_t j = 1; it->period == 1 && j < it->n; j++) {
        const md_sample *bw = find(r, iteration_end(it, j), MD_SP_AFTER_BACKWARD);
        const md_sample *op = find(r, iteration_end(it, j), MD_SP_AFTER_OPTIMIZER_STEP);
        double d = held_delta(r, it, j);
        if (d == -INFINITY)
            return 0;
        if (d <= thr)
            continue;
        /* the step made what was kept, no more: a new optimizer's state
         * beside a new model (a sweep keeping models) is twice as much */
        double own = bw && op ? op->allocated_mib - bw->allocated_mib : 0;
        if (own < 0.9 * d || own > 1.1 * d)
            return 0;
        grew = 1;
    }
    return grew;
}

/* Memory after clearing gradients that grows by the same amount, under
 * the noise floor, in every one of at least four intervals: one tensor
 * (or a few) kept each step. The snapshot names them (findings.c,
 * find_small_leak); a capture sees only that the total steps up evenly.
 * The per-interval growth in MiB, or 0. */
static double steady_growth(const md_sample_rank *r, const iterations *it)
{
    double first = 0;
    if (it->n < 5)
        return 0;
    for (size_t j = 1; j < it->n; j++) {
        double d = held_delta(r, it, j);
        if (j == 1)
            first = d;
        if (!(d > 0) || fabs(d - first) > 1e-9)
            return 0;
    }
    return first;
}

/* The file name of a path ("rank0.pickle"). */
static const char *file_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

/* Where the sites of a leak the samples see are to be read: the snapshot
 * the run wrote (memdiag run writes one per rank), else one to record. */
static const char *snapshot_hint(const md_sample_rank *r, char *buf, size_t n)
{
    const char *path = r->has_capture ? r->capture.snapshot : "";
    if (path[0])
        snprintf(buf, n, "This run's snapshot (%s) names which allocations stay: its leak "
                 "finding, beside this one where the run's directory is read", file_name(path));
    else
        snprintf(buf, n, "Record a snapshot (memdiag run, or "
                 "torch.cuda.memory._record_memory_history) to see which allocations stay");
    return buf;
}

static void small_leak(const md_sample_rank *r, const iterations *it, double per, double thr,
                       md_finding **out, size_t *n, size_t *cap)
{
    const char *unit = it->period > 1 ? "iteration" : "step";
    md_finding *f = add(out, n, cap, "leak", MD_SEV_INFO, per);
    if (!f)
        return;
    f->rank = r->rank;
    md_fsay(f->summary, sizeof f->summary, "memory grows by %.1f KiB every %s and is never freed "
            "(small now; 1 GiB after %.0f %ss)", per * 1024.0, unit, 1024.0 / per, unit);
    MD_EVIDENCE(f, "allocated after clearing gradients grows by exactly %.1f KiB in every one of "
                "%zu %ss, under the %.1f MiB a %s that the totals can tell from noise",
                per * 1024.0, it->n - 1, unit, thr, unit);
    MD_EVIDENCE(f, "samples only: an allocator snapshot of the same run names the sites");
    char hint[sizeof r->capture.snapshot + 128];
    md_fsay(f->advice, sizeof f->advice,
        "%s; typical causes are predictions or losses kept on the GPU (argmax outputs, "
        "loss.detach() in a list). About %.1f KiB per %s.", snapshot_hint(r, hint, sizeof hint),
        per * 1024.0, unit);
}

/* A leak finding of per MiB a step or iteration, critical where the whole
 * growth reaches a quarter of the peak; NULL when out of memory. */
static md_finding *add_leak(const md_sample_rank *r, const md_held_growth *g, double per,
                            md_finding **out, size_t *n, size_t *cap)
{
    md_finding *f = add(out, n, cap, "leak",
                        g->sum >= 0.25 * r->indicators.maximum_peak_allocated_mib ? MD_SEV_CRITICAL
                                                                                  : MD_SEV_WARNING,
                        per);
    if (f)
        f->rank = r->rank;
    return f;
}

/* Bytes outside PyTorch's caching allocator after sample s: the
 * driver-level trace's live total (drv, per sample) less PyTorch's
 * reserved memory. */
static double outside_mib(const md_sample_rank *r, const uint64_t *drv, const md_sample *s)
{
    return s ? (double)drv[s - r->samples] / 1048576.0 - s->reserved_mib : -INFINITY;
}

/* The library holding the most through the driver at the end, outside
 * PyTorch's caching allocator, as the finding's sites; its name in *top. */
static void outside_sites(const md_sample_rank *r, md_finding *f, char *top, size_t n)
{
    md_driver_stats st;
    md_err err;
    top[0] = 0;
    if (md_driver_analyze(&r->driver, -1, &st, &err))
        return;
    const md_driver_use *best = NULL;
    for (size_t i = 0; i < st.nuse; i++) {
        const md_driver_use *u = &st.use[i];
        if (md_driver_is_torch_allocator(u->caller) || !u->at_end)
            continue;
        best = !best || u->at_end > best->at_end ? u : best;
        driver_site(f, u, u->at_end);
    }
    if (best) {
        char label[160];
        caller_label(label, sizeof label, best);
        md_fsay(top, n, "%s", best->caller);
        MD_EVIDENCE(f, "still allocated through the CUDA driver at the end, outside PyTorch's "
                    "caching allocator: %.1f MiB by %s in %zu calls", md_mib(best->at_end), label,
                    best->allocs);
    }
    md_driver_stats_free(&st);
}

/* A leak outside PyTorch's caching allocator: the memory held there after
 * each iteration's end (outside_mib) grows as the leak rule's would (a C
 * extension's cudaMalloc never freed). Needs the driver-level trace. */
static void outside_leak(const md_sample_rank *r, const iterations *it, md_finding **out,
                         size_t *n, size_t *cap)
{
    uint64_t *drv = md_driver_at_samples(r);
    if (!drv)
        return;
    double thr = fmax(1.0, 0.002 * r->indicators.maximum_peak_allocated_mib), first = 0, end = 0;
    md_held_growth g = MD_HELD_GROWTH_INIT;
    for (size_t j = 1; j < it->n && !g.fell; j++) {
        double a = outside_mib(r, drv, find(r, iteration_end(it, j - 1), MD_SP_AFTER_CLEAR_GRADIENTS));
        double b = outside_mib(r, drv, find(r, iteration_end(it, j), MD_SP_AFTER_CLEAR_GRADIENTS));
        first = j == 1 ? a : first;
        end = b;
        md_held_growth_add(&g, a == -INFINITY || b == -INFINITY ? -INFINITY : b - a, thr);
    }
    free(drv);
    if (!md_held_growth_leak(&g))
        return;
    const char *unit = it->period > 1 ? "iteration" : "step";
    size_t nd = it->n - 1;
    double per = g.sum / (double)nd;
    md_finding *f = add_leak(r, &g, per, out, n, cap);
    if (!f)
        return;
    MD_EVIDENCE(f, "outside PyTorch's caching allocator (the driver-level trace's live total less "
                "PyTorch's reserved memory) after clearing gradients: %.1f MiB after the first "
                "%s, %.1f MiB after the last, growing in %zu of %zu %ss", first, unit, end, g.ups,
                nd, unit);
    char top[128];
    outside_sites(r, f, top, sizeof top);
    md_fsay(f->summary, sizeof f->summary, "memory outside PyTorch's allocator grows by %.1f MiB "
            "a %s and is never freed%s%s", per, unit, top[0] ? ": allocated by " : "", top);
    md_fsay(f->advice, sizeof f->advice,
        "Memory allocated outside PyTorch (a C/CUDA extension, ctypes, CuPy, a library's own "
        "buffers) is kept every %s: free it (cudaFree) when done, or allocate it through PyTorch "
        "(torch.empty(..., device='cuda')) so the caching allocator owns and reuses it. "
        "Snapshots cannot see it. About %.1f MiB per %s.", unit, per, unit);
}

static void leak(const md_sample_rank *r, md_finding **out, size_t *n, size_t *cap)
{
    int last = max_step(r);
    if (last + 1 < 3)
        return;
    iterations it = iterations_of(r, last);
    if (it.n < 3)
        return;
    const char *unit = it.period > 1 ? "iteration" : "step";
    int follows_inputs;
    double thr = fmax(1.0, 0.002 * r->indicators.maximum_peak_allocated_mib);
    md_held_growth g = growth_of(r, &it, thr, &follows_inputs);
    size_t nd = it.n - 1;
    if (!md_held_growth_leak(&g)) {
        double steady = steady_growth(r, &it);
        if (md_small_leak_said(steady))
            small_leak(r, &it, steady, thr, out, n, cap);
        else
            outside_leak(r, &it, out, n, cap);
        return;
    }
    if (follows_inputs || state_growth(r, &it, thr))
        return;
    double per = g.sum / (double)nd;
    md_finding *f = add_leak(r, &g, per, out, n, cap);
    if (!f)
        return;
    if (g.ups == nd)
        md_fsay(f->summary, sizeof f->summary,
            "memory grows by %.1f MiB every %s and is never freed", per, unit);
    else
        md_fsay(f->summary, sizeof f->summary, "memory grows in %zu of %zu %ss, %.1f MiB a %s on "
                "average, and is never freed", g.ups, nd, unit, per, unit);
    if (it.period > 1)
        MD_EVIDENCE(f, "%zu optimizers step in turn (the capture numbers them by their first "
                    "step): each iteration is %zu optimizer steps, and memory is compared from "
                    "one iteration's end to the next", distinct_optimizers(&it), it.period);
    if (g.ups == nd)
        MD_EVIDENCE(f, "allocated after clearing gradients grows in every one of %zu %ss: %.1f MiB "
                    "per %s, %.1f MiB in total", nd, unit, per, unit, g.sum);
    else
        MD_EVIDENCE(f, "allocated after clearing gradients grows in %zu of %zu %ss and never falls, "
                    "the last time in the run's last third: %.1f MiB in total", g.ups, nd, unit,
                    g.sum);
    MD_EVIDENCE(f, "samples only: an allocator snapshot of the same run names the sites");
    char hint[sizeof r->capture.snapshot + 128];
    md_fsay(f->advice, sizeof f->advice,
        "%s; typical causes are a loss kept with its graph (store loss.item()) or tensors "
        "appended to a list every step. About %.1f MiB per %s.", snapshot_hint(r, hint,
        sizeof hint), per, unit);
}

static void oom(const md_sample_rank *r, md_finding **out, size_t *n, size_t *cap)
{
    if (!r->has_capture || !r->capture.ooms)
        return;
    const md_capture_info *ci = &r->capture;
    double req = (double)ci->oom_requested / 1048576.0, fr = (double)ci->oom_device_free / 1048576.0;
    double lim = (double)ci->oom_limit / 1048576.0;
    size_t went_on = ci->steps_after_oom;
    md_finding *f = add(out, n, cap, "oom", went_on ? MD_SEV_WARNING : MD_SEV_CRITICAL, req);
    if (!f)
        return;
    f->rank = r->rank;
    const char *caught = went_on ? " (caught: the job went on)" : "";
    if (ci->oom_limit && r->device_total_mib > 0 && lim < 0.95 * r->device_total_mib)
        md_fsay(f->summary, sizeof f->summary,
            "out of memory%s: a request for %.1f MiB failed at the process's limit of %.1f MiB "
            "(a memory fraction), with %.1f MiB still free on the device", caught, req, lim, fr);
    else
        md_fsay(f->summary, sizeof f->summary,
            "out of memory%s: a request for %.1f MiB failed with %.1f MiB free on the device",
            caught, req, fr);
    MD_EVIDENCE(f, "%zu out-of-memory event%s recorded by the allocator's OOM observer%s", ci->ooms,
       ci->ooms == 1 ? "" : "s", ci->ooms > 1 ? " (this is the last)" : "");
    if (went_on)
        MD_EVIDENCE(f, "%zu step%s ran after the last one: the error was caught and the work "
                    "tried again, smaller or after freeing memory", went_on,
                    went_on == 1 ? "" : "s");
    const md_sample *before = NULL; /* the last phase point before the error */
    for (size_t i = 0; i < r->nsamples && ci->oom_time_ns; i++)
        if (r->samples[i].time_ns <= ci->oom_time_ns && r->samples[i].phase != MD_SP_OTHER)
            before = &r->samples[i];
    if (before)
        MD_EVIDENCE(f, "the last phase point before it: %s (%.1f MiB allocated); the error came "
                    "in the phase after", phase_at(before, (char[96]){0}, 96),
                    before->allocated_mib);
    if (ci->snapshot[0] && !strcmp(ci->snapshot_reason, "oom"))
        MD_EVIDENCE(f, "snapshot written at the failure: %s", ci->snapshot);
    else if (ci->snapshot[0])
        MD_EVIDENCE(f, "the last snapshot written (%s): %s",
                    ci->snapshot_reason[0] ? ci->snapshot_reason : "no reason given", ci->snapshot);
    if (ci->snapshot[0]) /* the path is the one it was written to: the run may have moved */
        md_fsay(f->advice, sizeof f->advice,
            "The snapshot this run wrote (%s; memdiag diagnose on the run's directory reads it "
            "beside this file) shows what was live by site and category, and its oom finding "
            "the cause.", file_name(ci->snapshot));
    else
        md_fsay(f->advice, sizeof f->advice,
            "No snapshot was written: record one (memdiag run writes one per rank, at the "
            "error too) to see what was live by site and category.");
}

int md_diagnose_samples(const md_sample_rank *r, md_finding **out, size_t *n, md_err *err)
{
    size_t cap = 0;
    (void)err;
    *out = NULL;
    *n = 0;
    oom(r, out, n, &cap);
    leak(r, out, n, &cap);
    non_framework(r, out, n, &cap);
    return MD_OK;
}

/* A rank to compare: its process's own device (a process's further
 * devices, DataParallel's or a model split's, are not ranks), and not a
 * helper process (a DataLoader worker). */
static int is_rank(const md_sample_rank *r)
{
    return !r->further_device && !r->helper;
}

/* Two processes that both say they are one rank (a sweep's processes
 * started without RANK) are not one job's ranks: nothing to compare. */
static int one_job(const md_sample_rank *r, size_t nr)
{
    for (size_t i = 0; i < nr; i++)
        for (size_t j = i + 1; j < nr; j++)
            if (is_rank(&r[i]) && is_rank(&r[j]) && r[i].rank == r[j].rank && r[i].pid &&
                r[j].pid && r[i].pid != r[j].pid)
                return 0;
    return 1;
}

static int imbalance(const md_sample_rank *r, size_t nr, md_finding **out, size_t *n,
                     size_t *capp)
{
    size_t hi = 0, lo = 0;
    while (hi < nr && !is_rank(&r[hi]))
        hi++;
    if (hi >= nr || !one_job(r, nr))
        return MD_OK;
    lo = hi;
    for (size_t i = hi + 1; i < nr; i++) {
        if (!is_rank(&r[i]))
            continue;
        if (r[i].indicators.maximum_peak_allocated_mib > r[hi].indicators.maximum_peak_allocated_mib)
            hi = i;
        if (r[i].indicators.maximum_peak_allocated_mib < r[lo].indicators.maximum_peak_allocated_mib)
            lo = i;
    }
    double ph = r[hi].indicators.maximum_peak_allocated_mib;
    double pl = r[lo].indicators.maximum_peak_allocated_mib;
    double diff = ph - pl;
    if (hi == lo || pl <= 0 || diff < 16 || diff < 0.10 * pl)
        return MD_OK;
    md_finding *f = add(out, n, capp, "rank_imbalance", diff >= 0.3 * pl ? MD_SEV_WARNING
                                                                       : MD_SEV_INFO, diff);
    if (!f)
        return MD_E_NOMEM;
    char h[24], l[24];
    snprintf(h, sizeof h, "rank %d", r[hi].rank);
    snprintf(l, sizeof l, "rank %d", r[lo].rank);
    md_say_above(f->summary, sizeof f->summary, h, diff, l, pl);
    MD_EVIDENCE(f, "peak allocated: rank %d %.1f MiB, rank %d %.1f MiB", r[hi].rank, ph, r[lo].rank, pl);
    /* the first sample where they part by a quarter of the final gap */
    for (size_t i = 0; i < r[hi].nsamples; i++) {
        const md_sample *a = &r[hi].samples[i];
        const md_sample *b = find(&r[lo], a->step, a->phase);
        if (b && a->allocated_mib - b->allocated_mib >= diff / 4) {
            f->phase = a->phase == MD_SP_AFTER_FORWARD            ? MD_PHASE_FORWARD
                       : a->phase == MD_SP_AFTER_BACKWARD         ? MD_PHASE_BACKWARD
                       : a->phase == MD_SP_AFTER_OPTIMIZER_STEP   ? MD_PHASE_OPTIMIZER
                       : a->phase == MD_SP_AFTER_CLEAR_GRADIENTS  ? MD_PHASE_ZERO_GRAD : -1;
            MD_EVIDENCE(f, "they part at step %d %s: rank %d holds %.1f MiB more", a->step,
               md_sample_phase_name(a->phase), r[hi].rank, a->allocated_mib - b->allocated_mib);
            break;
        }
    }
    MD_EVIDENCE(f, "largest forward increase: rank %d %.1f MiB, rank %d %.1f MiB", r[hi].rank,
       r[hi].indicators.largest_forward_increase_mib, r[lo].rank,
       r[lo].indicators.largest_forward_increase_mib);
    md_fsay(f->advice, sizeof f->advice,
        "Look for work only rank %d does in that phase: a larger local batch, longer sequences, "
        "rank-0 logging or evaluation. Balanced, rank %d would need about %.1f MiB less.",
        r[hi].rank, r[hi].rank, diff);
    return MD_OK;
}

/* A process's further device that is another rank's own: memory put on
 * another rank's GPU (docs/diagnosis.md, rank_imbalance). */
static int strays(const md_sample_rank *r, size_t nr, md_finding **out, size_t *n, size_t *cap)
{
    for (size_t i = 0; i < nr; i++) {
        const md_sample_rank *w = &r[i], *own = NULL, *owner = NULL;
        double alloc = w->indicators.maximum_peak_allocated_mib, nvml = -1;
        for (size_t k = 0; k < w->nsamples; k++)
            nvml = fmax(nvml, w->samples[k].process_used_mib);
        double mib = fmax(alloc, nvml); /* NVML's counts the CUDA context too */
        if (!w->further_device || mib <= 0)
            continue;
        for (size_t k = 0; k < nr; k++) {
            if (!is_rank(&r[k]) || !r[k].has_capture)
                continue;
            if (r[k].rank == w->rank)
                own = &r[k];
            else if (r[k].device == w->device)
                owner = &r[k];
        }
        if (!own || !owner)
            continue;
        md_finding *f = add(out, n, cap, "rank_imbalance", mib >= 16 ? MD_SEV_WARNING : MD_SEV_INFO, mib);
        if (!f)
            return MD_E_NOMEM;
        md_stray w2 = {w->rank, own->device, w->device, owner->rank,
                       md_bytes_of_mib(owner->indicators.maximum_peak_allocated_mib)};
        md_stray_say(f, &w2, mib);
        if (nvml >= 0)
            MD_EVIDENCE(f, "NVML: rank %d's process uses %.1f MiB of cuda:%d, %.1f MiB of it "
                        "PyTorch allocations, the rest its CUDA context there%s", w->rank, nvml,
                        w->device, alloc, alloc > 0 ? "" : " (a CUDA call on that device before "
                        "set_device, or a collective without device_id)");
    }
    return MD_OK;
}

int md_diagnose_sample_ranks(const md_sample_rank *r, size_t nr, md_finding **out, size_t *n,
                             md_err *err)
{
    size_t cap = 0;
    (void)err;
    *out = NULL;
    *n = 0;
    int rc = imbalance(r, nr, out, n, &cap);
    if (!rc)
        rc = strays(r, nr, out, n, &cap);
    if (!rc)
        rc = md_shared_gpus(r, nr, out, n, &cap);
    md_rank_growth *g = calloc(nr ? nr : 1, sizeof *g);
    if (!g)
        return MD_E_NOMEM;
    size_t ng = 0;
    int job = one_job(r, nr);
    for (size_t i = 0; i < nr && job; i++) /* ranks as imbalance takes them */
        if (is_rank(&r[i]) && r[i].indicators.valid)
            g[ng++] = (md_rank_growth){r[i].rank, r[i].indicators.between_step_growth_mib};
    if (!rc)
        rc = md_lone_growth(g, ng, out, n, &cap);
    free(g);
    return rc;
}

/* validate.c - a prediction next to a measured step. The measured side
 * comes from the replay's categories (docs/diagnosis.md), taken at the
 * start of the last complete steady-state step, where weights, optimizer
 * state and workspaces are all that should be live. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "../util/util.h"

const char *md_validation_name(int c)
{
    static const char *const names[] = {"weights", "optimizer_state", "library_workspaces",
                                        "floor", "gradients", "peak"};
    return c >= 0 && c < MD_VAL_COUNT ? names[c] : "?";
}

/* The last step that is not the first: the first creates optimizer state. */
static const md_step *steady_step(const md_analysis *a, md_err *err)
{
    size_t n;
    const md_step *st = md_analysis_steps(a, &n);
    for (size_t i = n; i-- > 0;)
        if (st[i].number >= 1 && st[i].fwd_start >= 0)
            return &st[i];
    md_err_set(err, MD_E_SCHEMA, -1,
               n ? "only the first training step was recorded; validation needs a later one "
                   "(the first creates the optimizer state)"
                 : "no training step found in the trace");
    return NULL;
}

static int categories_at(const md_analysis *a, long index, uint64_t cat[MD_CAT_COUNT], md_err *err)
{
    md_site *sites = NULL;
    size_t n = 0;
    int rc = md_sites_at(a, index, &sites, &n, cat, err);
    free(sites);
    return rc;
}

int md_predict_validate(const md_prediction *p, const md_replay *r, const md_analysis *a,
                        md_validation *out, md_err *err)
{
    const md_step *s = steady_step(a, err);
    if (!s)
        return MD_E_SCHEMA;
    uint64_t start[MD_CAT_COUNT], end[MD_CAT_COUNT];
    int rc = categories_at(a, s->fwd_start, start, err);
    if (!rc)
        rc = categories_at(a, s->after_backward, end, err);
    if (rc)
        return rc;
    *out = (md_validation){.step = s->number, .measured_peak = s->peak,
                           .grads_at_start = start[MD_CAT_GRADIENT]};
    out->predicted[MD_VAL_WEIGHTS] = p->weights;
    out->predicted[MD_VAL_OPTIMIZER_STATE] = p->optimizer_state;
    out->predicted[MD_VAL_WORKSPACE] = p->workspace;
    out->predicted[MD_VAL_FLOOR] = p->floor;
    out->predicted[MD_VAL_GRADIENTS] = p->gradients;
    out->measured[MD_VAL_WEIGHTS] = start[MD_CAT_PARAMETER];
    out->measured[MD_VAL_OPTIMIZER_STATE] = start[MD_CAT_OPTIMIZER_STATE];
    out->measured[MD_VAL_WORKSPACE] = start[MD_CAT_WORKSPACE];
    out->measured[MD_VAL_FLOOR] = md_replay_at(r, s->fwd_start).allocated;
    out->measured[MD_VAL_GRADIENTS] = end[MD_CAT_GRADIENT];
    out->predicted[MD_VAL_PEAK] = p->peak_known ? p->peak : 0;
    out->measured[MD_VAL_PEAK] = s->peak;
    return MD_OK;
}

/* MiB from a report as bytes; 0 (unknown) for what no device can hold. */
static uint64_t mib_bytes(double mib)
{
    return isfinite(mib) && mib > 0 && mib < 1e12 ? (uint64_t)(mib * 1048576.0) : 0;
}

/* The last step after the first with a complete set of samples: its start
 * (the previous step's after_clear_gradients) and its peak. */
int md_predict_validate_samples(const md_prediction *p, const md_sample_rank *r,
                                md_validation *out, md_err *err)
{
    int last = -1;
    for (size_t i = 0; i < r->nsamples; i++)
        if (r->samples[i].phase == MD_SP_AFTER_CLEAR_GRADIENTS && r->samples[i].step >= 1)
            last = r->samples[i].step > last ? r->samples[i].step : last;
    if (last < 1)
        return md_err_set(err, MD_E_SCHEMA, -1, "no complete training step after the first in "
                                                "the samples (the first creates the optimizer state)");
    double start = -1, peak = 0;
    for (size_t i = 0; i < r->nsamples; i++) {
        const md_sample *x = &r->samples[i];
        if (x->step == last - 1 && x->phase == MD_SP_AFTER_CLEAR_GRADIENTS)
            start = x->allocated_mib;
        if (x->step == last && x->peak_allocated_mib > peak)
            peak = x->peak_allocated_mib;
    }
    memset(out, 0, sizeof *out);
    out->step = last;
    out->predicted[MD_VAL_WEIGHTS] = p->weights;
    out->predicted[MD_VAL_OPTIMIZER_STATE] = p->optimizer_state;
    out->predicted[MD_VAL_WORKSPACE] = p->workspace;
    out->predicted[MD_VAL_FLOOR] = p->floor;
    out->predicted[MD_VAL_GRADIENTS] = p->gradients;
    out->predicted[MD_VAL_PEAK] = p->peak_known ? p->peak : 0;
    out->measured[MD_VAL_FLOOR] = mib_bytes(start);
    out->measured[MD_VAL_PEAK] = mib_bytes(peak);
    out->measured_peak = out->measured[MD_VAL_PEAK];
    out->from_samples = 1;
    return MD_OK;
}

int md_validation_measured(const md_validation *v, int c)
{
    return !v->from_samples || c == MD_VAL_FLOOR || c == MD_VAL_PEAK;
}

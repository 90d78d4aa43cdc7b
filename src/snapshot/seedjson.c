/* seedjson.c - reads the seed script's JSON report (memory_diagnostics.py):
 * per rank, counters sampled after each phase of each step. Parsing is
 * jansson's; this file maps the document onto md_sample_rank and checks
 * every field it uses, naming the key path when one is wrong. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include "../util/util.h"

static const char *const phase_names[] = {
    "after_model", "after_optimizer_creation", "after_input", "after_forward",
    "after_backward", "after_optimizer_step", "after_clear_gradients"};

const char *md_sample_phase_name(md_sample_phase p)
{
    return p < MD_SP_OTHER ? phase_names[p] : "other";
}

static int phase_of(const char *name)
{
    for (int i = 0; i < MD_SP_OTHER; i++)
        if (!strcmp(name, phase_names[i]))
            return i;
    return MD_SP_OTHER;
}

static int num(json_t *o, const char *key, double *out)
{
    json_t *v = json_object_get(o, key);
    if (!json_is_number(v))
        return 0;
    *out = json_number_value(v);
    return 1;
}

static int read_sample(json_t *js, md_sample *s, const char *path, size_t r, size_t i,
                       md_err *err)
{
    json_t *ph = json_object_get(js, "phase"), *st = json_object_get(js, "step");
    if (!json_is_object(js) || !json_is_string(ph) || !json_is_integer(st) ||
        !num(js, "allocated_mib", &s->allocated_mib) || !num(js, "reserved_mib", &s->reserved_mib) ||
        !num(js, "peak_allocated_mib", &s->peak_allocated_mib))
        return md_err_set(err, MD_E_SCHEMA, -1,
                          "rank_reports[%zu].samples[%zu] lacks step, phase, allocated_mib, "
                          "reserved_mib or peak_allocated_mib", r, i);
    (void)path;
    s->step = (int)json_integer_value(st);
    s->phase = phase_of(json_string_value(ph));
    if (!num(js, "device_used_mib", &s->device_used_mib))
        s->device_used_mib = -1;
    s->process_used_mib = -1;
    return MD_OK;
}

static int read_rank(json_t *jr, md_sample_rank *r, const char *path, size_t ri, md_err *err)
{
    json_t *samples = json_object_get(jr, "samples");
    if (!json_is_object(jr) || !json_is_array(samples))
        return md_err_set(err, MD_E_SCHEMA, -1, "rank_reports[%zu] has no 'samples' list", ri);
    json_t *rank = json_object_get(jr, "rank"), *lr = json_object_get(jr, "local_rank");
    r->rank = json_is_integer(rank) ? (int)json_integer_value(rank) : (int)ri;
    r->local_rank = json_is_integer(lr) ? (int)json_integer_value(lr) : r->rank;
    r->device = -1;
    snprintf(r->source, sizeof r->source, "%s", path);
    json_t *gpu = json_object_get(jr, "gpu_name");
    if (json_is_string(gpu))
        snprintf(r->gpu, sizeof r->gpu, "%s", json_string_value(gpu));
    num(jr, "device_total_mib", &r->device_total_mib);
    r->nsamples = json_array_size(samples);
    r->samples = calloc(r->nsamples ? r->nsamples : 1, sizeof *r->samples);
    if (!r->samples)
        return md_err_set(err, MD_E_NOMEM, -1, "out of memory");
    for (size_t i = 0; i < r->nsamples; i++) {
        int rc = read_sample(json_array_get(samples, i), &r->samples[i], path, ri, i, err);
        if (rc)
            return rc;
    }
    return MD_OK;
}

static int load_root(json_t *root, const json_error_t *je, const char *path,
                     md_sample_rank **out, size_t *n, md_err *err);

int md_seedjson_load(const char *path, md_sample_rank **out, size_t *n, md_err *err)
{
    json_error_t je;
    md_err_file(err, path);
    json_t *root = json_load_file(path, 0, &je);
    return load_root(root, &je, path, out, n, err);
}

int md_seedjson_load_mem(const void *data, size_t len, const char *name, md_sample_rank **out,
                         size_t *n, md_err *err)
{
    json_error_t je;
    md_err_file(err, name);
    json_t *root = json_loadb(data, len, 0, &je);
    return load_root(root, &je, name, out, n, err);
}

static int load_root(json_t *root, const json_error_t *je, const char *path,
                     md_sample_rank **out, size_t *n, md_err *err)
{
    *out = NULL;
    *n = 0;
    if (!root)
        return md_err_set(err, MD_E_FORMAT, (int64_t)je->position,
                          "not valid JSON (line %d, column %d): %s", je->line, je->column, je->text);
    json_t *reps = json_object_get(root, "rank_reports");
    if (!json_is_array(reps) || !json_array_size(reps)) {
        json_decref(root);
        return md_err_set(err, MD_E_SCHEMA, -1,
                          "not a seed-script report: no 'rank_reports' list");
    }
    size_t nr = json_array_size(reps);
    md_sample_rank *r = calloc(nr, sizeof *r);
    int rc = r ? MD_OK : md_err_set(err, MD_E_NOMEM, -1, "out of memory");
    for (size_t i = 0; !rc && i < nr; i++)
        rc = read_rank(json_array_get(reps, i), &r[i], path, i, err);
    json_decref(root);
    if (rc) {
        md_sample_ranks_free(r, nr);
        return rc;
    }
    *out = r;
    *n = nr;
    return MD_OK;
}

void md_sample_ranks_free(md_sample_rank *r, size_t n)
{
    for (size_t i = 0; r && i < n; i++)
        md_sample_rank_clear(&r[i]);
    free(r);
}

void md_sample_rank_clear(md_sample_rank *r)
{
    free(r->samples);
    md_driver_log_free(&r->driver);
    free(r->step_optimizers);
    free(r->others);
    r->samples = NULL;
    r->step_optimizers = NULL;
    r->others = NULL;
    r->nsamples = r->nstep_optimizers = r->nothers = 0;
}

void md_driver_log_free(md_driver_log *d)
{
    free(d->ev);
    free(d->callers);
    d->ev = NULL;
    d->callers = NULL;
    d->n = d->ncallers = 0;
}

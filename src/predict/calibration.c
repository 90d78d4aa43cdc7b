/* calibration.c - the machine-dependent constants of predict, from a file
 * `memdiag probe` wrote or the shipped defaults. The defaults are the
 * probe's own figures on the H200 (tests/data/predict/calibration-h200.json).
 * The context, 769 MiB, is also what a process running every grid model in
 * four precisions held outside the allocator (bench/context_growth.py:
 * 773 MiB, cudaMemGetInfo and NVML's per-process figure agree); what
 * `memdiag run` recorded as 1368 MiB counted the driver's 615 MiB
 * reservation, which nvidia-smi leaves out of "used". */
#include <jansson.h>
#include <math.h>
#include <string.h>
#include "../util/util.h"
#include "json_error.h"

#define MIB (1ULL << 20)

void md_calibration_default(md_calibration *c)
{
    memset(c, 0, sizeof *c);
    snprintf(c->gpu, sizeof c->gpu, "NVIDIA H200");
    snprintf(c->torch, sizeof c->torch, "2.11.0+cu130");
    c->context = 806158336; /* 768.8 MiB */
    c->workspace = 64 * MIB;
    c->loss_per_logit = 12.0;
    c->math_per_score = 4.0;
}

/* A byte count in [0, 1 TiB], or a bytes-per-element figure in [0, 64]. */
static int get_bytes(json_t *root, const char *key, uint64_t *out, md_err *err)
{
    json_t *v = json_object_get(root, key);
    if (!v)
        return MD_OK;
    if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > (1LL << 40))
        return md_err_set(err, MD_E_SCHEMA, -1, "%s: want a byte count (0 to 1 TiB)", key);
    *out = (uint64_t)json_integer_value(v);
    return MD_OK;
}

static int get_ratio(json_t *root, const char *key, double *out, md_err *err)
{
    json_t *v = json_object_get(root, key);
    if (!v)
        return MD_OK;
    double x = json_number_value(v);
    if (!json_is_number(v) || !isfinite(x) || x < 0 || x > 64)
        return md_err_set(err, MD_E_SCHEMA, -1, "%s: want bytes per element (0 to 64)", key);
    *out = x;
    return MD_OK;
}

static void get_text(json_t *root, const char *key, char *out, size_t n)
{
    json_t *v = json_object_get(root, key);
    if (json_is_string(v))
        snprintf(out, n, "%s", json_string_value(v));
}

static int from_root(json_t *root, const json_error_t *je, md_calibration *c, md_err *err)
{
    md_calibration_default(c);
    if (!root)
        return md_json_load_error(je, err);
    int rc = MD_OK;
    if (!json_is_object(root) || !json_is_integer(json_object_get(root, "memdiag_calibration")))
        rc = md_err_set(err, MD_E_SCHEMA, -1, "not a memdiag calibration file (no "
                                              "\"memdiag_calibration\" version)");
    if (!rc)
        rc = get_bytes(root, "cuda_context_bytes", &c->context, err);
    if (!rc)
        rc = get_bytes(root, "cublas_workspace_bytes", &c->workspace, err);
    if (!rc)
        rc = get_ratio(root, "loss_bytes_per_logit", &c->loss_per_logit, err);
    if (!rc)
        rc = get_ratio(root, "sdpa_math_bytes_per_score", &c->math_per_score, err);
    if (!rc) {
        get_text(root, "gpu", c->gpu, sizeof c->gpu);
        get_text(root, "torch", c->torch, sizeof c->torch);
    }
    json_decref(root);
    return rc;
}

int md_calibration_load_mem(const void *data, size_t n, const char *name, md_calibration *c,
                            md_err *err)
{
    json_error_t je;
    md_err_file(err, name);
    return from_root(json_loadb(data, n, 0, &je), &je, c, err);
}

int md_calibration_load(const char *path, md_calibration *c, md_err *err)
{
    json_error_t je;
    md_err_file(err, path);
    return from_root(json_load_file(path, 0, &je), &je, c, err);
}

/* predict.c - what a training step's memory cannot go below: weights,
 * optimizer state and cuBLAS workspaces, and the gradients that join them
 * by the end of backward. Checked against measured steady-state steps
 * (bench/data/predict_grid_h200.jsonl): allocated at the start of a step
 * is this floor plus 1-54 MiB. Activations and the loss over the logits
 * are architecture- and backend-dependent (fp32 takes SDPA's math path,
 * with a batch*heads*seq^2 term; bf16 the flash path) and are not modeled
 * yet, so no peak is claimed. */
#include <string.h>
#include "../util/util.h"

int md_predict(const md_model *m, int64_t batch, int64_t seq, md_optimizer opt,
               md_precision prec, md_prediction *out, md_err *err)
{
    if (batch <= 0 || seq <= 0)
        return md_err_set(err, MD_E_ARG, -1, "batch and sequence must be positive");
    if (m->positions > 0 && seq > m->positions && strcmp(m->type, "seed"))
        return md_err_set(err, MD_E_ARG, -1, "sequence %lld exceeds the model's %lld positions",
                          (long long)seq, (long long)m->positions);
    memset(out, 0, sizeof *out);
    out->params = md_model_params(m);
    uint64_t p = (uint64_t)out->params;
    uint64_t pb = prec == MD_BF16_PURE ? 2 : 4; /* parameter (and state) dtype */
    out->weights = p * pb;
    out->gradients = p * pb;
    int states = opt == MD_OPT_ADAM || opt == MD_OPT_ADAMW ? 2 : opt == MD_OPT_SGD_MOMENTUM ? 1 : 0;
    out->optimizer_state = (uint64_t)states * p * pb;
    /* cuBLAS: one 32 MiB workspace per handle and stream on Hopper; the
     * forward and the autograd thread use two (measured on every H200 run) */
    out->workspace = 2ULL * 32 * 1048576;
    out->floor = out->weights + out->optimizer_state + out->workspace;
    out->floor_with_grads = out->floor + out->gradients;
    /* Device memory outside the allocator once kernels and cuBLAS are
     * loaded: 1367.9 MiB in every single-process run on the H200 (torch
     * 2.11, CUDA 13, driver 580; `memdiag diagnose tests/data/runs/hf`,
     * non_framework), 618 MiB of it at CUDA init; DDP's NCCL adds ~850. */
    out->context = 1368ULL * 1048576;
    out->peak_known = 0;
    return MD_OK;
}

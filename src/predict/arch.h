/* arch.h - per-architecture layouts for predict (internal). */
#ifndef MD_ARCH_H
#define MD_ARCH_H
#include "../util/util.h"

typedef enum md_arch_kind {
    MD_ARCH_LLAMA, MD_ARCH_QWEN3, MD_ARCH_PHI3, MD_ARCH_GEMMA, MD_ARCH_GEMMA2, MD_ARCH_GPT2,
    MD_ARCH_SEED
} md_arch_kind;

/* Saved bytes of one layer: per token; attention scores per token x key
 * position (the math path's weights, priced by the calibration); bytes per
 * batch x query x key (the float mask a masked layer keeps). */
typedef struct md_act_cost {
    double tok, quad, mask;
} md_act_cost;

md_arch_kind md_arch_of(const md_model *m);
void md_arch_params(const md_model *m, void (*emit)(void *, int64_t, int64_t), void *ctx);
md_act_cost md_arch_layer(const md_model *m, md_precision p, int masked);
int64_t md_arch_masked_layers(const md_model *m, int64_t seq);
double md_arch_extra(const md_model *m, md_precision p);
uint64_t md_arch_weight_copies(const md_model *m, md_precision p);
double md_arch_logit_bytes(const md_model *m, md_precision p);
#endif

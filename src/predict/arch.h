/* arch.h - per-architecture layouts for predict (internal). */
#ifndef MD_ARCH_H
#define MD_ARCH_H
#include "../util/util.h"

typedef enum md_arch_kind {
    MD_ARCH_LLAMA, MD_ARCH_QWEN3, MD_ARCH_PHI3, MD_ARCH_GEMMA, MD_ARCH_GEMMA2, MD_ARCH_GEMMA3,
    MD_ARCH_OLMO2, MD_ARCH_GPT2, MD_ARCH_NEOX, MD_ARCH_OPT, MD_ARCH_PHI, MD_ARCH_MIXTRAL,
    MD_ARCH_QWEN3_MOE, MD_ARCH_QWEN2_MOE, MD_ARCH_SEED
} md_arch_kind;

/* Saved bytes of one layer: per token; attention scores per token x key
 * position (the math path's weights, priced by the calibration); bytes per
 * batch x query x key (the float mask a masked layer keeps). */
typedef struct md_act_cost {
    double tok, quad, mask;
} md_act_cost;

md_arch_kind md_arch_of(const md_model *m);
/* Mixtral and Qwen's mixtures of experts: routed experts in every layer. */
int md_arch_moe(md_arch_kind k);
/* Parameter tensors: emit(count, elements); all of them, those outside the
 * decoder layers (root), and n layers' worth. */
void md_arch_params(const md_model *m, void (*emit)(void *, int64_t, int64_t), void *ctx);
void md_arch_root_params(const md_model *m, void (*emit)(void *, int64_t, int64_t), void *ctx);
void md_arch_layer_tensors(const md_model *m, int64_t n,
                           void (*emit)(void *, int64_t, int64_t), void *ctx);
/* How a layer runs: a sliding-window mask, eager attention, LoRA targets
 * (0: full fine-tuning). */
typedef struct md_layer_opts {
    int masked, eager;
    unsigned lora;
} md_layer_opts;

md_act_cost md_arch_layer(const md_model *m, md_precision p, const md_layer_opts *o);
/* LoRA adapters: emit(count, elements) per A and B matrix; the targets a
 * model cannot have are refused (-1). */
int md_arch_lora_params(const md_model *m, int64_t rank, unsigned targets,
                        void (*emit)(void *, int64_t, int64_t), void *ctx);
/* Parameters of one decoder layer. */
int64_t md_arch_layer_params(const md_model *m);
/* Bytes of bf16 weight copies autocast keeps for one layer. */
uint64_t md_arch_layer_weight_copies(const md_model *m, md_precision p);
int64_t md_arch_masked_layers(const md_model *m, int64_t seq);
double md_arch_extra(const md_model *m, md_precision p, unsigned lora);
uint64_t md_arch_weight_copies(const md_model *m, md_precision p);
double md_arch_logit_bytes(const md_model *m, md_precision p);
#endif

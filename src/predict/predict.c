/* predict.c - the peak of a steady-state training step, before running it.
 *
 * A step's memory moves through a few moments, and the peak is the
 * highest of them (docs/predict-model.md):
 *   loss backward  start + every saved activation + the logits the output
 *                  keeps + the loss's fp32 log-softmax and its two
 *                  logits-sized gradients (12 bytes per logit element);
 *   last layer     the activations (with checkpointing: the layers'
 *                  inputs and one rebuilt layer), the lm_head gradient and
 *                  the layer's backward temporaries;
 *   first layer    the other layers' gradients, that layer's activations
 *                  and backward temporaries;
 *   end            start + all gradients (+ the dense embedding gradient
 *                  accumulated into a tied lm_head);
 *   optimizer      start + all gradients + the foreach temporaries (Adam,
 *                  AdamW: one parameter-sized sqrt of the second moment).
 * Every tensor is counted at the size PyTorch's caching allocator gives it.
 * LoRA freezes the base (only adapter gradients and state); DDP adds its
 * gradient buckets from construction on. */
#include <string.h>
#include "../util/util.h"
#include "arch.h"

#define MIB (1ULL << 20)

/* The block the caching allocator hands out for n bytes: 512-byte
 * rounding; a large request taking a fresh 2 MiB-rounded segment keeps the
 * whole segment when less than 1 MiB would be left over. */
static uint64_t block(uint64_t n)
{
    if (n == 0)
        return 0;
    uint64_t r = (n + 511) & ~511ULL;
    if (n < 10 * MIB)
        return r;
    uint64_t seg = (n + 2 * MIB - 1) & ~(2 * MIB - 1);
    return seg - r > MIB ? r : seg;
}

typedef struct { uint64_t bytes_per, total; int64_t elems; } param_sum;

static void add_params(void *ctx, int64_t count, int64_t elems)
{
    param_sum *s = ctx;
    s->total += (uint64_t)count * block((uint64_t)elems * s->bytes_per);
    s->elems += count * elems;
}

/* One tensor per parameter (weights, gradients, each optimizer state, the
 * foreach temporaries), each the block the allocator gives it. */
static uint64_t params_bytes(const md_model *m, uint64_t bytes_per)
{
    param_sum s = {bytes_per, 0, 0};
    md_arch_params(m, add_params, &s);
    return s.total;
}

const char *md_step_phase_name(md_step_phase p)
{
    static const char *const names[] = {"none", "loss backward", "backward, last layer",
                                        "backward, first layer", "end of backward",
                                        "optimizer step"};
    return p <= MD_PHASE_OPTIM ? names[p] : "?";
}

static uint64_t sum(const md_breakdown *b)
{
    return b->weights + b->gradients + b->optimizer_state + b->activations + b->logits +
           b->transient + b->workspace + b->inputs + b->buckets + b->rounding;
}

/* The candidate moments; each starts from the step's starting memory. */
typedef struct step_shape {
    uint64_t T, E, S;      /* tokens, logit elements, sequence */
    uint64_t loss;         /* the loss's fp32 log-softmax and two gradients */
    uint64_t acts;         /* saved for backward when the loss's backward runs */
    uint64_t top_acts;     /* ... when the last layer's backward runs */
    uint64_t first_acts;   /* ... when the first layer's backward runs */
    uint64_t layer_tmp;    /* a layer's backward temporaries */
    uint64_t head_grad, emb_grad, tied_tmp, opt_tmp;
    uint64_t first_grads;  /* the first layer's weight gradients (not made yet) */
    uint64_t logits_saved, logits_kept;
} step_shape;

static void candidates(const md_prediction *p, const step_shape *s, md_breakdown c[6])
{
    md_breakdown start = {.weights = p->weights, .optimizer_state = p->optimizer_state,
                          .workspace = p->workspace, .inputs = p->inputs,
                          .buckets = p->buckets};
    for (int i = 0; i < 6; i++)
        c[i] = start;
    c[MD_PHASE_LOSS_BACKWARD].activations = s->acts;
    c[MD_PHASE_LOSS_BACKWARD].logits = s->logits_saved + s->loss;
    c[MD_PHASE_BACKWARD_TOP].activations = s->top_acts;
    c[MD_PHASE_BACKWARD_TOP].logits = s->logits_kept;
    c[MD_PHASE_BACKWARD_TOP].gradients = s->head_grad;
    c[MD_PHASE_BACKWARD_TOP].transient = s->layer_tmp;
    c[MD_PHASE_BACKWARD_FIRST].activations = s->first_acts;
    c[MD_PHASE_BACKWARD_FIRST].logits = s->logits_kept;
    c[MD_PHASE_BACKWARD_FIRST].gradients = p->gradients > s->emb_grad + s->first_grads
                                               ? p->gradients - s->emb_grad - s->first_grads
                                               : 0;
    c[MD_PHASE_BACKWARD_FIRST].transient = s->layer_tmp;
    c[MD_PHASE_BACKWARD_END].gradients = p->gradients;
    c[MD_PHASE_BACKWARD_END].logits = s->logits_kept;
    c[MD_PHASE_BACKWARD_END].transient = s->tied_tmp;
    c[MD_PHASE_OPTIM].gradients = p->gradients;
    c[MD_PHASE_OPTIM].logits = s->logits_kept;
    c[MD_PHASE_OPTIM].transient = s->opt_tmp;
}

static uint64_t layer_bytes(const md_act_cost *c, int64_t batch, int64_t seq)
{
    double T = (double)batch * (double)seq;
    return (uint64_t)(c->tok * T + c->quad * T * (double)seq) +
           block((uint64_t)(c->mask * T * (double)seq));
}

/* One layer's backward: its MLP's gradients (4 x T x i), or where the
 * attention keeps B*H*S*S scores (the math path, eager), three such
 * tensors once the layer's MLP has traded its saved tensors for its
 * weight gradients (measured: llama at 4096 tokens, fp32). */
static uint64_t layer_temporaries(const md_model *m, const md_act_cost *layer, uint64_t T,
                                  uint64_t seq, uint64_t a, uint64_t pb, double per_score,
                                  int frozen)
{
    uint64_t i = (uint64_t)m->intermediate, h = (uint64_t)m->hidden;
    uint64_t mlp = 4 * block(T * i * a);
    if (layer->quad <= 0)
        return mlp;
    uint64_t attn = block((uint64_t)((double)m->heads * per_score * (double)T * (double)seq));
    uint64_t traded = (frozen ? 3 : 4) * T * i * a, grads = frozen ? 0 : 3 * h * i * pb;
    return 3 * attn + grads > traded + mlp ? 3 * attn + grads - traded : mlp;
}

/* trained: the bytes of what the optimizer updates (one foreach
 * temporary each for Adam/AdamW) */
static void shape_of(const md_model *m, const md_step_config *cfg, const md_calibration *cal,
                     uint64_t trained, step_shape *s)
{
    int64_t batch = cfg->batch, seq = cfg->seq;
    md_precision prec = cfg->precision;
    uint64_t T = (uint64_t)batch * (uint64_t)seq, h = (uint64_t)m->hidden;
    uint64_t pb = prec == MD_BF16_PURE ? 2 : 4, a = prec == MD_FP32 ? 4 : 2;
    int autocast = prec == MD_BF16_AUTOCAST || prec == MD_FP16_AUTOCAST;
    int64_t masked = cfg->eager ? 0 : md_arch_masked_layers(m, seq);
    unsigned lora = cfg->lora_rank > 0 ? cfg->lora_targets : 0;
    md_layer_opts plain = {0, cfg->eager, lora}, with_mask = {1, cfg->eager, lora};
    md_act_cost layer = md_arch_layer(m, prec, &plain);
    md_act_cost mlayer = md_arch_layer(m, prec, &with_mask);
    layer.quad *= cal->math_per_score, mlayer.quad *= cal->math_per_score;
    int seed = md_arch_of(m) == MD_ARCH_SEED; /* a classifier on token 0 */
    s->T = T, s->S = (uint64_t)seq;
    s->E = seed ? (uint64_t)batch * (uint64_t)m->classes : T * (uint64_t)m->vocab;
    /* three fp32 logits-sized tensors when the loss costs 12 bytes each */
    s->loss = 3 * block((uint64_t)(cal->loss_per_logit / 3 * (double)s->E));
    /* the last layer is masked only when all are (gemma2 ends on a full
     * one); the first is whenever any is (gemma2 starts on a sliding one) */
    const md_act_cost *top = masked == m->layers ? &mlayer : &layer;
    const md_act_cost *first = masked ? &mlayer : &layer;
    uint64_t copies = md_arch_layer_weight_copies(m, prec);
    uint64_t top_one = layer_bytes(top, batch, seq) + copies;
    uint64_t first_one = layer_bytes(first, batch, seq) + copies;
    uint64_t all = (uint64_t)(m->layers - masked) * layer_bytes(&layer, batch, seq) +
                   (uint64_t)masked * layer_bytes(&mlayer, batch, seq) +
                   (uint64_t)m->layers * copies;
    /* checkpointing keeps each layer's input and recomputes one layer at a
     * time inside backward */
    uint64_t inputs = cfg->checkpointing ? (uint64_t)m->layers * T * h * (pb == 2 ? 2 : 4) : 0;
    s->top_acts = cfg->checkpointing ? inputs + top_one : all;
    s->first_acts = first_one;
    uint64_t head_copy = autocast ? 2 * (uint64_t)(seed ? m->classes : m->vocab) * h : 0;
    s->acts = (cfg->checkpointing ? inputs : all) +
              (uint64_t)(md_arch_extra(m, prec, lora) * (double)T) + head_copy;
    if (masked) /* the boolean mask transformers builds, shared */
        s->acts += block((uint64_t)batch * (uint64_t)seq * (uint64_t)seq);
    if (cfg->eager) /* the additive causal mask eager attention builds */
        s->acts += block((uint64_t)batch * (uint64_t)seq * (uint64_t)seq * pb);
    /* the output keeps the logits; gemma2's soft-capping keeps its tanh */
    s->logits_kept = cfg->drop_outputs ? 0 : block(s->E * a);
    double saved = md_arch_logit_bytes(m, prec) - (cfg->drop_outputs ? (double)a : 0);
    s->logits_saved = block((uint64_t)(saved * (double)s->E));
    s->head_grad = lora ? 0 : block((uint64_t)(seed ? m->classes : m->vocab) * h * pb);
    /* made by the embedding's backward, last */
    s->emb_grad = lora ? 0 : m->tied ? 0 : seed ? block((uint64_t)m->vocab * h * pb) : s->head_grad;
    s->first_grads = lora ? 0 : (uint64_t)md_arch_layer_params(m) * pb;
    s->layer_tmp = layer_temporaries(m, top, T, (uint64_t)seq, a, pb, cal->math_per_score,
                                     lora != 0);
    if (seed) /* its MLP's backward: the gradients of two T x i tensors */
        s->layer_tmp = 2 * block(T * (uint64_t)m->intermediate * a);
    /* tied embeddings: the dense embedding gradient joins lm_head's; in
     * fp32 and pure bf16 a second embedding-sized sum is made (measured:
     * qwen2/qwen3/gemma/gpt2 at 512 tokens), under autocast not */
    s->tied_tmp = m->tied ? (autocast ? 1 : 2) * s->head_grad : 0;
    int adam = cfg->optimizer == MD_OPT_ADAM || cfg->optimizer == MD_OPT_ADAMW;
    s->opt_tmp = adam ? trained : 0;
}

static int check_args(const md_model *m, const md_step_config *cfg, md_err *err)
{
    int64_t batch = cfg->batch, seq = cfg->seq;
    int cfg_rank_bad = cfg->lora_rank < 0 || cfg->lora_rank > (1 << 16);
    if (batch <= 0 || seq <= 0)
        return md_err_set(err, MD_E_ARG, -1, "batch and sequence must be positive");
    if (batch > (1 << 20) || seq > (1 << 24) || cfg_rank_bad)
        return md_err_set(err, MD_E_ARG, -1, "batch, sequence or LoRA rank out of range");
    /* a generous bound on every byte count below, so none can overflow */
    double T = (double)batch * (double)seq, L = (double)m->layers + 1;
    double per_token = (double)m->vocab * 20 + L * (200.0 * (double)m->hidden +
                       20.0 * (double)m->intermediate + 8.0 * (double)m->heads * (double)seq);
    if (T * per_token > 0x1p60)
        return md_err_set(err, MD_E_ARG, -1, "batch x sequence too large for this model "
                                             "(more than an exabyte)");
    if (m->positions > 0 && seq > m->positions && strcmp(m->type, "seed"))
        return md_err_set(err, MD_E_ARG, -1, "sequence %lld exceeds the model's %lld positions",
                          (long long)seq, (long long)m->positions);
    return MD_OK;
}

/* What lives across steps: weights, gradients (or LoRA's), optimizer
 * state, DDP's buckets, workspaces, inputs; *trained: the bytes of what the
 * optimizer updates. */
static int static_memory(const md_model *m, const md_step_config *cfg, const md_calibration *cal,
                         md_prediction *out, uint64_t *trained, md_err *err)
{
    md_optimizer opt = cfg->optimizer;
    uint64_t pb = cfg->precision == MD_BF16_PURE ? 2 : 4; /* parameter (and state) dtype */
    int states = opt == MD_OPT_ADAM || opt == MD_OPT_ADAMW ? 2 : opt == MD_OPT_SGD_MOMENTUM;
    out->params = md_model_params(m);
    out->weights = params_bytes(m, pb);
    out->gradients = out->weights;
    out->trainable = out->params;
    if (cfg->lora_rank > 0) { /* the base is frozen: only the adapters learn */
        param_sum lora = {4, 0, 0}; /* peft keeps them fp32, even over a bf16 base */
        if (!cfg->lora_targets ||
            md_arch_lora_params(m, cfg->lora_rank, cfg->lora_targets, add_params, &lora))
            return md_err_set(err, MD_E_ARG, -1, "LoRA targets not modeled for %s (llama "
                              "family: q/k/v/o/gate/up/down_proj; phi3: qkv_proj, gate_up_proj, "
                              "o_proj, down_proj; gpt2: c_attn)", m->type);
        out->gradients = lora.total;
        out->trainable = lora.elems;
        out->weights += out->gradients;
    }
    *trained = out->gradients; /* before DDP's bucket views take them over */
    out->optimizer_state = (uint64_t)states * out->gradients;
    if (cfg->ddp == 1)
        out->caveat = "DDP without gradient_as_bucket_view is modeled from how DDP allocates "
                      "(buckets beside the gradients), not yet checked against a measured run";
    if (cfg->ddp) { /* buckets as large as the gradients, from construction on */
        out->buckets = out->gradients;
        if (cfg->ddp == 2) /* the gradients are views into them */
            out->gradients = 0;
    }
    out->workspace = cal->workspace; /* cuBLAS: 2 x 32 MiB on Hopper (forward, autograd) */
    out->inputs = block((uint64_t)cfg->batch * (uint64_t)cfg->seq * 8); /* int64 ids = labels */
    out->floor = out->weights + out->optimizer_state + out->workspace + out->inputs +
                 out->buckets;
    out->floor_with_grads = out->floor + out->gradients;
    /* DDP: NCCL's buffers, outside the allocator: 2210-2418 MiB in all in the
     * H200 DDP runs (tests/data/runs/ddp) against 1368 without */
    out->context = cal->context + (cfg->ddp ? 1050 * MIB : 0);
    return MD_OK;
}

/* Moves the block rounding of the parameter-sized tensors into its own
 * line: what the tensors hold is elements x bytes, the rest is the
 * allocator's. */
static void split_rounding(md_breakdown *b, const md_prediction *p, const md_step_config *cfg)
{
    uint64_t pb = cfg->precision == MD_BF16_PURE ? 2 : 4;
    uint64_t trained = (uint64_t)p->trainable * (cfg->lora_rank ? 4 : pb);
    uint64_t weights = (uint64_t)p->params * pb + (cfg->lora_rank ? trained : 0);
    md_optimizer o = cfg->optimizer;
    uint64_t states = o == MD_OPT_ADAM || o == MD_OPT_ADAMW ? 2 : o == MD_OPT_SGD_MOMENTUM;
    uint64_t *field[] = {&b->weights, &b->optimizer_state, &b->gradients};
    uint64_t raw[] = {weights, states * trained, p->gradients ? trained : 0};
    for (int i = 0; i < 3; i++) {
        if (i == 2 && b->gradients != p->gradients)
            continue; /* part of the gradients: left whole */
        if (*field[i] >= raw[i] && raw[i]) {
            b->rounding += *field[i] - raw[i];
            *field[i] = raw[i];
        }
    }
}

int md_predict(const md_model *m, const md_step_config *cfg, md_prediction *out, md_err *err)
{
    int rc = check_args(m, cfg, err);
    if (rc)
        return rc;
    md_calibration dflt;
    const md_calibration *cal = cfg->calibration;
    if (!cal)
        md_calibration_default(&dflt), cal = &dflt;
    memset(out, 0, sizeof *out);
    uint64_t trained = 0;
    if ((rc = static_memory(m, cfg, cal, out, &trained, err)))
        return rc;
    step_shape s;
    shape_of(m, cfg, cal, trained, &s);
    md_breakdown c[6];
    candidates(out, &s, c);
    out->phase = MD_PHASE_LOSS_BACKWARD;
    for (int i = MD_PHASE_LOSS_BACKWARD; i <= MD_PHASE_OPTIM; i++)
        if (sum(&c[i]) > sum(&c[out->phase]))
            out->phase = (md_step_phase)i;
    out->at_peak = c[out->phase];
    out->peak = sum(&out->at_peak);
    split_rounding(&out->at_peak, out, cfg);
    out->activations = s.acts;
    out->loss_bytes_per_logit = s.E ? (double)c[MD_PHASE_LOSS_BACKWARD].logits / (double)s.E : 0;
    /* max_memory_reserved over max_memory_allocated on the 411 measured H200
     * steps that record it (tests/data/predict/measured/real, final,
     * options, options_final): median 1.08 (this estimate's error: median
     * -0.6 %, -7 % to +24 %), never above 1.35 (the envelope) */
    out->reserved = (uint64_t)((double)out->peak * 1.08);
    out->reserved_high = (uint64_t)((double)out->peak * 1.35);
    out->device_total = out->reserved + out->context;
    out->peak_known = 1;
    return MD_OK;
}

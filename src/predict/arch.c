/* arch.c - what each supported architecture allocates: its parameter
 * tensors, and the bytes autograd keeps per token for backward. The
 * per-token counts come from reading what is live at the peak of real
 * steps (bench/data/step-snapshots: one 2x512 AdamW step of every
 * architecture in every precision, H200, torch 2.11, transformers 5.17)
 * and from the modeling code; docs/predict-model.md derives each term.
 * Nothing here is fitted to a measured peak. */
#include <string.h>
#include "arch.h"

static int is(const md_model *m, const char *t) { return !strcmp(m->type, t); }

static int is_autocast(md_precision p) { return p == MD_BF16_AUTOCAST || p == MD_FP16_AUTOCAST; }

/* gemma2 and gemma3 norm each sublayer's output too (four norms a layer) */
static int post_norms(md_arch_kind k) { return k == MD_ARCH_GEMMA2 || k == MD_ARCH_GEMMA3; }
/* qwen3 and gemma3 norm the query and key over head_dim (q_norm, k_norm) */
static int qk_norms(md_arch_kind k)
{
    return k == MD_ARCH_QWEN3 || k == MD_ARCH_GEMMA3 || k == MD_ARCH_QWEN3_MOE;
}

int md_arch_moe(md_arch_kind k)
{
    return k == MD_ARCH_MIXTRAL || k == MD_ARCH_QWEN3_MOE || k == MD_ARCH_QWEN2_MOE;
}
/* gemma's RMSNorm scales by (1 + weight) in fp32 */
static int gemma_norm(md_arch_kind k)
{
    return k == MD_ARCH_GEMMA || k == MD_ARCH_GEMMA2 || k == MD_ARCH_GEMMA3;
}

md_arch_kind md_arch_of(const md_model *m)
{
    static const struct { const char *type; md_arch_kind kind; } kinds[] = {
        {"gpt2", MD_ARCH_GPT2}, {"seed", MD_ARCH_SEED}, {"phi3", MD_ARCH_PHI3},
        {"qwen3", MD_ARCH_QWEN3}, {"gemma", MD_ARCH_GEMMA}, {"gemma2", MD_ARCH_GEMMA2},
        {"gemma3_text", MD_ARCH_GEMMA3}, {"olmo2", MD_ARCH_OLMO2}, {"gpt_neox", MD_ARCH_NEOX},
        {"opt", MD_ARCH_OPT}, {"phi", MD_ARCH_PHI}, {"mixtral", MD_ARCH_MIXTRAL},
        {"qwen3_moe", MD_ARCH_QWEN3_MOE}, {"qwen2_moe", MD_ARCH_QWEN2_MOE}};
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
        if (is(m, kinds[i].type))
            return kinds[i].kind;
    return MD_ARCH_LLAMA; /* llama, mistral, qwen2: the same layer */
}

/* The parameters outside the decoder layers (embeddings, lm_head, final
 * norm; the seed's classifier): what FSDP's root unit holds. */
void md_arch_root_params(const md_model *m, void (*emit)(void *, int64_t, int64_t), void *ctx)
{
    int64_t h = m->hidden, V = m->vocab;
    md_arch_kind k = md_arch_of(m);
    emit(ctx, 1, V * h);
    if (!m->tied && k != MD_ARCH_SEED) /* the seed's head is its classifier */
        emit(ctx, 1, V * h);
    if (k == MD_ARCH_GPT2 || k == MD_ARCH_SEED)
        emit(ctx, 1, m->positions * h), emit(ctx, 2, h); /* positions, final LayerNorm */
    else if (k == MD_ARCH_NEOX)
        emit(ctx, 2, h); /* final LayerNorm */
    else if (k == MD_ARCH_OPT)
        emit(ctx, 1, (m->positions + 2) * h), emit(ctx, 2, h); /* positions, final LayerNorm */
    else if (k == MD_ARCH_PHI)
        emit(ctx, 1, V), emit(ctx, 2, h); /* lm_head's bias, final LayerNorm */
    else
        emit(ctx, 1, h); /* final RMSNorm */
    if (k == MD_ARCH_SEED)
        emit(ctx, 1, h * m->classes);
}

/* n decoder layers' parameter tensors: emit(count, elements). */
void md_arch_layer_tensors(const md_model *m, int64_t n,
                           void (*emit)(void *, int64_t, int64_t), void *ctx)
{
    int64_t h = m->hidden, i = m->intermediate, L = n;
    int64_t q = m->heads * m->head_dim, kv = m->kv_heads * m->head_dim;
    md_arch_kind k = md_arch_of(m);
    if (k == MD_ARCH_OPT || k == MD_ARCH_PHI) { /* q/k/v/out with biases, the MLP, LayerNorms */
        emit(ctx, 4 * L, h * h), emit(ctx, 4 * L, h);
        emit(ctx, L, h * i), emit(ctx, L, i), emit(ctx, L, i * h), emit(ctx, L, h);
        emit(ctx, (k == MD_ARCH_OPT ? 4 : 2) * L, h);
        return;
    }
    if (k == MD_ARCH_NEOX) { /* query_key_value, dense, two LayerNorms, the MLP */
        emit(ctx, L, 3 * h * h), emit(ctx, L, 3 * h), emit(ctx, L, h * h), emit(ctx, 6 * L, h);
        emit(ctx, L, h * i), emit(ctx, L, i), emit(ctx, L, i * h);
        return;
    }
    if (k == MD_ARCH_GPT2) {
        emit(ctx, L, 3 * h * h), emit(ctx, L, 3 * h);     /* c_attn */
        emit(ctx, L, h * h), emit(ctx, 5 * L, h);         /* c_proj, its bias, ln_1/ln_2 */
        emit(ctx, L, h * i), emit(ctx, L, i);             /* c_fc */
        emit(ctx, L, i * h), emit(ctx, L, h);             /* mlp c_proj */
        return;
    }
    if (k == MD_ARCH_SEED) { /* no biases but the LayerNorms' */
        emit(ctx, L, 3 * h * h), emit(ctx, L, h * h), emit(ctx, L, h * i), emit(ctx, L, i * h);
        emit(ctx, 4 * L, h);
        return;
    }
    if (md_arch_moe(k)) { /* q, k, v, o, the router, two 3-D expert tensors, norms */
        int64_t E = m->experts, s = m->shared_intermediate;
        emit(ctx, L, h * q), emit(ctx, 2 * L, h * kv), emit(ctx, L, q * h), emit(ctx, L, h * E);
        emit(ctx, L, E * 2 * i * h), emit(ctx, L, E * h * i), emit(ctx, 2 * L, h);
        if (m->attention_bias)
            emit(ctx, L, q), emit(ctx, 2 * L, kv);
        if (qk_norms(k))
            emit(ctx, 2 * L, m->head_dim);               /* q_norm, k_norm */
        if (s) /* qwen2_moe: the shared expert's gate, up, down and its sigmoid gate */
            emit(ctx, 2 * L, h * s), emit(ctx, L, s * h), emit(ctx, L, h);
        return;
    }
    if (k == MD_ARCH_PHI3) {
        emit(ctx, L, h * (q + 2 * kv)), emit(ctx, L, 2 * h * i);
    } else {
        emit(ctx, L, h * q), emit(ctx, 2 * L, h * kv), emit(ctx, 2 * L, h * i);
        if (m->attention_bias)
            emit(ctx, L, q), emit(ctx, 2 * L, kv);
    }
    emit(ctx, L, q * h), emit(ctx, L, i * h);
    emit(ctx, (post_norms(k) ? 4 : 2) * L, h);          /* the layer's norms */
    if (qk_norms(k))
        emit(ctx, 2 * L, m->head_dim);                   /* q_norm, k_norm */
    if (k == MD_ARCH_OLMO2)
        emit(ctx, L, q), emit(ctx, L, kv);               /* q_norm, k_norm: full width */
}

/* Parameter tensors as transformers creates them: emit(count, elements). */
void md_arch_params(const md_model *m, void (*emit)(void *, int64_t, int64_t), void *ctx)
{
    md_arch_root_params(m, emit, ctx);
    md_arch_layer_tensors(m, m->layers, emit, ctx);
}

int md_arch_lora_params(const md_model *m, int64_t rank, unsigned t,
                        void (*emit)(void *, int64_t, int64_t), void *ctx)
{
    int64_t h = m->hidden, i = m->intermediate, L = m->layers;
    int64_t q = m->heads * m->head_dim, kv = m->kv_heads * m->head_dim;
    md_arch_kind k = md_arch_of(m);
    unsigned qkv = MD_LORA_Q | MD_LORA_K | MD_LORA_V, gu = MD_LORA_GATE | MD_LORA_UP;
    if (k == MD_ARCH_SEED || (k == MD_ARCH_GPT2 && t != qkv) ||
        (k == MD_ARCH_PHI3 && (((t & qkv) && (t & qkv) != qkv) || ((t & gu) && (t & gu) != gu))))
        return -1;
    if (k == MD_ARCH_GPT2 || (k == MD_ARCH_PHI3 && (t & qkv))) { /* one fused module */
        emit(ctx, L, rank * h), emit(ctx, L, rank * (q + 2 * kv));
        t &= ~qkv;
    }
    if (k == MD_ARCH_PHI3 && (t & gu)) {
        emit(ctx, L, rank * h), emit(ctx, L, rank * 2 * i);
        t &= ~gu;
    }
    const struct { unsigned bit; int64_t in, out; } mod[] = {
        {MD_LORA_Q, h, q}, {MD_LORA_K, h, kv}, {MD_LORA_V, h, kv}, {MD_LORA_O, q, h},
        {MD_LORA_GATE, h, i}, {MD_LORA_UP, h, i}, {MD_LORA_DOWN, i, h}};
    for (size_t j = 0; j < sizeof mod / sizeof mod[0]; j++)
        if (t & mod[j].bit)
            emit(ctx, L, rank * mod[j].in), emit(ctx, L, rank * mod[j].out);
    return 0;
}

int md_lora_targets(const char *list, const md_model *m, unsigned *out, size_t *bad)
{
    static const struct { const char *name; unsigned bits; } mods[] = {
        {"q_proj", MD_LORA_Q}, {"k_proj", MD_LORA_K}, {"v_proj", MD_LORA_V},
        {"o_proj", MD_LORA_O}, {"gate_proj", MD_LORA_GATE}, {"up_proj", MD_LORA_UP},
        {"down_proj", MD_LORA_DOWN}, {"qkv_proj", MD_LORA_Q | MD_LORA_K | MD_LORA_V},
        {"gate_up_proj", MD_LORA_GATE | MD_LORA_UP},
        {"c_attn", MD_LORA_Q | MD_LORA_K | MD_LORA_V}, {"all-linear", 127}};
    md_arch_kind k = md_arch_of(m);
    const char *at = list ? list : k == MD_ARCH_GPT2 ? "c_attn" : k == MD_ARCH_PHI3 ? "qkv_proj"
                                                                                 : "q_proj,v_proj";
    *out = 0;
    while (*at) {
        size_t n = strcspn(at, ","), j = 0;
        for (; j < sizeof mods / sizeof mods[0]; j++)
            if (strlen(mods[j].name) == n && !strncmp(at, mods[j].name, n))
                break;
        if (j == sizeof mods / sizeof mods[0]) {
            *bad = list ? (size_t)(at - list) : 0;
            return -1;
        }
        *out |= mods[j].bits;
        at += n + (at[n] == ',');
    }
    if (k == MD_ARCH_GPT2 && *out == 127) /* all-linear: gpt2's adapters go on c_attn */
        *out = MD_LORA_Q | MD_LORA_K | MD_LORA_V;
    return 0;
}

/* Elements of one layer's matmul weights (and biases), which autocast
 * copies to bf16 and keeps for backward. */
static int64_t layer_linear_elems(const md_model *m)
{
    int64_t h = m->hidden, i = m->intermediate;
    int64_t q = m->heads * m->head_dim, kv = m->kv_heads * m->head_dim;
    if (md_arch_of(m) == MD_ARCH_SEED)
        return 4 * h * h + 2 * h * i;
    md_arch_kind k = md_arch_of(m);
    if (k == MD_ARCH_GPT2 || k == MD_ARCH_NEOX || k == MD_ARCH_OPT || k == MD_ARCH_PHI)
        return 4 * h * h + 4 * h + 2 * h * i + i + h;
    if (md_arch_moe(k)) /* the experts run outside autocast (grouped_mm): not copied */
        return h * (q + 2 * kv) + q * h + h * m->experts + (m->attention_bias ? q + 2 * kv : 0) +
               (m->shared_intermediate ? 3 * h * m->shared_intermediate + h : 0);
    return h * (q + 2 * kv) + q * h + 3 * h * i + (m->attention_bias ? q + 2 * kv : 0);
}

/* Layers to which transformers passes SDPA a mask: those with a sliding
 * window as long as the sequence (mistral's 4096 at 4096 tokens, phi3's
 * 2047, gemma2's sliding half). */
int64_t md_arch_masked_layers(const md_model *m, int64_t seq)
{
    if (m->sliding_window <= 0 || seq < m->sliding_window)
        return 0;
    return m->sliding_layers > 0 ? m->sliding_layers : m->layers;
}

/* A masked layer: transformers expands grouped keys and values itself
 * (repeat_kv) and SDPA turns the boolean mask into a float one of the
 * query's dtype per call (kept as the attention bias, per layer). */
static double masked_attention(const md_model *m, double a, int fused_qkv)
{
    double q = (double)(m->heads * m->head_dim), kv = (double)(m->kv_heads * m->head_dim);
    double t = a * q /* rotated q */ + a * q /* output */ + 4 * (double)m->heads;
    if (m->kv_heads < m->heads)
        return t + 2 * a * q; /* expanded key and value */
    t += a * kv + (fused_qkv ? a * (q + 2 * kv) : a * kv);
    return a == 2 ? t + a * q : t; /* bf16: cuDNN's layout, copied by contiguous() */
}

/* Attention's saved bytes per token per layer (and per token x key
 * position: the math path's B*H*S*S attention weights). GQA models call
 * SDPA with enable_gqa, which fp32 can only run on the math path: it keeps
 * the scaled query, the expanded keys and values (query-sized), the fp32
 * weights and a contiguous copy of the output. Otherwise the fused kernels
 * keep query, key, value, output and logsumexp. */
static md_act_cost attention(const md_model *m, md_precision p, int masked)
{
    double q = (double)(m->heads * m->head_dim), kv = (double)(m->kv_heads * m->head_dim);
    double H = (double)m->heads, a = p == MD_FP32 ? 4 : 2;
    int fused_qkv = md_arch_of(m) == MD_ARCH_PHI3;
    md_act_cost c = {0, 0, 0};
    if (masked) {
        c.tok = masked_attention(m, a, fused_qkv);
        c.mask = a;
        return c;
    }
    if (p == MD_FP32 && m->kv_heads < m->heads) {
        c.tok = 16 * q, c.quad = H; /* times the bytes per score (4: fp32) */
        return c;
    }
    c.tok = a * (q + kv) /* rotated q, k */ + a * q /* output */ + 4 * H /* logsumexp */;
    /* value: a view of phi3's fused qkv output, which stays whole */
    c.tok += fused_qkv ? a * (q + 2 * kv) : a * kv;
    /* bf16 without GQA: an output layout that transpose().contiguous() copies */
    if (p != MD_FP32 && m->kv_heads == m->heads)
        c.tok += a * q;
    return c;
}

/* RMSNorm as transformers writes it: fp32 input (the residual: saved),
 * normalized value, and the output the next matmul saves; bf16 models add
 * an fp32 copy of the input. Bytes per token, excluding what consumers
 * cast under autocast. */
static double rmsnorm(double h, md_precision p, int gemma)
{
    if (p == MD_FP32)
        return 12 * h + 4;                       /* input, normalized, output, rstd */
    if (p == MD_BF16_PURE)
        return gemma ? 10 * h + 4 : 8 * h + 4;   /* fp32 copy, normalized, bf16 output(s) */
    return 8 * h + 4;                            /* autocast: input, normalized, rstd */
}

/* Eager attention (transformers' eager_attention_forward): the query, keys
 * and values expanded to query size (repeat_kv), the fp32 softmax and its
 * cast back, the output's contiguous copy; gemma2 keeps its soft-capping's
 * tanh; gpt2 also keeps a dropout mask and output. quad counts scores per
 * token x key position at 4 bytes each. */
static md_act_cost eager_attention(const md_model *m, md_precision p)
{
    double q = (double)(m->heads * m->head_dim), kv = (double)(m->kv_heads * m->head_dim);
    double H = (double)m->heads, a = p == MD_FP32 ? 4 : 2;
    md_act_cost c = {4 * a * q, p == MD_FP32 ? H : 1.5 * H, 0};
    if (md_arch_of(m) == MD_ARCH_PHI3) /* v stays a view of the fused output */
        c.tok += a * 2 * kv;
    if (m->attn_softcap)
        c.quad += H * a / 4;
    return c;
}

/* The copy of the attention output that transpose().contiguous() makes
 * for o_proj (kept only when o_proj's weight or adapter needs it): the
 * math path's, cuDNN's (bf16 without GQA), eager's. */
static double output_copy(const md_model *m, md_precision p, const md_layer_opts *o)
{
    double a = p == MD_FP32 ? 4 : 2, q = (double)(m->heads * m->head_dim);
    int gqa = m->kv_heads < m->heads;
    if (o->eager || (!o->masked && p == MD_FP32 && gqa) || (p != MD_FP32 && !gqa))
        return a * q;
    return 0;
}

/* A norm's output saved by the targeted matmuls that read it: fp32 shares
 * one tensor; autocast casts it to bf16 per matmul; peft casts it to its
 * fp32 adapters per matmul in pure bf16. */
static double lora_input(double width, md_precision p, int modules, int fused)
{
    if (!modules)
        return 0;
    if (p == MD_FP32)
        return 4 * width;
    return (fused ? 1 : modules) * (p == MD_BF16_PURE ? 4 : 2) * width;
}

static int bits(unsigned x) { return __builtin_popcount(x); }

/* A LoRA layer: frozen norms keep only their input and rstd; a frozen
 * matmul keeps nothing of its input (its bf16 weight copy under autocast,
 * for the input's gradient); the MLP product is kept only for a targeted
 * down_proj. */
static double lora_layer(const md_model *m, md_precision p, const md_layer_opts *o,
                         const md_act_cost *attn)
{
    double h = (double)m->hidden, i = (double)m->intermediate, a = p == MD_FP32 ? 4 : 2;
    double q = (double)(m->heads * m->head_dim), kv = (double)(m->kv_heads * m->head_dim);
    unsigned t = o->lora;
    int fused = md_arch_of(m) == MD_ARCH_PHI3;
    double tok = 2 * (4 * h + 4) + attn->tok;
    if (!(t & MD_LORA_O))
        tok -= output_copy(m, p, o);
    else if (p == MD_BF16_PURE)
        tok += 4 * q;
    tok += lora_input(h, p, bits(t & (MD_LORA_Q | MD_LORA_K | MD_LORA_V)), fused);
    tok += lora_input(h, p, bits(t & (MD_LORA_GATE | MD_LORA_UP)), fused);
    tok += 3 * a * i + (t & MD_LORA_DOWN ? (p == MD_BF16_PURE ? 4 : a) * i : 0);
    if (post_norms(md_arch_of(m)))
        tok += 2 * (4 * h + 4);
    if (qk_norms(md_arch_of(m)))
        tok += 4 * (q + kv) + 4 * (double)(m->heads + m->kv_heads);
    if (md_arch_of(m) == MD_ARCH_OLMO2)
        tok += 4 * (q + kv) + 8;
    return tok;
}

/* The seed's pre-norm block: two LayerNorms (input, mean, rstd, and the
 * output the next matmul keeps), nn.MultiheadAttention's contiguous copy of
 * the packed q/k/v projection, SDPA's output and logsumexp, the output's
 * contiguous copy, the MLP's input and GELU output (its inputs cast to bf16
 * under autocast, LayerNorm in fp32). */
static md_act_cost seed_layer(const md_model *m, md_precision p)
{
    double h = (double)m->hidden, i = (double)m->intermediate;
    md_act_cost c = {0, 0, 0};
    c.tok = p == MD_FP32 ? 36 * h + 8 * i : is_autocast(p) ? 22 * h + 4 * i : 20 * h + 4 * i;
    c.tok += 16 + 4 * (double)m->heads;
    return c;
}

/* gpt2: ln_1, ln_2 (input, mean, rstd), c_attn out, attention output, c_fc
 * out, gelu_new's four saved pieces (tanh, 1+tanh, 0.5x, output), two
 * dropout masks; under autocast pow() runs in fp32 on a copy of its input,
 * gelu stays fp32, every matmul input is cast to bf16. */
static md_act_cost gpt2_layer(const md_model *m, md_precision p, const md_layer_opts *o)
{
    double h = (double)m->hidden, H = (double)m->heads;
    int autocast = is_autocast(p);
    md_act_cost c = {0, 0, 0};
    c.tok = p == MD_FP32 ? 114 * h : autocast ? 86 * h : 58 * h;
    c.tok += 16 + (o->eager ? 0 : 4 * H);
    if (o->eager) /* softmax (fp32 but in pure bf16), dropout mask and output */
        c.quad = H * (p == MD_BF16_PURE ? 5 : autocast ? 7 : 9) / 4;
    if (o->lora) /* c_attn's adapters: ln_2's output and gelu's are not kept */
        c.tok -= p == MD_FP32 ? 20 * h : 10 * h - (p == MD_BF16_PURE ? 2 * h : 0);
    return c;
}

/* The LayerNorm families read from allocator snapshots of 2x1024 steps
 * (bench/data/step-snapshots/{gpt_neox,opt,phi}-*): saved bytes per token
 * of a layer, h[p] * hidden + i[p] * intermediate + c + 4 * heads (the
 * logsumexp), by precision (fp32, autocast, pure bf16).
 *  gpt_neox: the fused qkv output (v, a view, keeps it whole), both
 *   LayerNorms' outputs and statistics, the rotated query and key (fp32
 *   under autocast, where SDPA keeps bf16 casts of them instead), SDPA's
 *   output (bf16: its contiguous copy too), the layer's output (the next
 *   LayerNorm's input), the MLP's two intermediate-wide tensors; under
 *   autocast each matmul's bf16 input. A serial residual adds the sum
 *   between attention and MLP, the second LayerNorm's input.
 *  opt: q (scaled: a copy), k, v, SDPA's output, both LayerNorms' outputs
 *   and statistics, the residual between the sublayers and the layer's
 *   output, ReLU's output (fc1's is freed), a bool mask per dropout (two,
 *   where dropout > 0); under autocast each projection's own bf16 cast.
 *  phi: one LayerNorm for the parallel attention and MLP, the rotated query
 *   and key, v, SDPA's output (bf16: its contiguous copy), the layer's
 *   output, fc1's output and gelu_new's four pieces (some fp32 under
 *   autocast, where pow runs in fp32), fc2's bf16 input. */
typedef struct ln_layer_coef {
    double h[3], i[3], c;
} ln_layer_coef;

static const ln_layer_coef NEOX_LAYER = {{36, 22, 20}, {8, 4, 4}, 16};
static const ln_layer_coef OPT_LAYER = {{32, 24, 16}, {4, 2, 2}, 16};
static const ln_layer_coef PHI_LAYER = {{24, 22, 14}, {20, 16, 10}, 8};

static md_act_cost ln_layer(const md_model *m, md_precision p, const ln_layer_coef *k)
{
    double h = (double)m->hidden, i = (double)m->intermediate, H = (double)m->heads;
    int at = p == MD_FP32 ? 0 : is_autocast(p) ? 1 : 2;
    md_act_cost c = {k->h[at] * h + k->i[at] * i + k->c + 4 * H, 0, 0};
    if (md_arch_of(m) == MD_ARCH_NEOX && m->serial_residual)
        c.tok += p == MD_BF16_PURE ? 2 * h : 4 * h;
    if ((md_arch_of(m) == MD_ARCH_OPT || md_arch_of(m) == MD_ARCH_PHI) && m->dropout)
        c.tok += 2 * h; /* a bool mask for each of the two dropouts (OPT's measured) */
    return c;
}

/* Mixtral's sparse MLP (transformers' grouped_mm experts, from allocator
 * snapshots: bench/data/step-snapshots/mixtral-*): per token and chosen
 * expert, the token's permuted copy, the gate_up output, SiLU's output,
 * their product and the down projection's output, in fp32 under autocast
 * too (grouped_mm is not autocast); the router's softmax and top-k. */
static double moe_mlp(const md_model *m, md_precision p)
{
    double h = (double)m->hidden, i = (double)m->intermediate, e = p == MD_BF16_PURE ? 2 : 4;
    double K = (double)m->experts_per_tok, E = (double)m->experts;
    double routed = K * (2 * h + 4 * i) * e + 4 * E + 12 * K;
    /* qwen2_moe's shared expert: llama's MLP, its output and the sigmoid
     * of its gate kept for their product */
    double s = (double)m->shared_intermediate, a = p == MD_FP32 ? 4 : 2;
    return s > 0 ? routed + 4 * a * s + a * h + a : routed;
}

md_act_cost md_arch_layer(const md_model *m, md_precision p, const md_layer_opts *o)
{
    double h = (double)m->hidden, i = (double)m->intermediate, H = (double)m->heads;
    double q = (double)(m->heads * m->head_dim), kv = (double)(m->kv_heads * m->head_dim);
    double KV = (double)m->kv_heads, a = p == MD_FP32 ? 4 : 2;
    md_arch_kind k = md_arch_of(m);
    if (k == MD_ARCH_SEED)
        return seed_layer(m, p);
    if (k == MD_ARCH_GPT2)
        return gpt2_layer(m, p, o);
    if (k == MD_ARCH_NEOX || k == MD_ARCH_OPT || k == MD_ARCH_PHI)
        return ln_layer(m, p, k == MD_ARCH_NEOX ? &NEOX_LAYER : k == MD_ARCH_OPT ? &OPT_LAYER
                                                                             : &PHI_LAYER);
    md_act_cost at = o->eager ? eager_attention(m, p) : attention(m, p, o->masked);
    md_act_cost c = {0, at.quad, at.mask};
    if (o->lora) {
        c.tok = lora_layer(m, p, o, &at);
        return c;
    }
    /* olmo2 norms each sublayer's output instead of its input: the matmuls
     * keep the residual itself, the norm an fp32 copy of the output and the
     * normalized value; in pure bf16 that is gemma's count */
    c.tok = at.tok + 2 * rmsnorm(h, p, gemma_norm(k) || k == MD_ARCH_OLMO2) +
            (md_arch_moe(k) ? moe_mlp(m, p) : 4 * a * i); /* gate, act, up, product */
    if (is_autocast(p)) /* bf16 casts of the norm outputs (mixtral: q, k, v, the router;
                           qwen2_moe: and the shared expert's three) */
        c.tok += (k == MD_ARCH_PHI3 ? 2 : k == MD_ARCH_QWEN2_MOE ? 7 : md_arch_moe(k) ? 4 : 5) *
                 2 * h;
    if (post_norms(k)) /* post-attention and post-feedforward norms: an fp32
                          input (a matmul's output or its copy), normalized
                          value, rstd; their outputs join the residual */
        c.tok += 2 * (8 * h + 4);
    /* q_norm, k_norm: an fp32 copy of the input and the normalized value,
     * and rstd per row; qwen3's norm casts back before scaling by its
     * weight (keeping the bf16 cast, not the fp32 value), gemma3's and
     * olmo2's scale in fp32 first. olmo2 norms the whole width: one row a
     * token; the others each head. */
    double qk = p == MD_FP32 || k != MD_ARCH_QWEN3 ? 8 : 6;
    if (k == MD_ARCH_OLMO2)
        c.tok += qk * (q + kv) + 8;
    if (qk_norms(k))
        c.tok += qk * (q + kv) + 4 * (H + KV);
    return c;
}

/* Saved bytes per token outside the layers: the embedding output and the
 * final norm (with its cast for lm_head under autocast). */
double md_arch_extra(const md_model *m, md_precision p, unsigned lora)
{
    double h = (double)m->hidden;
    if (lora) /* the final norm's input and rstd; lm_head is frozen */
        return md_arch_of(m) == MD_ARCH_GPT2 ? 8 : 4 * h + 4;
    if (md_arch_of(m) == MD_ARCH_SEED) /* the last block's output, whose token 0 is normed */
        return p == MD_BF16_PURE ? 2 * h : 4 * h;
    int autocast = is_autocast(p);
    md_arch_kind k = md_arch_of(m);
    if (k == MD_ARCH_GPT2) /* dropout output and mask, ln_f */
        return p == MD_FP32 ? 9 * h + 8 : autocast ? 7 * h + 8 : 5 * h + 8;
    if (k == MD_ARCH_NEOX || k == MD_ARCH_OPT || k == MD_ARCH_PHI)
        /* the embedding (fp32 under autocast), the final LayerNorm; the
         * embedding's dropout mask */
        return (p == MD_FP32 ? 8 * h + 8 : autocast ? 6 * h + 8 : 4 * h + 8) +
               (m->embd_dropout ? h : 0);
    double norm = rmsnorm(h, p, gemma_norm(k));
    if (p == MD_FP32)
        return norm;
    return autocast ? norm + 2 * h : norm;
}

int64_t md_arch_layer_params(const md_model *m)
{
    int64_t h = m->hidden;
    md_arch_kind k = md_arch_of(m);
    int64_t norms = k == MD_ARCH_GPT2 || k == MD_ARCH_NEOX || k == MD_ARCH_OPT ||
                    post_norms(k) || k == MD_ARCH_SEED ? 4 * h : 2 * h;
    return layer_linear_elems(m) + norms + (qk_norms(k) ? 2 * m->head_dim : 0) +
           (k == MD_ARCH_OLMO2 ? (m->heads + m->kv_heads) * m->head_dim : 0) +
           (md_arch_moe(k) ? 3 * m->experts * h * m->intermediate : 0);
}

uint64_t md_arch_layer_weight_copies(const md_model *m, md_precision p)
{
    if (!is_autocast(p))
        return 0;
    return 2 * (uint64_t)layer_linear_elems(m);
}

uint64_t md_arch_weight_copies(const md_model *m, md_precision p)
{
    if (!is_autocast(p))
        return 0;
    int64_t head = md_arch_of(m) == MD_ARCH_SEED ? m->classes : m->vocab;
    return 2 * (uint64_t)(layer_linear_elems(m) * m->layers + head * m->hidden);
}

/* Bytes per logit element the output keeps: the logits themselves, and
 * gemma2's tanh soft-capping, which keeps its result for backward. */
double md_arch_logit_bytes(const md_model *m, md_precision p)
{
    double b = p == MD_FP32 ? 4 : 2;
    return m->final_softcap ? 2 * b : b;
}

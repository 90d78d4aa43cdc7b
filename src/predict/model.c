/* model.c - a model's shape from a Hugging Face config.json, and its
 * parameter count as transformers has it. The per-architecture layouts
 * were checked against transformers 5.17 on an H200 (tests/data/
 * predict/measured/grid.jsonl: gpt2, llama, mistral, qwen2, qwen3, gemma2
 * exact; tests/unit/test_predict.c). */
#include <jansson.h>
#include <stddef.h>
#include <string.h>
#include <sys/stat.h>
#include "../util/util.h"
#include "arch.h"
#include "json_error.h"

static int64_t geti(json_t *root, const char *key, int64_t dflt)
{
    json_t *v = json_object_get(root, key);
    return json_is_integer(v) ? (int64_t)json_integer_value(v) : dflt;
}

static int getb(json_t *root, const char *key, int dflt)
{
    json_t *v = json_object_get(root, key);
    return json_is_boolean(v) ? json_is_true(v) : dflt;
}

static int is_sliding(json_t *types, size_t i)
{
    json_t *t = json_array_get(types, i);
    return json_is_string(t) && !strcmp(json_string_value(t), "sliding_attention");
}

/* gemma2/gemma3: layer_types names each layer; without it gemma2's even
 * layers slide, and gemma3's all but every sliding_window_pattern-th (6).
 * Sets how many slide, and whether the first and the last do (their
 * backward is where a step peaks). */
static void sliding_layers(json_t *root, md_model *m, int gemma3)
{
    json_t *types = json_object_get(root, "layer_types");
    int64_t L = m->layers;
    if (json_is_array(types)) {
        size_t n = json_array_size(types);
        m->sliding_layers = 0;
        for (size_t i = 0; i < n; i++)
            m->sliding_layers += is_sliding(types, i);
        m->first_slides = n && is_sliding(types, 0);
        m->last_slides = n && is_sliding(types, n - 1);
    } else if (gemma3) {
        int64_t pattern = geti(root, "sliding_window_pattern", 6);
        pattern = pattern > 0 ? pattern : 1;
        m->sliding_layers = L - L / pattern;
        m->first_slides = pattern > 1;
        m->last_slides = L % pattern != 0;
    } else {
        m->sliding_layers = (L + 1) / 2;
        m->first_slides = 1;
        m->last_slides = L % 2 == 1; /* layer L - 1 is even */
    }
}

static double getf(json_t *root, const char *key, double dflt)
{
    json_t *v = json_object_get(root, key);
    return json_is_number(v) ? json_number_value(v) : dflt;
}

/* OPT as its released checkpoints but 350m are: norms before each sublayer,
 * biases, embeddings as wide as the model. */
static int opt_supported(json_t *root, const md_model *m, md_err *err)
{
    if (!getb(root, "do_layer_norm_before", 1) || !getb(root, "enable_bias", 1) ||
        !getb(root, "layer_norm_elementwise_affine", 1) ||
        geti(root, "word_embed_proj_dim", m->hidden) != m->hidden)
        return md_err_set(err, MD_E_SCHEMA, -1, "this OPT layout is not modeled (norms after "
                          "the sublayers, no biases, or word_embed_proj_dim unlike hidden_size, "
                          "as opt-350m has)");
    return MD_OK;
}

/* Phi (phi-1, phi-1.5, phi-2) as released: no q/k LayerNorms, gelu_new, as
 * many key/value heads as query heads; resid_pdrop (phi-2: 0.1) keeps a mask
 * per dropout as OPT's does. */
static int phi_supported(json_t *root, md_model *m, md_err *err)
{
    json_t *act = json_object_get(root, "hidden_act");
    if (getb(root, "qk_layernorm", 0) || m->kv_heads != m->heads ||
        (json_is_string(act) && strcmp(json_string_value(act), "gelu_new")))
        return md_err_set(err, MD_E_SCHEMA, -1, "this Phi layout is not modeled (qk_layernorm, "
                          "grouped key/value heads or an activation other than gelu_new)");
    m->dropout = getf(root, "resid_pdrop", 0) > 0;
    m->embd_dropout = getf(root, "embd_pdrop", 0) > 0;
    return MD_OK;
}

static const char *const known[] = {"gpt2", "llama", "mistral", "qwen2", "qwen3",
                                    "gemma", "gemma2", "gemma3_text", "olmo2", "phi3", "gpt_neox",
                                    "opt", "phi", "granite", "smollm3", "mixtral",
                                    "qwen3_moe", "qwen2_moe"};

static int seed_preset(const char *name, md_model *m)
{
    /* the seed exercise's SyntheticTransformer (examples/workloads.py) */
    memset(m, 0, sizeof *m);
    snprintf(m->type, sizeof m->type, "seed");
    m->vocab = 4096;
    m->classes = 16;
    if (!strcmp(name, "seed:small")) {
        m->layers = 4, m->hidden = 384, m->heads = 6, m->intermediate = 1536, m->positions = 256;
    } else if (!strcmp(name, "seed:medium")) {
        m->layers = 8, m->hidden = 512, m->heads = 8, m->intermediate = 2048, m->positions = 512;
    } else {
        return -1;
    }
    m->kv_heads = m->heads;
    m->head_dim = m->hidden / m->heads;
    return 0;
}

/* Sizes beyond any real model are refused, which also keeps every
 * parameter product far inside int64 (a hostile config cannot overflow). */
static int check_ranges(const md_model *m, md_err *err)
{
    static const struct { const char *what; size_t off; int64_t max; } lim[] = {
        {"vocab_size", offsetof(md_model, vocab), (int64_t)1 << 24},
        {"hidden size", offsetof(md_model, hidden), (int64_t)1 << 20},
        {"layers", offsetof(md_model, layers), (int64_t)1 << 12},
        {"attention heads", offsetof(md_model, heads), (int64_t)1 << 14},
        {"key/value heads", offsetof(md_model, kv_heads), (int64_t)1 << 14},
        {"head_dim", offsetof(md_model, head_dim), (int64_t)1 << 16},
        {"intermediate size", offsetof(md_model, intermediate), (int64_t)1 << 22},
        {"positions", offsetof(md_model, positions), (int64_t)1 << 31},
        {"sliding_window", offsetof(md_model, sliding_window), (int64_t)1 << 31},
    };
    for (size_t i = 0; i < sizeof lim / sizeof lim[0]; i++) {
        int64_t v;
        memcpy(&v, (const char *)m + lim[i].off, sizeof v);
        if (v < 0 || v > lim[i].max)
            return md_err_set(err, MD_E_SCHEMA, -1, "%s %lld is out of range (0..%lld)", lim[i].what,
                              (long long)v, (long long)lim[i].max);
    }
    if (m->heads * m->head_dim > ((int64_t)1 << 20) || m->kv_heads * m->head_dim > ((int64_t)1 << 20))
        return md_err_set(err, MD_E_SCHEMA, -1, "attention width heads x head_dim is out of range");
    return MD_OK;
}

/* The index in known[] of the config's model_type, or an error naming
 * what is supported (a multimodal wrapper: pointed at its text_config). */
static int model_type_of(json_t *root, size_t *k, md_err *err)
{
    json_t *mt = json_object_get(root, "model_type");
    const char *type = json_is_string(mt) ? json_string_value(mt) : NULL;
    size_t n = sizeof known / sizeof known[0];
    for (*k = 0; type && *k < n; ++*k)
        if (!strcmp(type, known[*k]))
            return MD_OK;
    json_t *text = json_object_get(root, "text_config");
    json_t *text_type = json_is_object(text) ? json_object_get(text, "model_type") : NULL;
    if (type && json_is_string(text_type))
        return md_err_set(err, MD_E_SCHEMA, -1,
                          "model_type '%s' is a multimodal model: predict models its language "
                          "model only; its text_config (model_type '%s') as a config.json of its "
                          "own predicts that part (a vision tower's weights are not in it)",
                          type, json_string_value(text_type));
    char list[256] = "";
    for (size_t i = 0, len = 0; i < n && len < sizeof list; i++)
        len += (size_t)snprintf(list + len, sizeof list - len, "%s%s", i ? ", " : "", known[i]);
    return md_err_set(err, MD_E_SCHEMA, -1, "model_type '%s' is not supported (%s)",
                      type ? type : "(missing)", list);
}

/* The experts: mixtral's num_local_experts, or Qwen's num_experts with
 * moe_intermediate_size wide experts in every layer (a dense MLP layer,
 * mlp_only_layers or decoder_sparse_step > 1, is refused: not modeled). */
static int moe_fields(json_t *root, md_model *m, md_err *err)
{
    int qwen = strcmp(m->type, "mixtral") != 0, qwen2 = !strcmp(m->type, "qwen2_moe");
    /* transformers 5 saves Qwen's num_experts as num_local_experts, the
     * hub's configs (saved by 4.x) as num_experts */
    m->experts = qwen ? geti(root, "num_experts", geti(root, "num_local_experts", qwen2 ? 60 : 128))
                      : geti(root, "num_local_experts", 8);
    m->experts_per_tok = geti(root, "num_experts_per_tok", qwen2 ? 4 : qwen ? 8 : 2);
    if (qwen) {
        json_t *dense = json_object_get(root, "mlp_only_layers");
        if (geti(root, "decoder_sparse_step", 1) != 1 ||
            (json_is_array(dense) && json_array_size(dense) > 0))
            return md_err_set(err, MD_E_SCHEMA, -1, "%s with dense MLP layers (mlp_only_layers or "
                              "decoder_sparse_step > 1) is not modeled", m->type);
        m->intermediate = geti(root, "moe_intermediate_size", qwen2 ? 1408 : 768);
        if (qwen2) {
            m->shared_intermediate = geti(root, "shared_expert_intermediate_size", 5632);
            m->attention_bias = getb(root, "qkv_bias", 1);
        }
        if (m->intermediate < 1 || m->intermediate > ((int64_t)1 << 22) ||
            m->shared_intermediate < 0 || m->shared_intermediate > ((int64_t)1 << 22))
            return md_err_set(err, MD_E_SCHEMA, -1, "moe_intermediate_size or "
                              "shared_expert_intermediate_size is out of range");
    }
    /* every expert's weights, bounded in double before any int64 product */
    double all = 3.0 * (double)m->experts * (double)m->hidden * (double)m->intermediate *
                 (double)m->layers;
    if (m->experts < 1 || m->experts > 4096 || m->experts_per_tok < 1 ||
        m->experts_per_tok > m->experts || all > 0x1p50)
        return md_err_set(err, MD_E_SCHEMA, -1, "num_local_experts %lld or num_experts_per_tok "
                          "%lld is out of range for this model", (long long)m->experts,
                          (long long)m->experts_per_tok);
    return MD_OK;
}

/* Fields only some families have (their defaults are their config classes'). */
static int family_fields(json_t *root, md_model *m, md_err *err)
{
    if (!strcmp(m->type, "gpt_neox")) {
        m->kv_heads = m->heads; /* no grouped keys and values */
        m->serial_residual = !getb(root, "use_parallel_residual", 1);
    } else if (!strcmp(m->type, "opt")) {
        m->intermediate = geti(root, "ffn_dim", 3072);
        m->tied = getb(root, "tie_word_embeddings", 1);
        m->dropout = getf(root, "dropout", 0.1) > 0;
        return opt_supported(root, m, err);
    } else if (!strcmp(m->type, "phi")) {
        return phi_supported(root, m, err);
    } else if (md_arch_moe(md_arch_of(m))) {
        return moe_fields(root, m, err);
    } else if (!strcmp(m->type, "gemma2")) {
        sliding_layers(root, m, 0);
        /* on unless the config sets them null (defaults 30 and 50) */
        m->final_softcap = !json_is_null(json_object_get(root, "final_logit_softcapping"));
        m->attn_softcap = !json_is_null(json_object_get(root, "attn_logit_softcapping"));
    } else if (!strcmp(m->type, "gemma3_text")) {
        sliding_layers(root, m, 1);
        /* off unless the config sets them (defaults null) */
        m->final_softcap = json_is_number(json_object_get(root, "final_logit_softcapping"));
        m->attn_softcap = json_is_number(json_object_get(root, "attn_logit_softcapping"));
    }
    return MD_OK;
}

/* Fields as transformers names them per architecture; defaults are those of
 * the architecture's config class. */
static int from_json(json_t *root, md_model *m, md_err *err)
{
    memset(m, 0, sizeof *m);
    size_t k;
    int rc = model_type_of(root, &k, err);
    if (rc)
        return rc;
    snprintf(m->type, sizeof m->type, "%s", known[k]);
    int gpt2 = !strcmp(m->type, "gpt2"), gemma = !strncmp(m->type, "gemma", 5);
    m->vocab = geti(root, "vocab_size", 0);
    m->hidden = gpt2 ? geti(root, "n_embd", 768) : geti(root, "hidden_size", 0);
    m->layers = gpt2 ? geti(root, "n_layer", 12) : geti(root, "num_hidden_layers", 0);
    m->heads = gpt2 ? geti(root, "n_head", 12) : geti(root, "num_attention_heads", 0);
    m->kv_heads = geti(root, "num_key_value_heads", m->heads);
    m->head_dim = geti(root, "head_dim", 0);
    m->intermediate = gpt2 ? geti(root, "n_inner", 0) : geti(root, "intermediate_size", 0);
    m->positions = gpt2 ? geti(root, "n_positions", 1024) : geti(root, "max_position_embeddings", 0);
    m->tied = getb(root, "tie_word_embeddings", gpt2 || gemma);
    m->attention_bias = !strcmp(m->type, "qwen2") || getb(root, "attention_bias", 0);
    /* gemma2 alternates sliding and full layers; the sliding ones decide */
    if (strncmp(m->type, "qwen", 4) || getb(root, "use_sliding_window", 0))
        m->sliding_window = geti(root, "sliding_window", 0);
    if ((rc = family_fields(root, m, err)) || (rc = check_ranges(m, err)))
        return rc; /* ranges before the defaults below multiply */
    if (gpt2 && m->intermediate == 0)
        m->intermediate = 4 * m->hidden; /* n_inner: null */
    if (m->head_dim == 0 && m->heads > 0)
        m->head_dim = m->hidden / m->heads;
    if (m->vocab == 0 || m->hidden == 0 || m->layers == 0 || m->heads == 0 || m->intermediate == 0 ||
        m->head_dim == 0)
        return md_err_set(err, MD_E_SCHEMA, -1, "config lacks vocab_size, hidden size, layers, "
                                                "heads, head_dim or intermediate size");
    return check_ranges(m, err);
}

/* A parsed config.json (root NULL: jansson's parse error in je). */
static int from_root(json_t *root, const json_error_t *je, md_model *m, md_err *err)
{
    if (!root)
        return md_json_load_error(je, err);
    int rc = json_is_object(root) ? from_json(root, m, err)
                                  : md_err_set(err, MD_E_SCHEMA, -1, "config is not a JSON object");
    json_decref(root);
    return rc;
}

int md_model_load_mem(const void *data, size_t n, const char *name, md_model *m, md_err *err)
{
    json_error_t je;
    md_err_file(err, name);
    return from_root(json_loadb(data, n, 0, &je), &je, m, err);
}

int md_model_load(const char *spec, md_model *m, md_err *err)
{
    struct stat st;
    if (stat(spec, &st) == 0 && S_ISDIR(st.st_mode)) { /* a model directory */
        char path[4096];
        if ((size_t)snprintf(path, sizeof path, "%s/config.json", spec) >= sizeof path)
            return md_err_set(err, MD_E_ARG, -1, "model directory path too long");
        json_error_t je;
        md_err_file(err, path);
        return from_root(json_load_file(path, 0, &je), &je, m, err);
    }
    if (!strncmp(spec, "seed:", 5)) {
        if (seed_preset(spec, m))
            return md_err_set(err, MD_E_ARG, -1, "unknown preset '%s' (seed:small, seed:medium)", spec);
        return MD_OK;
    }
    json_error_t je;
    md_err_file(err, spec);
    return from_root(json_load_file(spec, 0, &je), &je, m, err);
}

static int64_t seed_params(const md_model *m)
{
    int64_t h = m->hidden, i = m->intermediate;
    /* per block: 2 LayerNorms (weight+bias), MHA in_proj 3h*h + out_proj h*h
     * (bias=False), MLP h*i + i*h */
    int64_t block = 2 * 2 * h + 4 * h * h + 2 * h * i;
    return m->vocab * h + m->positions * h + m->layers * block + 2 * h + h * m->classes;
}

/* gpt_neox (Pythia): gpt2's layer (LayerNorms and linears with biases)
 * without position embeddings; embed_out untied by default */
static int64_t neox_params(const md_model *m)
{
    int64_t h = m->hidden, n = m->intermediate;
    int64_t block = 4 * h + (3 * h * h + 3 * h) + (h * h + h) + (h * n + n) + (n * h + h);
    return m->vocab * h + m->layers * block + 2 * h + (m->tied ? 0 : m->vocab * h);
}

/* opt: q/k/v/out projections and both MLP matmuls with biases, learned
 * positions (max_position_embeddings + 2: OPT's offset), tied lm_head */
static int64_t opt_params(const md_model *m)
{
    int64_t h = m->hidden, n = m->intermediate;
    int64_t block = 4 * (h * h + h) + 4 * h + (h * n + n) + (n * h + h);
    return m->vocab * h + (m->positions + 2) * h + m->layers * block + 2 * h +
           (m->tied ? 0 : m->vocab * h);
}

/* phi: one LayerNorm a layer, q/k/v/dense and fc1/fc2 with biases, an
 * lm_head with a bias */
static int64_t phi_params(const md_model *m)
{
    int64_t h = m->hidden, n = m->intermediate;
    int64_t block = 2 * h + 4 * (h * h + h) + (h * n + n) + (n * h + h);
    return m->vocab * h + m->layers * block + 2 * h + (m->tied ? 0 : m->vocab * h) + m->vocab;
}

static int64_t gpt2_params(const md_model *m)
{
    int64_t h = m->hidden, n = m->intermediate;
    int64_t block = 2 * h + (3 * h * h + 3 * h) + (h * h + h) + 2 * h + (h * n + n) + (n * h + h);
    return m->vocab * h + m->positions * h + m->layers * block + 2 * h + (m->tied ? 0 : m->vocab * h);
}

int64_t md_model_params(const md_model *m)
{
    if (!strcmp(m->type, "seed"))
        return seed_params(m);
    if (!strcmp(m->type, "gpt2"))
        return gpt2_params(m);
    if (!strcmp(m->type, "gpt_neox"))
        return neox_params(m);
    if (!strcmp(m->type, "opt"))
        return opt_params(m);
    if (!strcmp(m->type, "phi"))
        return phi_params(m);
    int64_t h = m->hidden, i = m->intermediate, q = m->heads * m->head_dim,
            kv = m->kv_heads * m->head_dim;
    int64_t attn = h * q + 2 * h * kv + q * h + (m->attention_bias ? q + 2 * kv : 0);
    int gemma23 = !strcmp(m->type, "gemma2") || !strcmp(m->type, "gemma3_text");
    if (!strcmp(m->type, "qwen3") || !strcmp(m->type, "gemma3_text") ||
        !strcmp(m->type, "qwen3_moe"))
        attn += 2 * m->head_dim; /* q_norm, k_norm */
    if (!strcmp(m->type, "olmo2"))
        attn += q + kv; /* q_norm, k_norm over the whole projection */
    int64_t norms = gemma23 ? 4 * h : 2 * h; /* gemma2/3: pre/post FFN norms */
    if (m->experts > 0) /* the router and every expert's three matrices; qwen2_moe's
                           shared expert and its gate */
        return m->vocab * h +
               m->layers * (attn + h * m->experts + 3 * m->experts * h * i + norms +
                            (m->shared_intermediate ? 3 * h * m->shared_intermediate + h : 0)) +
               h + (m->tied ? 0 : m->vocab * h);
    int64_t block = attn + 3 * h * i + norms; /* gate, up, down (phi3: fused, same count) */
    return m->vocab * h + m->layers * block + h + (m->tied ? 0 : m->vocab * h);
}

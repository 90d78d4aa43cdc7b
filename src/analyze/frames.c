/* frames.c - what a stack says: whose code allocated (first user frame),
 * which training phase it ran in, and whether it is a library workspace.
 * Works with Python-only stacks (stacks='python') and mixed C++/Python
 * stacks (stacks='all'). Frames are innermost first. */
#include <string.h>
#include "../snapshot/snapshot_int.h"
#include "analyze.h"

static int ends_with(const char *s, size_t n, const char *suf)
{
    size_t k = strlen(suf);
    return n >= k && !memcmp(s + n - k, suf, k);
}

static int is_python(const md_snapshot *s, const md_frame *f)
{
    return ends_with(md_strtab_get(&s->strs, f->filename),
                     md_strtab_len(&s->strs, f->filename), ".py");
}

/* torch's own Python, the standard library and frozen modules are not
 * "user" code; third-party model code (transformers, ...) is, because that
 * is where a model's memory is decided. */
/* torch's own Python: an installed torch (".../site-packages/torch/...")
 * or a source checkout ("torch/nn/..."); a virtualenv that merely lives
 * under a directory named torch is not torch. */
static int is_torch_file(const char *fn)
{
    if (strstr(fn, "-packages/torch/"))
        return 1;
    if (strstr(fn, "-packages/"))
        return 0; /* another installed package (transformers, ...) */
    return strstr(fn, "/torch/") != NULL || !strncmp(fn, "torch/", 6);
}

/* Code torch.compile generated: Inductor's output modules, named
 * c<52 base32 characters>.py, in its cache directory
 * (/tmp/torchinductor_USER by default, TORCHINDUCTOR_CACHE_DIR). torch
 * follows such a frame with the model's own source lines it came from. */
static int is_inductor_output(const char *fn)
{
    if (strstr(fn, "/torchinductor_"))
        return 1;
    const char *base = strrchr(fn, '/');
    base = base ? base + 1 : fn;
    size_t n = strlen(base);
    if (base[0] != 'c' || n < 1 + 40 + 3 || strcmp(base + n - 3, ".py")) /* a long hash */
        return 0;
    for (size_t i = 1; i < n - 3; i++)
        if (!((base[i] >= 'a' && base[i] <= 'z') || (base[i] >= '0' && base[i] <= '9')))
            return 0;
    return 1;
}

/* Whose code a frame is. torch's own Python, the standard library, frozen
 * modules, accelerate's wrappers (around the forward, the optimizer, the
 * model's loading) and memdiag's capture hooks are nobody's here; code
 * torch.compile generated is its own kind; third-party model code
 * (transformers, ...) is the user's, because that is where a model's
 * memory is decided. */
enum { OWNER_OTHER, OWNER_USER, OWNER_GENERATED };

static int owner(const md_snapshot *s, const md_frame *f)
{
    if (!is_python(s, f))
        return OWNER_OTHER;
    const char *fn = md_strtab_get(&s->strs, f->filename);
    if (is_inductor_output(fn))
        return OWNER_GENERATED;
    if (is_torch_file(fn) || fn[0] == '<' || strstr(fn, "/memdiag/runtime.py") ||
        strstr(fn, "-packages/accelerate/") || strstr(fn, "-packages/safetensors/"))
        return OWNER_OTHER; /* accelerate wraps the model's forward and the optimizer;
                               safetensors' loader: the line that called it is the site */
    if (strstr(fn, "/lib/python3") && !strstr(fn, "-packages/"))
        return OWNER_OTHER; /* standard library */
    return OWNER_USER;
}

/* The innermost user frame; without one, the innermost frame of code
 * torch.compile generated (a CUDA-graphed backward has no model lines
 * after it), which still names the kernel's buffer. */
const md_frame *md_user_frame(const md_snapshot *s, uint32_t stack)
{
    size_t n;
    const uint32_t *ids = md_snapshot_stack(s, stack, &n);
    const md_frame *generated = NULL;
    for (size_t i = 0; i < n; i++) {
        const md_frame *f = &s->frames[ids[i]];
        int o = owner(s, f);
        if (o == OWNER_USER)
            return f;
        if (o == OWNER_GENERATED && !generated)
            generated = f;
    }
    return generated;
}

const md_frame *md_stack_user_frame(md_stack_cache *c, const md_snapshot *s, uint32_t stack)
{
    if (stack >= c->n || !c->user)
        return md_user_frame(s, stack);
    if (!c->user[stack]) {
        const md_frame *f = md_user_frame(s, stack);
        c->user[stack] = f ? (uint32_t)(f - s->frames) + 1 : UINT32_MAX;
    }
    return c->user[stack] == UINT32_MAX ? NULL : &s->frames[c->user[stack] - 1];
}

static int frame_in(const md_snapshot *s, const md_frame *f, const char *dir)
{
    return strstr(md_strtab_get(&s->strs, f->filename), dir) != NULL;
}

static int name_is(const md_snapshot *s, const md_frame *f, const char *name)
{
    return !strcmp(md_strtab_get(&s->strs, f->name), name);
}

/* Frame facts classify needs beyond the tags: a Python frame, and
 * autograd.Function.apply, which is a custom function's forward when user
 * code calls it and its backward when the autograd engine does (then it is
 * the stack's outermost Python frame: the engine thread has no callers in
 * Python). torch.compile's forward runs inside one such apply. */
#define FT_PYTHON 0x10000000u
#define FT_FUNCTION_APPLY 0x20000000u
#define FT_SCRIPT 0x40000000u /* the user's own script (md_script_frame) */
#define FT_INTERNAL (FT_PYTHON | FT_FUNCTION_APPLY | FT_SCRIPT)

/* What one frame says about the phase (see classify). */
/* "Attention"/"attention" in a class or file name, attn in a module's */
static int mentions_attention(const char *s)
{
    return strstr(s, "ttention") || strstr(s, "attn") || strstr(s, "scaled_dot_product");
}

/* The functions a loss over logits runs in (torch's and transformers'). */
static int loss_name(const char *nm)
{
    static const char *const names[] = {"cross_entropy", "nll_loss", "log_softmax",
                                        "ForCausalLMLoss", "fixed_cross_entropy",
                                        "ForMaskedLMLoss", "loss_function"};
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++)
        if (!strcmp(nm, names[k]))
            return 1;
    return 0;
}

/* Weights made on the GPU itself, with no .to(device) after: a torch.nn
 * module's constructor (device=..., or inside `with torch.device(...)`, as
 * torchtitan and Lightning Fabric's init_module build), or a pretrained
 * model loaded straight onto the device (transformers' from_pretrained with
 * a device_map, its loader's worker threads, accelerate's dispatch). */
static int made_on_device(const md_snapshot *s, const md_frame *f)
{
    if (frame_in(s, f, "torch/nn/modules/"))
        return name_is(s, f, "__init__");
    if (frame_in(s, f, "transformers/core_model_loading.py"))
        return 1;
    if (frame_in(s, f, "transformers/modeling_utils.py"))
        return name_is(s, f, "from_pretrained") || name_is(s, f, "_load_pretrained_model") ||
               name_is(s, f, "_load_state_dict_into_meta_model");
    return frame_in(s, f, "accelerate/utils/modeling.py") &&
           name_is(s, f, "set_module_tensor_to_device");
}

/* torch_geometric's message passing works per edge where it gathers node
 * features for every edge (collect, _index_select_safe, _lift), makes the
 * messages (a conv's message, edge_update) or normalizes over edges
 * (utils.softmax); its layers' own forward and the sums into the nodes
 * (aggregate, a fused message_and_aggregate) are per node. */
static unsigned per_edge(const md_snapshot *s, const md_frame *f)
{
    if (frame_in(s, f, "torch_geometric/utils/_softmax.py"))
        return MD_TAG_PER_EDGE | MD_TAG_EDGE_SOFTMAX;
    return name_is(s, f, "message") || name_is(s, f, "edge_update") || name_is(s, f, "collect") ||
                   name_is(s, f, "_index_select_safe") || name_is(s, f, "_lift")
               ? MD_TAG_PER_EDGE
               : 0;
}

/* What a C++ frame (stacks="all") says that Python frames may not: a
 * softmax's forward (`attn.softmax(-1)`, the Tensor method, leaves no
 * Python frame), and scaled_dot_product_attention's math kernel. */
static unsigned cpp_frame_tags(const char *nm)
{
    if (!strstr(nm, "softmax") && !strstr(nm, "_attention_math"))
        return 0;
    if (strstr(nm, "_scaled_dot_product_attention_math"))
        return MD_TAG_SDPA_MATH;
    return (strstr(nm, "structured__softmax") || strstr(nm, "structured_softmax_cuda")) &&
                   !strstr(nm, "backward")
               ? MD_TAG_SOFTMAX
               : 0;
}

/* What a C++ frame's name says of the phase: the autograd engine,
 * cuBLAS/cuDNN workspace, gradient accumulation and DDP's buckets. Each
 * group's words are looked for only where a part they share is there. */
static unsigned cpp_phase_tags(const char *nm)
{
    unsigned tags = 0;
    int accum = strstr(nm, "AccumulateGrad") != NULL;
    if (accum || (strstr(nm, "autograd::") &&
                  (strstr(nm, "autograd::Engine") || strstr(nm, "autograd::engine"))))
        tags |= MD_TAG_BACKWARD;
    if (strstr(nm, "orkspace") &&
        (strstr(nm, "setWorkspaceForHandle") || strstr(nm, "getCUDABlasLtWorkspace") ||
         strstr(nm, "cublasLtWorkspace") || strstr(nm, "cudnn")))
        tags |= MD_TAG_WORKSPACE;
    if (accum || (strstr(nm, "Reducer::") && (strstr(nm, "Reducer::initialize_buckets") ||
                                              strstr(nm, "Reducer::rebuild_buckets"))))
        tags |= MD_TAG_GRAD_ACCUM;
    return tags;
}

static unsigned frame_tags(const md_snapshot *s, const md_frame *f)
{
    const char *nm = md_strtab_get(&s->strs, f->name);
    unsigned tags = 0;
    if (mentions_attention(nm) || mentions_attention(md_strtab_get(&s->strs, f->filename)))
        tags |= MD_TAG_ATTENTION;
    /* "attention" only where "ttention" is, addmm and bmm only where "mm" is:
     * a C++ frame's name is a signature of ~230 characters, and each strstr
     * goes over all of it */
    if (!strcmp(nm, "linear") || strstr(nm, "matmul") ||
        (strstr(nm, "mm") && (!strcmp(nm, "mm") || strstr(nm, "addmm") || strstr(nm, "bmm"))) ||
        ((tags & MD_TAG_ATTENTION) && strstr(nm, "attention")) || strstr(nm, "in_projection"))
        tags |= MD_TAG_MATMUL;
    tags |= loss_name(nm) ? MD_TAG_LOSS : 0;
    /* scaled_dot_product_attention, transformers' sdpa_attention_forward,
     * FlexAttention: kernels that keep no seq x seq matrix */
    if ((tags & MD_TAG_ATTENTION) && (strstr(nm, "scaled_dot_product") || strstr(nm, "sdpa") ||
                                      !strcmp(nm, "flex_attention")))
        tags |= MD_TAG_SDPA;
    if (!strcmp(nm, "nested_concat") || !strcmp(nm, "torch_pad_and_concatenate"))
        tags |= MD_TAG_EVAL_GATHER;
    if (!is_python(s, f)) {
        tags |= cpp_frame_tags(nm);
    } else {
        tags |= FT_PYTHON;
        if (owner(s, f) == OWNER_USER && !frame_in(s, f, "-packages/"))
            tags |= FT_SCRIPT;
        if (frame_in(s, f, "torch/optim/"))
            tags |= name_is(s, f, "zero_grad") ? MD_TAG_ZERO_GRAD : MD_TAG_OPTIM;
        else if (name_is(s, f, "zero_grad"))
            tags |= MD_TAG_ZERO_GRAD;
        else if (frame_in(s, f, "torch/autograd/__init__.py"))
            tags |= MD_TAG_BACKWARD | (name_is(s, f, "grad")       ? MD_TAG_GRAD_CALL
                                       : name_is(s, f, "backward") ? MD_TAG_BACKWARD_CALL
                                                                   : 0);
        else if (frame_in(s, f, "torch/autograd/graph.py") &&
                 name_is(s, f, "_engine_run_backward"))
            tags |= MD_TAG_BACKWARD;
        else if (frame_in(s, f, "torch/_tensor.py") && name_is(s, f, "backward"))
            tags |= MD_TAG_BACKWARD | MD_TAG_BACKWARD_CALL;
        else if (frame_in(s, f, "amp/grad_scaler.py"))
            tags |= MD_TAG_SCALER;
        else if (frame_in(s, f, "torchdiffeq/_impl/"))
            tags |= MD_TAG_ODE;
        else if (frame_in(s, f, "/gpytorch/") || frame_in(s, f, "/linear_operator/"))
            tags |= MD_TAG_GP;
        else if (frame_in(s, f, "/torch_geometric/"))
            tags |= per_edge(s, f);
        else if (frame_in(s, f, "transformers/generation/logits_process.py"))
            tags |= MD_TAG_GEN_SCORES;
        else if (frame_in(s, f, "torch/serialization.py") && name_is(s, f, "load"))
            tags |= MD_TAG_TORCH_LOAD;
        else if (frame_in(s, f, "torch/nn/functional.py"))
            tags |= name_is(s, f, "multi_head_attention_forward") ? MD_TAG_MHA
                    : name_is(s, f, "softmax")                    ? MD_TAG_SOFTMAX
                                                                  : 0;
        else if (frame_in(s, f, "torch/nn/parallel/data_parallel.py") ||
                 frame_in(s, f, "torch/nn/parallel/parallel_apply.py") ||
                 frame_in(s, f, "torch/nn/parallel/replicate.py"))
            tags |= MD_TAG_DATAPARALLEL | (frame_in(s, f, "data_parallel.py") &&
                                           name_is(s, f, "gather") ? MD_TAG_DP_GATHER : 0);
        else if (frame_in(s, f, "torch/autograd/function.py") && name_is(s, f, "apply"))
            tags |= FT_FUNCTION_APPLY;
        else if (frame_in(s, f, "torch/nn/modules/module.py") &&
                 (name_is(s, f, "_call_impl") || name_is(s, f, "_wrapped_call_impl")))
            tags |= MD_TAG_FORWARD;
        else if (frame_in(s, f, "torch/nn/modules/module.py") &&
                 (name_is(s, f, "_apply") || name_is(s, f, "to") || name_is(s, f, "cuda")))
            tags |= MD_TAG_MODEL_INIT;
        else if (made_on_device(s, f))
            tags |= MD_TAG_MODEL_INIT;
        else if ((frame_in(s, f, "torch/nn/modules/lazy.py") && name_is(s, f, "_infer_parameters")) ||
                 (frame_in(s, f, "torch/nn/parameter.py") && name_is(s, f, "materialize")))
            tags |= MD_TAG_MODEL_INIT; /* a LazyModule's weights, made by its first forward */
        else if (frame_in(s, f, "torch/_functorch/functional_call.py") &&
                 name_is(s, f, "stack_module_state"))
            tags |= MD_TAG_MODEL_INIT; /* an ensemble's weights, stacked for vmap */
        else if (frame_in(s, f, "torch/nn/parallel/distributed.py") &&
                 (name_is(s, f, "_pre_forward") || name_is(s, f, "_ddp_init_helper")))
            tags |= MD_TAG_GRAD_ACCUM; /* DDP's gradient buckets, (re)built there */
        else if (frame_in(s, f, "torch/distributed/") && /* sharded parameters: */
                 (name_is(s, f, "fully_shard") ||           /* FSDP2 */
                  (frame_in(s, f, "fully_sharded_data_parallel.py") && name_is(s, f, "__init__")) ||
                  name_is(s, f, "distribute_tensor") ||     /* DTensor: tensor parallelism */
                  name_is(s, f, "distribute_module") || name_is(s, f, "parallelize_module")))
            tags |= MD_TAG_MODEL_INIT | MD_TAG_SHARDED;
        return tags;
    }
    return tags | cpp_phase_tags(nm);
}

/* A frame's tags through the cache. */
static unsigned cached_frame_tags(md_stack_cache *c, const md_snapshot *s, uint32_t f)
{
    if (f >= c->nframes)
        return frame_tags(s, &s->frames[f]);
    if (!(c->ftags[f] & MD_TAG_KNOWN))
        c->ftags[f] = (uint32_t)(frame_tags(s, &s->frames[f]) | MD_TAG_KNOWN);
    return c->ftags[f] & ~MD_TAG_KNOWN;
}

/* Phase a stack belongs to: the union of its frames' tags (optimizer
 * code, zero_grad, autograd backward, module forward, workspace). Frame
 * tags are cached too: stacks share most frames. Kept out of line: inlined,
 * its register saves were most of md_stack_tags' cost on every cache hit
 * (a trace's events ask once or twice each). */
__attribute__((noinline)) static unsigned classify(md_stack_cache *c, const md_snapshot *s, uint32_t stack)
{
    size_t n;
    const uint32_t *ids = md_snapshot_stack(s, stack, &n);
    unsigned tags = 0, outer_py = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned t = cached_frame_tags(c, s, ids[i]);
        tags |= t;
        if (t & FT_PYTHON)
            outer_py = t;
    }
    if (outer_py & FT_FUNCTION_APPLY)
        tags |= MD_TAG_BACKWARD; /* the engine ran a custom function's backward */
    return tags & ~FT_INTERNAL;
}

const md_frame *md_script_frame(md_stack_cache *c, const md_snapshot *s, uint32_t stack)
{
    size_t n;
    const uint32_t *ids = md_snapshot_stack(s, stack, &n);
    for (size_t i = 0; i < n; i++)
        if (cached_frame_tags(c, s, ids[i]) & FT_SCRIPT)
            return &s->frames[ids[i]];
    return NULL;
}

unsigned md_stack_tags_first(md_stack_cache *c, const md_snapshot *s, uint32_t stack)
{
    uint32_t t = (uint32_t)(classify(c, s, stack) | MD_TAG_KNOWN);
    c->tags[stack] = t;
    return t & ~MD_TAG_KNOWN;
}

/* "torch/optim/adamw.py" -> "AdamW", from the file the optimizer runs in. */
const char *md_optimizer_from_stack(const md_snapshot *s, uint32_t stack)
{
    static const struct { const char *file, *name; } known[] = {
        {"/adamw.py", "AdamW"}, {"/adam.py", "Adam/AdamW"}, {"/sgd.py", "SGD"},
        {"/adagrad.py", "Adagrad"}, {"/rmsprop.py", "RMSprop"},
        {"/adamax.py", "Adamax"}, {"/nadam.py", "NAdam"}, {"/radam.py", "RAdam"},
        {"/adadelta.py", "Adadelta"}, {"/lbfgs.py", "LBFGS"}, {"/asgd.py", "ASGD"},
        {"/rprop.py", "Rprop"}, {"/sparse_adam.py", "SparseAdam"}, {"/adafactor.py", "Adafactor"},
        {"/_muon.py", "Muon"}};
    size_t n;
    const uint32_t *ids = md_snapshot_stack(s, stack, &n);
    const char *found = NULL;
    /* the outermost optimizer file names the class; since torch 2.x AdamW
     * is Adam with decoupled weight decay and leaves only adam.py frames,
     * so that file can only say "Adam/AdamW" */
    for (size_t i = 0; i < n; i++) {
        const char *fn = md_strtab_get(&s->strs, s->frames[ids[i]].filename);
        if (!strstr(fn, "torch/optim/"))
            continue;
        for (size_t k = 0; k < sizeof known / sizeof known[0]; k++)
            if (strstr(fn, known[k].file) && !(found && !strcmp(found, "AdamW")))
                found = known[k].name;
    }
    return found;
}

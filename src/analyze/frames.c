/* frames.c - what a stack says: whose code allocated (first user frame),
 * which training phase it ran in, and whether it is a library workspace.
 * Works with Python-only stacks (stacks='python') and mixed C++/Python
 * stacks (stacks='all'). Frames are innermost first. */
#include <stdlib.h>
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

/* A Python file's owner (fn ends in ".py"). */
static int owner_of_file(const char *fn)
{
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

static int owner(const md_snapshot *s, const md_frame *f)
{
    return is_python(s, f) ? owner_of_file(md_strtab_get(&s->strs, f->filename)) : OWNER_OTHER;
}

/* The innermost user frame; without one, the innermost frame of code
 * torch.compile generated (a CUDA-graphed backward has no model lines
 * after it), which still names the kernel's buffer. */
const md_frame *md_user_frame(const md_snapshot *s, uint32_t stack)
{
    md_stack_ids ids = md_snapshot_stack(s, stack);
    const md_frame *generated = NULL;
    for (size_t i = 0; i < ids.n; i++) {
        const md_frame *f = &s->frames[md_stack_id(ids, i)];
        int o = owner(s, f);
        if (o == OWNER_USER)
            return f;
        if (o == OWNER_GENERATED && !generated)
            generated = f;
    }
    return generated;
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
#define FT_USER 0x08000000u /* the user's code (owner): md_user_frame's answer */
#define FT_GENERATED 0x80000000u /* code torch.compile generated (owner) */
#define FT_INTERNAL (FT_PYTHON | FT_FUNCTION_APPLY | FT_SCRIPT | FT_USER | FT_GENERATED)

/* What one frame says about the phase (see classify). */
/* "Attention"/"attention" in a class or file name, attn in a module's */
static int mentions_attention(const char *s)
{
    return strstr(s, "ttention") || strstr(s, "attn") || strstr(s, "scaled_dot_product");
}

/* ---- what a frame's file says, once per file ------------------------------ */

/* The file predicates frame_tags tests, as bits of one word computed once
 * per file name: a snapshot's frames share a few dozen files, and each
 * predicate is a search over a path of ~80 characters. */
enum {
    FB_PY = 1, /* a Python file */
    FB_OWNER_USER = 1 << 1,
    FB_OWNER_GENERATED = 1 << 2,
    FB_ATTENTION = 1 << 3,
    FB_PACKAGES = 1 << 4, /* "-packages/": installed, not the user's script */
    FB_OPTIM = 1 << 5,
    FB_AUTOGRAD_INIT = 1 << 6,
    FB_AUTOGRAD_GRAPH = 1 << 7,
    FB_TENSOR = 1 << 8,
    FB_GRAD_SCALER = 1 << 9,
    FB_TORCHDIFFEQ = 1 << 10,
    FB_GP = 1 << 11, /* gpytorch, linear_operator */
    FB_GEOMETRIC = 1 << 12,
    FB_GEOMETRIC_SOFTMAX = 1 << 13,
    FB_LOGITS_PROCESS = 1 << 14,
    FB_SERIALIZATION = 1 << 15,
    FB_FUNCTIONAL = 1 << 16,
    FB_DP = 1 << 17, /* torch/nn/parallel's data_parallel, parallel_apply, replicate */
    FB_DP_FILE = 1 << 18, /* data_parallel.py */
    FB_AUTOGRAD_FUNCTION = 1 << 19,
    FB_MODULE = 1 << 20, /* torch/nn/modules/module.py */
    FB_MODULES = 1 << 21, /* torch/nn/modules/ */
    FB_CORE_MODEL_LOADING = 1 << 22,
    FB_MODELING_UTILS = 1 << 23,
    FB_ACCELERATE_MODELING = 1 << 24,
    FB_LAZY = 1 << 25,
    FB_PARAMETER = 1 << 26,
    FB_FUNCTIONAL_CALL = 1 << 27,
    FB_DDP = 1 << 28,
    FB_DISTRIBUTED = 1 << 29,
    FB_FSDP_FILE = 1 << 30,
};

static uint32_t file_bits(const md_snapshot *s, uint32_t file)
{
    static const struct { const char *dir; uint32_t bit; } dirs[] = {
        {"-packages/", FB_PACKAGES},
        {"torch/optim/", FB_OPTIM},
        {"torch/autograd/__init__.py", FB_AUTOGRAD_INIT},
        {"torch/autograd/graph.py", FB_AUTOGRAD_GRAPH},
        {"torch/_tensor.py", FB_TENSOR},
        {"amp/grad_scaler.py", FB_GRAD_SCALER},
        {"torchdiffeq/_impl/", FB_TORCHDIFFEQ},
        {"/gpytorch/", FB_GP},
        {"/linear_operator/", FB_GP},
        {"/torch_geometric/", FB_GEOMETRIC},
        {"torch_geometric/utils/_softmax.py", FB_GEOMETRIC_SOFTMAX},
        {"transformers/generation/logits_process.py", FB_LOGITS_PROCESS},
        {"torch/serialization.py", FB_SERIALIZATION},
        {"torch/nn/functional.py", FB_FUNCTIONAL},
        {"torch/nn/parallel/data_parallel.py", FB_DP},
        {"torch/nn/parallel/parallel_apply.py", FB_DP},
        {"torch/nn/parallel/replicate.py", FB_DP},
        {"data_parallel.py", FB_DP_FILE},
        {"torch/autograd/function.py", FB_AUTOGRAD_FUNCTION},
        {"torch/nn/modules/module.py", FB_MODULE},
        {"torch/nn/modules/", FB_MODULES},
        {"transformers/core_model_loading.py", FB_CORE_MODEL_LOADING},
        {"transformers/modeling_utils.py", FB_MODELING_UTILS},
        {"accelerate/utils/modeling.py", FB_ACCELERATE_MODELING},
        {"torch/nn/modules/lazy.py", FB_LAZY},
        {"torch/nn/parameter.py", FB_PARAMETER},
        {"torch/_functorch/functional_call.py", FB_FUNCTIONAL_CALL},
        {"torch/nn/parallel/distributed.py", FB_DDP},
        {"torch/distributed/", FB_DISTRIBUTED},
        {"fully_sharded_data_parallel.py", FB_FSDP_FILE},
    };
    const char *fn = md_strtab_get(&s->strs, file);
    uint32_t bits = mentions_attention(fn) ? FB_ATTENTION : 0;
    if (!ends_with(fn, md_strtab_len(&s->strs, file), ".py"))
        return bits; /* frame_tags asks the rest of Python files only */
    bits |= FB_PY;
    int o = owner_of_file(fn);
    bits |= o == OWNER_USER ? FB_OWNER_USER : o == OWNER_GENERATED ? FB_OWNER_GENERATED : 0;
    for (size_t k = 0; k < sizeof dirs / sizeof dirs[0]; k++)
        if (!(bits & dirs[k].bit) && strstr(fn, dirs[k].dir))
            bits |= dirs[k].bit;
    return bits;
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
static int made_on_device(const md_snapshot *s, const md_frame *f, uint32_t fb)
{
    if (fb & FB_MODULES)
        return name_is(s, f, "__init__");
    if (fb & FB_CORE_MODEL_LOADING)
        return 1;
    if (fb & FB_MODELING_UTILS)
        return name_is(s, f, "from_pretrained") || name_is(s, f, "_load_pretrained_model") ||
               name_is(s, f, "_load_state_dict_into_meta_model");
    return (fb & FB_ACCELERATE_MODELING) &&
           name_is(s, f, "set_module_tensor_to_device");
}

/* torch_geometric's message passing works per edge where it gathers node
 * features for every edge (collect, _index_select_safe, _lift), makes the
 * messages (a conv's message, edge_update) or normalizes over edges
 * (utils.softmax); its layers' own forward and the sums into the nodes
 * (aggregate, a fused message_and_aggregate) are per node. */
static unsigned per_edge(const md_snapshot *s, const md_frame *f, uint32_t fb)
{
    if (fb & FB_GEOMETRIC_SOFTMAX)
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

/* A frame's tags, fb its file's bits (file_bits). */
static unsigned frame_tags(const md_snapshot *s, const md_frame *f, uint32_t fb)
{
    const char *nm = md_strtab_get(&s->strs, f->name);
    unsigned tags = 0;
    if ((fb & FB_ATTENTION) || mentions_attention(nm))
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
    if (!(fb & FB_PY)) {
        tags |= cpp_frame_tags(nm);
    } else {
        tags |= FT_PYTHON | (fb & FB_OWNER_USER ? FT_USER : 0) |
                (fb & FB_OWNER_GENERATED ? FT_GENERATED : 0);
        if ((fb & FB_OWNER_USER) && !(fb & FB_PACKAGES))
            tags |= FT_SCRIPT;
        if (fb & FB_OPTIM)
            tags |= name_is(s, f, "zero_grad") ? MD_TAG_ZERO_GRAD : MD_TAG_OPTIM;
        else if (name_is(s, f, "zero_grad"))
            tags |= MD_TAG_ZERO_GRAD;
        else if (fb & FB_AUTOGRAD_INIT)
            tags |= MD_TAG_BACKWARD | (name_is(s, f, "grad")       ? MD_TAG_GRAD_CALL
                                       : name_is(s, f, "backward") ? MD_TAG_BACKWARD_CALL
                                                                   : 0);
        else if ((fb & FB_AUTOGRAD_GRAPH) &&
                 name_is(s, f, "_engine_run_backward"))
            tags |= MD_TAG_BACKWARD;
        else if ((fb & FB_TENSOR) && name_is(s, f, "backward"))
            tags |= MD_TAG_BACKWARD | MD_TAG_BACKWARD_CALL;
        else if (fb & FB_GRAD_SCALER)
            tags |= MD_TAG_SCALER;
        else if (fb & FB_TORCHDIFFEQ)
            tags |= MD_TAG_ODE;
        else if (fb & FB_GP)
            tags |= MD_TAG_GP;
        else if (fb & FB_GEOMETRIC)
            tags |= per_edge(s, f, fb);
        else if (fb & FB_LOGITS_PROCESS)
            tags |= MD_TAG_GEN_SCORES;
        else if ((fb & FB_SERIALIZATION) && name_is(s, f, "load"))
            tags |= MD_TAG_TORCH_LOAD;
        else if (fb & FB_FUNCTIONAL)
            tags |= name_is(s, f, "multi_head_attention_forward") ? MD_TAG_MHA
                    : name_is(s, f, "softmax")                    ? MD_TAG_SOFTMAX
                                                                  : 0;
        else if (fb & FB_DP)
            tags |= MD_TAG_DATAPARALLEL | ((fb & FB_DP_FILE) &&
                                           name_is(s, f, "gather") ? MD_TAG_DP_GATHER : 0);
        else if ((fb & FB_AUTOGRAD_FUNCTION) && name_is(s, f, "apply"))
            tags |= FT_FUNCTION_APPLY;
        else if ((fb & FB_MODULE) &&
                 (name_is(s, f, "_call_impl") || name_is(s, f, "_wrapped_call_impl")))
            tags |= MD_TAG_FORWARD;
        else if ((fb & FB_MODULE) &&
                 (name_is(s, f, "_apply") || name_is(s, f, "to") || name_is(s, f, "cuda")))
            tags |= MD_TAG_MODEL_INIT;
        else if (made_on_device(s, f, fb))
            tags |= MD_TAG_MODEL_INIT;
        else if (((fb & FB_LAZY) && name_is(s, f, "_infer_parameters")) ||
                 ((fb & FB_PARAMETER) && name_is(s, f, "materialize")))
            tags |= MD_TAG_MODEL_INIT; /* a LazyModule's weights, made by its first forward */
        else if ((fb & FB_FUNCTIONAL_CALL) &&
                 name_is(s, f, "stack_module_state"))
            tags |= MD_TAG_MODEL_INIT; /* an ensemble's weights, stacked for vmap */
        else if ((fb & FB_DDP) &&
                 (name_is(s, f, "_pre_forward") || name_is(s, f, "_ddp_init_helper")))
            tags |= MD_TAG_GRAD_ACCUM; /* DDP's gradient buckets, (re)built there */
        else if ((fb & FB_DISTRIBUTED) && /* sharded parameters: */
                 (name_is(s, f, "fully_shard") ||           /* FSDP2 */
                  ((fb & FB_FSDP_FILE) && name_is(s, f, "__init__")) ||
                  name_is(s, f, "distribute_tensor") ||     /* DTensor: tensor parallelism */
                  name_is(s, f, "distribute_module") || name_is(s, f, "parallelize_module")))
            tags |= MD_TAG_MODEL_INIT | MD_TAG_SHARDED;
        return tags;
    }
    return tags | cpp_phase_tags(nm);
}

/* Files the map of file bits is made for at first: without a repeat, as
 * many as frames, up to this; more grow it. */
#define FILES_HINT 4096

/* Every frame's tags, each file's bits computed once (c->files: file name
 * id -> bits; without it, per frame: the same answers). */
static void all_frame_tags(md_stack_cache *c, const md_snapshot *s)
{
    int mapped = c->files.cap != 0;
    for (size_t f = 0; f < c->nframes; f++) {
        const md_frame *fr = &s->frames[f];
        uint64_t fb;
        if (!mapped || !md_map_get(&c->files, fr->filename, &fb)) {
            fb = file_bits(s, fr->filename);
            mapped = mapped && !md_map_put(&c->files, fr->filename, fb);
        }
        c->ftags[f] = frame_tags(s, fr, (uint32_t)fb);
    }
    md_map_free(&c->files); /* its work is done */
}

int md_stack_cache_new(md_stack_cache *c, const md_snapshot *s)
{
    memset(c, 0, sizeof *c);
    c->n = s->nstacks;
    c->nframes = s->nframes;
    c->tags = calloc(c->n ? c->n : 1, sizeof *c->tags);
    c->user = calloc(c->n ? c->n : 1, sizeof *c->user);
    c->ftags = malloc((c->nframes ? c->nframes : 1) * sizeof *c->ftags);
    if (!c->tags || !c->user || !c->ftags) {
        md_stack_cache_free(c);
        return -1;
    }
    if (md_map_init(&c->files, c->nframes < FILES_HINT ? c->nframes : FILES_HINT))
        memset(&c->files, 0, sizeof c->files); /* per frame, then */
    return 0;
}

void md_stack_cache_free(md_stack_cache *c)
{
    free(c->tags);
    free(c->ftags);
    free(c->user);
    md_map_free(&c->files);
    memset(c, 0, sizeof *c);
}

/* Phase a stack belongs to: the union of its frames' tags (optimizer
 * code, zero_grad, autograd backward, module forward, workspace). Kept out
 * of line: inlined, its register saves were most of md_stack_tags' cost
 * on every cache hit (a trace's events ask once or twice each). */
__attribute__((noinline)) static unsigned classify(md_stack_cache *c, const md_snapshot *s, uint32_t stack)
{
    md_stack_ids ids = md_snapshot_stack(s, stack);
    const uint32_t *ft = c->ftags;
    unsigned tags = 0, outer_py = 0;
/* the loop twice, by the ids' width: a test of it inside cost a tenth. The
 * frames' tags or'ed four at a time; the outermost Python frame found from
 * the outer end, a frame or two in (one pass doing both took 7
 * instructions a frame) */
#define CLASSIFY(type)                                                   \
    do {                                                                 \
        const type *id = (const type *)ids.ids;                          \
        unsigned t0 = 0, t1 = 0, t2 = 0, t3 = 0;                         \
        size_t i = 0;                                                    \
        for (; i + 4 <= ids.n; i += 4)                                   \
            t0 |= ft[id[i]], t1 |= ft[id[i + 1]], t2 |= ft[id[i + 2]],   \
                t3 |= ft[id[i + 3]];                                     \
        for (; i < ids.n; i++)                                           \
            t0 |= ft[id[i]];                                             \
        tags = t0 | t1 | t2 | t3;                                        \
        for (size_t k = ids.n; k-- > 0 && (tags & FT_PYTHON);)           \
            if (ft[id[k]] & FT_PYTHON) {                                 \
                outer_py = ft[id[k]];                                    \
                break;                                                   \
            }                                                            \
    } while (0)
    if (ids.wide)
        CLASSIFY(uint32_t);
    else
        CLASSIFY(uint16_t);
#undef CLASSIFY
    if (outer_py & FT_FUNCTION_APPLY)
        tags |= MD_TAG_BACKWARD; /* the engine ran a custom function's backward */
    return tags & ~FT_INTERNAL;
}

const md_frame *md_script_frame(md_stack_cache *c, const md_snapshot *s, uint32_t stack)
{
    md_stack_ids ids = md_snapshot_stack(s, stack);
    for (size_t i = 0; i < ids.n; i++) {
        uint32_t id = md_stack_id(ids, i);
        if (c->ftags[id] & FT_SCRIPT)
            return &s->frames[id];
    }
    return NULL;
}

/* md_user_frame by the frames' tags: frame id + 1, or UINT32_MAX if none. */
static uint32_t user_frame_by_tags(const md_stack_cache *c, const md_snapshot *s, uint32_t stack)
{
    md_stack_ids ids = md_snapshot_stack(s, stack);
    uint32_t generated = UINT32_MAX;
    for (size_t i = 0; i < ids.n; i++) {
        uint32_t id = md_stack_id(ids, i), t = c->ftags[id];
        if (t & FT_USER)
            return id + 1;
        if ((t & FT_GENERATED) && generated == UINT32_MAX)
            generated = id + 1;
    }
    return generated;
}

const md_frame *md_stack_user_frame(md_stack_cache *c, const md_snapshot *s, uint32_t stack)
{
    if (stack >= c->n)
        return md_user_frame(s, stack);
    if (!c->user[stack])
        c->user[stack] = user_frame_by_tags(c, s, stack);
    return c->user[stack] == UINT32_MAX ? NULL : &s->frames[c->user[stack] - 1];
}

unsigned md_stack_tags_first(md_stack_cache *c, const md_snapshot *s, uint32_t stack)
{
    uint32_t t = (uint32_t)(classify(c, s, stack) | MD_TAG_KNOWN);
    c->tags[stack] = t;
    return t & ~MD_TAG_KNOWN;
}

/* The work from which classifying every stack outlasts a thread's start
 * (~50 us), in frames of stacks (some 16 instructions each): a frame's own
 * tags count as 64 of them (a C++ signature's searches take ~3 600
 * instructions, a Python frame's a few hundred). The seed exercise's
 * 380 frames in 3 200 frames of stacks take 1.45 M instructions. */
#define DEAR_STACK_FRAMES 16384
#define FRAME_TAGS_WEIGHT 64

int md_stack_cache_dear(const md_snapshot *s)
{
    return s->nsframes + FRAME_TAGS_WEIGHT * (size_t)s->nframes >= DEAR_STACK_FRAMES;
}

void md_stack_cache_fill(md_stack_cache *c, const md_snapshot *s, int stacks)
{
    all_frame_tags(c, s);
    for (uint32_t k = 1; stacks && k < c->n; k++) {
        c->tags[k] = (uint32_t)(classify(c, s, k) | MD_TAG_KNOWN);
        c->user[k] = user_frame_by_tags(c, s, k);
    }
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
    md_stack_ids ids = md_snapshot_stack(s, stack);
    const char *found = NULL;
    /* the outermost optimizer file names the class; since torch 2.x AdamW
     * is Adam with decoupled weight decay and leaves only adam.py frames,
     * so that file can only say "Adam/AdamW" */
    for (size_t i = 0; i < ids.n; i++) {
        const char *fn = md_strtab_get(&s->strs, s->frames[md_stack_id(ids, i)].filename);
        if (!strstr(fn, "torch/optim/"))
            continue;
        for (size_t k = 0; k < sizeof known / sizeof known[0]; k++)
            if (strstr(fn, known[k].file) && !(found && !strcmp(found, "AdamW")))
                found = known[k].name;
    }
    return found;
}

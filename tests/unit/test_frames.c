/* test_frames.c - what a C++ frame's name says of the phase (analyze/
 * frames.c frame_tags): the autograd engine, cuBLAS/cuDNN workspace,
 * gradient accumulation and DDP's buckets, matmul-like and softmax kernels.
 * Each group's words are looked for only where a part they share is in the
 * name (a C++ frame's name is a signature of ~230 characters): near misses,
 * which hold a part but not a word, must stay untagged. One allocation per
 * name in tests/data/synthetic/frame_words.pickle (tests/gen/frame_words.py,
 * the same names in the same order). And every stack of every fixture
 * classified up front as one at a time (test_classified_ahead). */
#include "testutil.h"
#include "analyze/analyze.h"
#include "snapshot/snapshot_int.h"

typedef struct name_case {
    const char *starts; /* the name's first characters */
    unsigned must, must_not;
} name_case;

#define BWD MD_TAG_BACKWARD
#define WS MD_TAG_WORKSPACE
#define ACC MD_TAG_GRAD_ACCUM
#define MM MD_TAG_MATMUL
#define SM MD_TAG_SOFTMAX

static const name_case cases[] = {
    {"torch::autograd::Engine::evaluate_function", BWD, WS | ACC | MM},
    {"torch::autograd::engine::dispatch", BWD, WS | ACC},
    {"torch::autograd::AccumulateGrad::apply", BWD | ACC, WS},
    {"torch::autograd::Node::operator()", 0, BWD | ACC | WS}, /* autograd:: alone */
    {"at::cuda::getCUDABlasLtWorkspace", WS, BWD | ACC},
    {"at::cuda::(anonymous namespace)::setWorkspaceForHandle", WS, BWD},
    {"at::cuda::blas::cublasLtWorkspace", WS, BWD},
    {"at::native::cudnn_convolution_forward_workspace", WS, BWD},
    {"at::native::cudnn_convolution(", 0, WS}, /* cudnn without workspace */
    {"c10::cuda::CUDACachingAllocator::Native::getWorkspaceBytes", 0, WS}, /* orkspace alone */
    {"c10d::Reducer::initialize_buckets", ACC, BWD | WS},
    {"c10d::Reducer::rebuild_buckets", ACC, BWD},
    {"c10d::Reducer::autograd_hook", 0, ACC | BWD}, /* Reducer:: alone */
    {"at::native::structured_addmm_out_cuda", MM, SM},
    {"at::native::bmm_out_cuda", MM, 0},
    {"mm", MM, 0},
    {"c10d::ProcessGroupNCCL::allreduce_impl", 0, MM}, /* "mm" in "comm" only */
    {"at::native::(anonymous namespace)::structured_softmax_cuda_out_functional", SM, MM},
    {"at::native::structured__softmax_backward_data_out", 0, SM}, /* a backward */
    {"at::native::structured__softmax_out_functional", SM, 0},
    {"at::native::_scaled_dot_product_attention_math",
     MD_TAG_SDPA_MATH | MD_TAG_SDPA | MD_TAG_ATTENTION | MM, SM | BWD},
    {"at::native::matmul", MM, SM},
};

static void test_cpp_frame_names(void **st)
{
    (void)st;
    md_snapshot *s = load_ok("synthetic/frame_words.pickle");
    size_t n;
    const md_event *ev = md_snapshot_events(s, 0, &n);
    size_t ncases = sizeof cases / sizeof cases[0];
    assert_int_equal(n, ncases);
    md_stack_cache c;
    assert_int_equal(md_stack_cache_new(&c, s), 0);
    md_stack_cache_fill(&c, s, 0);
    for (size_t i = 0; i < n; i++) {
        md_stack_ids ids = md_snapshot_stack(s, ev[i].stack);
        size_t nf = ids.n;
        assert_int_equal(nf, 1);
        const char *name = md_snapshot_string(s, md_snapshot_frame(s, md_stack_id(ids, 0))->name);
        if (strncmp(name, cases[i].starts, strlen(cases[i].starts)))
            fail_msg("event %zu is %s, the case %s", i, name, cases[i].starts);
        unsigned t = md_stack_tags(&c, s, ev[i].stack);
        if ((t & cases[i].must) != cases[i].must || (t & cases[i].must_not))
            fail_msg("%s: tags %#x, must have %#x and not %#x", name, t, cases[i].must,
                     cases[i].must_not);
    }
    md_stack_cache_free(&c);
    md_snapshot_free(s);
}

typedef struct aside_tally {
    size_t files, stacks, tagged, users;
} aside_tally;

/* One snapshot: every stack classified up front (md_stack_cache_fill with
 * stacks, as the thread beside the replay does) gives what the analysis
 * asking stack by stack gives, and the user frame md_user_frame finds by
 * its own searches of each frame's file. */
static void classified_alike(const char *path, void *ctx)
{
    aside_tally *t = ctx;
    md_snapshot *s;
    md_err e;
    if (md_snapshot_load(path, &s, &e))
        return; /* the hostile inputs */
    md_stack_cache ahead, asked;
    assert_int_equal(md_stack_cache_new(&ahead, s), 0);
    assert_int_equal(md_stack_cache_new(&asked, s), 0);
    md_stack_cache_fill(&ahead, s, 1);
    md_stack_cache_fill(&asked, s, 0);
    for (uint32_t k = 1; k < s->nstacks; k++) {
        unsigned a = md_stack_tags(&ahead, s, k), b = md_stack_tags(&asked, s, k);
        const md_frame *direct = md_user_frame(s, k);
        if (a != b || md_stack_user_frame(&ahead, s, k) != direct ||
            md_stack_user_frame(&asked, s, k) != direct)
            fail_msg("%s: stack %u: tags %#x ahead, %#x asked; user frames differ: %d", path, k,
                     a, b, md_stack_user_frame(&ahead, s, k) != direct);
        t->tagged += a != 0;
        t->users += direct != NULL;
    }
    t->stacks += s->nstacks;
    t->files++;
    md_stack_cache_free(&ahead);
    md_stack_cache_free(&asked);
    md_snapshot_free(s);
}

static void test_classified_ahead(void **st)
{
    (void)st;
    char root[1024];
    aside_tally t = {0};
    each_snapshot(data_path("", root, sizeof root), classified_alike, &t);
    /* the fixtures' stacks: most in some phase, most with a user frame */
    assert_true(t.files > 300);
    assert_true(t.tagged > t.stacks / 4);
    assert_true(t.users > t.stacks / 4);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cpp_frame_names),
        cmocka_unit_test(test_classified_ahead),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

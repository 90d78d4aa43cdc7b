/* cuda_phases.cu - a plain CUDA program marking its own phases with
 * memdiag's C API (no PyTorch): it allocates "weights", then per step
 * "activations" and "gradients", and writes a sample after each phase,
 * with device-wide memory from NVML. Summarize it with
 *     memdiag summary cuda_phases.mdcap
 * Under `memdiag run -o DIR -- ./cuda_phases DIR/rank0.mdcap` the driver-level
 * trace of its cudaMalloc calls joins that file (tests/data/driver/cuda-api).
 * Build: nvcc -Iinclude examples/cuda_phases.cu -Lbuild -lmemdiag_capture -o cuda_phases */
#include <cstdio>
#include <cuda_runtime.h>
#include "memdiag.h"

static uint64_t live = 0, peak = 0;

static void *alloc(size_t n)
{
    void *p = nullptr;
    if (cudaMalloc(&p, n) != cudaSuccess) {
        fprintf(stderr, "cudaMalloc failed\n");
        return nullptr;
    }
    live += n;
    peak = live > peak ? live : peak;
    return p;
}

static void release(void *p, size_t n)
{
    cudaFree(p);
    live -= n;
}

static void sample(md_cap *c, const char *bus, int step, int phase)
{
    md_cap_sample s = {step, phase, live, live, peak, UINT64_MAX, UINT64_MAX, UINT64_MAX};
    md_nvml_memory(bus, &s.device_used, &s.device_total, &s.process_used);
    md_cap_write_sample(c, &s);
}

int main(int argc, char **argv)
{
    const char *out = argc > 1 ? argv[1] : "cuda_phases.mdcap";
    const size_t MiB = 1 << 20;
    char bus[32] = "";
    cudaDeviceGetPCIBusId(bus, sizeof bus, 0);
    md_cap *c;
    md_err err;
    if (md_cap_open(out, 1, &c, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return 2;
    }
    md_cap_meta(c, "rank", "0");
    md_cap_meta(c, "gpu", "cuda device 0");
    void *weights = alloc(256 * MiB);
    sample(c, bus, -1, MD_SP_AFTER_INPUT);
    void *kept[4] = {};
    for (int step = 0; step < 4; step++) {
        void *act = alloc(512 * MiB);
        sample(c, bus, step, MD_SP_AFTER_FORWARD);
        void *grad = alloc(256 * MiB);
        release(act, 512 * MiB);
        sample(c, bus, step, MD_SP_AFTER_BACKWARD);
        sample(c, bus, step, MD_SP_AFTER_OPTIMIZER_STEP);
        release(grad, 256 * MiB);
        kept[step] = alloc(64 * MiB); /* a deliberate leak: 64 MiB per step */
        sample(c, bus, step, MD_SP_AFTER_CLEAR_GRADIENTS);
        md_cap_step(c, step);
    }
    for (void *p : kept)
        release(p, 64 * MiB);
    release(weights, 256 * MiB);
    md_cap_close(c, 0);
    printf("wrote %s\n", out);
    return 0;
}

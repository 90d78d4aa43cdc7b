/* driver_cost.cu - what the driver-level tracer adds to each call it sees,
 * and that it adds nothing to the calls it does not: microseconds per
 * cudaMalloc/cudaFree pair, per cudaMallocAsync/cudaFreeAsync pair (a pool
 * hit: what cudaMallocAsync-backed PyTorch does per tensor), and per empty
 * kernel launch. Run it plain and with CUDA_INJECTION64_PATH set to
 * libmemdiag_capture.so (MEMDIAG_OUT=a directory); tests/gpu/driver.sh.
 *   nvcc -O2 -o driver_cost bench/driver_cost.cu */
#include <chrono>
#include <cstdio>
#include <cuda_runtime.h>

__global__ void empty() {}

static double us_since(std::chrono::steady_clock::time_point t0, int n)
{
    auto d = std::chrono::steady_clock::now() - t0;
    return std::chrono::duration<double, std::micro>(d).count() / n;
}

int main()
{
    cudaStream_t s;
    cudaStreamCreate(&s);
    void *p;
    cudaMallocAsync(&p, 1 << 20, s); /* the pool's first block: not timed */
    cudaFreeAsync(p, s);
    cudaStreamSynchronize(s);
    const int nsync = 300, nasync = 200000, nlaunch = 200000;
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < nsync; i++) {
        cudaMalloc(&p, 2 << 20);
        cudaFree(p);
    }
    double sync_us = us_since(t0, nsync);
    t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < nasync; i++) {
        cudaMallocAsync(&p, 1 << 20, s);
        cudaFreeAsync(p, s);
    }
    cudaStreamSynchronize(s);
    double async_us = us_since(t0, nasync);
    t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < nlaunch; i++)
        empty<<<1, 1, 0, s>>>();
    cudaStreamSynchronize(s);
    double launch_us = us_since(t0, nlaunch);
    printf("malloc_free_us %.3f async_pair_us %.3f launch_us %.3f\n", sync_us, async_us, launch_us);
    return 0;
}

/* mufu_ex2.cu: the multi-function unit's exponentials per clock per SM, by type (worklog, sections 10
 * and 23). Each thread runs 8 independent chains of ex2 on its registers; a block of 1024 threads per SM,
 * clock64 around the loop. An f16x2 or bf16x2 instruction computes two results: if the unit did both at
 * once, its results per clock would double. On an H200 all four print about 16 (the SASS issues two
 * MUFU.EX2.F16 per f16x2 instruction).
 * Build and run on a Hopper GPU: nvcc -gencode arch=compute_90a,code=sm_90a -O3 -o mufu_ex2 mufu_ex2.cu && ./mufu_ex2 */
#include <cstdio>
#include <stdint.h>
#include <cuda_runtime.h>

/* KIND 0: ex2.approx.ftz.f32, 1: ex2.approx.f16x2, 2: ex2.approx.ftz.bf16x2, 3: ex2.approx.f16. */
template <int KIND>
__global__ void ex2_chains(uint32_t *out, long long *clk, int iters) {
    uint32_t v[8];
    float f[8];
    for (int i = 0; i < 8; ++i) {
        v[i] = 0x3c003c00u ^ (threadIdx.x + i);
        f[i] = -0.001f * (threadIdx.x + i);
    }
    __syncthreads();
    const long long t0 = clock64();
    for (int it = 0; it < iters; ++it) {
#pragma unroll
        for (int i = 0; i < 8; ++i) {
            if (KIND == 0) asm volatile("ex2.approx.ftz.f32 %0, %0;" : "+f"(f[i]));
            if (KIND == 1) asm volatile("ex2.approx.f16x2 %0, %0;" : "+r"(v[i]));
            if (KIND == 2) asm volatile("ex2.approx.ftz.bf16x2 %0, %0;" : "+r"(v[i]));
            if (KIND == 3) asm volatile("ex2.approx.f16 %0, %0;" : "+h"(*reinterpret_cast<unsigned short *>(&v[i])));
        }
    }
    __syncthreads();
    const long long t1 = clock64();
    uint32_t acc = 0;  // keeps the chains alive
    for (int i = 0; i < 8; ++i) acc ^= v[i] ^ __float_as_uint(f[i]);
    out[blockIdx.x * blockDim.x + threadIdx.x] = acc;
    if (threadIdx.x == 0) clk[blockIdx.x] = t1 - t0;
}

template <int KIND>
static int run(const char *name, int results_per_instruction) {
    int sms = 0;
    if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0) != cudaSuccess) {
        fprintf(stderr, "%s:%d: no CUDA device\n  hint: run on a machine with an NVIDIA GPU\n", __FILE__, __LINE__);
        return 1;
    }
    const int iters = 4096, threads = 1024;
    uint32_t *out = nullptr;
    long long *clk = nullptr;
    if (cudaMalloc(&out, (size_t)sms * threads * 4) != cudaSuccess || cudaMalloc(&clk, (size_t)sms * 8) != cudaSuccess) {
        fprintf(stderr, "%s:%d: cudaMalloc failed\n", __FILE__, __LINE__);
        return 1;
    }
    for (int rep = 0; rep < 2; ++rep) ex2_chains<KIND><<<sms, threads>>>(out, clk, iters);  // the first warms up
    const cudaError_t e = cudaDeviceSynchronize();
    long long c = 0;
    cudaMemcpy(&c, clk, 8, cudaMemcpyDeviceToHost);
    const double results = (double)iters * 8 * threads * results_per_instruction;
    printf("%-24s %9lld clocks  %6.2f results/clock/SM  %6.2f instructions/clock/SM  (%s)\n", name, c, results / c,
           results / results_per_instruction / c, cudaGetErrorString(e));
    cudaFree(out);
    cudaFree(clk);
    return e != cudaSuccess;
}

int main() {
    int bad = run<0>("ex2.approx.ftz.f32", 1);
    bad |= run<1>("ex2.approx.f16x2", 2);
    bad |= run<2>("ex2.approx.ftz.bf16x2", 2);
    bad |= run<3>("ex2.approx.f16", 1);
    return bad;
}

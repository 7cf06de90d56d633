#include "gpu_env.h"
#include "cuda_check.h"
#include "l2_read.h"
#include <algorithm>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <vector>

#ifndef BUILD_TARGET
#define BUILD_TARGET "unknown"
#endif

__global__ void probe_kernel(int *p) { if (p) *p = 1; }

/* Peak rates. Hopper and Ampere datacenter parts: NVIDIA's datasheets (dense,
 * no sparsity): H100 SXM5 / H200 66.9 TFLOP/s fp32, 989.4 fp16/bf16 tensor;
 * H100 PCIe 51.2 / 756; A100 19.5 / 312. Scaled by SM count for variants.
 * Others: an estimate, SMs x max clock x per-SM rate per clock from the
 * architecture whitepapers (fp32: FMA units x 2; tensor: dense fp16 with fp32
 * accumulate). */
static void set_peaks(gpu_env *g) {
    const cudaDeviceProp *p = &g->prop;
    double sms = p->multiProcessorCount, ghz = g->clock_khz * 1e-6;
    if (g->cc == 90) {
        int pcie = strstr(p->name, "PCIe") != NULL;
        g->peak_fp32 = (pcie ? 51.2 : 66.9) * sms / (pcie ? 114 : 132);
        g->peak_tensor16 = (pcie ? 756.0 : 989.4) * sms / (pcie ? 114 : 132);
        g->peak_source = pcie ? "H100 PCIe datasheet, dense" : "H100 SXM5/H200 datasheet, dense";
        return;
    }
    if (g->cc == 80) {
        g->peak_fp32 = 19.5 * sms / 108;
        g->peak_tensor16 = 312.0 * sms / 108;
        g->peak_source = "A100 datasheet, dense";
        return;
    }
    int fp32_per_clk = (g->cc == 70 || g->cc == 75 || g->cc == 80) ? 128 : 256;
    int tc_per_clk = g->cc == 70 ? 1024 : g->cc >= 100 ? 8192 : g->cc == 87 ? 1024 : 512;
    g->peak_fp32 = sms * ghz * fp32_per_clk * 1e-3;
    g->peak_tensor16 = sms * ghz * tc_per_clk * 1e-3;
    g->peak_source = "estimate: SMs x max clock x per-SM rate";
}

void gpu_init(gpu_env *g, int quiet) {
    memset(g, 0, sizeof *g);
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e == cudaErrorInsufficientDriver || e == cudaErrorNoDevice || (e == cudaSuccess && n == 0)) {
        fprintf(stderr,
                "no NVIDIA driver/GPU found (%s): lessons 02 and later run on an NVIDIA GPU.\n"
                "  Without one, make emu-lessonN grades your file of lesson N on the CPU emulator (small shapes).\n"
                "  Lesson 01 runs on the CPU: make lesson1 && ./lesson1\n",
                e == cudaSuccess ? "0 devices" : cudaGetErrorName(e));
        exit(EXIT_NO_GPU);
    }
    CUDA_CHECK(e);
    CUDA_CHECK(cudaGetDeviceProperties(&g->prop, 0));
    g->cc = g->prop.major * 10 + g->prop.minor;
    CUDA_CHECK(cudaDeviceGetAttribute(&g->clock_khz, cudaDevAttrClockRate, 0));
    set_peaks(g);
    if (!quiet)
        printf("GPU: %s, compute capability %d.%d, %d SMs, %zu KB shared memory per block "
               "(opt-in), %d MB L2; build target: %s\n",
               g->prop.name, g->prop.major, g->prop.minor, g->prop.multiProcessorCount,
               g->prop.sharedMemPerBlockOptin / 1024, g->prop.l2CacheSize >> 20, BUILD_TARGET);
    cudaFuncAttributes a;
    e = cudaFuncGetAttributes(&a, probe_kernel);
    if (e == cudaErrorNoKernelImageForDevice || e == cudaErrorInvalidDeviceFunction) {
        fprintf(stderr,
                "this binary has no code for this GPU (sm_%d; it was built for %s).\n"
                "  Rebuild: make clean && make <target> GPU_ARCH=%d\n",
                g->cc, BUILD_TARGET, g->cc);
        exit(EXIT_NO_GPU);
    }
    CUDA_CHECK(e);
}

void gpu_require_cc(const gpu_env *g, int lesson, int needs_cc) {
    if (needs_cc == 0 || g->cc == needs_cc) return;
    const char *family = needs_cc == 90 ? "Hopper" : needs_cc == 100 ? "Blackwell" : "another";
    fprintf(stderr,
            "lesson %02d needs a %s GPU (sm_%d); this GPU is sm_%d (%s).\n"
            "  Its kernels use instructions only that architecture has (sm_%da); lessons up to 08 run here.\n",
            lesson, family, needs_cc, g->cc, g->prop.name, needs_cc);
    exit(EXIT_NO_GPU);
}

double gpu_peak(const gpu_env *g, dtype_t dtype) {
    /* FP8 tensor cores do twice the fp16 rate on Hopper (dense: 1979 TFLOP/s on the H100 SXM) */
    return dtype == DTYPE_FP32 ? g->peak_fp32 : dtype == DTYPE_E4M3 ? 2 * g->peak_tensor16 : g->peak_tensor16;
}

void wait_stream(cudaStream_t stream, double timeout_s, const char *what) {
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (useconds_t nap = 20;; nap = nap < 20000 ? nap * 2 : nap) {
        cudaError_t e = cudaStreamQuery(stream);
        if (e == cudaSuccess) return;
        if (e != cudaErrorNotReady) cuda_check_at(e, what, __FILE__, __LINE__);
        clock_gettime(CLOCK_MONOTONIC, &t);
        double el = (t.tv_sec - t0.tv_sec) + 1e-9 * (t.tv_nsec - t0.tv_nsec);
        if (el > timeout_s) {
            fprintf(stderr,
                    "TIMEOUT: %s did not finish within %.1f s (--timeout). A kernel that never "
                    "ends: a loop whose bound never changes, a __syncthreads() that not every "
                    "thread reaches, or a spin on memory nobody writes.\n",
                    what, timeout_s);
            printf("timeout: kernel stopped after %.1f s\n", timeout_s);
            fflush(stdout);
            _exit(EXIT_TIMEOUT); /* skip atexit: the context goes with the process */
        }
        usleep(nap);
    }
}

__global__ void fill_u32(uint32_t *p, size_t n, uint32_t v) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        p[i] = v;
}
__global__ void fill_u16(uint16_t *p, size_t n, uint16_t v) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        p[i] = v;
}

void fill_pattern(void *p, size_t n, int elem_bytes, uint32_t pattern, cudaStream_t s) {
    if (n == 0) return;
    unsigned blocks = (unsigned)std::min<size_t>((n + 255) / 256, 65535);
    if (elem_bytes == 1) { CUDA_CHECK(cudaMemsetAsync(p, (int)(pattern & 0xff), n, s)); return; }
    if (elem_bytes == 4) fill_u32<<<blocks, 256, 0, s>>>((uint32_t *)p, n, pattern);
    else fill_u16<<<blocks, 256, 0, s>>>((uint16_t *)p, n, (uint16_t)pattern);
    CUDA_CHECK(cudaGetLastError());
}

double time_launches(int (*fn)(void *), void *arg, cudaStream_t s, int warmup, int reps,
                     double timeout_s, const gpu_env *g) {
    size_t flush_bytes = std::max<size_t>(2 * (size_t)g->prop.l2CacheSize, 64u << 20) & ~(size_t)15;
    void *flush = NULL;
    int *sink = NULL;
    CUDA_CHECK(cudaMalloc(&flush, flush_bytes));
    CUDA_CHECK(cudaMalloc(&sink, sizeof(int)));
    CUDA_CHECK(cudaMemsetAsync(flush, 0, flush_bytes, s));
    const unsigned flush_blocks = 8u * (unsigned)std::max(g->prop.multiProcessorCount, 1);
    cudaEvent_t a, b;
    CUDA_CHECK(cudaEventCreate(&a));
    CUDA_CHECK(cudaEventCreate(&b));
    for (int i = 0; i < warmup; ++i) {
        fn(arg);
        CUDA_CHECK(cudaGetLastError());
        wait_stream(s, timeout_s, "warm-up launch");
    }
    std::vector<float> ms(reps);
    for (int i = 0; i < reps; ++i) {
        l2_read_all<<<flush_blocks, 256, 0, s>>>((const int4 *)flush, flush_bytes / 16, sink);
        CUDA_CHECK(cudaGetLastError());
        CUDA_CHECK(cudaEventRecord(a, s));
        fn(arg);
        CUDA_CHECK(cudaGetLastError());
        CUDA_CHECK(cudaEventRecord(b, s));
        wait_stream(s, timeout_s, "timed launch");
        CUDA_CHECK(cudaEventElapsedTime(&ms[i], a, b));
    }
    CUDA_CHECK(cudaEventDestroy(a));
    CUDA_CHECK(cudaEventDestroy(b));
    CUDA_CHECK(cudaFree(flush));
    CUDA_CHECK(cudaFree(sink));
    std::sort(ms.begin(), ms.end());
    return reps % 2 ? ms[reps / 2] : 0.5 * (ms[reps / 2 - 1] + ms[reps / 2]);
}

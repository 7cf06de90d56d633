/* tests/fp32_emu/emu_bwd_runtime.h: what lesson 10 (the fp32 backward pass) needs from the
 * emulated CUDA beyond cuda_runtime.h here: float atomics (std::atomic_ref, so the 256
 * concurrent threads of a block add without losing updates, as red.add does), device memory
 * for the lesson's workspace (host memory here) and the device queries it makes. Force-included
 * (g++ -include) ahead of the lesson source by `make emu-10` (mk/emu.mk). */
#pragma once
#include "cuda_runtime.h"
#include <atomic>

inline float atomicAdd(float *p, float v) { return std::atomic_ref<float>(*p).fetch_add(v, std::memory_order_relaxed); }

enum cudaDeviceAttr { cudaDevAttrMaxSharedMemoryPerBlockOptin };
inline const int cudaSuccess = 0;
inline cudaError_t cudaGetDevice(int *d) { *d = 0; return 0; }
inline cudaError_t cudaDeviceGetAttribute(int *v, cudaDeviceAttr, int) { *v = (int)EMU_SMEM_LIMIT; return 0; }
inline cudaError_t cudaGetLastError() { return 0; }
/* 256-byte aligned like cudaMalloc, and NaN-filled: a kernel that reads workspace it never
 * wrote gets NaN, which the grader reports. */
inline cudaError_t cudaMalloc(void *p, size_t bytes) {
    float *f = (float *)aligned_alloc(256, (bytes + 255) / 256 * 256);
    for (size_t i = 0; i < bytes / 4; ++i) f[i] = nanf("");
    *(void **)p = f;
    return f ? 0 : 2;
}
inline cudaError_t cudaFree(void *p) { free(p); return 0; }

/* tests/fp32_emu/cuda_runtime.h: a stand-in for the real header that lets g++ compile the
 * fp32 lessons 03-05 and 10 and run their kernels on the CPU, on the emulator core
 * (tests/emu/core.h: one fiber per CUDA thread, blocks one after another).
 *
 * Emulated: __syncthreads (a block barrier), __syncwarp and __shfl_xor_sync (a warp
 * barrier and a per-warp exchange buffer), threadIdx / blockIdx / gridDim, dynamic shared
 * memory (filled with NaN before every block, so reading what nobody wrote shows up in
 * the output), the kernel launch (blocks run one after another) and the few runtime calls
 * the lessons make. The core runs a thread until it waits at a barrier, so a missing
 * barrier shows up, every time, as a wrong or NaN result. Nothing here models timing or warps
 * executing in lockstep: every lane is an independent thread, which is what the CUDA
 * programming model promises anyway (independent thread scheduling).
 *
 * The performance report (tests/emu/perf_report.h, on when EMU_REPORT_OUT names a file): in a
 * report build (tests/emu/grade.py, -DEMU_PERF_HOOKS and g++'s address instrumentation,
 * tests/emu/perf_hooks.h) every load and store of the kernel that lands in the block's shared
 * memory is kept with its instruction and the lane's barrier count; at the block's end the k-th
 * access of each lane of a warp to one instruction between the same two barriers makes one
 * warp-wide request, whose bank conflicts are counted as Nsight Compute counts them. */
#pragma once
#include <math.h>
#include <stddef.h>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>
#include "../emu/core.h"
#include "../emu/smem_optin.h"
#include "../emu/perf_report.h"
using std::max;
using std::min;

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)

struct dim3 {
    unsigned x, y, z;
    dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {}
};
struct alignas(16) float4 { float x, y, z, w; };
inline float4 make_float4(float a, float b, float c, float d) { return float4{a, b, c, d}; }
typedef void *cudaStream_t;
typedef int cudaError_t;
/* the error codes reference/include/cuda_check.h names (none is returned here) */
enum {
    cudaErrorInvalidValue = 1, cudaErrorMemoryAllocation = 2, cudaErrorInvalidConfiguration = 9,
    cudaErrorInvalidDeviceFunction = 98, cudaErrorNoDevice = 100, cudaErrorInsufficientDriver = 35,
    cudaErrorNoKernelImageForDevice = 209, cudaErrorIllegalAddress = 700, cudaErrorLaunchOutOfResources = 701,
    cudaErrorAssert = 710, cudaErrorIllegalInstruction = 715, cudaErrorMisalignedAddress = 716,
    cudaErrorLaunchFailure = 719
};
inline const char *cudaGetErrorName(cudaError_t) { return "emulated"; }
inline const char *cudaGetErrorString(cudaError_t) { return "emulated"; }
enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize };
template <class F> inline cudaError_t cudaFuncSetAttribute(F f, cudaFuncAttribute attr, int value) {
    if (attr == cudaFuncAttributeMaxDynamicSharedMemorySize && !emu_smem_optin_set(emu_fn_addr(f), value))
        return cudaErrorInvalidValue;
    return (cudaError_t)0;
}

struct EmuBlock {
    emu::Barrier block_bar;
    std::vector<emu::Barrier> warp_bar;
    std::vector<float> exchange;  // one slot per thread, for shuffles
    std::vector<float4> smem;     // dynamic shared memory, 16-byte aligned
    std::vector<uint64_t> syncs;  // per thread: __syncthreads << 32 | __syncwarp passed (the report's position)
};
inline dim3 emu_dim3(const emu::Idx &i) { return dim3(i.x, i.y, i.z); }
#define threadIdx (emu_dim3(emu::tid()))
#define blockIdx (emu_dim3(emu::bid()))
inline dim3 gridDim, blockDim;
inline EmuBlock *emu_block;  // the running block's (blocks run one after another)
inline size_t emu_smem_max = 0;  // the largest dynamic shared memory request seen
inline const size_t EMU_SMEM_LIMIT = 227 * 1024;  // an H100's per-block maximum

inline void *emu_smem() { return emu_block->smem.data(); }
inline void __syncthreads() {
    emu_block->block_bar.arrive_and_wait();
    emu_block->syncs[emu::self()] = ((emu_block->syncs[emu::self()] >> 32) + 1) << 32;
}
inline void __syncwarp(unsigned = 0xffffffffu) {
    emu_block->warp_bar[threadIdx.x / 32].arrive_and_wait();
    ++emu_block->syncs[emu::self()];
}
inline float __shfl_xor_sync(unsigned, float v, int lane_mask) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    emu_block->exchange[warp * 32 + lane] = v;
    __syncwarp();
    const float r = emu_block->exchange[warp * 32 + (lane ^ lane_mask)];
    __syncwarp();
    return r;
}

/* kernel<<<grid, threads, smem, stream>>>(args...) becomes emu_launch(grid, threads, smem,
 * stream, kernel, args...) (tests/fp32_emu/prep.py rewrites the source). */
template <class Kernel, class... Args>
void emu_launch(dim3 grid, int threads, size_t smem, cudaStream_t, Kernel kernel, Args... args) {
    if (threads % 32) { fprintf(stderr, "emu: %d threads is not whole warps\n", threads); exit(9); }
    if (smem > EMU_SMEM_LIMIT) { fprintf(stderr, "emu: %zu bytes of shared memory\n", smem); exit(9); }
    emu_smem_check(emu_fn_addr(kernel), smem, nullptr);  // the 48 KiB rule (tests/emu/smem_optin.h)
    emu_smem_max = std::max(emu_smem_max, smem);
    gridDim = grid;
    blockDim = dim3(threads);
    EmuBlock b;
    emu_block = &b;
    emu::Hooks h;
    h.block_begin = [&] {
        b.block_bar = emu::Barrier(threads, "__syncthreads");
        b.warp_bar.assign(threads / 32, emu::Barrier(32, "__syncwarp or a shuffle"));
        b.exchange.assign(threads, 0.f);
        const float nan = nanf("");
        b.smem.assign((smem + 15) / 16, float4{nan, nan, nan, nan});
        b.syncs.assign(threads, 0);
    };
    h.block_end = [] { emu_perf::block_end(); };
    h.thread = [&](int) { kernel(args...); };
    emu::run_grid(emu::Idx{grid.x, grid.y, grid.z}, threads, h);
    emu_block = nullptr;
}

/* The report build's hooks (tests/emu/perf_hooks.h): the running block's shared memory, and a
 * lane's barriers as the position of its accesses. */
#ifdef EMU_PERF_HOOKS
static inline uint64_t emu_perf_sync() { return emu_block ? emu_block->syncs[emu::self()] : 0; }
#define EMU_PERF_SMEM (emu_block ? (void *)emu_block->smem.data() : nullptr)
#define EMU_PERF_SMEM_BYTES (emu_block ? emu_block->smem.size() * sizeof(float4) : 0)
#include "../emu/perf_hooks.h"
#endif

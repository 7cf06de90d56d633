/* emu_driver.h: included by the Hopper emulator's drivers (emu9.cpp, emu13.cpp) ahead of the lesson
 * file, which they compile whole, host code included (tests/emu/prep.py rewrites its launches into
 * the emu_launch below), and whose kernels they launch themselves. The runtime calls of the host
 * code are stubs here: never called by a driver, they only let the file compile and link. */
#pragma once
#include "hemu.h"
/* reference/include/tma_params.h: its host part (the tensor maps, which the lesson's host code
 * builds) is compiled for nvcc only (__CUDACC__); the CUDA headers are in already, so it is read
 * here as nvcc would read it. */
#ifndef TMA_PARAMS_H
#define __CUDACC__ 1
#include "tma_params.h"
#undef __CUDACC__
#endif

/* A launch as tests/emu/prep.py writes it: a 1-D grid (lessons 09 and 13), registers per thread as
 * the launch gives them before any setmaxnreg. */
static bool emu_launch(dim3 grid, int nt, size_t smem, const std::function<void()> &fn) {
    if (grid.y != 1 || grid.z != 1) { emu_fail("a launch with a 2-D or 3-D grid (the Hopper emulator runs 1-D grids)"); return false; }
    return emu_launch(grid.x, nt, smem, 65536 / nt / 8 * 8, fn);
}

#include "../emu/emu_device.h"  // the device the host code sees (queries, attributes)
extern "C" {
cudaError_t CUDARTAPI cudaGetDevice(int *d) { *d = 0; return cudaSuccess; }
cudaError_t CUDARTAPI cudaMalloc(void **p, size_t) { *p = nullptr; return cudaErrorMemoryAllocation; }
cudaError_t CUDARTAPI cudaMemset(void *, int, size_t) { return cudaErrorInvalidValue; }
cudaError_t CUDARTAPI cudaFree(void *) { return cudaSuccess; }
cudaError_t CUDARTAPI cudaMemsetAsync(void *, int, size_t, cudaStream_t) { return cudaErrorInvalidValue; }
cudaError_t CUDARTAPI cudaSetDevice(int d) { return d == 0 ? cudaSuccess : cudaErrorInvalidDevice; }
cudaError_t CUDARTAPI cudaDeviceSynchronize(void) { return cudaSuccess; }
cudaError_t CUDARTAPI cudaStreamGetId(cudaStream_t, unsigned long long *id) { *id = 0; return cudaSuccess; }
cudaError_t CUDARTAPI cudaGetLastError(void) { return cudaSuccess; }
const char *CUDARTAPI cudaGetErrorString(cudaError_t) { return "emulated"; }
#if CUDART_VERSION >= 12050
cudaError_t CUDARTAPI cudaGetDriverEntryPointByVersion(const char *, void **p, unsigned int, unsigned long long,
                                                       cudaDriverEntryPointQueryResult *q) {
    *p = nullptr;
    if (q) *q = cudaDriverEntryPointSymbolNotFound;
    return cudaErrorNotSupported;
}
#endif
cudaError_t CUDARTAPI cudaGetDriverEntryPoint(const char *, void **p, unsigned long long, cudaDriverEntryPointQueryResult *q) {
    *p = nullptr;
    if (q) *q = cudaDriverEntryPointSymbolNotFound;
    return cudaErrorNotSupported;
}
}

/* tests/emu/emu_device.h: the device every CPU emulator describes to a lesson's host code: its
 * attributes (the runtime's other calls: tests/fake_cuda/fake_cuda.cpp, linked where host code
 * runs; the drivers' refusing stand-ins, emu_driver.h, where it does not). Included by each emulator's emu_host.h (tests/wmma_emu,
 * tests/warp_emu) and the Hopper drivers' emu_driver.h, all compiled by g++ with the real CUDA
 * headers. The device: compute capability 9.0, 227 KiB of shared memory per block, 50 MiB of L2,
 * and 132 SMs (an H100 SXM's), so that a split rule (lesson 12) splits as it does there. */
#pragma once
#include <cuda_runtime.h>

extern "C" {
cudaError_t CUDARTAPI cudaDeviceGetAttribute(int *v, enum cudaDeviceAttr attr, int) {
    switch (attr) {
    case cudaDevAttrComputeCapabilityMajor: *v = 9; break;
    case cudaDevAttrComputeCapabilityMinor: *v = 0; break;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin: *v = 227 * 1024; break;
    case cudaDevAttrMultiProcessorCount: *v = 132; break;
    case cudaDevAttrL2CacheSize: *v = 50 << 20; break;
    default: *v = 0; return cudaErrorInvalidValue;
    }
    return cudaSuccess;
}
}
#include "smem_optin.h"  // the 48 KiB rule: emu_smem_check, called before each launch
/* the runtime's template form, which g++ does not see (nvcc-only in cuda_runtime.h) */
template <typename F>
static cudaError_t cudaFuncSetAttribute(F *f, enum cudaFuncAttribute attr, int value) {
    if (attr == cudaFuncAttributeMaxDynamicSharedMemorySize && !emu_smem_optin_set(emu_fn_addr(f), value))
        return cudaErrorInvalidValue;
    return cudaSuccess;
}

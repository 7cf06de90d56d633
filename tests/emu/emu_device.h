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
/* The dynamic shared memory a kernel may ask for: 48 KiB unless the host raised the kernel's limit with
 * cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes), up to the opt-in
 * maximum, as on a GPU, where a launch over the limit fails (cudaErrorInvalidValue). */
#include <cstdio>
#include <cstdlib>
#include <map>
static const size_t EMU_SMEM_DEFAULT = 48 * 1024;
static std::map<const void *, size_t> &emu_smem_optin() {
    static std::map<const void *, size_t> m;
    return m;
}
/* the runtime's template form, which g++ does not see (nvcc-only in cuda_runtime.h) */
template <typename F>
static cudaError_t cudaFuncSetAttribute(F *f, enum cudaFuncAttribute attr, int value) {
    if (attr == cudaFuncAttributeMaxDynamicSharedMemorySize) {
        if (value < 0 || value > 227 * 1024) return cudaErrorInvalidValue;
        emu_smem_optin()[reinterpret_cast<const void *>(f)] = (size_t)value;
    }
    return cudaSuccess;
}
/* A kernel's address, from its name, a template-id or a pointer variable alike (the key of the limits). */
template <typename F>
static const void *emu_fn_addr(F *f) { return reinterpret_cast<const void *>(f); }
/* Called before each launch of `kernel` (named `name`) with `smem` bytes of dynamic shared memory
 * (tests/emu/prep.py puts the call in front of every kernel<<<...>>>): over its limit, the
 * emulator stops as the GPU's launch would fail, and says which call is missing. */
static void emu_smem_check(const void *kernel, size_t smem, const char *name) {
    if (smem <= EMU_SMEM_DEFAULT) return;
    const auto it = emu_smem_optin().find(kernel);
    if (it != emu_smem_optin().end() && smem <= it->second) return;
    fprintf(stderr,
            "emu: the launch of %s asks for %zu bytes of dynamic shared memory, more than the %s: on a GPU the "
            "launch fails (cudaErrorInvalidValue). Before it, the host code must call cudaFuncSetAttribute(%s, "
            "cudaFuncAttributeMaxDynamicSharedMemorySize, bytes) with bytes >= %zu (up to 227 KiB)\n",
            name, smem, it == emu_smem_optin().end() ? "48 KiB a kernel gets by default"
                                                       : "limit its cudaFuncSetAttribute call gave it",
            name, smem);
    exit(9);
}

/* tests/emu/smem_optin.h: the dynamic shared memory a kernel may ask for, as every CPU emulator's
 * runtime enforces it: 48 KiB unless the host raised the kernel's limit with
 * cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes), up to the
 * opt-in maximum, as on a GPU, where a launch over the limit fails (cudaErrorInvalidValue). Needs
 * no CUDA type: included by tests/emu/emu_device.h (the emulators over the real CUDA headers) and
 * tests/fp32_emu/cuda_runtime.h (its own runtime). */
#pragma once
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <map>

static const size_t EMU_SMEM_DEFAULT = 48 * 1024, EMU_SMEM_OPTIN_MAX = 227 * 1024;
static std::map<const void *, size_t> &emu_smem_optin() {
    static std::map<const void *, size_t> m;
    return m;
}
/* cudaFuncSetAttribute's MaxDynamicSharedMemorySize for `kernel`; false: out of range. */
static bool emu_smem_optin_set(const void *kernel, int bytes) {
    if (bytes < 0 || (size_t)bytes > EMU_SMEM_OPTIN_MAX) return false;
    emu_smem_optin()[kernel] = (size_t)bytes;
    return true;
}
/* Before each launch of `kernel` (named `name`, or NULL where the launch does not know it) with
 * `smem` bytes of dynamic shared memory: over its limit, the emulator stops as the GPU's launch
 * would fail, and says which call is missing. */
static void emu_smem_check(const void *kernel, size_t smem, const char *name) {
    if (smem <= EMU_SMEM_DEFAULT) return;
    const auto it = emu_smem_optin().find(kernel);
    if (it != emu_smem_optin().end() && smem <= it->second) return;
    fprintf(stderr,
            "emu: %s%s asks for %zu bytes of dynamic shared memory, more than the %s: on a GPU the launch fails "
            "(cudaErrorInvalidValue). Before it, the host code must call cudaFuncSetAttribute(%s, "
            "cudaFuncAttributeMaxDynamicSharedMemorySize, bytes) with bytes >= %zu (up to 227 KiB)\n",
            name ? "the launch of " : "a launch", name ? name : "", smem,
            it == emu_smem_optin().end() ? "48 KiB a kernel gets by default" : "limit its cudaFuncSetAttribute call gave it",
            name ? name : "kernel", smem);
    exit(9);
}
/* A kernel's address, from its name, a template-id or a pointer variable alike (the key of the limits). */
template <typename F>
static const void *emu_fn_addr(F *f) { return reinterpret_cast<const void *>(f); }

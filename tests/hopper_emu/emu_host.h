/* emu_host.h: a Hopper lesson's file (14, 17), host code included, over the CPU Hopper emulator and the
 * real forward runner (make emu-NN, emu-lessonNN, emu-solutionNN; tests/hopper_emu/grade_host.py). Force-included (g++
 * -include) ahead of the lesson's source, whose launches tests/emu/prep.py rewrote into the
 * emu_launch below; linked with the runner's objects over tests/hostsim/fake_device.cpp (a CUDA
 * runtime on host memory). So the runner grades the emulated kernels with its own references and
 * diagnoses (--dtype e4m3: block and per-tensor scales, --hadamard, --outliers), and the emulator
 * adds its checks (hazards, barrier protocols, wgmma rules: any is a failure, printed "EMU ERROR").
 *
 * Brings: hemu.h (through the stand-in ptx_hopper.h, with the real header's plain part:
 * EMU_PTX_HOPPER_PLAIN) and the e4m3 wgmma (wgmma_e4m3.h); tma_params.h's host part; the device
 * (tests/emu/emu_device.h); a tensor-map encoder behind cudaGetDriverEntryPoint(ByVersion), checking
 * what cuTensorMapEncodeTiled checks that the kernel relies on. EMU_WGMMA=late, EMU_TMA=late as
 * hemu.h describes (read at start-up). */
#pragma once
#define FA_EMULATOR 1
#define EMU_PTX_HOPPER_PLAIN 1
#include "ptx_hopper.h"
#include "wgmma_e4m3.h"
#ifndef TMA_PARAMS_H
#define __CUDACC__ 1
#include "tma_params.h"
#undef __CUDACC__
#endif
#include "../emu/emu_device.h"

/* A launch as tests/emu/prep.py writes it: a 1-D grid, registers per thread as the launch gives them. */
static bool emu_launch(dim3 grid, int nt, size_t smem, const std::function<void()> &fn) {
    if (grid.y != 1 || grid.z != 1) { emu_fail("a launch with a 2-D or 3-D grid (the Hopper emulator runs 1-D grids)"); return false; }
    return emu_launch(grid.x, nt, smem, 65536 / nt / 8 * 8, fn);
}

/* cudaLaunchKernelEx (a launch with attributes, such as a programmatic dependent launch): the same
 * launch as kernel<<<grid, block, smem>>>, its attributes without effect here (hemu.h, griddep_wait). */
template <class... P, class... A>
static cudaError_t emu_launch_kernel_ex(const cudaLaunchConfig_t *cfg, void (*kernel)(P...), A &&...args) {
    emu_smem_check(reinterpret_cast<const void *>(kernel), cfg->dynamicSmemBytes, "the kernel of cudaLaunchKernelEx");
    return emu_launch(cfg->gridDim, (int)(cfg->blockDim.x * cfg->blockDim.y * cfg->blockDim.z), cfg->dynamicSmemBytes,
                      [&] { kernel(args...); })
               ? cudaSuccess
               : cudaErrorLaunchFailure;
}
#define cudaLaunchKernelEx emu_launch_kernel_ex

/* cuTensorMapEncodeTiled as the emulator's TMA reads it (hemu.h, emu_encode_tensor_map). */
static CUresult emu_tensor_map_encode(CUtensorMap *m, CUtensorMapDataType type, cuuint32_t rank, void *base,
                                      const cuuint64_t *dims, const cuuint64_t *strides, const cuuint32_t *box,
                                      const cuuint32_t *es, CUtensorMapInterleave, CUtensorMapSwizzle swz,
                                      CUtensorMapL2promotion, CUtensorMapFloatOOBfill) {
    const unsigned esize = type == CU_TENSOR_MAP_DATA_TYPE_UINT8 ? 1
                         : type == CU_TENSOR_MAP_DATA_TYPE_FLOAT16 || type == CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 ? 2 : 0;
    const unsigned sw = swz == CU_TENSOR_MAP_SWIZZLE_128B ? 128 : swz == CU_TENSOR_MAP_SWIZZLE_NONE ? 0 : 1;
    const char *bad = !esize ? "an element type the emulator does not know"
                    : rank != 3 ? "rank other than 3"
                    : sw == 1 ? "a swizzle other than none or 128B"
                    : (uintptr_t)base % 16 ? "a base address not 16-byte aligned"
                    : strides[0] % 16 || strides[1] % 16 ? "strides not multiples of 16 bytes"
                    : box[0] > 256 || box[1] > 256 || box[2] > 256 ? "a box dimension above 256"
                    : sw && box[0] * esize > sw ? "a box row wider than the swizzle span"
                    : es[0] != 1 || es[1] != 1 || es[2] != 1 ? "element strides other than 1"
                    : nullptr;
    if (bad) {
        fprintf(stderr, "EMU ERROR: cuTensorMapEncodeTiled with %s\n", bad);
        emu_errors++;
        return CUDA_ERROR_INVALID_VALUE;
    }
    const uint64_t d[3] = {dims[0], dims[1], dims[2]}, s[2] = {strides[0], strides[1]};
    const uint32_t b[3] = {box[0], box[1], box[2]};
    emu_encode_tensor_map(m, base, d, s, b, esize, sw);
    return CUDA_SUCCESS;
}
extern "C" {
#if CUDART_VERSION >= 12050
cudaError_t CUDARTAPI cudaGetDriverEntryPointByVersion(const char *name, void **p, unsigned int, unsigned long long,
                                                       cudaDriverEntryPointQueryResult *q) {
    const bool ok = !strcmp(name, "cuTensorMapEncodeTiled");
    *p = ok ? (void *)emu_tensor_map_encode : nullptr;
    if (q) *q = ok ? cudaDriverEntryPointSuccess : cudaDriverEntryPointSymbolNotFound;
    return ok ? cudaSuccess : cudaErrorNotSupported;
}
#endif
cudaError_t CUDARTAPI cudaGetDriverEntryPoint(const char *name, void **p, unsigned long long,
                                              cudaDriverEntryPointQueryResult *q) {
    const bool ok = !strcmp(name, "cuTensorMapEncodeTiled");
    *p = ok ? (void *)emu_tensor_map_encode : nullptr;
    if (q) *q = ok ? cudaDriverEntryPointSuccess : cudaDriverEntryPointSymbolNotFound;
    return ok ? cudaSuccess : cudaErrorNotSupported;
}
}

/* At start-up: the late modes; at exit: the emulator's count of errors (any is a failure). */
static struct EmuHost {
    EmuHost() {
        emu_wgmma_late = getenv("EMU_WGMMA") && !strcmp(getenv("EMU_WGMMA"), "late");
        emu_tma_late = getenv("EMU_TMA") && !strcmp(getenv("EMU_TMA"), "late");
    }
    ~EmuHost() {
        fprintf(stderr, "emulator (Hopper%s%s): %ld emulator errors\n",
                emu_wgmma_late ? ", wgmma operands read late" : "", emu_tma_late ? ", TMA copies late" : "",
                emu_errors.load());
        if (emu_errors.load()) fprintf(stderr, "EMU ERROR: the emulator reported the problems above\n");
    }
} emu_host;

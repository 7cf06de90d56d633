/* cuda_check.h: every CUDA call checked, with file:line and a hint a student can act on.
 * CUDA_CHECK(call) prints and exits (status EXIT_NO_GPU or EXIT_CUDA_ERROR). */
#ifndef CUDA_CHECK_H
#define CUDA_CHECK_H
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include "attention.h"

static inline const char *cuda_hint(cudaError_t e) {
    switch (e) {
    case cudaErrorInsufficientDriver:
    case cudaErrorNoDevice:
        return "no NVIDIA driver/GPU found: lessons 02 and later need an NVIDIA GPU "
               "(lesson 01 runs on the CPU; `nvidia-smi` should list your GPU)";
    case cudaErrorNoKernelImageForDevice:
    case cudaErrorInvalidDeviceFunction:
        return "this binary has no code for this GPU: rebuild for it, e.g. "
               "`make clean && make lessonN GPU_ARCH=<compute capability, e.g. 90>`";
    case cudaErrorIllegalAddress:
    case cudaErrorMisalignedAddress:
        return "a kernel read or wrote outside its arrays (or misaligned): "
               "`make sanitize-lessonN` runs compute-sanitizer and names the line";
    case cudaErrorLaunchOutOfResources:
        return "too many registers x threads per block: `make ptxas-lessonN` shows registers; "
               "use fewer threads per block or __launch_bounds__";
    case cudaErrorInvalidConfiguration:
        return "bad launch configuration: grid/block dimensions out of range, or more than 48 KB "
               "of dynamic shared memory without cudaFuncSetAttribute(kernel, "
               "cudaFuncAttributeMaxDynamicSharedMemorySize, bytes)";
    case cudaErrorInvalidValue:
        return "an argument is out of range (e.g. a shared-memory request above the device limit)";
    case cudaErrorMemoryAllocation:
        return "out of device memory: try a smaller --batch/--heads/--seq";
    case cudaErrorAssert:
        return "a device-side assert() failed: its message is printed above";
    case cudaErrorIllegalInstruction:
        return "the GPU met an instruction it cannot run: is the build for this GPU (GPU_ARCH)?";
    case cudaErrorLaunchFailure:
        return "the kernel crashed: `make sanitize-lessonN` finds out-of-bounds accesses";
    default:
        return "";
    }
}

static inline void cuda_check_at(cudaError_t e, const char *what, const char *file, int line) {
    if (e == cudaSuccess) return;
    const char *hint = cuda_hint(e);
    fprintf(stderr, "%s:%d: CUDA error %d (%s: %s) in %s\n", file, line, (int)e,
            cudaGetErrorName(e), cudaGetErrorString(e), what);
    if (*hint) fprintf(stderr, "  hint: %s\n", hint);
    int no_gpu = e == cudaErrorInsufficientDriver || e == cudaErrorNoDevice ||
                 e == cudaErrorNoKernelImageForDevice || e == cudaErrorInvalidDeviceFunction;
    exit(no_gpu ? EXIT_NO_GPU : EXIT_CUDA_ERROR);
}
#define CUDA_CHECK(call) cuda_check_at((call), #call, __FILE__, __LINE__)
#endif

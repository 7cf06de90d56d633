/* tests/wmma_emu/emu_host.h: force-included (g++ -include) ahead of lesson 06's source, which is
 * compiled whole over the wmma emulator (only its launch rewritten: tests/emu/prep.py): by the
 * driver emu06.cpp (make emu-06) and by tests/emu/grade.py (make emu-lesson6, linked with the real
 * runner over the fake device of tests/hostsim, which defines cudaMalloc and the rest). Here: the
 * device queries and attributes the lesson's host code makes. The device: compute capability
 * 9.0, 227 KiB of shared memory per block. */
#pragma once
#include "wmma_emu.h"

extern "C" {
cudaError_t CUDARTAPI cudaGetDevice(int *d) {
    *d = 0;
    return cudaSuccess;
}
cudaError_t CUDARTAPI cudaDeviceGetAttribute(int *v, enum cudaDeviceAttr attr, int) {
    switch (attr) {
    case cudaDevAttrComputeCapabilityMajor: *v = 9; break;
    case cudaDevAttrComputeCapabilityMinor: *v = 0; break;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin: *v = 227 * 1024; break;
    case cudaDevAttrMultiProcessorCount: *v = 132; break;
    default: *v = 0; return cudaErrorInvalidValue;
    }
    return cudaSuccess;
}
}
/* the runtime's template form, which g++ does not see (nvcc-only in cuda_runtime.h) */
template <typename F>
static cudaError_t cudaFuncSetAttribute(F *, enum cudaFuncAttribute, int) { return cudaSuccess; }

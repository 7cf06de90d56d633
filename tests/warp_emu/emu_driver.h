/* emu_driver.h: included first by the warp emulator's drivers (emu7.cpp, emu8.cpp, emu11.cpp,
 * emu12.cpp), which compile the lesson file whole, host code included (only its launches are
 * rewritten: tests/emu/prep.py), and launch its kernels themselves. The host code's runtime
 * calls come from emu_host.h; those the host simulation's fake device would define are stubs
 * here, never called by a driver. */
#pragma once
#define EMU_DRIVER  // the driver prints its own summary (emu_host.h)
#include "emu_host.h"
extern "C" {
cudaError_t CUDARTAPI cudaGetDevice(int *d) { *d = 0; return cudaSuccess; }
cudaError_t CUDARTAPI cudaMalloc(void **p, size_t) { *p = nullptr; return cudaErrorMemoryAllocation; }
cudaError_t CUDARTAPI cudaFree(void *) { return cudaSuccess; }
cudaError_t CUDARTAPI cudaGetLastError(void) { return cudaSuccess; }
cudaError_t CUDARTAPI cudaMemsetAsync(void *, int, size_t, cudaStream_t) { return cudaSuccess; }
}

/* emu_host.h: the CUDA runtime calls the host code of lessons 07, 08, 11 and 12 makes that the
 * host simulation's fake device (tests/hostsim/fake_device.cpp) does not define. The lesson's own
 * source, host code included, is compiled by g++ over the warp emulator (emu.h and the stand-in
 * headers of this directory: ptx_mma.h, ptx_cp_async.h, ptx_memory.h), linked with the real
 * runner so that the real grader grades kernels run on the CPU (force-included by
 * tests/emu/grade.py: make emu-lessonN; tests/warp_emu/hostsim11.py: make hostsim-11), and for
 * the drivers (emu_driver.h: emu7.cpp, emu8.cpp, emu11.cpp, emu12.cpp: make emu-07 ... emu-12). The device it describes: compute capability 9.0, 227 KiB of shared memory per
 * block, and 132 SMs (an H100 SXM's), so that lesson 12's split rule splits as it does there. */
#pragma once
#include "ptx_memory.h"

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

#ifndef EMU_DRIVER  // a driver (emu_driver.h) prints its own summary
/* At exit: what the emulator counted over every launch of the run. Any emulator error
 * (hazard, out-of-bounds access) or bank conflict is printed as "EMU ERROR", which
 * hostsim11.py treats as a failure. */
static struct EmuHostReport {
    ~EmuHostReport() {
        fprintf(stderr, "emulator: %ld ldmatrix, %ld bank conflicts; %ld st.shared warp stores, %ld bank conflicts; "
                        "%ld emulator errors\n",
                emu_ldsm_count.load(), emu_ldsm_conflicts.load(), emu_sts_count.load(), emu_sts_conflicts.load(),
                emu_errors.load());
        if (emu_ldsm_conflicts.load() || emu_sts_conflicts.load() || emu_errors.load())
            fprintf(stderr, "EMU ERROR: the emulator reported the problems above\n");
    }
} emu_host_report;
#endif

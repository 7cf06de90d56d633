/* emu_host.h: the CUDA runtime calls the host code of lessons 07, 08, 11 and 12 makes that the
 * host simulation's fake device (tests/hostsim/fake_device.cpp) does not define. The lesson's own
 * source, host code included, is compiled by g++ over the warp emulator (emu.h and the stand-in
 * headers of this directory: ptx_mma.h, ptx_cp_async.h, ptx_memory.h), linked with the real
 * runner so that the real grader grades kernels run on the CPU (force-included by
 * tests/emu/grade.py: make emu-lessonN; tests/warp_emu/hostsim11.py: make hostsim-11), and for
 * the drivers (emu_driver.h: emu7.cpp, emu8.cpp, emu11.cpp, emu12.cpp: make emu-07 ... emu-12). The device: tests/emu/emu_device.h. */
#pragma once
#include "ptx_memory.h"
#include "../emu/emu_device.h"  // the device the host code sees (queries, attributes)

#ifndef EMU_DRIVER  // a driver (emu_driver.h) prints its own summary
/* At exit: what the emulator counted over every launch of the run. Any emulator error
 * (hazard, out-of-bounds access) or bank conflict is printed as "EMU ERROR", which
 * hostsim11.py treats as a failure. */
static struct EmuHostReport {
    ~EmuHostReport() {
        const long ldsm = emu_ldsm_count.load(), sts = emu_sts_count.load(), errors = emu_errors.load();
        if (!ldsm && !sts && !errors) return;  // a process that ran no kernel (the runner's parent) adds nothing
        fprintf(stderr, "emulator: %ld ldmatrix, %ld bank conflicts; %ld st.shared warp stores through the PTX wrappers "
                        "(plain C++ stores: the performance report), %ld bank conflicts; "
                        "%ld emulator errors\n",
                ldsm, emu_ldsm_conflicts.load(), sts, emu_sts_conflicts.load(), errors);
        if (emu_ldsm_conflicts.load())
            fprintf(stderr, "EMU ERROR: %ld bank conflicts in ldmatrix reads: the 8 rows of an 8x8 matrix share banks "
                            "(is the tile swizzled, and read with the same swizzle?)\n", emu_ldsm_conflicts.load());
        if (emu_sts_conflicts.load())
            fprintf(stderr, "EMU ERROR: %ld bank conflicts in st.shared through the PTX wrappers\n",
                    emu_sts_conflicts.load());
        if (errors) fprintf(stderr, "EMU ERROR: the emulator reported the problems above\n");
    }
} emu_host_report;
#endif

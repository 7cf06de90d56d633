/* tests/hopper_emu/ptx_hopper_fp8.h: the Hopper emulator's stand-in for reference/include/
 * ptx_hopper_fp8.h (the e4m3 wrappers lesson 14 teaches), first on the include path of emulator
 * builds. Lesson 14 writes its own (behind FA_EMULATOR) and does not include it; a later lesson that
 * does gets the emulated e4m3 wgmma and cvt of wgmma_e4m3.h, and, with EMU_PTX_HOPPER_PLAIN defined
 * (as for ptx_hopper.h here), the real header's plain C++ part, the descriptor. */
#pragma once
#include "ptx_hopper.h"
#include "wgmma_e4m3.h"
#ifdef EMU_PTX_HOPPER_PLAIN
/* K-major e4m3 operand with 128 columns (d = 128 bytes: one swizzle atom wide): rows
 * [row0, row0 + 64 or N) of a tile of ROWS rows, k-slice kk (columns 32 kk .. 32 kk + 31). */
template <int ROWS>
__device__ __host__ __forceinline__ uint64_t desc_kmajor_e4m3(uint32_t tile, int row0, int kk) {
    return make_desc(tile + (uint32_t)row0 * 128 + (uint32_t)kk * 32, 16, 1024);
}
#endif

/* tests/warp_emu/ptx_mma.h: the warp emulator's stand-in for reference/include/ptx_mma.h.
 * Emulator builds put tests/warp_emu before reference/include on the include path, so a
 * lesson's #include "ptx_mma.h" lands here: ldmatrix, mma, ex2 and smem_u32 come from emu.h
 * (computed as the PTX ISA defines them, with bank-conflict and hazard checks); pack2 and
 * swz are plain arithmetic, the same as the real header's. */
#pragma once
#include "emu.h"

#ifndef FA_SM80
#define FA_SM80 1 /* kernel bodies guarded by it are the ones to emulate (the real header: sm_80+) */
#endif

template <typename T> static inline uint32_t pack2(float lo, float hi);
template <> inline uint32_t pack2<__half>(float lo, float hi) {
    __half2 h = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<uint32_t *>(&h);
}
template <> inline uint32_t pack2<__nv_bfloat16>(float lo, float hi) {
    __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t *>(&h);
}
template <int D> static inline uint32_t swz(int row, int chunk) {
    return (uint32_t)(row * (D * 2) + ((chunk ^ (row & 7)) << 4));
}

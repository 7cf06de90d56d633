/* tests/hopper_emu/ptx_mma.h: the Hopper emulator's stand-in for reference/include/ptx_mma.h,
 * first on the include path of emulator builds (see ptx_hopper.h here): smem_u32 and ex2 come
 * from hemu.h; pack2 and swz are plain arithmetic, the same as the real header's. The mma.sync
 * and ldmatrix of lesson 07 are not emulated here (tests/warp_emu does). */
#pragma once
#include "hemu.h"
#ifndef FA_SM80
#define FA_SM80 1
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

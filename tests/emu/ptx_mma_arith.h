/* tests/emu/ptx_mma_arith.h: the part of reference/include/ptx_mma.h that is plain arithmetic
 * (pack2: two floats rounded into one 32-bit register; swz: the swizzled byte offset of a 16-byte
 * chunk), for the emulators' stand-ins of that header (tests/warp_emu/ptx_mma.h,
 * tests/hopper_emu/ptx_mma.h), which include it after their emulator (it needs the __half and
 * __nv_bfloat16 types the emulator's CUDA headers give). */
#pragma once
#include <stdint.h>

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

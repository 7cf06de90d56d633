/* tests/hopper_emu/ptx_hopper.h: the Hopper emulator's stand-in for reference/include/
 * ptx_hopper.h. Emulator builds put tests/hopper_emu before reference/include on the include
 * path and define FA_EMULATOR, so lesson 09 leaves its own PTX wrappers out and these, from
 * hemu.h, take their place: shared loads and stores, fence.proxy.async, named barriers,
 * setmaxnreg, mbarriers, TMA loads and stores with their bulk groups, wgmma (ss, rs, fence,
 * commit, wait, fence_acc), each as the PTX ISA defines it, with the hazard and protocol checks
 * hemu.h describes.
 * Not here: what the real header writes in plain C++ (mbar_wait's loop, the descriptors). Lesson
 * 09 compiles its own, which is what its emulator checks; a lesson that includes ptx_hopper.h
 * instead will need them here too (the real header's text, which runs as is on the CPU). */
#pragma once
#include "hemu.h"

/* Lesson 13 includes ptx_hopper.h (it does not write these): its emulator driver (emu13.cpp)
 * defines EMU_PTX_HOPPER_PLAIN, and gets the real header's plain C++ part here, made from lesson
 * 09's solution as the real header's is (make starters). Lesson 09 defines its own and leaves the
 * macro undefined. */
#ifdef EMU_PTX_HOPPER_PLAIN
// [generated from solutions/09-hopper-wgmma/hopper.cu, regions mbar-wait descriptor]
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
    while (!mbar_try_wait(bar, parity)) {}
}
/* The 64-bit matrix descriptor of wgmma (PTX ISA, "Matrix Descriptor"): bits 0-13 start
 * address >> 4, 16-29 leading-dimension byte offset (LBO) >> 4, 32-45 stride-dimension byte
 * offset (SBO) >> 4, 49-51 base offset (0: every swizzle atom here starts on 1024 bytes), 62-63
 * swizzle (1 = 128-byte). The operand is a stack of 8-row x 128-byte atoms in the layout TMA
 * writes: SBO = 1024. K-major (Q, K): LBO unused (pass 16 bytes: field value 1), k-slice kk of a 64-column box 32 kk bytes
 * into it, the hardware swizzling the final addresses. MN-major (V, a row per key): LBO is the
 * distance between two 64-column boxes, key slice ks starts 16 ks rows into the tile. */
__device__ __host__ __forceinline__ uint64_t make_desc(uint32_t addr, uint32_t lbo, uint32_t sbo) {
    return (uint64_t)((addr & 0x3FFFF) >> 4) | (uint64_t)((lbo & 0x3FFFF) >> 4) << 16 |
           (uint64_t)((sbo & 0x3FFFF) >> 4) << 32 | 1ull << 62;
}
/* K-major operand: rows [row0, row0 + 64 or N) of a tile of `ROWS` rows, k-slice kk (columns
 * 16 kk .. 16 kk + 15): box kk / 4, 32 bytes a slice into it, added to the rows' descriptor in
 * 16-byte units (shared memory is below 256 KiB: no carry): one make_desc per tile, not per slice. */
template <int ROWS>
__device__ __host__ __forceinline__ uint64_t desc_kmajor(uint32_t tile, int row0, int kk) {
    const uint32_t box = (uint32_t)(kk / 4) * ROWS * 128;  // 64-column box of this k-slice
    return make_desc(tile + (uint32_t)row0 * 128, 16, 1024) + ((box + (uint32_t)(kk % 4) * 32) >> 4);
}
/* MN-major operand (V_j): keys 16 ks .. 16 ks + 15 of a tile of `ROWS` keys, all d columns. */
template <int ROWS>
__device__ __host__ __forceinline__ uint64_t desc_mnmajor(uint32_t tile, int ks) {
    return make_desc(tile, ROWS * 128, 1024) + (uint32_t)ks * 16 * 128 / 16;
}
// [end generated]
#endif

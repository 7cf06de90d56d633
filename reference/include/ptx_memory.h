/* ptx_memory.h: shared-memory stores and loads at shared-space addresses, and fire-and-forget
 * global reductions, as lesson 11 (the backward pass on tensor cores) uses them; lesson 13
 * (a Hopper backward) reuses them.
 *
 *   stmatrix_x4     four 8x8 16-bit matrices from mma C fragments into shared memory (sm_90)
 *   sts32           one 32-bit store to shared memory
 *   lds_f32x2       8 bytes (two floats) from shared memory
 *   lds_u128        16 bytes from shared memory
 *   red_add_f32x2   p[0..1] += two floats in global memory, atomically, without a result
 *   red_add_f32x4   p[0..3] += four floats, the same
 *
 * Source: PTX ISA, "Data Movement and Conversion Instructions" (st, ld, stmatrix) and
 * "Parallel Synchronization and Communication Instructions: red". The shared-memory ones take
 * the 32-bit shared-space addresses that ldmatrix takes (smem_u32, ptx_mma.h), so a kernel
 * computes one address per lane and role and uses it for loads and stores alike. They are
 * written as PTX, not as C++ loads and stores through pointers, so that the CPU emulator
 * (tests/), which puts its own header of this name first on the include path, sees every
 * access to a shared tile and checks it against the block's barriers and the bank layout.
 *
 * Preconditions: sm_80 or newer (FA_SM80, ptx_mma.h); stmatrix and the vector reductions need
 * sm_90 (FA_SM90 below): below that stmatrix_x4 compiles to nothing (a kernel tests FA_SM90
 * and stores with sts32 instead) and the reductions fall back to one atomicAdd per float.
 * Addresses are aligned to the access size (16 bytes for stmatrix rows and red_add_f32x4). */
#ifndef PTX_MEMORY_H
#define PTX_MEMORY_H
#include <cuda_runtime.h>
#include <stdint.h>
#include "ptx_mma.h" /* FA_SM80 */

#ifndef FA_SM90
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
#define FA_SM90 0 /* stmatrix and red.global.add.v2/.v4 need sm_90 */
#else
#define FA_SM90 1
#endif
#endif

/* stmatrix .x4, the inverse of ldmatrix_x4: lanes 8i..8i+7 give the shared addresses of the 8
 * rows (16 bytes each) of matrix i; r<i> of every lane holds (row lane/4, cols 2(lane%4), +1)
 * of matrix i, the C layout of an mma fragment packed to 16 bits. */
__device__ __forceinline__ void stmatrix_x4(uint32_t addr, uint32_t r0, uint32_t r1, uint32_t r2, uint32_t r3) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "r"(r0), "r"(r1),
                 "r"(r2), "r"(r3)
                 : "memory");
#endif
}
/* st.shared.b32: v at shared address addr (4-byte aligned). */
__device__ __forceinline__ void sts32(uint32_t addr, uint32_t v) {
#if FA_SM80
    asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(addr), "r"(v) : "memory");
#endif
}
/* ld.shared.v2.f32: two floats at addr (8-byte aligned). */
__device__ __forceinline__ float2 lds_f32x2(uint32_t addr) {
    float2 v = make_float2(0.f, 0.f);
#if FA_SM80
    asm volatile("ld.shared.v2.f32 {%0, %1}, [%2];\n" : "=f"(v.x), "=f"(v.y) : "r"(addr));
#endif
    return v;
}
/* ld.shared.v4.b32: 16 bytes at addr (16-byte aligned). */
__device__ __forceinline__ uint4 lds_u128(uint32_t addr) {
    uint4 v = make_uint4(0, 0, 0, 0);
#if FA_SM80
    asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];\n" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(addr));
#endif
    return v;
}
/* p[0] += a, p[1] += b in global memory, atomically, the result not read back: the thread
 * does not wait for it (a reduction, not an atomic that returns). p is 8-byte aligned. One
 * 8-byte vector reduction on sm_90, two scalar atomics below. */
__device__ __forceinline__ void red_add_f32x2(float *p, float a, float b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("red.global.add.v2.f32 [%0], {%1, %2};\n" ::"l"(__cvta_generic_to_global(p)), "f"(a), "f"(b)
                 : "memory");
#elif FA_SM80
    atomicAdd(p, a);
    atomicAdd(p + 1, b);
#endif
}
/* p[0..3] += a, b, c, e, the same: one 16-byte vector reduction on sm_90 (p 16-byte aligned),
 * four scalar atomics below. */
__device__ __forceinline__ void red_add_f32x4(float *p, float a, float b, float c, float e) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("red.global.add.v4.f32 [%0], {%1, %2, %3, %4};\n" ::"l"(__cvta_generic_to_global(p)), "f"(a), "f"(b),
                 "f"(c), "f"(e)
                 : "memory");
#elif FA_SM80
    atomicAdd(p, a);
    atomicAdd(p + 1, b);
    atomicAdd(p + 2, c);
    atomicAdd(p + 3, e);
#endif
}
#endif

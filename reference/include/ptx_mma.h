/* ptx_mma.h: the tensor-core wrappers lesson 07 teaches you to write, given from lesson 08 on.
 *
 *   smem_u32        generic pointer -> 32-bit shared-space address (what ldmatrix and cp.async take)
 *   ldmatrix_x4     four 8x8 16-bit matrices from shared memory into mma fragments
 *   ldmatrix_x4_trans  the same, each matrix transposed on the way (V as a B operand)
 *   mma_16816<T>    d += A (16x16, row) * B (16x8, col), fp16 or bf16 inputs, fp32 accumulate
 *   ex2             2^x in one MUFU.EX2 instruction
 *   pack2<T>        two fp32 -> one register of two 16-bit values (S accumulators -> P operand)
 *   swz<D>          the XOR swizzle of a shared tile of D-element rows (conflict-free ldmatrix)
 *
 * Source: PTX ISA, "Warp Level Matrix Multiply-Accumulate Instructions" (mma.m16n8k16, ldmatrix).
 * Lesson 07's text derives every fragment layout these functions assume; the code below is
 * made from lesson 07's solution, where they are written (make starters; edit them there). The CPU emulator (tests/) puts its own header of
 * this name first on the include path, with the same functions computed as the ISA defines them.
 *
 * Preconditions: sm_80 or newer for mma with bf16 (the course's portable build also makes
 * sm_75 code, where FA_SM80 is 0, these compile to nothing and the host never launches the
 * kernel). Shared addresses are 16-byte aligned. */
#ifndef PTX_MMA_H
#define PTX_MMA_H
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <stdint.h>

// [generated from solutions/07-mma-ldmatrix/mma.cu, regions sm80 smem-u32 ldmatrix mma ex2 pack2 swizzle]
#ifndef FA_SM80
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#define FA_SM80 0
#else
#define FA_SM80 1
#endif
#endif
/* Generic pointer -> 32-bit shared-space address, what ldmatrix takes. */
__device__ __forceinline__ uint32_t smem_u32(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }
/* ldmatrix .x4: lanes 8i..8i+7 give the shared-memory addresses of the 8 rows
 * (16 bytes each) of matrix i; every lane gets back, in r[i], the two 16-bit
 * elements (row = lane/4, cols 2*(lane%4), +1) of matrix i. */
__device__ __forceinline__ void ldmatrix_x4(uint32_t r[4], uint32_t addr) {
#if FA_SM80
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
#endif
}
/* The same with .trans: lane gets (rows 2*(lane%4), +1; col lane/4) of each
 * matrix, i.e. the 8x8 matrix read column by column. */
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t r[4], uint32_t addr) {
#if FA_SM80
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
#endif
}
/* d += A (16x16, row) * B (16x8, col), fp32 accumulate: one mma.sync of the
 * whole warp. Each lane passes its 4 registers of A, 2 of B and 4 floats of
 * C, in the fragment layouts drawn below (fp16 and bf16 inputs). */
template <typename T>
__device__ __forceinline__ void mma_16816(float d[4], const uint32_t a[4], uint32_t b0, uint32_t b1);
template <>
__device__ __forceinline__ void mma_16816<__half>(float d[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
#if FA_SM80
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#endif
}
template <>
__device__ __forceinline__ void mma_16816<__nv_bfloat16>(float d[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
#if FA_SM80
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#endif
}
/* 2^x in one MUFU.EX2 instruction (ex2(-inf) = 0, which the masking relies on). */
__device__ __forceinline__ float ex2(float x) {
    float y = 0.f;
#if FA_SM80
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
#endif
    return y;
}
/* Two fp32 values -> one 32-bit register holding two 16-bit values, `lo` in
 * the low half: the order every mma fragment register uses (lower column
 * index in the low half). Rounds to nearest. */
template <typename T> __device__ __forceinline__ uint32_t pack2(float lo, float hi);
template <> __device__ __forceinline__ uint32_t pack2<__half>(float lo, float hi) {
    __half2 h = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<uint32_t *>(&h);
}
template <> __device__ __forceinline__ uint32_t pack2<__nv_bfloat16>(float lo, float hi) {
    __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t *>(&h);
}
/* Byte offset of 16-byte chunk `chunk` (8 elements) of row `row` in a tile
 * whose rows hold D 16-bit elements. The chunk index is XORed with row % 8:
 * the 8 rows an ldmatrix matrix reads (same logical chunk, 8 consecutive
 * rows) then land in 8 different 16-byte bank groups, so each 8x8 matrix is
 * read in one conflict-free shared-memory wavefront. For D = 128 only the low
 * 3 bits of the chunk index (0..15) change: a chunk stays in its half of the row. */
template <int D>
__device__ __forceinline__ uint32_t swz(int row, int chunk) {
    return (uint32_t)(row * (D * 2) + ((chunk ^ (row & 7)) << 4));
}
// [end generated]
#endif

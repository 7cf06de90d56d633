/* ptx_hopper_fp8.h: the FP8 (e4m3) wrappers lesson 14 teaches you to write, on top of
 * ptx_hopper.h (lesson 09's: descriptors, fences, commit, wait).
 *
 *   wgmma_ss_e4m3<N>, wgmma_rs_e4m3<N>  wgmma.mma_async m64nNk32 with e4m3 A and B, fp32
 *                            accumulators (N = 64, 128). Both operands K-major only: FP8 wgmma
 *                            has no transpose immediates, so for O = P V the B operand is V^T
 *                            (a row per column of V, keys contiguous)
 *   cvt_e4m3x2               two floats to two e4m3 codes in 16 bits (round to nearest even,
 *                            saturating to +-448)
 *   desc_kmajor_e4m3<ROWS>   the descriptor of a K-major e4m3 tile with d = 128: one 128-byte
 *                            swizzle row per tile row, k-slice kk (32 elements) 32 kk bytes in
 *
 * Source: PTX ISA, sections on wgmma.mma_async (".e4m3" types, "Register Fragments and Shared
 * Memory Matrix Layouts" for k = 32 with 8-bit types) and cvt (".e4m3x2"). The accumulator
 * layout is the one ptx_hopper.h describes; the A fragment of wgmma_rs_e4m3 holds, per thread,
 * 4 registers of 4 e4m3 codes each: rows g and g + 8 (g = lane / 4) of the warp's 16-row slice,
 * k columns 4 t .. 4 t + 3 and 16 + 4 t .. 16 + 4 t + 3 (t = lane % 4): not the accumulator's
 * pairs of columns, which is why lesson 14 reorders P (or the keys of V) before the PV wgmma.
 * The code below is made from lesson 14's solution, where they are written (make starters;
 * edit them there).
 *
 * Preconditions: as ptx_hopper.h (sm_90a code: its lesson's descriptor says arch := sm_90a; tiles on 1024 bytes). */
#ifndef PTX_HOPPER_FP8_H
#define PTX_HOPPER_FP8_H
#include "ptx_hopper.h"
// [generated from solutions/14-fp8-attention/fp8_attention.cu, regions ptx-wrappers descriptor]
/* wgmma.mma_async m64nNk32 with e4m3 A and B, fp32 accumulators in lesson 09's layout. Both
 * operands K-major (FP8 wgmma has no transpose immediates). "ss": A and B by descriptors; "rs": A
 * from 4 registers of 4 codes each (rows g, g + 8; columns 4 t .. 4 t + 3 and 16 + 4 t .. + 3). */
template <int N>
__device__ void wgmma_ss_e4m3(float (&d)[N / 2], uint64_t desc_a, uint64_t desc_b, int scale_d);
template <int N>
__device__ void wgmma_rs_e4m3(float (&d)[N / 2], const uint32_t (&a)[4], uint64_t desc_b, int scale_d);

/* IA, IB, IS: the operand numbers of desc_a (or the first A register), desc_b, scale_d. */
#define FA_WGMMA_SS_E4M3(N, ACC, REGS, IA, IB, IS)                                                          \
    template <>                                                                                              \
    __device__ __forceinline__ void wgmma_ss_e4m3<N>(float (&d)[N / 2], uint64_t desc_a, uint64_t desc_b,    \
                                                     int scale_d) {                                          \
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" IS ", 0;\n"                                        \
                     "wgmma.mma_async.sync.aligned.m64n" #N "k32.f32.e4m3.e4m3 {" REGS "}, %" IA ", %" IB    \
                     ", p, 1, 1;\n}\n"                                                                       \
                     : ACC                                                                                   \
                     : "l"(desc_a), "l"(desc_b), "r"(scale_d));                                              \
    }
#define FA_WGMMA_RS_E4M3(N, ACC, REGS, IA, IB, IS)                                                             \
    template <>                                                                                                 \
    __device__ __forceinline__ void wgmma_rs_e4m3<N>(float (&d)[N / 2], const uint32_t (&a)[4], uint64_t desc_b, \
                                                     int scale_d) {                                             \
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" IS ", 0;\n"                                           \
                     "wgmma.mma_async.sync.aligned.m64n" #N "k32.f32.e4m3.e4m3 {" REGS "}, {" IA "}, %" IB     \
                     ", p, 1, 1;\n}\n"                                                                          \
                     : ACC                                                                                      \
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d));                  \
    }
FA_WGMMA_SS_E4M3(64, FA_ACC32, FA_REGS32, "32", "33", "34")
FA_WGMMA_SS_E4M3(128, FA_ACC64, FA_REGS64, "64", "65", "66")
FA_WGMMA_SS_E4M3(192, FA_ACC96, FA_REGS96, "96", "97", "98")
FA_WGMMA_RS_E4M3(64, FA_ACC32, FA_REGS32, "%32, %33, %34, %35", "36", "37")
FA_WGMMA_RS_E4M3(128, FA_ACC64, FA_REGS64, "%64, %65, %66, %67", "68", "69")

/* e4m3 codes of hi and lo: lo in bits 0-7, hi in bits 8-15 (cvt puts its first source high). */
__device__ __forceinline__ uint16_t cvt_e4m3x2(float hi, float lo) {
    uint16_t r;
    asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;\n" : "=h"(r) : "f"(hi), "f"(lo));
    return r;
}
/* Programmatic dependent launch (PTX ISA, griddepcontrol): griddep_launch_dependents lets the
 * launch that follows this one in the stream, if launched with programmatic stream serialization,
 * start once every block of this one has executed it; griddep_wait, in that dependent launch,
 * waits until this one has finished and its writes are visible. */
__device__ __forceinline__ void griddep_launch_dependents() {
    asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
}
__device__ __forceinline__ void griddep_wait() { asm volatile("griddepcontrol.wait;\n" ::: "memory"); }
/* K-major e4m3 operand with 128 columns (d = 128 bytes: one swizzle atom wide): rows
 * [row0, row0 + 64 or N) of a tile of ROWS rows, k-slice kk (columns 32 kk .. 32 kk + 31). */
template <int ROWS>
__device__ __host__ __forceinline__ uint64_t desc_kmajor_e4m3(uint32_t tile, int row0, int kk) {
    return make_desc(tile + (uint32_t)row0 * 128 + (uint32_t)kk * 32, 16, 1024);
}
// [end generated]
#endif

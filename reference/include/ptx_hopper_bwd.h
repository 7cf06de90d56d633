/* ptx_hopper_bwd.h: the Hopper (sm_90a) wrappers lesson 13 teaches you to write, for the lessons after it.
 *
 *   wgmma_ss_mn<T, 64>    wgmma.mma_async m64n64k16, fp32 accumulators, A and B in shared memory and
 *                         both MN-major (imm-trans-a = imm-trans-b = 1): dQ = dS K_j read from the
 *                         dS^T and K_j tiles without a transposed copy (T = __half or __nv_bfloat16)
 *   ld_shared_f32x2       two floats from shared memory (L and D of two queries)
 *   bulk_load_1d          cp.async.bulk global -> shared without a tensor map, complete_tx on an mbarrier
 *   bulk_reduce_add_f32   cp.reduce.async.bulk .add.f32 shared -> global: a block of dQ added to the
 *                         fp32 accumulator, each addition atomic in L2; a bulk group (bulk_commit,
 *                         bulk_wait_read<N> of ptx_hopper.h)
 *
 * Source: PTX ISA, sections on wgmma.mma_async (imm-trans-a, imm-trans-b), cp.async.bulk and
 * cp.reduce.async.bulk. Lesson 13's text explains each; the code below is made from lesson
 * 13's solution, where they are written (make starters; edit them there). A CPU emulator (tests/hopper_emu) puts its own header of this name first
 * on the include path, with the same functions computed as the ISA defines them.
 *
 * Preconditions: sm_90a code (see ptx_hopper.h, which this header needs: its FA_REGS32 and
 * FA_ACC32 name the accumulators); shared addresses are 32-bit shared-window addresses; the bulk
 * copies take 16-byte aligned addresses and sizes in multiples of 16 bytes. */
#ifndef PTX_HOPPER_BWD_H
#define PTX_HOPPER_BWD_H
#include "ptx_hopper.h"
// [generated from solutions/13-hopper-backward/hopper_backward.cu, regions ptx-wrappers]
/* wgmma m64nNk16 with both operands MN-major (imm-trans-a = imm-trans-b = 1): A (64 x 16) read
 * from a tile whose rows are k and whose 64 columns are m (dS^T, keys as rows, read as dS), B
 * (16 x N) from rows k, columns n (K_j, keys as rows). The descriptors are desc_mnmajor's. */
template <typename T, int N>
__device__ void wgmma_ss_mn(float (&d)[N / 2], uint64_t desc_a, uint64_t desc_b, int scale_d);
#define FA_WGMMA_SS_MN(T, TY)                                                                             \
    template <>                                                                                           \
    __device__ __forceinline__ void wgmma_ss_mn<T, 64>(float (&d)[32], uint64_t desc_a, uint64_t desc_b,  \
                                                       int scale_d) {                                     \
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"                                         \
                     "wgmma.mma_async.sync.aligned.m64n64k16.f32." TY "." TY " {" FA_REGS32 "}, %32, %33," \
                     " p, 1, 1, 1, 1;\n}\n"                                                               \
                     : FA_ACC32                                                                           \
                     : "l"(desc_a), "l"(desc_b), "r"(scale_d));                                           \
    }
FA_WGMMA_SS_MN(__half, "f16")
FA_WGMMA_SS_MN(__nv_bfloat16, "bf16")
/* Two floats from shared memory (8-byte aligned). */
__device__ __forceinline__ float2 ld_shared_f32x2(uint32_t addr) {
    float2 v;
    asm volatile("ld.shared.v2.f32 {%0, %1}, [%2];\n" : "=f"(v.x), "=f"(v.y) : "r"(addr) : "memory");
    return v;
}
/* A bulk copy without a tensor map: `bytes` (a multiple of 16) contiguous bytes from global `src`
 * to shared `dst` (both 16-byte aligned), reported to the mbarrier `bar` like a TMA load. */
__device__ __forceinline__ void bulk_load_1d(uint32_t dst, const void *src, uint32_t bytes, uint32_t bar) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n"
                 ::"r"(dst), "l"(src), "r"(bytes), "r"(bar) : "memory");
}
/* dst[k] += src[k] for `bytes` / 4 floats, global dst, shared src (16-byte aligned, bytes a multiple
 * of 16), each addition atomic in L2. A bulk group like a TMA store: bulk_commit, then
 * bulk_wait_read<N> before src may be overwritten. */
__device__ __forceinline__ void bulk_reduce_add_f32(float *dst, uint32_t src, uint32_t bytes) {
    asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%0], [%1], %2;\n"
                 ::"l"(dst), "r"(src), "r"(bytes) : "memory");
}
// [end generated]
#endif

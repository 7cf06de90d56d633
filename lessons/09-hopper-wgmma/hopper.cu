/* 09-hopper-wgmma (starter): FlashAttention-2's forward pass on the Hopper hardware
 * FlashAttention-3 uses: warpgroup MMA (wgmma), TMA copies, mbarriers, warp specialization with
 * setmaxnreg.
 *
 * What is here: the PTX wrappers (read them), the host side, the shared-memory layout, the
 * schedule of work items, lesson 08's online softmax in the wgmma accumulator layout, the
 * epilogue. What you write: the TODO(n) below, in order; README.md explains each. Climb the
 * ladder as you go (TODO(0) says how far you are): after TODO(1)-(3) step 1 runs, after (4)-(6)
 * step 2, (7) step 3, (8) step 4, (9) steps 5, 6 and 7, the default build. Steps 1-4 build
 * from this file with lessons/09-hopper-wgmma/worklog/variants/steps-1-4.var: make lesson9-step1 (and
 * make emu-lesson9 EMU_STEP=1 on the CPU).
 * Source: Shah, Bikshandi, Zhang, Thakkar, Ramani, Dao, "FlashAttention-3" (2024): Algorithm 1
 * (producer and consumer warpgroups, a ring of K/V stages), Section 3.1 (ping-pong between
 * consumers), Section 3.2 and Algorithm 2 (the softmax of a tile overlapped with the GEMMs of
 * the next); the math is FlashAttention-2, Algorithm 1, as in lessons 07 and 08.
 * fa3_forward_kernel, the last device function, only hands out roles: a producer warpgroup
 * (Kernel::producer_mainloop) and consumer warpgroups of 64 query rows (consumer_mainloop: per
 * work item the MMA loop, then the epilogue). Q, K, V, O: [B, H, N, d] row-major; L: [B, H, N]
 * fp32, the natural-log logsumexp of the scaled scores (reference/include/attention.h).
 * Preconditions: fp16 or bf16, d in {64, 128}, scale > 0, compute capability 9.0 (sm_90a). */
// build: sm_90a
#include <cuda.h>  // CUtensorMap
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <stdint.h>
#include <stdio.h>
#include <math.h>
#include <type_traits>  // std::integral_constant
#include "attention.h"
#include "tma_params.h"  // the layout TMA writes; the tensor maps (host)
#include "ptx_mma.h"     // lesson 07's smem_u32, ex2, pack2
#include "hopper_attention.h"  // the API below; -DFA_LIBRARY_ONLY builds it without the grader's entry

#ifndef FA_LIBRARY_ONLY
const lesson_info LESSON = {
    9, "09-hopper-wgmma", "Hopper: wgmma, TMA, mbarriers, warp specialization",
    DTYPE_BIT(DTYPE_FP16) | DTYPE_BIT(DTYPE_BF16), 1, {64, 128, 0}, 0, 90};
#endif

/* TODO(0): the last step of the ladder whose TODOs you have written (1 after TODO(1)-(3), 2
 * after (4)-(6), 3 after (7), 4 after (8), 7 after (9)). A build of a later step (FA9_STEP) says
 * "not implemented" instead of running code you have not written. */
#define STARTER_DONE_STEP 0

// [region config]
/* -DNAME=value: FA9_STEP, the rung of the lesson's ladder (Step; 7, the default, is the
 * fastest). FA64_BC and FA64_STAGES, FA128_BC and FA128_STAGES: per d, B_c (keys per K/V tile,
 * the N of the wgmma computing S: 64, 96, 128, 176 or 192) and the ring's slots; define both.
 * FA64_WG: consumer warpgroups at d = 64, B_r = 64 FA64_WG (d = 128 has 2); 0, the default,
 * picks 2 or 3 per launch (launch64), 2 or 3 builds only that kernel. */
#ifndef FA9_STEP
#define FA9_STEP 7
#endif
#ifndef FA64_BC
#define FA64_BC 128
#define FA64_STAGES 3
#endif
#ifndef FA128_BC
#define FA128_BC 128
#define FA128_STAGES 2
#endif
#ifndef FA64_WG
#define FA64_WG 0
#endif
// [end config]
static_assert(FA64_WG == 0 || FA64_WG == 2 || FA64_WG == 3, "FA64_WG: 0 (per launch), 2 or 3");

// [region roles-types]
/* Steps 5-7 of the ladder (1-4: variants/steps-1-4.var). Step 5: a producer warpgroup, the
 * consumers taking turns, each one's softmax of S_j run during S_{j+1} and P_j V_j; then: */
template <int STEP>
struct Step {
    static_assert(STEP >= 5 && STEP <= 7, "FA9_STEP: 5..7 here, 1..4 with variants/steps-1-4.var");
    static constexpr bool PERSISTENT = STEP >= 6;  // one block per SM takes work items in turn
    static constexpr bool DYNAMIC = STEP >= 7;     // the next item from a counter in global memory
    static constexpr bool CHAIN = STEP >= 7;       // the turns run on from one item to the next
    static constexpr bool O_TMA = STEP >= 7;       // O leaves by a TMA store (where its tiles fit)
};

/* A producer and NC consumer warpgroups: every thread starts at 65,536 / 128 (NC + 1) registers
 * (__launch_bounds__), setmaxnreg moves them: 24 + 2 x 240 = 3 x 168, 32 + 3 x 160 = 4 x 128.
 * Named barriers (0 is __syncthreads), per consumer warpgroup c: its turn, TURN_WG0 + c (256
 * threads: its own and the one handing it over); its epilogue, EPILOGUE_WG0 + c (its 128). */
template <int NC>
struct Roles {
    static_assert(NC == 2 || NC == 3, "2 or 3 consumer warpgroups");
    static constexpr int BR = 64 * NC;
    static constexpr int REG_PRODUCER = NC == 2 ? 24 : 32;
    static constexpr int REG_CONSUMER = NC == 2 ? 240 : 160;
    enum NamedBarrier : int { TURN_WG0 = 1, EPILOGUE_WG0 = TURN_WG0 + NC };
};
/* mbarriers, full and empty of Q_i's buffer and of each ring slot's K_j and V_j: full takes the
 * producer's arrive.expect_tx and the tile's bytes, empty one arrival per consumer warp. */
enum MBar { FULL_Q, EMPTY_Q, FULL_K, FULL_V, EMPTY_K, EMPTY_V };
// [end roles-types]
/* The PTX wrappers this lesson teaches; the CPU emulator has its own. */
#ifndef FA_EMULATOR
// [region ptx-wrappers]
/* Shared-memory stores and loads at a shared address. */
__device__ __forceinline__ void st_shared_u32(uint32_t addr, uint32_t v) {
    asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(addr), "r"(v) : "memory");
}
__device__ __forceinline__ uint32_t ld_shared_u32(uint32_t addr) {
    uint32_t v;
    asm volatile("ld.shared.b32 %0, [%1];\n" : "=r"(v) : "r"(addr) : "memory");
    return v;
}
__device__ __forceinline__ void st_shared_v4(uint32_t addr, uint4 v) {
    asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w)
                 : "memory");
}
__device__ __forceinline__ uint4 ld_shared_v4(uint32_t addr) {
    uint4 v;
    asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];\n" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(addr)
                 : "memory");
    return v;
}
/* Shared memory written by ordinary stores (the generic proxy) becomes visible to wgmma and
 * TMA (the async proxy) only after this fence, executed by the writing threads, before the
 * barrier that orders them with the readers. */
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }
/* Named barriers 1..15: `count` threads (a multiple of 32) meet; bar.arrive does not wait. */
__device__ __forceinline__ void named_sync(int id, int count) {
    asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(count) : "memory");
}
__device__ __forceinline__ void named_arrive(int id, int count) {
    asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(count) : "memory");
}

/* Every warp of a warpgroup sets its per-thread register limit: .dec gives registers back to
 * the block's pool, .inc waits until the pool has enough and takes them. */
template <int R> __device__ __forceinline__ void setmaxnreg_dec() {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(R));
}
template <int R> __device__ __forceinline__ void setmaxnreg_inc() {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(R));
}

// [region ptx-mbarrier]
/* An mbarrier is 8 bytes of shared memory that counts arrivals and transaction bytes. A
 * phase completes when `count` arrivals and every expected byte have come; it then flips
 * the phase parity and rearms. A waiter names the parity of the phase it waits for. */
__device__ __forceinline__ void mbar_init(uint32_t bar, int count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
/* Makes the initialised barriers visible to the async proxy (TMA) and to other threads. */
__device__ __forceinline__ void mbar_fence_init() {
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
    asm volatile("{\n.reg .b64 state;\nmbarrier.arrive.shared::cta.b64 state, [%0];\n}\n" ::"r"(bar) : "memory");
}
/* One arrival that also announces `bytes` more bytes to come from TMA in this phase. */
__device__ __forceinline__ void mbar_arrive_expect_tx(uint32_t bar, uint32_t bytes) {
    asm volatile("{\n.reg .b64 state;\nmbarrier.arrive.expect_tx.shared::cta.b64 state, [%0], %1;\n}\n" ::"r"(bar),
                 "r"(bytes) : "memory");
}
/* True once the phase of parity `parity` has completed (try_wait may suspend the thread for a
 * while before it answers false). */
__device__ __forceinline__ bool mbar_try_wait(uint32_t bar, uint32_t parity) {
    uint32_t done;
    asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
                 : "=r"(done) : "r"(bar), "r"(parity) : "memory");
    return done != 0;
}
// [end ptx-mbarrier]
// [region ptx-tma]
/* One TMA copy: the box at coordinates (c0, c1, c2) of the tensor described by `map` (a
 * kernel parameter in the constant bank; its generic address is what the instruction takes)
 * to shared address `dst`, reporting its bytes to the mbarrier `bar` (complete_tx). */
__device__ __forceinline__ void tma_load_3d(uint32_t dst, const CUtensorMap *map, int c0, int c1, int c2,
                                            uint32_t bar) {
    asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%2, %3, %4}], [%5];\n" ::"r"(dst), "l"((uint64_t)map), "r"(c0), "r"(c1), "r"(c2),
                 "r"(bar) : "memory");
}
/* The copy the other way (step 7's O): the box at (c0, c1, c2) of `map` from shared address `src`, in
 * the layout a load of that box writes; rows past the end of the tensor are not written. The issuing
 * thread closes its stores into a group (bulk_commit) and, before `src` may be overwritten, waits until
 * at most N of its groups still read shared memory (bulk_wait_read<N>; the writes may still fly). */
__device__ __forceinline__ void tma_store_3d(const CUtensorMap *map, int c0, int c1, int c2, uint32_t src) {
    asm volatile("cp.async.bulk.tensor.3d.global.shared::cta.bulk_group [%0, {%1, %2, %3}], [%4];\n"
                 ::"l"((uint64_t)map), "r"(c0), "r"(c1), "r"(c2), "r"(src) : "memory");
}
__device__ __forceinline__ void bulk_commit() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }
template <int N> __device__ __forceinline__ void bulk_wait_read() {
    asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(N) : "memory");
}
// [end ptx-tma]

/* wgmma.mma_async m64nNk16, fp32 accumulators: D (64 x N, the warpgroup's) += A (64 x 16) B
 * (16 x N), asynchronous (it returns before it has read its inputs or written d). "ss": A and B
 * in shared memory, by descriptors; "rs": A from registers (mma.m16n8k16's A layout, a 16-row
 * slice per warp) and B MN-major (imm-trans-b = 1: V_j, a row per key). d[] holds, per 8-column
 * block j, (row g, cols 8j + 2t, +1) in d[4j], d[4j+1], row g + 8 in d[4j+2], d[4j+3], rows
 * from 16 x (warp in the warpgroup), g = lane / 4, t = lane % 4. scale_d = 0: d = A B. */
#define FA_R00 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15"
#define FA_R16 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
#define FA_R32 "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47"
#define FA_R48 "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
#define FA_R64 "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79"
#define FA_REGS32 FA_R00 ", " FA_R16
#define FA_REGS48 FA_REGS32 ", " FA_R32
#define FA_REGS64 FA_REGS48 ", " FA_R48
#define FA_REGS88 FA_REGS64 ", " FA_R64 ", %80, %81, %82, %83, %84, %85, %86, %87"
#define FA_REGS96 FA_REGS88 ", %88, %89, %90, %91, %92, %93, %94, %95"
#define FA_D8(i) "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), \
                 "+f"(d[i + 6]), "+f"(d[i + 7])
#define FA_ACC32 FA_D8(0), FA_D8(8), FA_D8(16), FA_D8(24)
#define FA_ACC48 FA_ACC32, FA_D8(32), FA_D8(40)
#define FA_ACC64 FA_ACC48, FA_D8(48), FA_D8(56)
#define FA_ACC88 FA_ACC64, FA_D8(64), FA_D8(72), FA_D8(80)
#define FA_ACC96 FA_ACC88, FA_D8(88)
template <typename T, int N>
__device__ void wgmma_ss(float (&d)[N / 2], uint64_t desc_a, uint64_t desc_b, int scale_d);
template <typename T, int N>
__device__ void wgmma_rs(float (&d)[N / 2], const uint32_t (&a)[4], uint64_t desc_b, int scale_d);

// [region wgmma-ss]
/* IA, IB, IS: the operand numbers of desc_a, desc_b, scale_d (after the N/2 accumulators). */
#define FA_WGMMA_SS(T, TY, N, ACC, REGS, IA, IB, IS)                                                          \
    template <>                                                                                                \
    __device__ __forceinline__ void wgmma_ss<T, N>(float (&d)[N / 2], uint64_t desc_a, uint64_t desc_b,        \
                                                   int scale_d) {                                              \
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" IS ", 0;\n"                                          \
                     "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." TY "." TY " {" REGS "}, %" IA ", %" IB \
                     ", p, 1, 1, 0, 0;\n}\n"                                                                   \
                     : ACC                                                                                     \
                     : "l"(desc_a), "l"(desc_b), "r"(scale_d));                                                \
    }
// [end wgmma-ss]
#define FA_WGMMA_RS(T, TY, N, ACC, REGS, IA, IB, IS)                                                             \
    template <>                                                                                                   \
    __device__ __forceinline__ void wgmma_rs<T, N>(float (&d)[N / 2], const uint32_t (&a)[4], uint64_t desc_b,    \
                                                   int scale_d) {                                                 \
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" IS ", 0;\n"                                             \
                     "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." TY "." TY " {" REGS "}, {" IA "}, %" IB    \
                     ", p, 1, 1, 1;\n}\n"                                                                         \
                     : ACC                                                                                        \
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d));                    \
    }
FA_WGMMA_SS(__half, "f16", 64, FA_ACC32, FA_REGS32, "32", "33", "34")
FA_WGMMA_SS(__half, "f16", 96, FA_ACC48, FA_REGS48, "48", "49", "50")
FA_WGMMA_SS(__half, "f16", 128, FA_ACC64, FA_REGS64, "64", "65", "66")
FA_WGMMA_SS(__half, "f16", 176, FA_ACC88, FA_REGS88, "88", "89", "90")
FA_WGMMA_SS(__half, "f16", 192, FA_ACC96, FA_REGS96, "96", "97", "98")
FA_WGMMA_SS(__nv_bfloat16, "bf16", 64, FA_ACC32, FA_REGS32, "32", "33", "34")
FA_WGMMA_SS(__nv_bfloat16, "bf16", 96, FA_ACC48, FA_REGS48, "48", "49", "50")
FA_WGMMA_SS(__nv_bfloat16, "bf16", 128, FA_ACC64, FA_REGS64, "64", "65", "66")
FA_WGMMA_SS(__nv_bfloat16, "bf16", 176, FA_ACC88, FA_REGS88, "88", "89", "90")
FA_WGMMA_SS(__nv_bfloat16, "bf16", 192, FA_ACC96, FA_REGS96, "96", "97", "98")
FA_WGMMA_RS(__half, "f16", 64, FA_ACC32, FA_REGS32, "%32, %33, %34, %35", "36", "37")
FA_WGMMA_RS(__half, "f16", 128, FA_ACC64, FA_REGS64, "%64, %65, %66, %67", "68", "69")
FA_WGMMA_RS(__nv_bfloat16, "bf16", 64, FA_ACC32, FA_REGS32, "%32, %33, %34, %35", "36", "37")
FA_WGMMA_RS(__nv_bfloat16, "bf16", 128, FA_ACC64, FA_REGS64, "%64, %65, %66, %67", "68", "69")

// [region wgmma-order]
/* Ordering around the asynchronous instructions. wgmma_fence: before the first wgmma, and
 * whenever registers a wgmma uses (accumulators, A) were written by other instructions since
 * the last wgmma. commit: the wgmmas issued since the last commit form one group. wait<N>:
 * until at most N groups are still running (groups complete in order). */
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N> __device__ __forceinline__ void wgmma_wait() {
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
/* The compiler sees the accumulators written when the wgmma is issued; this empty statement
 * (volatile, so it stays after the wait) makes every later use of d depend on the wait. */
template <int K> __device__ __forceinline__ void fence_acc(float (&d)[K]) {
#pragma unroll
    for (int i = 0; i < K; ++i) asm volatile("" : "+f"(d[i])::"memory");
}
// [end wgmma-order]
// [end ptx-wrappers]
#endif  // FA_EMULATOR

// [region mbar-wait]
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
    // TODO(4): return once the phase of parity `parity` of mbarrier `bar` has completed, using
    //   mbar_try_wait above (README, "What an mbarrier counts"). Until you write it, a kernel
    //   that waits on a barrier stops here, instead of reading tiles that may not have landed.
    (void)bar; (void)parity;
    __trap();
}
// [end mbar-wait]
// [region descriptor]
/* The 64-bit matrix descriptor of wgmma (PTX ISA, "Matrix Descriptor"): bits 0-13 start
 * address >> 4, 16-29 leading-dimension byte offset (LBO) >> 4, 32-45 stride-dimension byte
 * offset (SBO) >> 4, 49-51 base offset (0: every swizzle atom here starts on 1024 bytes), 62-63
 * swizzle (1 = 128-byte). The operand is a stack of 8-row x 128-byte atoms in the layout TMA
 * writes: SBO = 1024. K-major (Q, K): LBO unused (pass 16 bytes: field value 1), k-slice kk of a 64-column box 32 kk bytes
 * into it, the hardware swizzling the final addresses. MN-major (V, a row per key): LBO is the
 * distance between two 64-column boxes, key slice ks starts 16 ks rows into the tile. */
__device__ __host__ __forceinline__ uint64_t make_desc(uint32_t addr, uint32_t lbo, uint32_t sbo) {
    // TODO(1): the descriptor of an operand at shared address `addr` with these two byte offsets
    //   and the 128-byte swizzle: each field as the table above (and README, "Descriptors and the
    //   128-byte swizzle") gives it, an address field holding 14 bits of its value in 16-byte
    //   units. make emu-lesson9 checks it against the layout TMA writes before anything runs.
    (void)addr; (void)lbo; (void)sbo;
    return 0;
}
/* K-major operand: rows [row0, row0 + 64 or N) of a tile of `ROWS` rows, k-slice kk (columns
 * 16 kk .. 16 kk + 15): box kk / 4, 32 bytes a slice into it, added to the rows' descriptor in
 * 16-byte units (shared memory is below 256 KiB: no carry): one make_desc per tile, not per slice. */
template <int ROWS>
__device__ __host__ __forceinline__ uint64_t desc_kmajor(uint32_t tile, int row0, int kk) {
    // TODO(2): where k-slice kk of the rows from row0 starts in a tile of ROWS rows stored as
    //   64-column boxes of 128-byte rows, and its LBO and SBO (the comment above; README,
    //   "Descriptors and the 128-byte swizzle").
    (void)tile; (void)row0; (void)kk;
    return make_desc(0, 0, 0);
}
/* MN-major operand (V_j): keys 16 ks .. 16 ks + 15 of a tile of `ROWS` keys, all d columns. */
template <int ROWS>
__device__ __host__ __forceinline__ uint64_t desc_mnmajor(uint32_t tile, int ks) {
    // TODO(2): the same for keys 16 ks .. 16 ks + 15 of V_j, whose d = 128 columns span two
    //   boxes: LBO is what takes the instruction from the first box to the second.
    (void)tile; (void)ks;
    return make_desc(0, 0, 0);
}
// [end descriptor]
// [region kernel-parts]
/* Shared memory of a block, from a 1024-byte aligned base: Q_i [B_r x D], STAGES K and STAGES V
 * slots [B_c x D], as D / 64 boxes [rows x 64] in the layout TMA writes; with OSTAGE an O tile
 * [64 x D] per consumer warpgroup; the mbarriers (bar: FULL_Q, EMPTY_Q, then STAGES of each
 * other kind); in 16 bytes, the next work item (step 7). */
template <int D, int BC, int STAGES, int NC, bool OSTAGE>
struct SmemLayout {
    static constexpr uint32_t TILE = BC * D * 2, OTILE = 64 * D * 2;
    static constexpr uint32_t Q = 0, K = 64 * NC * D * 2, V = K + STAGES * TILE, O = V + STAGES * TILE;
    static constexpr uint32_t BAR = O + (OSTAGE ? NC * OTILE : 0);
    static constexpr uint32_t WORK = (BAR + 8 * (2 + 4 * STAGES) + 15) / 16 * 16;
    static constexpr uint32_t ALLOC = WORK + 16 + 1024;  // dynamic shared memory is only 16-byte aligned
    __host__ __device__ static constexpr uint32_t bar(MBar b, int s = 0) {
        return b == FULL_Q ? BAR : b == EMPTY_Q ? BAR + 8 : b == FULL_K ? BAR + 8 * (2 + s)
             : b == FULL_V ? BAR + 8 * (2 + STAGES + s) : b == EMPTY_K ? BAR + 8 * (2 + 2 * STAGES + s)
             : BAR + 8 * (2 + 3 * STAGES + s);
    }
};
/* One kernel of the ladder. O leaves by TMA store only where the O tiles fit next to the ring
 * (not at d = 128, B_c = 176, 2 stages: 240 KiB); elsewhere from registers, as in step 6. */
template <typename T_, int D_, int BC_, int STAGES_, int STEP, int NC_>
struct Config {
    static_assert((D_ == 64 || D_ == 128) && BC_ % 16 == 0 && BC_ >= 64 && BC_ <= 192 && STAGES_ >= 1, "bad tile");
    using T = T_;
    using S = Step<STEP>;
    using R = Roles<NC_>;
    static constexpr int D = D_, BC = BC_, STAGES = STAGES_, NC = NC_, BR = R::BR;
    static constexpr int THREADS = 128 * (NC + 1);
    static constexpr bool O_TMA = S::O_TMA && SmemLayout<D, BC, STAGES, NC, true>::ALLOC <= 227 * 1024;  // sm_90's most
    using SL = SmemLayout<D, BC, STAGES, NC, O_TMA>;
};

// [region schedule]
/* Work item t = 0 .. T_r B H - 1: which query tile of which head, in the order the blocks
 * should start them. Non-causal, the query tiles of one head are neighbours (K, V stay in L2).
 * Causal, the longest tiles first, so that the short ones fill the end, but in sections of HS
 * heads whose K and V fit in L2 together (heads_per_section), as FlashAttention-3's scheduler
 * does: the longest tiles of all heads at once would stream every head's K and V through L2. */
struct Work { int q0, bh, n_tiles; };  // first query row, b H + h, K/V tiles (visited from the last)
template <int BR, int BC>
__device__ __forceinline__ Work work_of(int t, int N, int BH, int causal, int HS) {
    const int Tr = (N + BR - 1) / BR;
    Work w;
    int q_tile;
    if (causal) {
        const int sec = t / (HS * Tr), r = t % (HS * Tr);  // section, and the item within it
        const int h0 = sec * HS, nh = min(HS, BH - h0);    // its heads (the last section may be short)
        q_tile = Tr - 1 - r / nh;
        w.bh = h0 + r % nh;
    } else {
        q_tile = t % Tr;
        w.bh = t / Tr;
    }
    w.q0 = q_tile * BR;
    const int kv_end = causal ? min(N, w.q0 + BR) : N;  // causal: skip the tiles above the diagonal
    w.n_tiles = (kv_end + BC - 1) / BC;
    return w;
}
// [end schedule]

/* A consumer warpgroup's 64 rows of a query tile, accumulators and math. Warp wq, lane 4 g + t
 * holds rows 16 wq + g and + 8: s[4 j + e] is key 8 j + 2 t + (e & 1) of the first (e < 2). */
template <class C>
struct Consumer {
    using T = typename C::T;
    static constexpr int D = C::D, BC = C::BC, BR = C::BR;
    float o[D / 2] = {};                  // O: 64 x D per warpgroup, fp32
    float s[BC / 2] = {};                 // S of one tile, then its exponentials
    uint32_t p[BC / 16][4];               // P as wgmma A fragments (16 keys each)
    float m[2] = {-INFINITY, -INFINITY};  // running max (raw scores), rows g and g + 8
    float l[2] = {};                      // this thread's share of the running sums
    template <int W>
    __device__ __forceinline__ float (&s_first())[W / 2] { return reinterpret_cast<float(&)[W / 2]>(s); }
    // [region issue-s]
    /* S = Q_i K_j^T for this warpgroup's 64 rows and the tile's first W keys (B_c, or 64: mma_loop's first
     * tile), into s_first<W>() (s's first W / 2 values): D / 16 wgmmas, the first with scale_d = 0. */
    template <int W = BC> __device__ __forceinline__ void issue_s(uint32_t sQ, int wg_row0, uint32_t sK) {
        // TODO(3): S = Q_i K_j^T into s_first<W>(): one wgmma_ss<T, W> per 16-wide slice of d (W
        //   keys: B_c, or 64 on a first tile), A the warpgroup's 64 rows of Q_i (from row wg_row0 of
        //   the tile at sQ, which holds all BR = 64 NC rows of the block: desc_kmajor<BR>), B the
        //   tile K_j at sK (BC rows; the wgmma reads the first W), each described by desc_kmajor;
        //   the first overwrites, the others accumulate; then close them into one group (README,
        //   "Warpgroups and the instruction" and "Asynchronous, and what that demands").
        (void)sQ; (void)wg_row0; (void)sK;
    }
    // [end issue-s]
    // [region issue-pv]
    /* O += P V_j: B_c / 16 wgmmas, A = 16 keys of P from registers, B = those keys of V_j. */
    __device__ __forceinline__ void issue_pv(uint32_t sV) {
        // TODO(3): O += P V_j into o: one wgmma_rs per 16 keys, A the fragments p[] of those keys,
        //   B those keys of V_j at sV (desc_mnmajor), always accumulating; one group.
        (void)sV;
    }
    // [end issue-pv]
    /* Keys >= N and, causal, keys after the row get -inf (`row`: the query row of e < 2). */
    template <int W = BC> __device__ __forceinline__ void mask(int k0, int row, int t, int N, int causal) {
        const int first = k0 + 2 * t;  // the column of s[0]; s[4 j + e] is 8 j + (e & 1) columns after it
        const int lim0 = (causal ? min(N, row + 1) : N) - first, lim1 = (causal ? min(N, row + 9) : N) - first;
#pragma unroll
        for (int j = 0; j < W / 8; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e)
                if (8 * j + (e & 1) >= (e < 2 ? lim0 : lim1)) s[4 * j + e] = -INFINITY;
    }

    // [region softmax]
    /* Online softmax, first part (lesson 08): the new row maxima, alpha = exp2((m_old -
     * m_new) scale_log2), then P = exp2(S scale_log2 - m_new scale_log2) in place in s and
     * this thread's share of its row sums. Returns alpha for the two rows; the caller
     * rescales O and l once no wgmma is writing O. The offset 0 for a row whose maximum is
     * still -inf (every key so far masked) keeps exp2(-inf - offset) = 0 instead of NaN. */
    template <int W = BC> __device__ __forceinline__ void softmax(float scale_log2, float alpha[2], float rowsum[2]) {
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            float mx = m[r];
#pragma unroll
            for (int j = 0; j < W / 8; ++j) mx = fmaxf(mx, fmaxf(s[4 * j + 2 * r], s[4 * j + 2 * r + 1]));
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
            const float base = (mx == -INFINITY) ? 0.f : mx * scale_log2;
            alpha[r] = ex2(m[r] * scale_log2 - base);
            m[r] = mx;
            float sum = 0.f;
#pragma unroll
            for (int j = 0; j < W / 8; ++j) {
                const float x0 = fmaf(s[4 * j + 2 * r], scale_log2, -base);
                const float x1 = fmaf(s[4 * j + 2 * r + 1], scale_log2, -base);
                s[4 * j + 2 * r] = ex2(x0);
                s[4 * j + 2 * r + 1] = ex2(x1);
                sum += s[4 * j + 2 * r] + s[4 * j + 2 * r + 1];
            }
            rowsum[r] = sum;
        }
    }
    /* O and l scaled to the new maximum, l += the new sums. */
    __device__ __forceinline__ void rescale(const float alpha[2], const float rowsum[2]) {
#pragma unroll
        for (int r = 0; r < 2; ++r) l[r] = l[r] * alpha[r] + rowsum[r];
#pragma unroll
        for (int j = 0; j < D / 8; ++j) {
            o[4 * j] *= alpha[0];
            o[4 * j + 1] *= alpha[0];
            o[4 * j + 2] *= alpha[1];
            o[4 * j + 3] *= alpha[1];
        }
    }
    /* P into A fragments: keys 16 ks .. + 15 are accumulator blocks 2 ks, 2 ks + 1, whose layout
     * is the A layout (row g: a[0], a[2]; row g + 8: a[1], a[3]): a pack, no shuffle; zeros past W. */
    template <int W = BC> __device__ __forceinline__ void pack_p() {
#pragma unroll
        for (int ks = 0; ks < BC / 16; ++ks) {
            p[ks][0] = ks < W / 16 ? pack2<T>(s[8 * ks + 0], s[8 * ks + 1]) : 0u;
            p[ks][1] = ks < W / 16 ? pack2<T>(s[8 * ks + 2], s[8 * ks + 3]) : 0u;
            p[ks][2] = ks < W / 16 ? pack2<T>(s[8 * ks + 4], s[8 * ks + 5]) : 0u;
            p[ks][3] = ks < W / 16 ? pack2<T>(s[8 * ks + 6], s[8 * ks + 7]) : 0u;
        }
    }
    // [end softmax]
    /* Finalize row r (0: g, 1: g + 8): l, the row's 4 threads adding their shares; O's columns
     * 8 j + 2 t, + 1 times inv = 1 / l, packed; L = m scale + ln l (-inf: no keys). */
    __device__ __forceinline__ float row_sum(int r) const {
        const float lr = l[r] + __shfl_xor_sync(0xffffffffu, l[r], 1);
        return lr + __shfl_xor_sync(0xffffffffu, lr, 2);
    }
    __device__ __forceinline__ uint32_t o_pair(int j, int r, float inv) const {
        return pack2<T>(o[4 * j + 2 * r] * inv, o[4 * j + 2 * r + 1] * inv);
    }
    __device__ __forceinline__ float lse(int r, float lr, float scale_log2) const {
        return lr > 0.f ? (m[r] * scale_log2 + __log2f(lr)) * 0.69314718055994531f : -INFINITY;
    }
};

/* A consumer thread: warpgroup c (rows 64 c .. of a tile), warp wq, lane 4 g + t; ring and turns. */
template <class C>
struct Warpgroup {
    const uint32_t base;
    const int tid, lane, c, wq, g, t, wg_row0;
    __device__ __forceinline__ Warpgroup(uint32_t base_, int tid_)
        : base(base_), tid(tid_), lane(tid_ & 31), c(tid_ / 128 - 1), wq((tid_ / 32) % 4), g(lane >> 2),
          t(lane & 3), wg_row0(64 * c) {}
    __device__ __forceinline__ uint32_t bar(MBar b, int s = 0) const { return base + C::SL::bar(b, s); }
    /* A warp releases a tile after its wgmmas on it: __syncwarp (every lane waited), lane 0 arrives. */
    __device__ __forceinline__ void release(MBar b, int s = 0) const {
        // TODO(6): the warp's one arrival on empty barrier b of slot s (its count is one per
        //   consumer warp: init_barriers), made only once every lane of the warp has passed the
        //   wait that retired its wgmmas on the tile (README, "The ring").
        (void)b; (void)s;
    }
    /* Steps 6-7, after this warpgroup's last S = Q_i K_j^T: Q_i's buffer may take the next tile. */
    __device__ __forceinline__ void release_q() const { if (C::S::PERSISTENT) release(EMPTY_Q); }
    /* Turns: c issues its GEMMs after bar.sync on its barrier, then lets c + 1 (mod NC) go. */
    // TODO(8): begin_turn waits on this warpgroup's turn barrier, pass_turn lets the next
    //   warpgroup (mod NC) go without waiting; each barrier counts the 256 threads of the two
    //   warpgroups that meet on it (Roles; README, "Named barriers" and "Ping-pong between the
    //   consumers").
    __device__ __forceinline__ void begin_turn() const {}
    __device__ __forceinline__ void pass_turn() const {}
};

/* The phases of a kernel of the ladder, and what they share: its arguments, its shared memory. */
template <class C>
struct Kernel {
    using T = typename C::T;
    using S = typename C::S;
    using SL = typename C::SL;
    const CUtensorMap *tmQ, *tmK, *tmV, *tmO;
    T *O;
    float *L, scale_log2;
    int N, BH, causal, HS, *sched;
    int n_work;     // T_r B H
    uint32_t base;  // the block's shared memory (SmemLayout)
    __device__ __forceinline__ uint32_t bar(MBar b, int s = 0) const { return base + SL::bar(b, s); }
    // [region init]
    /* Thread 0, before every role: a full barrier expects one arrival, an empty one per consumer warp. */
    __device__ __forceinline__ void init_barriers() const {
        mbar_init(bar(FULL_Q), 1);
        mbar_init(bar(EMPTY_Q), 4 * C::NC);
        for (int s = 0; s < C::STAGES; ++s) {
            mbar_init(bar(FULL_K, s), 1);
            mbar_init(bar(FULL_V, s), 1);
            mbar_init(bar(EMPTY_K, s), 4 * C::NC);
            mbar_init(bar(EMPTY_V, s), 4 * C::NC);
        }
        mbar_fence_init();
    }
    // [end init]
    // [region producer]
    /* K_j, then V_j (the key tile from row row0 of slice bh: j B_c here) into slot gi % STAGES, gi
     * counting every K/V tile the block loads. Fill `use` of a slot first waits until every consumer
     * warp has released fill use - 1: that phase of the slot's empty barrier has parity (use - 1) & 1. */
    __device__ __forceinline__ void load_kv(int gi, int row0, int bh) const {
        const int s = gi % C::STAGES, use = gi / C::STAGES;
        // TODO(5): K_j (rows row0 .. of head bh, tensor map tmK), then V_j (tmV), into slot s
        //   (SmemLayout: SL::K or SL::V + s SL::TILE, then 64-column boxes of C::BC rows): for
        //   each, wait until the slot's previous fill is released (the parity above: not before
        //   the first fill), announce the tile's bytes on its full barrier (the whole tile: rows
        //   past N, zero-filled by TMA, count too), and copy its boxes by TMA, reporting to that
        //   barrier (README, "The ring"; tma_load_3d for the layout).
        (void)s; (void)use; (void)row0; (void)bh;
    }
    // [end producer]
    // [region producer-loop]
    /* The producer's thread 0 (the kernel): per work item Q_i, once every consumer warp released its
     * buffer (empty Q), then its K/V tiles from the diagonal down (load_kv). Step 7 claims the next
     * item while Q_i's copies fly, stores it (row, head, tiles; past the end none) before full Q. */
    __device__ __forceinline__ void producer_mainloop() const {
        int item = blockIdx.x;     // the block's first work item
        int qn = 0, gi = 0;        // query tiles and K/V tiles loaded so far
        for (;; ++qn) {
            if (!S::DYNAMIC && item >= n_work) break;
            if (qn > 0) mbar_wait(bar(EMPTY_Q), (qn - 1) & 1);  // Q_i's buffer is free
            if (S::DYNAMIC && item >= n_work) {
                st_shared_u32(base + SL::WORK + 8, 0u);  // no tiles: no more items
                mbar_arrive(bar(FULL_Q));
                break;
            }
            const Work wk = work_of<C::BR, C::BC>(item, N, BH, causal, HS);
            if (S::DYNAMIC)  // the item itself: the consumers need no divisions
                st_shared_v4(base + SL::WORK, make_uint4((uint32_t)wk.q0, (uint32_t)wk.bh, (uint32_t)wk.n_tiles, 0u));
            mbar_arrive_expect_tx(bar(FULL_Q), C::BR * C::D * 2);
            for (int b = 0; b < C::D / 64; ++b)
                tma_load_3d(base + SL::Q + b * C::BR * 128, tmQ, 64 * b, wk.q0, wk.bh, bar(FULL_Q));
            const int next = S::DYNAMIC ? atomicAdd(sched, 1) + (int)gridDim.x : item + (int)gridDim.x;
            for (int it = 0; it < wk.n_tiles; ++it) load_kv(gi + it, (wk.n_tiles - 1 - it) * C::BC, wk.bh);
            gi += wk.n_tiles;
            item = next;
        }
        if constexpr (S::DYNAMIC) {  // the last block out puts the counter back to 0 for the next launch
            __threadfence();
            if (atomicAdd(sched + 1, 1) == (int)gridDim.x - 1) {
                atomicExch(sched, 0);
                atomicExch(sched + 1, 0);
            }
        }
    }
    // [end producer-loop]
    // [region loop-overlap]
    /* A consumer warpgroup's MMA loop over a work item (consumer_mainloop; FlashAttention-3,
     * Algorithm 2): in one turn (its named barrier) it issues S_it = Q K_it^T and O += P_{it-1}
     * V_{it-1} once their tiles have landed (full K, full V), waits for the first (wait<1>),
     * computes the softmax of S_it while the second runs, and waits for it (wait<0>) only before it
     * rescales O and overwrites P. Turns: S_0, n_tiles - 1 pairs, the last P V. Slots from gi.
     * S_0 covers 64 keys where no row of the warpgroup sees more (causal, B_r = B_c = 128: warpgroup 0's
     * diagonal tile; worklog), picked on c broadcast: a wgmma under a branch on a thread's value serializes all. */
    __device__ __forceinline__ void mma_loop(const Warpgroup<C> &wg, Consumer<C> &w, const Work &wk, int row,
                                             int gi) const {
        constexpr int STAGES = C::STAGES;
        const int n_tiles = wk.n_tiles;
        const uint32_t sQ = base + SL::Q;
        auto needs_mask = [&](int k0) { return k0 + C::BC > N || (causal && k0 + C::BC - 1 > wk.q0 + wg.wg_row0); };
        int turn = 0;  // the last warpgroup's last turn of an item passes nothing on (steps 5-6)
        auto end_turn = [&]() {
            if (S::CHAIN || !(wg.c == C::NC - 1 && turn == n_tiles)) wg.pass_turn();
            ++turn;
        };
        if (!S::CHAIN && wg.c == C::NC - 1) wg.pass_turn();  // warpgroup 0 goes first
        float alpha[2], rowsum[2];
        auto s0 = [&](auto width) {  // S_0 on the first tile's first W keys (issue_s)
            constexpr int W = decltype(width)::value;
            const int k0 = (n_tiles - 1) * C::BC, slot = gi % STAGES, ph = (gi / STAGES) & 1;
            mbar_wait(wg.bar(FULL_K, slot), ph);
            wg.begin_turn();
            wgmma_fence();
            fence_acc(w.s);
            w.template issue_s<W>(sQ, wg.wg_row0, base + SL::K + slot * SL::TILE);
            end_turn();
            wgmma_wait<0>();
            fence_acc(w.s);
            wg.release(EMPTY_K, slot);
            if (n_tiles == 1) wg.release_q();
            if (needs_mask(k0)) w.template mask<W>(k0, row, wg.t, N, causal);
            w.template softmax<W>(scale_log2, alpha, rowsum);
            w.rescale(alpha, rowsum);  // O is 0: only sets l
            w.template pack_p<W>();
        };
        const int c = __shfl_sync(0xffffffffu, wg.c, 0);
        const bool narrow = C::BC > 64 && (causal ? min(N, wk.q0 + 64 * c + 64) : N) - (n_tiles - 1) * C::BC <= 64;
        narrow ? s0(std::integral_constant<int, 64>{}) : s0(std::integral_constant<int, C::BC>{});
        for (int it = 1; it < n_tiles; ++it) {
            const int slot = (gi + it) % STAGES, ph = ((gi + it) / STAGES) & 1;
            const int pslot = (gi + it - 1) % STAGES, pph = ((gi + it - 1) / STAGES) & 1;
            const int k0 = (n_tiles - 1 - it) * C::BC;
            // TODO(9): one turn of the pair S_it = Q_i K_it^T (K in slot `slot`, phase ph) and
            //   O += P_{it-1} V_{it-1} (V in `pslot`, phase pph), the blocks before and after this
            //   loop showing each half: what must have landed before the turn; the fences the
            //   wgmmas need (S and O are accumulators, fence_acc; P is an operand written since the
            //   last wgmma, which wgmma_fence covers); which wait lets the softmax of S_it (and its
            //   mask) run while P V is still computing; when each tile, and on the last tile Q_i
            //   (release_q), is released; and why O's rescale and the new P must wait for P V
            //   (README, "Overlap inside a warpgroup"). Until you write it, a work item with more
            //   than one K/V tile stops here. wait<0> in place of the right wait passes the grader
            //   too: the emulator's report flags it ("overlap: none"), the ladder's timings show it.
            (void)slot; (void)ph; (void)pslot; (void)pph; (void)k0;
            __trap();
        }
        {  // P V of the last tile
            const int pslot = (gi + n_tiles - 1) % STAGES, pph = ((gi + n_tiles - 1) / STAGES) & 1;
            mbar_wait(wg.bar(FULL_V, pslot), pph);
            wg.begin_turn();
            wgmma_fence();
            fence_acc(w.o);
            w.issue_pv(base + SL::V + pslot * SL::TILE);
            end_turn();
            wgmma_wait<0>();
            fence_acc(w.o);
            wg.release(EMPTY_V, pslot);
        }
    }
    // [end loop-overlap]
    // [region epilogue]
    /* The end of a work item (consumer_mainloop): O and L of the warpgroup's rows < N. O goes, step
     * 5, through the warpgroup's rows of the Q tile (no wgmma reads them past its epilogue barrier)
     * and 16-byte stores; step 6, from registers (Q's buffer holds the next tile); step 7, by a
     * TMA store per 64 columns of its own O tile, issued (and later waited for) by its thread 0. */
    __device__ __forceinline__ void epilogue(const Warpgroup<C> &wg, Consumer<C> &w, const Work &wk,
                                             size_t head) const {
        constexpr int D = C::D;
        const int bar = C::R::EPILOGUE_WG0 + wg.c, q0 = wk.q0, wg_row0 = wg.wg_row0;
        const uint32_t sQ = base + SL::Q, sO = base + SL::O + (uint32_t)wg.c * SL::OTILE;
        if constexpr (!S::PERSISTENT) {
            fence_proxy_async();  // the Q tile was last touched by the async proxy (TMA, wgmma)
            named_sync(bar, 128);
        }
        if constexpr (C::O_TMA) {
            if (wg.tid % 128 == 0) bulk_wait_read<0>();  // the previous item's store has read the O tile
            named_sync(bar, 128);
        }
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            const float lr = w.row_sum(r);
            const float inv = lr > 0.f ? __fdividef(1.f, lr) : 0.f;
            const int srow = wg_row0 + 16 * wg.wq + wg.g + 8 * r;  // row in the tile
            if constexpr (C::O_TMA) {
                const uint32_t o_row = sO + tma_tile_offset(srow - wg_row0, 2 * wg.t, 64);  // box 0, chunk 0
#pragma unroll  // chunk j of the row: one XOR of chunk 0's address (tma_tile_chunk)
                for (int j = 0; j < D / 8; ++j) st_shared_u32(tma_tile_chunk(o_row, j, 64), w.o_pair(j, r, inv));
            } else if constexpr (S::PERSISTENT) {
                if (q0 + srow < N) {
#pragma unroll
                    for (int j = 0; j < D / 8; ++j)
                        *reinterpret_cast<uint32_t *>(O + (head + q0 + srow) * D + 8 * j + 2 * wg.t) =
                            w.o_pair(j, r, inv);
                }
            } else {
#pragma unroll
                for (int j = 0; j < D / 8; ++j)
                    st_shared_u32(sQ + tma_tile_offset(srow, 8 * j + 2 * wg.t, C::BR), w.o_pair(j, r, inv));
            }
            if (wg.t == 0 && q0 + srow < N) L[head + q0 + srow] = w.lse(r, lr, scale_log2);
        }
        if constexpr (C::O_TMA) {
            fence_proxy_async();  // ordinary stores -> the TMA store's reads (async proxy)
            named_sync(bar, 128);
            if (wg.tid % 128 == 0 && q0 + wg_row0 < N) {  // rows >= N of the box are not written
                for (int b = 0; b < D / 64; ++b) tma_store_3d(tmO, 64 * b, q0 + wg_row0, wk.bh, sO + b * 64 * 128);
                bulk_commit();
            }
        } else if constexpr (!S::PERSISTENT) {
            __syncwarp();
            constexpr int CH = D / 8;  // 16-byte chunks per row; a warp stores its 16 rows
#pragma unroll
            for (int i = 0; i < 16 * CH / 32; ++i) {
                const int r = wg_row0 + 16 * wg.wq + wg.lane / CH + i * (32 / CH), ch = wg.lane % CH;
                if (q0 + r < N)
                    *reinterpret_cast<uint4 *>(O + (head + q0 + r) * D + ch * 8) =
                        ld_shared_v4(sQ + tma_tile_offset(r, ch * 8, C::BR));
            }
        }
    }
    // [end epilogue]
    // [region consumer-loop]
    /* A consumer thread (the kernel): the block's work items in turn (step 5: one), each the MMA
     * loop and the epilogue; step 7 reads the item the producer stored before arriving on full Q. */
    __device__ __forceinline__ void consumer_mainloop(int tid) const {
        const Warpgroup<C> wg(base, tid);
        if (S::CHAIN && wg.c == C::NC - 1) wg.pass_turn();  // step 7: warpgroup 0 takes the first turn
        int gi = 0;                // K/V tiles consumed so far (the ring's position)
        int wi = blockIdx.x;       // the work item
        for (int qn = 0;; ++qn) {  // qn: query tiles consumed so far
            Work wk;
            if constexpr (S::DYNAMIC) {  // the producer's item; no tiles: no more items
                mbar_wait(wg.bar(FULL_Q), qn & 1);
                wk = {(int)ld_shared_u32(base + SL::WORK), (int)ld_shared_u32(base + SL::WORK + 4),
                      (int)ld_shared_u32(base + SL::WORK + 8)};
                if (wk.n_tiles == 0) break;
            } else {
                if (wi >= n_work) break;
                wk = work_of<C::BR, C::BC>(wi, N, BH, causal, HS);
            }
            const int row = wk.q0 + wg.wg_row0 + 16 * wg.wq + wg.g;  // query row of s[4 j + e], e < 2
            const size_t head = (size_t)wk.bh * N;
            Consumer<C> w;
            if constexpr (!S::DYNAMIC) mbar_wait(wg.bar(FULL_Q), qn & 1);
            mma_loop(wg, w, wk, row, gi);
            gi += wk.n_tiles;
            epilogue(wg, w, wk, head);
            if constexpr (!S::DYNAMIC) wi += gridDim.x;
        }
        if (S::CHAIN && wg.c == 0) wg.begin_turn();  // takes the last warpgroup's final hand-over
        if (C::O_TMA && tid % 128 == 0) bulk_wait_read<0>();  // shared memory must outlive the last store's reads
    }
    // [end consumer-loop]
};
// [end kernel-parts]
// [region roles]
/* O and L for query tiles of B_r = 64 NC rows; the block hands out roles: warpgroup 0 the producer,
 * the NC after it consumers. Grid: step 5, T_r B H blocks, one work item each; steps 6-7, at most one
 * per SM, taking items blockIdx.x, then every gridDim.x-th (6) or from the counter `sched` (7: two
 * ints, 0 before the launch and after it). Config::THREADS threads, SmemLayout::ALLOC bytes of dynamic
 * shared memory. tmQ, tmK, tmV, tmO: tensor maps {d, N, B H}, boxes of B_r, B_c, B_c, 64 rows; Q, K, V:
 * the same tensors (steps 1-4). BH = B H; scale_log2 = scale log2(e); HS: heads per section (work_of). */
template <typename T, int D, int BC, int STAGES, int STEP, int NC>
__global__ void __launch_bounds__(Config<T, D, BC, STAGES, STEP, NC>::THREADS, 1)
fa3_forward_kernel(const __grid_constant__ CUtensorMap tmQ, const __grid_constant__ CUtensorMap tmK,
                   const __grid_constant__ CUtensorMap tmV, const __grid_constant__ CUtensorMap tmO,
                   const T *__restrict__ Q, const T *__restrict__ K, const T *__restrict__ V, T *__restrict__ O,
                   float *__restrict__ L, int N, int BH, float scale_log2, int causal, int HS, int *sched) {
    using C = Config<T, D, BC, STAGES, STEP, NC>;
    extern __shared__ __align__(1024) unsigned char fa_smem[];
    const int tid = threadIdx.x;
    const Kernel<C> k{&tmQ, &tmK, &tmV, &tmO, O, L, scale_log2, N, BH, causal, HS, sched, (N + C::BR - 1) / C::BR * BH,
                      (smem_u32(fa_smem) + 1023u) & ~1023u};
    if (tid == 0) k.init_barriers();
    __syncthreads();
    if (tid < 128) {  // the producer warpgroup: one thread issues every copy, the others leave
        // TODO(7): give back the registers the producer does not need (Roles: REG_PRODUCER)...
        if (tid == 0) k.producer_mainloop();
        return;
    }
    // TODO(7): ...and let the consumers take them (REG_CONSUMER; README, "Warp specialization
    //   and setmaxnreg" and "The register budget": the two must add up, or this waits forever).
    k.consumer_mainloop(tid);
}
// [end roles]
// [region host]
// [region device-info]
constexpr int FA_MAX_DEVICES = 64, FA_MAX_STREAMS = 16;  // devices; per device, streams holding a tile counter
struct DeviceInfo { int cc, sms, l2, smem_optin; };     // 10 major + minor, SMs, bytes of L2 and per block
static const DeviceInfo &device_info(int dev) {         // read on first use; 0 where unreadable
    static DeviceInfo info[FA_MAX_DEVICES];
    auto attr = [dev](cudaDeviceAttr a) { int v = 0; return cudaDeviceGetAttribute(&v, a, dev) ? 0 : v; };
    if (!info[dev].cc)
        info[dev] = {10 * attr(cudaDevAttrComputeCapabilityMajor) + attr(cudaDevAttrComputeCapabilityMinor),
                     attr(cudaDevAttrMultiProcessorCount), attr(cudaDevAttrL2CacheSize),
                     attr(cudaDevAttrMaxSharedMemoryPerBlockOptin)};
    return info[dev];
}
// [end device-info]
/* The causal order's section size (work_of): how many heads' K and V (2 N d 2 bytes each) fit
 * together in 5/8 of L2 (FlashAttention-3 budgets 32 of the H100's 50 MiB; the rest holds the
 * Q and O tiles in flight), at least 1. Non-causal: all B H (work_of does not use it). */
static int heads_per_section(const attn_args *a, int l2) {
    const int BH = a->B * a->H;
    if (!a->causal) return BH;
    const double hs = (double)l2 * 5.0 / 8.0 / (2.0 * a->N * a->d * 2);
    return hs < 1.0 ? 1 : hs > BH ? BH : (int)hs;
}
/* Lets a kernel use more than 48 KiB of shared memory on the current device `dev`, once per device
 * (cudaFuncSetAttribute acts on the current device only). */
template <typename T, int D, int BC, int STAGES, int NC>
static int allow_smem(int dev) {
    static unsigned long long done = 0;  // a bit per device
    const int need = (int)Config<T, D, BC, STAGES, FA9_STEP, NC>::SL::ALLOC, optin = device_info(dev).smem_optin;
    const cudaError_t e = done >> dev & 1 ? cudaSuccess : need > optin ? cudaErrorInvalidValue
        : cudaFuncSetAttribute(fa3_forward_kernel<T, D, BC, STAGES, FA9_STEP, NC>,
                               cudaFuncAttributeMaxDynamicSharedMemorySize, need);
    if (e == cudaSuccess) { done |= 1ull << dev; return ATTN_OK; }
    fprintf(stderr, "%s:%d: the kernel needs %d bytes of shared memory per block, device %d allows %d (%s)\n"
            "  hint: fewer stages (-DFA%d_STAGES) or a smaller B_c (-DFA%d_BC)\n", __FILE__, __LINE__, need, dev, optin,
            cudaGetErrorString(e), D, D);
    return ATTN_UNSUPPORTED;
}
// [region tile-counter]
/* Step 7's counter (two ints, 0 before a launch and after it) for a launch on `stream` of the
 * current device `dev`: launches in one stream's order may share one, launches on two streams may
 * run at once and must not. So one per (device, stream id; ids are never reused), for every kernel;
 * once FA_MAX_STREAMS streams of a device hold one, it is synchronized and they are handed out anew. */
static int *tile_counter(int dev, cudaStream_t stream) {
    static struct { int n; unsigned long long id[FA_MAX_STREAMS]; int *c[FA_MAX_STREAMS]; } t[FA_MAX_DEVICES];
    auto &d = t[dev];  // this device's counters, the first n taken
    unsigned long long id = 0;
    cudaError_t e = cudaStreamGetId(stream, &id);
    for (int i = 0; e == cudaSuccess && i < d.n; ++i) if (d.id[i] == id) return d.c[i];
    if (e == cudaSuccess && d.n == FA_MAX_STREAMS && (e = cudaDeviceSynchronize()) == cudaSuccess) d.n = 0;
    if (e == cudaSuccess && !d.c[d.n]) e = cudaMalloc(&d.c[d.n], 2 * sizeof(int));
    if (e == cudaSuccess) e = cudaMemsetAsync(d.c[d.n], 0, 2 * sizeof(int), stream);
    if (e == cudaSuccess) { d.id[d.n] = id; return d.c[d.n++]; }
    fprintf(stderr, "%s:%d: the tile counter (8 bytes) on device %d: %s\n  hint: the GPU is out of memory, or an "
            "earlier kernel failed\n", __FILE__, __LINE__, dev, cudaGetErrorString(e));
    return NULL;
}
// [end tile-counter]
/* One kernel on the current device `dev`, its grid at most `sms` blocks; sms = 0: only its opt-in. */
template <typename T, int D, int BC, int STAGES, int NC>
static int launch(const attn_args *a, int dev, int sms) {
    using C = Config<T, D, BC, STAGES, FA9_STEP, NC>;
    auto kernel = fa3_forward_kernel<T, D, BC, STAGES, FA9_STEP, NC>;
    if (const int rc = allow_smem<T, D, BC, STAGES, NC>(dev); rc != ATTN_OK || sms == 0) return rc;
    static tma_qkvo_maps maps = {};
    const tma_qkvo_maps *m = tma_qkvo_maps_get(&maps, a, C::BR, BC, 64);
    if (!m) return ATTN_UNSUPPORTED;
    int *sched = C::S::DYNAMIC ? tile_counter(dev, (cudaStream_t)a->stream) : NULL;
    if (C::S::DYNAMIC && !sched) return ATTN_OUT_OF_MEMORY;
    /* Step 5: a block per work item. Steps 6-7: one block per SM (one fits: 128 (NC + 1)
     * threads use every register), each taking work items in turn. */
    const long long work = (long long)((a->N + C::BR - 1) / C::BR) * a->B * a->H;
    if (work > 0x3fffffffLL) return ATTN_UNSUPPORTED;  // the counter may run gridDim.x past it
    const long long blocks = C::S::PERSISTENT && work > sms ? sms : work;
    kernel<<<(unsigned)blocks, C::THREADS, C::SL::ALLOC, (cudaStream_t)a->stream>>>(
        m->mq, m->mk, m->mv, m->mo, (const T *)a->Q, (const T *)a->K, (const T *)a->V, (T *)a->O, a->L, a->N,
        a->B * a->H, a->scale * 1.4426950408889634f, a->causal, heads_per_section(a, device_info(dev).l2), sched);
    return ATTN_OK;
}

/* d = 64: three consumer warpgroups, but two for causal attention with N up to FA64_WG2_MAX_N,
 * where they were faster on the H100 (make ladder-09); FA64_WG (region config) can force either,
 * and builds only that kernel, so that its registers are the only ones ptxas reports. */
constexpr int FA64_WG2_MAX_N = 1024;
template <typename T>
static int launch64(const attn_args *a, int dev, int sms) {
    if constexpr (FA64_WG == 2) return launch<T, 64, FA64_BC, FA64_STAGES, 2>(a, dev, sms);
    else if constexpr (FA64_WG == 3) return launch<T, 64, FA64_BC, FA64_STAGES, 3>(a, dev, sms);
    else if (a->causal && a->N <= FA64_WG2_MAX_N) return launch<T, 64, FA64_BC, FA64_STAGES, 2>(a, dev, sms);
    else return launch<T, 64, FA64_BC, FA64_STAGES, 3>(a, dev, sms);
}
/* The kernel for a's dtype and d (and causal and N: launch64), as launch runs it. */
static int dispatch(const attn_args *a, int dev, int sms) {
    const int fp16 = a->dtype == DTYPE_FP16, bf16 = a->dtype == DTYPE_BF16;
    if (a->d == 64 && fp16) return launch64<__half>(a, dev, sms);
    if (a->d == 64 && bf16) return launch64<__nv_bfloat16>(a, dev, sms);
    if (a->d == 128 && fp16) return launch<__half, 128, FA128_BC, FA128_STAGES, 2>(a, dev, sms);
    if (a->d == 128 && bf16) return launch<__nv_bfloat16, 128, FA128_BC, FA128_STAGES, 2>(a, dev, sms);
    return ATTN_UNSUPPORTED;
}

/* reference/include/hopper_attention.h (fp16/bf16, d = 64 or 128, scale > 0, Hopper, else unsupported). */
int hopper_attention_forward(const attn_args *a, int sms_left) {
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || dev >= FA_MAX_DEVICES) return ATTN_UNSUPPORTED;
    const DeviceInfo &di = device_info(dev);
    if (di.cc != 90 || !(a->scale > 0.f) || sms_left < 0 || sms_left >= di.sms) return ATTN_UNSUPPORTED;
    if (FA9_STEP > STARTER_DONE_STEP) return ATTN_NOT_IMPLEMENTED;  // TODO(0)
    if (a->N < 1 || a->B < 1 || a->H < 1) return ATTN_OK;  // nothing to compute
    return dispatch(a, dev, di.sms - sms_left);
}
/* reference/include/hopper_attention.h: the opt-in of every kernel dispatch picks, for each dtype,
 * d and causal, with N = 1 and N > FA64_WG2_MAX_N (sms = 0: nothing launched). */
int hopper_attention_prepare_device(int dev) {
    const cudaError_t e = dev < 0 || dev >= FA_MAX_DEVICES ? cudaErrorInvalidDevice : cudaSetDevice(dev);
    if (e != cudaSuccess || device_info(dev).cc != 90) {
        fprintf(stderr, "%s:%d: device %d: %s\n  hint: lesson 09's kernels run on Hopper GPUs (sm_90a)\n", __FILE__,
                __LINE__, dev, e != cudaSuccess ? cudaGetErrorString(e) : "not compute capability 9.0");
        return ATTN_UNSUPPORTED;
    }
    for (int k = 0, rc; k < 16; ++k) {
        attn_args a = {};
        a.dtype = k & 1 ? DTYPE_BF16 : DTYPE_FP16; a.d = k & 2 ? 128 : 64;
        a.causal = k >> 2 & 1; a.N = k & 8 ? 1 << 20 : 1;
        if ((rc = dispatch(&a, dev, 0)) != ATTN_OK) return rc;
    }
    return ATTN_OK;
}
#ifndef FA_LIBRARY_ONLY  // the grader's entry point (reference/include/attention.h): the whole GPU
int attention_forward(const attn_args *a) { return hopper_attention_forward(a, 0); }
#endif
// [end host]

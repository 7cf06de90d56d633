/* ptx_hopper.h: the Hopper (sm_90a) wrappers lesson 09 teaches you to write, given from lesson 13 on.
 *
 *   st_shared_u32, ld_shared_u32, st_shared_v4, ld_shared_v4   plain shared-memory stores and loads
 *   fence_proxy_async        ordinary stores (generic proxy) -> wgmma and TMA reads (async proxy)
 *   named_sync, named_arrive bar.sync / bar.arrive on named barriers 1..15
 *   setmaxnreg_dec<R>, setmaxnreg_inc<R>   give registers back to the block's pool, take them
 *   mbar_init, mbar_fence_init, mbar_arrive, mbar_arrive_expect_tx, mbar_try_wait, mbar_wait
 *                            mbarriers: arrivals, transaction bytes, phases told apart by parity
 *   tma_load_3d, tma_store_3d, bulk_commit, bulk_wait_read<N>   TMA copies of a box of a tensor map
 *   wgmma_ss<T, N>, wgmma_rs<T, N>   wgmma.mma_async m64nNk16, fp32 accumulators (N = 64, 96, 128,
 *                            176, 192 for ss, 64 and 128 for rs; T = __half or __nv_bfloat16)
 *   wgmma_fence, wgmma_commit, wgmma_wait<N>, fence_acc   ordering around the asynchronous wgmma
 *   make_desc, desc_kmajor<ROWS>, desc_mnmajor<ROWS>      matrix descriptors of tiles in the
 *                            128-byte swizzled layout TMA writes (reference/include/tma_params.h)
 *
 * Source: PTX ISA, sections on wgmma.mma_async (and its matrix descriptor), cp.async.bulk.tensor,
 * mbarrier, bar.sync, setmaxnreg, fence.proxy.async. Lesson 09's text explains each; the code below
 * is made from lesson 09's solution, where they are written (make starters; edit them there). A CPU emulator (tests/hopper_emu) puts its
 * own header of this name first on the include path, with the same functions computed as the
 * ISA defines them.
 *
 * Preconditions: sm_90a code (wgmma and setmaxnreg exist only there: a source that includes
 * this header is built for sm_90a: its lesson's descriptor says arch := sm_90a, CONTRIBUTING.md); shared addresses are
 * 32-bit shared-window addresses (smem_u32, ptx_mma.h); tiles start on 1024 bytes. */
#ifndef PTX_HOPPER_H
#define PTX_HOPPER_H
#include <cuda.h> /* CUtensorMap */
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <stdint.h>

#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#error "ptx_hopper.h: wgmma and setmaxnreg need sm_90a code (-gencode arch=compute_90a,code=sm_90a)"
#endif
// [generated from solutions/09-hopper-wgmma/hopper.cu, regions ptx-wrappers mbar-wait descriptor]
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

/* 13-hopper-backward (starter): FlashAttention-2's backward pass (Algorithm 2) on the Hopper
 * hardware of lesson 09: wgmma, TMA, mbarriers, warp specialization with setmaxnreg.
 *
 * What is here: the PTX wrappers this lesson adds (read them), lesson 09's from ptx_hopper.h, the
 * host side, the shared-memory layout, the barriers, the roles, preprocess and convert, the
 * epilogue. What you write: the TODO(n) below, in order; README.md explains each. Climb the
 * ladder as you go (TODO(0) says how far you are): after TODO(1)-(3) step 1 runs, after (4) step
 * 2, (5) step 3, (6) and (7) step 4, the default build; (8) only makes causal runs faster. Step K
 * = 1-3 builds from this file with lessons/13-hopper-backward/worklog/variants/stepK.var (steps.var
 * and its FA13_STEP): make lesson13-step1 on a Hopper GPU; make emu-lesson13 on the CPU grades the
 * step your file has reached.
 * Source: Dao, "FlashAttention-2" (2023), Algorithm 2 (a block owns K_j, V_j and walks the query
 * tiles; P recomputed from L; D_i = rowsum(dO_i o O_i)); Shah, Bikshandi, Zhang, Thakkar, Ramani,
 * Dao, "FlashAttention-3" (2024), Section 3 and its backward kernel (producer warp, consumer
 * warpgroups, the scores computed transposed so that P^T and dS^T are wgmma A operands in
 * registers, dQ leaving through shared memory and a bulk reduce-add issued by its own warp).
 * Three kernels on one stream: preprocess (D, L in base 2, the fp32 dQ accumulator zeroed), the
 * main kernel (fa3_backward_kernel, the last device function before the host code: it only hands
 * out roles), convert (dQ = scale x accumulator, rounded). Q, K, V, O, dO, dQ, dK, dV: [B, H, N, d]
 * row-major; L: [B, H, N] fp32, the natural-log logsumexp of the scaled scores (attention.h).
 * Preconditions: fp16 or bf16, d in {64, 128}, scale > 0, compute capability 9.0 (sm_90a). */
// build: sm_90a
#include <cuda.h>  // CUtensorMap
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <stdint.h>
#include <stdio.h>
#include <math.h>
#include "attention.h"
#include "tma_params.h"   // the layout TMA writes; the tensor maps (host)
#include "ptx_mma.h"      // lesson 07: smem_u32, ex2, pack2
#include "ptx_hopper.h"   // lesson 09: wgmma, descriptors, TMA, mbarriers, named barriers, setmaxnreg

/* TODO(0): the last step of the ladder whose TODOs you have written (1 after TODO(1)-(3), 2
 * after (4), 3 after (5), 4 after (6) and (7)). A build of a later step (FA13_STEP) says "not
 * implemented" instead of running code you have not written. */
#define STARTER_DONE_STEP 0
#ifndef FA13_STEP
#define FA13_STEP 4  // the step this build runs: 4, the whole kernel (1-3: worklog/variants/stepK.var)
#endif

const lesson_info LESSON = {
    13, "13-hopper-backward", "backward pass on Hopper: wgmma, TMA, dQ by bulk reduce-add",
    DTYPE_BIT(DTYPE_FP16) | DTYPE_BIT(DTYPE_BF16), 1, {64, 128, 0}, LESSON_ATOMIC_ACCUMULATION, 90};

/* The PTX wrappers this lesson teaches; the CPU emulator has its own. */
#ifndef FA_EMULATOR
// [region ptx-wrappers]
// [region ptx-wgmma-mn]
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
// [end ptx-wgmma-mn]
// [region ptx-bulk]
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
// [end ptx-bulk]
// [end ptx-wrappers]
#endif  // FA_EMULATOR

// [region tiles]
/* Shared memory of a block, from a 1024-byte aligned base: K_j, V_j [B_c x d]; STAGES slots of Q_i
 * and of dO_i [B_r x d], all as d / 64 boxes [rows x 64] in the layout TMA writes; two dS^T tiles
 * [B_c x B_r] in that layout (tile it % 2 for query tile it); one 64 x 64 fp32 block of dQ per
 * consumer warpgroup; per slot B_r floats of L (base 2) and of D; the mbarriers. */
template <int D, int BR, int BC, int STAGES>
struct SmemLayout {
    static constexpr uint32_t KV = BC * D * 2, QT = BR * D * 2, DST = BC * BR * 2, DQT = 64 * 64 * 4;
    static constexpr uint32_t K = 0, V = KV, Q = 2 * KV, DO = Q + STAGES * QT, DS = DO + STAGES * QT;
    static constexpr uint32_t DQ = DS + 2 * DST, L = DQ + 2 * DQT, DD = L + STAGES * BR * 4;
    static constexpr uint32_t BAR = DD + STAGES * BR * 4;
    static constexpr uint32_t ALLOC = BAR + 8 * (1 + 4 * STAGES) + 1024;  // + alignment of the base
};
/* mbarriers: full of K_j and V_j (once per block); full and empty of each Q_i / dO_i slot. A full
 * one takes the producer's arrive.expect_tx and the bytes of the tile and of its B_r floats (L or
 * D); an empty one an arrival per consumer warp. */
enum MBar { FULL_KV, FULL_Q, FULL_DO, EMPTY_Q, EMPTY_DO };
/* Named barriers (0 is __syncthreads): DS_READY, both consumer warpgroups (256 threads): dS^T of
 * the query tile is in shared memory; DQ_FULL_WG0 + c, DQ_EMPTY_WG0 + c: warpgroup c's dQ block
 * and the dQ warp (160 threads); K_FREE (256): no wgmma reads K_j any more; STORE_WG0 + c (128):
 * warpgroup c's dK, dV rows are in shared memory. */
enum NamedBarrier : int { DS_READY = 1, DQ_FULL_WG0, DQ_FULL_WG1, DQ_EMPTY_WG0, DQ_EMPTY_WG1, K_FREE, STORE_WG0,
                          STORE_WG1 };
/* Tiles per head dimension: B_c = 128 keys per block, 64 per consumer warpgroup; B_r = 8192 / d
 * queries per step, so that dQ_i (B_r x d) is two 64 x 64 blocks, one per consumer warpgroup
 * (rows 64 c at d = 64, columns 64 c at d = 128). A producer warpgroup and two consumer ones: 65,536
 * registers / 384 threads = 168 each at launch, then setmaxnreg: 24 + 2 x 240 = 3 x 168. */
template <typename T_, int D_>
struct Config {
    static_assert(D_ == 64 || D_ == 128, "d = 64 or 128");
    using T = T_;
    static constexpr int D = D_, BC = 128, BR = 8192 / D_, STAGES = 2, THREADS = 384;
    static constexpr int REG_PRODUCER = 24, REG_CONSUMER = 240;
    /* warpgroup c's 64 x 64 block of dQ_i: queries 64 qbox(c) .. + 63, columns 64 dbox(c) .. + 63 */
    __host__ __device__ static constexpr int qbox(int c) { return BR == 128 ? c : 0; }
    __host__ __device__ static constexpr int dbox(int c) { return D == 128 ? c : 0; }
    using SL = SmemLayout<D, BR, BC, STAGES>;
    static_assert(SL::ALLOC <= 227 * 1024, "more shared memory than an H100 block may have");
};
// [end tiles]

// [region schedule]
/* Work item t = blockIdx.x: which key tile of which head. Non-causal, the key tiles of one head are
 * neighbours (they share Q, dO and dQ in L2). Causal, key tile j sees query tiles from the one
 * holding key j B_c on: tile 0 the most, so the longest go first, key tile j of every head of a
 * section of HS heads before tile j + 1 (heads_per_section: their Q, dO and dQ fit in L2). */
struct Work { int j, bh, i0, n_tiles; };  // key tile, b H + h, first query tile, query tiles
template <int BR, int BC>
__device__ __forceinline__ Work work_of(int t, int N, int BH, int causal, int HS) {
    const int Tc = (N + BC - 1) / BC, Tr = (N + BR - 1) / BR;
    Work w;
    // TODO(8): causal only: the first query tile w.i0 that sees any key of tile j (the tiles before
    //   it are wholly above the diagonal: skip them), and the order of the blocks: key tile j of
    //   every head of a section of HS heads before tile j + 1, sections one after another (the
    //   last one may hold fewer heads). As shipped every block walks all T_r query tiles (the mask
    //   zeroes the ones above the diagonal) in the non-causal order: correct, slower (README,
    //   "Causal: skip, and the longest first").
    (void)HS;
    w.j = t % Tc;
    w.bh = t / Tc;
    w.i0 = 0;
    w.n_tiles = Tr - w.i0;
    return w;
}
// [end schedule]

/* A consumer warpgroup's 64 keys of K_j, V_j (rows key_row0 = 64 c .. of the block's tiles):
 * accumulators and math. Warp wq, lane 4 g + t holds key rows 16 wq + g and + 8 of S^T, dP^T,
 * dK_j, dV_j: s[4 j + e] is query 8 j + 2 t + (e & 1) of key row 16 wq + g + 8 (e >> 1). */
template <class C>
struct Consumer {
    using T = typename C::T;
    static constexpr int D = C::D, BR = C::BR, BC = C::BC;
    float dv[D / 2] = {}, dk[D / 2] = {};      // dV_j, dK_j (64 keys x d): sums over the query tiles
    float s[BR / 2] = {}, dp[BR / 2] = {};     // S^T then P^T, dP^T then dS^T (64 keys x B_r queries)
    uint32_t p[BR / 16][4], ds[BR / 16][4];    // P^T and dS^T in 16 bits, A fragments of 16 queries
    float dq[32] = {};                         // this warpgroup's 64 x 64 block of dQ_i
    // [region issue-s-dp]
    /* S^T = K_j Q_i^T and dP^T = V_j dO_i^T for the warpgroup's 64 keys: d / 16 wgmmas each, A =
     * K_j or V_j (K-major, rows key_row0 ..), B = Q_i or dO_i (K-major: N = B_r queries). */
    __device__ __forceinline__ void issue_s(uint32_t sK, int key_row0, uint32_t sQ) {
        // TODO(1): S^T = K_j Q_i^T into s for this warpgroup's 64 keys: one wgmma_ss per 16-wide
        //   slice of d, A the rows key_row0 .. + 63 of the K_j tile at sK, B the whole Q_i tile at
        //   sQ (B_r queries as the N of the instruction), both K-major; the first slice overwrites
        //   s, the others add; one commit group (README, "The scores, transposed").
        (void)sK; (void)key_row0; (void)sQ;
    }
    __device__ __forceinline__ void issue_dp(uint32_t sV, int key_row0, uint32_t sdO) {
        // TODO(1): dP^T = V_j dO_i^T into dp, the same product with V_j and dO_i; its own group.
        (void)sV; (void)key_row0; (void)sdO;
    }
    // [end issue-s-dp]
    /* Keys >= N and, causal, keys after the query get -inf (key0: the warpgroup's first key). */
    __device__ __forceinline__ void mask(int key0, int q0, int wq, int g, int t, int N, int causal) {
#pragma unroll
        for (int j = 0; j < BR / 8; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const int key = key0 + 16 * wq + g + 8 * (e >> 1), query = q0 + 8 * j + 2 * t + (e & 1);
                if (key >= N || (causal && key > query)) s[4 * j + e] = -INFINITY;
            }
    }
    // [region p-ds]
    /* P^T = exp2(S^T scale log2(e) - L2_i) in place in s: L2 = L log2(e), one per query (a column
     * here), from the slot's B_r floats at sL. Masked scores are -inf and queries >= N have L2 =
     * +inf: P = 0 there. Runs while dP^T is still on the tensor cores. */
    __device__ __forceinline__ void probs(uint32_t sL, int t, float scale_log2) {
        // TODO(2): every element of s becomes P^T: 2 to the power (score x scale_log2 minus L2 of
        //   its query), L2 being the query's float in the slot's array at sL (byte 4 x query in
        //   the tile; the layout comment above Consumer says which query s[4 j + e] is; one
        //   ld_shared_f32x2 serves both queries of a column pair). No running maximum: L is the
        //   final one (README, "P and dS from L and D").
        (void)sL; (void)t; (void)scale_log2;
    }
    /* dS^T = P^T o (dP^T - D_i) in place in dp; D from the slot's B_r floats at sD (0 past N). */
    __device__ __forceinline__ void dsoftmax(uint32_t sD, int t) {
        // TODO(2): every element of dp becomes dS^T, from P^T (s), dP^T (dp) and D of its query
        //   (the slot's array at sD, laid out as L's) (README, "P and dS from L and D").
        (void)sD; (void)t;
    }
    /* P^T and dS^T into A fragments: queries 16 ks .. + 15 are accumulator blocks 2 ks, 2 ks + 1,
     * whose layout is the A layout (key row g: a[0], a[2]; g + 8: a[1], a[3]) (lesson 09's P). */
    __device__ __forceinline__ void pack() {
#pragma unroll
        for (int ks = 0; ks < BR / 16; ++ks)
#pragma unroll
            for (int x = 0; x < 4; ++x) {
                p[ks][x] = pack2<T>(s[8 * ks + 2 * x], s[8 * ks + 2 * x + 1]);
                ds[ks][x] = pack2<T>(dp[8 * ks + 2 * x], dp[8 * ks + 2 * x + 1]);
            }
    }
    // [end p-ds]
    // [region store-ds]
    /* dS^T into the shared tile sdS [B_c keys x B_r queries], key row `row` (16 wq + g of the
     * warpgroup's keys, from key_row0), where dQ = dS K_j reads it MN-major. */
    __device__ __forceinline__ void store_ds(uint32_t sdS, int row, int t) const {
        // TODO(4): each register of ds[][] (two 16-bit values of one key row, two neighbouring
        //   queries: the A-fragment layout pack() documents) into the tile at sdS, key rows as tile
        //   rows and queries as columns, at the byte TMA would have put that element of a tile of
        //   B_c rows (tma_tile_offset), so that a wgmma descriptor can read it (README, "dQ: the
        //   transpose is in the descriptor").
        (void)sdS; (void)row; (void)t;
    }
    // [end store-ds]
    // [region issue-dv-dk]
    /* dV_j += P^T dO_i and dK_j += dS^T Q_i: B_r / 16 wgmmas each, A = 16 queries of P^T or dS^T
     * from registers, B = those rows of dO_i or Q_i, MN-major (n = the d columns). */
    __device__ __forceinline__ void issue_dv(uint32_t sdO) {
        // TODO(3): dV_j += P^T dO_i into dv: one wgmma_rs per 16 queries (the k of this product),
        //   A the fragments p[] of those queries, B the same 16 rows of the dO_i tile at sdO with
        //   all d columns as n (the tile's rows are k here: which descriptor?), always adding; one
        //   group (README, "dV and dK: the accumulator is the A operand").
        (void)sdO;
    }
    __device__ __forceinline__ void issue_dk(uint32_t sQ) {
        // TODO(3): dK_j += dS^T Q_i into dk, the same with ds[] and the Q_i tile at sQ.
        (void)sQ;
    }
    // [end issue-dv-dk]
    // [region issue-dq]
    /* dQ_i (this warpgroup's 64 x 64 block: queries 64 qbox .., columns 64 dbox ..) = dS K_j over
     * the B_c keys: A = dS, read from the dS^T tile MN-major (its rows are the keys, k; its
     * columns the queries, m); B = K_j MN-major (rows k, columns n). No transposed copy. */
    __device__ __forceinline__ void issue_dq(uint32_t sdS, uint32_t sK, int qbox, int dbox) {
        // TODO(4): dq = this warpgroup's 64 x 64 block of dS K_j: one wgmma_ss_mn per 16 keys (the k
        //   here), A the 64 queries of box qbox of the dS^T tile at sdS, B the 64 columns of box
        //   dbox of the K_j tile at sK, both read MN-major (which descriptor, and where does each
        //   box start?); the first overwrites, the others add; one group (README, "dQ: the
        //   transpose is in the descriptor").
        (void)sdS; (void)sK; (void)qbox; (void)dbox;
    }
    // [end issue-dq]
    /* The dQ block into the warpgroup's fp32 buffer, in register order: for 8-column block j,
     * thread tw (0..127) of the warpgroup, its 4 floats as 16 bytes at (128 j + tw) 16. */
    __device__ __forceinline__ void store_dq(uint32_t sDQ, int tw) const {
#pragma unroll
        for (int j = 0; j < 8; ++j)
            st_shared_v4(sDQ + (uint32_t)(128 * j + tw) * 16, make_uint4(__float_as_uint(dq[4 * j]), __float_as_uint(dq[4 * j + 1]),
                                                                        __float_as_uint(dq[4 * j + 2]), __float_as_uint(dq[4 * j + 3])));
    }
};

/* A consumer thread: warpgroup c (keys 64 c ..), warp wq, lane 4 g + t. */
template <class C>
struct Warpgroup {
    const uint32_t base;
    const int tid, tw, lane, c, wq, g, t, key_row0;
    __device__ __forceinline__ Warpgroup(uint32_t base_, int tid_)
        : base(base_), tid(tid_), tw(tid_ % 128), lane(tid_ & 31), c(tid_ / 128 - 1), wq((tid_ / 32) % 4),
          g(lane >> 2), t(lane & 3), key_row0(64 * c) {}
    /* A warp releases a slot after its last read of it: __syncwarp (every lane is done), lane 0 arrives. */
    __device__ __forceinline__ void release(uint32_t bar) const {
        __syncwarp();
        if (lane == 0) mbar_arrive(bar);
    }
};

/* The phases of the main kernel, and what they share: its arguments, its shared memory. */
template <class C>
struct Kernel {
    using T = typename C::T;
    using SL = typename C::SL;
    static constexpr int D = C::D, BR = C::BR, BC = C::BC, STAGES = C::STAGES;
    const CUtensorMap *tmQ, *tmK, *tmV, *tmdO, *tmdK, *tmdV;
    const float *L2, *Dv;  // [B H, Npad]: L log2(e) and D per query row (preprocess)
    float *dQacc;          // [B H, T_r, B_r d]: fp32, zeroed by preprocess, summed by every key tile
    float scale_log2, scale;
    int N, BH, causal, HS, Tr;
    uint32_t base;  // the block's shared memory (SmemLayout)
    __device__ __forceinline__ uint32_t bar(MBar b, int s = 0) const {
        return base + SL::BAR + 8 * (b == FULL_KV ? 0 : 1 + (b - FULL_Q) * STAGES + s);
    }
    __device__ __forceinline__ Work work() const { return work_of<BR, BC>(blockIdx.x, N, BH, causal, HS); }
    // [region init]
    /* One thread: a full barrier expects one arrival (and bytes), an empty one one per consumer warp. */
    __device__ __forceinline__ void init_barriers() const {
        mbar_init(bar(FULL_KV), 1);
        for (int s = 0; s < STAGES; ++s) {
            mbar_init(bar(FULL_Q, s), 1);
            mbar_init(bar(FULL_DO, s), 1);
            mbar_init(bar(EMPTY_Q, s), 8);
            mbar_init(bar(EMPTY_DO, s), 8);
        }
        mbar_fence_init();
    }
    // [end init]
    // [region producer]
    /* The producer thread: K_j and V_j once, then per query tile i (it-th of the block) Q_i with its
     * L2_i and dO_i with its D_i into slot it % STAGES. Fill `use` of a slot first waits until every
     * consumer warp has released fill use - 1: that phase of its empty barrier has parity (use - 1) & 1. */
    __device__ __forceinline__ void producer_mainloop() const {
        // TODO(5): K_j and V_j (key tile work().j of head work().bh, tensor maps tmK, tmV) once, on
        //   the full K/V barrier; then for each of the block's query tiles (the it-th from
        //   work().i0), into slot it % STAGES: Q_i (tmQ) with its B_r floats of L2 (global, from
        //   row bh Tr B_r + first query of the tile), then dO_i (tmdO) with those of D (Dv), each
        //   pair on its own full barrier after the slot's previous fill has been released (not
        //   before the first fill). Every full barrier announces all the bytes that report to it.
        //   SmemLayout gives the addresses: SL::K, SL::V; SL::Q, SL::DO + s SL::QT; SL::L, SL::DD
        //   + s B_r 4; 64-column boxes of the tile's rows (README, "The producer").
        __trap();  // until you write it: the consumers would wait forever for K_j, V_j
    }
    // [end producer]
    // [region dq-writer]
    /* The dQ warp: per query tile, each consumer warpgroup's 64 x 64 fp32 block of dQ_i, once it is
     * in shared memory (DQ_FULL), added to the accumulator in global memory by one bulk reduce-add
     * (lane 0), off the consumers' path; the buffer is handed back (DQ_EMPTY) once the copy has
     * read it. The accumulator keeps the buffer's order: per (b h, query tile), warpgroup 0's block,
     * then warpgroup 1's (convert puts the elements in place). */
    __device__ __forceinline__ void dq_writer_mainloop(int lane) const {
        // TODO(6): for each of the block's query tiles, warpgroup 0's block of dQ and then warpgroup
        //   1's, each once it is full (DQ_FULL_WG0, DQ_FULL_WG1: 160 threads, this warp's 32 and the
        //   warpgroup's 128), added by lane 0 with one bulk_reduce_add_f32 of SL::DQT bytes from
        //   SL::DQ (+ SL::DQT for warpgroup 1) to the tile's place in dQacc (per (b h, query tile)
        //   B_r d floats, warpgroup 0's half first) and closed into a bulk group; each buffer
        //   handed back (DQ_EMPTY_WG0, DQ_EMPTY_WG1) once its copy has read it, and both announced
        //   empty before the first tile. Every arrival on a named barrier must be matched by its
        //   other side, so none after the last tile; shared memory must outlive the last read
        //   (README, "dQ leaves through its own warp").
        (void)lane;
        __trap();  // until you write it: the consumers would wait forever to hand dQ over
    }
    // [end dq-writer]
    // [region step]
    /* One query tile (the it-th of the block, slot s) for a consumer warpgroup: S^T and dP^T issued
     * together; P^T while dP^T runs; dS^T; dV_j += P^T dO_i issued, dS^T stored for both
     * warpgroups (DS_READY), dQ_i = dS K_j and dK_j += dS^T Q_i issued; dQ_i handed to the dQ
     * warp once its group is done, dK_j's waited for last. dO_i's slot is released after dV, Q_i's
     * after dK. */
    __device__ __forceinline__ void step(const Warpgroup<C> &wg, Consumer<C> &w, const Work &wk, int it) const {
        const int s = it % STAGES, ph = (it / STAGES) & 1, q0 = (wk.i0 + it) * BR, key0 = wk.j * BC + wg.key_row0;
        const uint32_t sQ = base + SL::Q + s * SL::QT, sdO = base + SL::DO + s * SL::QT;
        const uint32_t sdS = base + SL::DS + (it & 1) * SL::DST;
        // TODO(7): one query tile, in the order the comment above gives: each wgmma group issued
        //   once its tiles have landed (the full barriers of slot s, phase ph) and after the fences
        //   its registers need (wgmma_fence after any wait_group or register write, fence_acc on
        //   the accumulators it writes); the waits that let P^T (w.mask where a key of the
        //   warpgroup, from key0, is >= N or, causal, after a query of the tile from q0; w.probs)
        //   run while dP^T computes; dS^T (w.dsoftmax, w.pack, w.store_ds at key row
        //   wg.key_row0 + 16 wq + g) made visible to the other warpgroup's wgmmas before dQ
        //   (fence_proxy_async, DS_READY); dQ handed to the dQ warp (DQ_EMPTY/DQ_FULL of this
        //   warpgroup, w.store_dq); each slot released (wg.release) as soon as its last reader is
        //   done (README, "One step, two warpgroups").
        (void)wg; (void)w; (void)q0; (void)key0; (void)sQ; (void)sdO; (void)sdS; (void)ph;
        __trap();  // until you write it: nothing computes dK, dV, dQ
    }
    // [end step]
    // [region epilogue]
    /* dK_j = scale dS^T Q summed over i (the scores were scaled), dV_j as is, rounded, into the
     * warpgroup's rows of the K_j and V_j tiles (once no wgmma reads K_j: both warpgroups' dQ read
     * all of it) and out by TMA stores of 64-row boxes, issued by thread 0 of the warpgroup;
     * rows >= N of a box are not written. */
    __device__ __forceinline__ void epilogue(const Warpgroup<C> &wg, const Consumer<C> &w, const Work &wk) const {
        named_sync(K_FREE, 256);
#pragma unroll
        for (int j = 0; j < D / 8; ++j)
#pragma unroll
            for (int r = 0; r < 2; ++r) {
                const uint32_t off = tma_tile_offset(wg.key_row0 + 16 * wg.wq + wg.g + 8 * r, 8 * j + 2 * wg.t, BC);
                st_shared_u32(base + SL::K + off, pack2<T>(w.dk[4 * j + 2 * r] * scale, w.dk[4 * j + 2 * r + 1] * scale));
                st_shared_u32(base + SL::V + off, pack2<T>(w.dv[4 * j + 2 * r], w.dv[4 * j + 2 * r + 1]));
            }
        fence_proxy_async();  // ordinary stores -> the TMA stores' reads
        named_sync(wg.c ? STORE_WG1 : STORE_WG0, 128);
        const int key0 = wk.j * BC + wg.key_row0;
        if (wg.tw == 0 && key0 < N) {
            for (int b = 0; b < D / 64; ++b) {
                const uint32_t box = b * BC * 128 + wg.key_row0 * 128;
                tma_store_3d(tmdK, 64 * b, key0, wk.bh, base + SL::K + box);
                tma_store_3d(tmdV, 64 * b, key0, wk.bh, base + SL::V + box);
            }
            bulk_commit();
            bulk_wait_read<0>();  // shared memory must outlive the stores' reads
        }
    }
    // [end epilogue]
    /* A consumer thread: the block's query tiles in order, then the epilogue. */
    __device__ __forceinline__ void consumer_mainloop(int tid) const {
        const Warpgroup<C> wg(base, tid);
        const Work wk = work();
        Consumer<C> w;
        mbar_wait(bar(FULL_KV), 0);
        for (int it = 0; it < wk.n_tiles; ++it) step(wg, w, wk, it);
        epilogue(wg, w, wk);
    }
};

// [region roles]
/* dK, dV of one key tile K_j, V_j (B_c = 128 keys) of one head, and its share of dQ; the block
 * hands out roles: in warpgroup 0, thread 0 the producer (TMA) and warp 1 the dQ warp; warpgroups
 * 1 and 2 the consumers (64 keys each). Grid: T_c B H blocks (work_of); Config::THREADS threads;
 * SmemLayout::ALLOC bytes of dynamic shared memory. tmQ, tmdO: tensor maps {d, N, B H} with boxes
 * of B_r rows; tmK, tmV of B_c rows; tmdK, tmdV of 64 rows. L2, Dv, dQacc: preprocess's outputs;
 * scale_log2 = scale log2(e); HS: heads per section of the causal order. */
template <typename T, int D>
__global__ void __launch_bounds__(Config<T, D>::THREADS, 1)
fa3_backward_kernel(const __grid_constant__ CUtensorMap tmQ, const __grid_constant__ CUtensorMap tmK,
                    const __grid_constant__ CUtensorMap tmV, const __grid_constant__ CUtensorMap tmdO,
                    const __grid_constant__ CUtensorMap tmdK, const __grid_constant__ CUtensorMap tmdV,
                    const float *__restrict__ L2, const float *__restrict__ Dv, float *__restrict__ dQacc, int N,
                    int BH, float scale_log2, float scale, int causal, int HS) {
    using C = Config<T, D>;
    extern __shared__ __align__(1024) unsigned char fa_smem[];
    const int tid = threadIdx.x;
    const Kernel<C> k{&tmQ, &tmK, &tmV, &tmdO, &tmdK, &tmdV, L2, Dv, dQacc, scale_log2, scale, N, BH, causal, HS,
                      (N + C::BR - 1) / C::BR, (smem_u32(fa_smem) + 1023u) & ~1023u};
    if (tid == 0) k.init_barriers();
    __syncthreads();
    if (tid < 128) {  // the producer warpgroup: thread 0 loads, warp 1 writes dQ, the others leave
        setmaxnreg_dec<C::REG_PRODUCER>();
        if (tid == 0) k.producer_mainloop();
        else if (tid / 32 == 1) k.dq_writer_mainloop(tid % 32);
        return;
    }
    setmaxnreg_inc<C::REG_CONSUMER>();
    k.consumer_mainloop(tid);
}
// [end roles]

// [region preprocess]
/* D_i = rowsum(dO_i o O_i) (FlashAttention-2, Algorithm 2, before its loops; it equals sum_j P_ij
 * dP_ij), L2_i = L_i log2(e), and the dQ accumulator zeroed. D / 8 threads per row (8 elements
 * each, summed by shuffles), 256 threads per block. Rows i in [N, Npad) get D = 0, L2 = +inf (P = 0
 * there). O, dO: [BH, N, D]; L: [BH, N]; L2, Dv: [BH, Npad]; dQacc: BH Npad D floats; rows = BH Npad. */
template <typename T, int D>
__global__ void __launch_bounds__(256)
fa3_bwd_preprocess_kernel(const T *__restrict__ O, const T *__restrict__ dO, const float *__restrict__ L,
                          float *__restrict__ L2, float *__restrict__ Dv, float *__restrict__ dQacc, int N, int Npad,
                          long long rows) {
    constexpr int CH = D / 8, RPB = 256 / CH;
    const int tid = threadIdx.x, ch = tid % CH;
    const long long row = (long long)blockIdx.x * RPB + tid / CH;  // bh Npad + i
    const long long bh = row / Npad;
    const int i = (int)(row - bh * Npad);
    float dot = 0.f;
    if (row < rows && i < N) {
        const size_t off = ((size_t)bh * N + i) * D + ch * 8;
        const uint4 o = *reinterpret_cast<const uint4 *>(O + off), g = *reinterpret_cast<const uint4 *>(dO + off);
        const uint32_t ow[4] = {o.x, o.y, o.z, o.w}, gw[4] = {g.x, g.y, g.z, g.w};
#pragma unroll
        for (int k = 0; k < 4; ++k) {
            const T *a = reinterpret_cast<const T *>(&ow[k]), *b = reinterpret_cast<const T *>(&gw[k]);
            dot = fmaf((float)a[0], (float)b[0], fmaf((float)a[1], (float)b[1], dot));
        }
    }
#pragma unroll
    for (int m = 1; m < CH; m <<= 1) dot += __shfl_xor_sync(0xffffffffu, dot, m);  // the row's CH lanes
    if (row >= rows) return;
    if (ch == 0) {
        Dv[row] = i < N ? dot : 0.f;
        L2[row] = i < N ? L[(size_t)bh * N + i] * 1.4426950408889634f : INFINITY;
    }
    float4 *acc = reinterpret_cast<float4 *>(dQacc + (size_t)row * D + ch * 8);
    acc[0] = acc[1] = make_float4(0.f, 0.f, 0.f, 0.f);
}
// [end preprocess]

// [region convert]
/* dQ = scale x dQacc, rounded to T. dQacc holds per (b h, query tile) the two warpgroups' 64 x 64
 * blocks in the order store_dq wrote them: block c, 8-column block j, thread tw = 32 wq + 4 g + t
 * of the warpgroup, its 4 floats (rows 16 wq + g and + 8, columns 8 j + 2 t and + 1). One thread
 * per 4 floats, a grid-stride loop over quads = BH Npad D / 4; block c sits at Config::qbox(c),
 * dbox(c) in the tile. */
template <typename T, int D>
__global__ void __launch_bounds__(256)
fa3_bwd_convert_kernel(const float *__restrict__ dQacc, T *__restrict__ dQ, int N, int Npad, float scale,
                       long long quads) {
    using C = Config<T, D>;
    constexpr int TILE4 = C::BR * D / 4;
    const int Tr = Npad / C::BR;
    for (long long q = (long long)blockIdx.x * 256 + threadIdx.x; q < quads; q += (long long)gridDim.x * 256) {
        const long long tile = q / TILE4;  // bh Tr + query tile
        const int w = (int)(q - tile * TILE4), c = w / 1024, j = (w / 128) % 8, tw = w % 128;
        const long long bh = tile / Tr;
        const int row = (int)(tile - bh * Tr) * C::BR + 64 * C::qbox(c) + 16 * (tw / 32) + (tw % 32) / 4;
        const int col = 64 * C::dbox(c) + 8 * j + 2 * (tw % 4);
        const float4 x = reinterpret_cast<const float4 *>(dQacc)[q];
        T *dst = dQ + ((size_t)bh * N + row) * D + col;
        if (row < N) *reinterpret_cast<uint32_t *>(dst) = pack2<T>(x.x * scale, x.y * scale);
        if (row + 8 < N) *reinterpret_cast<uint32_t *>(dst + 8 * D) = pack2<T>(x.z * scale, x.w * scale);
    }
}
// [end convert]

/* Launch geometry and workspace of the three kernels, for the host and the CPU emulator alike. */
struct BwdGeometry {
    int Tr, Npad;                        // query tiles and rows per head (whole tiles)
    long long rows;                      // B H Npad
    long long pre_blocks, main_blocks;   // preprocess: 256 / (d / 8) rows per block; main: T_c B H
    long long quads, conv_blocks;        // convert: 4 floats per thread, grid-stride
    size_t ws_floats;                    // dQacc, L2, D: rows (d + 2)
};
static inline BwdGeometry bwd_geometry(int B, int H, int N, int D, int BR, int BC) {
    BwdGeometry g;
    const long long BH = (long long)B * H;
    g.Tr = (N + BR - 1) / BR;
    g.Npad = g.Tr * BR;
    g.rows = BH * g.Npad;
    g.pre_blocks = (g.rows + 256 / (D / 8) - 1) / (256 / (D / 8));
    g.main_blocks = (long long)((N + BC - 1) / BC) * BH;
    g.quads = g.rows * D / 4;
    g.conv_blocks = (g.quads + 255) / 256 < 65536 ? (g.quads + 255) / 256 : 65536;
    g.ws_floats = (size_t)g.rows * (D + 2);
    return g;
}

// [region host]
/* An integer attribute of the current device; 0 when it cannot be read. */
static int device_attr(cudaDeviceAttr attr) {
    int dev = 0, v = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&v, attr, dev) != cudaSuccess) return 0;
    return v;
}
/* The causal order's section size (work_of): how many heads' Q, dO (2 N d 2 bytes) and dQ
 * accumulator (N d 4 bytes) fit together in 5/8 of L2, at least 1. Non-causal: all B H. */
static int heads_per_section(const attn_bwd_args *a) {
    const int BH = a->B * a->H;
    if (!a->causal) return BH;
    static const int l2 = device_attr(cudaDevAttrL2CacheSize);
    const double hs = (double)l2 * 5.0 / 8.0 / (8.0 * a->N * a->d);
    return hs < 1.0 ? 1 : hs > BH ? BH : (int)hs;
}

/* The fp32 workspace (dQacc [BH, Npad, d], then L2 and D [BH, Npad]), kept across calls and grown
 * on demand (cudaMalloc synchronizes: only the first call of a larger shape pays). */
static float *g_ws = nullptr;
static size_t g_ws_bytes = 0;
static int ensure_workspace(size_t bytes) {
    if (g_ws_bytes >= bytes) return ATTN_OK;
    cudaFree(g_ws);
    g_ws = nullptr;
    g_ws_bytes = 0;
    if (cudaMalloc(&g_ws, bytes) != cudaSuccess) {
        cudaGetLastError();  // allocation errors are not sticky; clear the last-error slot
        fprintf(stderr, "out of memory: the backward pass needs %.1f MiB of fp32 workspace (dQ accumulator, D, L)\n",
                bytes / 1048576.0);
        return ATTN_OUT_OF_MEMORY;
    }
    g_ws_bytes = bytes;
    return ATTN_OK;
}

/* The tensor maps of a call (Q, dO: boxes of B_r rows; K, V: B_c; dK, dV: 64), kept for the next
 * call on the same buffers and shape. NULL (printed why) when one cannot be made. */
struct BwdMaps {
    const void *p[6];
    int B, H, N, d;
    dtype_t dtype;
    CUtensorMap m[6];  // Q, K, V, dO, dK, dV
};
static const BwdMaps *bwd_maps_get(BwdMaps *c, const attn_bwd_args *a, int br, int bc) {
    const void *p[6] = {a->Q, a->K, a->V, a->dO, a->dK, a->dV};
    const int rows[6] = {br, bc, bc, br, 64, 64};
    bool same = c->B == a->B && c->H == a->H && c->N == a->N && c->d == a->d && c->dtype == a->dtype;
    for (int k = 0; k < 6; ++k) same = same && c->p[k] == p[k];
    if (same) return c;
    attn_args f = {};  // what tma_tensor_map_make reads of a forward call: the shape and the type
    f.B = a->B; f.H = a->H; f.N = a->N; f.d = a->d; f.dtype = a->dtype;
    c->p[0] = NULL;
    for (int k = 0; k < 6; ++k)
        if (tma_tensor_map_make(&c->m[k], p[k], &f, rows[k])) return NULL;
    for (int k = 0; k < 6; ++k) c->p[k] = p[k];
    c->B = a->B; c->H = a->H; c->N = a->N; c->d = a->d; c->dtype = a->dtype;
    return c;
}

template <typename T, int D>
static int launch(const attn_bwd_args *a) {
    using C = Config<T, D>;
    auto kernel = fa3_backward_kernel<T, D>;
    static int ready = 0;  // once per instantiation: allow > 48 KiB of shared memory
    if (!ready) {
        const int optin = device_attr(cudaDevAttrMaxSharedMemoryPerBlockOptin);
        cudaError_t e = (int)C::SL::ALLOC > optin ? cudaErrorInvalidValue
                        : cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)C::SL::ALLOC);
        if (e != cudaSuccess) {
            fprintf(stderr, "%s:%d: the kernel needs %u bytes of shared memory per block, the GPU allows %d (%s)\n",
                    __FILE__, __LINE__, C::SL::ALLOC, optin, cudaGetErrorString(e));
            return ATTN_UNSUPPORTED;
        }
        ready = 1;
    }
    static BwdMaps maps = {};
    const BwdMaps *m = bwd_maps_get(&maps, a, C::BR, C::BC);
    if (!m) return ATTN_UNSUPPORTED;
    const BwdGeometry geo = bwd_geometry(a->B, a->H, a->N, D, C::BR, C::BC);
    if (geo.main_blocks > 0x7fffffffLL || geo.pre_blocks > 0x7fffffffLL) return ATTN_UNSUPPORTED;
    const int st = ensure_workspace(geo.ws_floats * sizeof(float));
    if (st != ATTN_OK) return st;
    float *dQacc = g_ws, *L2 = g_ws + (size_t)geo.rows * D, *Dv = L2 + geo.rows;
    cudaStream_t stream = (cudaStream_t)a->stream;
    fa3_bwd_preprocess_kernel<T, D><<<(unsigned)geo.pre_blocks, 256, 0, stream>>>(
        (const T *)a->O, (const T *)a->dO, a->L, L2, Dv, dQacc, a->N, geo.Npad, geo.rows);
    kernel<<<(unsigned)geo.main_blocks, C::THREADS, C::SL::ALLOC, stream>>>(
        m->m[0], m->m[1], m->m[2], m->m[3], m->m[4], m->m[5], L2, Dv, dQacc, a->N, a->B * a->H,
        a->scale * 1.4426950408889634f, a->scale, a->causal, heads_per_section(a));
    fa3_bwd_convert_kernel<T, D><<<(unsigned)geo.conv_blocks, 256, 0, stream>>>(dQacc, (T *)a->dQ, a->N, geo.Npad,
                                                                              a->scale, geo.quads);
    return ATTN_OK;
}

/* Entry point (reference/include/attention.h): fp16/bf16, d = 64 or 128, scale > 0, a compute
 * capability 9.0 GPU; anything else is ATTN_UNSUPPORTED. Three launches on a->stream, no sync. */
int attention_backward(const attn_bwd_args *a) {
    static const int cc = 10 * device_attr(cudaDevAttrComputeCapabilityMajor) +
                          device_attr(cudaDevAttrComputeCapabilityMinor);
    if (cc != 90 || !(a->scale > 0.f)) return ATTN_UNSUPPORTED;
    if (FA13_STEP > STARTER_DONE_STEP) return ATTN_NOT_IMPLEMENTED;  // TODO(0)
    if (a->N < 1 || a->B < 1 || a->H < 1) return ATTN_OK;  // nothing to compute
    const int fp16 = a->dtype == DTYPE_FP16, bf16 = a->dtype == DTYPE_BF16;
    if (a->d == 64 && fp16) return launch<__half, 64>(a);
    if (a->d == 64 && bf16) return launch<__nv_bfloat16, 64>(a);
    if (a->d == 128 && fp16) return launch<__half, 128>(a);
    if (a->d == 128 && bf16) return launch<__nv_bfloat16, 128>(a);
    return ATTN_UNSUPPORTED;
}
// [end host]

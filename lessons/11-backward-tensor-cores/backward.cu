/* 11-backward-tensor-cores (starter): FlashAttention-2's backward pass on
 * tensor cores.
 *
 * What is here: the tile copies and the pipeline (lesson 08), the work split
 * and the lane addresses, the S^T = K_j Q_i^T product as a model, the stores
 * of P^T and dS^T, the loops of dV, dK and dQ, the epilogue and the launch.
 * What you write: the numbered TODO(n) below, the pieces of the backward pass
 * (D and L, the causal schedule and mask, dP^T, P from L and dS, the operands
 * of dK and dQ, the dQ reduction, the scale), then TODO(0). README.md
 * explains each one.
 *
 * Source: Dao, "FlashAttention-2" (2023), Algorithm 2 (backward pass) and the
 * loop order of its CUDA kernels: a block owns one K_j, V_j tile, keeps dK_j
 * and dV_j in registers, and walks the query tiles Q_i; P is recomputed from
 * the logsumexp L the forward pass wrote; dQ_i is accumulated across blocks
 * with fp32 atomics. Lesson 10 does the same in fp32 on CUDA cores.
 *
 * Three kernels, launched by attention_backward on one stream:
 *   1. preprocess: D_i = rowsum(dO_i o O_i) (Algorithm 2, before its loops),
 *      L_i in base 2, and the fp32 dQ accumulator zeroed;
 *   2. the main kernel: per (K_j, V_j) tile and query tile Q_i, the body of
 *      Algorithm 2's inner loop, five mma products computed with the keys as
 *      rows:
 *        S^T  = K_j Q_i^T      dP^T = V_j dO_i^T
 *        P^T  = exp(S^T - L)   dS^T = P^T o (dP^T - D)
 *        dV_j += P^T dO_i      dK_j += dS^T Q_i      dQ_i += dS K_j
 *      so that P^T and dS^T come out of the mma in the register layout of
 *      the A operand of dV and dK;
 *   3. convert: dQ = scale * dQ accumulator, rounded to the element type.
 *
 * Layouts: Q, K, V, O, dO, dQ, dK, dV are [B, H, N, d] row-major
 * (reference/include/attention.h); L is [B, H, N] fp32, natural-log logsumexp of the
 * scaled scores. Preconditions: dtype fp16 or bf16, d in {64, 128}, scale > 0,
 * an sm_80+ GPU (sm_90 uses stmatrix and vector atomics).
 */
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <stdint.h>
#include <stdio.h>
#include <math.h>
#include "attention.h"
#include "ptx_mma.h"       // lesson 07: ldmatrix, mma, ex2, pack2, swz
#include "ptx_cp_async.h"  // lesson 08: cp.async
#include "ptx_memory.h"    // stmatrix, st.shared, ld.shared, red.global.add

const lesson_info LESSON = {
    11, "11-backward-tensor-cores", "backward pass on tensor cores: P recomputed from L, five mma products, dQ by atomics",
    DTYPE_BIT(DTYPE_FP16) | DTYPE_BIT(DTYPE_BF16), 1, {64, 128, 0}, LESSON_ATOMIC_ACCUMULATION, 0};

/* TODO(0): set to 0 when you have written TODO(1)..TODO(7); the grader then grades you. */
#define STARTER_NOT_DONE 1

// [region config]
/* The tiles and the order of one step, per head dimension: Br query rows per
 * step, Bc keys per block, warps per block (BwdTiles: how they split the
 * work), and three choices inside a step, each the fastest measured on an
 * H100 (the lesson's worklog/README.md: the runs, and the variant build that times
 * other tiles and orders):
 *   P_ORDER   P^T after dP^T (after_dp), or between the slices of dP^T so
 *             that its exponentials run while the tensor cores work (in_dp);
 *   STSM      P^T, dS^T stored with sm_90's stmatrix (true) or 4-byte
 *             st.shared (false, and on sm_80);
 *   DQ_ORDER  dQ_i = dS K_j and its atomics before dV_j, dK_j (first), or
 *             between them, the atomics spread over dK_j's slices (between,
 *             FlashAttention-2's order). */
enum class POrder { after_dp, in_dp };  // where P^T is computed
enum class DqOrder { first, between };  // where dQ_i goes
template <int HEAD_DIM> struct BwdConfig;
template <> struct BwdConfig<64> {
    static constexpr int D = 64, BR = 128, BC = 128, WARPS = 8;
    static constexpr POrder P_ORDER = POrder::in_dp;
    static constexpr bool STSM = true;
    static constexpr DqOrder DQ_ORDER = DqOrder::first;
};
template <> struct BwdConfig<128> {
    static constexpr int D = 128, BR = 64, BC = 128, WARPS = 8;
    static constexpr POrder P_ORDER = POrder::after_dp;
    static constexpr bool STSM = false;
    static constexpr DqOrder DQ_ORDER = DqOrder::between;
};
// [end config]

/* One register of two 16-bit values -> two floats (the inverse of pack2). */
template <typename T> __device__ __forceinline__ float2 unpack2(uint32_t v);
template <> __device__ __forceinline__ float2 unpack2<__half>(uint32_t v) {
    return __half22float2(*reinterpret_cast<__half2 *>(&v));
}
template <> __device__ __forceinline__ float2 unpack2<__nv_bfloat16>(uint32_t v) {
    return __bfloat1622float2(*reinterpret_cast<__nv_bfloat162 *>(&v));
}

// [region swz-lane]
/* The addresses of swz<W> (lesson 07) without the arithmetic at every load,
 * as CUTLASS's swizzled layouts do: a lane's address of (row, chunk) is
 * computed once per tile and operand role, and at(dr, dc) moves it by dr
 * rows and dc chunks, compile-time constants, with one XOR and an immediate
 * offset. Exact when dr % 8 == 0 (row % 8, which selects the permutation,
 * stays), dc shares no bit with `chunk` (then (chunk + dc) ^ (row % 8) ==
 * (chunk ^ (row % 8)) ^ dc; every use has chunk = a multiple of a power of
 * two, plus 0 or 1, and an even dc below that power), and the tile starts at
 * a multiple of W * 2 bytes (BwdTiles checks), so the XOR touches only the
 * chunk bits. */
template <int W>
struct SwzLane {
    static_assert(W >= 64, "the swizzle needs at least 8 chunks per row");
    uint32_t a;
    SwzLane() = default;
    __device__ __forceinline__ SwzLane(uint32_t tile, int row, int chunk) : a(tile + swz<W>(row, chunk)) {}
    /* from a tile's start plus a lane offset swz<W>(row, chunk) computed earlier */
    __device__ __forceinline__ explicit SwzLane(uint32_t addr) : a(addr) {}
    __device__ __forceinline__ uint32_t at(int dr, int dc) const {
        return (a ^ (uint32_t)(dc << 4)) + (uint32_t)(dr * W * 2);
    }
};
// [end swz-lane]

// [region load-async]
/* Lesson 08's tile copy: rows [row0, row0 + ROWS) of a [N, D] matrix into a
 * swizzled shared tile, rows >= N zero-filled, with a constant trip count and
 * the bounds test only in a tile that crosses the end. */
template <typename T, int D, int ROWS, int NT>
__device__ __forceinline__ void load_tile_async(uint32_t tile, const T *g, int row0, int N, int tid) {
    constexpr int CH = D / 8, STEP = NT / CH;
    static_assert(NT % CH == 0 && ROWS % STEP == 0 && STEP % 8 == 0,
                  "tile copy must split evenly over the threads, in steps of 8 rows");
    const int r0 = tid / CH, ch = tid % CH;
    const T *src = g + (size_t)(row0 + r0) * D + ch * 8;
    const uint32_t dst = tile + swz<D>(r0, ch);
    if (row0 + ROWS <= N) {
#pragma unroll
        for (int i = 0; i < ROWS / STEP; ++i) cp_async_16(dst + i * STEP * D * 2, src + i * STEP * D, true);
    } else {
#pragma unroll
        for (int i = 0; i < ROWS / STEP; ++i) {
            const bool valid = row0 + r0 + i * STEP < N;
            cp_async_16(dst + i * STEP * D * 2, valid ? src + i * STEP * D : g, valid);
        }
    }
}
// [end load-async]

// [region tiles]
/* Work split and shared-memory map of the main kernel, for the host, the
 * kernel and the CPU emulator alike (Cfg: BwdConfig). Pairs of warps share
 * MK * 16 keys (FlashAttention-2's split): S^T, dP^T (Bc keys x Br queries)
 * are split into WK x 2 warp tiles of MK * 16 keys x QW queries, dK_j, dV_j
 * (Bc keys x d) into WK x 2 tiles of the same keys x DW columns. So a warp
 * needs the other's P^T, dS^T for dV_j, dK_j: both go through shared memory.
 * dQ_i (Br x d) is split into WM x WN tiles of RQ rows x CQ columns.
 * Shared memory, bytes:
 *   K_j, V_j     Bc x d each, swizzled, for the whole block
 *   Q_i, dO_i    2 slots (STAGES) of Br x d each, swizzled
 *   dS^T, P^T    Bc x Br each, keys as rows, swizzled
 *   L2_i, D_i    2 slots of 2 x Br floats */
template <class Cfg>
struct BwdTiles : Cfg {
    static constexpr int D = Cfg::D, BR = Cfg::BR, BC = Cfg::BC, WARPS = Cfg::WARPS;
    static constexpr int NT = WARPS * 32, STAGES = 2;
    static constexpr int WQ = 2, WK = WARPS / WQ;
    static constexpr int MK = BC / (16 * WK);  // 16-key m-tiles per warp
    static constexpr int QW = BR / WQ, DW = D / WQ;
    static constexpr uint32_t KV_BYTES = BC * D * 2, Q_BYTES = BR * D * 2, DS_BYTES = BC * BR * 2,
                              LD_BYTES = 2 * BR * 4;
    static constexpr uint32_t K_OFF = 0, V_OFF = KV_BYTES, Q_OFF = 2 * KV_BYTES, DO_OFF = Q_OFF + STAGES * Q_BYTES,
                              DS_OFF = DO_OFF + STAGES * Q_BYTES, P_OFF = DS_OFF + DS_BYTES,
                              LD_OFF = P_OFF + DS_BYTES, SMEM = LD_OFF + STAGES * LD_BYTES;
    /* 32 rows per warp where the columns still split into >= 16, else 16 */
    static constexpr bool R32 = BR % 32 == 0 && WARPS % (BR / 32) == 0 && D % (16 * (WARPS / (BR / 32))) == 0;
    static constexpr int RQ = R32 ? 32 : 16, WM = BR / RQ, WN = WARPS / WM, CQ = D / WN;
    static constexpr int MQ = RQ / 16, NQ = CQ / 8;  // dQ fragments per warp: MQ x NQ
    static_assert(MK == 1 || MK == 2, "a warp owns 16 or 32 keys: Bc = 16 or 32 x warps / 2");
    static_assert(BR == 64 || BR == 128, "Br is 64 or 128 (the dS^T tile's swizzle needs rows of >= 64)");
    static_assert(QW % 16 == 0 && DW % 16 == 0, "warp tiles are whole 16-wide mma operands");
    static_assert(WARPS % WM == 0 && CQ % 16 == 0 && WM * RQ == BR, "dQ tile must split over the warps");
    static_assert(BC * (D / 8) % NT == 0 && NT >= BR / 2, "epilogue and L/D copies split evenly over the threads");
    static_assert(KV_BYTES % (D * 2) == 0 && Q_BYTES % (D * 2) == 0 && DS_OFF % (BR * 2) == 0 &&
                      DS_BYTES % (BR * 2) == 0,
                  "every tile starts at a multiple of its row length (SwzLane)");
    using KeysQueries = float[MK][QW / 8][4];  // a warp's S^T, dP^T or P^T (C layout): MK * 16 keys x QW queries
    using Packed = uint32_t[MK][QW / 8][2];    // P^T or dS^T in 16 bits: the A layout of dV, dK
    using KeysDims = float[MK][DW / 8][4];     // dK_j or dV_j: MK * 16 keys x DW columns
    using DqFrags = float[MQ][NQ][4];          // its RQ x CQ tile of dQ_i
    /* where lane `lane` of warp `warp` adds its dQ fragment f, in floats from
     * the query tile's start: the accumulator in fragment order (region dq) */
    __host__ __device__ static constexpr int dq_frag(int warp, int f, int lane) {
        return ((warp * MQ * NQ + f) * 32 + lane) * 4;
    }
};
/* Launch geometry of the three kernels and the workspace, for the host code
 * and the CPU emulator alike. */
struct BwdGeometry {
    int Npad;               // workspace rows per (b, h): whole query tiles
    long long rows;         // B * H * Npad
    long long pre_blocks;   // preprocess: 256 threads, 256 / (d / 8) rows per block
    long long main_blocks;  // Tc * B * H
    long long quads;        // convert: 4-float fragments of the accumulator, B * H * Npad * d / 4
    long long conv_blocks;  // convert: 256 threads each, grid-stride over the quads
    size_t ws_floats;       // dQacc, L2, D: rows * (d + 2)
};
static inline BwdGeometry bwd_geometry(int B, int H, int N, int d, int BR, int BC) {
    BwdGeometry g;
    const long long BH = (long long)B * H, rpb = 256 / (d / 8);
    g.Npad = (N + BR - 1) / BR * BR;
    g.rows = BH * g.Npad;
    g.pre_blocks = (g.rows + rpb - 1) / rpb;
    g.main_blocks = (long long)((N + BC - 1) / BC) * BH;
    g.quads = g.rows * d / 4;
    g.conv_blocks = (g.quads + 255) / 256 < 65536 ? (g.quads + 255) / 256 : 65536;
    g.ws_floats = (size_t)g.rows * (d + 2);
    return g;
}
// [end tiles]

// [region preprocess]
/* D_i = rowsum(dO_i o O_i) (Algorithm 2), which equals sum_j P_ij dP_ij:
 * with it, dS = P o (dP - D) needs no second pass over the keys. Also L2_i =
 * L_i log2(e), the logsumexp in the base of ex2, and the fp32 dQ accumulator
 * zeroed. One thread per 8 elements of a row, D / 8 threads per row, 256
 * threads per block. Padded rows i in [N, Npad) get D = 0 and L2 = +inf, so
 * the main kernel recomputes P = 2^(s - inf) = 0 there.
 * O, dO: [BH, N, D] of T; L: [BH, N]; L2, Dv: [BH, Npad]; dQacc: [BH, Npad, D]
 * fp32. rows = BH * Npad, a multiple of 256 / (D / 8). */
template <typename T, int D>
__global__ void __launch_bounds__(256)
fa2_bwd_preprocess_kernel(const T *__restrict__ O, const T *__restrict__ dO, const float *__restrict__ L,
                          float *__restrict__ L2, float *__restrict__ Dv, float *__restrict__ dQacc, int N, int Npad,
                          long long rows) {
    constexpr int CH = D / 8, RPB = 256 / CH;
    const int tid = threadIdx.x, ch = tid % CH;
    const long long row = (long long)blockIdx.x * RPB + tid / CH;  // bh * Npad + i
    const bool in = row < rows;
    const long long bh = row / Npad;
    const int i = (int)(row - bh * Npad);
    float dot = 0.f;
    if (in && i < N) {
        const size_t off = ((size_t)bh * N + i) * D + ch * 8;
        const uint4 o = *reinterpret_cast<const uint4 *>(O + off), g = *reinterpret_cast<const uint4 *>(dO + off);
        const uint32_t ow[4] = {o.x, o.y, o.z, o.w}, gw[4] = {g.x, g.y, g.z, g.w};
        // TODO(1): dot = this thread's share of D_i = sum_c dO_ic O_ic: its 8 elements of the
        //   row, two 16-bit values in each word of ow and gw (unpack2 gives them as floats).
        //   README, "dS and D".
        (void)ow; (void)gw;
    }
#pragma unroll
    for (int m = 1; m < CH; m <<= 1) dot += __shfl_xor_sync(0xffffffffu, dot, m);  // the row's CH lanes
    if (!in) return;
    if (ch == 0) {
        // TODO(1), continued: the row's D (dot, summed over its lanes above) and its L in the
        //   base of ex2 (L is [BH, N]); a padded row (i >= N) needs values that make the main
        //   kernel's P exactly 0. README, "P from L, in base 2".
        Dv[row] = 0.f;
        L2[row] = 0.f;
    }
    float4 *acc = reinterpret_cast<float4 *>(dQacc + (size_t)row * D + ch * 8);
    acc[0] = make_float4(0.f, 0.f, 0.f, 0.f);
    acc[1] = make_float4(0.f, 0.f, 0.f, 0.f);
}
// [end preprocess]

/* ---- The main kernel's parts, in the order of a step (fragment layouts:
 * ptx_mma.h; the rows of S^T, dP^T, P^T, dS^T, dK_j, dV_j are keys) ---- */

// [region barriers]
/* The main kernel's barriers, each the block-wide __syncthreads: the name
 * says what holds once every thread has passed it. */
enum BwdBarrier {
    BAR_STEP_LANDED,   // a step's Q_i, dO_i, L2_i, D_i are visible, and every warp is done with the
                       // previous step: its slot and the P^T, dS^T tiles may be refilled
    BAR_PDS_STORED,    // the step's P^T, dS^T are stored: a warp may read other warps' rows
    BAR_KV_DONE,       // after the loop: no warp reads K_j, V_j any more; their tiles take dK_j, dV_j
    BAR_GRADS_STAGED,  // dK_j, dV_j are staged in shared memory for the 16-byte stores
};
__device__ __forceinline__ void block_sync(BwdBarrier) { __syncthreads(); }
// [end barriers]

// [region schedule]
/* Which keys a block owns and which query tiles it visits; one block per
 * (K_j, V_j) tile and (b, h), grid = Tc * B * H. Non-causal: every block has
 * the same work, and the Tc key tiles of a head are neighbours, so the blocks
 * running together read the same Q, dO from L2. Causal: key tile j sees only
 * the query tiles from its diagonal on, so tile 0 of every head goes first,
 * then tile 1, ... (longest first, lesson 08). Every block starts at the
 * query tile of its diagonal, i_first, and (non-causal) wraps around to
 * i_first - 1: the blocks of a head then add into different dQ_i at any
 * moment, instead of all into dQ_0 at once. */
struct BlockWork {
    int bh, k0;            // b * H + h; the block's first key
    int i_first, n_steps;  // the first query tile it visits; how many
    int Tr;                // query tiles per head
};
template <class C>
__device__ __forceinline__ BlockWork block_work(int N, int causal) {
    BlockWork w;
    const int Tc = (N + C::BC - 1) / C::BC, Tr = (N + C::BR - 1) / C::BR, BH = (int)gridDim.x / Tc;
    const int bid = (int)blockIdx.x;
    const int kv_tile = causal ? bid / BH : bid % Tc;
    w.Tr = Tr;
    w.bh = causal ? bid % BH : bid / Tc;
    w.k0 = kv_tile * C::BC;
    // TODO(2): i_first, the first query tile this block visits, and n_steps, how many it
    //   visits: causal, only the tiles that see one of its keys; non-causal, all Tr of them,
    //   starting at the same tile and wrapping around (query_tile). README, "Causal: which
    //   tiles a block visits".
    w.i_first = 0;
    w.n_steps = Tr;
    return w;
}
__device__ __forceinline__ int query_tile(const BlockWork &w, int it) {  // step it's: wrapped around
    int qt = w.i_first + it;
    if (qt >= w.Tr) qt -= w.Tr;
    return qt;
}
// [end schedule]

// [region lanes]
/* Where a thread works in the warp tiles (BwdTiles), and its shared-memory
 * address in each operand role, computed once per block (SwzLane). The
 * ldmatrix row and chunk of a lane (lesson 07), per role:
 *   A (rows in smem rows): K_j, V_j in S^T, dP^T (kA, vA); P^T, dS^T in dV,
 *     dK (pA, sA)
 *   B (n in smem rows, k along them): Q_i, dO_i in S^T, dP^T (qB)
 *   B trans (k in smem rows): dO_i, Q_i in dV, dK (qT); K_j in dQ (kT)
 *   A trans (k in smem rows): dS^T in dQ (sT, the lanes of B)
 * Stores of P^T, dS^T: stm (stmatrix: rows a_row, chunks a_chunk), sts
 * (st.shared: row g, word t). stm, sts, qB, qT are offsets in a tile or slot,
 * made addresses where the tile is known. */
template <class C>
struct WarpLanes {
    int warp, lane, g, t;
    int key_row0, q_off, d_off;  // the warp's first key in the tile, query in S^T, column of dK_j, dV_j
    SwzLane<C::D> kA, vA, kT;
    SwzLane<C::BR> pA, sA, sT;
    uint32_t stm, sts, qB, qT;
    __device__ __forceinline__ WarpLanes(uint32_t base, int warp_, int lane_, int g_, int t_) {
        warp = warp_, lane = lane_, g = g_, t = t_;
        const int a_row = (lane & 7) + (((lane >> 3) & 1) << 3), a_chunk = lane >> 4;
        const int b_row = (lane & 7) + ((lane >> 4) << 3), b_chunk = (lane >> 3) & 1;
        const int t_row = a_row, t_chunk = a_chunk;
        key_row0 = (warp / C::WQ) * C::MK * 16;
        q_off = (warp % C::WQ) * C::QW;
        d_off = (warp % C::WQ) * C::DW;
        const uint32_t aK = base + C::K_OFF, aV = base + C::V_OFF, aS = base + C::DS_OFF, aP = base + C::P_OFF;
        kA = SwzLane<C::D>(aK, key_row0 + a_row, a_chunk);
        vA = SwzLane<C::D>(aV, key_row0 + a_row, a_chunk);
        kT = SwzLane<C::D>(aK, t_row, (warp % C::WN) * C::CQ / 8 + t_chunk);
        pA = SwzLane<C::BR>(aP, key_row0 + a_row, a_chunk);
        sA = SwzLane<C::BR>(aS, key_row0 + a_row, a_chunk);
        sT = SwzLane<C::BR>(aS, b_row, (warp / C::WN) * C::RQ / 8 + b_chunk);
        stm = swz<C::BR>(key_row0 + a_row, q_off / 8 + a_chunk);
        sts = swz<C::BR>(key_row0 + g, q_off / 8) + 4 * t;
        qB = swz<C::D>(q_off + b_row, b_chunk);
        qT = swz<C::D>(t_row, d_off / 8 + t_chunk);
    }
};
struct Step {  // one step: Q_i against the block's K_j, V_j; where its operands are
    int k0, q0;                 // the first key of K_j, the first query of Q_i
    int N, causal;
    uint32_t aQ, aDO, aL2, aD;  // this step's slot: Q_i, dO_i (Br x d), L2_i, D_i (Br floats)
    uint32_t aS, aP;            // the dS^T and P^T tiles
};
// [end lanes]

// [region load]
/* Before the loop: K_j, V_j (Bc x d each) into their tiles, for the whole
 * loop, rows >= N zero-filled. The caller commits the group. */
template <typename T, class C>
__device__ __forceinline__ void load_kv(uint32_t base, const T *K, const T *V, int k0, int N, int tid) {
    load_tile_async<T, C::D, C::BC, C::NT>(base + C::K_OFF, K, k0, N, tid);
    load_tile_async<T, C::D, C::BC, C::NT>(base + C::V_OFF, V, k0, N, tid);
}
/* The copies of step `it` into slot it % STAGES: Q_i, dO_i of its query tile
 * (query_tile), and L2_i, D_i (whole 16-byte chunks: the workspace rows are
 * padded to whole query tiles). Called one step ahead, after
 * BAR_STEP_LANDED, which frees the slot; the caller commits the group. */
template <typename T, class C>
__device__ __forceinline__ void load_step(uint32_t base, const T *Q, const T *dO, const float *L2, const float *Dv,
                                          const BlockWork &w, int it, int N, int tid) {
    const int q0 = query_tile(w, it) * C::BR, slot = it % C::STAGES;
    load_tile_async<T, C::D, C::BR, C::NT>(base + C::Q_OFF + slot * C::Q_BYTES, Q, q0, N, tid);
    load_tile_async<T, C::D, C::BR, C::NT>(base + C::DO_OFF + slot * C::Q_BYTES, dO, q0, N, tid);
    if (tid < C::BR / 2) {  // BR / 4 chunks of L2, then BR / 4 of D
        const float *src = tid < C::BR / 4 ? L2 + q0 + 4 * tid : Dv + q0 + 4 * (tid - C::BR / 4);
        cp_async_16(base + C::LD_OFF + slot * C::LD_BYTES + 16 * tid, src, true);
    }
}
// [end load]

// [region s]
/* acc = A B^T for this warp's MK * 16 keys x QW queries, k over d: S^T =
 * K_j Q_i^T (A = K_j, lanes kA; B = Q_i) and dP^T = V_j dO_i^T (vA, dO_i).
 * A's rows are keys (lesson 07's A layout); B^T's columns are the queries,
 * whose rows in shared memory are the columns n of the mma's B operand:
 * ldmatrix without .trans, at offset qB in the slot b_tile. after_slice(kk)
 * runs after each 16-wide slice of d (POrder::in_dp computes P^T there).
 * S^T (or P^T) and dP^T are both alive until dS: with dK_j, dV_j, the
 * register peak of the kernel. Called after BAR_STEP_LANDED. */
template <typename T, class C, class AfterSlice>
__device__ __forceinline__ void keys_x_queries(typename C::KeysQueries &acc, const SwzLane<C::D> &a_lane,
                                               uint32_t b_tile, const WarpLanes<C> &ln, AfterSlice after_slice) {
    constexpr int MK = C::MK, QW = C::QW, D = C::D;
#pragma unroll
    for (int mk = 0; mk < MK; ++mk)
#pragma unroll
        for (int nb = 0; nb < QW / 8; ++nb) acc[mk][nb][0] = acc[mk][nb][1] = acc[mk][nb][2] = acc[mk][nb][3] = 0.f;
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
        uint32_t a[MK][4];
#pragma unroll
        for (int mk = 0; mk < MK; ++mk) ldmatrix_x4(a[mk], a_lane.at(mk * 16, 2 * kk));
#pragma unroll
        for (int np = 0; np < QW / 16; ++np) {
            uint32_t b[4];
            ldmatrix_x4(b, SwzLane<D>(b_tile + ln.qB).at(np * 16, 2 * kk));
#pragma unroll
            for (int mk = 0; mk < MK; ++mk) {
                mma_16816<T>(acc[mk][2 * np], a[mk], b[0], b[1]);
                mma_16816<T>(acc[mk][2 * np + 1], a[mk], b[2], b[3]);
            }
        }
        after_slice(kk);
    }
}
// [end s]

// [region mask]
/* S = -inf where a key may not contribute: keys >= N (their zero rows of K
 * would give P = exp(-L) > 0) and, causal, keys after the query. Then P = 0
 * and dS = 0 there: one mask serves the four products that use P or dS.
 * Only the tiles that cross the diagonal or the end of the keys pay for the
 * test (need_mask: one branch per step, so the code on either side stays one
 * stretch the compiler schedules as a whole). A thread's elements: keys k0 +
 * key_row0 + mk * 16 + g (+ 8), queries q0 + q_off + nb * 8 + 2t (+ 1). */
template <class C>
__device__ __forceinline__ void mask_s(typename C::KeysQueries &s, const Step &st, const WarpLanes<C> &ln,
                                       bool need_mask) {
    if (!need_mask) return;
#pragma unroll
    for (int mk = 0; mk < C::MK; ++mk)
#pragma unroll
        for (int nb = 0; nb < C::QW / 8; ++nb)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const int key = st.k0 + ln.key_row0 + mk * 16 + ln.g + (e >> 1) * 8;
                const int query = st.q0 + ln.q_off + nb * 8 + 2 * ln.t + (e & 1);
                // TODO(2), continued: and the causal condition (README, "The mask").
                if (key >= st.N) s[mk][nb][e] = -INFINITY;
                (void)query;
            }
}
// [end mask]

// [region ds-store]
/* Fragments nb, nb + 1 of this warp's P^T or dS^T (C layout, packed) into a
 * Bc x Br tile: row = key, 16-byte chunk = 8 queries. st.shared: 4 bytes per
 * lane; the 32 lanes hit 8 rows (g) x 4 words (t) of 8 different chunks
 * after the swizzle, 32 banks. stmatrix (C::STSM, sm_90): one stmatrix.x4
 * writes the four 8 x 8 matrices of a 16-key slice, the inverse of the
 * ldmatrix that reads them back, with the same lanes (a_row, a_chunk): a
 * quarter of the store instructions. After BAR_STEP_LANDED (no warp still
 * reads the previous step's tiles); read after BAR_PDS_STORED. */
template <class C>
__device__ __forceinline__ void store_pair(uint32_t tile, const typename C::Packed &v, int nb, const WarpLanes<C> &ln) {
#pragma unroll
    for (int mk = 0; mk < C::MK; ++mk) {
        if constexpr (C::STSM && FA_SM90) {
            stmatrix_x4(SwzLane<C::BR>(tile + ln.stm).at(mk * 16, nb), v[mk][nb][0], v[mk][nb][1], v[mk][nb + 1][0],
                        v[mk][nb + 1][1]);
        } else {
#pragma unroll
            for (int n2 = nb; n2 < nb + 2; ++n2)
#pragma unroll
                for (int r = 0; r < 2; ++r) sts32(SwzLane<C::BR>(tile + ln.sts).at(mk * 16 + 8 * r, n2), v[mk][n2][r]);
        }
    }
}
// [end ds-store]

// [region p-ds]
/* P^T = exp(S^T scale - L) for the queries of n-blocks [nb0, nb1),
 * recomputed from the forward's logsumexp: L is exact, so P is the
 * normalised softmax at once and never overflows (every exponent is <= 0).
 * In base 2: scale_log2 = scale log2(e), L2 = L log2(e). A thread's columns
 * are queries nb * 8 + 2t, +1: one float pair of L2 per n-block. P^T is kept
 * in fp32 (pf, for dS) and packed to 16 bits (pp): the C layout of S^T with
 * keys as rows is the A layout of dV += P^T dO_i. Each completed pair of
 * n-blocks is stored for the other warp of the pair. After mask_s. */
template <typename T, class C>
__device__ __forceinline__ void p_from_l(int nb0, int nb1, const typename C::KeysQueries &s,
                                         typename C::KeysQueries &pf, typename C::Packed &pp, const Step &st,
                                         const WarpLanes<C> &ln, float scale_log2) {
#pragma unroll
    for (int nb = nb0; nb < nb1; ++nb) {
        const float2 l2 = lds_f32x2(st.aL2 + 4 * (ln.q_off + nb * 8 + 2 * ln.t));
#pragma unroll
        for (int mk = 0; mk < C::MK; ++mk) {
            float *p = pf[mk][nb];
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const float x = s[mk][nb][e];
                // TODO(4): p[e] = P of this element, from its score x and the L2 of its query (which
                //   of l2.x, l2.y?), in one fmaf and one ex2. README, "P from L, in base 2".
                p[e] = 0.f;
                (void)x; (void)scale_log2;
            }
            pp[mk][nb][0] = pack2<T>(p[0], p[1]);
            pp[mk][nb][1] = pack2<T>(p[2], p[3]);
        }
        if (nb & 1) store_pair<C>(st.aP, pp, nb - 1, ln);
    }
}
/* dS^T = P^T o (dP^T - D) in fp32, rounded once to 16 bits, and stored:
 * dQ_i = dS K_j needs every warp's keys, dK_j the other warp's queries. D
 * of a thread's two queries: one float pair per n-block. */
template <typename T, class C>
__device__ __forceinline__ void ds_from_dp(const typename C::KeysQueries &dp, const typename C::KeysQueries &pf,
                                           typename C::Packed &dsp, const Step &st, const WarpLanes<C> &ln) {
#pragma unroll
    for (int nb = 0; nb < C::QW / 8; ++nb) {
        const float2 dd = lds_f32x2(st.aD + 4 * (ln.q_off + nb * 8 + 2 * ln.t));
#pragma unroll
        for (int mk = 0; mk < C::MK; ++mk) {
            const float *p = pf[mk][nb];
            float ds[4];
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                // TODO(4), continued: ds[e] = dS of this element, from its P, its dP and the D of
                //   its query (dd.x or dd.y). README, "dS and D".
                ds[e] = 0.f;
                (void)p; (void)dd;
            }
            dsp[mk][nb][0] = pack2<T>(ds[0], ds[1]);
            dsp[mk][nb][1] = pack2<T>(ds[2], ds[3]);
        }
        if (nb & 1) store_pair<C>(st.aS, dsp, nb - 1, ln);
    }
}
// [end p-ds]

// [region dq]
/* dQ_i += dS K_j: this warp's RQ x CQ tile of dQ_i, k over the Bc keys.
 * A = dS (queries x keys) is dS^T read transposed (sT); B = K_j read
 * transposed (kT: keys are k). Reads every warp's dS^T rows: after
 * BAR_PDS_STORED. The loop is unrolled 4 slices at a time at d = 128 (all 8
 * was 1-2% slower on an H100), whole at d = 64 (3% faster). */
template <typename T, class C>
__device__ __forceinline__ void dq_mma(typename C::DqFrags &dq, const WarpLanes<C> &ln) {
    constexpr int MQ = C::MQ, NQ = C::NQ;
    constexpr int DQ_UNROLL = C::D >= 128 ? 4 : C::BC / 16;
#pragma unroll
    for (int mq = 0; mq < MQ; ++mq)
#pragma unroll
        for (int nb = 0; nb < NQ; ++nb) dq[mq][nb][0] = dq[mq][nb][1] = dq[mq][nb][2] = dq[mq][nb][3] = 0.f;
#pragma unroll DQ_UNROLL
    for (int kk = 0; kk < C::BC / 16; ++kk) {
        uint32_t a[MQ][4];
        // TODO(6): a[mq], the A fragments of dS (queries x keys) for this warp's query slice mq and
        //   key slice kk, from the dS^T tile (keys as rows), through the lane address sT: which
        //   ldmatrix, and which move at(dr, dc)? README, "Which operand, which ldmatrix".
#pragma unroll
        for (int mq = 0; mq < MQ; ++mq) a[mq][0] = a[mq][1] = a[mq][2] = a[mq][3] = 0u;
#pragma unroll
        for (int dpair = 0; dpair < NQ / 2; ++dpair) {
            uint32_t b[4];
            ldmatrix_x4_trans(b, ln.kT.at(kk * 16, 2 * dpair));
#pragma unroll
            for (int mq = 0; mq < MQ; ++mq) {
                mma_16816<T>(dq[mq][2 * dpair], a[mq], b[0], b[1]);
                mma_16816<T>(dq[mq][2 * dpair + 1], a[mq], b[2], b[3]);
            }
        }
    }
}
/* The partial dQ_i goes to the fp32 accumulator by atomic adds, with the
 * other key tiles' blocks', in an order that changes from run to run. Only
 * the convert kernel reads it, so its layout is ours: per query tile in the
 * order of the mma fragments (BwdTiles::dq_frag), one 16-byte reduction per
 * lane and fragment, 512 contiguous bytes per warp instruction. Reductions
 * do not make the warp wait, but they queue in the pipeline ldmatrix uses:
 * all at once, they hold up the loads that follow. So dq_red adds part
 * `part` of `parts` of the warp's MQ * NQ fragments (0, 1: all). Rows past N
 * land in padded rows nobody reads: no bounds test. */
template <class C>
__device__ __forceinline__ void dq_red(const typename C::DqFrags &dq, float *dQacc, const Step &st,
                                       const WarpLanes<C> &ln, int part, int parts) {
    constexpr int MQ = C::MQ, NQ = C::NQ;
#pragma unroll
    for (int f = part * MQ * NQ / parts; f < (part + 1) * MQ * NQ / parts; ++f) {
        const float *v = dq[f / NQ][f % NQ];
        // TODO(6), continued: add fragment f (v[0..3]) of this lane to the accumulator of the step's
        //   query tile, atomically, where the fragment order puts it (BwdTiles::dq_frag). README,
        //   "dQ: atomics into an accumulator in fragment order".
        (void)v; (void)dQacc; (void)st; (void)ln;
    }
}
// [end dq]

// [region dv-dk]
/* dV_j += P^T dO_i (DV) and dK_j += dS^T Q_i (DK), k over the Br queries,
 * 16 at a time. A = P^T, dS^T of this warp's keys, from shared memory (half
 * of their queries come from the other warp of the pair); B = dO_i, Q_i read
 * transposed (their rows are now k), each fragment feeding the MK m-tiles.
 * after_slice(kk) runs after each slice (DqOrder::between: a part of dQ_i's
 * atomics). After BAR_PDS_STORED. */
template <typename T, class C, bool DV, bool DK, class AfterSlice>
__device__ __forceinline__ void dv_dk(typename C::KeysDims &dv, typename C::KeysDims &dk, const Step &st,
                                      const WarpLanes<C> &ln, AfterSlice after_slice) {
    constexpr int MK = C::MK, DW = C::DW, D = C::D;
#pragma unroll
    for (int kk = 0; kk < C::BR / 16; ++kk) {
        uint32_t pa[MK][4], sa[MK][4];
        if constexpr (DV) {
#pragma unroll
            for (int mk = 0; mk < MK; ++mk) ldmatrix_x4(pa[mk], ln.pA.at(mk * 16, 2 * kk));
        }
        if constexpr (DK) {
#pragma unroll
            for (int mk = 0; mk < MK; ++mk) ldmatrix_x4(sa[mk], ln.sA.at(mk * 16, 2 * kk));
        }
#pragma unroll
        for (int dpair = 0; dpair < DW / 16; ++dpair) {
            uint32_t bo[4], bq[4];
            if constexpr (DV) ldmatrix_x4_trans(bo, SwzLane<D>(st.aDO + ln.qT).at(kk * 16, 2 * dpair));
            // TODO(5): when DK, bq = the B fragments of dK's slice (kk, dpair): which tile, read which
            //   way (README, "Which operand, which ldmatrix")? dV's line above is the model.
#pragma unroll
            for (int mk = 0; mk < MK; ++mk) {
                if constexpr (DV) {
                    mma_16816<T>(dv[mk][2 * dpair], pa[mk], bo[0], bo[1]);
                    mma_16816<T>(dv[mk][2 * dpair + 1], pa[mk], bo[2], bo[3]);
                }
                if constexpr (DK) {
                    // TODO(5), continued: dK's two n-blocks of this slice += dS^T (sa) times bq.
                    (void)bq; (void)sa;
                }
            }
        }
        after_slice(kk);
    }
}
// [end dv-dk]

// [region epilogue]
/* After the loop: dK_j = scale dS^T Q summed over i (the scores were
 * scaled) and dV_j, packed to 16 bits into the K_j and V_j tiles, swizzled,
 * for the kernel's 16-byte stores. After BAR_KV_DONE (every warp read all of
 * K_j in its last dQ). */
template <typename T, class C>
__device__ __forceinline__ void stage_dk_dv(const typename C::KeysDims &dk, const typename C::KeysDims &dv,
                                            uint32_t aK, uint32_t aV, float scale, const WarpLanes<C> &ln) {
#pragma unroll
    for (int mk = 0; mk < C::MK; ++mk)
#pragma unroll
        for (int nb = 0; nb < C::DW / 8; ++nb)
#pragma unroll
            for (int r = 0; r < 2; ++r) {
                const uint32_t off = swz<C::D>(ln.key_row0 + mk * 16 + ln.g + 8 * r, ln.d_off / 8 + nb) + 4 * ln.t;
                // TODO(7): dK owes the softmax scale (README, "The scale").
                sts32(aK + off, pack2<T>(dk[mk][nb][2 * r], dk[mk][nb][2 * r + 1]));
                (void)scale;
                sts32(aV + off, pack2<T>(dv[mk][nb][2 * r], dv[mk][nb][2 * r + 1]));
            }
}
// [end epilogue]

// [region kernel]
/* The main kernel: one block per (K_j, V_j) tile of one (b, h); it walks the
 * query tiles Q_i that see any of its keys (block_work), accumulates dK_j,
 * dV_j in registers, and adds its share of every dQ_i to the fp32
 * accumulator. grid = Tc * B * H, block = 32 * WARPS threads, dynamic shared
 * memory BwdTiles::SMEM bytes. L2, Dv: [BH, Npad] (preprocess); dQacc: BH *
 * Npad * D fp32, zeroed, per query tile in fragment order (region dq); dK,
 * dV: [BH, N, D] of T, every row < N written once. scale_log2 = scale *
 * log2(e); scale multiplies dK here and dQ in the convert kernel (dS is the
 * gradient of the scaled scores). */
template <typename T, class Cfg>
__global__ void __launch_bounds__(Cfg::WARPS * 32)
fa2_bwd_kernel(const T *__restrict__ Q, const T *__restrict__ K, const T *__restrict__ V, const T *__restrict__ dO,
               const float *__restrict__ L2, const float *__restrict__ Dv, float *__restrict__ dQacc,
               T *__restrict__ dK, T *__restrict__ dV, int N, int Npad, float scale_log2, float scale, int causal) {
#if FA_SM80
    using C = BwdTiles<Cfg>;
    extern __shared__ __align__(1024) unsigned char fa_smem[];  // SwzLane: tiles on whole rows
    const uint32_t base = smem_u32(fa_smem);
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
    const BlockWork w = block_work<C>(N, causal);
    const size_t head = (size_t)w.bh * N;
    Q += head * C::D; K += head * C::D; V += head * C::D; dO += head * C::D; dK += head * C::D; dV += head * C::D;
    L2 += (size_t)w.bh * Npad; Dv += (size_t)w.bh * Npad; dQacc += (size_t)w.bh * Npad * C::D;

    // [region prologue]
    /* Two groups: K_j, V_j, then the first step's tiles. */
    load_kv<T, C>(base, K, V, w.k0, N, tid);
    cp_async_commit();
    load_step<T, C>(base, Q, dO, L2, Dv, w, 0, N, tid);
    cp_async_commit();
    const WarpLanes<C> ln(base, warp, lane, g, t);
    typename C::KeysDims dk, dv;
#pragma unroll
    for (int mk = 0; mk < C::MK; ++mk)
#pragma unroll
        for (int nb = 0; nb < C::DW / 8; ++nb)
#pragma unroll
            for (int e = 0; e < 4; ++e) dk[mk][nb][e] = dv[mk][nb][e] = 0.f;
    // [end prologue]

    for (int it = 0; it < w.n_steps; ++it) {
        const int q0 = query_tile(w, it) * C::BR, slot = it % C::STAGES;
        const uint32_t aQ = base + C::Q_OFF + slot * C::Q_BYTES, aDO = base + C::DO_OFF + slot * C::Q_BYTES;
        const uint32_t aL2 = base + C::LD_OFF + slot * C::LD_BYTES, aD = aL2 + C::BR * 4;
        const Step st = {w.k0, q0, N, causal, aQ, aDO, aL2, aD, base + C::DS_OFF, base + C::P_OFF};

        // [region pipeline]
        /* This step's copies have landed (the only group in flight); after the
         * barrier all threads' copies are visible and every warp is done with
         * the previous step, so the other slot takes the next step's tiles. */
        cp_async_wait<0>();
        block_sync(BAR_STEP_LANDED);
        if (it + 1 < w.n_steps) load_step<T, C>(base, Q, dO, L2, Dv, w, it + 1, N, tid);
        cp_async_commit();
        // [end pipeline]

        // [region step]
        typename C::KeysQueries s, pf;  // S^T, and P^T in fp32 (for dS)
        typename C::Packed pp, dsp;     // P^T, dS^T packed to 16 bits
        typename C::KeysQueries dp;     // dP^T
        typename C::DqFrags dq;         // the warp's part of dQ_i
        keys_x_queries<T, C>(s, ln.kA, st.aQ, ln, [](int) {});  // S^T
        // TODO(2), continued: need_mask, whether this (query tile, key tile) pair has any element
        //   the mask must clear (README, "The mask"); as given, only the last key tile's.
        const bool need_mask = w.k0 + C::BC > N;
        if constexpr (C::P_ORDER == POrder::in_dp) {  // P^T between the slices of dP^T
            constexpr int NB = C::QW / 8, KS = C::D / 16;
            mask_s<C>(s, st, ln, need_mask);
            // TODO(3): dP^T = V_j dO_i^T into dp. The operands given here are S^T's (K_j's lanes,
            //   Q_i's tile): which does dP^T take (README, "Keys as rows")? The lambda stays.
            keys_x_queries<T, C>(dp, ln.kA, st.aQ, ln, [&](int kk) {  // dP^T
                p_from_l<T, C>(kk * NB / KS, (kk + 1) * NB / KS, s, pf, pp, st, ln, scale_log2);
            });
        } else {  // P^T after dP^T
            keys_x_queries<T, C>(dp, ln.kA, st.aQ, ln, [](int) {});  // dP^T: TODO(3), the same
            mask_s<C>(s, st, ln, need_mask);
            p_from_l<T, C>(0, C::QW / 8, s, pf, pp, st, ln, scale_log2);
        }
        ds_from_dp<T, C>(dp, pf, dsp, st, ln);
        block_sync(BAR_PDS_STORED);
        if constexpr (C::DQ_ORDER == DqOrder::first) {  // its atomics leave while dV_j, dK_j compute
            dq_mma<T, C>(dq, ln);
            dq_red<C>(dq, dQacc, st, ln, 0, 1);
            dv_dk<T, C, true, true>(dv, dk, st, ln, [](int) {});
        } else {  // dV_j, dQ_i, dK_j, with a part of dQ_i's atomics after each slice of dK_j
            dv_dk<T, C, true, false>(dv, dk, st, ln, [](int) {});
            dq_mma<T, C>(dq, ln);
            dv_dk<T, C, false, true>(dv, dk, st, ln, [&](int kk) { dq_red<C>(dq, dQacc, st, ln, kk, C::BR / 16); });
        }
        // [end step]
    }

    // [region epilogue-store]
    constexpr int CH = C::D / 8;  // dK_j, dV_j via their tiles: thread tid stores chunk tid % CH of rows tid / CH, ...
    const uint32_t aK = base + C::K_OFF, aV = base + C::V_OFF;
    block_sync(BAR_KV_DONE);
    stage_dk_dv<T, C>(dk, dv, aK, aV, scale, ln);
    block_sync(BAR_GRADS_STAGED);
#pragma unroll
    for (int i = 0; i < C::BC * CH / C::NT; ++i) {
        const int r = tid / CH + i * (C::NT / CH), ch = tid % CH;
        if (w.k0 + r < N) {
            *reinterpret_cast<uint4 *>(dK + (size_t)(w.k0 + r) * C::D + ch * 8) = lds_u128(aK + swz<C::D>(r, ch));
            *reinterpret_cast<uint4 *>(dV + (size_t)(w.k0 + r) * C::D + ch * 8) = lds_u128(aV + swz<C::D>(r, ch));
        }
    }
    // [end epilogue-store]
#endif
}
// [end kernel]

// [region convert]
/* dQ = scale * dQacc, rounded to T. One thread per 4 floats of the
 * accumulator in fragment order (region dq), one lane's mma fragment (rows
 * g, g + 8 of a 16-row slice, columns 2t, 2t + 1), put back in its row and
 * column with the main kernel's tile map (BwdTiles): 16-byte reads,
 * contiguous across the warp; 4-byte writes; rows >= N skipped.
 * dQacc: [BH, Npad / Br, Br * D in fragment order]; quads = BH * Npad * D /
 * 4; dQ: [BH, N, D] of T. */
template <typename T, class Cfg>
__global__ void __launch_bounds__(256)
fa2_bwd_convert_dq_kernel(const float *__restrict__ dQacc, T *__restrict__ dQ, int N, int Npad, float scale,
                          long long quads) {
    using C = BwdTiles<Cfg>;
    constexpr int D = C::D, F = C::MQ * C::NQ, TILE4 = C::BR * D / 4;
    const int Tr = Npad / C::BR;
    for (long long q = (long long)blockIdx.x * 256 + threadIdx.x; q < quads; q += (long long)gridDim.x * 256) {
        const long long tile = q / TILE4;  // bh * Tr + qt
        const int w = (int)(q - tile * TILE4), lane = w % 32, f = (w / 32) % F, warp = w / (32 * F);
        const long long bh = tile / Tr;
        const int qt = (int)(tile - bh * Tr);
        const int row = qt * C::BR + (warp / C::WN) * C::RQ + (f / C::NQ) * 16 + lane / 4;
        const int col = (warp % C::WN) * C::CQ + (f % C::NQ) * 8 + 2 * (lane % 4);
        const float4 x = reinterpret_cast<const float4 *>(dQacc)[q];
        T *dst = dQ + ((size_t)bh * N + row) * D + col;
        // TODO(7), continued: and so does dQ.
        if (row < N) *reinterpret_cast<uint32_t *>(dst) = pack2<T>(x.x, x.y);
        if (row + 8 < N) *reinterpret_cast<uint32_t *>(dst + 8 * D) = pack2<T>(x.z, x.w);
        (void)scale;
    }
}
// [end convert]

// [region host]
/* The fp32 workspace, kept across calls and grown on demand (cudaMalloc and
 * cudaFree synchronize: only the first call of a larger shape pays):
 * dQacc [BH, Npad, d], then L2 and D [BH, Npad] each: BH * Npad * (d + 2) * 4
 * bytes, e.g. 130 MiB for B * N = 16384, H * d = 2048, d = 128. */
static float *g_ws = nullptr;
static size_t g_ws_bytes = 0;
static int ensure_workspace(size_t bytes) {
    if (g_ws_bytes >= bytes) return ATTN_OK;
    cudaFree(g_ws);
    g_ws = nullptr;
    g_ws_bytes = 0;
    if (cudaMalloc(&g_ws, bytes) != cudaSuccess) {
        cudaGetLastError();  // allocation errors are not sticky; clear the last-error slot
        g_ws = nullptr;
        fprintf(stderr, "out of memory: the backward pass needs %.1f MiB of fp32 workspace (dQ accumulator, D, L)\n",
                bytes / 1048576.0);
        return ATTN_OUT_OF_MEMORY;
    }
    g_ws_bytes = bytes;
    return ATTN_OK;
}

/* The three kernels of head dimension Cfg::D on a->stream. */
template <typename T, class Cfg>
static int launch(const attn_bwd_args *a) {
    using C = BwdTiles<Cfg>;
    constexpr int D = C::D;
    auto kernel = fa2_bwd_kernel<T, Cfg>;
    static int ready = 0;  // once per instantiation: allow > 48 KiB of shared memory
    if (!ready) {
        int dev = 0, optin = 0;
        cudaGetDevice(&dev);
        cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev);
        if ((int)C::SMEM > optin) return ATTN_UNSUPPORTED;
        if (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, C::SMEM) != cudaSuccess)
            return ATTN_UNSUPPORTED;
        cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout, cudaSharedmemCarveoutMaxShared);
        ready = 1;
    }
    const BwdGeometry geo = bwd_geometry(a->B, a->H, a->N, D, C::BR, C::BC);
    if (geo.main_blocks > 0x7fffffffLL || geo.pre_blocks > 0x7fffffffLL) return ATTN_UNSUPPORTED;
    const int st = ensure_workspace(geo.ws_floats * sizeof(float));
    if (st != ATTN_OK) return st;
    float *dQacc = g_ws, *L2 = g_ws + (size_t)geo.rows * D, *Dv = L2 + geo.rows;
    cudaStream_t stream = (cudaStream_t)a->stream;

    fa2_bwd_preprocess_kernel<T, D><<<(unsigned)geo.pre_blocks, 256, 0, stream>>>(
        (const T *)a->O, (const T *)a->dO, a->L, L2, Dv, dQacc, a->N, geo.Npad, geo.rows);
    kernel<<<(unsigned)geo.main_blocks, C::NT, C::SMEM, stream>>>(
        (const T *)a->Q, (const T *)a->K, (const T *)a->V, (const T *)a->dO, L2, Dv, dQacc, (T *)a->dK, (T *)a->dV,
        a->N, geo.Npad, a->scale * 1.4426950408889634f, a->scale, a->causal);
    fa2_bwd_convert_dq_kernel<T, Cfg><<<(unsigned)geo.conv_blocks, 256, 0, stream>>>(dQacc, (T *)a->dQ, a->N,
                                                                                    geo.Npad, a->scale, geo.quads);
    return ATTN_OK;
}

/* Entry point (reference/include/attention.h): fp16/bf16, d = 64 or 128, scale > 0,
 * sm_80 or newer; anything else is ATTN_UNSUPPORTED. Launches the three
 * kernels on a->stream and returns without synchronizing. */
int attention_backward(const attn_bwd_args *a) {
    static int major = -1;
    if (major < 0) {
        int dev = 0;
        if (cudaGetDevice(&dev) != cudaSuccess ||
            cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess)
            major = 0;
    }
    if (major < 8 || !(a->scale > 0.f)) return ATTN_UNSUPPORTED;
    if (STARTER_NOT_DONE) return ATTN_NOT_IMPLEMENTED;
    if (a->N < 1 || a->B < 1 || a->H < 1) return ATTN_OK;  // nothing to compute
    const int fp16 = a->dtype == DTYPE_FP16, bf16 = a->dtype == DTYPE_BF16;
    if (a->d == 64 && fp16) return launch<__half, BwdConfig<64>>(a);
    if (a->d == 64 && bf16) return launch<__nv_bfloat16, BwdConfig<64>>(a);
    if (a->d == 128 && fp16) return launch<__half, BwdConfig<128>>(a);
    if (a->d == 128 && bf16) return launch<__nv_bfloat16, BwdConfig<128>>(a);
    return ATTN_UNSUPPORTED;
}
// [end host]

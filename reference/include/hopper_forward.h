/* hopper_forward.h: lesson 09's forward kernel in parts, for a later lesson that builds its own
 * kernel from them (lesson 17 runs it over packed batches of sequences of different lengths: its
 * work items, copies of Q, epilogue and launch are its own; the MMA loop, the consumers' math, the
 * ring and the roles are these). In the order lesson 09's solution defines them:
 *
 *   roles-types   Step<STEP> (steps 5-7 of the ladder), Roles<NC> (register budget, named
 *                 barriers), MBar (the mbarriers of Q_i and of each ring slot)
 *   kernel-parts  SmemLayout, Config, Work and work_of (the tile scheduler of a rectangular batch),
 *                 Consumer (S = Q K^T, O += P V, the online softmax in the wgmma accumulator
 *                 layout), Warpgroup (a consumer thread's place, releases, turns), Kernel (barrier
 *                 init, load_kv, the producer and consumer main loops, mma_loop: FlashAttention-3's
 *                 Algorithm 2, the epilogue)
 *   device-info   DeviceInfo, device_info: compute capability, SMs, L2 and shared memory of a device
 *   tile-counter  tile_counter: step 7's work counter, one per (device, stream)
 *
 * Shapes, layouts, preconditions and sources (FlashAttention-3, Shah et al. 2024):
 * solutions/09-hopper-wgmma/hopper.cu, whose regions these are, made by `make starters` (edit them
 * there; `make check-starters` fails when this file is not what they make). Lesson 09's starter,
 * whose TODOs these answer, does not include it. Device code needs sm_90a. */
#ifndef HOPPER_FORWARD_H
#define HOPPER_FORWARD_H
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include "attention.h"
#include "tma_params.h" /* tma_tile_offset */
/* Include ptx_mma.h (lesson 07: smem_u32, ex2, pack2) and ptx_hopper.h (lesson 09's wrappers) first,
 * from the lesson's file: included from here, they would be this folder's even where the CPU
 * emulator puts its own first on the include path. */

// [generated from solutions/09-hopper-wgmma/hopper.cu, regions roles-types kernel-parts device-info tile-counter]
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
    /* S = Q_i K_j^T for this warpgroup's 64 rows and the tile's first W keys (B_c, or 64: mma_loop's first
     * tile), into s_first<W>() (s's first W / 2 values): D / 16 wgmmas, the first with scale_d = 0. */
    template <int W = BC> __device__ __forceinline__ void issue_s(uint32_t sQ, int wg_row0, uint32_t sK) {
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk)
            wgmma_ss<T, W>(s_first<W>(), desc_kmajor<BR>(sQ, wg_row0, kk), desc_kmajor<BC>(sK, 0, kk), kk > 0);
        wgmma_commit();
    }
    /* O += P V_j: B_c / 16 wgmmas, A = 16 keys of P from registers, B = those keys of V_j. */
    __device__ __forceinline__ void issue_pv(uint32_t sV) {
#pragma unroll
        for (int ks = 0; ks < BC / 16; ++ks) wgmma_rs<T, D>(o, p[ks], desc_mnmajor<BC>(sV, ks), 1);
        wgmma_commit();
    }
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
        __syncwarp();
        if (lane == 0) mbar_arrive(bar(b, s));
    }
    /* Steps 6-7, after this warpgroup's last S = Q_i K_j^T: Q_i's buffer may take the next tile. */
    __device__ __forceinline__ void release_q() const { if (C::S::PERSISTENT) release(EMPTY_Q); }
    /* Turns: c issues its GEMMs after bar.sync on its barrier, then lets c + 1 (mod NC) go. */
    __device__ __forceinline__ void begin_turn() const { named_sync(C::R::TURN_WG0 + c, 256); }
    __device__ __forceinline__ void pass_turn() const { named_arrive(C::R::TURN_WG0 + (c + 1) % C::NC, 256); }
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
    /* K_j, then V_j (the key tile from row row0 of slice bh: j B_c here) into slot gi % STAGES, gi
     * counting every K/V tile the block loads. Fill `use` of a slot first waits until every consumer
     * warp has released fill use - 1: that phase of the slot's empty barrier has parity (use - 1) & 1. */
    __device__ __forceinline__ void load_kv(int gi, int row0, int bh) const {
        const int s = gi % C::STAGES, use = gi / C::STAGES;
        if (use > 0) mbar_wait(bar(EMPTY_K, s), (use - 1) & 1);
        mbar_arrive_expect_tx(bar(FULL_K, s), SL::TILE);
        for (int b = 0; b < C::D / 64; ++b)
            tma_load_3d(base + SL::K + s * SL::TILE + b * C::BC * 128, tmK, 64 * b, row0, bh, bar(FULL_K, s));
        if (use > 0) mbar_wait(bar(EMPTY_V, s), (use - 1) & 1);
        mbar_arrive_expect_tx(bar(FULL_V, s), SL::TILE);
        for (int b = 0; b < C::D / 64; ++b)
            tma_load_3d(base + SL::V + s * SL::TILE + b * C::BC * 128, tmV, 64 * b, row0, bh, bar(FULL_V, s));
    }
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
            mbar_wait(wg.bar(FULL_K, slot), ph);
            mbar_wait(wg.bar(FULL_V, pslot), pph);
            wg.begin_turn();
            wgmma_fence();
            fence_acc(w.s);
            fence_acc(w.o);
            w.issue_s(sQ, wg.wg_row0, base + SL::K + slot * SL::TILE);
            w.issue_pv(base + SL::V + pslot * SL::TILE);
            end_turn();
            wgmma_wait<1>();  // S_it is done; P_{it-1} V_{it-1} may still run
            fence_acc(w.s);
            wg.release(EMPTY_K, slot);
            if (it == n_tiles - 1) wg.release_q();
            if (needs_mask(k0)) w.mask(k0, row, wg.t, N, causal);
            w.softmax(scale_log2, alpha, rowsum);
            wgmma_wait<0>();  // P_{it-1} V_{it-1} is done: O and P may change
            fence_acc(w.o);
            wg.release(EMPTY_V, pslot);
            w.rescale(alpha, rowsum);
            w.pack_p();
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
};
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
// [end generated]
#endif

//| /* 08-async-pipeline (starter): lesson 07's tensor-core FlashAttention-2
//|  * forward pass, fed by a cp.async pipeline and tuned by measurement.
//|  *
//|  * What is here: lesson 07's math (fragments, online softmax, P in registers),
//|  * generalised to MT m-tiles per warp, the kernel's order of phases and the
//|  * launch. What you write: the numbered TODO(n) below, all about moving data
//|  * and ordering work, in the order of README.md, then TODO(0).
// solution begin
/* 08-async-pipeline: lesson 07's tensor-core FlashAttention-2 forward pass,
 * fed by a cp.async pipeline and tuned by measurement.
// solution end
 *
 * Source: Dao, "FlashAttention-2" (2023), Algorithm 1 and Section 3.3 (work
 * split across warps), plus the loading order of its CUDA kernels: the copy
 * of V_j overlaps S = Q_i K_j^T, the copy of K_{j+1} overlaps P V_j.
 *
 * New compared with lesson 07:
 *   - K/V tiles arrive through cp.async (16-byte global -> shared copies that
 *     bypass the registers) into STAGES ring slots each, so that copies for
 *     the next tiles are in flight while the tensor cores work on this one;
 *   - the kernel is a template over the tile shape (Br, Bc), the warps per
 *     block and STAGES; a warp may own 2 m-tiles (32 query rows), which
 *     halves the shared-memory reads per mma; sweep.sh times the variants;
 *   - block order: non-causal, the blocks of one head run side by side (its
 *     K, V stay in L2); causal, the longest query tiles of all heads start
 *     first; K/V tiles are visited from the diagonal down to 0, so the
 *     masked tiles come first;
 *   - fewer instructions per step (the kernel is latency-bound, its time
 *     follows its instruction count): tile copies with constant offsets, and
 *     the exponentials of P computed 16 keys at a time right before the mma
 *     that consumes them.
 *
 * The kernel hands out phases, each a device function below, in this order:
 *   block_schedule      which query tile and which (batch, head)
 *   prologue            start the copies of Q_i and the first tiles; wait for Q_i
 *   for each K/V tile, from the diagonal down:
 *     wait_then_refill  the K pipeline step: K_j has landed, V's slot is refilled
 *     s_mma             S = Q_i K_j^T
 *     apply_mask        -inf past N and above the diagonal (boundary tiles only)
 *     softmax_rescale   online softmax, first half: row maxima, O and l rescaled
 *     wait_then_refill  the V pipeline step: V_j has landed, K's slot is refilled
 *     pv_mma            P = exp2(S c - base), 16 keys at a time, O += P V_j
 *   epilogue            l over the quad, O / l and L written
 *
 * Compile-time parameters (the tile configuration per head dimension, chosen
 * with sweep.sh; see "config"): FA64_BR, FA64_BC, FA64_WARPS, FA64_STAGES,
 * FA64_QREG, and the same five FA128_*.
 *
 * Layouts: Q, K, V, O are [B, H, N, d] row-major (reference/include/attention.h);
 * L is [B, H, N] fp32, natural-log logsumexp of the scaled scores.
 * Preconditions: dtype fp16 or bf16, d in {64, 128}, scale > 0, an sm_80+ GPU.
 */
#include <cuda_runtime.h>
#include <stdint.h>
#include <math.h>
#include "attention.h"
#include "ptx_mma.h"  // lesson 07: smem_u32, ldmatrix_x4(_trans), mma_16816, ex2, pack2, swz, FA_SM80

//| /* TODO(0): set to 0 when you have written TODO(1)..TODO(6); the grader then grades you. */
//| #define STARTER_NOT_DONE 1
//|
const lesson_info LESSON = {
    8, "08-async-pipeline", "cp.async pipeline, tile shapes by measurement, causal scheduling",
    DTYPE_BIT(DTYPE_FP16) | DTYPE_BIT(DTYPE_BF16), 1, {64, 128, 0}};

// [region config]
/* Tile configuration per head dimension: Br, Bc, warps per block, stages,
 * and whether Q_i stays in registers (1) or is re-read from shared memory
 * at every step (0). Chosen with sweep.sh (see the lesson text). To try
 * another, define all five of a head dimension, e.g. -DFA64_BR=64
 * -DFA64_BC=64 -DFA64_WARPS=4 -DFA64_STAGES=2 -DFA64_QREG=1 (separate
 * macros: nvcc splits a -D value at commas). */
#ifndef FA64_BR
#define FA64_BR 128
#define FA64_BC 128
#define FA64_WARPS 4
#define FA64_STAGES 1
#define FA64_QREG 0
#endif
#ifndef FA128_BR
#define FA128_BR 128
#define FA128_BC 64
#define FA128_WARPS 4
#define FA128_STAGES 1
#define FA128_QREG 0
#endif
#define FA_CFG_D64 FA64_BR, FA64_BC, FA64_WARPS, FA64_STAGES, FA64_QREG
#define FA_CFG_D128 FA128_BR, FA128_BC, FA128_WARPS, FA128_STAGES, FA128_QREG
// [end config]

#ifndef FA_EMULATOR  // the CPU emulator brings its own: tests/warp_emu/ptx_cp_async.h
// [region cp-async]
/* One 16-byte global -> shared copy that does not go through registers
 * (.cg: cache in L2 only; K and V are re-read by other blocks, not by this
 * SM's L1). With valid == false the source size is 0 and the 16 shared bytes
 * are filled with zeros: that is how rows past the end of the sequence become
 * zeros without a branch around the copy. */
__device__ __forceinline__ void cp_async_16(uint32_t dst, const void *src, bool valid) {
#if FA_SM80
    // TODO(1) begin
    //| // TODO(1): one inline-PTX statement, cp.async.cg.shared.global with 16 bytes to copy and
    //| //   a source size of 16 when valid, else 0 (README.md, "cp.async").
    //| (void)dst; (void)src; (void)valid;
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(valid ? 16 : 0));
    // TODO(1) end
#endif
}
/* Close the group of copies this thread issued since the last commit. */
__device__ __forceinline__ void cp_async_commit() {
#if FA_SM80
    // TODO(1) begin
    //| // TODO(1): cp.async.commit_group (a "memory" clobber keeps the compiler from moving
    //| //   shared-memory accesses across it).
    asm volatile("cp.async.commit_group;\n" ::: "memory");
    // TODO(1) end
#endif
}
/* Wait until at most N of this thread's committed groups are still in flight
 * (groups complete in order). Other threads' copies need a __syncthreads. */
template <int N>
__device__ __forceinline__ void cp_async_wait() {
#if FA_SM80
    // TODO(1) begin
    //| // TODO(1): cp.async.wait_group with N as an immediate operand ("n"), "memory" clobber.
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
    // TODO(1) end
#endif
}
// [end cp-async]
#endif

// [region load-async]
/* Start copying rows [row0, row0 + ROWS) of a [N, D] matrix into a swizzled
 * shared tile at shared address `tile`; rows >= N are zero-filled. The tile
 * is ROWS rows of CH = D / 8 chunks of 16 bytes; thread tid copies chunk
 * tid % CH of rows tid / CH, tid / CH + STEP, ... (STEP = NT / CH): 8 (d = 64)
 * or 16 (d = 128) consecutive threads read one 128- or 256-byte row, so
 * global reads are coalesced.
 * Cost matters here: the loop runs in every step, and each instruction it
 * spends is one the tensor cores wait for. So the loop count is a constant
 * (written `for (c = tid; c < ROWS * CH; c += NT)` it is a run-time loop,
 * since the compiler does not know tid < NT), the addresses of copy i are
 * those of copy 0 plus constants, and only a tile that crosses the end of
 * the sequence pays for a bounds test per copy. */
template <typename T, int D, int ROWS, int NT>
__device__ __forceinline__ void load_tile_async(uint32_t tile, const T *g, int row0, int N, int tid) {
    constexpr int CH = D / 8, STEP = NT / CH;
    static_assert(NT % CH == 0 && ROWS % STEP == 0 && STEP % 8 == 0,
                  "tile copy must split evenly over the threads, in steps of 8 rows");
    const int r0 = tid / CH, ch = tid % CH;
    // TODO(2) begin
    //| // TODO(2): copy 16-byte chunk ch of the tile rows r0, r0 + STEP, r0 + 2 STEP, ... from
    //| //   row row0 + r of g to its swizzled place in the tile, with cp_async_16; a row past the
    //| //   end of the sequence is zero-filled (README.md, "A tile copy"). Then make it cheap, as
    //| //   the comment above says (README.md, "Counting instructions").
    //| (void)tile; (void)g; (void)row0; (void)N; (void)r0; (void)ch;
    const T *src = g + (size_t)(row0 + r0) * D + ch * 8;
    /* STEP is a multiple of 8: rows r0 + i STEP have the swizzle of row r0. */
    const uint32_t dst = tile + swz<D>(r0, ch);
    if (row0 + ROWS <= N) {  // every tile but the last one of a ragged sequence
#pragma unroll
        for (int i = 0; i < ROWS / STEP; ++i) cp_async_16(dst + i * STEP * D * 2, src + i * STEP * D, true);
    } else {
#pragma unroll
        for (int i = 0; i < ROWS / STEP; ++i) {
            const bool valid = row0 + r0 + i * STEP < N;
            cp_async_16(dst + i * STEP * D * 2, valid ? src + i * STEP * D : g, valid);  // g: any valid address
        }
    }
    // TODO(2) end
}
// [end load-async]

/* The compile-time shape of one kernel instantiation, handed to every phase
 * (the role of FlashAttention-2's Kernel_traits). Warp w owns MT m-tiles of
 * 16 query rows: rows (w MT + mt) * 16 .. + 15 of the block's Br, mt < MT. */
template <typename T_, int D_, int BR_, int BC_, int WARPS_, int STAGES_, bool QREG_>
struct Traits {
    using T = T_;
    static constexpr int D = D_, BR = BR_, BC = BC_, WARPS = WARPS_, STAGES = STAGES_;
    static constexpr bool QREG = QREG_;
    static constexpr int NT = WARPS * 32;         // threads per block
    static constexpr int MT = BR / (16 * WARPS);  // m-tiles per warp: 1 or 2
    static constexpr int CH = D / 8;              // 16-byte chunks per row
    static constexpr uint32_t SLOT = BC * D * 2;  // bytes of one K or V slot
    /* Q_i's A fragments, kept in registers for the whole loop when QREG (else unused) */
    using QFrag = uint32_t[QREG ? MT : 1][QREG ? D / 16 : 1][4];
};

/* The lane-dependent parts of the ldmatrix addresses (lesson 07's tables):
 * the tile row and the chunk of the pair (2kk, 2kk + 1) a lane points at,
 * for Q_i (A fragments; q_row includes the warp's first row), K_j (B, plain)
 * and V_j (B, .trans). */
struct LaneAddr {
    int q_row, q_chunk, k_row, k_chunk, v_row, v_chunk;
};
__device__ __forceinline__ LaneAddr lane_addr(int warp, int lane, int MT) {
    return {warp * MT * 16 + (lane & 7) + ((lane >> 3) & 1) * 8, lane >> 4,
            (lane & 7) + ((lane >> 4) << 3), (lane >> 3) & 1,
            (lane & 7) + (((lane >> 3) & 1) << 3), lane >> 4};
}

// [region schedule]
/* Phase "schedule", called first: which query tile (.x) and which
 * b * H + h (.y) block bid computes, of Tr query tiles and BH heads. The
 * GPU starts blocks roughly in blockIdx order. Non-causal: the query tiles
 * of one head are neighbours, so the blocks running at the same time read
 * the same K, V and find them in L2. Causal: tile i costs i + 1 K/V tiles,
 * so the last tile of every head goes first, then the one before...: the
 * longest work starts first and the shortest fills the end of the grid,
 * where a long tile would run on alone. */
__device__ __forceinline__ void block_schedule(int bid, int Tr, int BH, int causal, int &q_tile, int &bh) {
    // TODO(6) begin
    //| // TODO(6): q_tile (0..Tr-1) and bh (0..BH-1) of block bid, in the two orders the comment
    //| //   above describes (README.md, "Which blocks start first"). As shipped: every block
    //| //   computes tile 0 of head 0.
    //| (void)bid; (void)Tr; (void)BH; (void)causal;
    //| q_tile = 0;
    //| bh = 0;
    const bool lpt = causal;  // longest (causal) tiles first
    q_tile = lpt ? Tr - 1 - bid / BH : bid % Tr;
    bh = lpt ? bid % BH : bid / Tr;
    // TODO(6) end
}
// [end schedule]

// [region prologue]
/* Phase "prologue", all NT threads, once: start the copies of Q_i (Br rows
 * from q0) and of the first STAGES steps' tiles, then wait for Q_i alone.
 * Commit groups, oldest first:
 *     Q_i | K(0) | V(0) | K(1) | ... | V(S-2) | K(S-1)
 * where X(s) is the tile of step s (key tile n_tiles - 1 - s) in slot s. An
 * empty group is still committed when a step does not exist, so that every
 * wait below counts the same number of groups. Ends with wait_group 2S-1 and
 * __syncthreads: Q_i is visible to every warp, the K/V copies stay in flight. */
template <class C>
__device__ __forceinline__ void prologue(uint32_t aQ, uint32_t aK, uint32_t aV, const typename C::T *Q,
                                         const typename C::T *K, const typename C::T *V, int q0, int n_tiles,
                                         int N, int tid) {
    // TODO(3) begin
    //| // TODO(3): start the copies of the groups above, one commit per group (empty ones
    //| //   included), then wait until only the K/V groups may still be in flight (how many are
    //| //   there?) and meet the other threads (README.md, "STAGES slots").
    //| (void)aQ; (void)aK; (void)aV; (void)Q; (void)K; (void)V; (void)q0; (void)n_tiles; (void)N; (void)tid;
    using T = typename C::T;
    load_tile_async<T, C::D, C::BR, C::NT>(aQ, Q, q0, N, tid);
    cp_async_commit();
#pragma unroll
    for (int s = 0; s < C::STAGES; ++s) {
        if (s < n_tiles)
            load_tile_async<T, C::D, C::BC, C::NT>(aK + s * C::SLOT, K, (n_tiles - 1 - s) * C::BC, N, tid);
        cp_async_commit();
        if (s < C::STAGES - 1) {
            if (s < n_tiles)
                load_tile_async<T, C::D, C::BC, C::NT>(aV + s * C::SLOT, V, (n_tiles - 1 - s) * C::BC, N, tid);
            cp_async_commit();
        }
    }
    cp_async_wait<2 * C::STAGES - 1>();  // Q_i has landed, the K/V copies stay in flight
    __syncthreads();
    // TODO(3) end
}
// [end prologue]

/* Q_i as A fragments (lesson 07's ldmatrix addresses), once after the
 * prologue, when QREG: qf[mt][kk] is m-tile mt, dims 16 kk .. 16 kk + 15. */
template <class C>
__device__ __forceinline__ void load_q_fragments(typename C::QFrag &qf, uint32_t aQ, const LaneAddr &la) {
#pragma unroll
    for (int mt = 0; mt < C::MT; ++mt)
#pragma unroll
        for (int kk = 0; kk < C::D / 16; ++kk)
            ldmatrix_x4(qf[mt][kk], aQ + swz<C::D>(la.q_row + mt * 16, 2 * kk + la.q_chunk));
}

// [region refill]
/* The K and V pipeline steps, all NT threads, twice per step of the loop.
 * wait_group 2(S-1) retires this thread's copies of the tile the step needs
 * now (K(it) before S, V(it) before P V_j): the groups younger than it are
 * the 2(S-1) tiles of the next steps. The __syncthreads after it makes every
 * thread's copies visible, and proves that every warp is done with the slot
 * the previous step read: only now may it take the tile of step nx, into
 * slot nx % S of `slots` (the K or the V ring). Past the last step nothing
 * is copied, but the group is committed all the same. */
template <class C>
__device__ __forceinline__ void wait_then_refill(uint32_t slots, const typename C::T *X, int nx, int n_tiles, int N,
                                                 int tid) {
    // TODO(4) begin
    //| // TODO(4): the wait (how many groups younger than the one this step needs?), the barrier,
    //| //   then the copy of step nx's tile into its slot if that step exists, and the commit,
    //| //   which is always made (README.md, "STAGES slots").
    //| (void)slots; (void)X; (void)nx; (void)n_tiles; (void)N; (void)tid;
    cp_async_wait<2 * (C::STAGES - 1)>();
    __syncthreads();
    if (nx < n_tiles)
        load_tile_async<typename C::T, C::D, C::BC, C::NT>(slots + (nx % C::STAGES) * C::SLOT, X,
                                                           (n_tiles - 1 - nx) * C::BC, N, tid);
    cp_async_commit();
    // TODO(4) end
}
// [end refill]

// [region s-mma]
/* Phase "S = Q_i K_j^T", one warp, after the K pipeline step: s[mt][nb] is
 * the C fragment of m-tile mt and keys 8 nb .. 8 nb + 7 of the K slot at sK.
 * Q_i's A fragments come from qf (QREG) or are re-read from the Q tile at aQ;
 * each B fragment of K_j feeds all MT m-tiles. */
template <class C>
__device__ __forceinline__ void s_mma(float (&s)[C::MT][C::BC / 8][4], const typename C::QFrag &qf, uint32_t aQ,
                                      uint32_t sK, const LaneAddr &la) {
#pragma unroll
    for (int mt = 0; mt < C::MT; ++mt)
#pragma unroll
        for (int nb = 0; nb < C::BC / 8; ++nb) s[mt][nb][0] = s[mt][nb][1] = s[mt][nb][2] = s[mt][nb][3] = 0.f;
#pragma unroll
    for (int kk = 0; kk < C::D / 16; ++kk) {
        uint32_t qa[C::MT][4];  // this k-slice of Q_i: from registers, or re-read
#pragma unroll
        for (int mt = 0; mt < C::MT; ++mt) {
            if constexpr (C::QREG) {
#pragma unroll
                for (int x = 0; x < 4; ++x) qa[mt][x] = qf[mt][kk][x];
            } else {
                ldmatrix_x4(qa[mt], aQ + swz<C::D>(la.q_row + mt * 16, 2 * kk + la.q_chunk));
            }
        }
#pragma unroll
        for (int np = 0; np < C::BC / 16; ++np) {
            uint32_t b[4];
            ldmatrix_x4(b, sK + swz<C::D>(np * 16 + la.k_row, 2 * kk + la.k_chunk));
#pragma unroll
            for (int mt = 0; mt < C::MT; ++mt) {
                mma_16816<typename C::T>(s[mt][2 * np], qa[mt], b[0], b[1]);
                mma_16816<typename C::T>(s[mt][2 * np + 1], qa[mt], b[2], b[3]);
            }
        }
    }
}
// [end s-mma]

// [region mask]
/* Phase "mask", one warp, only on a tile that crosses the diagonal or the end
 * of the sequence (with the reversed order, the first steps): scores of keys
 * >= N, and causal scores of keys after their query, become -inf (ex2 makes
 * them 0). s[mt][nb][e] is query q0 + (warp MT + mt) 16 + g + 8 (e / 2), key
 * k0 + 8 nb + 2t + e % 2. */
template <class C>
__device__ __forceinline__ void apply_mask(float (&s)[C::MT][C::BC / 8][4], int q0, int k0, int N, int causal, int warp,
                                           int lane) {
    const int g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int mt = 0; mt < C::MT; ++mt)
#pragma unroll
        for (int nb = 0; nb < C::BC / 8; ++nb)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const int col = k0 + nb * 8 + 2 * t + (e & 1);
                const int row = q0 + (warp * C::MT + mt) * 16 + g + (e >> 1) * 8;
                if (col >= N || (causal && col > row)) s[mt][nb][e] = -INFINITY;
            }
}
// [end mask]

// [region softmax]
/* Phase "online softmax", first half, one warp, after the mask and before the
 * V pipeline step: the new row maxima (this thread's Bc/4 scores of the row,
 * then its quad: 2 xor-shuffles), then O and l rescaled by
 * alpha = exp2(m_old * scale_log2 - base), base = m_new * scale_log2 the
 * offset of the exponents (returned for pv_mma). With the diagonal tile
 * first, a row can be fully masked in the first step(s): its max stays -inf,
 * and the offset 0 keeps exp2(-inf - offset) = 0 instead of NaN. */
template <class C>
__device__ __forceinline__ void softmax_rescale(const float (&s)[C::MT][C::BC / 8][4], float (&o)[C::MT][C::D / 8][4],
                                                float (&m)[C::MT][2], float (&l)[C::MT][2], float (&base)[C::MT][2],
                                                float scale_log2) {
#pragma unroll
    for (int mt = 0; mt < C::MT; ++mt)
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            float mx = m[mt][r];
#pragma unroll
            for (int nb = 0; nb < C::BC / 8; ++nb) mx = fmaxf(mx, fmaxf(s[mt][nb][2 * r], s[mt][nb][2 * r + 1]));
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
            base[mt][r] = (mx == -INFINITY) ? 0.f : mx * scale_log2;
            const float alpha = ex2(m[mt][r] * scale_log2 - base[mt][r]);
            m[mt][r] = mx;
            l[mt][r] *= alpha;
#pragma unroll
            for (int nb = 0; nb < C::D / 8; ++nb) {
                o[mt][nb][2 * r] *= alpha;
                o[mt][nb][2 * r + 1] *= alpha;
            }
        }
}
// [end softmax]

// [region pv]
/* Phase "P V", one warp, after the V pipeline step: the second half of the
 * softmax fused with O += P V_j (V slot at sV), 16 keys (one k-slice of the
 * mma) at a time. P = exp2(S scale_log2 - base), one FFMA and one ex2 per
 * element, summed into l and packed into an A fragment (lesson 07: P never
 * leaves the registers) that goes straight into the mma with V_j's rows of
 * those keys. Written this way the ex2 of one slice and the mma of the
 * previous one are neighbours that the compiler interleaves, and only one
 * slice of P is alive at a time; exponentiating the whole tile first leaves
 * the tensor cores idle meanwhile. */
template <class C>
__device__ __forceinline__ void pv_mma(const float (&s)[C::MT][C::BC / 8][4], const float (&base)[C::MT][2],
                                       float (&o)[C::MT][C::D / 8][4], float (&l)[C::MT][2], uint32_t sV,
                                       const LaneAddr &la, float scale_log2) {
    using T = typename C::T;
#pragma unroll
    for (int kk = 0; kk < C::BC / 16; ++kk) {
        uint32_t pf[C::MT][4];
#pragma unroll
        for (int mt = 0; mt < C::MT; ++mt) {
            float p[2][4];  // S accumulators 2kk, 2kk + 1: keys 16kk .. 16kk + 15
#pragma unroll
            for (int h = 0; h < 2; ++h)
#pragma unroll
                for (int e = 0; e < 4; ++e) p[h][e] = ex2(fmaf(s[mt][2 * kk + h][e], scale_log2, -base[mt][e >> 1]));
            l[mt][0] += (p[0][0] + p[0][1]) + (p[1][0] + p[1][1]);
            l[mt][1] += (p[0][2] + p[0][3]) + (p[1][2] + p[1][3]);
            pf[mt][0] = pack2<T>(p[0][0], p[0][1]);
            pf[mt][1] = pack2<T>(p[0][2], p[0][3]);
            pf[mt][2] = pack2<T>(p[1][0], p[1][1]);
            pf[mt][3] = pack2<T>(p[1][2], p[1][3]);
        }
        /* each V fragment feeds all MT m-tiles */
#pragma unroll
        for (int dp = 0; dp < C::D / 16; ++dp) {
            uint32_t b[4];
            ldmatrix_x4_trans(b, sV + swz<C::D>(kk * 16 + la.v_row, 2 * dp + la.v_chunk));
#pragma unroll
            for (int mt = 0; mt < C::MT; ++mt) {
                mma_16816<T>(o[mt][2 * dp], pf[mt], b[0], b[1]);
                mma_16816<T>(o[mt][2 * dp + 1], pf[mt], b[2], b[3]);
            }
        }
    }
}
// [end pv]

// [region epilogue]
/* Phase "epilogue", one warp, after the loop (lesson 07): finish l over the
 * quad, write O / l into the warp's own rows of the Q tile at sQ and L
 * (natural log) to global memory, then O as whole 16-byte chunks of rows.
 * No block barrier: the warp's rows of the Q tile are read by no other warp,
 * and only empty cp.async groups can still be pending (the Q tile is never a
 * copy target after the prologue). */
template <class C>
__device__ __forceinline__ void epilogue(const float (&o)[C::MT][C::D / 8][4], const float (&m)[C::MT][2],
                                         const float (&l)[C::MT][2], unsigned char *sQ, typename C::T *O, float *L,
                                         int q0, int N, float scale_log2, int warp, int lane) {
    using T = typename C::T;
    constexpr int D = C::D, MT = C::MT, CH = C::CH;
    const int g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            float lr = l[mt][r];
            lr += __shfl_xor_sync(0xffffffffu, lr, 1);
            lr += __shfl_xor_sync(0xffffffffu, lr, 2);
            const float inv = lr > 0.f ? 1.f / lr : 0.f;
            const int srow = (warp * MT + mt) * 16 + g + r * 8;
#pragma unroll
            for (int nb = 0; nb < D / 8; ++nb)
                *reinterpret_cast<uint32_t *>(sQ + swz<D>(srow, nb) + 4 * t) =
                    pack2<T>(o[mt][nb][2 * r] * inv, o[mt][nb][2 * r + 1] * inv);
            if (t == 0 && q0 + srow < N)
                L[q0 + srow] = lr > 0.f ? (m[mt][r] * scale_log2 + log2f(lr)) * 0.69314718055994531f : -INFINITY;
        }
    __syncwarp();
    /* lane stores chunk lane % CH of rows lane / CH, + 32 / CH, ... of the
     * warp's MT * 16 rows (a constant trip count, as in load_tile_async) */
#pragma unroll
    for (int i = 0; i < MT * 16 * CH / 32; ++i) {
        const int r = warp * MT * 16 + lane / CH + i * (32 / CH), ch = lane % CH;
        if (q0 + r < N)
            *reinterpret_cast<uint4 *>(O + (size_t)(q0 + r) * D + ch * 8) =
                *reinterpret_cast<const uint4 *>(sQ + swz<D>(r, ch));
    }
}
// [end epilogue]

// [region kernel]
/* One block computes O and L for Br query rows of one (batch, head).
 * grid = Tr * B * H blocks in one dimension (see block_schedule), block =
 * 32 * WARPS threads; warp w owns MT = Br / (16 WARPS) m-tiles (1 or 2).
 * Dynamic shared memory: Q_i [Br][D], then STAGES K slots and STAGES V slots
 * [Bc][D], all swizzled: (Br + 2 STAGES Bc) D 2 bytes.
 * QREG: Q_i's A fragments live in registers for the whole loop (lesson 07);
 * without it they are re-read from the Q tile (ldmatrix) at every step,
 * which frees D/4 registers per m-tile: what lets a warp own 32 rows at
 * d = 128 without spilling (FlashAttention-2's own kernels do this).
 * scale_log2 = scale * log2(e) (exponentials as ex2, m kept unscaled). */
template <typename T, int D, int BR, int BC, int WARPS, int STAGES, bool QREG>
__global__ void __launch_bounds__(WARPS * 32)
fa2_pipeline_kernel(const T *__restrict__ Q, const T *__restrict__ K, const T *__restrict__ V,
                    T *__restrict__ O, float *__restrict__ L, int N, float scale_log2, int causal) {
    static_assert(BR == 16 * WARPS || BR == 32 * WARPS, "Br must be 16 or 32 rows per warp");
    static_assert(BC % 16 == 0 && D % 16 == 0 && STAGES >= 1, "bad tile shape");
#if FA_SM80
    using C = Traits<T, D, BR, BC, WARPS, STAGES, QREG>;
    extern __shared__ __align__(128) unsigned char fa_smem[];
    unsigned char *sQ = fa_smem;
    const uint32_t aQ = smem_u32(sQ), aK = aQ + BR * D * 2, aV = aK + STAGES * C::SLOT;
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;

    const int Tr = (N + BR - 1) / BR;
    int q_tile, bh;
    block_schedule((int)blockIdx.x, Tr, (int)gridDim.x / Tr, causal, q_tile, bh);
    const int q0 = q_tile * BR;
    const int kv_end = causal ? min(N, q0 + BR) : N;  // causal: skip tiles above the diagonal
    const int n_tiles = (kv_end + BC - 1) / BC;
    const size_t head = (size_t)bh * N;
    Q += head * D; K += head * D; V += head * D; O += head * D; L += head;

    prologue<C>(aQ, aK, aV, Q, K, V, q0, n_tiles, N, tid);
    const LaneAddr la = lane_addr(warp, lane, C::MT);
    typename C::QFrag qf;
    if constexpr (QREG) load_q_fragments<C>(qf, aQ, la);
    /* What a thread accumulates for its MT m-tiles, in lesson 07's C-fragment
     * layout (g = lane / 4, t = lane % 4): o[mt][nb] = O rows g, g + 8 x dims
     * 8 nb + 2t, +1, not yet divided by l; m = the running max of the raw
     * scores q.k of rows g, g + 8; l = their running sum over this thread's
     * columns only (the quad adds its four in the epilogue). */
    float o[C::MT][D / 8][4], m[C::MT][2], l[C::MT][2];
#pragma unroll
    for (int mt = 0; mt < C::MT; ++mt) {
#pragma unroll
        for (int nb = 0; nb < D / 8; ++nb) o[mt][nb][0] = o[mt][nb][1] = o[mt][nb][2] = o[mt][nb][3] = 0.f;
        m[mt][0] = m[mt][1] = -INFINITY;
        l[mt][0] = l[mt][1] = 0.f;
    }

    /* Step it works on K/V tile j = n_tiles - 1 - it, in slot it % STAGES:
     * from the diagonal (or the ragged end of the sequence) down to tile 0,
     * so every tile that needs a mask comes first. */
    for (int it = 0; it < n_tiles; ++it) {
        const int k0 = (n_tiles - 1 - it) * BC;  // first key of K_j, V_j
        const uint32_t sK = aK + (it % STAGES) * C::SLOT, sV = aV + (it % STAGES) * C::SLOT;
        // TODO(5) begin
        //| // TODO(5): the step whose V this refill starts (as shipped: n_tiles, a step that does
        //| //   not exist, so nothing is copied).
        //| wait_then_refill<C>(aV, V, n_tiles, n_tiles, N, tid);  // K(it) landed; V(?) starts
        wait_then_refill<C>(aV, V, it + STAGES - 1, n_tiles, N, tid);  // K(it) landed; V(it+S-1) starts
        // TODO(5) end
        float s[C::MT][BC / 8][4];
        s_mma<C>(s, qf, aQ, sK, la);
        if (k0 + BC > N || (causal && k0 + BC - 1 > q0)) apply_mask<C>(s, q0, k0, N, causal, warp, lane);
        float base[C::MT][2];
        softmax_rescale<C>(s, o, m, l, base, scale_log2);
        /* The V step sits between the row maxima and the exponentials, not
         * right after S as in FlashAttention-2: so the exponentials share one
         * stretch of code with P V_j, and the step fits in 255 registers at
         * d = 128 (the other way, it spills). */
        // TODO(5) begin
        //| // TODO(5): the step whose K this refill starts.
        //| wait_then_refill<C>(aK, K, n_tiles, n_tiles, N, tid);  // V(it) landed; K(?) starts
        wait_then_refill<C>(aK, K, it + STAGES, n_tiles, N, tid);  // V(it) landed; K(it+S) starts
        // TODO(5) end
        pv_mma<C>(s, base, o, l, sV, la, scale_log2);
    }
    epilogue<C>(o, m, l, sQ, O, L, q0, N, scale_log2, warp, lane);
#endif
}
// [end kernel]

// [region host]
template <typename T, int D, int BR, int BC, int WARPS, int STAGES, int QREG>
static int launch(const attn_args *a) {
    constexpr int smem = (BR + 2 * STAGES * BC) * D * 2;
    auto kernel = fa2_pipeline_kernel<T, D, BR, BC, WARPS, STAGES, QREG != 0>;
    static int ready = 0;  // once per instantiation: allow > 48 KiB of shared memory
    if (!ready) {
        int dev = 0, optin = 0;
        cudaGetDevice(&dev);
        cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev);
        if (smem > optin) return ATTN_UNSUPPORTED;
        if (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem) != cudaSuccess)
            return ATTN_UNSUPPORTED;
        /* Ask for the largest shared-memory share of the SM's L1 storage:
         * cp.async.cg does not use L1, shared memory decides blocks per SM. */
        cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout, cudaSharedmemCarveoutMaxShared);
        ready = 1;
    }
    const long long blocks = (long long)((a->N + BR - 1) / BR) * a->B * a->H;
    if (blocks > 0x7fffffffLL) return ATTN_UNSUPPORTED;
    const dim3 grid((unsigned)blocks);
    const float scale_log2 = a->scale * 1.4426950408889634f;
    kernel<<<grid, WARPS * 32, smem, (cudaStream_t)a->stream>>>((const T *)a->Q, (const T *)a->K, (const T *)a->V,
                                                                (T *)a->O, a->L, a->N, scale_log2, a->causal);
    return ATTN_OK;
}

/* Entry point (reference/include/attention.h): fp16/bf16, d = 64 or 128, scale > 0,
 * sm_80 or newer; anything else is ATTN_UNSUPPORTED. */
int attention_forward(const attn_args *a) {
    static int major = -1;
    if (major < 0) {
        int dev = 0;
        if (cudaGetDevice(&dev) != cudaSuccess ||
            cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess)
            major = 0;
    }
    //| if (STARTER_NOT_DONE) return ATTN_NOT_IMPLEMENTED;
    if (major < 8 || !(a->scale > 0.f)) return ATTN_UNSUPPORTED;
    if (a->N < 1 || a->B < 1 || a->H < 1) return ATTN_OK;  // nothing to compute
    const int fp16 = a->dtype == DTYPE_FP16, bf16 = a->dtype == DTYPE_BF16;
    if (a->d == 64 && fp16) return launch<__half, 64, FA_CFG_D64>(a);
    if (a->d == 64 && bf16) return launch<__nv_bfloat16, 64, FA_CFG_D64>(a);
    if (a->d == 128 && fp16) return launch<__half, 128, FA_CFG_D128>(a);
    if (a->d == 128 && bf16) return launch<__nv_bfloat16, 128, FA_CFG_D128>(a);
    return ATTN_UNSUPPORTED;
}
// [end host]

/* 08-async-pipeline: lesson 07's tensor-core FlashAttention-2 forward pass,
 * fed by a cp.async pipeline and tuned by measurement.
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
 *   - fewer instructions per step: with two warps per scheduler the kernel
 *     is latency-bound and its time follows its instruction count (Nsight
 *     Compute), so the tile copies are unrolled with constant offsets, and
 *     the exponentials of P are computed 16 keys at a time right before
 *     the mma that consumes them (one stretch of code the compiler can
 *     interleave).
 *
 * Layouts: Q, K, V, O are [B, H, N, d] row-major (reference/include/attention.h);
 * L is [B, H, N] fp32, natural-log logsumexp of the scaled scores.
 * Preconditions: dtype fp16 or bf16, d in {64, 128}, scale > 0, an sm_80+ GPU.
 */
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <stdint.h>
#include <math.h>
#include "attention.h"

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
/* Experiment: -DFA_CAUSAL_LPT=0 gives causal attention the non-causal block order. */
#ifndef FA_CAUSAL_LPT
#define FA_CAUSAL_LPT 1
#endif
// [end config]

/* cp.async, bf16 mma.m16n8k16: sm_80. The portable build's sm_75 code gets
 * an empty kernel, which the host never launches (ATTN_UNSUPPORTED). */
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#define FA_SM80 0
#else
#define FA_SM80 1
#endif

// [region ptx]
/* ldmatrix .x4: lanes 8i..8i+7 give the addresses of the 8 rows of matrix i;
 * lane gets (row lane/4, cols 2*(lane%4), +1) of matrix i in r[i]. */
__device__ __forceinline__ void ldmatrix_x4(uint32_t r[4], uint32_t addr) {
#if FA_SM80
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
#endif
}
/* .trans: lane gets (rows 2*(lane%4), +1; col lane/4) of matrix i. */
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t r[4], uint32_t addr) {
#if FA_SM80
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
#endif
}
/* d += A (16x16, row) * B (16x8, col), fp32 accumulate. */
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
__device__ __forceinline__ float ex2(float x) {
    float y = 0.f;
#if FA_SM80
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
#endif
    return y;
}
__device__ __forceinline__ uint32_t smem_u32(const void *p) {
    return (uint32_t)__cvta_generic_to_shared(p);
}
// [end ptx]

// [region cp-async]
/* One 16-byte global -> shared copy that does not go through registers
 * (.cg: cache in L2 only; K and V are re-read by other blocks, not by this
 * SM's L1). With valid == false the source size is 0 and the 16 shared bytes
 * are filled with zeros: that is how rows past the end of the sequence become
 * zeros without a branch around the copy. */
__device__ __forceinline__ void cp_async_16(uint32_t dst, const void *src, bool valid) {
#if FA_SM80
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(valid ? 16 : 0));
#endif
}
/* Close the group of copies issued since the last commit. */
__device__ __forceinline__ void cp_async_commit() {
#if FA_SM80
    asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}
/* Wait until at most N of this thread's committed groups are still in flight
 * (groups complete in order). Other threads' copies need a __syncthreads. */
template <int N>
__device__ __forceinline__ void cp_async_wait() {
#if FA_SM80
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
#endif
}
// [end cp-async]

/* Two fp32 -> one register of two 16-bit values, `lo` in the low half (the
 * lower column index, as in every mma fragment register). */
template <typename T> __device__ __forceinline__ uint32_t pack2(float lo, float hi);
template <> __device__ __forceinline__ uint32_t pack2<__half>(float lo, float hi) {
    __half2 h = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<uint32_t *>(&h);
}
template <> __device__ __forceinline__ uint32_t pack2<__nv_bfloat16>(float lo, float hi) {
    __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t *>(&h);
}

/* Byte offset of 16-byte chunk `chunk` of row `row` in a swizzled tile of
 * D-element rows (lesson 07): chunk ^ (row % 8) makes every 8x8 ldmatrix
 * matrix, and every 8 consecutive 16-byte copies of a row, conflict-free. */
template <int D>
__device__ __forceinline__ uint32_t swz(int row, int chunk) {
    return (uint32_t)(row * (D * 2) + ((chunk ^ (row & 7)) << 4));
}

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
}
// [end load-async]

/* Fragment layouts (lesson 07), g = lane / 4, t = lane % 4:
 *   A 16x16: a[0] (g, 2t..2t+1)  a[1] (g+8, 2t..)  a[2] (g, 2t+8..)  a[3] (g+8, 2t+8..)
 *   B 16x8 : b0 (rows 2t, 2t+1; col g)   b1 (rows 2t+8, 2t+9; col g)
 *   C 16x8 : c[0], c[1] (g, 2t..2t+1)    c[2], c[3] (g+8, 2t..2t+1)          */

/* One block computes O and L for Br query rows of one (batch, head).
 * grid = Tr * B * H blocks in one dimension (see "schedule"), block = 32 *
 * WARPS threads. Warp w owns MT = Br / (16 WARPS) m-tiles (1 or 2): rows
 * (w MT + mt) * 16 .. + 15 for mt < MT.
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
    constexpr int NT = WARPS * 32, MT = BR / (16 * WARPS), CH = D / 8;
    constexpr uint32_t TILE = BC * D * 2;  // bytes of one K or V slot
    extern __shared__ __align__(128) unsigned char fa_smem[];
    unsigned char *sQ = fa_smem;
    const uint32_t aQ = smem_u32(sQ), aK = aQ + BR * D * 2, aV = aK + STAGES * TILE;

    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const int g = lane >> 2, t = lane & 3;
    // [region schedule]
    /* The GPU starts blocks roughly in blockIdx order. Non-causal: the query
     * tiles of one head are neighbours, so the blocks running at the same
     * time read the same K, V and find them in L2. Causal: tile i costs
     * i + 1 K/V tiles, so the last tile of every head goes first, then the
     * one before...: the longest work starts first and the shortest fills
     * the end of the grid, where a long tile would run on alone. */
    const int Tr = (N + BR - 1) / BR, BH = (int)gridDim.x / Tr, bid = (int)blockIdx.x;
    const bool lpt = causal && FA_CAUSAL_LPT;  // longest (causal) tiles first
    const int q_tile = lpt ? Tr - 1 - bid / BH : bid % Tr;
    const int bh = lpt ? bid % BH : bid / Tr;  // b * H + h
    const int q0 = q_tile * BR;
    const int kv_end = causal ? min(N, q0 + BR) : N;  // causal: skip tiles above the diagonal
    const int n_tiles = (kv_end + BC - 1) / BC;
    /* Step `it` of the loop works on K/V tile j = n_tiles - 1 - it: from the
     * diagonal (or the ragged end of the sequence) down to tile 0, so every
     * tile that needs a mask comes first and the rest run mask-free. */
    // [end schedule]
    const size_t head = (size_t)bh * N;
    Q += head * D; K += head * D; V += head * D; O += head * D; L += head;

    // [region prologue]
    /* Commit groups, oldest first: Q_i | K(0) | V(0) | K(1) | ... | V(S-2) | K(S-1)
     * where X(s) is the tile of step s. An empty group is still committed
     * when a step does not exist, so that every wait below counts the same
     * number of groups. */
    load_tile_async<T, D, BR, NT>(aQ, Q, q0, N, tid);
    cp_async_commit();
#pragma unroll
    for (int s = 0; s < STAGES; ++s) {
        if (s < n_tiles) load_tile_async<T, D, BC, NT>(aK + s * TILE, K, (n_tiles - 1 - s) * BC, N, tid);
        cp_async_commit();
        if (s < STAGES - 1) {
            if (s < n_tiles) load_tile_async<T, D, BC, NT>(aV + s * TILE, V, (n_tiles - 1 - s) * BC, N, tid);
            cp_async_commit();
        }
    }
    cp_async_wait<2 * STAGES - 1>();  // Q_i has landed, the K/V copies stay in flight
    __syncthreads();
    /* Q_i as A fragments (lesson 07's ldmatrix addresses), kept for the
     * whole loop when QREG. */
    const int q_row = warp * MT * 16 + (lane & 7) + ((lane >> 3) & 1) * 8, q_chunk = lane >> 4;
    uint32_t qf[QREG ? MT : 1][QREG ? D / 16 : 1][4];
    if constexpr (QREG) {
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
            for (int kk = 0; kk < D / 16; ++kk)
                ldmatrix_x4(qf[mt][kk], aQ + swz<D>(q_row + mt * 16, 2 * kk + q_chunk));
    }
    // [end prologue]

    float o[MT][D / 8][4];
    float m[MT][2], l[MT][2];  // raw running max, per-thread partial running sum
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
        for (int nb = 0; nb < D / 8; ++nb) o[mt][nb][0] = o[mt][nb][1] = o[mt][nb][2] = o[mt][nb][3] = 0.f;
        m[mt][0] = m[mt][1] = -INFINITY;
        l[mt][0] = l[mt][1] = 0.f;
    }
    const int k_row = (lane & 7) + ((lane >> 4) << 3), k_chunk = (lane >> 3) & 1;
    const int v_row = (lane & 7) + (((lane >> 3) & 1) << 3), v_chunk = lane >> 4;

    for (int it = 0; it < n_tiles; ++it) {
        const int k0 = (n_tiles - 1 - it) * BC;  // first key of K_j, V_j
        const uint32_t sK = aK + (it % STAGES) * TILE, sV = aV + (it % STAGES) * TILE;

        // [region pipeline-k]
        /* K(it) has landed (the groups younger than it: V(it), K(it+1), ...,
         * V(it+S-2), K(it+S-1), that is 2(S-1)); after the barrier every
         * thread's copies are visible and every warp has finished P V of the
         * previous step, so its V slot can be refilled with V(it+S-1). */
        cp_async_wait<2 * (STAGES - 1)>();
        __syncthreads();
        {
            const int nx = it + STAGES - 1;
            if (nx < n_tiles)
                load_tile_async<T, D, BC, NT>(aV + (nx % STAGES) * TILE, V, (n_tiles - 1 - nx) * BC, N, tid);
            cp_async_commit();
        }
        // [end pipeline-k]

        // [region s-mma]
        /* S = Q_i K_j^T (lesson 07); each K fragment feeds all MT m-tiles. */
        float s[MT][BC / 8][4];
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
            for (int nb = 0; nb < BC / 8; ++nb) s[mt][nb][0] = s[mt][nb][1] = s[mt][nb][2] = s[mt][nb][3] = 0.f;
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk) {
            uint32_t qa[MT][4];  // this k-slice of Q_i: from registers, or re-read
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) {
                if constexpr (QREG) {
#pragma unroll
                    for (int x = 0; x < 4; ++x) qa[mt][x] = qf[mt][kk][x];
                } else {
                    ldmatrix_x4(qa[mt], aQ + swz<D>(q_row + mt * 16, 2 * kk + q_chunk));
                }
            }
#pragma unroll
            for (int np = 0; np < BC / 16; ++np) {
                uint32_t b[4];
                ldmatrix_x4(b, sK + swz<D>(np * 16 + k_row, 2 * kk + k_chunk));
#pragma unroll
                for (int mt = 0; mt < MT; ++mt) {
                    mma_16816<T>(s[mt][2 * np], qa[mt], b[0], b[1]);
                    mma_16816<T>(s[mt][2 * np + 1], qa[mt], b[2], b[3]);
                }
            }
        }
        // [end s-mma]

        /* Mask: only tiles crossing the diagonal or the end of the sequence;
         * with the reversed order these are the first steps. */
        if (k0 + BC > N || (causal && k0 + BC - 1 > q0)) {
#pragma unroll
            for (int mt = 0; mt < MT; ++mt)
#pragma unroll
                for (int nb = 0; nb < BC / 8; ++nb)
#pragma unroll
                    for (int e = 0; e < 4; ++e) {
                        const int col = k0 + nb * 8 + 2 * t + (e & 1);
                        const int row = q0 + (warp * MT + mt) * 16 + g + (e >> 1) * 8;
                        if (col >= N || (causal && col > row)) s[mt][nb][e] = -INFINITY;
                    }
        }

        // [region softmax]
        /* Online softmax (lesson 07), first half: the new row maxima, then O
         * and l rescaled by alpha = exp2((m_old - m_new) scale_log2). With the
         * diagonal tile first, a row can be fully masked in the first step(s):
         * its max stays -inf, and the offset 0 keeps exp2(-inf - offset) = 0
         * instead of NaN. l stays a per-thread partial sum (this thread's
         * columns); the 4 threads of a row add theirs once, in the epilogue. */
        float base[MT][2];  // m_new * scale_log2, the offset of the exponents
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
            for (int r = 0; r < 2; ++r) {
                float mx = m[mt][r];
#pragma unroll
                for (int nb = 0; nb < BC / 8; ++nb) mx = fmaxf(mx, fmaxf(s[mt][nb][2 * r], s[mt][nb][2 * r + 1]));
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
                base[mt][r] = (mx == -INFINITY) ? 0.f : mx * scale_log2;
                const float alpha = ex2(m[mt][r] * scale_log2 - base[mt][r]);
                m[mt][r] = mx;
                l[mt][r] *= alpha;
#pragma unroll
                for (int nb = 0; nb < D / 8; ++nb) {
                    o[mt][nb][2 * r] *= alpha;
                    o[mt][nb][2 * r + 1] *= alpha;
                }
            }
        // [end softmax]

        // [region pipeline-v]
        /* V(it) has landed (younger groups: K(it+1), V(it+1), ..., K(it+S-1),
         * V(it+S-1)); after the barrier no warp still reads K(it), so its slot
         * takes K(it+S), which then flies during P V_j and the next S. The
         * barrier sits between the row maxima and the exponentials, so that
         * the exponentials share one stretch of code with P V_j (below).
         * FlashAttention-2's kernels wait right after S; with the maxima and
         * the rescaling of O before the barrier instead, the compiler fits
         * the step in 255 registers at d = 128 (the other way, it spills). */
        cp_async_wait<2 * (STAGES - 1)>();
        __syncthreads();
        {
            const int nx = it + STAGES;
            if (nx < n_tiles)
                load_tile_async<T, D, BC, NT>(aK + (nx % STAGES) * TILE, K, (n_tiles - 1 - nx) * BC, N, tid);
            cp_async_commit();
        }
        // [end pipeline-v]

        // [region pv]
        /* Second half, fused with O += P V_j, 16 keys (one k-slice of the mma)
         * at a time: P = exp2(S scale_log2 - base), one FFMA and one ex2 per
         * element, packed into an A fragment (lesson 07: P never leaves the
         * registers) that goes straight into the mma with V_j's rows of those
         * keys. Written this way the ex2 of one slice and the mma of the
         * previous one are neighbours that the compiler interleaves, and only
         * one slice of P is alive at a time; exponentiating the whole tile
         * first leaves the tensor cores idle meanwhile. */
#pragma unroll
        for (int kk = 0; kk < BC / 16; ++kk) {
            uint32_t pf[MT][4];
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) {
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
            for (int dp = 0; dp < D / 16; ++dp) {
                uint32_t b[4];
                ldmatrix_x4_trans(b, sV + swz<D>(kk * 16 + v_row, 2 * dp + v_chunk));
#pragma unroll
                for (int mt = 0; mt < MT; ++mt) {
                    mma_16816<T>(o[mt][2 * dp], pf[mt], b[0], b[1]);
                    mma_16816<T>(o[mt][2 * dp + 1], pf[mt], b[2], b[3]);
                }
            }
        }
        // [end pv]
    }

    /* Epilogue (lesson 07): finish l, normalise, write L, then O through the
     * warp's own rows of the Q tile with 16-byte stores. Only empty cp.async
     * groups can still be pending here; the Q tile is never a copy target
     * after the prologue. */
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
#endif
}

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

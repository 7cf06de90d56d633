/* Lesson 10: the backward pass of attention, fp32 on CUDA cores.
 * Build and grade: make lesson10 && ./lesson10      (the lesson text: README.md here)
 *
 * Source: FlashAttention-2 (Dao, 2023), Algorithm 2 (backward pass): D = rowsum(dO o O) first
 * (line 4), then an outer loop over key/value tiles K_j, V_j (line 6) whose block keeps dK_j and
 * dV_j on chip, and an inner loop over query tiles Q_i, dO_i (line 8) that recomputes
 * P_ij = exp(S_ij - L_i) from the logsumexp L the forward pass saved (lines 9-10), then
 *   dV_j += P_ij^T dO_i           (line 11)
 *   dP_ij = dO_i V_j^T            (line 12)
 *   dS_ij = P_ij o (dP_ij - D_i)  (line 13)
 *   dQ_i += dS_ij K_j             (line 14: added into global memory, here with atomics)
 *   dK_j += dS_ij^T Q_i           (line 15)
 * The scale enters through S = scale Q K^T; dS here already carries it (dQ = scale dS K).
 *
 * Two ways to sum dQ, chosen at build time (`make solution10-dq-pass` builds the other one):
 *   DQ_ATOMIC 1  each K/V block adds its dS_ij K_j into dQ_i with float atomics (red.add),
 *                in an order that changes from run to run: dQ is not bitwise reproducible,
 *                and LESSON_ATOMIC_ACCUMULATION tells the grader so;
 *   DQ_ATOMIC 0  a second kernel loops the other way (one block per query tile, over the key
 *                tiles), recomputes S, P, dP and dS, and keeps dQ_i in registers: no atomics,
 *                bitwise reproducible, 3 more N x N x d products' worth of work (S, dP again).
 *
 * Work split of one block: 256 threads as a 16 x 16 grid, ty = thread / 16, tx = thread % 16.
 *   S, dP, P, dS (Br x Bc = 32 x 64): thread holds rows ty + 16r (r < 2), keys tx + 16c (c < 4)
 *   dK_j, dV_j (Bc x d, in registers for the whole loop): key rows 4ty + r (r < 4), columns
 *     4tx + 64q .. +3 (q < d/64)
 *   dQ_i (Br x d): rows ty + 16r (r < 2), columns 4tx + 64q .. +3
 * so that every shared-memory read of the products is either a broadcast or 16 consecutive
 * float4 (conflict-free); the row pitches (d + 4 of Q, dO, K, V; Bc + 16 of the P and dS tiles)
 * keep their strided accesses conflict-free too (lesson 03 explains the padding).
 *
 * P is recomputed in base 2: exp2(S scale log2(e) - L log2(e)), as the forward lessons do.
 */
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>

#include "attention.h"

#ifndef DQ_ATOMIC
#define DQ_ATOMIC 1
#endif

const lesson_info LESSON = {
    10, "10-backward-fp32",
    DQ_ATOMIC ? "backward pass in fp32: P recomputed from L, K/V tiles outside, dQ summed with atomics"
              : "backward pass in fp32: P recomputed from L, K/V tiles outside, dQ in a separate pass",
    DTYPE_BIT(DTYPE_FP32), 1, {64, 128, 0}, DQ_ATOMIC ? LESSON_ATOMIC_ACCUMULATION : 0u, 0};

// [region config]
constexpr int THREADS = 256;  // a 16 x 16 grid of threads
constexpr int Br = 32;        // query rows per step of the inner loop
constexpr int Bc = 64;        // keys per block (the outer loop: one block per K_j, V_j)
constexpr int RT = Br / 16;   // rows of S per thread: 2
constexpr int CT = Bc / 16;   // keys of S per thread: 4
constexpr int KR = Bc / 16;   // key rows of dK_j, dV_j per thread: 4

template <int D>
struct Tiles {
    float Q[Br][D + 4], dO[Br][D + 4];   // query tile i
    float K[Bc][D + 4], V[Bc][D + 4];    // key tile j
    float P[Br][Bc + 16], dS[Br][Bc + 16];
    float L2[Br];                        // L of the query rows, times log2(e)
    float Dr[Br];                        // D of the query rows
};
// [end config]

constexpr float LOG2E = 1.4426950408889634f;

/* TODO(0): set to 0 when you have written TODO(1)..TODO(8); the grader then grades you. */
#define STARTER_NOT_DONE 1

/* The one dynamic shared-memory array of every kernel here, viewed as the tiles. */
template <int D>
__device__ __forceinline__ Tiles<D> &tiles() {
    extern __shared__ float4 smem_raw[];
    return *reinterpret_cast<Tiles<D> *>(smem_raw);
}

/* Copies rows [row0, row0 + ROWS) of one [N, D] row-major fp32 matrix into a shared tile with
 * row pitch D + 4, all THREADS threads, 16 bytes each, coalesced. Rows >= N become zeros: the
 * inputs are surrounded by NaN guards, and a zero row adds nothing to any product below. */
template <int D, int ROWS>
__device__ __forceinline__ void load_rows(float (*dst)[D + 4], const float *__restrict__ src, int row0, int N) {
    constexpr int VEC = D / 4;
    static_assert(ROWS * VEC % THREADS == 0, "tile must split evenly over the block");
#pragma unroll
    for (int it = 0; it < ROWS * VEC / THREADS; ++it) {
        const int v = it * THREADS + threadIdx.x, r = v / VEC, c = (v % VEC) * 4;
        float4 x = make_float4(0.f, 0.f, 0.f, 0.f);
        if (row0 + r < N) x = *reinterpret_cast<const float4 *>(src + (size_t)(row0 + r) * D + c);
        *reinterpret_cast<float4 *>(&dst[r][c]) = x;
    }
}

/* L (times log2 e) and D of the query rows q0 .. q0 + Br - 1; 0 for rows >= N (never read past
 * the arrays; those rows are masked below anyway). */
template <int D>
__device__ __forceinline__ void load_row_stats(Tiles<D> &t, const float *__restrict__ L, const float *__restrict__ Dv,
                                               int q0, int N) {
    if (threadIdx.x < Br) {
        const int row = q0 + threadIdx.x;
        /* TODO(2a): L of this query row in base-2 units, 0 for rows >= N (never read past the
         * array). README: "P from L". */
        (void)L;
        t.L2[threadIdx.x] = 0.f;
        t.Dr[threadIdx.x] = row < N ? Dv[row] : 0.f;
    }
}

__device__ __forceinline__ float4 fma4(float4 a, float4 b, float4 acc) {
    return make_float4(fmaf(a.x, b.x, acc.x), fmaf(a.y, b.y, acc.y), fmaf(a.z, b.z, acc.z), fmaf(a.w, b.w, acc.w));
}
__device__ __forceinline__ float sum4(float4 a) { return (a.x + a.y) + (a.z + a.w); }
__device__ __forceinline__ float comp(float4 a, int u) { return u == 0 ? a.x : u == 1 ? a.y : u == 2 ? a.z : a.w; }

/* Preprocessing (Algorithm 2, line 4): D_i = rowsum(dO_i o O_i) for every row of every head, one
 * warp per row; with DQ_ATOMIC also dQ_i = 0, the starting value the atomics add to.
 *   O, dO, dQ: [B*H*N, D] fp32; Dv: [B*H*N] fp32 (the lesson's workspace). rows = B*H*N.
 * Grid ceil(rows / 8), 256 threads. */
template <int D>
__global__ void __launch_bounds__(THREADS)
bwd_preprocess(const float *__restrict__ O, const float *__restrict__ dO, float *__restrict__ Dv,
               float *__restrict__ dQ, long long rows) {
    const long long row = (long long)blockIdx.x * (THREADS / 32) + threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    if (row >= rows) return;
    /* TODO(1): D_i = rowsum(dO_i o O_i) for this warp's row, from dO and O: the 32 lanes share
     * the D columns and combine their partial sums without shared memory; one lane writes
     * Dv[row]. README: "Why D exists", "One step of the inner loop". */
    (void)O; (void)dO;
    if (lane == 0) Dv[row] = 0.f;
    if (DQ_ATOMIC)
        for (int c = lane; c < D; c += 32) dQ[row * D + c] = 0.f;
}

/* Lines 9-13 for the tiles in t (query rows q0.., keys kb0..): S and dP in registers, then
 * P = exp2(S scale log2e - L log2e) and dS = scale P o (dP - D), written to t.P (when STORE_P)
 * and t.dS. Masked elements (a key >= N, a row >= N, or with causal a key after the row) get
 * P = dS = 0 when need_mask says the tile has any. Reads t.Q, t.dO, t.K, t.V, t.L2, t.Dr. */
template <int D, bool STORE_P>
__device__ __forceinline__ void p_and_ds(Tiles<D> &t, int q0, int kb0, int N, int causal, bool need_mask,
                                         float scale_log2, float scale) {
    const int ty = threadIdx.x / 16, tx = threadIdx.x % 16;
    float4 s4[RT][CT];  // four running sums per score: x30 logits need the extra bits (lesson 03)
    float dp[RT][CT];
#pragma unroll
    for (int r = 0; r < RT; ++r)
#pragma unroll
        for (int c = 0; c < CT; ++c) { s4[r][c] = make_float4(0.f, 0.f, 0.f, 0.f); dp[r][c] = 0.f; }
#pragma unroll 2
    for (int k = 0; k < D; k += 4) {
        float4 q[RT], g[RT];
#pragma unroll
        for (int r = 0; r < RT; ++r) {
            q[r] = *reinterpret_cast<const float4 *>(&t.Q[ty + 16 * r][k]);
            g[r] = *reinterpret_cast<const float4 *>(&t.dO[ty + 16 * r][k]);
        }
#pragma unroll
        for (int c = 0; c < CT; ++c) {
            const float4 kk = *reinterpret_cast<const float4 *>(&t.K[tx + 16 * c][k]);
            const float4 vv = *reinterpret_cast<const float4 *>(&t.V[tx + 16 * c][k]);
#pragma unroll
            for (int r = 0; r < RT; ++r) {
                s4[r][c] = fma4(q[r], kk, s4[r][c]);  // S = Q_i K_j^T
                /* TODO(3): dP = dO_i V_j^T: add the products of the 4 columns of dO's row, g[r],
                 * and the same 4 columns of V's row, vv, into dp[r][c]. README: "One step of the
                 * inner loop". */
                (void)g[r]; (void)vv;
            }
        }
    }
#pragma unroll
    for (int r = 0; r < RT; ++r)
#pragma unroll
        for (int c = 0; c < CT; ++c) {
            const int lr = ty + 16 * r, row = q0 + lr, key = kb0 + tx + 16 * c;
            /* TODO(2b): P_ij = exp(S_ij - L_i), in base 2, from this thread's unscaled score
             * sum4(s4[r][c]) and the row's t.L2[lr]. README: "P from L". */
            (void)scale_log2;
            const float e = 0.f * sum4(s4[r][c]);
            const bool masked = need_mask && (row >= N || key >= N || (causal && key > row));
            if (STORE_P) t.P[lr][tx + 16 * c] = masked ? 0.f : e;
            /* TODO(4): dS_ij = P_ij (dP_ij - D_i) times the softmax scale (so that dQ = dS K and
             * dK = dS^T Q need none), 0 where masked, into t.dS. D_i is t.Dr[lr].
             * README: "What the backward pass computes". */
            (void)dp[r][c]; (void)scale;
            t.dS[lr][tx + 16 * c] = 0.f;
        }
}

/* acc[r][..] += (dS K_j) for this thread's rows ty + 16r and columns 4tx + 64q.. (line 14). */
template <int D>
__device__ __forceinline__ void dq_from_ds(const Tiles<D> &t, float (&acc)[RT][D / 16]) {
    const int ty = threadIdx.x / 16, tx = threadIdx.x % 16;
    /* TODO(6): add this thread's piece of dS K_j (rows ty + 16r, columns 4tx + 64q .. +3) into
     * acc, from t.dS and t.K, summed over the tile's Bc keys; each loaded float4 used for every
     * multiply-add that needs it. README: "dQ: atomics, or a pass of its own". */
    (void)t; (void)acc; (void)ty; (void)tx;
}

/* Adds four floats into global memory atomically: one vector red.add on sm_90, four scalar ones
 * before it. */
__device__ __forceinline__ void atomic_add4(float *p, float a, float b, float c, float d) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    atomicAdd(reinterpret_cast<float4 *>(p), make_float4(a, b, c, d));
#else
    atomicAdd(p, a); atomicAdd(p + 1, b); atomicAdd(p + 2, c); atomicAdd(p + 3, d);
#endif
}

/* The main kernel, one block per (key tile j, head, batch): Algorithm 2, lines 6-17.
 *   Q, K, V, dO, dQ, dK, dV: [B, H, N, D] row-major fp32, 16-byte aligned; L, Dv: [B, H, N] fp32
 *   scale_log2 = scale * log2(e); causal: 1 to mask keys j > i.
 * Grid (Tc, H, B), Tc = ceil(N / Bc); THREADS threads; sizeof(Tiles<D>) bytes of dynamic shared
 * memory. Writes dK, dV rows kb0 .. kb0 + Bc - 1 (those < N); with DQ_ATOMIC adds into dQ (which
 * bwd_preprocess zeroed). Any N >= 1. */
template <int D>
__global__ void __launch_bounds__(THREADS)
bwd_kv_kernel(const float *__restrict__ Q, const float *__restrict__ K, const float *__restrict__ V,
              const float *__restrict__ dO, const float *__restrict__ L, const float *__restrict__ Dv,
              float *__restrict__ dQ, float *__restrict__ dK, float *__restrict__ dV, int N, float scale_log2,
              float scale, int causal) {
    Tiles<D> &t = tiles<D>();
    const int ty = threadIdx.x / 16, tx = threadIdx.x % 16;
    const int kb0 = blockIdx.x * Bc;
    const size_t head = (size_t)blockIdx.z * gridDim.y + blockIdx.y;  // b * H + h
    const size_t off = head * N * D;
    load_rows<D, Bc>(t.K, K + off, kb0, N);
    load_rows<D, Bc>(t.V, V + off, kb0, N);
    float dk[KR][D / 16], dv[KR][D / 16];  // key rows 4ty + r, columns 4tx + 64q + 0..3
#pragma unroll
    for (int r = 0; r < KR; ++r)
#pragma unroll
        for (int c = 0; c < D / 16; ++c) dk[r][c] = dv[r][c] = 0.f;

    // Causal: query i sees key j only when j <= i, so query tiles that end before this block's
    // first key, kb0, would add nothing: start at the tile holding row kb0.
    const int Tr = (N + Br - 1) / Br;
    /* TODO(8a): with causal masking, start at the query tile that holds this block's first key,
     * kb0; without it, at 0. README: "Causal". */
    const int i_start = 0;
    for (int i = i_start; i < Tr; ++i) {
        const int q0 = i * Br;
        __syncthreads();  // every thread is done with the previous Q_i, dO_i, P, dS
        load_rows<D, Br>(t.Q, Q + off, q0, N);
        load_rows<D, Br>(t.dO, dO + off, q0, N);
        load_row_stats(t, L + head * N, Dv + head * N, q0, N);
        __syncthreads();
        // A tile needs the element mask if it runs past N (keys or rows) or straddles the diagonal.
        const bool need_mask = q0 + Br > N || kb0 + Bc > N || (causal && kb0 + Bc - 1 > q0);
        p_and_ds<D, true>(t, q0, kb0, N, causal, need_mask, scale_log2, scale);
        __syncthreads();  // P and dS complete

        /* TODO(5): dV_j += P^T dO_i and dK_j += dS^T Q_i for this thread's key rows 4ty + r
         * (r < KR) and columns 4tx + 64q .. +3 (q < D/64), summed over the tile's Br query rows,
         * from t.P, t.dS, t.dO and t.Q; each loaded float4 used for every multiply-add that
         * needs it. README: "One step of the inner loop". */

#if DQ_ATOMIC
        // dQ_i += dS K_j, added into global memory: every K/V block of this head adds its share
        // to the same rows, in whatever order the blocks run.
        float acc[RT][D / 16];
#pragma unroll
        for (int r = 0; r < RT; ++r)
#pragma unroll
            for (int c = 0; c < D / 16; ++c) acc[r][c] = 0.f;
        dq_from_ds<D>(t, acc);
#pragma unroll
        for (int r = 0; r < RT; ++r) {
            const int row = q0 + ty + 16 * r;
            /* TODO(7): add this block's piece of dQ (acc) for rows < N into dQ, so that the
             * pieces of all key blocks count, whatever order they arrive in. README: "dQ:
             * atomics, or a pass of its own". */
            (void)row; (void)acc[r][0];
        }
#endif
    }

    // [region store-dk-dv]
#pragma unroll
    for (int r = 0; r < KR; ++r) {
        const int key = kb0 + 4 * ty + r;
        if (key < N)
#pragma unroll
            for (int q = 0; q < D / 64; ++q) {
                const size_t at = off + (size_t)key * D + 4 * tx + 64 * q;
                *reinterpret_cast<float4 *>(dK + at) = make_float4(dk[r][4 * q], dk[r][4 * q + 1], dk[r][4 * q + 2], dk[r][4 * q + 3]);
                *reinterpret_cast<float4 *>(dV + at) = make_float4(dv[r][4 * q], dv[r][4 * q + 1], dv[r][4 * q + 2], dv[r][4 * q + 3]);
            }
    }
    // [end store-dk-dv]
}

/* The separate dQ pass (DQ_ATOMIC 0), one block per (query tile i, head, batch): the loop of
 * Algorithm 2 turned around, K_j, V_j streamed past a resident Q_i, dO_i, recomputing S, P, dP,
 * dS (line 9-13) and keeping dQ_i in registers. Arguments as bwd_kv_kernel; grid (Tr, H, B), block
 * x takes query tile Tr - 1 - x (the longest first when causal). Writes dQ rows q0 .. q0 + Br - 1
 * (those < N). */
template <int D>
__global__ void __launch_bounds__(THREADS)
bwd_dq_kernel(const float *__restrict__ Q, const float *__restrict__ K, const float *__restrict__ V,
              const float *__restrict__ dO, const float *__restrict__ L, const float *__restrict__ Dv,
              float *__restrict__ dQ, int N, float scale_log2, float scale, int causal) {
    Tiles<D> &t = tiles<D>();
    const int ty = threadIdx.x / 16, tx = threadIdx.x % 16;
    const int q0 = (gridDim.x - 1 - blockIdx.x) * Br;
    const size_t head = (size_t)blockIdx.z * gridDim.y + blockIdx.y;
    const size_t off = head * N * D;
    load_rows<D, Br>(t.Q, Q + off, q0, N);
    load_rows<D, Br>(t.dO, dO + off, q0, N);
    load_row_stats(t, L + head * N, Dv + head * N, q0, N);
    float acc[RT][D / 16];
#pragma unroll
    for (int r = 0; r < RT; ++r)
#pragma unroll
        for (int c = 0; c < D / 16; ++c) acc[r][c] = 0.f;
    const int Tc = (N + Bc - 1) / Bc;
    /* TODO(8b): with causal masking, stop after the last key tile that holds a key the tile's
     * last row (q0 + Br - 1) may see, never more than Tc; without it, Tc. README: "Causal". */
    const int j_end = Tc;
    for (int j = 0; j < j_end; ++j) {
        const int kb0 = j * Bc;
        __syncthreads();  // done with the previous K_j, V_j and dS
        load_rows<D, Bc>(t.K, K + off, kb0, N);
        load_rows<D, Bc>(t.V, V + off, kb0, N);
        __syncthreads();
        const bool need_mask = q0 + Br > N || kb0 + Bc > N || (causal && kb0 + Bc - 1 > q0);
        p_and_ds<D, false>(t, q0, kb0, N, causal, need_mask, scale_log2, scale);
        __syncthreads();
        dq_from_ds<D>(t, acc);
    }
#pragma unroll
    for (int r = 0; r < RT; ++r) {
        const int row = q0 + ty + 16 * r;
        if (row < N)
#pragma unroll
            for (int q = 0; q < D / 64; ++q)
                *reinterpret_cast<float4 *>(dQ + off + (size_t)row * D + 4 * tx + 64 * q) =
                    make_float4(acc[r][4 * q], acc[r][4 * q + 1], acc[r][4 * q + 2], acc[r][4 * q + 3]);
    }
}

/* The workspace for D ([B, H, N] fp32), kept and grown across calls so that timed launches
 * do not allocate. Returns NULL (after printing the bytes) when it does not fit. */
static float *d_workspace(size_t rows) {
    static float *buf = nullptr;
    static size_t have = 0;
    if (rows <= have) return buf;
    cudaFree(buf);
    buf = nullptr;
    have = 0;
    if (cudaMalloc(&buf, rows * sizeof(float)) != cudaSuccess) {
        cudaGetLastError();  // an allocation failure is not sticky; clear it
        fprintf(stderr, "out of memory: lesson 10 needs %zu bytes for D\n", rows * sizeof(float));
        buf = nullptr;
        return nullptr;
    }
    have = rows;
    return buf;
}

template <int D>
static int launch(const attn_bwd_args *a) {
    const size_t smem = sizeof(Tiles<D>);
    int dev = 0, optin = 0;
    cudaGetDevice(&dev);
    cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev);
    if (smem > (size_t)optin) {
        fprintf(stderr, "lesson 10: d = %d needs %zu bytes of shared memory per block; this GPU allows %d\n", D,
                smem, optin);
        return ATTN_UNSUPPORTED;
    }
    const long long rows = (long long)a->B * a->H * a->N;
    float *Dv = d_workspace((size_t)rows);
    if (!Dv) return ATTN_OUT_OF_MEMORY;
    const cudaStream_t st = (cudaStream_t)a->stream;
    const float scale_log2 = a->scale * LOG2E;
    const float *Q = (const float *)a->Q, *K = (const float *)a->K, *V = (const float *)a->V;
    const float *O = (const float *)a->O, *dO = (const float *)a->dO;
    float *dQ = (float *)a->dQ, *dK = (float *)a->dK, *dV = (float *)a->dV;
    bwd_preprocess<D><<<(unsigned)((rows + THREADS / 32 - 1) / (THREADS / 32)), THREADS, 0, st>>>(O, dO, Dv, dQ, rows);
    cudaFuncSetAttribute(bwd_kv_kernel<D>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
    const dim3 grid_kv((a->N + Bc - 1) / Bc, a->H, a->B);
    bwd_kv_kernel<D><<<grid_kv, THREADS, smem, st>>>(Q, K, V, dO, a->L, Dv, dQ, dK, dV, a->N, scale_log2, a->scale,
                                                     a->causal);
#if !DQ_ATOMIC
    cudaFuncSetAttribute(bwd_dq_kernel<D>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
    const dim3 grid_q((a->N + Br - 1) / Br, a->H, a->B);
    bwd_dq_kernel<D><<<grid_q, THREADS, smem, st>>>(Q, K, V, dO, a->L, Dv, dQ, a->N, scale_log2, a->scale, a->causal);
#endif
    return ATTN_OK;
}

int attention_backward(const attn_bwd_args *a) {
    if (STARTER_NOT_DONE) return ATTN_NOT_IMPLEMENTED;
    if (a->dtype != DTYPE_FP32) return ATTN_UNSUPPORTED;
    if (a->d == 64) return launch<64>(a);
    if (a->d == 128) return launch<128>(a);
    return ATTN_UNSUPPORTED;
}

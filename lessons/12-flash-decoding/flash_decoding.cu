/* 12-flash-decoding (starter): attention for the decoding step of a language model.
 *
 * Given: the tile copies and the cp.async pipeline (lesson 08), each warp's attention over
 * its keys (S = Q K^T, the online softmax and O += P V of lesson 07), the merge of the 4
 * warps of a block, the arrival counter, the launch. You write, in the order of the lesson
 * text: TODO(1) which keys a block covers, TODO(2) the GQA head mapping, TODO(3) each split's
 * partial O and logsumexp, TODO(4) the merge of the splits, TODO(5) the split count, then
 * TODO(0). `make emu-12 EMU12_SRC=lessons/12-flash-decoding/flash_decoding.cu` checks it on
 * the CPU, `./lesson12` on the GPU.
 *
 *
 * A decoding step has few new queries per sequence (N = 1 to 16) and a long KV cache
 * (N_kv = thousands of keys), often with grouped-query attention: G = H / H_kv query heads
 * share one K/V head. Its cost is reading K and V once from HBM; the arithmetic is small.
 * Lessons 03-08 give one block to each query tile of each head: here that is one block per
 * head, far fewer blocks than the GPU has SMs, and most of HBM's bandwidth stays unused.
 *
 * Source: Dao, Haziza, Massa, Sizov, "Flash-Decoding for long-context inference" (2023):
 * split the keys of each sequence into S chunks, compute a partial softmax-weighted sum and
 * its logsumexp per chunk in separate blocks, then merge the chunks with the rescaling of
 * the online softmax (FlashAttention-2, Algorithm 1; lesson 01). The split count follows
 * FlashAttention's rule for it: fill whole waves of blocks on the GPU.
 *
 * What this kernel does:
 *   - grid: one block per (split s, row chunk, b, h_kv). A block reads its chunk of K and V
 *     once, through a cp.async pipeline of FD_STAGES tiles of BC keys, and uses each tile
 *     for all G N query rows of its group (the G query heads of h_kv, N queries each): one
 *     K/V load per group instead of one per query head;
 *   - the group's rows are the M dimension of lesson 07's mma.m16n8k16 (padded to 16); the
 *     4 warps of a block share each tile by keys (each its own slice, its own m, l, O) when
 *     there are few rows, by rows when there are many; the warps' partials are merged in
 *     shared memory at the end, with the same rescaling as the splits;
 *   - a block writes its chunk's O (normalised, fp32) and logsumexp to a workspace, and the
 *     last block of a group to finish (an arrival counter) merges the chunks and writes O and
 *     L: one launch, no second kernel. A sequence that needs one chunk skips the workspace.
 *   - ragged batches (seqlens_kv: sequence b has its own length; the split bounds follow it),
 *     causal masking aligned to the end of the cache (query i sees keys j <= len - N + i).
 *
 * Layouts (reference/include/attention.h): Q, O [B, H, N, d]; K, V [B, H_kv, N_kv, d]; L [B, H, N]
 * fp32, the natural-log logsumexp of each row of the scaled scores. Preconditions: fp16 or
 * bf16, d in {64, 128}, H % H_kv == 0, scale > 0, an sm_80+ GPU, 1 <= seqlens_kv[b] <= N_kv,
 * and with causal seqlens_kv[b] >= N (else a row that sees no key gets O = 0, L = -inf).
 * Any N works; N <= 16 is what it is for (longer query blocks are lesson 08's territory).
 * Experiment: FD_SPLITS=S in the environment forces S splits (FD_SPLITS=1: one block per
 * group, the schedule of lessons 03-08).
 */
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <string.h>
#include "attention.h"
#ifdef FD_TRACE
#include <algorithm>
#include <vector>
#endif

const lesson_info LESSON = {
    12, "12-flash-decoding", "flash decoding: split the KV cache, merge the partial softmaxes, one K/V load per GQA group",
    DTYPE_BIT(DTYPE_FP16) | DTYPE_BIT(DTYPE_BF16), 1, {64, 128, 0}, LESSON_DECODE, 0};

// [region config]
/* Keys per K/V tile (BC) per head dimension, and tiles in the cp.async ring: a tile of K
 * and one of V are 32 KiB at either d, and FD_STAGES - 1 of them are in flight while the
 * warps work on one. Change with -DFD64_BC=64 -DFD_STAGES=4 etc. */
#ifndef FD64_BC
#define FD64_BC 128
#endif
#ifndef FD128_BC
#define FD128_BC 64
#endif
#ifndef FD_STAGES
#define FD_STAGES 3
#endif
#define FD_THREADS 128       /* 4 warps */
#define FD_MAX_SPLITS 128    /* the split rule never goes beyond (FD_SPLITS may, up to 1024) */
// [end config]

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#define FD_SM80 0 /* the portable build's sm_75 code: an empty kernel, never launched */
#else
#define FD_SM80 1
#endif

// [region ptx]
__device__ __forceinline__ void ldmatrix_x4(uint32_t r[4], uint32_t addr) {
#if FD_SM80
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
#endif
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t r[4], uint32_t addr) {
#if FD_SM80
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
#endif
}
template <typename T>
__device__ __forceinline__ void mma_16816(float d[4], const uint32_t a[4], uint32_t b0, uint32_t b1);
template <>
__device__ __forceinline__ void mma_16816<__half>(float d[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
#if FD_SM80
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#endif
}
template <>
__device__ __forceinline__ void mma_16816<__nv_bfloat16>(float d[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
#if FD_SM80
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#endif
}
__device__ __forceinline__ float ex2(float x) {
    float y = 0.f;
#if FD_SM80
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
#endif
    return y;
}
__device__ __forceinline__ uint32_t smem_u32(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }
/* What the last-block merge needs: a fence that orders this thread's global writes before
 * its later ones for every other block, an atomic add that returns the old value, and loads
 * that bypass L1 (another SM wrote the data; this SM's L1 could hold an old copy). */
__device__ __forceinline__ void fd_fence() { __threadfence(); }
__device__ __forceinline__ int fd_atomic_add(int *p, int v) { return atomicAdd(p, v); }
__device__ __forceinline__ float fd_ld_cg(const float *p) { return __ldcg(p); }
__device__ __forceinline__ float4 fd_ld_cg4(const float4 *p) { return __ldcg(p); }
/* Programmatic dependent launch (sm_90; FD_MERGE=pdl, an experiment): the split kernel lets
 * the merge kernel be scheduled before it ends, and the merge kernel waits at
 * griddepcontrol.wait until the split kernel has finished and its writes are visible.
 * Without that launch attribute the wait returns at once. */
__device__ __forceinline__ void fd_launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void fd_wait_primary() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}
#ifdef FD_TRACE
/* -DFD_TRACE (bench/decode_sweep.sh): thread 0 of each block stamps the GPU's global timer
 * (ns, one clock for every SM) at its start (0; and its SM, 4), after its K/V loop (1), after
 * its partial (2), and in the block that merges after its arrival (5), after L (6) and after
 * the merge (3); the host prints a summary of the last launch at exit. */
#define FD_TRACE_MAX 8192
#define FD_TRACE_COLS 7
__device__ unsigned long long fd_trace_buf[FD_TRACE_MAX][FD_TRACE_COLS];
__device__ __forceinline__ void fd_trace_point(int k) {
    if (threadIdx.x != 0 || blockIdx.x >= FD_TRACE_MAX) return;
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;\n" : "=l"(t));
    fd_trace_buf[blockIdx.x][k] = t;
    if (k == 0) {
        unsigned sm;
        asm volatile("mov.u32 %0, %%smid;\n" : "=r"(sm));
        fd_trace_buf[blockIdx.x][4] = sm;
        fd_trace_buf[blockIdx.x][1] = fd_trace_buf[blockIdx.x][2] = fd_trace_buf[blockIdx.x][3] = 0;
        fd_trace_buf[blockIdx.x][5] = fd_trace_buf[blockIdx.x][6] = 0;
    }
}
#define FD_TRACE_POINT(k) fd_trace_point(k)
#endif
// [end ptx]
#ifndef FD_TRACE_POINT
#define FD_TRACE_POINT(k) ((void)0)
#endif

// [region cp-async]
/* Lesson 08's cp.async: 16 bytes global -> shared, zero-filled when !valid (nothing read).
 * -DFD_EVICT_FIRST (an experiment, bench/decode_sweep.sh): each copy carries an L2 policy
 * that makes its line the first to be evicted. K and V are read once, so their lines are
 * the right ones to recycle, before anything else L2 holds: the dirty lines another kernel
 * left (the timing's L2 flush writes 2 x L2), which a normal miss would write back first. */
__device__ __forceinline__ void cp_async_16(uint32_t dst, const void *src, bool valid) {
#if FD_SM80 && defined(FD_EVICT_FIRST)
    uint64_t policy;
    asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(policy));
    asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2, %3;\n"
                 ::"r"(dst), "l"(src), "r"(valid ? 16 : 0), "l"(policy));
#elif FD_SM80
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(valid ? 16 : 0));
#endif
}
__device__ __forceinline__ void cp_async_commit() {
#if FD_SM80
    asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}
template <int N>
__device__ __forceinline__ void cp_async_wait() {
#if FD_SM80
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
#endif
}
// [end cp-async]

template <typename T> __device__ __forceinline__ uint32_t pack2(float lo, float hi);
template <> __device__ __forceinline__ uint32_t pack2<__half>(float lo, float hi) {
    __half2 h = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<uint32_t *>(&h);
}
template <> __device__ __forceinline__ uint32_t pack2<__nv_bfloat16>(float lo, float hi) {
    __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t *>(&h);
}

/* Lesson 07's swizzle: 16-byte chunk `chunk` of row `row` of a tile of D-element rows. */
template <int D>
__device__ __forceinline__ uint32_t swz(int row, int chunk) {
    return (uint32_t)(row * (D * 2) + ((chunk ^ (row & 7)) << 4));
}

/* Everything a launch passes to the kernel. */
template <typename T>
struct FdArgs {
    const T *Q, *K, *V;
    T *O;
    float *L;
    const int *seqlens;   /* NULL: every sequence has N_kv keys */
    float *Opart, *Lpart; /* [B H_kv, S, R, d] and [B H_kv, S, R] fp32: one partial per split (S > 1) */
    int *count;           /* [B H_kv n_rc] blocks of a group that have written their partial; 0 between launches */
    int H, H_kv, N, N_kv; /* the shape (attention.h) */
    int G, R;             /* query heads per K/V head, rows per group G N */
    int n_rc;             /* row chunks per group (RB rows each) */
    int S, chunk;         /* splits of the longest sequence; keys per split (a multiple of BC) */
    int causal;
    float scale_log2;     /* scale log2(e): exponentials as ex2 */
    int merge_kernel;     /* 0: the last block of a group merges; 1: fd_merge_kernel does, after (FD_MERGE) */
    int pdl;              /* 1: the merge kernel is a programmatic dependent launch (FD_MERGE=pdl) */
};

// [region gqa]
/* Grouped-query attention: K/V head h_kv serves the G = H / H_kv query heads
 * h_kv G .. h_kv G + G - 1 (query head h reads K/V head h / G, the convention of
 * PyTorch's enable_gqa and of repeat_interleave). Row r of a group is query r % N of its
 * head number r / N, so with this mapping the G N rows of a group are consecutive in Q
 * and O ([B, H, N, d]): one [G N, d] matrix. Returns the element offset of row r. */
__device__ __forceinline__ int query_head(int h_kv, int j, int G, int H_kv) {
    /* TODO(2): the j-th (0 <= j < G) of the query heads that read K/V head h_kv. */
    (void)h_kv; (void)j; (void)G; (void)H_kv;
    return 0;
}
template <typename T>
__device__ __forceinline__ size_t group_row(const FdArgs<T> &a, int b, int h_kv, int r, int D) {
    const int h = query_head(h_kv, r / a.N, a.G, a.H_kv);
    return ((size_t)(b * a.H + h) * a.N + r % a.N) * D;
}
// [end gqa]

// [region load]
/* Start copying rows [row0, row0 + ROWS) of a [*, D] matrix g into a swizzled shared tile;
 * rows >= end are zero-filled and not read (lesson 08's tile copy: a constant trip count,
 * bounds tests only in a tile that crosses `end`). Thread tid copies chunk tid % CH of rows
 * tid / CH + i STEP. */
template <typename T, int D, int ROWS>
__device__ __forceinline__ void load_rows_async(uint32_t tile, const T *g, int row0, int end, int tid) {
    constexpr int CH = D / 8, STEP = FD_THREADS / CH;
    static_assert(FD_THREADS % CH == 0 && ROWS % STEP == 0 && STEP % 8 == 0, "tile copy must split evenly");
    const int r0 = tid / CH, ch = tid % CH;
    const T *src = g + (size_t)(row0 + r0) * D + ch * 8;
    const uint32_t dst = tile + swz<D>(r0, ch);
    if (row0 + ROWS <= end) {
#pragma unroll
        for (int i = 0; i < ROWS / STEP; ++i) cp_async_16(dst + i * STEP * D * 2, src + (size_t)i * STEP * D, true);
    } else {
#pragma unroll
        for (int i = 0; i < ROWS / STEP; ++i) {
            const bool valid = row0 + r0 + i * STEP < end;
            cp_async_16(dst + i * STEP * D * 2, valid ? src + (size_t)i * STEP * D : g, valid);
        }
    }
}
/* The block's query rows r0 .. r0 + RB - 1 of its group, row by row (group_row), rows past
 * the group's R zero-filled: the A operand of every mma. */
template <typename T, int D, int RB>
__device__ __forceinline__ void load_q_async(uint32_t tile, const FdArgs<T> &a, int b, int h_kv, int r0, int tid) {
    constexpr int CH = D / 8, STEP = FD_THREADS / CH;
    static_assert(RB % STEP == 0 && STEP % 8 == 0, "Q copy must split evenly");
    const int rr = tid / CH, ch = tid % CH;
#pragma unroll
    for (int i = 0; i < RB / STEP; ++i) {
        const int r = rr + i * STEP;
        const bool valid = r0 + r < a.R;
        cp_async_16(tile + swz<D>(r, ch), valid ? a.Q + group_row(a, b, h_kv, r0 + r, D) + ch * 8 : a.Q, valid);
    }
}
// [end load]

/* Dynamic shared memory of a block: the Q tile, then the K/V slots, which after the loop hold
 * the warps' partials (and one int): as large as the larger of the two uses. */
template <int D, int BC, int WR, int MT, int STAGES>
constexpr int fd_smem_bytes() {
    constexpr int RB = WR * MT * 16, WK = 4 / WR;
    constexpr int kv = STAGES * 2 * BC * D * 2, merge = (WK * RB * (D + 4) + 2 * WK * RB + 1) * 4;
    return RB * D * 2 + (kv > merge ? kv : merge);
}

template <typename T, int D>
__device__ void fd_merge(const FdArgs<T> &a, int grp, int b, int h_kv, int r0, int rows, int splits, float *Lfin);

/* Fragment layouts (lesson 07), g = lane / 4, t = lane % 4:
 *   A 16x16: a[0] (g, 2t..2t+1)  a[1] (g+8, 2t..)  a[2] (g, 2t+8..)  a[3] (g+8, 2t+8..)
 *   B 16x8 : b0 (rows 2t, 2t+1; col g)   b1 (rows 2t+8, 2t+9; col g)
 *   C 16x8 : c[0], c[1] (g, 2t..2t+1)    c[2], c[3] (g+8, 2t..2t+1)          */

/* One block: split s of the keys of sequence b, for rows r0 .. r0 + RB - 1 of the query
 * rows of group (b, h_kv). grid = S n_rc B H_kv blocks in one dimension, FD_THREADS threads.
 * Warp w works on rows of m-tiles (w % WR) MT .. + MT - 1 (16 rows each) and on keys
 * (w / WR) KW .. + KW - 1 of every tile (KW = BC / WK, WK = 4 / WR warps per row set).
 * Dynamic shared memory: the Q tile [RB][D], then FD_STAGES K and FD_STAGES V slots
 * [BC][D], all swizzled; after the loop the K/V slots hold the warps' partials
 * (fd_smem_bytes).
 * Writes O and L directly when its sequence has one split, else its partial, and the last
 * block of the group to arrive merges all of them into O and L (fd_merge; with
 * a.merge_kernel, fd_merge_kernel does after this launch). */
template <typename T, int D, int BC, int WR, int MT, int STAGES>
__global__ void __launch_bounds__(FD_THREADS) fd_split_kernel(const FdArgs<T> a) {
    constexpr int WK = 4 / WR, KW = BC / WK;
    /* Keys per step of the online softmax: the warp's whole slice of the tile, except with
     * 2 m-tiles (32 rows a warp), where S for the slice beside O does not fit in 255
     * registers: 16 keys at d = 128, 64 at d = 64 (ptxas -v: no spills then). */
    constexpr int KS = MT == 2 ? (D == 128 ? 16 : (KW < 64 ? KW : 64)) : KW;
    static_assert(WR * WK == 4 && KW % KS == 0 && KS % 16 == 0 && STAGES >= 2, "bad configuration");
#if FD_SM80
    constexpr int NT = FD_THREADS, RB = WR * MT * 16, DP = D + 4;
    constexpr uint32_t TILE = BC * D * 2;
    extern __shared__ __align__(128) unsigned char fa_smem[];
    const uint32_t aQ = smem_u32(fa_smem), aK = aQ + RB * D * 2, aV = aK + STAGES * TILE;
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const int g = lane >> 2, t = lane & 3, wr = warp % WR, wk = warp / WR;
    FD_TRACE_POINT(0);
    if (a.pdl) fd_launch_dependents();

    // [region block-work]
    /* TODO(1): the work of this block.
     *   blockIdx.x = (grp n_rc + rc) S + s: split s (0 <= s < S) of row chunk rc
     *   (0 <= rc < n_rc) of group grp = b H_kv + h_kv; the splits of a group are neighbours.
     *   len      the keys of sequence b: a.seqlens[b], or a.N_kv when a.seqlens is NULL;
     *   splits   how many splits of a.chunk keys that sequence needs, ceil(len / chunk);
     *            a block with s >= splits has no keys (a short sequence of a ragged batch)
     *            and returns at once;
     *   k_begin, k_end   the keys of split s: [s chunk, min(len, (s + 1) chunk));
     *            with causal, k_end stops after key len - N + i_max too, the last key the
     *            block's last query sees (i_max: the largest query index i = r % N among the
     *            block's rows r0 .. r0 + rows - 1; N - 1 when they belong to two heads or more). */
    const int s = 0, rc = 0, grp = 0; /* TODO(1) */
    const int b = 0, h_kv = 0;        /* TODO(1) */
    const int len = a.N_kv;           /* TODO(1) */
    const int splits = 1;             /* TODO(1) */
    if (s >= splits) return;
    const int r0 = rc * RB, rows = min(RB, a.R - r0);
    const int k_begin = 0;            /* TODO(1) */
    int k_end = 0;                    /* TODO(1) */
    const int n_tiles = k_end > k_begin ? (k_end - k_begin + BC - 1) / BC : 0;
    (void)grp;
    // [end block-work]
    // [region kv-slice]
    /* TODO(2), second half: K and V of the group: slice (b, h_kv) of [B, H_kv, N_kv, d]. */
    const T *K = a.K; /* TODO(2) */
    const T *V = a.V; /* TODO(2) */
    // [end kv-slice]

    // [region pipeline]
    /* Commit groups, oldest first: Q | tile 0 | tile 1 | ... | tile STAGES-2, then one per
     * step (tile it + STAGES - 1, empty near the end so the count stays right). At step it
     * the groups younger than tile it's are STAGES - 2: waiting for that many leaves tile it
     * (and Q) landed. The barrier after the wait also tells that every warp is done with
     * tile it - 1, whose slot the step's copy refills. */
    load_q_async<T, D, RB>(aQ, a, b, h_kv, r0, tid);
    cp_async_commit();
#pragma unroll
    for (int st = 0; st < STAGES - 1; ++st) {
        if (st < n_tiles) {
            load_rows_async<T, D, BC>(aK + st * TILE, K, k_begin + st * BC, k_end, tid);
            load_rows_async<T, D, BC>(aV + st * TILE, V, k_begin + st * BC, k_end, tid);
        }
        cp_async_commit();
    }
    // [end pipeline]

    float o[MT][D / 8][4], m[MT][2], l[MT][2]; /* per warp: its rows, its keys */
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
        for (int nb = 0; nb < D / 8; ++nb) o[mt][nb][0] = o[mt][nb][1] = o[mt][nb][2] = o[mt][nb][3] = 0.f;
        m[mt][0] = m[mt][1] = -INFINITY;
        l[mt][0] = l[mt][1] = 0.f;
    }
    /* The last key row `r` (0: g, 1: g + 8) of m-tile mt of this thread may see: the split's
     * end, and with causal len - N + i for query i of the sequence (its last N keys are the
     * new tokens). One m-tile keeps the two values in registers; two compute them when a
     * tile needs them (registers are scarce there). */
    auto last_key_of = [&](int mt, int r) {
        const int i = (r0 + (wr * MT + mt) * 16 + g + r * 8) % a.N;
        return a.causal ? min(k_end - 1, len - a.N + i) : k_end - 1;
    };
    const int last_key[2] = {last_key_of(0, 0), last_key_of(0, 1)};
    const int q_row = wr * MT * 16 + (lane & 7) + ((lane >> 3) & 1) * 8, q_chunk = lane >> 4;
    const int k_row = wk * KW + (lane & 7) + ((lane >> 4) << 3), k_chunk = (lane >> 3) & 1;
    const int v_row = wk * KW + (lane & 7) + (((lane >> 3) & 1) << 3), v_chunk = lane >> 4;
    uint32_t qf[MT == 1 ? D / 16 : 1][4]; /* one m-tile: Q's A fragments stay in registers */

    for (int it = 0; it < n_tiles; ++it) {
        const int k0 = k_begin + it * BC;
        cp_async_wait<STAGES - 2>();
        __syncthreads();
        {
            const int nx = it + STAGES - 1;
            if (nx < n_tiles) {
                load_rows_async<T, D, BC>(aK + (nx % STAGES) * TILE, K, k_begin + nx * BC, k_end, tid);
                load_rows_async<T, D, BC>(aV + (nx % STAGES) * TILE, V, k_begin + nx * BC, k_end, tid);
            }
            cp_async_commit();
        }
        if constexpr (MT == 1) {
            if (it == 0) {
#pragma unroll
                for (int kk = 0; kk < D / 16; ++kk) ldmatrix_x4(qf[kk], aQ + swz<D>(q_row, 2 * kk + q_chunk));
            }
        }
        const uint32_t sK = aK + (it % STAGES) * TILE, sV = aV + (it % STAGES) * TILE;
#pragma unroll 1
        for (int ks = 0; ks < KW; ks += KS) { /* the warp's keys, KS at a time */

        // [region s-mma]
        /* S = Q K^T for the warp's rows and its KW keys of the tile. */
        float sc[MT][KS / 8][4];
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
            for (int nb = 0; nb < KS / 8; ++nb) sc[mt][nb][0] = sc[mt][nb][1] = sc[mt][nb][2] = sc[mt][nb][3] = 0.f;
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk) {
            uint32_t qa[MT][4];
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) {
                if constexpr (MT == 1) {
#pragma unroll
                    for (int x = 0; x < 4; ++x) qa[mt][x] = qf[kk][x];
                } else {
                    ldmatrix_x4(qa[mt], aQ + swz<D>(q_row + mt * 16, 2 * kk + q_chunk));
                }
            }
#pragma unroll
            for (int np = 0; np < KS / 16; ++np) {
                uint32_t bk[4];
                ldmatrix_x4(bk, sK + swz<D>(ks + np * 16 + k_row, 2 * kk + k_chunk));
#pragma unroll
                for (int mt = 0; mt < MT; ++mt) {
                    mma_16816<T>(sc[mt][2 * np], qa[mt], bk[0], bk[1]);
                    mma_16816<T>(sc[mt][2 * np + 1], qa[mt], bk[2], bk[3]);
                }
            }
        }
        // [end s-mma]

        // [region mask]
        /* Keys past the split's end (the ragged last tile) and, with causal, past a row's
         * last_key get -inf. Only the tiles that reach such keys pay for the test. */
        if (k0 + BC > k_end || (a.causal && k0 + BC - 1 > len - a.N)) {
#pragma unroll
            for (int mt = 0; mt < MT; ++mt)
#pragma unroll
                for (int nb = 0; nb < KS / 8; ++nb)
#pragma unroll
                    for (int e = 0; e < 4; ++e) {
                        const int col = k0 + wk * KW + ks + nb * 8 + 2 * t + (e & 1);
                        if (col > (MT == 1 ? last_key[e >> 1] : last_key_of(mt, e >> 1))) sc[mt][nb][e] = -INFINITY;
                    }
        }
        // [end mask]

        // [region softmax]
        /* Lesson 08's online softmax: new row maxima over the warp's keys, O and l rescaled
         * by alpha = 2^((m_old - m_new) scale log2 e). A row can see none of the warp's keys
         * (masked, or a split with no visible key): its max stays -inf and offset 0 keeps
         * the exponentials at 0 instead of NaN. */
        float base[MT][2];
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
            for (int r = 0; r < 2; ++r) {
                float mx = m[mt][r];
#pragma unroll
                for (int nb = 0; nb < KS / 8; ++nb) mx = fmaxf(mx, fmaxf(sc[mt][nb][2 * r], sc[mt][nb][2 * r + 1]));
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
                base[mt][r] = (mx == -INFINITY) ? 0.f : mx * a.scale_log2;
                const float alpha = ex2(m[mt][r] * a.scale_log2 - base[mt][r]);
                m[mt][r] = mx;
                l[mt][r] *= alpha;
#pragma unroll
                for (int nb = 0; nb < D / 8; ++nb) {
                    o[mt][nb][2 * r] *= alpha;
                    o[mt][nb][2 * r + 1] *= alpha;
                }
            }
        // [end softmax]

        // [region pv]
        /* O += P V over the warp's keys, 16 at a time: P straight from the S accumulators
         * into an A fragment (lesson 07), V's rows by ldmatrix.trans. */
#pragma unroll
        for (int kk = 0; kk < KS / 16; ++kk) {
            uint32_t pf[MT][4];
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) {
                float p[2][4];
#pragma unroll
                for (int h = 0; h < 2; ++h)
#pragma unroll
                    for (int e = 0; e < 4; ++e)
                        p[h][e] = ex2(fmaf(sc[mt][2 * kk + h][e], a.scale_log2, -base[mt][e >> 1]));
                l[mt][0] += (p[0][0] + p[0][1]) + (p[1][0] + p[1][1]);
                l[mt][1] += (p[0][2] + p[0][3]) + (p[1][2] + p[1][3]);
                pf[mt][0] = pack2<T>(p[0][0], p[0][1]);
                pf[mt][1] = pack2<T>(p[0][2], p[0][3]);
                pf[mt][2] = pack2<T>(p[1][0], p[1][1]);
                pf[mt][3] = pack2<T>(p[1][2], p[1][3]);
            }
#pragma unroll
            for (int dp = 0; dp < D / 16; ++dp) {
                uint32_t bv[4];
                ldmatrix_x4_trans(bv, sV + swz<D>(ks + kk * 16 + v_row, 2 * dp + v_chunk));
#pragma unroll
                for (int mt = 0; mt < MT; ++mt) {
                    mma_16816<T>(o[mt][2 * dp], pf[mt], bv[0], bv[1]);
                    mma_16816<T>(o[mt][2 * dp + 1], pf[mt], bv[2], bv[3]);
                }
            }
        }
        // [end pv]
        }
    }
    cp_async_wait<0>(); /* only empty groups can be left; then the slots are free */
    __syncthreads();
    FD_TRACE_POINT(1);

    // [region warp-merge]
    /* Each warp's (m, l, O) for its rows and its keys go to shared memory; then every
     * thread merges the WK warps of some (row, 4 columns) the way splits are merged
     * (lesson 01): M = max m_w, l = sum_w 2^((m_w - M) s) l_w, O = sum_w 2^((m_w - M) s) O_w / l. */
    float *Ob = reinterpret_cast<float *>(fa_smem + RB * D * 2); /* [WK][RB][DP] */
    float *Mb = Ob + WK * RB * DP, *Lb = Mb + WK * RB;          /* [WK][RB] each */
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            float lr = l[mt][r];
            lr += __shfl_xor_sync(0xffffffffu, lr, 1);
            lr += __shfl_xor_sync(0xffffffffu, lr, 2);
            const int row = (wr * MT + mt) * 16 + g + r * 8;
            float *dst = Ob + (wk * RB + row) * DP + 2 * t;
#pragma unroll
            for (int nb = 0; nb < D / 8; ++nb) *reinterpret_cast<float2 *>(dst + nb * 8) = make_float2(o[mt][nb][2 * r], o[mt][nb][2 * r + 1]);
            if (t == 0) { Mb[wk * RB + row] = m[mt][r]; Lb[wk * RB + row] = lr; }
        }
    __syncthreads();
    const bool direct = splits == 1;
    for (int item = tid; item < rows * (D / 4); item += NT) {
        const int r = item / (D / 4), c = (item % (D / 4)) * 4;
        float M = -INFINITY;
#pragma unroll
        for (int w = 0; w < WK; ++w) M = fmaxf(M, Mb[w * RB + r]);
        float lsum = 0.f, acc[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
        for (int w = 0; w < WK; ++w) {
            const float mw = Mb[w * RB + r], f = mw == -INFINITY ? 0.f : ex2((mw - M) * a.scale_log2);
            lsum += f * Lb[w * RB + r];
            const float4 v = *reinterpret_cast<const float4 *>(Ob + (w * RB + r) * DP + c);
            acc[0] += f * v.x; acc[1] += f * v.y; acc[2] += f * v.z; acc[3] += f * v.w;
        }
        const float inv = lsum > 0.f ? 1.f / lsum : 0.f;
        // [region partial]
        /* TODO(3): Lrow, the natural-log logsumexp of row r over this block's keys, from M
         * (the largest raw score max of the warps: multiply by a.scale_log2 for log2 units)
         * and lsum (their rescaled sum): -INFINITY when lsum is 0 (no visible key). Then,
         * when the sequence has one split (direct), write O (the dtype, 4 values: acc * inv)
         * and L; else the split's partial: O_s = acc * inv as 4 floats and L_s, at index
         * part = (grp S + s) R + r0 + r of a.Opart ([..., d]) and a.Lpart. */
        const float Lrow = 0.f; /* TODO(3) */
        if (direct) {
            (void)inv; (void)Lrow; /* TODO(3) */
        } else {
            /* TODO(3) */
        }
        // [end partial]
    }
    // [end warp-merge]
    FD_TRACE_POINT(2);
    if (direct || a.merge_kernel) return;

    // [region arrive]
    /* The last block of the group to arrive does the merge. The barrier orders every
     * thread's partial before thread 0's fence, which makes them visible to the other SMs
     * before it counts the block in (the release pattern of cooperative groups' grid sync);
     * the one that counts `splits` resets the counter for the next launch and fences again,
     * so that its block's reads of the other partials, after the next barrier, come after. */
    __syncthreads();
    const size_t counter = (size_t)grp * a.n_rc + rc;
    int *last = reinterpret_cast<int *>(Lb + WK * RB); /* one int after the partials */
    if (tid == 0) {
        fd_fence();
        const int is_last = fd_atomic_add(a.count + counter, 1) == splits - 1;
        if (is_last) {
            a.count[counter] = 0;
            fd_fence();
        }
        *last = is_last;
    }
    __syncthreads();
    if (!*last) return;
    // [end arrive]
    FD_TRACE_POINT(5);

    fd_merge<T, D>(a, grp, b, h_kv, r0, rows, splits, reinterpret_cast<float *>(fa_smem)); /* Q's tile is free */
    FD_TRACE_POINT(3);
#endif
}

/* The merge of the `splits` partials of rows r0 .. r0 + rows - 1 of group grp = b H_kv + h_kv
 * into O and L: the partial of split s2 for row r is at (grp S + s2) R + r0 + r in a.Lpart
 * and, times d, in a.Opart (fd_split_kernel writes them). Run by a whole block of FD_THREADS
 * threads; Lfin: `rows` floats of shared memory. Called by the last block of the group to
 * arrive, or by fd_merge_kernel. */
template <typename T, int D>
__device__ void fd_merge(const FdArgs<T> &a, int grp, int b, int h_kv, int r0, int rows, int splits, float *Lfin) {
#if FD_SM80
    constexpr int NT = FD_THREADS;
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    // [region merge]
    /* TODO(4): merge the `splits` partials of the block's rows (lesson 01 on logsumexps):
     *   L = M + log sum_s exp(L_s - M), M = max_s L_s (-inf when every L_s is -inf),
     *   O = sum_s exp(L_s - L) O_s,
     * L_s and O_s of split s2 at index (grp S + s2) R + r0 + r of a.Lpart and a.Opart
     * (read them with fd_ld_cg / fd_ld_cg4: another SM wrote them). Write L and O of each
     * row r < rows at group_row(a, b, h_kv, r0 + r, D) (L at that offset / D). Suggested:
     * a warp per row for L (its lanes take the splits lane, lane + 32, ...; reduce with
     * __shfl_xor_sync), kept in Lfin[r], a barrier, then every thread some (row, 4 columns)
     * of O, as in the warp merge above. */
    (void)Lfin; (void)tid; (void)warp; (void)lane; (void)NT; /* TODO(4) */
    // [end merge]
#endif
}

/* FD_MERGE=kernel or pdl (an experiment, bench/decode_sweep.sh): the merge as a second kernel
 * after fd_split_kernel instead of in the last block of each group, one block per row chunk
 * of a group, blockIdx.x = grp n_rc + rc, FD_THREADS threads, RB floats of dynamic shared
 * memory. No counter, no fence: the end of the split kernel orders its writes before this
 * kernel's reads (with PDL, griddepcontrol.wait does). A sequence with one split was written
 * by the split kernel. */
template <typename T, int D, int RB>
__global__ void __launch_bounds__(FD_THREADS) fd_merge_kernel(const FdArgs<T> a) {
    fd_wait_primary();
#if FD_SM80
    extern __shared__ __align__(128) unsigned char fa_smem[];
    const int rc = (int)blockIdx.x % a.n_rc, grp = (int)blockIdx.x / a.n_rc;
    const int b = grp / a.H_kv, h_kv = grp % a.H_kv;
    const int len = a.seqlens ? a.seqlens[b] : a.N_kv, splits = (len + a.chunk - 1) / a.chunk;
    if (splits == 1) return;
    const int r0 = rc * RB;
    fd_merge<T, D>(a, grp, b, h_kv, r0, min(RB, a.R - r0), splits, reinterpret_cast<float *>(fa_smem));
#endif
}

// [region plan]
/* How a launch covers a decoding step; plain C (the CPU emulator and tests/test_decode.c
 * use it too). */
typedef struct {
    int WR, MT, RB; /* warps over rows, m-tiles per warp, rows per block WR MT 16 */
    int n_rc;       /* row chunks per group: ceil(G N / RB) */
    int tiles;      /* K/V tiles of the longest sequence */
    int S, chunk;   /* splits; keys per split (a multiple of BC) */
    long long blocks;
} FdPlan;

/* Rows per block: the group's G N rows padded to 16, 32, 64 or 128 (4 warps: 1, 2 or 4 of
 * them over rows, the others over keys; 128 = 4 warps of 2 m-tiles). Larger groups are
 * cut into row chunks of 128. */
static void fd_rows_config(int R, int *WR, int *MT) {
    *MT = 1;
    if (R <= 16) *WR = 1;
    else if (R <= 32) *WR = 2;
    else if (R <= 64) *WR = 4;
    else { *WR = 4; *MT = 2; }
}

// [region splits]
/* TODO(5): the split count. There is a block per (unit, split): `units` units (groups x
 * row chunks) and `slots` blocks that run at once (the host passes one per SM). With S splits the
 * grid is units S / slots waves; the last wave is partly idle, and the fraction of the GPU
 * the launch uses is eff(S) = waves / ceil(waves). Return the smallest S in 1..max_s whose
 * eff is within 10% of the best, where max_s = min(tiles / min_tiles, FD_MAX_SPLITS) (no
 * split shorter than min_tiles tiles); 1 when max_s <= 1. */
static int fd_num_splits(long long units, int tiles, int min_tiles, long long slots) {
    (void)units; (void)tiles; (void)min_tiles; (void)slots;
    return 1; /* TODO(5) */
}
// [end splits]

/* Other split rules, for experiments (FD_RULE in the environment; bench/decode_sweep.sh
 * compares them with the default):
 *   FD_RULE_WAVE   fd_num_splits above, the default, over one slot per SM (fd_launch);
 *   FD_RULE_RESIDENT  fd_num_splits over every resident block, SMs x blocks per SM (the
 *                  lesson's first rule; 8 groups on an H100: 22 to 30 splits where the
 *                  default takes 13 to 15); FD_RULE_TILES and FD_RULE_FILL count those too;
 *   FD_RULE_TILES  the same rule over the counts whole tiles per split can make,
 *                  S = ceil(tiles / per): fd_make_plan rounds the wave rule's S to one of
 *                  those, downwards (8 groups, 64 tiles: the rule's 29 becomes 22, 176 blocks
 *                  where 256 would fit in one wave);
 *   FD_RULE_FILL   one wave as full as it goes: the largest such S with units S <= slots.
 * Same bounds as fd_num_splits (min_tiles, FD_MAX_SPLITS). */
enum { FD_RULE_WAVE = 0, FD_RULE_RESIDENT = 1, FD_RULE_TILES = 2, FD_RULE_FILL = 3 };
static int fd_rule_splits(int rule, long long units, int tiles, int min_tiles, long long slots) {
    if (rule == FD_RULE_WAVE || rule == FD_RULE_RESIDENT) return fd_num_splits(units, tiles, min_tiles, slots);
    const int max_s = (int)(tiles / min_tiles < FD_MAX_SPLITS ? tiles / min_tiles : FD_MAX_SPLITS);
    if (max_s <= 1 || slots < 1) return 1;
    int cand[FD_MAX_SPLITS + 1], n = 0, prev = max_s + 1; /* the counts whole tiles make, largest first */
    for (int per = (tiles + max_s - 1) / max_s; prev > 1; ++per) {
        const int s = (tiles + per - 1) / per;
        if (s < prev) cand[n++] = prev = s;
    }
    if (rule == FD_RULE_FILL) {
        for (int i = 0; i < n; ++i)
            if ((long long)cand[i] * units <= slots) return cand[i];
        return 1;
    }
    double best = 0, eff[FD_MAX_SPLITS + 1];
    for (int i = 0; i < n; ++i) {
        const double waves = (double)units * cand[i] / (double)slots;
        eff[i] = waves / ceil(waves);
        if (eff[i] > best) best = eff[i];
    }
    for (int i = n - 1; i >= 0; --i)
        if (eff[i] >= 0.9 * best) return cand[i];
    return 1;
}

/* forced > 0: that many splits (at most one per tile); else the split rule `rule`. */
static FdPlan fd_make_plan(int B, int H_kv, int R, int N_kv, int BC, long long slots, int forced, int rule) {
    FdPlan p;
    fd_rows_config(R, &p.WR, &p.MT);
    p.RB = p.WR * p.MT * 16;
    p.n_rc = (R + p.RB - 1) / p.RB;
    p.tiles = (N_kv + BC - 1) / BC;
    const long long units = (long long)B * H_kv * p.n_rc;
    /* a split's partial is (rows) x d floats written and read again against its
     * keys x d x 4 bytes of K and V: at least 16 keys per row keeps that under 1/8 */
    const int rows = R < p.RB ? R : p.RB;
    const int min_tiles = (16 * rows + BC - 1) / BC > 2 ? (16 * rows + BC - 1) / BC : 2;
    int S = forced > 0 ? (forced < p.tiles ? forced : p.tiles) : fd_rule_splits(rule, units, p.tiles, min_tiles, slots);
    const int per = (p.tiles + S - 1) / S; /* tiles per split; then no split is empty */
    p.chunk = per * BC;
    p.S = (p.tiles + per - 1) / per;
    p.blocks = units * p.S;
    return p;
}
// [end plan]

// [region host]
/* FD_SPLITS from the environment: 0 when unset, -1 when not a number in 1..1024. */
static int fd_forced_splits() {
    static int v = -2;
    if (v == -2) {
        const char *e = getenv("FD_SPLITS");
        v = 0;
        if (e && *e) {
            char *end;
            const long x = strtol(e, &end, 10);
            v = (*end || x < 1 || x > 1024) ? -1 : (int)x;
            if (v < 0) fprintf(stderr, "FD_SPLITS='%s' is not valid: expected an integer in 1..1024\n", e);
        }
    }
    return v;
}

/* An experiment's choice from the environment (FD_MERGE, FD_RULE): the index of its value in
 * `names` (names[0] when unset), -1 (with a message) when it is none of them. */
static int fd_env_choice(const char *var, const char *const *names, int n) {
    const char *e = getenv(var);
    if (!e || !*e) return 0;
    for (int i = 0; i < n; ++i)
        if (!strcmp(e, names[i])) return i;
    fprintf(stderr, "%s='%s' is not valid: expected", var, e);
    for (int i = 0; i < n; ++i) fprintf(stderr, "%s %s", i ? (i == n - 1 ? " or" : ",") : "", names[i]);
    fprintf(stderr, "\n");
    return -1;
}
/* FD_MERGE: last (the default: the last block of each group merges), kernel (fd_merge_kernel,
 * launched after the split kernel), pdl (the same as a programmatic dependent launch, sm_90;
 * elsewhere a plain launch). FD_RULE: wave (the default), resident, tiles, fill
 * (fd_rule_splits). */
static int fd_merge_mode() {
    static const char *const names[] = {"last", "kernel", "pdl"};
    static int v = -2;
    if (v == -2) v = fd_env_choice("FD_MERGE", names, 3);
    return v;
}
static int fd_rule() {
    static const char *const names[] = {"wave", "resident", "tiles", "fill"};
    static int v = -2;
    if (v == -2) v = fd_env_choice("FD_RULE", names, 4);
    return v;
}
static int fd_major = -1; /* compute capability of the current device (attention_forward) */

#ifdef FD_TRACE
/* -DFD_TRACE: at exit, what the last launch's blocks stamped (fd_trace_point), relative to
 * the first block's start, in microseconds. */
static long long fd_trace_blocks = 0;
static void fd_trace_report() {
    const int n = (int)(fd_trace_blocks < FD_TRACE_MAX ? fd_trace_blocks : FD_TRACE_MAX);
    static unsigned long long t[FD_TRACE_MAX][FD_TRACE_COLS];
    if (n < 1 || cudaDeviceSynchronize() != cudaSuccess ||
        cudaMemcpyFromSymbol(t, fd_trace_buf, sizeof(t[0]) * n) != cudaSuccess) {
        fprintf(stderr, "fd-trace: no trace (the launch or the copy failed)\n");
        return;
    }
    unsigned long long t0 = ~0ull, start_last = 0, end = 0, step = ~0ull;
    std::vector<double> loop, part, merge, arrive, lphase, ophase;
    int per_sm[1024] = {0}, sms = 0;
    for (int i = 0; i < n; ++i) {
        t0 = std::min(t0, t[i][0]);
        start_last = std::max(start_last, t[i][0]);
        for (int k = 1; k < 4; ++k) end = std::max(end, t[i][k]);
        if (t[i][1]) loop.push_back((t[i][1] - t[i][0]) * 1e-3);
        if (t[i][2]) part.push_back((t[i][2] - t[i][1]) * 1e-3);
        if (t[i][3]) merge.push_back((t[i][3] - t[i][2]) * 1e-3);
        if (t[i][3] && t[i][5] && t[i][6]) {
            arrive.push_back((t[i][5] - t[i][2]) * 1e-3);
            lphase.push_back((t[i][6] - t[i][5]) * 1e-3);
            ophase.push_back((t[i][3] - t[i][6]) * 1e-3);
        }
        if (t[i][4] < 1024 && per_sm[t[i][4]]++ == 0) ++sms;
        for (int j = 0; j < i && j < 64; ++j)
            if (t[i][0] != t[j][0]) step = std::min(step, t[i][0] > t[j][0] ? t[i][0] - t[j][0] : t[j][0] - t[i][0]);
    }
    auto med = [](std::vector<double> &v) { std::sort(v.begin(), v.end()); return v.empty() ? 0.0 : v[v.size() / 2]; };
    auto mx = [](const std::vector<double> &v) { return v.empty() ? 0.0 : *std::max_element(v.begin(), v.end()); };
    int hist[8] = {0};
    for (int i = 0; i < 1024; ++i)
        if (per_sm[i]) ++hist[per_sm[i] < 7 ? per_sm[i] : 7];
    fprintf(stderr, "fd-trace: %d blocks on %d SMs (SMs with 1/2/3/4+ blocks: %d/%d/%d/%d); last block started at "
            "%.2f us; K/V loop per block median %.2f max %.2f us; partial median %.2f max %.2f us; merge %.2f us "
            "(%zu blocks merged: fence and count %.2f, L %.2f, O %.2f us, the slowest of each); last stamp %.2f us; "
            "timer step >= %.3f us\n", n, sms, hist[1], hist[2], hist[3],
            hist[4] + hist[5] + hist[6] + hist[7], (start_last - t0) * 1e-3, med(loop), mx(loop), med(part), mx(part),
            mx(merge), merge.size(), mx(arrive), mx(lphase), mx(ophase), (end - t0) * 1e-3,
            step == ~0ull ? 0.0 : step * 1e-3);
}
#endif

/* The split workspace, the lesson's own: allocated at the first launch that splits, grown
 * when a later one needs more (bytes: B H_kv S G N (d + 1) x 4 for the partials, B H_kv
 * n_rc x 4 for the counters, which start at 0 and are reset by each merge). */
static struct { float *Opart, *Lpart; int *count; size_t opart, lpart, ncount; } fd_ws;

static int fd_workspace(size_t opart, size_t lpart, size_t ncount, cudaStream_t s) {
    if (opart <= fd_ws.opart && lpart <= fd_ws.lpart && ncount <= fd_ws.ncount) return ATTN_OK;
    cudaFree(fd_ws.Opart);  /* cudaFree waits for the launches that still use them */
    cudaFree(fd_ws.Lpart);
    cudaFree(fd_ws.count);
    fd_ws.Opart = fd_ws.Lpart = NULL;
    fd_ws.count = NULL;
    fd_ws.opart = fd_ws.lpart = fd_ws.ncount = 0;
    if (cudaMalloc(&fd_ws.Opart, opart * 4) != cudaSuccess || cudaMalloc(&fd_ws.Lpart, lpart * 4) != cudaSuccess ||
        cudaMalloc(&fd_ws.count, ncount * 4) != cudaSuccess) {
        (void)cudaGetLastError();
        fprintf(stderr, "flash decoding: the split workspace needs %.1f MiB (partial O and logsumexp of every "
                "split) and cudaMalloc failed\n", (opart + lpart + ncount) * 4 / 1048576.0);
        return ATTN_OUT_OF_MEMORY;
    }
    if (cudaMemsetAsync(fd_ws.count, 0, ncount * 4, s) != cudaSuccess) return ATTN_OUT_OF_MEMORY;
    fd_ws.opart = opart;
    fd_ws.lpart = lpart;
    fd_ws.ncount = ncount;
    return ATTN_OK;
}

template <typename T, int D, int BC, int WR, int MT>
static int fd_launch(const attn_args *a) {
    constexpr int smem = fd_smem_bytes<D, BC, WR, MT, FD_STAGES>();
    auto kernel = fd_split_kernel<T, D, BC, WR, MT, FD_STAGES>;
    static long long slots = 0, sm_count = 0; /* blocks resident at once (SMs x blocks per SM); SMs */
    if (!slots) {
        int dev = 0, optin = 0, sms = 0, per_sm = 0;
        if (cudaGetDevice(&dev) != cudaSuccess ||
            cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) != cudaSuccess ||
            cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess || smem > optin)
            return ATTN_UNSUPPORTED;
        if (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem) != cudaSuccess ||
            cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, FD_THREADS, smem) != cudaSuccess ||
            per_sm < 1)
            return ATTN_UNSUPPORTED;
        slots = (long long)sms * per_sm;
        sm_count = sms;
    }
    const int G = a->H / a->H_kv, R = G * a->N, forced = fd_forced_splits(), merge = fd_merge_mode(), rule = fd_rule();
    if (forced < 0 || merge < 0 || rule < 0) return ATTN_UNSUPPORTED;
    /* The wave rule counts one slot per SM, not every resident block: this kernel streams K
     * and V, and a second block on an SM adds little bandwidth but one more partial for the
     * merge (make decode-sweep, rule=resident; the lesson's "How many splits"). */
    const FdPlan p = fd_make_plan(a->B, a->H_kv, R, a->N_kv, BC, rule == FD_RULE_WAVE ? sm_count : slots, forced, rule);
    if (p.blocks > 0x7fffffffLL) return ATTN_UNSUPPORTED;
    FdArgs<T> args;
    args.Q = (const T *)a->Q; args.K = (const T *)a->K; args.V = (const T *)a->V;
    args.O = (T *)a->O; args.L = a->L; args.seqlens = a->seqlens_kv;
    args.H = a->H; args.H_kv = a->H_kv; args.N = a->N; args.N_kv = a->N_kv;
    args.G = G; args.R = R; args.n_rc = p.n_rc; args.S = p.S; args.chunk = p.chunk; args.causal = a->causal;
    args.scale_log2 = a->scale * 1.4426950408889634f;
    args.merge_kernel = p.S > 1 && merge > 0;
    args.pdl = args.merge_kernel && merge == 2 && fd_major >= 9;
    args.Opart = args.Lpart = NULL;
    args.count = NULL;
    if (p.S > 1) {
        const size_t groups = (size_t)a->B * a->H_kv;
        const int rc = fd_workspace(groups * p.S * R * D, groups * p.S * R, groups * p.n_rc, (cudaStream_t)a->stream);
        if (rc != ATTN_OK) return rc;
        args.Opart = fd_ws.Opart; args.Lpart = fd_ws.Lpart; args.count = fd_ws.count;
    }
    static bool shown = false; /* FD_PLAN=1: say what the first launch does (bench/decode_sweep.sh) */
    if (!shown && getenv("FD_PLAN")) {
        shown = true;
        fprintf(stderr, "fd-plan: %d split(s) of %d keys, %lld blocks of %d threads, %d B of shared memory, "
                "%lld resident at once, merge by %s\n", p.S, p.chunk, p.blocks, FD_THREADS, smem, slots,
                p.S == 1 ? "none" : args.pdl ? "a PDL kernel" : args.merge_kernel ? "a kernel" : "the last block");
    }
    kernel<<<(unsigned)p.blocks, FD_THREADS, smem, (cudaStream_t)a->stream>>>(args);
#ifdef FD_TRACE
    if (!fd_trace_blocks) atexit(fd_trace_report);
    fd_trace_blocks = p.blocks;
#endif
    if (!args.merge_kernel) return ATTN_OK;
    /* FD_MERGE=kernel / pdl: one block per row chunk of a group */
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute attr[1];
    cfg.gridDim = dim3((unsigned)(p.blocks / p.S));
    cfg.blockDim = dim3(FD_THREADS);
    cfg.dynamicSmemBytes = WR * MT * 16 * sizeof(float);
    cfg.stream = (cudaStream_t)a->stream;
    if (args.pdl) {
        attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
        attr[0].val.programmaticStreamSerializationAllowed = 1;
        cfg.attrs = attr;
        cfg.numAttrs = 1;
    }
    if (cudaLaunchKernelEx(&cfg, fd_merge_kernel<T, D, WR * MT * 16>, args) != cudaSuccess) {
        fprintf(stderr, "flash decoding: the launch of the merge kernel failed (FD_MERGE)\n");
        return ATTN_UNSUPPORTED;
    }
    return ATTN_OK;
}

template <typename T, int D, int BC>
static int fd_dispatch(const attn_args *a) {
    int WR, MT;
    fd_rows_config(a->H / a->H_kv * a->N, &WR, &MT);
    if (MT == 2) return fd_launch<T, D, BC, 4, 2>(a);
    if (WR == 4) return fd_launch<T, D, BC, 4, 1>(a);
    if (WR == 2) return fd_launch<T, D, BC, 2, 1>(a);
    return fd_launch<T, D, BC, 1, 1>(a);
}

/* TODO(0): set to 0 when you have written TODO(1)..TODO(5); the grader then grades you. */
#define STARTER_NOT_DONE 1

/* Entry point (reference/include/attention.h): fp16/bf16, d = 64 or 128, H_kv dividing H, scale > 0,
 * sm_80 or newer; anything else is ATTN_UNSUPPORTED. */
int attention_forward(const attn_args *a) {
    if (STARTER_NOT_DONE) return ATTN_NOT_IMPLEMENTED;
    if (fd_major < 0) {
        int dev = 0;
        if (cudaGetDevice(&dev) != cudaSuccess ||
            cudaDeviceGetAttribute(&fd_major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess)
            fd_major = 0;
    }
    if (fd_major < 8 || !(a->scale > 0.f) || a->H_kv < 1 || a->H % a->H_kv || a->N_kv < 1) return ATTN_UNSUPPORTED;
    if (a->N < 1 || a->B < 1 || a->H < 1) return ATTN_OK;
    const int fp16 = a->dtype == DTYPE_FP16, bf16 = a->dtype == DTYPE_BF16;
    if (a->d == 64 && fp16) return fd_dispatch<__half, 64, FD64_BC>(a);
    if (a->d == 64 && bf16) return fd_dispatch<__nv_bfloat16, 64, FD64_BC>(a);
    if (a->d == 128 && fp16) return fd_dispatch<__half, 128, FD128_BC>(a);
    if (a->d == 128 && bf16) return fd_dispatch<__nv_bfloat16, 128, FD128_BC>(a);
    return ATTN_UNSUPPORTED;
}
// [end host]

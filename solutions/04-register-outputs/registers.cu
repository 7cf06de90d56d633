//| /* Lesson 04: FlashAttention with the outputs held in registers, fp32.
//|  * Build and grade: make lesson4 && ./lesson4      (the lesson text: README.md here)
// solution begin
/* Lesson 04 (solution): FlashAttention with the outputs held in registers, fp32.
// solution end
 *
 * Source: FlashAttention-2 (Dao, 2023), Algorithm 1 (forward pass), lines 3-16, with the
 * work split of its section 3.3: each warp owns a slice of the query rows from start to
 * end, so the softmax state never has to be shared between warps.
 *
 * Same loop nest as lesson 03. What moves: O_i, m and l leave shared memory. Every thread
 * keeps its share of them in fixed-size local arrays that are only ever indexed by
 * compile-time constants (fully unrolled loops), so the compiler assigns each element
 * its own register. The score tile S stays in registers too; only P goes through shared
 * memory, and only within one warp.
 *
 * Work split of one block (Br = 64 query rows, 4 warps, 128 threads):
 *   warp w owns rows 16w .. 16w+15 of the tile;
 *   inside the warp, lane = 8*g + t: group g (0..3) owns rows 16w + g + 4*i (i = 0..3),
 *   and its 8 lanes t split the work of those 4 rows:
 *     S:  lane t computes the scores of keys t, t+8, t+16, t+24 (Bc = 32) of its 4 rows
 *     O:  lane t owns columns 4t..4t+3, 32+4t..32+4t+3, ... (D/8 columns) of its 4 rows
 *   so a thread holds a 4 x 4 block of S and a 4 x D/8 block of O, and every float it
 *   reads from shared memory feeds 4 to 16 multiply-adds (register blocking, as in a
 *   tiled SGEMM). Per multiply-add this kernel asks shared memory for about a quarter of
 *   what lesson 03 asked for.
 * Per K/V tile there are two __syncthreads() (around the K_j, V_j load) and one
 * __syncwarp() (P written, P read by the same warp). Lesson 03 had four.
 *
 * Scores are kept in the base-2 domain (S * scale * log2 e, exp2f), as in lesson 03.
 */
#include <cuda_runtime.h>
#include <math.h>

#include "attention.h"

const lesson_info LESSON = {4, "04-register-outputs",
                            "outputs in registers: each warp owns its query rows",
                            DTYPE_BIT(DTYPE_FP32), 0, {64, 128, 0}};

// [region tiles]
constexpr int WARPS = 4;
constexpr int THREADS = 32 * WARPS;   // 128
constexpr int GROUPS = 4;             // row groups per warp
constexpr int GLANES = 32 / GROUPS;   // 8 lanes share a row group
constexpr int TR = 4;                 // rows per thread (one row group)
constexpr int Br = WARPS * GROUPS * TR;  // 64 query rows per block

constexpr int Bc = 32;                 // key/value rows per tile

// Blocks per SM the compiler must leave registers for, which caps registers per thread
// at 65536 / (MIN_BLOCKS * 128): 168 and 255. d = 64: 3 blocks; asking for 4 (a cap of
// 128) makes ptxas spill, though shared memory (44 KB per block) would allow 5.
// d = 128: 2 blocks; 3 x 76 KB of shared memory would not fit in an SM's 228 KB.
// The experiment `make ptxas-lesson4-4blocks` compiles with -DMIN_BLOCKS_D64=4 (128 registers).
#ifndef MIN_BLOCKS_D64
#define MIN_BLOCKS_D64 3
#endif
template <int D> struct Config;
template <> struct Config<64>  { static constexpr int MIN_BLOCKS = MIN_BLOCKS_D64; };
template <> struct Config<128> { static constexpr int MIN_BLOCKS = 2; };

// Row pitches. Q, K: +4 floats, so 4 (or 8) lanes reading 16 bytes each from consecutive
// rows start in different banks and rows stay 16-byte aligned. V: every warp read hits a
// single row, no pad needed. P: +8 floats, so the 4 row groups of a warp (rows g) start
// 8 banks apart: 32 lanes writing P[g + 4i][t + 8c] hit 32 different banks.
template <int D>
struct SharedTiles {
    float Q[Br][D + 4];
    float K[Bc][D + 4];
    float V[Bc][D];
    float P[Br][Bc + 8];
};
// [end tiles]

constexpr float LN2 = 0.693147180559945309f;
//|
//| /* TODO(0): set to 0 when you have written TODO(1)..TODO(5); the grader then grades you. */
//| #define STARTER_NOT_DONE 1

/* Copies rows [row0, row0 + ROWS) of one [N, D] row-major fp32 matrix into a shared tile
 * with row pitch PITCH floats, all THREADS threads cooperating, 16 bytes per thread and
 * consecutive threads on consecutive bytes (coalesced). Rows >= N become zeros (the
 * inputs are surrounded by NaN guards; 0 * NaN would poison O). src 16-byte aligned. */
template <int D, int ROWS, int PITCH>
__device__ __forceinline__ void load_rows(float *dst, const float *__restrict__ src, int row0, int N) {
    constexpr int VEC_PER_ROW = D / 4;
    static_assert(ROWS * VEC_PER_ROW % THREADS == 0, "tile must split evenly over the block");
#pragma unroll
    for (int it = 0; it < ROWS * VEC_PER_ROW / THREADS; ++it) {
        const int v = it * THREADS + threadIdx.x;
        const int r = v / VEC_PER_ROW, c = (v % VEC_PER_ROW) * 4;
        float4 x = make_float4(0.f, 0.f, 0.f, 0.f);
        if (row0 + r < N) x = *reinterpret_cast<const float4 *>(src + (size_t)(row0 + r) * D + c);
        *reinterpret_cast<float4 *>(dst + r * PITCH + c) = x;
    }
}

/* acc + a * b, component by component: four running sums per dot product, added at the
 * end. Why not one sum: with logits around +-100, one fp32 chain of d multiply-adds loses
 * enough bits to fail the grader's tolerance (lesson 03's text has the numbers). */
__device__ __forceinline__ float4 fma4(float4 a, float4 b, float4 acc) {
    return make_float4(fmaf(a.x, b.x, acc.x), fmaf(a.y, b.y, acc.y), fmaf(a.z, b.z, acc.z),
                       fmaf(a.w, b.w, acc.w));
}
__device__ __forceinline__ float sum4(float4 a) { return (a.x + a.y) + (a.z + a.w); }

// Max / sum over the 8 lanes of a row group (lanes that differ only in bits 0-2).
__device__ __forceinline__ float group_max(float x) {
#pragma unroll
    for (int off = GLANES / 2; off > 0; off /= 2) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, off));
    return x;
}
__device__ __forceinline__ float group_sum(float x) {
#pragma unroll
    for (int off = GLANES / 2; off > 0; off /= 2) x += __shfl_xor_sync(0xffffffffu, x, off);
    return x;
}

/* Forward pass, one block per (query tile, head, batch).
 *   Q, K, V, O : [B, H, N, D] row-major fp32 (device), 16-byte aligned
 *   L          : [B, H, N] fp32, natural-log logsumexp of each scaled score row
 *   scale_log2 : softmax scale * log2(e)
 *   d_runtime  : D again, as a run-time value; only the -DRUNTIME_INDEX experiment reads it
 * Grid (Tr, H, B), Tr = ceil(N / Br); THREADS threads; sizeof(SharedTiles<D>) bytes of
 * dynamic shared memory. Any N >= 1. */
template <int D>
__global__ void __launch_bounds__(THREADS, Config<D>::MIN_BLOCKS)
flash_registers_kernel(const float *__restrict__ Q, const float *__restrict__ K,
                       const float *__restrict__ V, float *__restrict__ O, float *__restrict__ L,
                       int N, float scale_log2, int d_runtime) {
    constexpr int SPT = Bc / GLANES;  // scores per thread per row: keys t + 8c
    constexpr int CPT = D / GLANES;   // output columns per thread per row
    extern __shared__ float4 smem_raw[];
    SharedTiles<D> &sm = *reinterpret_cast<SharedTiles<D> *>(smem_raw);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int g = lane / GLANES, t = lane % GLANES;
    const int row0 = blockIdx.x * Br;
    const size_t head = (size_t)blockIdx.z * gridDim.y + blockIdx.y;  // b * H + h
    const float *Qh = Q + head * N * D, *Kh = K + head * N * D, *Vh = V + head * N * D;
    // Tile-local row of this thread's i-th row. Consecutive groups take consecutive rows
    // so that the 4 different Q and P rows one warp instruction reads sit in different banks.
    auto my_row = [&](int i) { return warp * (GROUPS * TR) + g + GROUPS * i; };

    load_rows<D, Br, D + 4>(&sm.Q[0][0], Qh, row0, N);

    // [region state]
    // Algorithm 1, line 5, in registers: this thread's 4 x CPT slice of O_i, and m, l of its
    // 4 rows. l is this lane's partial sum over its own keys; the 8 partial sums of a row are
    // added once, at the end (they are all rescaled by the same alpha, so that is exact math).
    float o[TR][CPT];
    float m[TR], l[TR];
#pragma unroll
    for (int i = 0; i < TR; ++i) {
        m[i] = -INFINITY;
        l[i] = 0.f;
#pragma unroll
        for (int c = 0; c < CPT; ++c) o[i][c] = 0.f;
    }
    // [end state]

    const int Tc = (N + Bc - 1) / Bc;
    for (int j = 0; j < Tc; ++j) {
        const int key0 = j * Bc;
        // Barrier 1: all warps are done with K_j-1 and V_j-1 (and P) before the overwrite.
        __syncthreads();
        load_rows<D, Bc, D + 4>(&sm.K[0][0], Kh, key0, N);
        load_rows<D, Bc, D>(&sm.V[0][0], Vh, key0, N);
        // Barrier 2: K_j, V_j (and on j = 0, Q_i) are complete.
        __syncthreads();

        // TODO(1) begin
        // [region scores]
        // Line 8: this thread's 4 x SPT block of S = Q_i K_j^T, in registers. Per 4 columns
        // of d: 4 float4 reads of Q, SPT float4 reads of K, 16 * SPT multiply-adds.
        float4 acc[TR][SPT];
#pragma unroll
        for (int i = 0; i < TR; ++i)
#pragma unroll
            for (int c = 0; c < SPT; ++c) acc[i][c] = make_float4(0.f, 0.f, 0.f, 0.f);
        // Rolled on purpose: fully unrolled, the hoisted loads of later steps exceed the
        // register cap of __launch_bounds__ and ptxas spills at d = 64.
#pragma unroll 1
        for (int k = 0; k < D; k += 4) {
            float4 q[TR];
#pragma unroll
            for (int i = 0; i < TR; ++i) q[i] = *reinterpret_cast<const float4 *>(&sm.Q[my_row(i)][k]);
#pragma unroll
            for (int c = 0; c < SPT; ++c) {
                const float4 kv = *reinterpret_cast<const float4 *>(&sm.K[t + GLANES * c][k]);
#pragma unroll
                for (int i = 0; i < TR; ++i) acc[i][c] = fma4(q[i], kv, acc[i][c]);
            }
        }
        float s[TR][SPT];
#pragma unroll
        for (int i = 0; i < TR; ++i)
#pragma unroll
            for (int c = 0; c < SPT; ++c) s[i][c] = sum4(acc[i][c]) * scale_log2;
        // [end scores]
        // TODO(1) end
        //| // Line 8: this thread's 4 x SPT block of S = Q_i K_j^T, in registers.
        //| float s[TR][SPT] = {};
        //| /* TODO(1): the scores of this thread's TR rows (my_row(i)) against its SPT keys
        //|  * (t + GLANES * c) of the tile, in base-2 units (times scale_log2), into s[i][c], from
        //|  * sm.Q and sm.K. Four partial sums per dot product (fma4, sum4); every loaded float4
        //|  * used for all the multiply-adds that need it; every array index a compile-time
        //|  * constant and no spill (make ptxas-lesson4). README: "Register blocking: why this is
        //|  * faster". */
        // [region mask]
        // Keys past the end of the sequence get a score of -inf. Only the last tile can
        // hold such keys; the test is the same for every thread, so the branch is free.
        if (key0 + Bc > N) {
#pragma unroll
            for (int c = 0; c < SPT; ++c)
                if (key0 + t + GLANES * c >= N)
#pragma unroll
                    for (int i = 0; i < TR; ++i) s[i][c] = -INFINITY;
        }
        // [end mask]

        // solution begin
        // [region online-softmax]
        // solution end
        // Line 9 for each of the 4 rows: the row max needs all 8 lanes of the group (3
        // shuffles); the row sum does not (l stays a per-lane partial sum).
#pragma unroll
        for (int i = 0; i < TR; ++i) {
            // TODO(2) begin
            float mx = s[i][0];
#pragma unroll
            for (int c = 1; c < SPT; ++c) mx = fmaxf(mx, s[i][c]);
            // Finite from tile 0 on: key 0 is valid for every row, so exp2 never sees inf - inf.
            const float m_new = fmaxf(m[i], group_max(mx));
            const float alpha = exp2f(m[i] - m_new);  // 0 on tile 0 (m = -inf)
            m[i] = m_new;
            float sum = 0.f;
#pragma unroll
            for (int c = 0; c < SPT; ++c) {
                s[i][c] = exp2f(s[i][c] - m_new);  // S becomes P in place
                sum += s[i][c];
            }
            l[i] = alpha * l[i] + sum;
            // TODO(2) end
            //| float alpha = 1.f;
            //| /* TODO(2): the online-softmax update of row i: its max over the whole tile row (all 8
            //|  * lanes of the row group must agree on it), m[i] and alpha, s[i][..] turned into P in
            //|  * place, and this lane's partial sum l[i] (the 8 partial sums are added in TODO(5)).
            //|  * The loop below then rescales this thread's O by alpha. README: "The softmax, in
            //|  * registers", "Partial sums of l". */
            // [region rescale]
#ifdef RUNTIME_INDEX
            // Lesson 04's experiment (make ptxas-lesson4-runtime-index): the same loop,
            // but its trip count is a run-time value. Now c is not known when the code is
            // compiled, o[i][c] cannot name a fixed register, and the compiler must put the
            // whole array o in local memory (the stack frame) and load/store it there.
            const int ncols = d_runtime / GLANES;
#else
            constexpr int ncols = CPT;
#endif
#pragma unroll
            for (int c = 0; c < ncols; ++c) o[i][c] *= alpha;
            // [end rescale]
        }
        // solution begin
        // [end online-softmax]
        // solution end

        // TODO(3) begin
        // [region p-to-smem]
        // P goes through shared memory because the thread that computed P[r][key] is not
        // the one that needs it for O (each lane needs all Bc keys of its rows). Only the
        // 8 lanes of the same group, same warp, read it: a __syncwarp() is enough.
#pragma unroll
        for (int i = 0; i < TR; ++i)
#pragma unroll
            for (int c = 0; c < SPT; ++c) sm.P[my_row(i)][t + GLANES * c] = s[i][c];
        __syncwarp();
        // [end p-to-smem]
        // TODO(3) end
        //| /* TODO(3): put this thread's P values where the lanes of TODO(4) read them (sm.P, row
        //|  * my_row(i), column t + GLANES * c), and order those stores before the reads.
        //|  * README: "P changes hands within the warp". */

        // TODO(4) begin
        // [region pv]
        // Line 10: O_i += P V_j on this thread's 4 x CPT block. Per 4 keys: 4 float4 reads
        // of P, 4 * D/32 float4 reads of V, 16 * CPT multiply-adds. Rolled like the S loop
        // (unrolled, this one alone does not spill with nvcc 13.0).
#pragma unroll 1
        for (int k = 0; k < Bc; k += 4) {
            float4 p[TR];
#pragma unroll
            for (int i = 0; i < TR; ++i) p[i] = *reinterpret_cast<const float4 *>(&sm.P[my_row(i)][k]);
#pragma unroll
            for (int u = 0; u < 4; ++u) {
#pragma unroll
                for (int q4 = 0; q4 < D / 32; ++q4) {
                    const float4 v = *reinterpret_cast<const float4 *>(&sm.V[k + u][4 * t + 32 * q4]);
#pragma unroll
                    for (int i = 0; i < TR; ++i) {
                        const float pu = u == 0 ? p[i].x : u == 1 ? p[i].y : u == 2 ? p[i].z : p[i].w;
                        o[i][4 * q4 + 0] = fmaf(pu, v.x, o[i][4 * q4 + 0]);
                        o[i][4 * q4 + 1] = fmaf(pu, v.y, o[i][4 * q4 + 1]);
                        o[i][4 * q4 + 2] = fmaf(pu, v.z, o[i][4 * q4 + 2]);
                        o[i][4 * q4 + 3] = fmaf(pu, v.w, o[i][4 * q4 + 3]);
                    }
                }
            }
        }
        // [end pv]
        // TODO(4) end
        //| /* TODO(4): line 10, O_i += P V_j on this thread's TR x CPT block of O (row my_row(i);
        //|  * columns 4 * t + 32 * q4 .. + 3 are o[i][4 * q4 .. 4 * q4 + 3]), from sm.P and sm.V.
        //|  * Read P and V as float4s, each loaded once and used for every multiply-add that needs
        //|  * it; every o index a compile-time constant; no spill. README: "Register blocking: why
        //|  * this is faster". */
    }

    // TODO(5) begin
    // [region epilogue]
    // Lines 12-15: add up the 8 partial row sums, divide, one coalesced float4 write per
    // row and column group; lane t = 0 of each group writes L = m * ln2 + ln(l).
    float *Oh = O + head * N * D;
#pragma unroll
    for (int i = 0; i < TR; ++i) {
        const float l_row = group_sum(l[i]);  // >= 1: the max key contributes exp2(0)
        const int row = row0 + my_row(i);
        if (row < N) {
            const float inv_l = 1.f / l_row;
#pragma unroll
            for (int q4 = 0; q4 < D / 32; ++q4)
                *reinterpret_cast<float4 *>(Oh + (size_t)row * D + 4 * t + 32 * q4) =
                    make_float4(o[i][4 * q4] * inv_l, o[i][4 * q4 + 1] * inv_l,
                                o[i][4 * q4 + 2] * inv_l, o[i][4 * q4 + 3] * inv_l);
            if (t == 0) L[head * N + row] = m[i] * LN2 + logf(l_row);
        }
    }
    // [end epilogue]
    // TODO(5) end
    //| /* TODO(5): lines 12-15. Per row: l from the 8 partial sums of the row group (a shuffle
    //|  * every lane must reach), then for rows < N this thread's columns of O divided by it
    //|  * (float4 stores into this head's slice of O) and, from one lane of the group, L in
    //|  * natural-log units. README: "Partial sums of l", "The softmax, in registers". */
    //| (void)O; (void)L; (void)LN2;
}

/* Launches on a->stream. d = 128 needs 75.5 KB of dynamic shared memory, above the 48 KB
 * default, so the kernel opts in first (sm_80 or newer; sm_75 allows 64 KB per block and
 * the launch fails there). d = 64 needs 43.5 KB; asking anyway costs nothing. */
template <int D>
static int launch(const attn_args *a) {
    const size_t smem = sizeof(SharedTiles<D>);
    cudaFuncSetAttribute(flash_registers_kernel<D>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
    const dim3 grid((a->N + Br - 1) / Br, a->H, a->B);
    flash_registers_kernel<D><<<grid, THREADS, smem, (cudaStream_t)a->stream>>>(
        (const float *)a->Q, (const float *)a->K, (const float *)a->V, (float *)a->O, a->L, a->N,
        a->scale * 1.4426950408889634f, a->d);
    return ATTN_OK;
}

int attention_forward(const attn_args *a) {
    //| if (STARTER_NOT_DONE) return ATTN_NOT_IMPLEMENTED;
    if (a->dtype != DTYPE_FP32 || a->causal) return ATTN_UNSUPPORTED;
    if (a->d == 64) return launch<64>(a);
    if (a->d == 128) return launch<128>(a);
    return ATTN_UNSUPPORTED;
}

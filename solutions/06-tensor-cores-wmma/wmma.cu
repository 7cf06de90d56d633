//| /* Lesson 06 (starter): FlashAttention-2 forward on tensor cores with nvcuda::wmma.
//|  *
//|  * What is here: the tiles and shared-memory layout, the loads of Q_i, K_j, V_j, causal
//|  * block skipping, the masking of the diagonal and ragged tiles, the fp32 -> 16-bit store
//|  * of O, and the launch. What you write: TODO(1) to TODO(6), numbered in the order README.md
//|  * explains them (TODO(3), scale_rows, sits above the kernel), then TODO(0).
// solution begin
/* Lesson 06 (solution): FlashAttention-2 forward on tensor cores with nvcuda::wmma.
// solution end
 *
 * Source: FlashAttention-2 (Dao, 2023), Algorithm 1 (forward pass). The loop nest is the
 * one from lessons 03-05; what changes is who does the two matrix products:
 *   S = Q_i K_j^T  (line 8)  and  O_i += P V_j  (line 10)
 * are now 16x16x16 tensor-core operations issued by a whole warp at a time.
 *
 * Work split (one thread block = one Q tile of Br = 64 rows, 4 warps):
 *   warp w owns rows [16w, 16w + 16) of the tile from start to end. It computes its own
 *   16 x Bc slice of S, runs the online softmax on those 16 rows, and keeps its 16 x d slice
 *   of O in wmma accumulator fragments (registers) across all K/V tiles. The only data the
 *   warps share is the K_j, V_j tile in shared memory, so the only block barriers are the
 *   two around loading it.
 *
 * The price of wmma: its accumulator layout is opaque, so the per-row softmax cannot be
 * done in registers. Each warp stores its S slice to shared memory (fp32), does the softmax
 * there, and writes P back as 16-bit values for the second product. Lessons 07-08 remove
 * this round trip (mma.sync with a documented register layout, ldmatrix, cp.async).
 */
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <mma.h>
#include <stdint.h>
#include <type_traits>

#include "attention.h"
//|
//| /* TODO(0): set to 0 when you have written TODO(1)..TODO(6); the grader then grades you. */
//| #define STARTER_NOT_DONE 1

using namespace nvcuda;

const lesson_info LESSON = {
    6,
    "06-tensor-cores-wmma",
    "tensor cores with wmma: one warp per 16 query rows",
    DTYPE_BIT(DTYPE_FP16) | DTYPE_BIT(DTYPE_BF16),
    1,
    {64, 128, 0},
};

// [region tiles]
constexpr int Br = 64;               // query rows per thread block (Q_i)
constexpr int Bc = 64;               // key/value rows per tile (K_j, V_j)
constexpr int WM = 16;               // wmma tile edge: 16x16x16
constexpr int WARPS = Br / WM;       // one warp per 16-row slice of Q_i
constexpr int THREADS = 32 * WARPS;  // 128
constexpr int PAD = 8;               // 16 bytes of padding per 16-bit row, 8 floats per fp32 row

// Shared-memory layout for head dimension D, in bytes. Row strides are padded so that
// the 8 rows one ldmatrix phase touches start in 8 different 16-byte bank groups.
template <int D>
struct Smem {
    static constexpr int DP = D + PAD;     // row stride of Q_i, K_j, V_j tiles (elements)
    static constexpr int SLD = Bc + PAD;   // row stride of a warp's S slice (floats)
    static constexpr int PLD = Bc + PAD;   // row stride of a warp's P slice (16-bit elements)
    static constexpr int FLD = WM + PAD;   // row stride of a warp's 16x16 row-factor tile (floats)
    static constexpr int q = 0;                          // Q_i  [Br][DP]  16-bit
    static constexpr int k = q + Br * DP * 2;            // K_j  [Bc][DP]  16-bit
    static constexpr int v = k + Bc * DP * 2;            // V_j  [Bc][DP]  16-bit
    static constexpr int s = v + Bc * DP * 2;            // per warp: S [16][SLD] fp32, see below
    static constexpr int bytes = s + WARPS * WM * SLD * 4;
    // Inside a warp's S buffer, once S has been read: P [16][PLD] 16-bit at byte 0, and the
    // row-factor tile F [16][FLD] fp32 right after it.
    static constexpr int f_in_s = WM * PLD * 2;
    static_assert(f_in_s % 32 == 0 && f_in_s + WM * FLD * 4 <= WM * SLD * 4, "P and F fit in S");
};
// [end tiles]

// Several blocks per SM hide each other's global-load latency and barriers (there is no
// software pipelining in this lesson). These are the residencies the shared memory allows
// on an H100 (228 KB per SM, 1 KB of it reserved per block): 3 x 69 KB for d = 128,
// 4 x 45 KB for d = 64. They also cap the registers per thread at 168 and 128.
template <int D>
struct MinBlocks { static constexpr int value = D == 64 ? 4 : 3; };

// Which kernels are compiled for real on the architecture being compiled for: wmma has
// bf16 fragments only from sm_80 on, and below sm_80 a block cannot have the 69 KB that
// d = 128 needs. The host never launches the others (attention_forward checks the device).
template <typename T, int D>
struct Built {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
    static constexpr bool value = !std::is_same<T, __nv_bfloat16>::value && D == 64;
#else
    static constexpr bool value = true;
#endif
};

// Four fp32 values rounded to the 16-bit type T, packed for one 8-byte store.
__device__ __forceinline__ uint2 pack4(__half, float a, float b, float c, float d) {
    __half2 lo = __floats2half2_rn(a, b), hi = __floats2half2_rn(c, d);
    return make_uint2(*reinterpret_cast<uint32_t *>(&lo), *reinterpret_cast<uint32_t *>(&hi));
}
__device__ __forceinline__ uint2 pack4(__nv_bfloat16, float a, float b, float c, float d) {
    __nv_bfloat162 lo = __floats2bfloat162_rn(a, b), hi = __floats2bfloat162_rn(c, d);
    return make_uint2(*reinterpret_cast<uint32_t *>(&lo), *reinterpret_cast<uint32_t *>(&hi));
}

/* Copy rows [row0, row0 + 64) of a [N, D] row-major 16-bit matrix into a [64][DP]
 * shared tile (Q_i, K_j or V_j: Br = Bc = 64) with 16-byte vectors, all THREADS threads cooperating. Rows >= N are written
 * as zeros: a K row of zeros gives a finite score (masked later), a V row of zeros
 * contributes nothing even if its P were not exactly 0, and garbage could be NaN. */
// [region load-tile]
template <typename T, int D>
__device__ __forceinline__ void load_tile(T *dst, const T *__restrict__ src, int row0, int N) {
    constexpr int VPR = D / 8;            // 16-byte vectors per row
    constexpr int ITERS = 64 * VPR / THREADS;
    static_assert(Br == 64 && Bc == 64 && 64 * VPR % THREADS == 0, "64-row tiles, split evenly");
#pragma unroll
    for (int it = 0; it < ITERS; ++it) {
        const int vec = it * THREADS + threadIdx.x;  // consecutive threads, consecutive 16 B
        const int r = vec / VPR, c = (vec % VPR) * 8;
        uint4 val = make_uint4(0u, 0u, 0u, 0u);
        if (row0 + r < N) val = *reinterpret_cast<const uint4 *>(src + (size_t)(row0 + r) * D + c);
        *reinterpret_cast<uint4 *>(dst + r * Smem<D>::DP + c) = val;
    }
}
// [end load-tile]

/* O <- diag(factor) O for the 16 rows of a warp's accumulators o[0..DF), where lanes 2r and
 * 2r+1 both hold the factor of row r. wmma does not tell which row an accumulator element
 * belongs to, but every accumulator fragment of one type uses the same element order: so
 * the factors are spread over a 16x16 tile F (row r = factor of row r, in all 16 columns),
 * F is loaded as an accumulator, and element e of F scales element e of every o[n].
 * F: [16][ld] fp32 in shared memory, 32-byte aligned, not being read by any lane. */
// [region scale-rows]
template <int DF, typename FragAcc>
__device__ __forceinline__ void scale_rows(FragAcc (&o)[DF], float *F, int ld, float factor,
                                           int r, int half) {
    // TODO(3) begin
    //| // TODO(3): multiply row r of every accumulator o[n] by `factor` (held by lanes 2r and
    //| //   2r+1) without assuming any fragment layout: spread the factors over the 16x16 tile F
    //| //   (row r = factor, all 16 columns), make F visible to the warp, load it as an
    //| //   accumulator (every lane makes the call), and scale element by element.
    //| //   README: "Rescaling O without knowing the layout".
    const float4 f4 = make_float4(factor, factor, factor, factor);
    *reinterpret_cast<float4 *>(F + r * ld + 8 * half) = f4;  // lane `half` fills 8 columns
    *reinterpret_cast<float4 *>(F + r * ld + 8 * half + 4) = f4;
    __syncwarp();  // F is complete for the whole warp
    FragAcc f;
    wmma::load_matrix_sync(f, F, ld, wmma::mem_row_major);
#pragma unroll
    for (int n = 0; n < DF; ++n)
#pragma unroll
        for (int e = 0; e < f.num_elements; ++e) o[n].x[e] *= f.x[e];
    // TODO(3) end
}
// [end scale-rows]

/* One thread block's share of the forward pass: Q tile q_tile of head blockIdx.x.
 *   Q, K, V, O : [B, H, N, D] row-major, 16-bit type T (__half or __nv_bfloat16)
 *   L          : [B, H, N] fp32, natural-log logsumexp of each scaled score row
 *   scale_log2 : softmax scale times log2(e); scores live in the base-2 domain so that
 *                exp(x) costs one exp2f (the hardware's ex2) per element
 * Preconditions: N >= 1, D in {64, 128}, Q, K, V, O 16-byte aligned, Smem<D>::bytes of
 * dynamic shared memory, THREADS threads. FlashAttention-2 Algorithm 1, lines 4-15. */
template <typename T, int D>
__device__ __forceinline__ void attention_wmma_block(
    const T *__restrict__ Q, const T *__restrict__ K, const T *__restrict__ V,
    T *__restrict__ O, float *__restrict__ L, int N, int causal, float scale_log2, int q_tile) {
    using S_ = Smem<D>;
    constexpr int DP = S_::DP, SLD = S_::SLD, PLD = S_::PLD, FLD = S_::FLD;
    constexpr int DF = D / WM;  // 16-column fragments across the head dimension
    constexpr int NF = Bc / WM; // 16-column fragments across a K/V tile

    // [region fragments]
    // A fragment is one 16x16 tile spread over the registers of the 32 threads of a warp.
    // Its template arguments fix its role in D = A*B + C, the shape, the element type and,
    // for A and B, how the tile is laid out in the memory it is loaded from.
    using FragQ = wmma::fragment<wmma::matrix_a, WM, WM, WM, T, wmma::row_major>;
    using FragK = wmma::fragment<wmma::matrix_b, WM, WM, WM, T, wmma::col_major>;
    using FragP = wmma::fragment<wmma::matrix_a, WM, WM, WM, T, wmma::row_major>;
    using FragV = wmma::fragment<wmma::matrix_b, WM, WM, WM, T, wmma::row_major>;
    using FragAcc = wmma::fragment<wmma::accumulator, WM, WM, WM, float>;
    // [end fragments]

    extern __shared__ __align__(128) unsigned char smem[];
    T *Qs = reinterpret_cast<T *>(smem + S_::q);
    T *Ks = reinterpret_cast<T *>(smem + S_::k);
    T *Vs = reinterpret_cast<T *>(smem + S_::v);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    unsigned char *wbuf = smem + S_::s + warp * (WM * SLD * 4);  // this warp's private buffer
    float *Sw = reinterpret_cast<float *>(wbuf);                 // S slice   [16][SLD] fp32
    T *Pw = reinterpret_cast<T *>(wbuf);                         // P slice   [16][PLD] 16-bit
    float *Fw = reinterpret_cast<float *>(wbuf + S_::f_in_s);   // row factors [16][FLD] fp32

    const int q0 = q_tile * Br;
    const size_t head = (size_t)blockIdx.x * N;
    Q += head * D; K += head * D; V += head * D; O += head * D; L += head;

    // Line 4: Q_i is loaded once; every K_j tile reads it from shared memory.
    load_tile<T, D>(Qs, Q, q0, N);

    // Line 5. The softmax statistics of row r of the warp's slice live in lanes 2r and 2r+1
    // (both keep a copy); O lives in DF accumulator fragments, in registers, until the end.
    FragAcc o[DF];
#pragma unroll
    for (int n = 0; n < DF; ++n) wmma::fill_fragment(o[n], 0.0f);
    const int r = lane / 2, half = lane % 2;
    const int row = q0 + warp * WM + r;  // global query row of this lane's softmax row
    float m_run = -INFINITY, l_run = 0.0f;
    //| (void)DP, (void)PLD, (void)FLD, (void)Pw, (void)m_run, (void)l_run;  // used by the TODOs

    // [region causal]
    // Causal block skipping (lesson 05): key tiles entirely above the diagonal are never
    // loaded; only a tile that straddles the diagonal or the end of the sequence is masked.
    const int kv_end = causal ? min(N, q0 + Br) : N;
    const int Tc = (kv_end + Bc - 1) / Bc;
    // [end causal]

    for (int j = 0; j < Tc; ++j) {  // line 6
        const int k0 = j * Bc;
        __syncthreads();  // every warp is done reading the previous K_j, V_j
        load_tile<T, D>(Ks, K, k0, N);  // line 7
        load_tile<T, D>(Vs, V, k0, N);
        __syncthreads();  // K_j, V_j (and at j = 0, Q_i) are visible to every warp

        // [region s-gemm]
        // TODO(1) begin
        //| // TODO(1): S = Q_i K_j^T for this warp's 16 rows and the tile's 64 keys (Algorithm 1,
        //| //   line 8), from Qs and Ks, stored as fp32 to Sw (stride SLD). All 32 lanes make every
        //| //   wmma call, with the same arguments. README: "Fragments", "Layouts, and a free
        //| //   transpose of K", "The first product, and why S goes to shared memory".
//|
        // Line 8: S = Q_i K_j^T for this warp's 16 rows: 16 x Bc, four 16x16 accumulators.
        // K_j sits in shared memory as [key][dim]. Read as a col_major B operand with stride
        // DP, element (k = dim, n = key) is Ks[key * DP + dim]: that is K_j^T, for free.
        {
            FragAcc s[NF];
#pragma unroll
            for (int n = 0; n < NF; ++n) wmma::fill_fragment(s[n], 0.0f);
#pragma unroll
            for (int kk = 0; kk < DF; ++kk) {
                FragQ a;
                wmma::load_matrix_sync(a, Qs + (warp * WM) * DP + kk * WM, DP);
#pragma unroll
                for (int n = 0; n < NF; ++n) {
                    FragK b;
                    wmma::load_matrix_sync(b, Ks + (n * WM) * DP + kk * WM, DP);
                    wmma::mma_sync(s[n], a, b, s[n]);
                }
            }
            // The accumulator layout is not ours to know: the only way to see S by rows is
            // to store it.
#pragma unroll
            for (int n = 0; n < NF; ++n)
                wmma::store_matrix_sync(Sw + n * WM, s[n], SLD, wmma::mem_row_major);
        }
        // TODO(1) end
        __syncwarp();  // the whole slice is in shared memory for all 32 lanes
        // [end s-gemm]

        // [region softmax]
        // Line 9 on the warp's own 16 rows: lanes 2r and 2r+1 split row r. Lane `half` takes
        // the float4 groups at columns 8i + 4*half, so the 8 lanes of a quarter-warp hit 8
        // different bank groups (row stride SLD = 72 floats).
        float alpha;  // how much the old O and l shrink: exp(m_old - m_new)
        {
            float x[Bc / 2];
#pragma unroll
            for (int i = 0; i < Bc / 8; ++i) {
                const float4 v4 = *reinterpret_cast<const float4 *>(Sw + r * SLD + 8 * i + 4 * half);
                x[4 * i + 0] = v4.x * scale_log2;
                x[4 * i + 1] = v4.y * scale_log2;
                x[4 * i + 2] = v4.z * scale_log2;
                x[4 * i + 3] = v4.w * scale_log2;
            }
            if (k0 + Bc > N || (causal && k0 + Bc - 1 > q0)) {  // diagonal or ragged tile
#pragma unroll
                for (int i = 0; i < Bc / 8; ++i)
#pragma unroll
                    for (int c = 0; c < 4; ++c) {
                        const int col = k0 + 8 * i + 4 * half + c;
                        if (col >= N || (causal && col > row)) x[4 * i + c] = -INFINITY;
                    }
            }
            // TODO(2) begin
            //| // TODO(2): the online softmax of row r (line 9), shared with the partner lane: the row
            //| //   max, alpha, P rounded to T into Pw over S (only once every lane has read its
            //| //   scores), the row sum of the fp32 values, the new l_run and m_run. Safe while the
            //| //   running max is still -INFINITY. README: "The softmax, in shared memory", "The
            //| //   online softmax in base 2", "P is rounded to 16 bits".
            //| alpha = 1.0f;
            float mx = -INFINITY;
#pragma unroll
            for (int i = 0; i < Bc / 2; ++i) mx = fmaxf(mx, x[i]);
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
            const float m_new = fmaxf(m_run, mx);
            // A row with nothing visible so far keeps m = -inf; subtracting 0 instead keeps
            // exp2(-inf - (-inf)) from turning into NaN.
            const float m_sub = m_new == -INFINITY ? 0.0f : m_new;
            alpha = exp2f(m_run - m_sub);

            __syncwarp();  // every lane has read its S values: P (and F) may overwrite them
            float sum = 0.0f;
#pragma unroll
            for (int i = 0; i < Bc / 8; ++i) {
                const float p0 = exp2f(x[4 * i + 0] - m_sub), p1 = exp2f(x[4 * i + 1] - m_sub);
                const float p2 = exp2f(x[4 * i + 2] - m_sub), p3 = exp2f(x[4 * i + 3] - m_sub);
                sum += (p0 + p1) + (p2 + p3);  // l adds up the fp32 values, while the
                // second product gets P rounded to 16 bits, the only type wmma multiplies.
                *reinterpret_cast<uint2 *>(Pw + r * PLD + 8 * i + 4 * half) =
                    pack4(T(), p0, p1, p2, p3);
            }
            sum += __shfl_xor_sync(0xffffffffu, sum, 1);
            l_run = alpha * l_run + sum;
            m_run = m_new;
            // TODO(2) end
        }
        // [end softmax]

        // [region rescale]
        // TODO(4) begin
        //| // TODO(4): O <- diag(alpha) O (line 10, first half): replace this __syncwarp() with the
        //| //   call to scale_rows (TODO 3); its own __syncwarp() also publishes P to the warp
        //| //   before TODO(5) reads it. README: "Rescaling O without knowing the layout".
        //| __syncwarp();
        // Line 10, first half: O <- diag(alpha) O, in registers. The barrier inside also
        // publishes P to the whole warp.
        scale_rows<DF>(o, Fw, FLD, alpha, r, half);
        // TODO(4) end
        // [end rescale]

        // [region pv-gemm]
        // TODO(5) begin
        //| // TODO(5): O += P V_j (line 10, second half) into o[], from Pw (the A operand, stride
        //| //   PLD) and Vs (stride DP). Keep the loop over the 16-key slices rolled: unrolled, the
        //| //   kernel spills at d = 64. README: "The second product and the end", "Registers and
        //| //   occupancy".
        // Line 10, second half: O += P V_j. V_j is stored [key][dim], which is exactly a
        // row_major B operand (k = key, n = dim). The kk loop stays rolled: unrolled, the
        // compiler hoists the V fragments of later slices and, under the register cap of
        // __launch_bounds__, spills (d = 64); other warps hide the loads anyway.
#pragma unroll 1
        for (int kk = 0; kk < NF; ++kk) {
            FragP p;
            wmma::load_matrix_sync(p, Pw + kk * WM, PLD);
#pragma unroll
            for (int n = 0; n < DF; ++n) {
                FragV b;
                wmma::load_matrix_sync(b, Vs + (kk * WM) * DP + n * WM, DP);
                wmma::mma_sync(o[n], p, b, o[n]);
            }
        }
        // TODO(5) end
        // [end pv-gemm]
    }

    // [region epilogue]
    // Lines 12-15: O_i = diag(l)^-1 O and L_i = m + log(l), back in natural-log units.
    // Every row sees key 0, so l > 0.
    // TODO(6) begin
    //| // TODO(6): L of row `row` in natural-log units (m_run is in base 2), written once per row
    //| //   and only for rows < N; then, once every lane is done with the last tile's F, O divided
    //| //   by l with scale_rows. README: "The second product and the end".
    if (half == 0 && row < N) L[row] = (m_run + log2f(l_run)) * 0.6931471805599453f;
    __syncwarp();  // every lane is done with the last tile's F
    scale_rows<DF>(o, Fw, FLD, 1.0f / l_run, r, half);
    // TODO(6) end
    // O leaves through the warp's fp32 buffer, 64 columns at a time, so that each lane can
    // round 8 neighbours to T and write them to global memory as one 16-byte store.
#pragma unroll
    for (int c0 = 0; c0 < D; c0 += Bc) {
        __syncwarp();  // F, or the previous 64 columns, have been read
#pragma unroll
        for (int n = 0; n < NF; ++n)
            wmma::store_matrix_sync(Sw + n * WM, o[c0 / WM + n], SLD, wmma::mem_row_major);
        __syncwarp();
        if (row < N) {
#pragma unroll
            for (int g = 0; g < Bc / 16; ++g) {
                const int c = 8 * (2 * g + half);
                const float4 a = *reinterpret_cast<const float4 *>(Sw + r * SLD + c);
                const float4 b = *reinterpret_cast<const float4 *>(Sw + r * SLD + c + 4);
                const uint2 lo = pack4(T(), a.x, a.y, a.z, a.w), hi = pack4(T(), b.x, b.y, b.z, b.w);
                *reinterpret_cast<uint4 *>(O + (size_t)row * D + c0 + c) =
                    make_uint4(lo.x, lo.y, hi.x, hi.y);
            }
        }
    }
    // [end epilogue]
}

/* The kernel: grid x = batch*head, grid y = Q tile, with y = 0 the last (for causal the
 * longest) tile so that the heaviest blocks start first and the short ones fill the tail.
 * Block: THREADS threads, Smem<D>::bytes of dynamic shared memory. FlashAttention-2
 * Algorithm 1, lines 3-16 (the i loop is the grid). */
template <typename T, int D>
__global__ void __launch_bounds__(THREADS, MinBlocks<D>::value)
attention_wmma_kernel(const T *__restrict__ Q, const T *__restrict__ K,
                      const T *__restrict__ V, T *__restrict__ O, float *__restrict__ L,
                      int N, int causal, float scale_log2) {
    if constexpr (Built<T, D>::value)
        attention_wmma_block<T, D>(Q, K, V, O, L, N, causal, scale_log2,
                                   gridDim.y - 1 - blockIdx.y);
    else
        __trap();  // never launched: see Built
}

// [region host]
/* What the device offers, asked once per process (the harness uses one device). */
struct DeviceLimits {
    int cc_major;
    int smem_optin;  // bytes of shared memory one block may opt in to
};
static const DeviceLimits &device_limits(void) {
    static DeviceLimits lim = {-1, 0};
    if (lim.cc_major < 0) {
        int dev = 0;
        cudaGetDevice(&dev);
        cudaDeviceGetAttribute(&lim.cc_major, cudaDevAttrComputeCapabilityMajor, dev);
        cudaDeviceGetAttribute(&lim.smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev);
    }
    return lim;
}

// [region launch]
/* Launch for one (T, D). More than 48 KB of dynamic shared memory must be opted in to, and
 * asking for the largest shared-memory carveout lets MinBlocks<D> blocks share an SM. */
template <typename T, int D>
static int launch(const attn_args *a) {
    constexpr int smem = Smem<D>::bytes;
    if (smem > device_limits().smem_optin) return ATTN_UNSUPPORTED;
    static bool configured = false;
    if (!configured) {
        cudaFuncSetAttribute(attention_wmma_kernel<T, D>,
                             cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
        cudaFuncSetAttribute(attention_wmma_kernel<T, D>,
                             cudaFuncAttributePreferredSharedMemoryCarveout,
                             cudaSharedmemCarveoutMaxShared);
        configured = true;
    }
    const int Tr = (a->N + Br - 1) / Br;
    if (Tr > 65535) return ATTN_UNSUPPORTED;  // grid.y limit: N up to 4,194,240
    const dim3 grid(a->B * a->H, Tr);
    attention_wmma_kernel<T, D><<<grid, THREADS, smem, (cudaStream_t)a->stream>>>(
        (const T *)a->Q, (const T *)a->K, (const T *)a->V, (T *)a->O, a->L, a->N, a->causal,
        a->scale * 1.4426950408889634f);
    return ATTN_OK;
}
// [end launch]

/* Entry point (attention.h): dispatch on dtype and head dimension. bf16 tensor-core
 * fragments need sm_80 or newer. */
int attention_forward(const attn_args *a) {
    //| if (STARTER_NOT_DONE) return ATTN_NOT_IMPLEMENTED;
    if (a->N < 1 || a->B < 1 || a->H < 1) return ATTN_OK;  // nothing to compute
    const bool bf16 = a->dtype == DTYPE_BF16;
    if (!bf16 && a->dtype != DTYPE_FP16) return ATTN_UNSUPPORTED;
    if (bf16 && device_limits().cc_major < 8) return ATTN_UNSUPPORTED;
    switch (a->d) {
    case 64:  return bf16 ? launch<__nv_bfloat16, 64>(a) : launch<__half, 64>(a);
    case 128: return bf16 ? launch<__nv_bfloat16, 128>(a) : launch<__half, 128>(a);
    default:  return ATTN_UNSUPPORTED;
    }
}
// [end host]

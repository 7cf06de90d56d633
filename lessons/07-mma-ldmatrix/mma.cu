/* 07-mma-ldmatrix (starter): FlashAttention-2 forward pass on the tensor
 * cores, written with raw PTX: mma.sync.aligned.m16n8k16 for both matrix
 * products and ldmatrix to feed them from a swizzled (XOR) shared-memory layout.
 *
 * What is here: the PTX wrappers, the tile loads, the mask, the O store and
 * the launch. What you write: the numbered TODO(n) below (all of them are
 * index math on the fragment layouts drawn in README.md), then TODO(0).
 *
 * Source: Dao, "FlashAttention-2" (2023), Algorithm 1, with the paper's
 * Section 3.3 work split: a block of Br = 64 query rows, 4 warps, each warp
 * owns 16 rows of Q_i and never talks to the other warps.
 *
 * What lives where, for one block and one K/V tile j (Bc = 64 keys):
 *   Q_i   16 rows per warp, as mma A fragments, in registers for the whole loop
 *   K_j   shared memory (swizzled), read with ldmatrix as mma B fragments
 *   V_j   shared memory (swizzled), read with ldmatrix.trans as mma B fragments
 *   S, P  registers: the fp32 accumulators of S = Q_i K_j^T become, after the
 *         softmax and a conversion to 16 bit, the A operand of P V_j
 *   O, m, l  registers (fp32), O written once at the end through shared memory
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

/* TODO(0): set to 0 when you have written TODO(1)..TODO(7); the grader then grades you. */
#define STARTER_NOT_DONE 1

const lesson_info LESSON = {
    7, "07-mma-ldmatrix", "tensor cores with mma.sync + ldmatrix, Q and P in registers",
    DTYPE_BIT(DTYPE_FP16) | DTYPE_BIT(DTYPE_BF16), 1, {64, 128, 0}};

/* mma.m16n8k16 with bf16 needs sm_80; the portable build also makes sm_75
 * code, where the kernel compiles to an empty body and the host refuses to
 * launch it (ATTN_UNSUPPORTED). */
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#define FA_SM80 0
#else
#define FA_SM80 1
#endif

// [region ptx]
/* ldmatrix .x4: lanes 8i..8i+7 give the shared-memory addresses of the 8 rows
 * (16 bytes each) of matrix i; every lane gets back, in r[i], the two 16-bit
 * elements (row = lane/4, cols 2*(lane%4), +1) of matrix i. */
__device__ __forceinline__ void ldmatrix_x4(uint32_t r[4], uint32_t addr) {
#if FA_SM80
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
#endif
}
/* The same with .trans: lane gets (rows 2*(lane%4), +1; col lane/4) of each
 * matrix, i.e. the 8x8 matrix read column by column. */
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t r[4], uint32_t addr) {
#if FA_SM80
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
#endif
}
/* d += A (16x16, row) * B (16x8, col), fp32 accumulate. Fragment layouts are
 * drawn in the lesson text and next to the kernel below. */
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
/* 2^x in one MUFU.EX2 instruction (ex2(-inf) = 0, which the masking relies on). */
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

/* Two fp32 values -> one 32-bit register holding two 16-bit values, `lo` in
 * the low half: the order every mma fragment register uses (lower column
 * index in the low half). */
template <typename T> __device__ __forceinline__ uint32_t pack2(float lo, float hi);
template <> __device__ __forceinline__ uint32_t pack2<__half>(float lo, float hi) {
    __half2 h = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<uint32_t *>(&h);
}
template <> __device__ __forceinline__ uint32_t pack2<__nv_bfloat16>(float lo, float hi) {
    __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t *>(&h);
}

// [region swizzle]
/* Byte offset of 16-byte chunk `chunk` (8 elements) of row `row` in a tile
 * whose rows hold D 16-bit elements. The chunk index is XORed with row % 8:
 * the 8 rows an ldmatrix matrix reads (same logical chunk, 8 consecutive
 * rows) then land in 8 different 16-byte bank groups, so each 8x8 matrix is
 * read in one conflict-free shared-memory wavefront. For D = 128 only the low
 * 3 bits of the chunk index (0..15) change, so a row stays within its row. */
template <int D>
__device__ __forceinline__ uint32_t swz(int row, int chunk) {
    // TODO(1): the byte offset of 16-byte chunk `chunk` of row `row`, with the chunk
    //   index XORed with row % 8. (As shipped: no swizzle. It computes the right
    //   answer, with 8-way bank conflicts on every ldmatrix.)
    return (uint32_t)(row * (D * 2) + (chunk << 4));
}
// [end swizzle]

/* Copy rows [row0, row0 + ROWS) of a [N, D] matrix into a swizzled shared
 * tile with 16-byte loads; rows >= N become zeros, so a ragged last tile
 * contributes exact zeros (never NaN) to S and to P V. */
template <typename T, int D, int ROWS, int NT>
__device__ __forceinline__ void load_tile(unsigned char *tile, const T *g, int row0, int N, int tid) {
    constexpr int CH = D / 8;
#pragma unroll
    for (int c = tid; c < ROWS * CH; c += NT) {
        const int r = c / CH, ch = c % CH;
        uint4 v = make_uint4(0u, 0u, 0u, 0u);
        if (row0 + r < N) v = *reinterpret_cast<const uint4 *>(g + (size_t)(row0 + r) * D + ch * 8);
        *reinterpret_cast<uint4 *>(tile + swz<D>(r, ch)) = v;
    }
}

/* Fragment layouts used below (PTX ISA, "Matrix Fragments for mma.m16n8k16"),
 * with g = lane / 4 (0..7) and t = lane % 4 (0..3):
 *   A 16x16 (4 regs, 2 elements each, low half first):
 *       a[0] = (row g,   cols 2t, 2t+1)     a[2] = (row g,   cols 2t+8, 2t+9)
 *       a[1] = (row g+8, cols 2t, 2t+1)     a[3] = (row g+8, cols 2t+8, 2t+9)
 *   B 16x8  (2 regs):  b0 = (rows 2t, 2t+1; col g)   b1 = (rows 2t+8, 2t+9; col g)
 *   C 16x8  (4 fp32):  c[0], c[1] = (row g, cols 2t, 2t+1)
 *                      c[2], c[3] = (row g+8, cols 2t, 2t+1)
 * So each thread holds 2 rows (g and g+8) of every 16-row fragment, and the 4
 * threads of a quad (same g) hold a whole row: row reductions are 2 shuffles. */

/* One block computes O and L for Br = 64 query rows of one (batch, head).
 * grid = (Tr, H, B), block = 128 threads (4 warps); dynamic shared memory
 * (Br + 2 Bc) * D * 2 bytes: Q_i, K_j, V_j tiles, all swizzled.
 * scale_log2 = softmax scale * log2(e): scores live in the log2 domain so
 * every exponential is one ex2 (FlashAttention-2 keeps m unscaled and folds
 * the scale into one FFMA per score). */
template <typename T, int D>
__global__ void __launch_bounds__(128)
fa2_mma_kernel(const T *__restrict__ Q, const T *__restrict__ K, const T *__restrict__ V,
               T *__restrict__ O, float *__restrict__ L, int N, float scale_log2, int causal) {
#if FA_SM80
    constexpr int BR = 64, BC = 64, NT = 128;
    constexpr int CH = D / 8;  // 16-byte chunks per row
    extern __shared__ __align__(128) unsigned char fa_smem[];
    unsigned char *sQ = fa_smem;               // [BR][D]
    unsigned char *sK = sQ + BR * D * 2;       // [BC][D]
    unsigned char *sV = sK + BC * D * 2;       // [BC][D]
    const uint32_t aQ = smem_u32(sQ), aK = smem_u32(sK), aV = smem_u32(sV);

    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const int g = lane >> 2, t = lane & 3;  // mma fragment coordinates, see above
    const int q0 = blockIdx.x * BR;         // first query row of this block (Q_i)
    const size_t head = ((size_t)blockIdx.z * gridDim.y + blockIdx.y) * (size_t)N;
    Q += head * D; K += head * D; V += head * D; O += head * D; L += head;

    // [region q-fragments]
    /* Q_i -> shared -> registers, once. Warp w owns rows 16w..16w+15 of the
     * tile. For the 16x16 A fragment kk (columns 16kk..16kk+15) ldmatrix.x4
     * reads four 8x8 matrices, in the order of a[0..3]:
     *   lanes 0-7  : rows 0-7,  chunk 2kk     -> a[0]
     *   lanes 8-15 : rows 8-15, chunk 2kk     -> a[1]
     *   lanes 16-23: rows 0-7,  chunk 2kk + 1 -> a[2]
     *   lanes 24-31: rows 8-15, chunk 2kk + 1 -> a[3]                      */
    load_tile<T, D, BR, NT>(sQ, Q, q0, N, tid);
    __syncthreads();
    uint32_t qf[D / 16][4];
    {
        // TODO(2): the tile row and the 16-byte chunk this lane points ldmatrix at, so that
        //   qf[kk][0..3] come back as a[0..3] of the A fragment kk (table above).
        const int row = 0, chunk_of_kk0 = 0;
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk) ldmatrix_x4(qf[kk], aQ + swz<D>(row, 2 * kk + chunk_of_kk0));
    }
    // [end q-fragments]

    float o[D / 8][4];  // O rows (g, g+8) x dims 8nb + (2t, 2t+1), unnormalised
#pragma unroll
    for (int nb = 0; nb < D / 8; ++nb) o[nb][0] = o[nb][1] = o[nb][2] = o[nb][3] = 0.f;
    float m[2] = {-INFINITY, -INFINITY};  // running max of the raw scores q.k, rows g, g+8
    float l[2] = {0.f, 0.f};              // running sum, this thread's columns only

    /* Causal: K/V tiles entirely above the diagonal (first key > last query
     * row of the block) are never loaded. */
    const int kv_end = causal ? min(N, q0 + BR) : N;
    const int n_tiles = (kv_end + BC - 1) / BC;
    /* Lane-dependent parts of the ldmatrix addresses (see the drawings). */
    // TODO(3) and TODO(6) (first part): the key row (0..15 within a 16-key block) and the
    //   chunk offset (0 or 1) this lane points ldmatrix at, for K_j (drawing in TODO(3))
    //   and for V_j (drawing in TODO(6)).
    const int k_row = 0, k_chunk = 0;
    const int v_row = 0, v_chunk = 0;

    for (int j = 0; j < n_tiles; ++j) {
        const int k0 = j * BC;
        __syncthreads();  // every warp is done with K_{j-1}, V_{j-1}
        load_tile<T, D, BC, NT>(sK, K, k0, N, tid);
        load_tile<T, D, BC, NT>(sV, V, k0, N, tid);
        __syncthreads();

        // [region s-mma]
        /* S = Q_i K_j^T for this warp's 16 rows: 16 x Bc, as Bc/8 C fragments.
         * B = K_j^T (k = head dim, n = key) is "col" layout, i.e. K_j's rows
         * as stored, so plain ldmatrix gives B fragments. One x4 covers 16
         * keys x 16 dims:
         *   lanes 0-7  : keys 0-7,  chunk 2kk     -> b0 of n-block 2np
         *   lanes 8-15 : keys 0-7,  chunk 2kk + 1 -> b1 of n-block 2np
         *   lanes 16-23: keys 8-15, chunk 2kk     -> b0 of n-block 2np + 1
         *   lanes 24-31: keys 8-15, chunk 2kk + 1 -> b1 of n-block 2np + 1   */
        float s[BC / 8][4];
#pragma unroll
        for (int nb = 0; nb < BC / 8; ++nb) s[nb][0] = s[nb][1] = s[nb][2] = s[nb][3] = 0.f;
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk) {
#pragma unroll
            for (int np = 0; np < BC / 16; ++np) {
                uint32_t b[4];
                ldmatrix_x4(b, aK + swz<D>(np * 16 + k_row, 2 * kk + k_chunk));
                // TODO(3): two mma_16816<T> calls: S n-blocks 2np and 2np+1 += Q k-slice kk
                //   times the B fragments in b[0..3].
                (void)b;
            }
        }
        // [end s-mma]

        // [region mask]
        /* Only tiles that cross the diagonal or the end of the sequence need
         * a mask; the test is uniform over the block, so no divergence. */
        if (k0 + BC > N || (causal && k0 + BC - 1 > q0)) {
#pragma unroll
            for (int nb = 0; nb < BC / 8; ++nb)
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    const int col = k0 + nb * 8 + 2 * t + (e & 1);
                    const int row = q0 + warp * 16 + g + (e >> 1) * 8;
                    if (col >= N || (causal && col > row)) s[nb][e] = -INFINITY;
                }
        }
        // [end mask]

        // [region online-softmax]
        /* Online softmax (Algorithm 1, lines 9-10) on rows g (r = 0) and g+8
         * (r = 1). A row is spread over the 4 threads of a quad, so its max is
         * reduced with 2 xor-shuffles; l stays a per-thread partial sum (the
         * rescale factor is the same for the whole quad) and is reduced once
         * after the loop. */
        // TODO(4): for r = 0, 1 (rows g and g + 8):
        //   - mx = max(m[r], this thread's 2 * Bc/8 scores of the row), then over the quad
        //     with __shfl_xor_sync(0xffffffffu, mx, 1) and (..., 2);
        //   - base = mx * scale_log2, or 0 when mx is -INFINITY (row fully masked so far);
        //   - alpha = ex2(m[r] * scale_log2 - base); m[r] = mx;
        //   - each score becomes p = ex2(fmaf(s, scale_log2, -base)), summed into `sum`;
        //   - l[r] = l[r] * alpha + sum; the row's O values (o[nb][2r], o[nb][2r+1]) *= alpha.
        // [end online-softmax]

        // [region p-reuse]
        /* P as the A operand of P V_j, straight from the S accumulators: for
         * the k-block kk (keys 16kk..16kk+15), the A fragment wants
         *   a[0] = (row g,   keys 2t..)    = S n-block 2kk,   c[0], c[1]
         *   a[1] = (row g+8, keys 2t..)    = S n-block 2kk,   c[2], c[3]
         *   a[2] = (row g,   keys 8+2t..)  = S n-block 2kk+1, c[0], c[1]
         *   a[3] = (row g+8, keys 8+2t..)  = S n-block 2kk+1, c[2], c[3]
         * the same thread, the same rows and columns: only a conversion. */
        uint32_t pf[BC / 16][4];
#pragma unroll
        for (int kk = 0; kk < BC / 16; ++kk) {
            // TODO(5): pf[kk][0..3] = pack2<T>(...) of the right pairs of S accumulators.
            pf[kk][0] = pf[kk][1] = pf[kk][2] = pf[kk][3] = 0u;
        }
        // [end p-reuse]

        // [region pv-mma]
        /* O += P V_j. B = V_j (k = key, n = head dim) is stored k-major
         * (row = key), the transpose of what mma's "col" B wants, so
         * ldmatrix.trans. One x4 covers 16 keys x 16 dims:
         *   lanes 0-7  : keys 0-7,  chunk 2dp     -> b0 of d-block 2dp
         *   lanes 8-15 : keys 8-15, chunk 2dp     -> b1 of d-block 2dp
         *   lanes 16-23: keys 0-7,  chunk 2dp + 1 -> b0 of d-block 2dp + 1
         *   lanes 24-31: keys 8-15, chunk 2dp + 1 -> b1 of d-block 2dp + 1   */
#pragma unroll
        for (int kk = 0; kk < BC / 16; ++kk) {
#pragma unroll
            for (int dp = 0; dp < D / 16; ++dp) {
                uint32_t b[4];
                ldmatrix_x4_trans(b, aV + swz<D>(kk * 16 + v_row, 2 * dp + v_chunk));
                // TODO(6): two mma_16816<T> calls: O d-blocks 2dp and 2dp+1 += P k-block kk
                //   times the B fragments in b[0..3].
                (void)b;
            }
        }
        // [end pv-mma]
    }

    // [region epilogue]
    /* Finish the row sums, normalise, write L (Algorithm 1, lines 12-13). */
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        // TODO(7): finish l[r] over the quad (2 shuffles), divide the row's O values by it,
        //   and let lane t == 0 write L[row] for row = q0 + warp * 16 + g + 8r < N, in
        //   natural-log units: L = (m * scale_log2 + log2(l)) * ln(2).
        (void)m[r]; (void)l[r];  // (only silences "unused" warnings until TODO(4) and (7) use them)
    }
    /* O through shared memory so that global stores are whole 16-byte chunks
     * of a row. The warp reuses its own 16 rows of the Q tile, which only it
     * has read, so no block barrier is needed. */
#pragma unroll
    for (int nb = 0; nb < D / 8; ++nb)
#pragma unroll
        for (int r = 0; r < 2; ++r)
            *reinterpret_cast<uint32_t *>(sQ + swz<D>(warp * 16 + g + r * 8, nb) + 4 * t) =
                pack2<T>(o[nb][2 * r], o[nb][2 * r + 1]);
    __syncwarp();
#pragma unroll
    for (int c = lane; c < 16 * CH; c += 32) {
        const int r = c / CH, ch = c % CH, row = q0 + warp * 16 + r;
        if (row < N)
            *reinterpret_cast<uint4 *>(O + (size_t)row * D + ch * 8) =
                *reinterpret_cast<const uint4 *>(sQ + swz<D>(warp * 16 + r, ch));
    }
    // [end epilogue]
#endif
}

// [region host]
template <typename T, int D>
static int launch(const attn_args *a) {
    constexpr int BR = 64, BC = 64;
    const int smem = (BR + 2 * BC) * D * 2;  // 24 KiB (d = 64), 48 KiB (d = 128)
    const int Tr = (a->N + BR - 1) / BR;
    if (a->H > 65535 || a->B > 65535) return ATTN_UNSUPPORTED;
    const dim3 grid(Tr, a->H, a->B);
    const float scale_log2 = a->scale * 1.4426950408889634f;
    fa2_mma_kernel<T, D><<<grid, 128, smem, (cudaStream_t)a->stream>>>(
        (const T *)a->Q, (const T *)a->K, (const T *)a->V, (T *)a->O, a->L, a->N, scale_log2, a->causal);
    return ATTN_OK;
}

/* Entry point (reference/include/attention.h). Refuses what the kernel cannot do:
 * fp32, other d, a non-positive scale (the running max is kept on unscaled
 * scores), GPUs older than sm_80 (no bf16 mma.m16n8k16). */
int attention_forward(const attn_args *a) {
    static int major = -1;
    if (major < 0) {
        int dev = 0;
        if (cudaGetDevice(&dev) != cudaSuccess ||
            cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess)
            major = 0;
    }
    if (STARTER_NOT_DONE) return ATTN_NOT_IMPLEMENTED;
    if (major < 8 || !(a->scale > 0.f)) return ATTN_UNSUPPORTED;
    if (a->N < 1 || a->B < 1 || a->H < 1) return ATTN_OK;  // nothing to compute
    const int fp16 = a->dtype == DTYPE_FP16, bf16 = a->dtype == DTYPE_BF16;
    if (a->d == 64 && fp16) return launch<__half, 64>(a);
    if (a->d == 64 && bf16) return launch<__nv_bfloat16, 64>(a);
    if (a->d == 128 && fp16) return launch<__half, 128>(a);
    if (a->d == 128 && bf16) return launch<__nv_bfloat16, 128>(a);
    return ATTN_UNSUPPORTED;
}
// [end host]

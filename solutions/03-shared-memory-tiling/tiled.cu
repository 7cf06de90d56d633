//| /* Lesson 03: FlashAttention tiling with shared memory, fp32.
//|  * Build and grade: make lesson3 && ./lesson3      (the lesson text: README.md here)
// solution begin
/* Lesson 03 (solution): FlashAttention tiling with shared memory, fp32.
// solution end
 *
 * Source: FlashAttention-2 (Dao, 2023), Algorithm 1 (forward pass), lines 3-16.
 *
 * One thread block owns one tile Q_i of Br = 32 query rows of one (batch, head) and
 * walks over K and V in tiles of Bc = 32 rows. Each K_j, V_j tile is copied from global
 * memory into shared memory once, with coalesced 16-byte loads by all 256 threads, and
 * then used by all 32 query rows of the block: lesson 02 made every query row fetch
 * every K and V row by itself.
 *
 * Everything the block works on lives in shared memory: Q_i, K_j, V_j, the score tile
 * S (overwritten in place by P), the running max m and sum l of each row, and the
 * output accumulator O_i. Each step of the inner loop is a phase with its own mapping
 * of threads to work, separated by __syncthreads():
 *   load K_j, V_j   all threads, 16 bytes each, consecutive threads -> consecutive bytes
 *   S = Q_i K_j^T   warp w computes rows w, w+8, w+16, w+24; lane = key column
 *   softmax         8 threads per row, 4 scores each, warp shuffles for max and sum
 *   O_i += P V_j    warp w owns rows w, w+8, ...; lane owns columns lane, lane+32, ...
 * Lesson 04 keeps O, m and l in registers instead and needs fewer barriers.
 *
 * Scores are kept in the base-2 domain: S = Q K^T * scale * log2(e), so that
 * exp(x - m) becomes exp2f(x' - m') (one hardware ex2 plus a few fix-up instructions)
 * and the multiplication by log2(e) rides along with the scale for free.
 */
#include <cuda_runtime.h>
#include <math.h>

#include "attention.h"

const lesson_info LESSON = {3, "03-shared-memory-tiling",
                            "shared-memory tiling: one block per Br query rows",
                            DTYPE_BIT(DTYPE_FP32), 0, {64, 128, 0}};
//|
//| /* TODO(0): set to 0 when you have written TODO(1)..TODO(5); the grader then grades you. */
//| #define STARTER_NOT_DONE 1

// [region tiles]
constexpr int Br = 32;                // query rows per block (one tile Q_i)
constexpr int Bc = 32;                // key/value rows per tile (K_j, V_j)
constexpr int THREADS = 256;          // 8 warps
constexpr int WARPS = THREADS / 32;
constexpr int PAD = 4;                // floats of padding per shared row (see below)

// Everything one block keeps in shared memory, for head dimension D. Rows are padded by
// 4 floats: a row stays a multiple of 16 bytes (float4 loads stay aligned) and row r
// starts 4 banks after row r-1, so 8 lanes reading 16 bytes each from 8 consecutive
// rows at the same column hit 32 different banks (no bank conflict).
template <int D>
struct SharedTiles {
    float Q[Br][D + PAD];             // Q_i, loaded once
    float K[Bc][D + PAD];             // K_j, reloaded every tile
    float V[Bc][D + PAD];             // V_j, reloaded every tile
    float O[Br][D + PAD];             // O_i accumulator (not yet divided by l)
    float S[Br][Bc + PAD];            // S_ij, then P_ij in place
    float m[Br];                      // running row max (base-2 units)
    float l[Br];                      // running row sum of exp2(S - m)
    float alpha[Br];                  // this tile's rescale factor exp2(m_old - m_new)
};
// [end tiles]

static_assert(Bc == 32, "the S phase maps lane -> key column");
static_assert(Br % WARPS == 0 && THREADS % Br == 0, "rows must split evenly over warps and threads");

constexpr float LN2 = 0.693147180559945309f;

// Blocks per SM we ask the compiler to make room for: 4 x 256 threads caps registers at
// 64 per thread. Barriers stall a whole block, so several resident blocks keep the SM
// busy while one waits; 4 x 39 KB of shared memory (d = 64) fits in an H100's 228 KB.
constexpr int MIN_BLOCKS = 4;

/* Copies rows [row0, row0 + ROWS) of one [N, D] row-major fp32 matrix into the shared
 * tile dst[ROWS][D + PAD], all THREADS threads cooperating. Consecutive threads read
 * consecutive 16-byte pieces, so one warp instruction reads 512 contiguous bytes (fully
 * coalesced). Rows >= N are written as zeros: the input buffers are surrounded by NaN
 * guards, and a NaN in V times a probability of 0 would still be NaN.
 * Preconditions: src 16-byte aligned, D a multiple of 4. */
// solution begin
// [region load-rows]
// solution end
template <int D, int ROWS>
__device__ __forceinline__ void load_rows(float (*dst)[D + PAD], const float *__restrict__ src,
                                          int row0, int N) {
    constexpr int VEC_PER_ROW = D / 4;
    static_assert(ROWS * VEC_PER_ROW % THREADS == 0, "tile must split evenly over the block");
    // TODO(1) begin
#pragma unroll
    for (int it = 0; it < ROWS * VEC_PER_ROW / THREADS; ++it) {
        const int v = it * THREADS + threadIdx.x;
        const int r = v / VEC_PER_ROW, c = (v % VEC_PER_ROW) * 4;
        float4 x = make_float4(0.f, 0.f, 0.f, 0.f);
        if (row0 + r < N) x = *reinterpret_cast<const float4 *>(src + (size_t)(row0 + r) * D + c);
        *reinterpret_cast<float4 *>(&dst[r][c]) = x;
    }
    // TODO(1) end
    //| /* TODO(1): copy rows row0 .. row0 + ROWS - 1 of src ([N, D] row-major) into dst, all
    //|  * THREADS threads together, 16 bytes (one float4) per thread and step, consecutive
    //|  * threads on consecutive pieces so that a warp reads whole lines. Rows >= N become zeros
    //|  * and are never read (the inputs are surrounded by NaN). README: "Coalesced loads". */
    //| (void)dst; (void)src; (void)row0; (void)N;  // (delete when done)
}
// solution begin
// [end load-rows]
// solution end

/* acc + a * b, component by component. A dot product accumulated this way keeps four
 * running sums (one per float4 component, each over every 4th column of d) that are added
 * at the end. With logits around +-100 one long fp32 chain of d multiply-adds loses
 * enough bits to fail the grader's tolerance; four shorter sums of smaller numbers do not
 * (and they are four independent chains, which the scheduler likes too). */
__device__ __forceinline__ float4 fma4(float4 a, float4 b, float4 acc) {
    return make_float4(fmaf(a.x, b.x, acc.x), fmaf(a.y, b.y, acc.y), fmaf(a.z, b.z, acc.z),
                       fmaf(a.w, b.w, acc.w));
}
__device__ __forceinline__ float sum4(float4 a) { return (a.x + a.y) + (a.z + a.w); }

/* Forward pass, one block per (query tile, head, batch).
 *   Q, K, V, O : [B, H, N, D] row-major fp32 (device), 16-byte aligned
 *   L          : [B, H, N] fp32, natural-log logsumexp of each scaled score row
 *   scale_log2 : softmax scale * log2(e)
 * Grid (Tr, H, B), Tr = ceil(N / Br); THREADS threads; sizeof(SharedTiles<D>) bytes of
 * dynamic shared memory. Any N >= 1. */
template <int D>
__global__ void __launch_bounds__(THREADS, MIN_BLOCKS)
flash_tiled_kernel(const float *__restrict__ Q, const float *__restrict__ K,
                   const float *__restrict__ V, float *__restrict__ O, float *__restrict__ L,
                   int N, float scale_log2) {
    extern __shared__ float4 smem_raw[];  // float4: the tile struct starts 16-byte aligned
    SharedTiles<D> &sm = *reinterpret_cast<SharedTiles<D> *>(smem_raw);
    const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
    //| constexpr int RPW = Br / WARPS;  // rows per warp in the S and PV phases (warp + WARPS * i)
    const int row0 = blockIdx.x * Br;                                  // first row of Q_i
    const size_t head = (size_t)blockIdx.z * gridDim.y + blockIdx.y;  // b * H + h
    const float *Qh = Q + head * N * D, *Kh = K + head * N * D, *Vh = V + head * N * D;

    // Algorithm 1, lines 4-5: load Q_i; O_i = 0, l = 0, m = -inf.
    load_rows<D, Br>(sm.Q, Qh, row0, N);
    for (int x = tid; x < Br * D; x += THREADS) sm.O[x / D][x % D] = 0.f;
    for (int r = tid; r < Br; r += THREADS) {
        sm.m[r] = -INFINITY;
        sm.l[r] = 0.f;
    }

    const int Tc = (N + Bc - 1) / Bc;
    // solution begin
    // [region loop]
    // solution end
    for (int j = 0; j < Tc; ++j) {  // Algorithm 1, line 6
        const int key0 = j * Bc;
        // Barrier 1: every warp has finished reading K_j-1, V_j-1 and P of the previous
        // tile before we overwrite them (on j = 0: Q_i, O_i, m, l are initialised).
        __syncthreads();
        load_rows<D, Bc>(sm.K, Kh, key0, N);  // line 7
        load_rows<D, Bc>(sm.V, Vh, key0, N);
        // Barrier 2: the whole K_j, V_j tile is in shared memory before anyone reads it.
        __syncthreads();

        // TODO(2) begin
        // [region scores]
        // Line 8: S = Q_i K_j^T (base-2 units). Warp w computes rows w + 8*i, lane = key.
        // K[lane][..] with a 4-float pad: conflict-free; Q[row][..] is one broadcast.
        {
            float4 acc[Br / WARPS];
#pragma unroll
            for (int i = 0; i < Br / WARPS; ++i) acc[i] = make_float4(0.f, 0.f, 0.f, 0.f);
            // Rolled on purpose: unrolled (or left to the compiler), the loads of later steps
            // are hoisted, the 64-register cap of MIN_BLOCKS = 4 is exceeded and ptxas spills
            // (README, "Registers, unrolling and spills"). 32 warps per SM hide the latency.
#pragma unroll 1
            for (int k = 0; k < D; k += 4) {
                const float4 kv = *reinterpret_cast<const float4 *>(&sm.K[lane][k]);
#pragma unroll
                for (int i = 0; i < Br / WARPS; ++i)
                    acc[i] = fma4(*reinterpret_cast<const float4 *>(&sm.Q[warp + WARPS * i][k]), kv, acc[i]);
            }
            const bool valid = key0 + lane < N;  // the last tile may run past the sequence
#pragma unroll
            for (int i = 0; i < Br / WARPS; ++i)
                sm.S[warp + WARPS * i][lane] = valid ? sum4(acc[i]) * scale_log2 : -INFINITY;
        }
        // [end scores]
        // TODO(2) end
        //| /* TODO(2): line 8, the Br x Bc scores S = Q_i K_j^T in base-2 units (times scale_log2),
        //|  * into sm.S, from sm.Q and sm.K. This warp computes rows warp + WARPS * i (i < RPW),
        //|  * this lane the score of key key0 + lane; keys >= N score -INFINITY. Keep four partial
        //|  * sums per dot product (fma4, sum4), and no register spill: make ptxas-lesson3 must say
        //|  * 0 bytes. README: "How the block does it", "Four partial sums per dot product",
        //|  * "Registers, unrolling and spills". */
        // Barrier 3: the softmax threads of a row are not the threads that wrote it.
        __syncthreads();

        //| // Line 9, the online softmax, THREADS / Br = 8 neighbouring lanes per row.
        // solution begin
        // [region online-softmax]
        // Line 9: m_new = max(m, rowmax(S)); P = exp2(S - m_new); l = alpha*l + rowsum(P),
        // alpha = exp2(m - m_new). THREADS / Br = 8 neighbouring lanes share a row, 4 keys each.
        // solution end
        {
            constexpr int TPR = THREADS / Br;  // threads per row
            static_assert(Bc == 4 * TPR, "one float4 of scores per thread");
            const int r = tid / TPR, part = tid % TPR;
            // TODO(3) begin
            float4 s = *reinterpret_cast<const float4 *>(&sm.S[r][4 * part]);
            const float m_old = sm.m[r], l_old = sm.l[r];
            float mx = fmaxf(fmaxf(s.x, s.y), fmaxf(s.z, s.w));
#pragma unroll
            for (int off = TPR / 2; off > 0; off /= 2)  // max over the 8 lanes of this row
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));
            // Key 0 of tile 0 is always valid, so m_new is finite from the first tile on
            // and exp2(-inf - m_new) = 0 for masked keys; alpha = exp2(-inf) = 0 on tile 0.
            const float m_new = fmaxf(m_old, mx);
            s.x = exp2f(s.x - m_new);
            s.y = exp2f(s.y - m_new);
            s.z = exp2f(s.z - m_new);
            s.w = exp2f(s.w - m_new);
            *reinterpret_cast<float4 *>(&sm.S[r][4 * part]) = s;  // P overwrites S
            float sum = (s.x + s.y) + (s.z + s.w);
#pragma unroll
            for (int off = TPR / 2; off > 0; off /= 2)
                sum += __shfl_xor_sync(0xffffffffu, sum, off);
            // All 8 lanes have read m_old, l_old above; one of them updates the row.
            __syncwarp();
            if (part == 0) {
                const float alpha = exp2f(m_old - m_new);
                sm.alpha[r] = alpha;
                sm.m[r] = m_new;
                sm.l[r] = alpha * l_old + sum;
            }
            // TODO(3) end
            //| /* TODO(3): update row r with this thread's 4 scores sm.S[r][4 * part ..]: the row max
            //|  * over the row's 8 lanes, P = exp2(S - m_new) written over S, the row sum, and the
            //|  * row's new alpha, m, l, written by one lane once all 8 have read the old m and l.
            //|  * README: "The softmax phase: 8 lanes per row", "Every barrier, and why". */
            //| (void)r; (void)part;  // (delete when done)
        }
        // solution begin
        // [end online-softmax]
        // solution end
        // Barrier 4: P and alpha of a row come from other warps than the ones that use them.
        __syncthreads();

        //| // Line 10: O_i = diag(alpha) O_i + P V_j.
        // solution begin
        // [region pv]
        // Line 10: O_i = diag(alpha) O_i + P V_j. Warp w owns rows w + 8*i; lane owns columns
        // lane + 32*c. P[row][k..k+3] is a broadcast, V[k][lane] is conflict-free.
        // solution end
        {
            // TODO(4) begin
            constexpr int RPW = Br / WARPS;  // rows per warp
            constexpr int CPT = D / 32;      // columns per thread
            float o[RPW][CPT];
#pragma unroll
            for (int i = 0; i < RPW; ++i) {
                const float a = sm.alpha[warp + WARPS * i];
#pragma unroll
                for (int c = 0; c < CPT; ++c) o[i][c] = a * sm.O[warp + WARPS * i][lane + 32 * c];
            }
            // Rolled like the S loop, for the same register budget (unrolled, this one alone
            // does not spill with nvcc 13.0).
#pragma unroll 1
            for (int k = 0; k < Bc; k += 4) {
                float4 p[RPW];
#pragma unroll
                for (int i = 0; i < RPW; ++i) p[i] = *reinterpret_cast<const float4 *>(&sm.S[warp + WARPS * i][k]);
#pragma unroll
                for (int c = 0; c < CPT; ++c) {
                    const float v0 = sm.V[k][lane + 32 * c], v1 = sm.V[k + 1][lane + 32 * c];
                    const float v2 = sm.V[k + 2][lane + 32 * c], v3 = sm.V[k + 3][lane + 32 * c];
#pragma unroll
                    for (int i = 0; i < RPW; ++i) {
                        o[i][c] = fmaf(p[i].x, v0, o[i][c]);
                        o[i][c] = fmaf(p[i].y, v1, o[i][c]);
                        o[i][c] = fmaf(p[i].z, v2, o[i][c]);
                        o[i][c] = fmaf(p[i].w, v3, o[i][c]);
                    }
                }
            }
#pragma unroll
            for (int i = 0; i < RPW; ++i)
#pragma unroll
                for (int c = 0; c < CPT; ++c) sm.O[warp + WARPS * i][lane + 32 * c] = o[i][c];
            // TODO(4) end
            //| constexpr int CPT = D / 32;  // columns per thread
            //| /* TODO(4): O_i = diag(alpha) O_i + P V_j for this thread's RPW rows (warp + WARPS * i)
            //|  * and CPT columns (lane + 32 * c), from sm.O, sm.alpha, sm.S (now P) and sm.V,
            //|  * through registers, then back to sm.O. Load each V[k][col] once and use it for all
            //|  * of the thread's rows; read P four keys at a time; no register spill.
            //|  * README: "The PV phase: reuse in registers". */
            //| static_assert(RPW * WARPS == Br && CPT * 32 == D, "rows and columns split evenly");
        }
        // solution begin
        // [end pv]
        // solution end
    }
    // solution begin
    // [end loop]
    // solution end
    // Barrier 5: the epilogue reads O_i and l with a different thread mapping.
    __syncthreads();

    // TODO(5) begin
    // [region epilogue]
    // Lines 12-15: O_i = diag(l)^-1 O_i, L_i = m + log(l) in natural log, one write each.
    // l >= 1 for every row: the row's max key contributes exp2(0) = 1.
    for (int v = tid; v < Br * D / 4; v += THREADS) {
        const int r = v / (D / 4), c = (v % (D / 4)) * 4;
        if (row0 + r >= N) continue;
        const float inv_l = 1.f / sm.l[r];
        float4 x = *reinterpret_cast<const float4 *>(&sm.O[r][c]);
        x.x *= inv_l; x.y *= inv_l; x.z *= inv_l; x.w *= inv_l;
        *reinterpret_cast<float4 *>(O + head * N * D + (size_t)(row0 + r) * D + c) = x;
    }
    for (int r = tid; r < Br; r += THREADS)
        if (row0 + r < N) L[head * N + row0 + r] = sm.m[r] * LN2 + logf(sm.l[r]);
    // [end epilogue]
    // TODO(5) end
    //| /* TODO(5): lines 12-15, one write each: the rows of O_i below N divided by their l, with
    //|  * coalesced float4 stores at this head's slice of O; and L of those rows in natural-log
    //|  * units (m is in base 2). README: "One tile at a time", "Coalesced loads". */
    //| (void)O; (void)L; (void)lane; (void)warp; (void)scale_log2; (void)LN2;  // (delete when done)
}

/* Opts the kernel in to more than 48 KB of dynamic shared memory when it needs it (d = 128:
 * 71 KB) and launches it. Returns ATTN_OK, or ATTN_UNSUPPORTED for a head dim other than
 * 64/128. A GPU with less shared memory per block than the kernel needs (sm_75: 64 KB)
 * makes the launch fail; the harness reports that as a CUDA error. */
template <int D>
static int launch(const attn_args *a) {
    const size_t smem = sizeof(SharedTiles<D>);
    if (smem > 48 * 1024)
        cudaFuncSetAttribute(flash_tiled_kernel<D>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
    const dim3 grid((a->N + Br - 1) / Br, a->H, a->B);
    flash_tiled_kernel<D><<<grid, THREADS, smem, (cudaStream_t)a->stream>>>(
        (const float *)a->Q, (const float *)a->K, (const float *)a->V, (float *)a->O, a->L, a->N,
        a->scale * 1.4426950408889634f);
    return ATTN_OK;
}

int attention_forward(const attn_args *a) {
    //| if (STARTER_NOT_DONE) return ATTN_NOT_IMPLEMENTED;
    if (a->dtype != DTYPE_FP32 || a->causal) return ATTN_UNSUPPORTED;
    if (a->d == 64) return launch<64>(a);
    if (a->d == 128) return launch<128>(a);
    return ATTN_UNSUPPORTED;
}

/* runner_forward_f64.cu: the float64 forward pass that produces the backward lessons' O and L
 * (forward_f64.h says why it exists and how it is checked). */
#include "forward_f64.h"
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <math.h>
#include "cuda_check.h"

namespace {

constexpr int FW_WARPS = 8;          /* query rows per block: one warp each */
constexpr int FW_TK = 32;            /* keys per shared-memory tile: one per lane */
constexpr int FW_MAXC = 256 / 32;    /* columns of O per lane, d <= 256 */

__device__ __forceinline__ float to_f(float x) { return x; }
__device__ __forceinline__ float to_f(__half x) { return __half2float(x); }
__device__ __forceinline__ float to_f(__nv_bfloat16 x) { return __bfloat162float(x); }
/* Through float first, as the host's round_value does: the stored O is exactly what rounding
 * the float64 result to fp32 and then to the dtype gives. */
template <typename T> __device__ __forceinline__ T from_d(double x);
template <> __device__ __forceinline__ float from_d<float>(double x) { return (float)x; }
template <> __device__ __forceinline__ __half from_d<__half>(double x) { return __float2half_rn((float)x); }
template <> __device__ __forceinline__ __nv_bfloat16 from_d<__nv_bfloat16>(double x) {
    return __float2bfloat16_rn((float)x);
}

__device__ __forceinline__ double warp_max(double x) {
    for (int off = 16; off > 0; off /= 2) x = fmax(x, __shfl_xor_sync(0xffffffffu, x, off));
    return x;
}
__device__ __forceinline__ double warp_sum(double x) {
    for (int off = 16; off > 0; off /= 2) x += __shfl_xor_sync(0xffffffffu, x, off);
    return x;
}

/* One warp per query row i, FW_WARPS consecutive rows per block sharing each K (and V) tile
 * in shared memory (fp32 there: the inputs are fp32, fp16 or bf16 values, all exact in fp32).
 * Lane t scores key k0 + t of the tile (a full dot product in float64, so no reduction per
 * key); the probabilities then go to every lane by shuffles for O += p V, lane t owning the
 * columns t, t + 32, ... Pass 0 finds the row max m; pass 1 recomputes the same scores (same
 * operations in the same order, so the same bits), sums l = sum exp(S - m) and O. Rows >= N
 * compute nothing but take part in the loads and barriers. Grid: B*H*ceil(N / FW_WARPS) blocks
 * (1-D), 32 * FW_WARPS threads; dynamic shared memory (FW_TK (2d + 1) + FW_WARPS d) floats. */
template <typename T>
__global__ void __launch_bounds__(32 * FW_WARPS)
forward_f64_kernel(const T *__restrict__ Q, const T *__restrict__ K, const T *__restrict__ V, T *__restrict__ O,
                   float *__restrict__ L, int N, int d, double scale, int causal) {
    extern __shared__ float fw_smem[];
    const int pitch = d + 1; /* row t of K at t (d + 1): the 32 lanes' rows start in 32 different banks */
    float *Ks = fw_smem, *Vs = Ks + FW_TK * pitch, *Qs = Vs + FW_TK * d;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const long long tiles = (N + FW_WARPS - 1) / FW_WARPS;
    const long long head = blockIdx.x / tiles;
    const int row0 = (int)(blockIdx.x % tiles) * FW_WARPS, i = row0 + warp;
    const size_t base = (size_t)head * N * d;
    for (int c = lane; c < d; c += 32) Qs[warp * d + c] = i < N ? to_f(Q[base + (size_t)i * d + c]) : 0.f;
    const int last_row = min(N, row0 + FW_WARPS) - 1;
    const int kend = causal ? last_row + 1 : N;           /* keys any row of the block sees */
    const int visible = i < N ? (causal ? i + 1 : N) : 0; /* keys this warp's row sees */
    double m = -INFINITY, l = 0, o[FW_MAXC];
    for (int k = 0; k < FW_MAXC; ++k) o[k] = 0;
    for (int pass = 0; pass < 2; ++pass) {
        for (int k0 = 0; k0 < kend; k0 += FW_TK) {
            __syncthreads(); /* everyone is done with the previous tile (and Qs is written) */
            for (int x = threadIdx.x; x < FW_TK * d; x += blockDim.x) {
                const int r = x / d, c = x % d, key = k0 + r;
                Ks[r * pitch + c] = key < N ? to_f(K[base + (size_t)key * d + c]) : 0.f;
                if (pass) Vs[r * d + c] = key < N ? to_f(V[base + (size_t)key * d + c]) : 0.f;
            }
            __syncthreads();
            const int j = k0 + lane;
            double s = -INFINITY;
            if (j < visible) {
                double acc = 0;
                for (int c = 0; c < d; ++c) acc = fma((double)Qs[warp * d + c], (double)Ks[lane * pitch + c], acc);
                s = acc * scale;
            }
            if (pass == 0) {
                m = fmax(m, warp_max(s));
                continue;
            }
            const double p = j < visible ? exp(s - m) : 0.0; /* <= 1; exactly 1 at the row max */
            l += p;
            const int nt = min(FW_TK, kend - k0);
            for (int t = 0; t < nt; ++t) {
                const double pt = __shfl_sync(0xffffffffu, p, t);
                for (int k = 0; k < FW_MAXC; ++k) {
                    const int c = lane + 32 * k;
                    if (c < d) o[k] = fma(pt, (double)Vs[t * d + c], o[k]);
                }
            }
        }
    }
    l = warp_sum(l); /* >= 1 for a row < N: its max key contributes exp(0) */
    if (i >= N) return;
    for (int k = 0; k < FW_MAXC; ++k) {
        const int c = lane + 32 * k;
        if (c < d) O[base + (size_t)i * d + c] = from_d<T>(o[k] / l);
    }
    if (lane == 0) L[(size_t)head * N + i] = (float)(m + log(l));
}

template <typename T>
void launch(const void *Q, const void *K, const void *V, void *O, float *L, int B, int H, int N, int d, float scale,
            int causal, cudaStream_t stream) {
    const size_t smem = sizeof(float) * ((size_t)FW_TK * (2 * d + 1) + (size_t)FW_WARPS * d);
    CUDA_CHECK(cudaFuncSetAttribute(forward_f64_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    const long long blocks = (long long)B * H * ((N + FW_WARPS - 1) / FW_WARPS);
    forward_f64_kernel<T><<<(unsigned)blocks, 32 * FW_WARPS, smem, stream>>>(
        (const T *)Q, (const T *)K, (const T *)V, (T *)O, L, N, d, (double)scale, causal);
    CUDA_CHECK(cudaGetLastError());
}

} // namespace

void forward_f64(const void *Q, const void *K, const void *V, void *O, float *L, int B, int H, int N, int d,
                 float scale, int causal, dtype_t dtype, cudaStream_t stream) {
    if (d > 256 || (long long)B * H * ((N + FW_WARPS - 1) / FW_WARPS) > 2147483647LL) {
        fprintf(stderr, "forward_f64: B=%d H=%d N=%d d=%d is beyond the runner's float64 forward (d <= 256, "
                "fewer than 2^31 blocks of %d rows)\n", B, H, N, d, FW_WARPS);
        exit(EXIT_USAGE);
    }
    if (dtype == DTYPE_FP32) launch<float>(Q, K, V, O, L, B, H, N, d, scale, causal, stream);
    else if (dtype == DTYPE_FP16) launch<__half>(Q, K, V, O, L, B, H, N, d, scale, causal, stream);
    else launch<__nv_bfloat16>(Q, K, V, O, L, B, H, N, d, scale, causal, stream);
}

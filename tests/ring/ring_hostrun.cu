/* tests/ring/ring_hostrun.cu: lesson 15's ring run for real on the CPU (tests/ring/hostrun.sh: make
 * emu-15). The solution's host code, unchanged, over the fake CUDA runtime and NCCL of
 * tests/fake_cuda/fake_cuda.cpp and tests/ring/fake_nccl.cpp: lesson 09's library (reference/include/hopper_attention.h, which
 * ring_block.h calls), merge_partial and convert_out replaced by CPU stand-ins (float64 attention
 * of one chunk pair, rounded as the kernel rounds), the rest (the
 * layout, the scatter's strided copies, the double buffers, the exchange, the order of pairs and
 * merges, the gather) as the GPU runs it, but synchronously. O and L are graded against float64
 * attention of the whole sequence, on ragged and aligned shapes, causal or not, fp16 and bf16,
 * with a shape repeated (the ranks kept) and changed (the ranks remade).
 * Built twice: -DRING_VIRTUAL_RANKS=3 (virtual ring) and -DRING_NCCL (fake NCCL on 2 and 4 fake
 * GPUs; with one GPU it must run the virtual ring). What it cannot see: order between streams (the fake
 * runs every call at once, so a missing wait passes here), the real kernels (merge_partial's body
 * included: its rule is merge_weights, checked by ring_logic.cu's tests, linked in here), speed. */
#include "ring_logic.cu"  // the solution (or RING_LOGIC_SRC, a student's file) and the logic tests
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <type_traits>
#include <vector>
#include "fake_cuda.h"

template <typename T> static float to_f(T x);
template <> float to_f(__half x) { return __half2float(x); }
template <> float to_f(__nv_bfloat16 x) { return __bfloat162float(x); }
template <typename T> static T from_f(float x);
template <> __half from_f(float x) { return __float2half_rn(x); }
template <> __nv_bfloat16 from_f(float x) { return __float2bfloat16_rn(x); }

/* Lesson 09's library on the CPU (reference/include/hopper_attention.h): attention of N query rows
 * against N keys per (b, h), in float64, O rounded to T. It also checks what the header asks of
 * its caller: the device prepared (block_prepare_device), the chunk's own keys and heads, a
 * stream, sms_left = RING_SMS_LEFT. */
static bool g_prepared[RING_MAX_RANKS];
extern "C" int hopper_attention_prepare_device(int dev) {
    if (dev < 0 || dev >= RING_MAX_RANKS || cudaSetDevice(dev) != cudaSuccess) return ATTN_UNSUPPORTED;
    g_prepared[dev] = true;
    return ATTN_OK;
}
template <typename T, int D>
static void attention_cpu(const attn_args *a) {
    const T *Q = (const T *)a->Q, *K = (const T *)a->K, *V = (const T *)a->V;
    T *O = (T *)a->O;
    float *L = a->L;
    const int N = a->N, BH = a->B * a->H, causal = a->causal;
    const double scale = a->scale;
    std::vector<double> s(N);
    for (int bh = 0; bh < BH; ++bh)
        for (int i = 0; i < N; ++i) {
            const size_t qi = ((size_t)bh * N + i) * D;
            const int keys = causal ? i + 1 : N;
            double m = -INFINITY, l = 0;
            for (int j = 0; j < keys; ++j) {
                double dot = 0;
                for (int c = 0; c < D; ++c) dot += (double)to_f(Q[qi + c]) * to_f(K[((size_t)bh * N + j) * D + c]);
                s[j] = dot * scale;
                m = std::max(m, s[j]);
            }
            for (int j = 0; j < keys; ++j) l += exp(s[j] - m);
            for (int c = 0; c < D; ++c) {
                double o = 0;
                for (int j = 0; j < keys; ++j) o += exp(s[j] - m) * to_f(V[((size_t)bh * N + j) * D + c]);
                O[qi + c] = from_f<T>((float)(o / l));
            }
            L[(size_t)bh * N + i] = (float)(m + log(l));
        }
}

extern "C" int hopper_attention_forward(const attn_args *a, int sms_left) {
    int dev = -1;
    cudaGetDevice(&dev);
    cr_assert(dev >= 0 && dev < RING_MAX_RANKS && g_prepared[dev],
              "block_attention on device %d, which block_prepare_device has not prepared", dev);
    cr_assert(a->N_kv == a->N && a->H_kv == a->H && !a->seqlens_kv && a->stream,
              "block_attention's arguments: N_kv %d (N %d), H_kv %d (H %d), seqlens_kv %p, stream %p", a->N_kv, a->N,
              a->H_kv, a->H, (const void *)a->seqlens_kv, a->stream);
    cr_assert_eq(sms_left, RING_SMS_LEFT);
    if (!(a->scale > 0.f)) return ATTN_UNSUPPORTED;
    if (a->N < 1 || a->B < 1 || a->H < 1) return ATTN_OK;
    const bool fp16 = a->dtype == DTYPE_FP16, bf16 = a->dtype == DTYPE_BF16;
    if (fp16 && a->d == 64) attention_cpu<__half, 64>(a);
    else if (fp16 && a->d == 128) attention_cpu<__half, 128>(a);
    else if (bf16 && a->d == 64) attention_cpu<__nv_bfloat16, 64>(a);
    else if (bf16 && a->d == 128) attention_cpu<__nv_bfloat16, 128>(a);
    else return ATTN_UNSUPPORTED;
    return ATTN_OK;
}

/* merge_partial(o_acc, l_acc, o_blk, l_blk, rows, d, first), one row at a time as its warps. */
template <typename T>
static void merge_cpu(dim3, dim3, void **args) {
    float *o_acc = *(float **)args[0], *l_acc = *(float **)args[1];
    const T *o_blk = *(const T **)args[2];
    const float *l_blk = *(const float **)args[3];
    const long long rows = *(long long *)args[4];
    const int d = *(int *)args[5], first = *(int *)args[6];
    for (long long r = 0; r < rows; ++r) {
        const MergeWeights w = first ? MergeWeights{0.f, 1.f, l_blk[r]} : merge_weights(l_acc[r], l_blk[r]);
        for (int c = 0; c < d; ++c) o_acc[r * d + c] = (first ? 0.f : w.a * o_acc[r * d + c]) + w.b * to_f(o_blk[r * d + c]);
        l_acc[r] = w.L;
    }
}

template <typename T>
static void convert_cpu(dim3, dim3, void **args) {
    T *out = *(T **)args[0];
    const float *in = *(const float **)args[1];
    const long long n = *(long long *)args[2];
    for (long long i = 0; i < n; ++i) out[i] = from_f<T>(in[i]);
}

static void setup(int devices) {
    fake_set_devices(devices);
    fake_poison_allocations(1);  // a read of a buffer before any write shows as NaN
    fake_on_launch((const void *)merge_partial<__half>, merge_cpu<__half>);
    fake_on_launch((const void *)merge_partial<__nv_bfloat16>, merge_cpu<__nv_bfloat16>);
    fake_on_launch((const void *)convert_out<__half>, convert_cpu<__half>);
    fake_on_launch((const void *)convert_out<__nv_bfloat16>, convert_cpu<__nv_bfloat16>);
}

/* One call of attention_forward on random inputs (the fake device's memory is host memory),
 * graded against float64 attention of whole rows. */
template <typename T>
static void check_shape(int B, int H, int N, int d, int causal, float qscale, RingTimeline *tl = NULL) {
    const size_t n = (size_t)B * H * N * d;
    T *Q, *K, *V, *O;
    float *L;
    cudaMalloc((void **)&Q, n * sizeof(T)); cudaMalloc((void **)&K, n * sizeof(T)); cudaMalloc((void **)&V, n * sizeof(T));
    cudaMalloc((void **)&O, n * sizeof(T)); cudaMalloc((void **)&L, (size_t)B * H * N * sizeof(float));
    uint64_t x = 88172645463325252ULL ^ (uint64_t)(N * 131 + d * 7 + causal);
    auto uni = [&x]() { x ^= x << 13; x ^= x >> 7; x ^= x << 17; return (float)((x >> 11) * (2.0 / 9007199254740992.0) - 1.0); };
    for (size_t i = 0; i < n; ++i) { Q[i] = from_f<T>(uni() * qscale); K[i] = from_f<T>(uni()); V[i] = from_f<T>(uni()); }
    attn_args a = {};
    a.B = B; a.H = H; a.N = N; a.d = d; a.causal = causal; a.scale = 1.f / sqrtf((float)d);
    a.dtype = std::is_same<T, __half>::value ? DTYPE_FP16 : DTYPE_BF16;
    a.Q = Q; a.K = K; a.V = V; a.O = O; a.L = L; a.N_kv = N; a.H_kv = H;
    cudaStreamCreateWithFlags((cudaStream_t *)&a.stream, 0);
    const int rc = ring_forward(&a, tl);
    cr_assert_eq(rc, ATTN_OK, "B=%d H=%d N=%d d=%d causal %d: ring_forward returned %d%s", B, H, N, d, causal, rc,
                 rc == ATTN_NOT_IMPLEMENTED ? " (ATTN_NOT_IMPLEMENTED: TODO(5), (6) or (7) still returns it)" : "");
    const double tol_o = std::is_same<T, __half>::value ? 4e-3 : 3e-2;
    std::vector<double> s(N);
    int bad = 0;
    for (int bh = 0; bh < B * H && bad < 5; ++bh)
        for (int i = 0; i < N && bad < 5; ++i) {
            const int keys = causal ? i + 1 : N;
            double m = -INFINITY, l = 0;
            for (int j = 0; j < keys; ++j) {
                double dot = 0;
                for (int c = 0; c < d; ++c)
                    dot += (double)to_f(Q[((size_t)bh * N + i) * d + c]) * to_f(K[((size_t)bh * N + j) * d + c]);
                s[j] = dot * a.scale;
                m = std::max(m, s[j]);
            }
            for (int j = 0; j < keys; ++j) l += exp(s[j] - m);
            const double Lref = m + log(l), Lgot = L[(size_t)bh * N + i];
            if (!(fabs(Lgot - Lref) <= 1e-4 * (1 + fabs(Lref)))) {
                cr_log_error("B=%d H=%d N=%d d=%d causal %d: L[bh %d][%d] = %g, want %g", B, H, N, d, causal, bh, i, Lgot, Lref);
                ++bad;
            }
            for (int c = 0; c < d; ++c) {
                double o = 0;
                for (int j = 0; j < keys; ++j) o += exp(s[j] - m) * to_f(V[((size_t)bh * N + j) * d + c]);
                const double got = to_f(O[((size_t)bh * N + i) * d + c]);
                if (!(fabs(got - o / l) <= tol_o)) {
                    cr_log_error("B=%d H=%d N=%d d=%d causal %d: O[bh %d][%d][%d] = %g, want %g", B, H, N, d, causal, bh,
                                 i, c, got, o / l);
                    ++bad;
                    break;
                }
            }
        }
    cr_assert_eq(bad, 0, "B=%d H=%d N=%d d=%d causal %d: the gathered O or L is wrong (above)", B, H, N, d, causal);
    cudaFree(Q); cudaFree(K); cudaFree(V); cudaFree(O); cudaFree(L);
}

/* The shapes: ragged (77, 1: fewer ranks), aligned on every ring size up to 4 (24, 48, 96),
 * both head dimensions, logits of about +-30, a shape twice in a row, bf16. */
static void check_shapes() {
    check_shape<__half>(1, 1, 4, 64, 1, 1.f);
    check_shape<__half>(2, 3, 77, 64, 0, 1.f);
    check_shape<__half>(2, 3, 77, 64, 1, 1.f);
    check_shape<__half>(1, 2, 1, 128, 1, 1.f);
    check_shape<__half>(2, 2, 48, 64, 0, 1.f);
    check_shape<__half>(2, 2, 48, 64, 1, 1.f);
    check_shape<__half>(2, 2, 48, 64, 1, 1.f);  // the ranks kept from the call before
    check_shape<__half>(1, 3, 96, 128, 1, 30.f);
    check_shape<__half>(1, 2, 24, 128, 0, 30.f);
    check_shape<__nv_bfloat16>(2, 1, 96, 64, 1, 1.f);
}

#ifdef RING_NCCL
Test(ring_hostrun, nccl_two_gpus) { setup(2); check_shapes(); }
Test(ring_hostrun, nccl_four_gpus) { setup(4); check_shapes(); }
Test(ring_hostrun, nccl_three_gpus_with_timeline) {
    setup(3);
    static RingTimeline tl;  // the fake's events: the tool's code path, not its times
    for (int s = 0; s < 3; ++s)
        for (int r = 0; r < 3; ++r) {
            cudaEventCreate(&tl.compute_begin[s][r]); cudaEventCreate(&tl.compute_end[s][r]);
            cudaEventCreate(&tl.comm_begin[s][r]); cudaEventCreate(&tl.comm_end[s][r]);
        }
    check_shape<__half>(1, 2, 96, 64, 1, 1.f, &tl);
    check_shape<__half>(1, 2, 48, 128, 0, 1.f, &tl);
}
Test(ring_hostrun, nccl_build_one_gpu_runs_virtual) {  // decided when it runs: the virtual ring
    setup(1);
    cr_redirect_stderr();
    check_shapes();
}
#else
Test(ring_hostrun, virtual_ranks) { setup(1); check_shapes(); }
#endif

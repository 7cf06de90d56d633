/* tests/ring/standins.h: what lesson 15's ring runs on the CPU in place of the GPU's kernels, for the
 * ring's host code over the fake CUDA runtime (tests/fake_cuda): lesson 09's library
 * (reference/include/hopper_attention.h, which ring_block.h calls) as float64 attention of one
 * chunk pair, rounded as the kernel rounds, and merge_partial and convert_out as loops over their
 * rows, and the fault mode's kernels (ring_canary as the GPU runs it, ring_delay as nothing). Each
 * runs in its stream's order under the fake's schedules (fake_set_schedule: it enqueues itself).
 * Included after the ring's source, by ring_hostrun.cu (the Criterion tests) and ring_runner.cu
 * (the real grader); ring_standins(devices) registers them. What the library asks of its caller
 * is checked with STANDIN_REQUIRE (Criterion's cr_assert there, else a message and abort). */
#ifndef RING_STANDINS_H
#define RING_STANDINS_H
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <algorithm>
#include <vector>
#include "fake_cuda.h"

#ifndef STANDIN_REQUIRE
#define STANDIN_REQUIRE(cond, ...)                                                                  \
    do {                                                                                          \
        if (!(cond)) {                                                                            \
            fprintf(stderr, "lesson 15 on the CPU: ");                                            \
            fprintf(stderr, __VA_ARGS__);                                                         \
            fprintf(stderr, "\n");                                                                \
            abort();                                                                              \
        }                                                                                         \
    } while (0)
#endif

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
    STANDIN_REQUIRE(dev >= 0 && dev < RING_MAX_RANKS && g_prepared[dev],
                    "block_attention on device %d, which block_prepare_device has not prepared", dev);
    STANDIN_REQUIRE(a->N_kv == a->N && a->H_kv == a->H && !a->seqlens_kv && a->stream,
                    "block_attention's arguments: N_kv %d (N %d), H_kv %d (H %d), seqlens_kv %p, stream %p", a->N_kv,
                    a->N, a->H_kv, a->H, (const void *)a->seqlens_kv, a->stream);
    STANDIN_REQUIRE(sms_left == RING_SMS_LEFT, "block_attention passes sms_left = %d, not RING_SMS_LEFT = %d", sms_left,
                    RING_SMS_LEFT);
    if (!(a->scale > 0.f)) return ATTN_UNSUPPORTED;
    if (a->N < 1 || a->B < 1 || a->H < 1) return ATTN_OK;
    const bool fp16 = a->dtype == DTYPE_FP16, bf16 = a->dtype == DTYPE_BF16;
    void (*run)(const attn_args *) = fp16 && a->d == 64    ? attention_cpu<__half, 64>
                                     : fp16 && a->d == 128 ? attention_cpu<__half, 128>
                                     : bf16 && a->d == 64  ? attention_cpu<__nv_bfloat16, 64>
                                     : bf16 && a->d == 128 ? attention_cpu<__nv_bfloat16, 128>
                                                           : nullptr;
    if (!run) return ATTN_UNSUPPORTED;
    const attn_args call = *a;  // the pointers and the shape: what the kernel would read when it runs
    fake_enqueue((CUstream_st *)a->stream, 0, [run, call] { run(&call); });
    return ATTN_OK;
}

/* merge_partial(o_acc, l_acc, o_blk, l_blk, rows, d, first), one row at a time as its warps. */
template <typename T>
static void merge_cpu(dim3 grid, dim3 block, void **args) {
    float *o_acc = *(float **)args[0], *l_acc = *(float **)args[1];
    const T *o_blk = *(const T **)args[2];
    const float *l_blk = *(const float **)args[3];
    const long long rows = *(long long *)args[4];
    const int d = *(int *)args[5], first = *(int *)args[6];
    /* the rows the launch covers, one warp per row as TODO(4) has it: a grid too small leaves the
     * last rows unmerged here as on a GPU */
    const long long covered = std::min(rows, (long long)grid.x * grid.y * grid.z * (block.x * block.y * block.z / 32));
    fake_enqueue(fake_launch_stream(), 0, [=] {
        for (long long r = 0; r < covered; ++r) {
            const MergeWeights w = first ? MergeWeights{0.f, 1.f, l_blk[r]} : merge_weights(l_acc[r], l_blk[r]);
            for (int c = 0; c < d; ++c)
                o_acc[r * d + c] = (first ? 0.f : w.a * o_acc[r * d + c]) + w.b * to_f(o_blk[r * d + c]);
            l_acc[r] = w.L;
        }
    });
}

template <typename T>
static void convert_cpu(dim3, dim3, void **args) {
    T *out = *(T **)args[0];
    const float *in = *(const float **)args[1];
    const long long n = *(long long *)args[2];
    fake_enqueue(fake_launch_stream(), 0, [=] {
        for (long long i = 0; i < n; ++i) out[i] = from_f<T>(in[i]);
    });
}

/* The fault mode's check, canary_check as ring_canary's one thread runs it; its delay, nothing to
 * run (a copy's turn: the schedule decides when the transfer after it runs). */
static void canary_cpu(dim3, dim3, void **args) {
    const unsigned short *kv = *(const unsigned short **)args[0];
    const size_t chunk_elems = *(size_t *)args[1];
    const int chunks = *(int *)args[2];
    unsigned short *snap = *(unsigned short **)args[3];
    int *fault = *(int **)args[4];
    const int phase = *(int *)args[5];
    fake_enqueue(fake_launch_stream(), 0, [=] { canary_check(kv, chunk_elems, chunks, snap, fault, phase); });
}
static void delay_cpu(dim3, dim3, void **) { fake_enqueue(fake_launch_stream(), 1, [] {}); }

/* The stand-ins registered with the fake CUDA runtime, on `devices` fake GPUs. */
static void ring_standins(int devices) {
    fake_set_devices(devices);
    fake_on_launch((const void *)merge_partial<__half>, merge_cpu<__half>);
    fake_on_launch((const void *)merge_partial<__nv_bfloat16>, merge_cpu<__nv_bfloat16>);
    fake_on_launch((const void *)convert_out<__half>, convert_cpu<__half>);
    fake_on_launch((const void *)convert_out<__nv_bfloat16>, convert_cpu<__nv_bfloat16>);
    fake_on_launch((const void *)ring_canary, canary_cpu);
    fake_on_launch((const void *)ring_delay, delay_cpu);
}
#endif

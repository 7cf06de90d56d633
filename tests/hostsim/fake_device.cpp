/* tests/hostsim/fake_device.cpp: the harness's own device functions below the runners, faked on the CPU, so that
 * the runners (reference/harness/runner_main.cu with runner_backward.cu: `make hostsim-10`; with
 * runner_attention.cu: `make hostsim-forward`) run for real on a machine without a GPU:
 *   - the CUDA runtime calls the harness makes: tests/fake_cuda/fake_cuda.cpp, linked beside this;
 *   - runner_device.cu's functions (gpu_env.h): a fake H100 report, fill_pattern on host memory,
 *     wait_stream returns at once, time_launches runs the launch once and reports 1 ms;
 *     runner_fill.cu's device_fill_random on the host;
 *   - forward_f64.h on the CPU (attention_row_f64 per row, rounded as the GPU kernel rounds).
 * The lesson's kernels run through an emulator (tests/fp32_emu, tests/warp_emu) linked beside
 * this, or a stand-in lesson computes on the CPU (lowp_lesson.cpp, forward_lesson.cpp). */
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>
#include "attention.h"
#include "buffers.h"
#include "forward_f64.h"
#include "gpu_env.h"
extern "C" {
#include "cpu_reference.h"
}

void gpu_init(gpu_env *g, int quiet) {
    memset(g, 0, sizeof *g);
    g->cc = 90;
    g->peak_fp32 = 66.9;
    g->peak_tensor16 = 989.4;
    g->peak_source = "fake";
    snprintf(g->prop.name, sizeof g->prop.name, "host simulation");
    if (!quiet) printf("GPU: host simulation (tests/hostsim): kernels emulated on the CPU\n");
}
void gpu_require_cc(const gpu_env *, int, int) {}
double gpu_peak(const gpu_env *g, dtype_t t) {
    return t == DTYPE_FP32 ? g->peak_fp32 : t == DTYPE_E4M3 ? 2 * g->peak_tensor16 : g->peak_tensor16;
}
void wait_stream(cudaStream_t, double, const char *) {}
void fill_pattern(void *p, size_t n, int es, uint32_t pattern, cudaStream_t) {
    for (size_t i = 0; i < n; ++i) memcpy((char *)p + i * es, &pattern, es);
}
double time_launches(int (*fn)(void *), void *arg, cudaStream_t, int, int, double, const gpu_env *) {
    fn(arg);
    return 1.0;
}

/* buffers.h: the timed inputs a decode lesson gets, here drawn on the host (any values do). */
void device_fill_random(void *x, size_t n, dtype_t t, uint64_t seed, float scale, cudaStream_t) {
    uint64_t z = seed;
    for (size_t i = 0; i < n; ++i) {
        z = z * 6364136223846793005ull + 1442695040888963407ull;
        const float v = ((float)(z >> 40) * (1.0f / 16777216.0f) * 2.0f - 1.0f) * 1.7320508f * scale;
        if (t == DTYPE_FP32) ((float *)x)[i] = v;
        else if (t == DTYPE_FP16) ((__half *)x)[i] = __float2half_rn(v);
        else ((__nv_bfloat16 *)x)[i] = __float2bfloat16_rn(v);
    }
}

static float to_float(const void *x, size_t i, dtype_t t) {
    if (t == DTYPE_FP32) return ((const float *)x)[i];
    if (t == DTYPE_FP16) return __half2float(((const __half *)x)[i]);
    return __bfloat162float(((const __nv_bfloat16 *)x)[i]);
}

void forward_f64(const void *Q, const void *K, const void *V, void *O, float *L, int B, int H, int N, int d,
                 float scale, int causal, dtype_t dt, cudaStream_t) {
    const size_t sl = (size_t)N * d;
    std::vector<float> q(sl), k(sl), v(sl);
    std::vector<double> o(d);
    for (int bh = 0; bh < B * H; ++bh) {
        for (size_t e = 0; e < sl; ++e) {
            q[e] = to_float(Q, bh * sl + e, dt);
            k[e] = to_float(K, bh * sl + e, dt);
            v[e] = to_float(V, bh * sl + e, dt);
        }
        for (int i = 0; i < N; ++i) {
            double l;
            attention_row_f64(q.data(), k.data(), v.data(), N, d, i, scale, causal, o.data(), &l);
            for (int c = 0; c < d; ++c) {
                const size_t at = bh * sl + (size_t)i * d + c;
                if (dt == DTYPE_FP32) ((float *)O)[at] = (float)o[c];
                else if (dt == DTYPE_FP16) ((__half *)O)[at] = __float2half_rn((float)o[c]);
                else ((__nv_bfloat16 *)O)[at] = __float2bfloat16_rn((float)o[c]);
            }
            L[(size_t)bh * N + i] = (float)l;
        }
    }
}

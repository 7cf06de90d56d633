/* ring_timeline.cu: times lesson 15's ring (bench.sh runs it; mk/ring.mk builds it per transport
 * and layout as build/ring15/timeline-NAME, linked with the solution's object of that build and
 * lesson 09's library). Through ring_timeline.h it measures, from CUDA events recorded on each
 * rank's streams:
 *   whole   the whole call, as the grader times it (scatter from GPU 0, ring, gather)
 *   ring    the ring alone, on the slowest rank: its first step's start to its last step's end
 *           (in training the chunks already live on their GPUs: no scatter, no gather)
 *   per step and rank: compute (the pairs and merges), transfer (the receive of the next block on
 *           the rank's comm stream: its copy by the copy engines, or NCCL's send and receive), and
 *           the wait before the step (compute idle for its block: the part of the transfer the
 *           compute did not hide)
 * --one-gpu times lesson 09's kernel as the ring runs it (its step: the descriptor's library flags, or LIB_FLAGS, and
 * RING_SMS_LEFT), alone on GPU 0, on the whole sequence: the baseline of the scaling.
 * --ranks P: the virtual ring's ranks (attention_set_ranks; refused where the build's ring has one
 * rank per GPU). --transport ce|nccl: the transport (attention_set_transport; default the ring's
 * choice). --ring-delay-us U: the grader's fault mode (attention_set_ring_delay), to see it.
 * TFLOP/s: 4 B H N^2 d, halved when causal.
 * Usage: timeline-NAME -b B -H H -n N -d d [--causal] [--bf16] [--reps R] [--one-gpu] [--ranks P]
 *        [--transport ce|nccl] [--ring-delay-us U] [--label TEXT] [--steps FILE]
 *        (prints one CSV row; --steps appends the per-step table) */
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <algorithm>
#include <vector>
#include "../../ring_block.h"     // --one-gpu: lesson 09's kernel, as the ring calls it
#include "../../ring_timeline.h"  // ring_forward with events, ring_ranks

#define TOOL_CUDA(call)                                                                                  \
    do {                                                                                                 \
        cudaError_t e_ = (call);                                                                         \
        if (e_ != cudaSuccess) {                                                                         \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_));      \
            exit(EXIT_CUDA_ERROR);                                                                       \
        }                                                                                                \
    } while (0)

/* Uniform values in [-1, 1) from a hash of the index (the timing does not depend on them). */
template <typename T>
__global__ void fill_uniform(T *x, long long n, unsigned seed) {
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
        unsigned h = (unsigned)i * 2654435761u ^ seed;
        h ^= h >> 15; h *= 2246822519u; h ^= h >> 13; h *= 3266489917u; h ^= h >> 16;
        x[i] = (T)((h >> 8) * (2.0f / 16777216.0f) - 1.0f);
    }
}

static float elapsed(cudaEvent_t a, cudaEvent_t b) {
    float ms = 0.f;
    TOOL_CUDA(cudaEventElapsedTime(&ms, a, b));
    return ms;
}

static double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : v[v.size() / 2];
}

int main(int argc, char **argv) {
    int B = 1, H = 16, N = 65536, d = 128, causal = 0, reps = 10, one_gpu = 0, ranks = 0, delay_us = 0;
    int transport = ATTN_TRANSPORT_AUTO;
    bool ranks_given = false;
    dtype_t dt = DTYPE_FP16;
    const char *label = "", *steps_path = NULL;
    for (int i = 1; i < argc; ++i) {
        const char *o = argv[i];
        const bool more = i + 1 < argc;
        if (!strcmp(o, "-b") && more) B = atoi(argv[++i]);
        else if (!strcmp(o, "-H") && more) H = atoi(argv[++i]);
        else if (!strcmp(o, "-n") && more) N = atoi(argv[++i]);
        else if (!strcmp(o, "-d") && more) d = atoi(argv[++i]);
        else if (!strcmp(o, "--reps") && more) reps = atoi(argv[++i]);
        else if (!strcmp(o, "--ranks") && more) { ranks_given = true; ranks = atoi(argv[++i]); }
        else if (!strcmp(o, "--label") && more) label = argv[++i];
        else if (!strcmp(o, "--ring-delay-us") && more) delay_us = atoi(argv[++i]);
        else if (!strcmp(o, "--transport") && more && (!strcmp(argv[i + 1], "ce") || !strcmp(argv[i + 1], "nccl")))
            transport = !strcmp(argv[++i], "ce") ? ATTN_TRANSPORT_CE : ATTN_TRANSPORT_NCCL;
        else if (!strcmp(o, "--steps") && more) steps_path = argv[++i];
        else if (!strcmp(o, "--causal")) causal = 1;
        else if (!strcmp(o, "--bf16")) dt = DTYPE_BF16;
        else if (!strcmp(o, "--one-gpu")) one_gpu = 1;
        else {
            fprintf(stderr, "usage: %s -b B -H H -n N -d d [--causal] [--bf16] [--reps R] [--one-gpu] [--ranks P] "
                    "[--transport ce|nccl] [--ring-delay-us U] [--label TEXT] [--steps FILE]\n", argv[0]);
            return EXIT_USAGE;
        }
    }
    if (B < 1 || H < 1 || N < 1 || (d != 64 && d != 128) || reps < 1 ||
        (ranks_given && (ranks < 1 || ranks > RING_MAX_RANKS)) || delay_us < 0 || delay_us > ATTN_RING_DELAY_MAX_US) {
        fprintf(stderr, "bad shape: B, H, N >= 1, d 64 or 128, reps >= 1, --ranks 1..%d, --ring-delay-us 0..%d\n",
                RING_MAX_RANKS, ATTN_RING_DELAY_MAX_US);
        return EXIT_USAGE;
    }
    int dev0 = 0;
    TOOL_CUDA(cudaGetDevice(&dev0));
    const size_t n = (size_t)B * H * N * d;
    void *Q, *K, *V, *O;
    float *L;
    TOOL_CUDA(cudaMalloc(&Q, n * 2)); TOOL_CUDA(cudaMalloc(&K, n * 2)); TOOL_CUDA(cudaMalloc(&V, n * 2));
    TOOL_CUDA(cudaMalloc(&O, n * 2)); TOOL_CUDA(cudaMalloc((void **)&L, (size_t)B * H * N * 4));
    void *bufs[] = {Q, K, V};
    for (int t = 0; t < 3; ++t)
        if (dt == DTYPE_FP16) fill_uniform<<<1024, 256>>>((__half *)bufs[t], (long long)n, 17u + t);
        else fill_uniform<<<1024, 256>>>((__nv_bfloat16 *)bufs[t], (long long)n, 17u + t);
    cudaStream_t stream;
    TOOL_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    attn_args a = {};
    a.B = B; a.H = H; a.N = N; a.d = d; a.causal = causal; a.scale = 1.f / sqrtf((float)d); a.dtype = dt;
    a.Q = Q; a.K = K; a.V = V; a.O = O; a.L = L; a.stream = stream; a.N_kv = N; a.H_kv = H;
    const double flops = 4.0 * B * H * (double)N * N * d * (causal ? 0.5 : 1.0);
    cudaEvent_t t0, t1;
    TOOL_CUDA(cudaEventCreate(&t0)); TOOL_CUDA(cudaEventCreate(&t1));
    std::vector<double> whole, ring;
    int devs[RING_MAX_RANKS], P = 1, c = N;  // the ranks: their number, devices, rows per chunk
    if (one_gpu) {  // lesson 09's kernel alone, as the ring calls it
        if (block_prepare_device(dev0)) return EXIT_NO_GPU;
        for (int r = -2; r < reps; ++r) {
            TOOL_CUDA(cudaEventRecord(t0, stream));
            if (block_attention(Q, K, V, O, L, B, H, N, d, dt, a.scale, causal, stream) != ATTN_OK) return EXIT_FAILED;
            TOOL_CUDA(cudaEventRecord(t1, stream));
            TOOL_CUDA(cudaEventSynchronize(t1));
            if (r >= 0) whole.push_back(elapsed(t0, t1));
        }
        ring = whole;
    } else {
        const int used = attention_set_transport(transport);
        if (used < 0) return EXIT_USAGE;  // the ring said why
        if (attention_set_ring_delay(delay_us)) return EXIT_USAGE;
        if (ranks_given && attention_set_ranks(ranks) != ranks) {
            fprintf(stderr, "--ranks %d: this build's ring has one rank per GPU (NCCL); --ranks sets the virtual "
                    "ring's (one GPU visible, or a build with RING=virtual)\n", ranks);
            return EXIT_USAGE;
        }
        if (ring_forward(&a, NULL) != ATTN_OK) return EXIT_FAILED;  // makes the ranks
        TOOL_CUDA(cudaStreamSynchronize(stream));
        P = ring_ranks(devs, &c);
        static RingTimeline tl;
        for (int s = 0; s < P; ++s)
            for (int r = 0; r < P; ++r) {
                TOOL_CUDA(cudaSetDevice(devs[r]));
                TOOL_CUDA(cudaEventCreate(&tl.compute_begin[s][r])); TOOL_CUDA(cudaEventCreate(&tl.compute_end[s][r]));
                TOOL_CUDA(cudaEventCreate(&tl.comm_begin[s][r])); TOOL_CUDA(cudaEventCreate(&tl.comm_end[s][r]));
            }
        TOOL_CUDA(cudaSetDevice(dev0));
        for (int rep = -2; rep < reps; ++rep) {
            TOOL_CUDA(cudaEventRecord(t0, stream));
            if (ring_forward(&a, &tl) != ATTN_OK) return EXIT_FAILED;
            TOOL_CUDA(cudaEventRecord(t1, stream));
            TOOL_CUDA(cudaEventSynchronize(t1));
            double slowest = 0;
            for (int r = 0; r < P; ++r)
                slowest = std::max(slowest, (double)elapsed(tl.compute_begin[0][r], tl.compute_end[P - 1][r]));
            if (rep >= 0) { whole.push_back(elapsed(t0, t1)); ring.push_back(slowest); }
        }
        FILE *f = steps_path ? fopen(steps_path, "a") : NULL;
        if (f) {  // the last repetition, step by step
            fprintf(f, "\n%s: B=%d H=%d N=%d d=%d%s, %d ranks, chunk %d rows, %s%s (ms)\n\n", label, B, H, N, d,
                    causal ? " causal" : "", P, c, used == ATTN_TRANSPORT_NCCL ? "NCCL" : "copies (--transport ce)",
                    delay_us ? ", fault mode" : "");
            fprintf(f, "| step | rank | wait for block | compute | transfer (next block) |\n|---|---|---|---|---|\n");
            for (int s = 0; s < P; ++s)
                for (int r = 0; r < P; ++r) {
                    const double wait = s ? elapsed(tl.compute_end[s - 1][r], tl.compute_begin[s][r]) : 0.0;
                    char comm[32] = "-";
                    if (s + 1 < P) snprintf(comm, sizeof comm, "%.3f", elapsed(tl.comm_begin[s][r], tl.comm_end[s][r]));
                    fprintf(f, "| %d | %d | %.3f | %.3f | %s |\n", s, r, wait,
                            elapsed(tl.compute_begin[s][r], tl.compute_end[s][r]), comm);
                }
            fclose(f);
        }
    }
    const double w = median(whole), rg = median(ring);
    printf("label,P,B,H,N,d,causal,dtype,whole_ms,ring_ms,ring_tflops,whole_tflops\n");
    printf("%s,%d,%d,%d,%d,%d,%d,%s,%.3f,%.3f,%.1f,%.1f\n", label, P, B, H, N, d, causal,
           dt == DTYPE_FP16 ? "fp16" : "bf16", w, rg, flops / (rg * 1e-3) / 1e12, flops / (w * 1e-3) / 1e12);
    return EXIT_PASS;
}

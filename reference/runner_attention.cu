/* runner_attention.cu: main() of every GPU lesson binary with a forward pass.
 * Grades the lesson's attention_forward against the float64 CPU reference on a
 * fixed case matrix (fresh seeded inputs, poisoned outputs, guarded inputs, a
 * determinism re-run, a causal future-key test), then times it.
 *
 * Lessons that declare LESSON_DECODE (lesson 12) also get decode shapes (attention.h):
 * N queries per sequence against N_kv keys, H_kv K/V heads shared by groups of H / H_kv query
 * heads, per-sequence KV lengths (seqlens_kv; key rows past a sequence's length hold NaN), and
 * causal queries aligned to the end of the cache. Their timing reports the bandwidth at which
 * K and V were read next to this GPU's device-to-device copy, measured in the same run. */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <algorithm>
#include <type_traits>
#include <string>
#include <vector>
#include "buffers.h"
#include "cuda_check.h"
#include "gpu_env.h"
extern "C" {
#include "cli.h"
#include "cpu_reference.h"
#include "diagnose.h"
#include "grade.h"
#include "rng.h"
}

struct Case {
    const char *name;
    int B, H, N, d, causal;
    float qscale; /* x30: logits around +-100, a softmax without max subtraction overflows */
    /* Decode shapes (LESSON_DECODE lessons); 0 in a case list means N_kv = N, H_kv = H. */
    int N_kv, H_kv;
    int ragged;   /* 1: per-sequence KV lengths drawn from the case seed (seqlens_kv) */
};
static Case normalized(Case c) {
    if (c.N_kv <= 0) c.N_kv = c.N;
    if (c.H_kv <= 0) c.H_kv = c.H;
    return c;
}
/* A shape only a decode lesson takes: N_kv != N, grouped heads, or ragged lengths. */
static bool is_decode(const Case &c) { return c.N_kv != c.N || c.H_kv != c.H || c.ragged; }
static bool decode_lesson() { return (LESSON.flags & LESSON_DECODE) != 0; }

struct Problem {
    Case c;
    dtype_t dt;
    size_t n;   /* B*H*N*d: Q and O */
    size_t nkv; /* B*H_kv*N_kv*d: K and V */
    bool host;  /* the host keeps the inputs (graded); false: filled on the device, timing only */
    std::vector<float> Q, K, V; /* the exact values stored on the device (NaN past a sequence's end) */
    std::vector<int> seqlens;   /* [B] keys of sequence b: N_kv, or drawn when ragged */
    guarded_buf in[3];          /* Q, K, V between NaN guards */
    guarded_buf O, L;           /* outputs between poison guards */
    guarded_buf lens;           /* seqlens on the device (ragged cases only) */
    guard_hits hitO, hitL;      /* what the last graded launch wrote outside O and L */
    cudaStream_t stream;
    attn_args args;
};
static const int N_BUFFERS = 5; /* guarded arrays per problem, for the memory count (+1 when ragged) */

static const char *g_prog = "lessonN"; /* for the rerun hints */

static int esize(dtype_t t) { return dtype_size(t); }

static void random_rows(std::vector<float> &X, const Case &c, int row0, float scale, dtype_t t, uint64_t seed) {
    random_slices(X, c.B * c.H, c.N, c.d, row0, scale, t, seed);
}

/* Rows [row0[b], row1[b]) of every K/V slice of sequence b ([B, H_kv, N_kv, d]), drawn as
 * random_slices draws them (slice s from the stream rng_mix(seed, s), from row0 on): for an
 * ordinary shape with one row0 for all it gives exactly random_slices' values. */
static void random_kv_rows(std::vector<float> &X, const Case &c, const std::vector<int> &row0,
                           const std::vector<int> &row1, dtype_t t, uint64_t seed) {
    const int S = c.B * c.H_kv;
#pragma omp parallel for schedule(static)
    for (int sl = 0; sl < S; ++sl) {
        const int b = sl / c.H_kv;
        rng_t r;
        rng_seed(&r, rng_mix(seed, (uint64_t)sl));
        for (size_t i = (size_t)row0[b] * c.d; i < (size_t)row1[b] * c.d; ++i)
            X[(size_t)sl * c.N_kv * c.d + i] = round_value((float)rng_normal(&r), t);
    }
}

static void upload(Problem &p, int which) {
    const std::vector<float> &X = which == 0 ? p.Q : which == 1 ? p.K : p.V;
    std::vector<char> buf(X.size() * esize(p.dt));
    encode_values(X.data(), buf.data(), X.size(), p.dt);
    guarded_upload(&p.in[which], buf.data());
}

static void out_of_memory_exit(const Case &c, dtype_t dt, const char *what, size_t bytes) {
    fprintf(stderr, "out of memory: B=%d H=%d N=%d d=%d %s: %s needs %.1f MiB; use a smaller "
            "--batch/--heads/--seq%s\n", c.B, c.H, c.N, c.d, dtype_name(dt), what, bytes / 1048576.0,
            decode_lesson() ? "/--kv-seq" : "");
    exit(EXIT_OOM);
}

/* The keys query row i of sequence b sees (attention.h): all seqlens[b], or with causal the
 * prefix j <= seqlens[b] - N + i (aligned to the end; N + i for an ordinary shape's i + 1). */
static int visible_keys(const Problem &p, int b, int i) {
    const int len = p.seqlens[b];
    return p.c.causal ? len - p.c.N + i + 1 : len;
}

/* Timing inputs filled on the device: a splitmix hash of (seed, index) made uniform with
 * variance 1 (times qscale), rounded to T. The host never holds them, so a 32 GiB KV cache
 * needs no 64 GiB of host floats. */
__device__ __forceinline__ float hash_unit(uint64_t seed, size_t i) {
    uint64_t z = seed + 0x9e3779b97f4a7c15ull * (i + 1);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return ((float)(z >> 40) * (1.0f / 16777216.0f) * 2.0f - 1.0f) * 1.7320508f;
}
template <typename T>
__global__ void fill_random(T *x, size_t n, uint64_t seed, float scale) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const float v = hash_unit(seed, i) * scale;
        if constexpr (sizeof(T) == 4) x[i] = v;
        else if constexpr (std::is_same<T, __half>::value) x[i] = __float2half_rn(v);
        else x[i] = __float2bfloat16_rn(v);
    }
}
static void device_fill(void *x, size_t n, dtype_t t, uint64_t seed, float scale, cudaStream_t s) {
    const unsigned blocks = (unsigned)std::min<size_t>((n + 255) / 256, 8192);
    if (t == DTYPE_FP32) fill_random<float><<<blocks, 256, 0, s>>>((float *)x, n, seed, scale);
    else if (t == DTYPE_FP16) fill_random<__half><<<blocks, 256, 0, s>>>((__half *)x, n, seed, scale);
    else fill_random<__nv_bfloat16><<<blocks, 256, 0, s>>>((__nv_bfloat16 *)x, n, seed, scale);
    CUDA_CHECK(cudaGetLastError());
}

/* host: draw the inputs on the host and keep them for grading; else (timing a decode lesson)
 * fill them on the device. */
static void problem_init(Problem &p, const Case &c0, dtype_t dt, uint64_t seed, float scale_override,
                         bool host = true) {
    const Case c = normalized(c0);
    p.c = c;
    p.dt = dt;
    p.host = host;
    p.n = (size_t)c.B * c.H * c.N * c.d;
    p.nkv = (size_t)c.B * c.H_kv * c.N_kv * c.d;
    /* A shape beyond the GPU's memory gets a clear message before anything is allocated
     * (the fp32 host copies below would otherwise fail first, with an uncaught bad_alloc). */
    size_t need = (2 * p.n + 2 * p.nkv) * esize(dt) + sizeof(float) * (size_t)c.B * c.H * c.N +
                  N_BUFFERS * 2 * GUARD_BYTES + (c.ragged ? 2 * GUARD_BYTES + 4 * (size_t)c.B : 0);
    size_t free_b = 0, total_b = 0;
    CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
    if (need > free_b) {
        if (is_decode(c))
            fprintf(stderr, "out of memory: B=%d H=%d N=%d d=%d N_kv=%d H_kv=%d %s needs %.2f GiB of device memory "
                    "for Q, K, V, O and L; the GPU has %.2f GiB free. Use a smaller --batch/--kv-heads/--kv-seq.\n",
                    c.B, c.H, c.N, c.d, c.N_kv, c.H_kv, dtype_name(dt), need / 1073741824.0, free_b / 1073741824.0);
        else
            fprintf(stderr, "out of memory: B=%d H=%d N=%d d=%d %s needs %.2f GiB of device memory for Q, K, V, O "
                    "and L; the GPU has %.2f GiB free. Use a smaller --batch/--heads/--seq.\n",
                    c.B, c.H, c.N, c.d, dtype_name(dt), need / 1073741824.0, free_b / 1073741824.0);
        exit(EXIT_OOM);
    }
    /* the host keeps Q, K, V in fp32, an upload buffer and two copies of O */
    size_t host_need = host ? (p.n + 2 * p.nkv) * sizeof(float) + (std::max(p.n, p.nkv) + 2 * p.n) * esize(dt)
                            : 2 * p.n * esize(dt);
    size_t host_total = (size_t)sysconf(_SC_PHYS_PAGES) * (size_t)sysconf(_SC_PAGESIZE);
    if (host_need > host_total) {
        fprintf(stderr, "out of memory: B=%d H=%d N=%d d=%d %s needs %.2f GiB of host memory to grade; this "
                "machine has %.2f GiB. Use a smaller --batch/--heads/--seq%s.\n", c.B, c.H, c.N, c.d,
                dtype_name(dt), host_need / 1073741824.0, host_total / 1073741824.0,
                decode_lesson() ? "/--kv-seq" : "");
        exit(EXIT_OOM);
    }
    /* Sequence lengths: with ragged, drawn in [lo, N_kv] (lo = N with causal: every query sees
     * a key), the first sequence the longest and the last the shortest when there are two. */
    p.seqlens.assign(c.B, c.N_kv);
    if (c.ragged) {
        rng_t r;
        rng_seed(&r, rng_mix(seed, 9));
        const int lo = c.causal ? c.N : 1;
        for (int b = 0; b < c.B; ++b) p.seqlens[b] = lo + (int)(rng_next(&r) % (uint64_t)(c.N_kv - lo + 1));
        if (c.B >= 2) { p.seqlens[0] = c.N_kv; p.seqlens[c.B - 1] = lo; }
    }
    for (int k = 0; k < 3; ++k) {
        const size_t n = k ? p.nkv : p.n;
        if (guarded_alloc(&p.in[k], n, esize(dt), nan_of(esize(dt))) != cudaSuccess)
            out_of_memory_exit(c, dt, k ? "each of K, V" : "Q", n * esize(dt));
    }
    if (host) {
        p.Q.assign(p.n, 0.f); p.K.assign(p.nkv, 0.f); p.V.assign(p.nkv, 0.f);
        random_rows(p.Q, c, 0, c.qscale, dt, rng_mix(seed, 1));
        random_slices(p.K, c.B * c.H_kv, c.N_kv, c.d, 0, 1.f, dt, rng_mix(seed, 2));
        random_slices(p.V, c.B * c.H_kv, c.N_kv, c.d, 0, 1.f, dt, rng_mix(seed, 3));
        /* key rows past a sequence's end hold NaN: a kernel that reads them fails */
        for (int b = 0; b < c.B; ++b)
            for (int h = 0; h < c.H_kv; ++h)
                for (size_t e = (size_t)p.seqlens[b] * c.d; e < (size_t)c.N_kv * c.d; ++e) {
                    const size_t at = ((size_t)b * c.H_kv + h) * c.N_kv * c.d + e;
                    p.K[at] = p.V[at] = NAN;
                }
        for (int k = 0; k < 3; ++k) upload(p, k);
    } else {
        device_fill(p.in[0].data, p.n, dt, rng_mix(seed, 1), c.qscale, 0);
        device_fill(p.in[1].data, p.nkv, dt, rng_mix(seed, 2), 1.f, 0);
        device_fill(p.in[2].data, p.nkv, dt, rng_mix(seed, 3), 1.f, 0);
        for (int b = 0; b < c.B; ++b)
            for (int h = 0; h < c.H_kv && p.seqlens[b] < c.N_kv; ++h)
                for (int k = 1; k < 3; ++k)
                    fill_pattern((char *)p.in[k].data + (((size_t)b * c.H_kv + h) * c.N_kv + p.seqlens[b]) * c.d * esize(dt),
                                 (size_t)(c.N_kv - p.seqlens[b]) * c.d, esize(dt), nan_of(esize(dt)), 0);
        CUDA_CHECK(cudaDeviceSynchronize());
    }
    const size_t rows = (size_t)c.B * c.H * c.N;
    if (guarded_alloc(&p.O, p.n, esize(dt), poison_of(esize(dt))) != cudaSuccess)
        out_of_memory_exit(c, dt, "O", p.n * esize(dt));
    if (guarded_alloc(&p.L, rows, 4, POISON32) != cudaSuccess) out_of_memory_exit(c, dt, "L", rows * 4);
    p.lens.raw = NULL;
    p.lens.data = NULL;
    if (c.ragged) {
        if (guarded_alloc(&p.lens, c.B, 4, POISON32) != cudaSuccess) out_of_memory_exit(c, dt, "seqlens_kv", 4 * c.B);
        guarded_upload(&p.lens, p.seqlens.data());
    }
    p.hitO = p.hitL = guard_hits{0, 0, -1, -1, -1, -1};
    CUDA_CHECK(cudaStreamCreate(&p.stream));
    attn_args a;
    a.B = c.B; a.H = c.H; a.N = c.N; a.d = c.d; a.causal = c.causal;
    a.scale = scale_override > 0 ? scale_override : 1.0f / sqrtf((float)c.d);
    a.dtype = dt;
    a.Q = p.in[0].data; a.K = p.in[1].data; a.V = p.in[2].data;
    a.O = p.O.data; a.L = (float *)p.L.data; a.stream = p.stream;
    a.N_kv = c.N_kv; a.H_kv = c.H_kv; a.seqlens_kv = c.ragged ? (const int *)p.lens.data : NULL;
    p.args = a;
}

static void problem_free(Problem &p) {
    for (int k = 0; k < 3; ++k) guarded_free(&p.in[k]);
    guarded_free(&p.O);
    guarded_free(&p.L);
    guarded_free(&p.lens);
    CUDA_CHECK(cudaStreamDestroy(p.stream));
}

static int launch(void *arg) { return attention_forward(&((Problem *)arg)->args); }

static void report_rc(int rc) {
    if (rc == ATTN_NOT_IMPLEMENTED) return;
    if (rc == ATTN_OUT_OF_MEMORY) {
        fprintf(stderr, "out of memory (the method's message is above)\n");
        exit(EXIT_OOM);
    }
    if (rc != ATTN_OK) {
        fprintf(stderr, "attention_forward returned %d (%s)\n", rc,
                rc == ATTN_UNSUPPORTED ? "unsupported shape or dtype" : "unknown code");
        exit(EXIT_FAILED);
    }
}

/* Poison O and L (and re-arm their guards), launch, wait, copy O and L back, and record
 * in p.hitO / p.hitL what the launch wrote outside them. Returns the entry point's code. */
static int run_once(Problem &p, double timeout_s, std::vector<char> &O, std::vector<float> &L) {
    size_t rows = (size_t)p.c.B * p.c.H * p.c.N;
    fill_pattern(p.O.data, p.n, esize(p.dt), poison_of(esize(p.dt)), p.stream);
    fill_pattern(p.L.data, rows, 4, POISON32, p.stream);
    guarded_rearm(&p.O, p.stream);
    guarded_rearm(&p.L, p.stream);
    int rc = attention_forward(&p.args);
    if (rc != ATTN_OK) return rc;
    CUDA_CHECK(cudaGetLastError());
    wait_stream(p.stream, timeout_s, "the lesson's kernel");
    O.resize(p.n * esize(p.dt));
    L.resize(rows);
    CUDA_CHECK(cudaMemcpy(O.data(), p.O.data, O.size(), cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(L.data(), p.L.data, sizeof(float) * rows, cudaMemcpyDeviceToHost));
    p.hitO = guarded_check(&p.O);
    p.hitL = guarded_check(&p.L);
    return ATTN_OK;
}

/* "wrote outside O: ..." for the guards of O and L that the last launch wrote; "" if none. */
static std::string outside_writes(const Problem &p) {
    std::string s;
    char buf[768];
    const guard_hits *h[2] = {&p.hitO, &p.hitL};
    const char *name[2] = {"O", "L"};
    for (int k = 0; k < 2; ++k) {
        describe_outside(buf, sizeof buf, name[k], h[k]->before, h[k]->after, h[k]->after_first, h[k]->after_last,
                         h[k]->before_nearest, h[k]->before_farthest, p.c.B, p.c.H, p.c.N, k ? 1 : p.c.d);
        if (*buf) s += std::string(s.empty() ? "" : "\n      ") + buf;
    }
    return s;
}

/* Which (bh, row) pairs get the float64 reference: all of them when cheap,
 * else every slice's first and last row plus random ones, within a budget of
 * about 3e8 multiply-adds so a case grades in about a second (a row costs N_kv d). */
static std::vector<std::pair<int, int>> pick_rows(const Case &c, rng_t *r) {
    long BH = (long)c.B * c.H, total = BH * c.N;
    long budget = std::max(64L, (long)(3e8 / ((double)c.N_kv * c.d)));
    std::vector<std::pair<int, int>> rows;
    if (total <= budget) {
        for (int bh = 0; bh < BH; ++bh)
            for (int i = 0; i < c.N; ++i) rows.push_back({bh, i});
        return rows;
    }
    std::vector<char> taken(total, 0);
    auto take = [&](int bh, int i) { if (!taken[(long)bh * c.N + i]) { taken[(long)bh * c.N + i] = 1; rows.push_back({bh, i}); } };
    if (2 * BH <= budget / 2)
        for (int bh = 0; bh < BH; ++bh) { take(bh, 0); take(bh, c.N - 1); }
    while ((long)rows.size() < budget) take((int)(rng_next(r) % BH), (int)(rng_next(r) % c.N));
    std::sort(rows.begin(), rows.end());
    return rows;
}

struct Verdict { bool pass; std::string why; };

/* Where query row i of (b, h) = bh finds its inputs: its q, and the K/V slice of its group,
 * (b, h / (H / H_kv)) of [B, H_kv, N_kv, d]. */
static const float *q_row(const Problem &p, int bh, int i) { return &p.Q[((size_t)bh * p.c.N + i) * p.c.d]; }
static size_t kv_slice(const Problem &p, int bh) {
    const int b = bh / p.c.H, h = bh % p.c.H;
    return ((size_t)b * p.c.H_kv + h / (p.c.H / p.c.H_kv)) * p.c.N_kv * p.c.d;
}
static double row_max(const Problem &p, int bh, int i) {
    return attention_prefix_max_f64(q_row(p, bh, i), &p.K[kv_slice(p, bh)], visible_keys(p, bh / p.c.H, i), p.c.d,
                                    p.args.scale);
}

/* The rows (indices into `rows`) where O (which_O) or L has a bad element. */
static std::vector<size_t> failing_rows(const Problem &p, const std::vector<std::pair<int, int>> &rows,
                                        const std::vector<double> &refO, const std::vector<double> &refL,
                                        const std::vector<char> &O, const std::vector<float> &L, tolerance tO,
                                        tolerance tL, bool which_O) {
    const size_t d = p.c.d, sl = (size_t)p.c.N * d;
    std::vector<size_t> bad;
    for (size_t k = 0; k < rows.size(); ++k) {
        const int bh = rows[k].first, i = rows[k].second;
        int po, fail = 0;
        if (which_O) {
            for (size_t col = 0; col < d && !fail; ++col)
                fail = grade_element(refO[k * d + col], decode_value(O.data(), bh * sl + i * d + col, p.dt, &po),
                                     0, tO) != ELEM_OK;
        } else {
            fail = grade_element(refL[k], decode_value(L.data(), (size_t)bh * p.c.N + i, DTYPE_FP32, &po), 0,
                                 tL) != ELEM_OK;
        }
        if (fail) bad.push_back(k);
    }
    return bad;
}

/* The diagnosis when O passes and L fails (which_O false), or the reverse (diagnose.h). */
static std::string one_wrong(const Problem &p, const std::vector<std::pair<int, int>> &rows,
                             const std::vector<double> &refO, const std::vector<double> &refL,
                             const std::vector<char> &O, const std::vector<float> &L, tolerance tO, tolerance tL,
                             bool which_O) {
    const Case &c = p.c;
    const size_t d = c.d, sl = (size_t)c.N * d;
    std::vector<size_t> bad = failing_rows(p, rows, refO, refL, O, L, tO, tL, which_O);
    if (bad.empty()) return "";
    std::vector<double> m(bad.size());
#pragma omp parallel for schedule(dynamic, 8)
    for (long k = 0; k < (long)bad.size(); ++k) {
        const int bh = rows[bad[k]].first, i = rows[bad[k]].second;
        m[k] = row_max(p, bh, i);
    }
    char buf[1024];
    if (!which_O) {
        std::vector<l_row> lr;
        for (size_t k = 0; k < bad.size(); ++k) {
            const int bh = rows[bad[k]].first, i = rows[bad[k]].second;
            lr.push_back({refL[bad[k]], (double)L[(size_t)bh * c.N + i], m[k], (double)p.args.scale});
        }
        diagnose_L(lr.data(), (int)lr.size(), buf, sizeof buf);
    } else {
        std::vector<double> got(bad.size() * d);
        std::vector<o_row> orow;
        for (size_t k = 0; k < bad.size(); ++k) {
            const int bh = rows[bad[k]].first, i = rows[bad[k]].second;
            int po;
            for (size_t col = 0; col < d; ++col)
                got[k * d + col] = decode_value(O.data(), bh * sl + i * d + col, p.dt, &po);
            orow.push_back({&refO[bad[k] * d], &got[k * d], c.d, exp(refL[bad[k]] - m[k])});
        }
        diagnose_O(orow.data(), (int)orow.size(), buf, sizeof buf);
    }
    return buf;
}

static Verdict grade(Problem &p, const std::vector<char> &O, const std::vector<float> &L, uint64_t seed) {
    const Case &c = p.c;
    rng_t r;
    rng_seed(&r, seed ^ 0x5eed);
    std::vector<std::pair<int, int>> rows = pick_rows(c, &r);
    size_t R = rows.size(), d = c.d, sl = (size_t)c.N * d;
    std::vector<double> refO(R * d), refL(R), baseO(R * d), baseL(R);
    bool lowp = p.dt != DTYPE_FP32;
#pragma omp parallel for schedule(dynamic, 8)
    for (long k = 0; k < (long)R; ++k) {
        int bh = rows[k].first, i = rows[k].second;
        const size_t kv = kv_slice(p, bh);
        const int nk = visible_keys(p, bh / c.H, i);
        attention_prefix_f64(q_row(p, bh, i), &p.K[kv], &p.V[kv], nk, c.d, p.args.scale, &refO[k * d], &refL[k]);
        attention_prefix_lowp(q_row(p, bh, i), &p.K[kv], &p.V[kv], nk, c.d, p.args.scale, p.dt, &baseO[k * d],
                              &baseL[k]);
    }
    /* The error a plain same-precision attention makes on these very inputs:
     * with x30 logits even fp32 loses ~1e-4 relative (S is ill-conditioned),
     * so fixed tolerances would either fail correct kernels or pass wrong ones. */
    double eO = 0, eL = 0;
    for (size_t k = 0; k < R * d; ++k) eO = std::max(eO, fabs(baseO[k] - refO[k]));
    for (size_t k = 0; k < R; ++k) eL = std::max(eL, fabs(baseL[k] - refL[k]));
    /* fp32: within 1e-5 + 1e-4*|ref|, widened to 3x the plain fp32 reference's max error */
    tolerance tO = {1e-5 + 3 * eO, 1e-4}, tL = {1e-4 + 3 * eL, 1e-5};
    char tol_desc[160];
    snprintf(tol_desc, sizeof tol_desc, "|err| <= 1e-5 + 3 x %.2g (plain fp32 reference's max error) + 1e-4*|ref|", eO);
    if (lowp) { /* FlashAttention's test rule: at most 2x the error of a same-precision reference */
        double atol = p.dt == DTYPE_FP16 ? 1e-4 : 8e-4;
        tO = {2 * eO + atol, 0};
        tL = {2 * eL + 1e-4, 1e-5};
        snprintf(tol_desc, sizeof tol_desc, "|err| <= 2 x %.2g (%s reference's max error) + %.0e",
                 eO, dtype_name(p.dt), atol);
    }
    int BH = c.B * c.H;
    grader *gO = grader_new(BH, c.H, c.N, c.d), *gL = grader_new(BH, c.H, c.N, 1);
    for (size_t k = 0; k < R; ++k) {
        int bh = rows[k].first, i = rows[k].second, poisoned;
        for (int col = 0; col < c.d; ++col) {
            double got = decode_value(O.data(), (size_t)bh * sl + (size_t)i * d + col, p.dt, &poisoned);
            grader_check(gO, bh, i, col, refO[k * d + col], got, poisoned, tO);
        }
        double gotL = decode_value(L.data(), (size_t)bh * c.N + i, DTYPE_FP32, &poisoned);
        grader_check(gL, bh, i, 0, refL[k], gotL, poisoned, tL);
    }
    /* every element, checked row or not, must have been written */
    std::vector<char> checked_row((size_t)BH * c.N, 0);
    for (auto &rw : rows) checked_row[(size_t)rw.first * c.N + rw.second] = 1;
    for (int bh = 0; bh < BH; ++bh)
        for (int i = 0; i < c.N; ++i) {
            if (checked_row[(size_t)bh * c.N + i]) continue;
            int poisoned;
            for (int col = 0; col < c.d; ++col) {
                decode_value(O.data(), (size_t)bh * sl + (size_t)i * d + col, p.dt, &poisoned);
                if (poisoned) grader_check(gO, bh, i, col, 0.0, NAN, 1, tO);
            }
            decode_value(L.data(), (size_t)bh * c.N + i, DTYPE_FP32, &poisoned);
            if (poisoned) grader_check(gL, bh, i, 0, 0.0, NAN, 1, tL);
        }
    grade_report rO, rL;
    grader_finish(gO, &rO);
    grader_finish(gL, &rL);
    /* One of O and L right and the other wrong (and no poison, no NaN): the right one pins
     * down half the kernel, and how the wrong one is off names the bug (diagnose.h). The
     * "every row is wrong: check m, l, ..." clause would point the wrong way then. */
    std::string onlyO, onlyL;
    const std::string outside = outside_writes(p); /* if any, the bad rows are its echo: say that alone */
    if (!outside.empty()) {
    } else if (rO.bad == 0 && rL.bad > 0 && rL.unwritten == 0 && rL.nonfinite == 0) {
        onlyL = one_wrong(p, rows, refO, refL, O, L, tO, tL, false);
        grader_finish_ex(gL, &rL, "");
    } else if (rL.bad == 0 && rO.bad > 0 && rO.unwritten == 0 && rO.nonfinite == 0) {
        onlyO = one_wrong(p, rows, refO, refL, O, L, tO, tL, true);
        grader_finish_ex(gO, &rO, "");
    }
    grader_free(gO);
    grader_free(gL);
    Verdict v = {rO.bad == 0 && rL.bad == 0 && outside.empty(), ""};
    if (v.pass) {
        char buf[256];
        snprintf(buf, sizeof buf, "max err O %.2g, L %.2g (%s)", rO.max_abs, rL.max_abs, tol_desc);
        v.why = buf;
        return v;
    }
    char buf[2400];
    if (!outside.empty()) v.why += "diagnosis: " + outside + "\n      ";
    if (rO.bad) {
        snprintf(buf, sizeof buf, "O: %ld of %ld checked elements bad (%.2f%%), max abs err %.3g, max rel err %.3g; %s\n      diagnosis: %s%s%s\n      ",
                 rO.bad, rO.checked, 100.0 * rO.bad / rO.checked, rO.max_abs, rO.max_rel, tol_desc, onlyO.c_str(),
                 onlyO.empty() || !rO.summary[0] ? "" : "; ", rO.summary);
        v.why += buf;
    } else if (!onlyL.empty()) {
        v.why += "O: passes\n      ";
    }
    if (rL.bad) {
        snprintf(buf, sizeof buf, "L (logsumexp): %ld of %ld bad, max abs err %.3g\n      diagnosis: %s%s%s\n      ",
                 rL.bad, rL.checked, rL.max_abs, onlyL.c_str(), onlyL.empty() || !rL.summary[0] ? "" : "; ",
                 rL.summary);
        v.why += buf;
    } else if (!onlyO.empty()) {
        v.why += "L (logsumexp): passes\n      ";
    }
    while (!v.why.empty() && v.why.back() == ' ') v.why.pop_back();
    printf("    FAIL  %-6s %s%s\n      %s", c.name, dtype_name(p.dt), c.causal ? " causal" : "", v.why.c_str());
    grade_print_first(&rO, c.H, "O");
    grade_print_first(&rL, c.H, "L");
    v.why = "";
    return v;
}

/* Counts elements whose bits differ between two runs on the same input. */
static long bit_diffs(const std::vector<char> &a, const std::vector<char> &b, int es, size_t from, size_t to) {
    long n = 0;
    for (size_t i = from; i < to; ++i) n += memcmp(&a[i * es], &b[i * es], es) != 0;
    return n;
}

/* "B=2 H=8 N=1 d=128 N_kv=1000 H_kv=2 ragged" (the decode part only for a decode shape). */
static std::string shape_text(const Case &c) {
    char buf[160];
    snprintf(buf, sizeof buf, "B=%d H=%d N=%d d=%d", c.B, c.H, c.N, c.d);
    std::string s = buf;
    if (is_decode(c)) {
        snprintf(buf, sizeof buf, " N_kv=%d H_kv=%d%s", c.N_kv, c.H_kv, c.ragged ? " ragged" : "");
        s += buf;
    }
    return s;
}

/* Grades one case: the output, a bitwise re-run, and for causal cases whether
 * changing K and V at positions >= p changes any row < p. */
static int grade_case(const Case &c0, dtype_t dt, uint64_t seed, const options &o, float scale_override) {
    const Case c = normalized(c0);
    Problem p;
    problem_init(p, c, dt, seed, scale_override);
    std::vector<char> O1, O2;
    std::vector<float> L1, L2;
    int rc = run_once(p, o.timeout_s, O1, L1);
    if (rc != ATTN_OK) { problem_free(p); report_rc(rc); return rc; }
    Verdict v = grade(p, O1, L1, seed);
    bool ok = v.pass;
    /* determinism */
    run_once(p, o.timeout_s, O2, L2);
    std::vector<char> L1b((char *)L1.data(), (char *)(L1.data() + L1.size())),
        L2b((char *)L2.data(), (char *)(L2.data() + L2.size()));
    long nd = bit_diffs(O1, O2, esize(dt), 0, p.n) + bit_diffs(L1b, L2b, 4, 0, L1.size());
    if (nd) {
        const bool outside = p.hitO.before + p.hitO.after + p.hitL.before + p.hitL.after > 0;
        printf("    FAIL  %-6s %s%s: race suspected: two launches on the same input differ in %ld elements "
               "(%s)\n", c.name, dtype_name(dt), c.causal ? " causal" : "", nd,
               outside ? "blocks that write outside their rows (above) race with the blocks that own those rows"
                       : "a missing __syncthreads()? `make sanitize-lessonN` runs racecheck");
        ok = false;
    }
    /* causal: the future must not leak. Three split points q among the N query rows, largest
     * first (each one re-draws K and V from its point on, so the rows before it still see the
     * keys of the first run): the last row, the middle, and row 1 (row 0 may see its first key
     * only, which catches a diagonal tile left unmasked wherever the tiles start). Query i of
     * sequence b sees keys j <= len_b - N + i (len_b = N for an ordinary shape: j <= i), so the
     * keys from len_b - N + q on are re-drawn and rows < q must not change. */
    if (c.causal && c.N >= 2) {
        const int splits[3] = {c.N - 1, c.N / 2 + 1 < c.N ? c.N / 2 + 1 : c.N - 1, 1};
        bool leaked = false;
        for (int k = 0; k < 3 && !leaked; ++k) {
            const int pos = splits[k];
            if (k > 0 && pos >= splits[k - 1]) continue;
            if (!is_decode(c)) {
                random_rows(p.K, c, pos, 1.f, dt, rng_mix(seed, 4 + 2 * k));
                random_rows(p.V, c, pos, 1.f, dt, rng_mix(seed, 5 + 2 * k));
            } else {
                std::vector<int> from(c.B), to(p.seqlens);
                for (int b = 0; b < c.B; ++b) from[b] = p.seqlens[b] - c.N + pos;
                random_kv_rows(p.K, c, from, to, dt, rng_mix(seed, 4 + 2 * k));
                random_kv_rows(p.V, c, from, to, dt, rng_mix(seed, 5 + 2 * k));
            }
            upload(p, 1);
            upload(p, 2);
            run_once(p, o.timeout_s, O2, L2);
            long leaks = 0;
            for (int bh = 0; bh < c.B * c.H; ++bh) {
                size_t base = (size_t)bh * c.N;
                leaks += bit_diffs(O1, O2, esize(dt), base * c.d, (base + pos) * c.d);
                for (int i = 0; i < pos; ++i) leaks += memcmp(&L1[base + i], &L2[base + i], 4) != 0;
            }
            if (leaks && !is_decode(c)) {
                printf("    FAIL  %-6s %s causal: future keys influence the output: changing K and V at "
                       "positions >= %d changed %ld elements of rows < %d\n", c.name, dtype_name(dt), pos, leaks, pos);
            } else if (leaks) {
                printf("    FAIL  %-6s %s causal: future keys influence the output: changing the last %d keys of "
                       "each sequence changed %ld elements of query rows < %d (query i sees keys j <= "
                       "seqlens_kv[b] - N + i)\n", c.name, dtype_name(dt), c.N - pos, leaks, pos);
            }
            if (leaks) {
                ok = false;
                leaked = true;
            }
        }
    }
    if (ok)
        printf("    pass  %-6s %s  %s%s%s  %s\n", c.name, dtype_name(dt), shape_text(c).c_str(),
               c.causal ? " causal" : "", c.qscale != 1.f ? " x30 logits" : "", v.why.c_str());
    else if (!is_decode(c))
        printf("          rerun: ./%s -b %d -H %d -n %d -d %d --dtype %s%s --seed %llu --check-only\n",
               g_prog, c.B, c.H, c.N, c.d, dtype_name(dt), c.causal ? " --causal" : "",
               (unsigned long long)o.seed);
    else
        printf("          rerun: ./%s -b %d -H %d -n %d -d %d --kv-seq %d --kv-heads %d%s --dtype %s%s --seed %llu "
               "--check-only\n", g_prog, c.B, c.H, c.N, c.d, c.N_kv, c.H_kv, c.ragged ? " --ragged" : "",
               dtype_name(dt), c.causal ? " --causal" : "", (unsigned long long)o.seed);
    fflush(stdout);
    problem_free(p);
    return ok ? ATTN_OK : -1;
}

static bool supports_d(int d) {
    for (int k = 0; k < 8 && LESSON.head_dims[k]; ++k)
        if (LESSON.head_dims[k] == d) return true;
    return false;
}

static std::string head_dims_list() {
    std::string s;
    for (int k = 0; k < 8 && LESSON.head_dims[k]; ++k) s += (k ? ", " : "") + std::to_string(LESSON.head_dims[k]);
    return s;
}

static std::string dtypes_list() {
    std::string s;
    for (int t = 0; t < DTYPE_COUNT; ++t)
        if (LESSON.dtypes & DTYPE_BIT(t)) s += std::string(s.empty() ? "" : ", ") + dtype_name(t);
    return s;
}

/* What the failing cases have in common, when that points at a cause: only the causal
 * ones, or only those whose N is not a multiple of 16 (a ragged last tile); for a decode
 * lesson also only the grouped-query ones, only the ragged-length ones, only the decode
 * shapes. */
struct Outcome {
    int N, causal, pass;
    int gqa, ragged, decode; /* H_kv < H; per-sequence lengths; N_kv != N or either of those */
    int keys_aligned;        /* every sequence's KV length is a multiple of 16 */
    int N_kv;
};
static Outcome outcome_of(const Case &c0, bool pass) {
    const Case c = normalized(c0);
    return {c.N, c.causal, pass, c.H_kv < c.H, c.ragged, is_decode(c), !c.ragged && c.N_kv % 16 == 0, c.N_kv};
}
/* Does every failing case have the property, and some case without it pass? */
template <typename F>
static bool only_with(const std::vector<Outcome> &v, F has) {
    int fail_without = 0, pass_without = 0;
    for (const Outcome &o : v)
        if (!has(o)) { fail_without += !o.pass; pass_without += o.pass; }
    return fail_without == 0 && pass_without > 0;
}
/* The shortest KV length of a failing case, when every case shorter than it passes, at least
 * two of them, and it is longer than any K/V tile (256 keys); else 0. */
static int long_only(const std::vector<Outcome> &v) {
    int x = 1 << 30, below = 0;
    for (const Outcome &o : v)
        if (!o.pass && o.N_kv < x) x = o.N_kv;
    if (x == 1 << 30 || x <= 256) return 0;
    for (const Outcome &o : v)
        if (o.N_kv < x) below += o.pass;
    return below >= 2 ? x : 0;
}
static void print_pattern(const std::vector<Outcome> &v) {
    int fail = 0, fail_nc = 0, pass_nc = 0, fail_aligned = 0, pass_aligned = 0;
    for (const Outcome &o : v) {
        fail += !o.pass;
        if (!o.causal) { fail_nc += !o.pass; pass_nc += o.pass; }
        if (o.N % 16 == 0) { fail_aligned += !o.pass; pass_aligned += o.pass; }
    }
    if (fail == 0) return;
    if (decode_lesson()) {
        if (only_with(v, [](const Outcome &o) { return o.gqa != 0; }))
            printf("diagnosis: only the grouped-query cases (H_kv < H) fail, every H_kv = H case passes: query head h "
                   "must read K/V head h / (H / H_kv): the G = H / H_kv query heads of a group are neighbours "
                   "(h = h_kv G .. h_kv G + G - 1), and K, V are [B, H_kv, N_kv, d] (batch stride H_kv N_kv d)\n");
        else if (only_with(v, [](const Outcome &o) { return o.ragged != 0; }))
            printf("diagnosis: only the cases with per-sequence KV lengths (seqlens_kv, ragged) fail: sequence b has "
                   "seqlens_kv[b] keys (key rows past it hold NaN: never read them, not even to mask them), the "
                   "split bounds and the combine count follow that length, and causal query i sees keys "
                   "j <= seqlens_kv[b] - N + i\n");
        else if (fail_nc == 0 && pass_nc > 0)
            printf("diagnosis: only the causal cases fail, every non-causal one passes: check the causal mask, "
                   "aligned to the end of the cache: key j is visible to query i iff j <= N_kv - N + i "
                   "(seqlens_kv[b] in place of N_kv when given), which is j <= i when N_kv = N\n");
        else if (long_only(v))
            printf("diagnosis: only the cases with at least %d keys fail, every shorter one passes: what only long "
                   "sequences exercise is the split of the keys: check the split bounds (every key in exactly one "
                   "split), each split's partial O and logsumexp L_s, and their merge (L = log sum_s exp(L_s), "
                   "O = sum_s exp(L_s - L) O_s)\n", long_only(v));
        else if (only_with(v, [](const Outcome &o) { return o.decode != 0; }))
            printf("diagnosis: only the decode shapes fail (N != N_kv, H_kv < H or ragged), the ordinary ones "
                   "(N = N_kv, H_kv = H) pass: K and V are [B, H_kv, N_kv, d], Q and O [B, H, N, d]; check every "
                   "place that uses N for the keys or H for the K/V heads\n");
        else if (only_with(v, [](const Outcome &o) { return !o.keys_aligned; }) && fail > 1)
            printf("diagnosis: only the cases whose KV length is not a multiple of 16 fail: check the last, partial "
                   "K/V tile of a sequence and of each split: keys past the end need a score of -inf and must not "
                   "be read\n");
        return;
    }
    if (fail_nc == 0 && pass_nc > 0)
        printf("diagnosis: only the causal cases fail, every non-causal one passes: check the causal mask "
               "(key j is visible to query i iff j <= i, the diagonal included), which K/V tiles are skipped "
               "above the diagonal, and which tiles get the element-wise mask\n");
    else if (fail_aligned == 0 && pass_aligned > 0 && fail > 1)
        printf("diagnosis: only the cases whose N is not a multiple of 16 fail (those whose N is pass): check "
               "the last, partial tiles: keys >= N need a score of -inf, rows >= N must not be read or written\n");
}

/* The fixed case matrix: tiny, N = 1, N not a multiple of any tile, several
 * B*H, both ends of the supported head dims, x30 logits, the bench shape;
 * causal versions where the lesson supports it. */
static std::vector<Case> case_matrix() {
    int d0 = LESSON.head_dims[0], d1 = d0;
    for (int k = 0; k < 8 && LESSON.head_dims[k]; ++k) d1 = LESSON.head_dims[k];
    int db = supports_d(BENCH_D) ? BENCH_D : d0;
    std::vector<Case> m = {
        {"tiny", 1, 1, 4, d0, 0, 1.f},      {"N=1", 1, 2, 1, d0, 0, 1.f},
        {"N=77", 2, 3, 77, d0, 0, 1.f},     {"B*H", 3, 5, 200, d1, 0, 1.f},
        {"N=1000", 1, 2, 1000, d1, 0, 1.f}, {"x30", 1, 2, 300, d0, 0, 30.f},
        {"bench", BENCH_B, BENCH_H, BENCH_N, db, 0, 1.f},
    };
    if (d1 != d0) m.push_back({"x30", 1, 2, 300, d1, 0, 30.f});
    if (LESSON.causal) {
        std::vector<Case> cz = {{"tiny", 1, 1, 4, d0, 1, 1.f},   {"N=77", 2, 3, 77, d0, 1, 1.f},
                                {"N=1000", 1, 2, 1000, d1, 1, 1.f}, {"x30", 1, 2, 300, d1, 1, 30.f},
                                {"bench", BENCH_B, BENCH_H, BENCH_N, db, 1, 1.f}};
        m.insert(m.end(), cz.begin(), cz.end());
    }
    return m;
}

/* The matrix of a decode lesson (LESSON_DECODE): a KV length of 1, group sizes G = H / H_kv
 * of 1, 4 and 8, N = 1 and 16 new queries, ragged lengths, causal (aligned to the end), x30
 * logits where a combine without the max overflows, KV lengths that are no multiple of any
 * tile and long enough to be split many ways, both head dims; three ordinary shapes
 * (N = N_kv, one with GQA); the decode bench shape. Fields: name, B, H, N, d, causal, qscale,
 * N_kv, H_kv, ragged. */
static std::vector<Case> decode_case_matrix() {
    int d0 = LESSON.head_dims[0], d1 = d0;
    for (int k = 0; k < 8 && LESSON.head_dims[k]; ++k) d1 = LESSON.head_dims[k];
    const int db = supports_d(DECODE_BENCH_D) ? DECODE_BENCH_D : d1;
    std::vector<Case> m = {
        {"kv=1", 2, 4, 1, d0, 0, 1.f, 1, 4, 0},           /* one key: O is V_0, L is the score */
        {"kv=1", 1, 8, 1, d1, 1, 1.f, 1, 1, 0},           /* one K/V head for 8 query heads */
        {"mha", 2, 6, 1, d1, 0, 1.f, 777, 6, 0},          /* G = 1 */
        {"gqa4", 2, 8, 1, d1, 0, 1.f, 1000, 2, 0},        /* G = 4 */
        {"gqa8", 3, 16, 1, d0, 0, 1.f, 4099, 2, 0},       /* G = 8 */
        {"long", 1, 4, 1, d1, 0, 1.f, 70001, 1, 0},       /* one group, many splits */
        {"nq=16", 2, 8, 16, d1, 1, 1.f, 3001, 2, 0},      /* 16 queries x 4 heads per group */
        {"nq=16", 1, 16, 16, d0, 0, 1.f, 333, 2, 0},      /* 128 rows per group */
        {"nq=5", 2, 4, 5, d0, 1, 1.f, 5, 4, 0},           /* causal with N_kv = N: j <= i */
        {"ragged", 4, 8, 1, d1, 0, 1.f, 5000, 2, 1},
        {"ragged", 5, 4, 16, d0, 1, 1.f, 2500, 1, 1},
        {"ragged", 3, 2, 1, d0, 0, 1.f, 300, 2, 1},       /* lengths down to 1 */
        {"x30", 2, 8, 1, d1, 0, 30.f, 9000, 2, 0},        /* split and combined: the combine needs the max */
        {"x30", 2, 4, 4, d0, 1, 30.f, 2000, 4, 1},
        {"N=77", 2, 3, 77, d0, 0, 1.f, 0, 0, 0},          /* ordinary shapes: N_kv = N, H_kv = H */
        {"N=200", 1, 2, 200, d1, 1, 1.f, 0, 0, 0},
        {"N=130", 1, 4, 130, d1, 1, 1.f, 130, 2, 0},      /* a prefill with GQA */
        {"bench", DECODE_BENCH_B, DECODE_BENCH_H, DECODE_BENCH_N, db, 0, 1.f, DECODE_BENCH_NKV, DECODE_BENCH_HKV, 0},
    };
    for (Case &c : m) c = normalized(c);
    return m;
}

/* --fuzz: random valid shapes, N log-uniform in 1..4096 so ragged tiles and
 * tiny N both come up often; causal and x30 logits at random where supported. */
static std::vector<Case> fuzz_cases(int K, uint64_t seed) {
    rng_t r;
    rng_seed(&r, seed ^ 0xf122);
    int nd = 0;
    while (nd < 8 && LESSON.head_dims[nd]) ++nd;
    std::vector<Case> v;
    for (int k = 0; k < K; ++k) {
        Case c = {"fuzz", 1 + (int)(rng_next(&r) % 4), 1 + (int)(rng_next(&r) % 6),
                  (int)exp(rng_uniform(&r) * log(4096.0)) + (int)(rng_next(&r) % 2),
                  LESSON.head_dims[rng_next(&r) % nd], LESSON.causal ? (int)(rng_next(&r) % 2) : 0,
                  rng_uniform(&r) < 0.15 ? 30.f : 1.f};
        if (c.N > 4096) c.N = 4096;
        v.push_back(normalized(c));
    }
    return v;
}

/* --fuzz for a decode lesson: B 1..4, H_kv 1..4, group size G in {1, 2, 4, 8} (H = G H_kv),
 * N_kv log-uniform in 1..32768; three shapes in four are decode steps (N log-uniform in
 * 1..16), the rest ordinary (N = N_kv up to 512); ragged lengths in 40%, causal (then
 * N_kv >= N) in half, x30 logits in about 15%. */
static std::vector<Case> decode_fuzz_cases(int K, uint64_t seed) {
    rng_t r;
    rng_seed(&r, seed ^ 0xdec0de);
    int nd = 0;
    while (nd < 8 && LESSON.head_dims[nd]) ++nd;
    std::vector<Case> v;
    for (int k = 0; k < K; ++k) {
        Case c = {"fuzz", 1 + (int)(rng_next(&r) % 4), 0, 1, LESSON.head_dims[rng_next(&r) % nd],
                  LESSON.causal ? (int)(rng_next(&r) % 2) : 0, rng_uniform(&r) < 0.15 ? 30.f : 1.f, 0, 0, 0};
        c.H_kv = 1 + (int)(rng_next(&r) % 4);
        c.H = c.H_kv * (1 << (rng_next(&r) % 4));
        if (rng_uniform(&r) < 0.75) {
            c.N = std::min(16, (int)exp(rng_uniform(&r) * log(17.0)));
            c.N_kv = std::min(32768, (int)exp(rng_uniform(&r) * log(32769.0)));
            if (c.causal && c.N_kv < c.N) c.N_kv = c.N;
        } else {
            c.N = c.N_kv = std::min(512, (int)exp(rng_uniform(&r) * log(513.0)));
        }
        c.ragged = rng_uniform(&r) < 0.4;
        v.push_back(normalized(c));
    }
    return v;
}

/* The seed of one case: the run's seed mixed with what identifies the case, so that the
 * rerun line (the same shape given on the command line) draws the same inputs. A decode
 * shape mixes in its decode part; every other case keeps the seed it always had. */
static uint64_t case_seed_of(uint64_t run_seed, const Case &c, int t) {
    uint64_t key = ((uint64_t)c.B << 40) ^ ((uint64_t)c.H << 28) ^ ((uint64_t)c.N << 8) ^ c.d ^
                   ((uint64_t)c.causal << 62) ^ ((uint64_t)t << 60) ^ (c.qscale != 1.f);
    if (is_decode(c)) key = rng_mix(key, ((uint64_t)c.N_kv << 24) ^ ((uint64_t)c.H_kv << 4) ^ (uint64_t)c.ragged);
    return rng_mix(run_seed, key);
}

struct Timing { double ms, tflops, pct, gbps; size_t mem, unwritten; };

static size_t g_free_at_start; /* device memory free before any case: the baseline of mem_bytes */

/* Bytes of K and V a decode step reads: every key some query of the sequence sees (the last
 * query sees them all), once, for each K/V head: what a kernel that loads each K/V tile once
 * per group must move at least. */
static double kv_bytes(const Problem &p) {
    double keys = 0;
    for (int b = 0; b < p.c.B; ++b) keys += visible_keys(p, b, p.c.N - 1);
    return 2.0 * keys * p.c.H_kv * p.c.d * esize(p.dt);
}
/* Multiply-adds of S = Q K^T and O = P V over the visible keys, times 2 (FLOPs). */
static double decode_flops(const Problem &p) {
    double keys = 0;
    for (int b = 0; b < p.c.B; ++b)
        for (int i = 0; i < p.c.N; ++i) keys += visible_keys(p, b, i);
    return 4.0 * keys * p.c.H * p.c.d;
}

static Timing time_shape(const Case &c0, dtype_t dt, const options &o, const gpu_env &g, uint64_t seed) {
    const Case c = normalized(c0);
    size_t free0 = g_free_at_start, free1, total;
    Problem p;
    /* a decode lesson's timed shape is filled on the device: its KV cache can be tens of GiB */
    problem_init(p, c, dt, seed, 0, !decode_lesson());
    std::vector<char> O;
    std::vector<float> L;
    int rc = run_once(p, o.timeout_s, O, L); /* also allocates any workspace the method keeps */
    if (rc != ATTN_OK) { problem_free(p); report_rc(rc); exit(EXIT_NOT_IMPLEMENTED); }
    CUDA_CHECK(cudaMemGetInfo(&free1, &total));
    Timing t;
    /* even when only timing, an output nobody wrote is not a result */
    t.unwritten = 0;
    for (size_t i = 0; i < p.n; ++i) { int po; decode_value(O.data(), i, dt, &po); t.unwritten += po; }
    for (size_t i = 0; i < L.size(); ++i) { int po; decode_value(L.data(), i, DTYPE_FP32, &po); t.unwritten += po; }
    if (t.unwritten)
        fprintf(stderr, "FAIL: %zu elements of O and L were not written on the timed shape\n", t.unwritten);
    const size_t guards = (N_BUFFERS + (c.ragged ? 1 : 0)) * 2 * GUARD_BYTES;
    t.mem = free0 > free1 + guards ? free0 - free1 - guards : 0;
    t.ms = time_launches(launch, &p, p.stream, o.warmup, o.reps, o.timeout_s, &g);
    double flops = decode_lesson() ? decode_flops(p) : 4.0 * c.B * c.H * (double)c.N * c.N * c.d * (c.causal ? 0.5 : 1.0);
    t.tflops = flops / (t.ms * 1e-3) / 1e12;
    t.pct = 100.0 * t.tflops / gpu_peak(&g, dt);
    t.gbps = kv_bytes(p) / (t.ms * 1e-3) / 1e9;
    problem_free(p);
    return t;
}

/* The roofline of a memory-bound kernel on this GPU, measured now: a device-to-device copy of
 * up to 1 GiB (a quarter of the free memory at most), timed like a lesson (time_launches:
 * warm-up, median, L2 flushed before each), as (bytes read + bytes written) / time in GB/s.
 * 0 when there is not room for a copy of at least 64 MiB. */
struct Copy { void *dst, *src; size_t bytes; cudaStream_t s; };
static int copy_once(void *arg) {
    Copy *c = (Copy *)arg;
    CUDA_CHECK(cudaMemcpyAsync(c->dst, c->src, c->bytes, cudaMemcpyDeviceToDevice, c->s));
    return 0;
}
static double copy_gbps(const options &o, const gpu_env &g) {
    size_t free_b = 0, total = 0;
    CUDA_CHECK(cudaMemGetInfo(&free_b, &total));
    Copy c = {NULL, NULL, std::min<size_t>(1u << 30, free_b / 4) & ~(size_t)0xfffff, 0};
    if (c.bytes < (64u << 20)) return 0;
    CUDA_CHECK(cudaMalloc(&c.src, c.bytes));
    CUDA_CHECK(cudaMalloc(&c.dst, c.bytes));
    CUDA_CHECK(cudaStreamCreate(&c.s));
    CUDA_CHECK(cudaMemsetAsync(c.src, 1, c.bytes, c.s));
    const double ms = time_launches(copy_once, &c, c.s, 2, std::min(o.reps, 20), o.timeout_s, &g);
    CUDA_CHECK(cudaStreamDestroy(c.s));
    CUDA_CHECK(cudaFree(c.src));
    CUDA_CHECK(cudaFree(c.dst));
    return 2.0 * c.bytes / (ms * 1e-3) / 1e9;
}

static void csv_row(const char *status, int passed, int total, int dt, const Case &c0, const Timing *t) {
    const Case c = normalized(c0);
    printf("%s\n", CSV_HEADER);
    if (t) {
        printf("%s,%s,%d,%d,%s,%d,%d,%d,%d,%d,%.4f,%.2f,%.1f,%zu,%d,%d,%d,", LESSON.name, status, passed, total,
               dtype_name(dt), c.B, c.H, c.N, c.d, c.causal, t->ms, t->tflops, t->pct, t->mem, c.N_kv, c.H_kv,
               c.ragged);
        if (decode_lesson()) printf("%.1f", t->gbps);
        printf("\n");
    } else {
        printf("%s,%s,%d,%d,%s,%d,%d,%d,%d,%d,,,,,%d,%d,%d,\n", LESSON.name, status, passed, total, dtype_name(dt),
               c.B, c.H, c.N, c.d, c.causal, c.N_kv, c.H_kv, c.ragged);
    }
}

int main(int argc, char **argv) {
    options o;
    char err[512] = "";
    const char *prog = strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1 : argv[0];
    int pr = parse_options(argc, argv, &o, err, sizeof err);
    g_prog = prog;
    if (pr == 1) { print_usage(prog, 0); return 0; }
    if (pr == 2) { fprintf(stderr, "%s: %s\n", prog, err); return EXIT_USAGE; }
    if (o.causal && !LESSON.causal) {
        fprintf(stderr, "%s: lesson %02d does not support --causal (causal masking starts in lesson 05)\n", prog, LESSON.number);
        return EXIT_USAGE;
    }
    if ((o.given & GIVEN_DECODE) && !decode_lesson()) {
        fprintf(stderr, "%s: lesson %02d does not take decode shapes (--kv-seq, --kv-heads, --ragged): its kernel "
                "assumes N_kv = N keys and H_kv = H K/V heads; lesson 12 (flash decoding) takes them\n", prog,
                LESSON.number);
        return EXIT_USAGE;
    }
    if (resolve_shape(&o, decode_lesson(), err, sizeof err)) { fprintf(stderr, "%s: %s\n", prog, err); return EXIT_USAGE; }
    if (o.dtype >= 0 && !(LESSON.dtypes & DTYPE_BIT(o.dtype))) {
        fprintf(stderr, "%s: --dtype %s is not supported by lesson %02d: expected one of %s\n", prog,
                dtype_name(o.dtype), LESSON.number, dtypes_list().c_str());
        return EXIT_USAGE;
    }
    if ((o.shape_given || decode_lesson()) && !supports_d(o.d)) {
        fprintf(stderr, "%s: --dim %d is not supported by lesson %02d: expected one of %s\n", prog, o.d,
                LESSON.number, head_dims_list().c_str());
        return EXIT_USAGE;
    }
    gpu_env g;
    gpu_init(&g, o.csv && o.bench_only);
    gpu_require_cc(&g, LESSON.number, LESSON.needs_cc);
    { size_t total; CUDA_CHECK(cudaMemGetInfo(&g_free_at_start, &total)); }
    dtype_t dt_default = (dtype_t)__builtin_ctz(LESSON.dtypes);
    dtype_t dt_time = o.dtype >= 0 ? (dtype_t)o.dtype : dt_default;
    Case bench = {"bench", o.B, o.H, o.N, o.shape_given ? o.d : (supports_d(BENCH_D) ? BENCH_D : LESSON.head_dims[0]), o.causal, 1.f};
    if (decode_lesson()) bench = {"bench", o.B, o.H, o.N, o.d, o.causal, 1.f, o.N_kv, o.H_kv, o.ragged};
    bench = normalized(bench);
    if (!(o.csv && o.bench_only))
        printf("Lesson %02d: %s\nseed %llu (rerun with --seed %llu)\n", LESSON.number, LESSON.title,
               (unsigned long long)o.seed, (unsigned long long)o.seed);
    int passed = 0, total = 0;
    if (!o.bench_only) {
        std::vector<Case> cases;
        if (o.shape_given) {
            Case custom = bench;
            custom.name = "custom";
            cases = {custom};
        } else if (o.fuzz) {
            cases = decode_lesson() ? decode_fuzz_cases(o.fuzz, o.seed) : fuzz_cases(o.fuzz, o.seed);
        } else {
            cases = decode_lesson() ? decode_case_matrix() : case_matrix();
        }
        printf("Grading against float64 on the CPU (%zu cases x %s):\n", cases.size(), o.dtype >= 0 ? dtype_name(o.dtype) : dtypes_list().c_str());
        std::vector<Outcome> outcomes;
        for (int t = 0; t < DTYPE_COUNT; ++t) {
            if (!(LESSON.dtypes & DTYPE_BIT(t)) || (o.dtype >= 0 && o.dtype != t)) continue;
            for (size_t k = 0; k < cases.size(); ++k) {
                const Case &c = cases[k];
                uint64_t cs = case_seed_of(o.seed, c, t);
                int rc = grade_case(c, (dtype_t)t, cs, o, 0);
                if (rc == ATTN_NOT_IMPLEMENTED) {
                    printf("NOT IMPLEMENTED: lesson %02d's attention_forward says it is not written yet.\n"
                           "  Open lessons/%s/ and work through TODO(1), TODO(2), ... then run ./lesson%d again.\n",
                           LESSON.number, LESSON.name, LESSON.number);
                    if (o.csv) csv_row("not-implemented", 0, (int)cases.size(), t, bench, NULL);
                    return EXIT_NOT_IMPLEMENTED;
                }
                total++;
                passed += rc == ATTN_OK;
                outcomes.push_back(outcome_of(c, rc == ATTN_OK));
            }
        }
        printf("%d of %d cases passed\n", passed, total);
        print_pattern(outcomes);
    }
    Timing tm = {0, 0, 0, 0, 0, 0}, *tp = NULL;
    if (!o.check_only) {
        tm = time_shape(bench, dt_time, o, g, rng_mix(o.seed, 77));
        tp = &tm;
        if (o.csv && o.bench_only) {
        } else if (decode_lesson()) {
            const double copy = copy_gbps(o, g);
            char roof[160] = "";
            if (copy > 0)
                snprintf(roof, sizeof roof, ", %.0f%% of this GPU's device-to-device copy (%.0f GB/s read + write, "
                         "measured now)", 100.0 * tm.gbps / copy, copy);
            printf("Time: %s %s%s: %.4f ms; K and V read at %.0f GB/s%s; %.2f TFLOP/s; device memory %.1f MiB\n",
                   dtype_name(dt_time), shape_text(bench).c_str(), bench.causal ? " causal" : "", tm.ms, tm.gbps,
                   roof, tm.tflops, tm.mem / 1048576.0);
        } else {
            printf("Time: %s B=%d H=%d N=%d d=%d%s: %.3f ms, %.2f TFLOP/s, %.1f%% of %s peak %.0f TFLOP/s (%s); "
                   "device memory %.1f MiB\n", dtype_name(dt_time), bench.B, bench.H, bench.N, bench.d,
                   bench.causal ? " causal" : "", tm.ms, tm.tflops, tm.pct, dt_time == DTYPE_FP32 ? "fp32" : "tensor-core",
                   gpu_peak(&g, dt_time), g.peak_source, tm.mem / 1048576.0);
        }
        if (LESSON.causal && !o.causal && !o.bench_only && !decode_lesson()) {
            Case cz = bench;
            cz.causal = 1;
            Timing tc = time_shape(cz, dt_time, o, g, rng_mix(o.seed, 78));
            printf("Causal: %.3f ms, %.2f TFLOP/s; non-causal time / causal time = %.2fx "
                   "(2x is the most skipping can give)\n", tc.ms, tc.tflops, tm.ms / tc.ms);
        }
    }
    bool ok = passed == total && tm.unwritten == 0;
    if (o.csv) csv_row(ok ? "pass" : "fail", passed, total, dt_time, bench, tp);
    else if (!o.bench_only) printf("%s\n", ok ? "PASS" : "FAIL");
    return ok ? EXIT_PASS : EXIT_FAILED;
}

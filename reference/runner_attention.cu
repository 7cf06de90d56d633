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
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <algorithm>
#include <string>
#include <vector>
#include "buffers.h"
#include "cuda_check.h"
#include "gpu_env.h"
#include "runner_common.h"
extern "C" {
#include "cli.h"
#include "cpu_reference.h"
#include "diagnose.h"
#include "grade.h"
#include "rng.h"
}

struct Problem {
    shape_case c;
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

static int esize(dtype_t t) { return dtype_size(t); }

static void upload(Problem &p, int which) {
    const std::vector<float> &X = which == 0 ? p.Q : which == 1 ? p.K : p.V;
    std::vector<char> buf(X.size() * esize(p.dt));
    encode_values(X.data(), buf.data(), X.size(), p.dt);
    guarded_upload(&p.in[which], buf.data());
}

/* The keys query row i of sequence b sees (attention.h): all seqlens[b], or with causal the
 * prefix j <= seqlens[b] - N + i (aligned to the end; N + i for an ordinary shape's i + 1). */
static int visible_keys(const Problem &p, int b, int i) {
    const int len = p.seqlens[b];
    return p.c.causal ? len - p.c.N + i + 1 : len;
}

/* host: draw the inputs on the host and keep them for grading; else (timing a decode lesson)
 * fill them on the device. */
static void problem_init(Problem &p, const shape_case &c0, dtype_t dt, uint64_t seed, bool host = true) {
    const shape_case c = normalized(c0);
    p.c = c;
    p.dt = dt;
    p.host = host;
    p.n = (size_t)c.B * c.H * c.N * c.d;
    p.nkv = (size_t)c.B * c.H_kv * c.N_kv * c.d;
    /* A shape beyond the GPU's memory gets a clear message before anything is allocated
     * (the fp32 host copies below would otherwise fail first, with an uncaught bad_alloc). */
    /* device: Q, K, V, O, L and their guards (and seqlens_kv); host: Q, K, V in fp32, an upload
     * buffer and two copies of O, or only the two copies when the device fills the inputs */
    require_memory(c, dt,
                   (2 * p.n + 2 * p.nkv) * esize(dt) + sizeof(float) * (size_t)c.B * c.H * c.N +
                       N_BUFFERS * 2 * GUARD_BYTES + (c.ragged ? 2 * GUARD_BYTES + 4 * (size_t)c.B : 0),
                   host ? (p.n + 2 * p.nkv) * sizeof(float) + (std::max(p.n, p.nkv) + 2 * p.n) * esize(dt)
                        : 2 * p.n * esize(dt),
                   "Q, K, V, O and L");
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
    for (int k = 0; k < 3; ++k)
        guarded_alloc_or_exit(&p.in[k], k ? p.nkv : p.n, esize(dt), nan_of(esize(dt)), c, dt, k ? "each of K, V" : "Q");
    if (host) {
        p.Q.assign(p.n, 0.f); p.K.assign(p.nkv, 0.f); p.V.assign(p.nkv, 0.f);
        random_slices(p.Q, c.B * c.H, c.N, c.d, 0, c.N, c.qscale, dt, rng_mix(seed, 1));
        random_slices(p.K, c.B * c.H_kv, c.N_kv, c.d, 0, c.N_kv, 1.f, dt, rng_mix(seed, 2));
        random_slices(p.V, c.B * c.H_kv, c.N_kv, c.d, 0, c.N_kv, 1.f, dt, rng_mix(seed, 3));
        /* key rows past a sequence's end hold NaN: a kernel that reads them fails */
        for (int b = 0; b < c.B; ++b)
            for (int h = 0; h < c.H_kv; ++h)
                for (size_t e = (size_t)p.seqlens[b] * c.d; e < (size_t)c.N_kv * c.d; ++e) {
                    const size_t at = ((size_t)b * c.H_kv + h) * c.N_kv * c.d + e;
                    p.K[at] = p.V[at] = NAN;
                }
        for (int k = 0; k < 3; ++k) upload(p, k);
    } else {
        device_fill_random(p.in[0].data, p.n, dt, rng_mix(seed, 1), c.qscale, 0);
        device_fill_random(p.in[1].data, p.nkv, dt, rng_mix(seed, 2), 1.f, 0);
        device_fill_random(p.in[2].data, p.nkv, dt, rng_mix(seed, 3), 1.f, 0);
        for (int b = 0; b < c.B; ++b)
            for (int h = 0; h < c.H_kv && p.seqlens[b] < c.N_kv; ++h)
                for (int k = 1; k < 3; ++k)
                    fill_pattern((char *)p.in[k].data + (((size_t)b * c.H_kv + h) * c.N_kv + p.seqlens[b]) * c.d * esize(dt),
                                 (size_t)(c.N_kv - p.seqlens[b]) * c.d, esize(dt), nan_of(esize(dt)), 0);
        CUDA_CHECK(cudaDeviceSynchronize());
    }
    const size_t rows = (size_t)c.B * c.H * c.N;
    guarded_alloc_or_exit(&p.O, p.n, esize(dt), poison_of(esize(dt)), c, dt, "O");
    guarded_alloc_or_exit(&p.L, rows, 4, POISON32, c, dt, "L");
    p.lens.raw = NULL;
    p.lens.data = NULL;
    if (c.ragged) {
        guarded_alloc_or_exit(&p.lens, c.B, 4, POISON32, c, dt, "seqlens_kv");
        guarded_upload(&p.lens, p.seqlens.data());
    }
    p.hitO = p.hitL = guard_hits{0, 0, -1, -1, -1, -1};
    CUDA_CHECK(cudaStreamCreate(&p.stream));
    attn_args a;
    a.B = c.B; a.H = c.H; a.N = c.N; a.d = c.d; a.causal = c.causal;
    a.scale = 1.0f / sqrtf((float)c.d);
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
static std::vector<std::pair<int, int>> pick_rows(const shape_case &c, rng_t *r) {
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
    const shape_case &c = p.c;
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
    const shape_case &c = p.c;
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

/* Grades one case: the output, a bitwise re-run, and for causal cases whether
 * changing K and V at positions >= p changes any row < p. */
static int grade_case(const shape_case &c0, dtype_t dt, uint64_t seed, const options &o) {
    const shape_case c = normalized(c0);
    Problem p;
    problem_init(p, c, dt, seed);
    std::vector<char> O1, O2;
    std::vector<float> L1, L2;
    int rc = run_once(p, o.timeout_s, O1, L1);
    if (rc != ATTN_OK) { problem_free(p); report_entry_rc(rc, "attention_forward"); return rc; }
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
                       : LESSON.needs_cc >= 90
                           ? "a wait on a full or empty mbarrier missing, or a wrong phase? racecheck cannot see "
                             "mbarrier ordering; `make emu-09 EMU09_SRC=<your file>` checks every shared access"
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
            std::vector<int> from(c.B);
            for (int b = 0; b < c.B; ++b) from[b] = p.seqlens[b] - c.N + pos;
            random_slice_rows(p.K, c.B * c.H_kv, c.N_kv, c.d, c.H_kv, from.data(), p.seqlens.data(), 1.f, dt,
                              rng_mix(seed, 4 + 2 * k));
            random_slice_rows(p.V, c.B * c.H_kv, c.N_kv, c.d, c.H_kv, from.data(), p.seqlens.data(), 1.f, dt,
                              rng_mix(seed, 5 + 2 * k));
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
    print_case_line(ok, c, dt, v.why, o.seed);
    problem_free(p);
    return ok ? ATTN_OK : -1;
}

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

static run_timing time_shape(const shape_case &c0, dtype_t dt, const options &o, const gpu_env &g, uint64_t seed) {
    const shape_case c = normalized(c0);
    size_t free0 = g_free_at_start, free1, total;
    Problem p;
    /* a decode lesson's timed shape is filled on the device: its KV cache can be tens of GiB */
    problem_init(p, c, dt, seed, !decode_lesson());
    std::vector<char> O;
    std::vector<float> L;
    int rc = run_once(p, o.timeout_s, O, L); /* also allocates any workspace the method keeps */
    if (rc != ATTN_OK) { problem_free(p); report_entry_rc(rc, "attention_forward"); exit(EXIT_NOT_IMPLEMENTED); }
    CUDA_CHECK(cudaMemGetInfo(&free1, &total));
    run_timing t;
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

int main(int argc, char **argv) {
    options o;
    if (int rc = runner_options(argc, argv, o, "lesson 05", NULL); rc >= 0) return rc;
    gpu_env g;
    g_free_at_start = runner_gpu_init(g, o);
    dtype_t dt_default = (dtype_t)__builtin_ctz(LESSON.dtypes);
    dtype_t dt_time = o.dtype >= 0 ? (dtype_t)o.dtype : dt_default;
    const shape_case bench = bench_shape(o);
    if (!(o.csv && o.bench_only))
        printf("Lesson %02d: %s\nseed %llu (rerun with --seed %llu)\n", LESSON.number, LESSON.title,
               (unsigned long long)o.seed, (unsigned long long)o.seed);
    int passed = 0, total = 0;
    if (!o.bench_only) {
        if (int rc = grade_cases(o, bench, case_matrix(false), grade_case, "attention_forward", NULL, NULL, &passed,
                                 &total); rc >= 0)
            return rc;
    }
    run_timing tm = {0, 0, 0, 0, 0, 0};
    bool timed = false;
    if (!o.check_only) {
        tm = time_shape(bench, dt_time, o, g, rng_mix(o.seed, 77));
        timed = true;
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
            shape_case cz = bench;
            cz.causal = 1;
            print_causal_ratio(time_shape(cz, dt_time, o, g, rng_mix(o.seed, 78)), tm.ms);
        }
    }
    bool ok = passed == total && tm.unwritten == 0;
    if (o.csv)
        print_csv_row(ok ? "pass" : "fail", passed, total, dt_time, bench, timed ? tm.ms : -1, tm.tflops, tm.pct, tm.mem,
                      decode_lesson() ? tm.gbps : -1);
    else if (!o.bench_only) printf("%s\n", ok ? "PASS" : "FAIL");
    return ok ? EXIT_PASS : EXIT_FAILED;
}

/* runner_backward.cu: main() of every backward lesson binary (lessons 10-11, and
 * ./standard_backward). Grades the lesson's attention_backward against the float64 CPU
 * backward on a fixed case matrix, then times it.
 *
 * Per case: fresh seeded Q, K, V, dO (rounded to the dtype; x30 logits in some cases); O and L
 * from a float64 forward pass on the GPU (forward_f64.h), checked against the CPU's float64
 * forward on a sample of rows; dQ, dK, dV poisoned before every launch and surrounded by
 * poison guards, the inputs by NaN guards. The float64 reference (attention_backward_slice_f64)
 * and the plain same-precision backward that sets the tolerance (attention_backward_slice_lowp)
 * run on every (b, h) slice of small cases and on a sample of slices of big ones; every element
 * of every slice must have been written. Then: a re-run on the same inputs (bitwise, except dQ
 * of a lesson that declares LESSON_ATOMIC_ACCUMULATION: within the tolerance, and the re-run
 * must pass grading too), and for causal cases two dependency tests (future keys must not
 * reach dQ; earlier queries must not reach dK, dV of later keys). A failure is diagnosed per
 * gradient (where the bad elements are) and across gradients (diagnose_bwd.h: which product
 * the pattern points at, and which hypothesis the numbers match). */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <algorithm>
#include <string>
#include <vector>
#include "buffers.h"
#include "cuda_check.h"
#include "forward_f64.h"
#include "gpu_env.h"
#include "runner_common.h"
extern "C" {
#include "cli.h"
#include "cpu_reference.h"
#include "diagnose.h"
#include "diagnose_bwd.h"
#include "grade.h"
#include "rng.h"
}

enum { IN_Q, IN_K, IN_V, IN_O, IN_DO, IN_L, N_IN };
static const char *const IN_NAME[N_IN] = {"Q", "K", "V", "O", "dO", "L"};
static const int N_BUFFERS = N_IN + 3; /* guarded arrays per problem */

struct Problem {
    shape_case c;
    dtype_t dt;
    int BH;
    size_t n;                         /* B*H*N*d */
    std::vector<float> Q, K, V, dO;   /* the exact values stored on the device */
    guarded_buf in[N_IN];             /* Q, K, V, O, dO, L between NaN guards */
    guarded_buf out[3];               /* dQ, dK, dV between poison guards */
    guard_hits hit[3];                /* what the last launch wrote outside dQ, dK, dV */
    cudaStream_t stream;
    attn_bwd_args args;
};

/* One run's outputs as the device stored them. */
struct Outputs { std::vector<char> g[3]; };

static bool g_atomic = false; /* LESSON_ATOMIC_ACCUMULATION: dQ's re-run compared within tolerance */

static int esize(dtype_t t) { return dtype_size(t); }

static void upload(Problem &p, int which) {
    const std::vector<float> &X = which == IN_Q ? p.Q : which == IN_K ? p.K : which == IN_V ? p.V : p.dO;
    std::vector<char> buf(p.n * esize(p.dt));
    encode_values(X.data(), buf.data(), p.n, p.dt);
    guarded_upload(&p.in[which], buf.data());
}

/* O and L of the current Q, K, V (float64 on the GPU, rounded), ready when this returns. */
static void run_forward(Problem &p) {
    const shape_case &c = p.c;
    forward_f64(p.in[IN_Q].data, p.in[IN_K].data, p.in[IN_V].data, p.in[IN_O].data, (float *)p.in[IN_L].data, c.B,
                c.H, c.N, c.d, p.args.scale, c.causal, p.dt, p.stream);
    wait_stream(p.stream, 600, "the runner's float64 forward pass");
}

static void problem_init(Problem &p, const shape_case &c, dtype_t dt, uint64_t seed) {
    p.c = c;
    p.dt = dt;
    p.BH = c.B * c.H;
    p.n = (size_t)c.B * c.H * c.N * c.d;
    const size_t rows = (size_t)p.BH * c.N, es = esize(dt);
    /* device: 8 arrays of n elements and L; host: Q, K, V, dO in fp32, an upload buffer and two
     * runs' dQ, dK, dV */
    require_memory(c, dt, 8 * p.n * es + 4 * rows + N_BUFFERS * 2 * GUARD_BYTES,
                   4 * p.n * sizeof(float) + 7 * p.n * es, "Q, K, V, O, dO, dQ, dK, dV and L");
    p.Q.assign(p.n, 0.f); p.K.assign(p.n, 0.f); p.V.assign(p.n, 0.f); p.dO.assign(p.n, 0.f);
    random_slices(p.Q, p.BH, c.N, c.d, 0, c.N, c.qscale, dt, rng_mix(seed, 1));
    random_slices(p.K, p.BH, c.N, c.d, 0, c.N, 1.f, dt, rng_mix(seed, 2));
    random_slices(p.V, p.BH, c.N, c.d, 0, c.N, 1.f, dt, rng_mix(seed, 3));
    random_slices(p.dO, p.BH, c.N, c.d, 0, c.N, 1.f, dt, rng_mix(seed, 4));
    for (int k = 0; k < N_IN; ++k) {
        if (k == IN_L) guarded_alloc_or_exit(&p.in[k], rows, 4, NAN32, c, dt, "L");
        else guarded_alloc_or_exit(&p.in[k], p.n, es, nan_of(es), c, dt, IN_NAME[k]);
    }
    for (int g = 0; g < 3; ++g) {
        guarded_alloc_or_exit(&p.out[g], p.n, es, poison_of(es), c, dt, BWD_NAME[g]);
        p.hit[g] = guard_hits{0, 0, -1, -1, -1, -1};
    }
    CUDA_CHECK(cudaStreamCreate(&p.stream));
    upload(p, IN_Q); upload(p, IN_K); upload(p, IN_V); upload(p, IN_DO);
    attn_bwd_args a;
    a.B = c.B; a.H = c.H; a.N = c.N; a.d = c.d; a.causal = c.causal;
    a.scale = 1.0f / sqrtf((float)c.d);
    a.dtype = dt;
    a.Q = p.in[IN_Q].data; a.K = p.in[IN_K].data; a.V = p.in[IN_V].data;
    a.O = p.in[IN_O].data; a.dO = p.in[IN_DO].data; a.L = (const float *)p.in[IN_L].data;
    a.dQ = p.out[BWD_DQ].data; a.dK = p.out[BWD_DK].data; a.dV = p.out[BWD_DV].data;
    a.stream = p.stream;
    p.args = a;
    run_forward(p);
}

static void problem_free(Problem &p) {
    for (int k = 0; k < N_IN; ++k) guarded_free(&p.in[k]);
    for (int g = 0; g < 3; ++g) guarded_free(&p.out[g]);
    CUDA_CHECK(cudaStreamDestroy(p.stream));
}

static int launch(void *arg) { return attention_backward(&((Problem *)arg)->args); }

/* Poison dQ, dK, dV (and re-arm their guards), launch, wait, copy them back, and record in
 * p.hit what the launch wrote outside them. Returns the entry point's code. */
static int run_once(Problem &p, double timeout_s, Outputs &out) {
    const int es = esize(p.dt);
    for (int g = 0; g < 3; ++g) {
        fill_pattern(p.out[g].data, p.n, es, poison_of(es), p.stream);
        guarded_rearm(&p.out[g], p.stream);
    }
    int rc = attention_backward(&p.args);
    if (rc != ATTN_OK) return rc;
    CUDA_CHECK(cudaGetLastError());
    wait_stream(p.stream, timeout_s, "the lesson's backward kernels");
    for (int g = 0; g < 3; ++g) {
        out.g[g].resize(p.n * es);
        CUDA_CHECK(cudaMemcpy(out.g[g].data(), p.out[g].data, out.g[g].size(), cudaMemcpyDeviceToHost));
        p.hit[g] = guarded_check(&p.out[g]);
    }
    return ATTN_OK;
}

/* "wrote outside dK: ..." for every gradient whose guards the last launch wrote; "" if none. */
static std::string outside_writes(const Problem &p) {
    std::string s;
    char buf[768];
    for (int g = 0; g < 3; ++g) {
        const guard_hits &h = p.hit[g];
        describe_outside(buf, sizeof buf, BWD_NAME[g], h.before, h.after, h.after_first, h.after_last,
                         h.before_nearest, h.before_farthest, p.c.B, p.c.H, p.c.N, p.c.d);
        if (*buf) s += std::string(s.empty() ? "" : "\n      ") + buf;
    }
    return s;
}

/* ---- the forward pass the lesson is fed, checked against the CPU ---- */

/* Compares the GPU's O and L with attention_row_f64 on up to 48 rows (the first and last
 * rows of the first and last slices, the rest random). They were computed in float64 too, so
 * they may differ only by the final rounding to the dtype (and to fp32 on the way). A mismatch
 * is a bug of the harness, not of the lesson: exit 5 with the numbers. */
static void check_forward(const Problem &p, uint64_t seed) {
    const shape_case &c = p.c;
    const size_t sl = (size_t)c.N * c.d, es = esize(p.dt);
    rng_t r;
    rng_seed(&r, seed ^ 0xf0f0);
    std::vector<std::pair<int, int>> rows = {{0, 0}, {0, c.N - 1}, {p.BH - 1, 0}, {p.BH - 1, c.N - 1}};
    while (rows.size() < 48) rows.push_back({(int)(rng_next(&r) % p.BH), (int)(rng_next(&r) % c.N)});
    const double rel = (p.dt == DTYPE_FP32 ? 0x1p-24 : p.dt == DTYPE_FP16 ? 0x1p-11 : 0x1p-8) + 0x1p-23;
    const double abs_o = p.dt == DTYPE_FP16 ? 3e-8 : 1e-12; /* fp16's subnormal spacing */
    std::vector<char> Orow(c.d * es);
    for (auto &rw : rows) {
        const int bh = rw.first, i = rw.second;
        std::vector<double> o(c.d);
        double L;
        attention_row_f64(&p.Q[bh * sl], &p.K[bh * sl], &p.V[bh * sl], c.N, c.d, i, p.args.scale, c.causal, o.data(),
                          &L);
        CUDA_CHECK(cudaMemcpy(Orow.data(), (char *)p.in[IN_O].data + (bh * sl + (size_t)i * c.d) * es, c.d * es,
                              cudaMemcpyDeviceToHost));
        float gl;
        CUDA_CHECK(cudaMemcpy(&gl, (float *)p.in[IN_L].data + (size_t)bh * c.N + i, 4, cudaMemcpyDeviceToHost));
        bool ok = fabs(gl - L) <= 0x1p-23 * fabs(L) + 1e-9;
        int col = -1, po;
        for (int k = 0; k < c.d && ok; ++k)
            if (!(fabs(decode_value(Orow.data(), k, p.dt, &po) - o[k]) <= rel * fabs(o[k]) + abs_o)) ok = false, col = k;
        if (!ok) {
            fprintf(stderr, "harness error: the runner's float64 forward pass (reference/runner_forward_f64.cu) "
                    "disagrees with the CPU reference at b=%d h=%d row %d%s (L: GPU %.9g, CPU %.9g): the inputs "
                    "O and L handed to the lesson cannot be trusted; please report this\n", bh / c.H, bh % c.H, i,
                    col >= 0 ? " of O" : "", gl, L);
            exit(EXIT_CUDA_ERROR);
        }
    }
}

/* ---- references and grading ---- */

/* The float64 reference and the plain same-precision backward of the graded slices. */
struct Reference {
    std::vector<int> slices;          /* graded (b, h) slices, ascending */
    std::vector<double> ref[3];       /* [slices.size() * N * d] each */
    std::vector<double> plain[3];
    tolerance tol[3];
    char tol_desc[3][200];
};

/* Which slices get the CPU references: all when 12 N^2 d multiply-adds per slice (float64 and
 * same-precision backward) fit in a budget of 3e9 (about a second on a few cores), else as many
 * as fit, at least one: the first and the last slice (where a wrong offset or a write past the
 * end shows) and random ones. */
static std::vector<int> pick_slices(const Problem &p, uint64_t seed) {
    const double per = 12.0 * (double)p.c.N * p.c.N * p.c.d;
    long fit = std::max(1L, (long)(3e9 / per));
    std::vector<int> s;
    if (fit >= p.BH) {
        for (int bh = 0; bh < p.BH; ++bh) s.push_back(bh);
        return s;
    }
    rng_t r;
    rng_seed(&r, seed ^ 0x511ce);
    std::vector<char> taken(p.BH, 0);
    auto take = [&](int bh) { if (!taken[bh]) { taken[bh] = 1; s.push_back(bh); } };
    take(0);
    if (fit >= 2) take(p.BH - 1);
    while ((long)s.size() < fit) take((int)(rng_next(&r) % p.BH));
    std::sort(s.begin(), s.end());
    return s;
}

static void compute_reference(const Problem &p, uint64_t seed, Reference &R) {
    const shape_case &c = p.c;
    R.slices = pick_slices(p, seed);
    const size_t S = R.slices.size(), sl = (size_t)c.N * c.d;
    for (int g = 0; g < 3; ++g) { R.ref[g].assign(S * sl, 0); R.plain[g].assign(S * sl, 0); }
    /* two tasks per slice, so that even a single big slice uses two cores */
#pragma omp parallel for schedule(dynamic, 1)
    for (long t = 0; t < (long)(2 * S); ++t) {
        const size_t k = t / 2, off = k * sl + 0, at = (size_t)R.slices[k] * sl;
        if (t % 2 == 0)
            attention_backward_slice_f64(&p.Q[at], &p.K[at], &p.V[at], &p.dO[at], c.N, c.d, p.args.scale, c.causal,
                                         &R.ref[0][off], &R.ref[1][off], &R.ref[2][off]);
        else
            attention_backward_slice_lowp(&p.Q[at], &p.K[at], &p.V[at], &p.dO[at], c.N, c.d, p.args.scale, c.causal,
                                          p.dt, &R.plain[0][off], &R.plain[1][off], &R.plain[2][off]);
    }
    for (int g = 0; g < 3; ++g) {
        double e = 0, big = 0;
        for (size_t k = 0; k < R.ref[g].size(); ++k) {
            e = std::max(e, fabs(R.plain[g][k] - R.ref[g][k]));
            big = std::max(big, fabs(R.ref[g][k]));
        }
        R.tol[g] = bwd_tolerance(p.dt, e, big, R.tol_desc[g], sizeof R.tol_desc[g]);
    }
}

/* The graded slices' elements of gradient g of one run, decoded; NaN where poisoned. */
static std::vector<double> decode_graded(const Problem &p, const Reference &R, const Outputs &o, int g) {
    const size_t sl = (size_t)p.c.N * p.c.d;
    std::vector<double> v(R.slices.size() * sl);
    for (size_t k = 0; k < R.slices.size(); ++k)
        for (size_t e = 0; e < sl; ++e) {
            int po;
            v[k * sl + e] = decode_value(o.g[g].data(), (size_t)R.slices[k] * sl + e, p.dt, &po);
        }
    return v;
}

/* Grades one run against R: every element of the graded slices, and "written" everywhere. */
static void grade_outputs(const Problem &p, const Reference &R, const Outputs &o, grade_report rep[3]) {
    const shape_case &c = p.c;
    const size_t sl = (size_t)c.N * c.d;
    std::vector<char> graded(p.BH, 0);
    for (int bh : R.slices) graded[bh] = 1;
    for (int g = 0; g < 3; ++g) {
        grader *gr = grader_new(p.BH, c.H, c.N, c.d);
        for (size_t k = 0; k < R.slices.size(); ++k) {
            const int bh = R.slices[k];
            for (int i = 0; i < c.N; ++i)
                for (int col = 0; col < c.d; ++col) {
                    int po;
                    const size_t e = (size_t)i * c.d + col;
                    const double got = decode_value(o.g[g].data(), (size_t)bh * sl + e, p.dt, &po);
                    grader_check(gr, bh, i, col, R.ref[g][k * sl + e], got, po, R.tol[g]);
                }
        }
        for (int bh = 0; bh < p.BH; ++bh) {
            if (graded[bh]) continue;
            for (size_t e = 0; e < sl; ++e) {
                int po;
                decode_value(o.g[g].data(), (size_t)bh * sl + e, p.dt, &po);
                if (po) grader_check(gr, bh, (int)(e / c.d), (int)(e % c.d), 0.0, NAN, 1, R.tol[g]);
            }
        }
        /* The forward's "every row is wrong: check m, l, ..." points the wrong way here. */
        grader_finish_ex(gr, &rep[g], "every row is wrong");
        grader_free(gr);
    }
}

/* Cross-gradient facts of a failing run (diagnose_bwd.h), measured on the first graded slice
 * with a bad element. */
static void gather_facts(const Problem &p, const Reference &R, const Outputs &o, const grade_report rep[3],
                         bwd_facts &f) {
    const shape_case &c = p.c;
    const size_t sl = (size_t)c.N * c.d;
    bwd_facts_init(&f);
    f.causal = c.causal;
    f.scale = p.args.scale;
    std::vector<double> got[3];
    for (int g = 0; g < 3; ++g) {
        f.bad[g] = rep[g].bad;
        f.unwritten[g] = rep[g].unwritten;
        f.nonfinite[g] = rep[g].nonfinite;
        got[g] = decode_graded(p, R, o, g);
    }
    size_t ks = 0;
    for (size_t k = 0; k < R.slices.size(); ++k) {
        bool bad = false;
        for (int g = 0; g < 3 && !bad; ++g)
            for (size_t e = 0; e < sl && !bad; ++e)
                bad = grade_element(R.ref[g][k * sl + e], got[g][k * sl + e], 0, R.tol[g]) != ELEM_OK;
        if (bad) { ks = k; break; }
    }
    const size_t at = (size_t)R.slices[ks] * sl;
    const double *ref[3] = {&R.ref[0][ks * sl], &R.ref[1][ks * sl], &R.ref[2][ks * sl]};
    const double *gk[3] = {&got[0][ks * sl], &got[1][ks * sl], &got[2][ks * sl]};
    bwd_examine_slice(&p.Q[at], &p.K[at], &p.V[at], &p.dO[at], c.N, c.d, ref, gk, R.tol, &f);
}

struct Verdict { bool pass; std::string note; };

/* Grades run o; prints the FAIL block (when quiet is false). */
static Verdict grade(const Problem &p, const Reference &R, const Outputs &o, bool quiet) {
    const shape_case &c = p.c;
    grade_report rep[3];
    grade_outputs(p, R, o, rep);
    const std::string outside = outside_writes(p);
    Verdict v = {outside.empty() && rep[0].bad == 0 && rep[1].bad == 0 && rep[2].bad == 0, ""};
    if (v.pass) {
        char buf[400];
        snprintf(buf, sizeof buf, "max err dQ %.2g, dK %.2g, dV %.2g (dQ: %s)", rep[0].max_abs, rep[1].max_abs,
                 rep[2].max_abs, R.tol_desc[0]);
        v.note = buf;
        return v;
    }
    if (quiet) return v;
    std::string why;
    if (!outside.empty()) {
        why = "diagnosis: " + outside + "\n      ";
    } else {
        bwd_facts f;
        gather_facts(p, R, o, rep, f);
        char buf[1024];
        diagnose_bwd(&f, buf, sizeof buf);
        if (*buf) why = std::string("diagnosis: ") + buf + "\n      ";
    }
    for (int g = 0; g < 3; ++g) {
        char buf[1200];
        if (rep[g].bad)
            snprintf(buf, sizeof buf, "%s: %ld of %ld checked elements bad (%.2f%%), max abs err %.3g; %s%s%s\n      ",
                     BWD_NAME[g], rep[g].bad, rep[g].checked, 100.0 * rep[g].bad / std::max(1L, rep[g].checked),
                     rep[g].max_abs, R.tol_desc[g], rep[g].summary[0] ? "\n        where: " : "", rep[g].summary);
        else
            snprintf(buf, sizeof buf, "%s: passes (max abs err %.2g)\n      ", BWD_NAME[g], rep[g].max_abs);
        why += buf;
    }
    while (!why.empty() && why.back() == ' ') why.pop_back();
    printf("    FAIL  %-6s %s%s%s\n      %s", c.name, dtype_name(p.dt), c.causal ? " causal" : "",
           c.qscale != 1.f ? " x30 logits" : "", why.c_str());
    for (int g = 0; g < 3; ++g) grade_print_first(&rep[g], c.H, BWD_NAME[g]);
    return v;
}

/* ---- the re-run and the dependency tests ---- */

/* Elements in rows [r0, r1) of every slice where two runs differ: bitwise, or (within) by more
 * than tolerance t. */
static long differ(const Problem &p, const std::vector<char> &a, const std::vector<char> &b, int r0, int r1,
                   bool within, tolerance t, double *max_diff) {
    const int es = esize(p.dt);
    const size_t sl = (size_t)p.c.N * p.c.d;
    long n = 0;
    for (int bh = 0; bh < p.BH; ++bh)
        for (size_t e = (size_t)r0 * p.c.d; e < (size_t)r1 * p.c.d; ++e) {
            const size_t i = bh * sl + e;
            if (!memcmp(&a[i * es], &b[i * es], es)) continue;
            if (within) {
                int pa, pb;
                const double x = decode_value(a.data(), i, p.dt, &pa), y = decode_value(b.data(), i, p.dt, &pb);
                if (max_diff && std::isfinite(x - y)) *max_diff = std::max(*max_diff, fabs(x - y));
                if (!pa && !pb && fabs(x - y) <= t.atol + t.rtol * fabs(x)) continue;
            }
            ++n;
        }
    return n;
}

/* Re-runs on the same inputs: dK and dV bitwise; dQ bitwise too unless the lesson sums it with
 * atomics, then within the tolerance, and the re-run must pass grading as well. */
static bool rerun_check(Problem &p, const Reference &R, const Outputs &o1, bool first_passed, double timeout_s,
                        std::string &note) {
    const shape_case &c = p.c;
    Outputs o2;
    run_once(p, timeout_s, o2);
    long nd[3];
    double maxd = 0;
    for (int g = 0; g < 3; ++g)
        nd[g] = differ(p, o1.g[g], o2.g[g], 0, c.N, g == BWD_DQ && g_atomic, R.tol[g], g == BWD_DQ ? &maxd : NULL);
    const bool outside = !outside_writes(p).empty();
    if (nd[0] + nd[1] + nd[2]) {
        printf("    FAIL  %-6s %s%s: race suspected: two launches on the same input differ in %ld elements of dQ%s, "
               "%ld of dK, %ld of dV (%s)\n", c.name, dtype_name(p.dt), c.causal ? " causal" : "", nd[0],
               g_atomic ? " (beyond the tolerance)" : "", nd[1], nd[2],
               outside ? "blocks that write outside their rows (above) race with the blocks that own those rows"
                       : g_atomic && nd[0] && !nd[1] && !nd[2]
                             ? "dQ's atomics lose or double updates, or its accumulator is not zeroed before "
                               "every call (a re-run then adds onto the last one's sums)? every partial dQ must be "
                               "added exactly once, into zeros"
                             : "a missing __syncthreads()? `make sanitize-lessonN` runs racecheck");
        return false;
    }
    if (g_atomic && first_passed) {
        Verdict v2 = grade(p, R, o2, true);
        if (!v2.pass) {
            printf("    FAIL  %-6s %s%s: the re-run on the same inputs fails grading (the first run passed): dQ's "
                   "atomic accumulation loses updates now and then, or a race\n", c.name, dtype_name(p.dt),
                   c.causal ? " causal" : "");
            grade(p, R, o2, false);
            return false;
        }
        char buf[200];
        snprintf(buf, sizeof buf, "re-run: dK, dV bitwise equal, dQ within tolerance (atomics; max diff %.2g)", maxd);
        note = buf;
    } else {
        note = "re-run: bitwise equal";
    }
    return true;
}

/* Causal dependency tests (see the lesson 10 text, "The causal tests"):
 *  1. dQ_i depends on keys j <= i only: re-drawing K and V at positions >= s (and recomputing
 *     O and L) must leave dQ rows < s unchanged, for s = N-1, N/2+1, 1 (largest first, so the
 *     rows before each s still hold the first run's keys).
 *  2. dK_j, dV_j sum over queries i >= j only: re-drawing Q and dO at rows < s must leave dK
 *     and dV rows >= s unchanged, and dQ rows >= s too (they read only their own Q and dO
 *     rows), for s = 1, N/2, N-1 (smallest first).
 * "Unchanged" is bitwise (exact math: masked terms are exact zeros), except dQ of an atomic
 * lesson (within the tolerance). Restores the inputs of the first run afterwards. */
static bool causal_checks(Problem &p, const Reference &R, const Outputs &o1, uint64_t seed, double timeout_s) {
    const shape_case &c = p.c;
    if (!c.causal || c.N < 2) return true;
    const std::vector<float> K0 = p.K, V0 = p.V, Q0 = p.Q, dO0 = p.dO;
    Outputs o2;
    bool ok = true;
    const int s1[3] = {c.N - 1, std::min(c.N - 1, c.N / 2 + 1), 1};
    for (int k = 0; k < 3 && ok; ++k) {
        const int s = s1[k];
        if (k > 0 && s >= s1[k - 1]) continue;
        random_slices(p.K, p.BH, c.N, c.d, s, c.N, 1.f, p.dt, rng_mix(seed, 10 + 2 * k));
        random_slices(p.V, p.BH, c.N, c.d, s, c.N, 1.f, p.dt, rng_mix(seed, 11 + 2 * k));
        upload(p, IN_K); upload(p, IN_V);
        run_forward(p);
        run_once(p, timeout_s, o2);
        const long n = differ(p, o1.g[BWD_DQ], o2.g[BWD_DQ], 0, s, g_atomic, R.tol[BWD_DQ], NULL);
        if (n) {
            printf("    FAIL  %-6s %s causal: future keys influence dQ: changing K and V at positions >= %d changed "
                   "%ld elements of dQ rows < %d%s: dQ_i may only sum over keys j <= i: a K/V tile above the "
                   "diagonal not skipped, or the diagonal tile not masked, in dQ += dS K\n", c.name, dtype_name(p.dt),
                   s, n, s, g_atomic ? " (beyond the tolerance)" : "");
            ok = false;
        }
    }
    p.K = K0; p.V = V0;
    upload(p, IN_K); upload(p, IN_V);
    const int s2[3] = {1, std::max(1, c.N / 2), c.N - 1};
    for (int k = 0; k < 3 && ok; ++k) {
        const int s = s2[k];
        if (k > 0 && s <= s2[k - 1]) continue;
        random_slices(p.Q, p.BH, c.N, c.d, 0, s, c.qscale, p.dt, rng_mix(seed, 20 + 2 * k));
        random_slices(p.dO, p.BH, c.N, c.d, 0, s, 1.f, p.dt, rng_mix(seed, 21 + 2 * k));
        upload(p, IN_Q); upload(p, IN_DO);
        run_forward(p);
        run_once(p, timeout_s, o2);
        const long nk = differ(p, o1.g[BWD_DK], o2.g[BWD_DK], s, c.N, false, R.tol[BWD_DK], NULL);
        const long nv = differ(p, o1.g[BWD_DV], o2.g[BWD_DV], s, c.N, false, R.tol[BWD_DV], NULL);
        const long nq = differ(p, o1.g[BWD_DQ], o2.g[BWD_DQ], s, c.N, g_atomic, R.tol[BWD_DQ], NULL);
        if (nk || nv) {
            printf("    FAIL  %-6s %s causal: earlier queries influence the gradients of later keys: changing Q and "
                   "dO at rows < %d changed %ld elements of dK and %ld of dV at rows >= %d: dK_j and dV_j may only sum "
                   "over queries i >= j: %s\n", c.name, dtype_name(p.dt), s, nk, nv, s,
                   nk && nv ? "P is not masked before both products use it (a query tile above the diagonal not "
                              "skipped, or the diagonal tile not masked)"
                   : nv     ? "the causal mask is missing from the P of dV += P^T dO (dK, through dS, has it)"
                            : "the causal mask is missing from the dS of dK += dS^T Q (dV has it)");
            ok = false;
        } else if (nq) {
            printf("    FAIL  %-6s %s causal: dQ rows depend on other query rows: changing Q and dO at rows < %d "
                   "changed %ld elements of dQ at rows >= %d%s: dQ_i needs only Q_i, dO_i (and D_i, L_i of its own "
                   "row i)\n", c.name, dtype_name(p.dt), s, nq, s, g_atomic ? " (beyond the tolerance)" : "");
            ok = false;
        }
    }
    p.Q = Q0; p.dO = dO0;
    upload(p, IN_Q); upload(p, IN_DO);
    run_forward(p);
    return ok;
}

/* ---- one case ---- */

/* A causal case failed: grade the same inputs without the mask. When that passes, the bug is in
 * the causal part, and saying so saves the student from searching the rest of the kernel. */
static void without_mask(const shape_case &c, dtype_t dt, uint64_t seed, const options &o) {
    shape_case nc = c;
    nc.causal = 0;
    Problem p;
    problem_init(p, nc, dt, seed);
    Outputs out;
    if (run_once(p, o.timeout_s, out) == ATTN_OK) {
        Reference R;
        compute_reference(p, seed, R);
        if (grade(p, R, out, true).pass)
            printf("      diagnosis: the same inputs without the causal mask pass: the bug is in the causal part: "
                   "which tiles are skipped (a K/V block needs every query tile from the one holding its first key "
                   "on; a query tile every key tile up to the one holding its last row), which tiles get the "
                   "element mask (key > row), and that every product uses the masked P\n");
    }
    problem_free(p);
}

static int grade_case(const shape_case &c, dtype_t dt, uint64_t seed, const options &o) {
    Problem p;
    problem_init(p, c, dt, seed);
    check_forward(p, seed);
    Outputs o1;
    int rc = run_once(p, o.timeout_s, o1);
    if (rc != ATTN_OK) { problem_free(p); report_entry_rc(rc, "attention_backward"); return rc; }
    Reference R;
    compute_reference(p, seed, R);
    Verdict v = grade(p, R, o1, false);
    bool ok = v.pass;
    std::string rerun_note;
    if (!rerun_check(p, R, o1, v.pass, o.timeout_s, rerun_note)) ok = false;
    if (!causal_checks(p, R, o1, seed, o.timeout_s)) ok = false;
    if (!v.pass && c.causal) without_mask(c, dt, seed, o);
    print_case_line(ok, c, dt,
                    v.note + "; " + rerun_note +
                        (R.slices.size() < (size_t)p.BH ? " (" + std::to_string(R.slices.size()) + " of " +
                                                              std::to_string(p.BH) + " slices graded, all checked written)"
                                                        : std::string()),
                    o.seed);
    problem_free(p);
    return ok ? ATTN_OK : -1;
}

/* ---- timing ---- */

static size_t g_free_at_start; /* device memory free before any case: the baseline of mem_bytes */

/* FLOPs of a backward pass as FlashAttention counts them: 2.5 x the forward's 4 B H N^2 d (five
 * N x N x d products against the forward's two), halved when causal. */
static double backward_flops(const shape_case &c) {
    return 2.5 * 4.0 * c.B * c.H * (double)c.N * c.N * c.d * (c.causal ? 0.5 : 1.0);
}

static run_timing time_shape(const shape_case &c, dtype_t dt, const options &o, const gpu_env &g, uint64_t seed) {
    size_t free1, total;
    Problem p;
    problem_init(p, c, dt, seed); /* O and L come from the float64 forward, outside the timing */
    Outputs out;
    int rc = run_once(p, o.timeout_s, out); /* also allocates any workspace the method keeps */
    if (rc != ATTN_OK) { problem_free(p); report_entry_rc(rc, "attention_backward"); exit(EXIT_NOT_IMPLEMENTED); }
    CUDA_CHECK(cudaMemGetInfo(&free1, &total));
    run_timing t;
    t.gbps = 0;
    /* even when only timing, an output nobody wrote is not a result */
    t.unwritten = 0;
    for (int g2 = 0; g2 < 3; ++g2)
        for (size_t i = 0; i < p.n; ++i) { int po; decode_value(out.g[g2].data(), i, dt, &po); t.unwritten += po; }
    if (t.unwritten)
        fprintf(stderr, "FAIL: %zu elements of dQ, dK and dV were not written on the timed shape\n", t.unwritten);
    const size_t guards = N_BUFFERS * 2 * GUARD_BYTES;
    t.mem = g_free_at_start > free1 + guards ? g_free_at_start - free1 - guards : 0;
    t.ms = time_launches(launch, &p, p.stream, o.warmup, o.reps, o.timeout_s, &g);
    t.tflops = backward_flops(c) / (t.ms * 1e-3) / 1e12;
    t.pct = 100.0 * t.tflops / gpu_peak(&g, dt);
    problem_free(p);
    return t;
}

int main(int argc, char **argv) {
    options o;
    g_atomic = (LESSON.flags & LESSON_ATOMIC_ACCUMULATION) != 0;
    if (int rc = runner_options(argc, argv, o, "lesson 05",
                                "This is a backward-pass lesson: it grades dQ, dK and dV of attention_backward (O and L come\n"
                                "from a float64 forward pass); TFLOP/s count 2.5 x the forward's 4 B H N^2 d, halved when causal.\n");
        rc >= 0)
        return rc;
    gpu_env g;
    g_free_at_start = runner_gpu_init(g, o);
    const dtype_t dt_default = (dtype_t)__builtin_ctz(LESSON.dtypes);
    const dtype_t dt_time = o.dtype >= 0 ? (dtype_t)o.dtype : dt_default;
    const shape_case bench = bench_shape(o);
    if (!(o.csv && o.bench_only))
        printf("Lesson %02d: %s\nbackward pass: dQ, dK, dV graded, attention_backward timed (O and L given)\n"
               "seed %llu (rerun with --seed %llu)\n", LESSON.number, LESSON.title,
               (unsigned long long)o.seed, (unsigned long long)o.seed);
    int passed = 0, total = 0;
    /* The grading line's wording is the one make fuzz reads (tests/mutants/fuzz.sh); the banner
     * above says "backward pass". Every backward lesson has causal masking: the matrix has the
     * causal edge cases its dependency tests need. */
    if (!o.bench_only) {
        if (int rc = grade_cases(o, bench, case_matrix(true), grade_case, "attention_backward",
                                 "check the causal mask (key j is visible to query i iff j <= i): which tiles are "
                                 "skipped (for a K/V block: the query tiles wholly above the diagonal), which get the "
                                 "element-wise mask, and that every product uses the masked P",
                                 "check the last, partial tiles: keys >= N and query rows >= N must add nothing (P = 0 "
                                 "there, or zero-filled tiles), rows >= N must not be read or written",
                                 &passed, &total);
            rc >= 0)
            return rc;
    }
    run_timing tm = {-1, 0, 0, 0, 0, 0};
    if (!o.check_only) {
        tm = time_shape(bench, dt_time, o, g, rng_mix(o.seed, 77));
        if (!(o.csv && o.bench_only))
            printf("Time (backward only, O and L given): %s B=%d H=%d N=%d d=%d%s: %.3f ms, %.2f TFLOP/s (2.5 x 4BHN^2d%s "
                   "/ time), %.1f%% of %s peak %.0f TFLOP/s (%s); device memory %.1f MiB\n", dtype_name(dt_time),
                   bench.B, bench.H, bench.N, bench.d, bench.causal ? " causal" : "", tm.ms, tm.tflops,
                   bench.causal ? " / 2" : "", tm.pct, dt_time == DTYPE_FP32 ? "fp32" : "tensor-core",
                   gpu_peak(&g, dt_time), g.peak_source, tm.mem / 1048576.0);
        if (LESSON.causal && !o.causal && !o.bench_only) {
            shape_case cz = bench;
            cz.causal = 1;
            print_causal_ratio(time_shape(cz, dt_time, o, g, rng_mix(o.seed, 78)), tm.ms);
        }
    }
    const bool ok = passed == total && tm.unwritten == 0;
    if (o.csv) print_csv_row(ok ? "pass" : "fail", passed, total, dt_time, bench, tm.ms, tm.tflops, tm.pct, tm.mem, -1);
    else if (!o.bench_only) printf("%s\n", ok ? "PASS" : "FAIL");
    return ok ? EXIT_PASS : EXIT_FAILED;
}

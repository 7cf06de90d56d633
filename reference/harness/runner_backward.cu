/* runner_backward.cu: the backward kind of the runner (runner_main.h), for every backward lesson
 * binary (lessons 10-11, and ./standard_backward): how attention_backward is set up, graded
 * against the float64 CPU backward and timed.
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
#include "runner_grade.h"
#include "runner_main.h"
extern "C" {
#include "cli.h"
#include "cpu_reference.h"
#include "diagnose.h"
#include "diagnose_bwd.h"
#include "grade.h"
#include "rng.h"
}

/* ---- the problem: inputs, outputs, arguments ---- */

enum { IN_Q, IN_K, IN_V, IN_O, IN_DO, IN_L, N_IN };
static const char *const IN_NAME[N_IN] = {"Q", "K", "V", "O", "dO", "L"};
static const int N_BUFFERS = N_IN + 3; /* guarded arrays per problem */

/* The float64 reference and the plain same-precision backward of the graded slices, and the
 * tolerances they set. The outputs are dQ, dK, dV in this order (BWD_DQ, BWD_DK, BWD_DV). */
struct Reference {
    std::vector<int> slices; /* graded (b, h) slices, ascending */
    graded_rows g;           /* every row of those slices: ref[k], plain[k] are [slices.size() * N * d] */
    tolerance tol[3];
    char tol_desc[3][200];
};

struct Problem : problem_core {
    int BH;
    size_t n;                       /* B*H*N*d */
    std::vector<float> Q, K, V, dO; /* the exact values stored on the device */
    guarded_buf in[N_IN];           /* Q, K, V, O, dO, L between NaN guards */
    attn_bwd_args args;
    Reference R;                    /* of the first graded run (grade), for the checks after it */
};

static Problem &bwd(problem_core &p) { return static_cast<Problem &>(p); }

/* dQ's partial sums are added with float atomics in a run-to-run order (attention.h): a re-run
 * is compared within the tolerance, not bit for bit. */
static bool atomic_dq() { return (LESSON.flags & LESSON_ATOMIC_ACCUMULATION) != 0; }

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

static int launch(problem_core *p) { return attention_backward(&bwd(*p).args); }

/* A problem of shape c in dtype dt: Q, K, V, dO from seed, O and L from the float64 forward.
 * Exits EXIT_OOM before anything is allocated when the shape is beyond the GPU's or the host's
 * memory. */
static Problem *problem_new(const shape_case &c, dtype_t dt, uint64_t seed) {
    Problem *pp = new Problem();
    Problem &p = *pp;
    p.c = c;
    p.dt = dt;
    p.BH = c.B * c.H;
    p.n = (size_t)c.B * c.H * c.N * c.d;
    p.guarded_arrays = N_BUFFERS;
    p.launch = launch;
    p.kernels = "the lesson's backward kernels";
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
    for (int g = 0; g < 3; ++g) add_output(p, BWD_NAME[g], dt, c.d);
    CUDA_CHECK(cudaStreamCreate(&p.stream));
    upload(p, IN_Q); upload(p, IN_K); upload(p, IN_V); upload(p, IN_DO);
    attn_bwd_args &a = p.args;
    a.B = c.B; a.H = c.H; a.N = c.N; a.d = c.d; a.causal = c.causal;
    a.scale = 1.0f / sqrtf((float)c.d);
    a.dtype = dt;
    a.Q = p.in[IN_Q].data; a.K = p.in[IN_K].data; a.V = p.in[IN_V].data;
    a.O = p.in[IN_O].data; a.dO = p.in[IN_DO].data; a.L = (const float *)p.in[IN_L].data;
    a.dQ = p.out[BWD_DQ].buf.data; a.dK = p.out[BWD_DK].buf.data; a.dV = p.out[BWD_DV].buf.data;
    a.stream = p.stream;
    run_forward(p);
    return pp;
}

static void release(problem_core *pc) {
    Problem &p = bwd(*pc);
    for (int k = 0; k < N_IN; ++k) guarded_free(&p.in[k]);
    free_outputs(p);
    CUDA_CHECK(cudaStreamDestroy(p.stream));
    delete &p;
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
            fprintf(stderr, "harness error: the runner's float64 forward pass (reference/harness/runner_forward_f64.cu) "
                    "disagrees with the CPU reference at b=%d h=%d row %d%s (L: GPU %.9g, CPU %.9g): the inputs "
                    "O and L handed to the lesson cannot be trusted; please report this\n", bh / c.H, bh % c.H, i,
                    col >= 0 ? " of O" : "", gl, L);
            exit(EXIT_CUDA_ERROR);
        }
    }
}

/* A graded case's problem has its forward pass checked (check_forward); a timed one does not. */
static problem_core *backward_alloc(const shape_case &c, dtype_t dt, uint64_t seed, bool graded) {
    Problem *p = problem_new(c, dt, seed);
    if (graded) check_forward(*p, seed);
    return p;
}

/* ---- the float64 reference and the tolerance ---- */

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

/* The references of the picked slices (attention_backward_slice_f64 and _lowp), and from them
 * each gradient's tolerance (bwd_tolerance: the FlashAttention rule on the plain backward's
 * error, scaled to the gradient's size). */
static void compute_reference(const Problem &p, uint64_t seed, Reference &R) {
    const shape_case &c = p.c;
    R.slices = pick_slices(p, seed);
    const size_t S = R.slices.size(), sl = (size_t)c.N * c.d;
    graded_rows &g = R.g;
    g.rows.clear();
    for (int bh : R.slices)
        for (int i = 0; i < c.N; ++i) g.rows.push_back({bh, i});
    for (int k = 0; k < 3; ++k) { g.ref[k].assign(S * sl, 0); g.plain[k].assign(S * sl, 0); }
    /* two tasks per slice, so that even a single big slice uses two cores */
#pragma omp parallel for schedule(dynamic, 1)
    for (long t = 0; t < (long)(2 * S); ++t) {
        const size_t k = t / 2, off = k * sl, at = (size_t)R.slices[k] * sl;
        if (t % 2 == 0)
            attention_backward_slice_f64(&p.Q[at], &p.K[at], &p.V[at], &p.dO[at], c.N, c.d, p.args.scale, c.causal,
                                         &g.ref[0][off], &g.ref[1][off], &g.ref[2][off]);
        else
            attention_backward_slice_lowp(&p.Q[at], &p.K[at], &p.V[at], &p.dO[at], c.N, c.d, p.args.scale, c.causal,
                                          p.dt, &g.plain[0][off], &g.plain[1][off], &g.plain[2][off]);
    }
    for (int k = 0; k < 3; ++k)
        R.tol[k] = bwd_tolerance(p.dt, plain_error(g, k), max_abs_ref(g, k), R.tol_desc[k], sizeof R.tol_desc[k]);
}

/* ---- the diagnosis across gradients ---- */

/* Cross-gradient facts of a failing run (diagnose_bwd.h), measured on the first graded slice
 * with a bad element. */
static void gather_facts(const Problem &p, const Reference &R, const run_result &r, const grade_report rep[3],
                         bwd_facts &f) {
    const shape_case &c = p.c;
    const size_t sl = (size_t)c.N * c.d;
    bwd_facts_init(&f);
    f.causal = c.causal;
    f.scale = p.args.scale;
    std::vector<double> got[3]; /* the graded slices' elements, decoded (NaN where poisoned) */
    for (int g = 0; g < 3; ++g) {
        f.bad[g] = rep[g].bad;
        f.unwritten[g] = rep[g].unwritten;
        f.nonfinite[g] = rep[g].nonfinite;
        got[g].resize(R.slices.size() * sl);
        for (size_t k = 0; k < R.slices.size(); ++k)
            for (size_t e = 0; e < sl; ++e) {
                int po;
                got[g][k * sl + e] = decode_value(r.out[g].data(), (size_t)R.slices[k] * sl + e, p.dt, &po);
            }
    }
    size_t ks = 0;
    for (size_t k = 0; k < R.slices.size(); ++k) {
        bool bad = false;
        for (int g = 0; g < 3 && !bad; ++g)
            for (size_t e = 0; e < sl && !bad; ++e)
                bad = grade_element(R.g.ref[g][k * sl + e], got[g][k * sl + e], 0, R.tol[g]) != ELEM_OK;
        if (bad) { ks = k; break; }
    }
    const size_t at = (size_t)R.slices[ks] * sl;
    const double *ref[3] = {&R.g.ref[0][ks * sl], &R.g.ref[1][ks * sl], &R.g.ref[2][ks * sl]};
    const double *gk[3] = {&got[0][ks * sl], &got[1][ks * sl], &got[2][ks * sl]};
    bwd_examine_slice(&p.Q[at], &p.K[at], &p.V[at], &p.dO[at], c.N, c.d, ref, gk, R.tol, &f);
}

/* The diagnosis line of a failing run: the writes outside the gradients when there are any (the
 * bad elements are their echo), else what the pattern across gradients and the hypotheses say
 * (diagnose_bwd); "" when they say nothing. */
static std::string backward_diagnosis(const Problem &p, const Reference &R, const run_result &r,
                                      const grade_report rep[3], const std::string &outside) {
    if (!outside.empty()) return "diagnosis: " + outside + "\n      ";
    bwd_facts f;
    gather_facts(p, R, r, rep, f);
    char buf[1024];
    diagnose_bwd(&f, buf, sizeof buf);
    return *buf ? std::string("diagnosis: ") + buf + "\n      " : std::string();
}

/* ---- grading one run ---- */

/* Per gradient: its count of bad elements, the tolerance and where they are, or "passes". */
static std::string backward_report(const Reference &R, const grade_report rep[3]) {
    std::string why;
    for (int g = 0; g < 3; ++g) {
        char buf[1200], err[160];
        if (rep[g].bad)
            snprintf(buf, sizeof buf, "%s: %ld of %ld checked elements bad (%.2f%%), %s; %s%s%s\n      ",
                     BWD_NAME[g], rep[g].bad, rep[g].checked, 100.0 * rep[g].bad / std::max(1L, rep[g].checked),
                     grade_max_abs_text(&rep[g], err, sizeof err), R.tol_desc[g], rep[g].summary[0] ? "\n        where: " : "", rep[g].summary);
        else
            snprintf(buf, sizeof buf, "%s: passes (max abs err %.2g)\n      ", BWD_NAME[g], rep[g].max_abs);
        why += buf;
    }
    return why;
}

/* Grades run r against R (every element of the graded slices, "written" everywhere); prints the
 * FAIL block unless quiet. */
static verdict grade_run(const Problem &p, const Reference &R, const run_result &r, bool quiet) {
    grade_report rep[3];
    for (int g = 0; g < 3; ++g) {
        grader *gr = check_output(p, g, R.g, r.out[g], R.tol[g]);
        /* The forward's "every row is wrong: check m, l, ..." points the wrong way here. */
        grader_finish_ex(gr, &rep[g], "every row is wrong");
        grader_free(gr);
    }
    const std::string outside = outside_writes(p);
    verdict v = {outside.empty() && rep[0].bad == 0 && rep[1].bad == 0 && rep[2].bad == 0, ""};
    if (v.pass) {
        char buf[400];
        snprintf(buf, sizeof buf, "max err dQ %.2g, dK %.2g, dV %.2g (dQ: %s)", rep[0].max_abs, rep[1].max_abs,
                 rep[2].max_abs, R.tol_desc[0]);
        v.detail = buf;
        return v;
    }
    if (quiet) return v;
    std::string why = backward_diagnosis(p, R, r, rep, outside) + backward_report(R, rep);
    while (!why.empty() && why.back() == ' ') why.pop_back();
    print_fail_block(p, true, why, rep);
    return v;
}

/* The kind's grade: the references of this case (kept in p.R for the checks after it), then the
 * first run. */
static verdict grade(problem_core &pc, const run_result &r, uint64_t seed) {
    Problem &p = bwd(pc);
    compute_reference(p, seed, p.R);
    return grade_run(p, p.R, r, false);
}

/* ---- the checks that take more runs ---- */

/* Re-runs on the same inputs: dK and dV bitwise; dQ bitwise too unless the lesson sums it with
 * atomics, then within the tolerance, and the re-run must pass grading as well. */
static bool rerun_check(Problem &p, const run_result &r1, bool first_passed, double timeout_s, std::string &note) {
    const shape_case &c = p.c;
    const Reference &R = p.R;
    const bool atomic = atomic_dq();
    run_result r2;
    run_once(p, timeout_s, r2);
    long nd[3];
    double maxd = 0;
    for (int g = 0; g < 3; ++g)
        nd[g] = count_differences(p, g, r1.out[g], r2.out[g], 0, c.N, g == BWD_DQ && atomic, R.tol[g],
                                  g == BWD_DQ ? &maxd : NULL);
    const bool outside = !outside_writes(p).empty();
    if (nd[0] + nd[1] + nd[2]) {
        printf("    FAIL  %-6s %s%s: race suspected: two launches on the same input differ in %ld elements of dQ%s, "
               "%ld of dK, %ld of dV (%s)\n", c.name, dtype_name(p.dt), c.causal ? " causal" : "", nd[0],
               atomic ? " (beyond the tolerance)" : "", nd[1], nd[2],
               outside ? "blocks that write outside their rows (above) race with the blocks that own those rows"
                       : atomic && nd[0] && !nd[1] && !nd[2]
                             ? "dQ's atomics lose or double updates, or its accumulator is not zeroed before "
                               "every call (a re-run then adds onto the last one's sums)? every partial dQ must be "
                               "added exactly once, into zeros"
                             : "a missing __syncthreads()? `make sanitize-lessonN` runs racecheck");
        return false;
    }
    if (atomic && first_passed) {
        if (!grade_run(p, R, r2, true).pass) {
            printf("    FAIL  %-6s %s%s: the re-run on the same inputs fails grading (the first run passed): dQ's "
                   "atomic accumulation loses updates now and then, or a race\n", c.name, dtype_name(p.dt),
                   c.causal ? " causal" : "");
            grade_run(p, R, r2, false);
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
static bool causal_checks(Problem &p, const run_result &r1, uint64_t seed, double timeout_s) {
    const shape_case &c = p.c;
    if (!c.causal || c.N < 2) return true;
    const Reference &R = p.R;
    const bool atomic = atomic_dq();
    const std::vector<float> K0 = p.K, V0 = p.V, Q0 = p.Q, dO0 = p.dO;
    run_result r2;
    bool ok = true;
    const int s1[3] = {c.N - 1, std::min(c.N - 1, c.N / 2 + 1), 1};
    for (int k = 0; k < 3 && ok; ++k) {
        const int s = s1[k];
        if (k > 0 && s >= s1[k - 1]) continue;
        random_slices(p.K, p.BH, c.N, c.d, s, c.N, 1.f, p.dt, rng_mix(seed, 10 + 2 * k));
        random_slices(p.V, p.BH, c.N, c.d, s, c.N, 1.f, p.dt, rng_mix(seed, 11 + 2 * k));
        upload(p, IN_K); upload(p, IN_V);
        run_forward(p);
        run_once(p, timeout_s, r2);
        const long n = count_differences(p, BWD_DQ, r1.out[BWD_DQ], r2.out[BWD_DQ], 0, s, atomic, R.tol[BWD_DQ], NULL);
        if (n) {
            printf("    FAIL  %-6s %s causal: future keys influence dQ: changing K and V at positions >= %d changed "
                   "%ld elements of dQ rows < %d%s: dQ_i may only sum over keys j <= i: a K/V tile above the "
                   "diagonal not skipped, or the diagonal tile not masked, in dQ += dS K\n", c.name, dtype_name(p.dt),
                   s, n, s, atomic ? " (beyond the tolerance)" : "");
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
        run_once(p, timeout_s, r2);
        const long nk = count_differences(p, BWD_DK, r1.out[BWD_DK], r2.out[BWD_DK], s, c.N, false, R.tol[BWD_DK], NULL);
        const long nv = count_differences(p, BWD_DV, r1.out[BWD_DV], r2.out[BWD_DV], s, c.N, false, R.tol[BWD_DV], NULL);
        const long nq = count_differences(p, BWD_DQ, r1.out[BWD_DQ], r2.out[BWD_DQ], s, c.N, atomic, R.tol[BWD_DQ], NULL);
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
                   "row i)\n", c.name, dtype_name(p.dt), s, nq, s, atomic ? " (beyond the tolerance)" : "");
            ok = false;
        }
    }
    p.Q = Q0; p.dO = dO0;
    upload(p, IN_Q); upload(p, IN_DO);
    run_forward(p);
    return ok;
}

/* A causal case failed: grade the same inputs without the mask. When that passes, the bug is in
 * the causal part, and saying so saves the student from searching the rest of the kernel. */
static void without_mask(const shape_case &c, dtype_t dt, uint64_t seed, const options &o) {
    shape_case nc = c;
    nc.causal = 0;
    Problem *p = problem_new(nc, dt, seed);
    run_result r;
    if (run_once(*p, o.timeout_s, r) == ATTN_OK) {
        Reference R;
        compute_reference(*p, seed, R);
        if (grade_run(*p, R, r, true).pass)
            printf("      diagnosis: the same inputs without the causal mask pass: the bug is in the causal part: "
                   "which tiles are skipped (a K/V block needs every query tile from the one holding its first key "
                   "on; a query tile every key tile up to the one holding its last row), which tiles get the "
                   "element mask (key > row), and that every product uses the masked P\n");
    }
    release(p);
}

/* The re-run, the causal tests and, for a failed causal case, the same inputs without the
 * mask; the pass line adds the re-run's note, that the causal tests held, and how many slices
 * were graded. */
static bool more_checks(problem_core &pc, verdict &v, const run_result &r1, uint64_t seed, const options &o) {
    Problem &p = bwd(pc);
    std::string rerun_note;
    bool ok = rerun_check(p, r1, v.pass, o.timeout_s, rerun_note);
    const bool deps = causal_checks(p, r1, seed, o.timeout_s);
    if (!deps) ok = false;
    if (!v.pass && p.c.causal) without_mask(p.c, p.dt, seed, o);
    v.detail += "; " + rerun_note;
    if (deps && p.c.causal && p.c.N >= 2)  // say that they ran: a passing line otherwise looks the same
        v.detail += atomic_dq() ? "; causal dependencies hold (dK, dV bitwise, dQ within the tolerance)"
                                : "; causal dependencies hold (bitwise)";
    if (p.R.slices.size() < (size_t)p.BH)
        v.detail += " (" + std::to_string(p.R.slices.size()) + " of " + std::to_string(p.BH) +
                    " slices graded, all checked written)";
    return ok;
}

/* ---- timing ---- */

/* FLOPs of a backward pass as FlashAttention counts them: 2.5 x the forward's 4 B H N^2 d (five
 * N x N x d products against the forward's two), halved when causal. */
static double backward_flops(const problem_core &p) {
    const shape_case &c = p.c;
    return 2.5 * 4.0 * c.B * c.H * (double)c.N * c.N * c.d * (c.causal ? 0.5 : 1.0);
}

static void backward_print_time(const run_timing &tm, const shape_case &bench, dtype_t dt, const options &,
                                const gpu_env &g) {
    printf("Time (backward only, O and L given): %s B=%d H=%d N=%d d=%d%s: %.3f ms, %.2f TFLOP/s (2.5 x 4BHN^2d%s "
           "/ time), %.1f%% of %s peak %.0f TFLOP/s (%s); device memory %.1f MiB\n", dtype_name(dt), bench.B,
           bench.H, bench.N, bench.d, bench.causal ? " causal" : "", tm.ms, tm.tflops, bench.causal ? " / 2" : "",
           tm.pct, dt == DTYPE_FP32 ? "fp32" : "tensor-core", gpu_peak(&g, dt), g.peak_source, tm.mem / 1048576.0);
}

/* ---- the kind ---- */

/* The grading line's wording is the one make fuzz reads (tests/mutants/fuzz.sh); the banner
 * says "backward pass". Every backward lesson has causal masking: the matrix has the causal edge
 * cases its dependency tests need. */
static const runner_kind BACKWARD = {
    "attention_backward",
    "This is a backward-pass lesson: it grades dQ, dK and dV of attention_backward (O and L come\n"
    "from a float64 forward pass); TFLOP/s count 2.5 x the forward's 4 B H N^2 d, halved when causal.\n",
    "backward pass: dQ, dK, dV graded, attention_backward timed (O and L given)\n",
    true,
    "check the causal mask (key j is visible to query i iff j <= i): which tiles are skipped (for a K/V block: "
    "the query tiles wholly above the diagonal), which get the element-wise mask, and that every product uses the "
    "masked P",
    "check the last, partial tiles: keys >= N and query rows >= N must add nothing (P = 0 there, or zero-filled "
    "tiles), rows >= N must not be read or written",
    backward_alloc, release, grade, more_checks,
    backward_flops, NULL, backward_print_time, true, false};

const runner_kind &lesson_runner_kind() { return BACKWARD; }

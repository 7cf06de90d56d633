/* tests/unit/test_backward.c: the backward grader's pure parts (reference/harness/diagnose_bwd.c), no GPU.
 *   - the tolerance rule's numbers;
 *   - the hypothesis references: BWD_EXACT is the float64 backward of cpu_reference_bwd.c, and each
 *     hypothesis changes exactly the gradients it should;
 *   - end to end on a simulated fp32 kernel (Algorithm 2 in float, as lesson 10 computes it: O and
 *     L rounded to fp32, P = exp2(S scale log2e - L log2e)): the right kernel passes the fp32 rule,
 *     x30 logits included, and each planted bug fails with the diagnosis that names it. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "cpu_reference.h"
#include "diagnose_bwd.h"
#include "grade.h"
#include "rng.h"

static void fill(float *x, size_t n, double s, uint64_t seed) {
    rng_t r;
    rng_seed(&r, seed);
    for (size_t i = 0; i < n; ++i) x[i] = (float)(rng_normal(&r) * s);
}

Test(backward_tolerance, rules) {
    char desc[200];
    tolerance t = bwd_tolerance(DTYPE_FP16, 0.01, 5.0, desc, sizeof desc);
    cr_assert_float_eq(t.atol, 2 * 0.01 + 1e-4 * 5.0, 1e-12);
    cr_assert_eq(t.rtol, 0);
    cr_assert(strstr(desc, "2 x 0.01") != NULL, "%s", desc);
    t = bwd_tolerance(DTYPE_BF16, 0.01, 0.5, NULL, 0);
    cr_assert_float_eq(t.atol, 2 * 0.01 + 8e-4, 1e-12); /* max(1, max|ref|) = 1 */
    t = bwd_tolerance(DTYPE_FP32, 1e-6, 3.0, desc, sizeof desc);
    cr_assert_float_eq(t.atol, 3e-6 + 3e-5, 1e-15);
    cr_assert_float_eq(t.rtol, 1e-4, 1e-15);
    /* NaN never passes */
    cr_assert_eq(grade_element(1.0, NAN, 0, t), ELEM_NONFINITE);
}

/* One random slice. */
typedef struct { int N, d, causal; double scale; float *Q, *K, *V, *dO; } slice;

static slice make_slice(int N, int d, int causal, double qscale, uint64_t seed) {
    slice s = {N, d, causal, 1.0 / sqrt((double)d), NULL, NULL, NULL, NULL};
    const size_t n = (size_t)N * d;
    s.Q = malloc(4 * n); s.K = malloc(4 * n); s.V = malloc(4 * n); s.dO = malloc(4 * n);
    fill(s.Q, n, qscale, seed + 1); fill(s.K, n, 1, seed + 2); fill(s.V, n, 1, seed + 3); fill(s.dO, n, 1, seed + 4);
    return s;
}
static void free_slice(slice *s) { free(s->Q); free(s->K); free(s->V); free(s->dO); }

static double max_rel_diff(const double *a, const double *b, size_t n) {
    double big = 0, e = 0;
    for (size_t i = 0; i < n; ++i) { big = fmax(big, fabs(b[i])); e = fmax(e, fabs(a[i] - b[i])); }
    return e / fmax(big, 1e-300);
}

Test(backward_variants, exact_is_the_reference_and_each_hypothesis_changes_what_it_should) {
    for (int causal = 0; causal < 2; ++causal) {
        slice s = make_slice(37, 16, causal, 1, 7 + causal);
        const size_t n = 37 * 16;
        double *r = malloc(sizeof(double) * 3 * n), *h = malloc(sizeof(double) * 3 * n);
        attention_backward_slice_f64(s.Q, s.K, s.V, s.dO, s.N, s.d, s.scale, causal, r, r + n, r + 2 * n);
        attention_backward_slice_variant(s.Q, s.K, s.V, s.dO, s.N, s.d, s.scale, causal, BWD_EXACT, h, h + n, h + 2 * n);
        for (int g = 0; g < 3; ++g) cr_assert_lt(max_rel_diff(h + g * n, r + g * n, n), 1e-10, "gradient %d", g);
        attention_backward_slice_variant(s.Q, s.K, s.V, s.dO, s.N, s.d, s.scale, causal, BWD_NO_D, h, h + n, h + 2 * n);
        cr_assert_lt(max_rel_diff(h + 2 * n, r + 2 * n, n), 1e-10, "D does not enter dV");
        cr_assert_gt(max_rel_diff(h, r, n), 1e-2, "D enters dQ");
        cr_assert_gt(max_rel_diff(h + n, r + n, n), 1e-2, "D enters dK");
        if (causal) {
            attention_backward_slice_variant(s.Q, s.K, s.V, s.dO, s.N, s.d, s.scale, 1, BWD_DV_UNMASKED, h, h + n, h + 2 * n);
            cr_assert_lt(max_rel_diff(h, r, n), 1e-10);
            cr_assert_gt(max_rel_diff(h + 2 * n, r + 2 * n, n), 1e-2);
        }
        free(r); free(h); free_slice(&s);
    }
}

Test(backward_fit, fit_and_factor) {
    double ref[100], got[100];
    for (int i = 0; i < 100; ++i) { ref[i] = sin(i + 1.0); got[i] = ref[i] * 8.0; }
    cr_assert_float_eq(bwd_factor(got, ref, 100), 8.0, 1e-9);
    tolerance t = {1e-6, 0};
    cr_assert_float_eq(bwd_fit(ref, ref, 100, t, 1), 1.0, 1e-12);
    cr_assert_float_eq(bwd_fit(got, ref, 100, t, 1), 0.0, 1e-12);
    got[3] = NAN;
    cr_assert_float_eq(bwd_fit(got, got, 100, t, 1), 0.99, 1e-12);
    for (int i = 0; i < 100; ++i) got[i] = ref[i] + 0.3 * cos(7.0 * i); /* no constant factor */
    cr_assert(isnan(bwd_factor(got, ref, 100)));
    for (int i = 0; i < 100; ++i) got[i] = i < 95 ? ref[i] : -ref[i]; /* right but for a few rows */
    cr_assert(isnan(bwd_factor(got, ref, 100)), "a median of 1 is no factor");
    for (int i = 0; i < 100; ++i) got[i] = i < 95 ? 0 : ref[i];
    cr_assert_float_eq(bwd_factor(got, ref, 100), 0.0, 1e-12, "mostly zero: the factor 0");
}

/* ---- a simulated fp32 kernel ---- */

typedef enum { BUG_NONE, BUG_NO_D, BUG_L_BASE2, BUG_S_UNSCALED, BUG_DV_UNMASKED, BUG_SWAP, BUG_DS_NO_SCALE, BUG_DK_ROWS, BUG_DV_SCALED,
              BUG_DQ_LAST_ROW, BUG_PAIRS_SKIPPED, BUG_P_ZERO } bug;

/* Algorithm 2 in float, the way lesson 10 computes it, with one bug planted. */
static void sim_kernel(const slice *s, bug b, double *dQ, double *dK, double *dV) {
    const int N = s->N, d = s->d;
    const size_t n = (size_t)N * d;
    float *O = malloc(4 * n), *L = malloc(4 * N), *Dv = malloc(4 * N);
    float *fq = calloc(n, 4), *fk = calloc(n, 4), *fv = calloc(n, 4);
    double *o = malloc(sizeof(double) * d);
    for (int i = 0; i < N; ++i) {
        double l;
        attention_row_f64(s->Q, s->K, s->V, N, d, i, s->scale, s->causal, o, &l);
        for (int c = 0; c < d; ++c) O[(size_t)i * d + c] = (float)o[c];
        L[i] = (float)l;
        float acc = 0;
        for (int c = 0; c < d; ++c) acc = fmaf(s->dO[(size_t)i * d + c], O[(size_t)i * d + c], acc);
        Dv[i] = b == BUG_NO_D ? 0.f : acc;
    }
    const float log2e = 1.4426950408889634f, scale = (float)s->scale, scale_log2 = scale * log2e;
    for (int i = 0; i < N; ++i) {
        const float L2 = b == BUG_L_BASE2 ? L[i] : L[i] * log2e;
        for (int j = 0; j < N; ++j) {
            /* a block of 20 keys that never visits the first 32 queries (causal: the last 20) */
            if (b == BUG_PAIRS_SKIPPED && (s->causal ? i >= N - 20 && j < 20 : i < 32 && j >= N - 20)) continue;
            float sc = 0, dp = 0;
            for (int c = 0; c < d; ++c) {
                sc = fmaf(s->Q[(size_t)i * d + c], s->K[(size_t)j * d + c], sc);
                dp = fmaf(s->dO[(size_t)i * d + c], s->V[(size_t)j * d + c], dp);
            }
            const float e = exp2f(sc * (b == BUG_S_UNSCALED ? log2e : scale_log2) - L2);
            const int masked = s->causal && j > i;
            const float p = masked || b == BUG_P_ZERO ? 0.f : e, pv = (b == BUG_DV_UNMASKED ? e : p) * (b == BUG_DV_SCALED ? scale : 1.f);
            const float ds = p * (dp - Dv[i]) * (b == BUG_DS_NO_SCALE ? 1.f : scale);
            const int jk = b == BUG_DK_ROWS ? (j + 1) % N : j; /* dK written to the wrong key row */
            for (int c = 0; c < d; ++c) {
                fv[(size_t)j * d + c] = fmaf(pv, s->dO[(size_t)i * d + c], fv[(size_t)j * d + c]);
                if (!(b == BUG_DQ_LAST_ROW && i == N - 1 && j == 0)) /* the last query misses key 0 */
                    fq[(size_t)i * d + c] = fmaf(ds, s->K[(size_t)j * d + c], fq[(size_t)i * d + c]);
                fk[(size_t)jk * d + c] = fmaf(ds, s->Q[(size_t)i * d + c], fk[(size_t)jk * d + c]);
            }
        }
    }
    for (size_t k = 0; k < n; ++k) {
        dQ[k] = fq[k];
        dK[k] = b == BUG_SWAP ? fv[k] : fk[k];
        dV[k] = b == BUG_SWAP ? fk[k] : fv[k];
    }
    free(O); free(L); free(Dv); free(fq); free(fk); free(fv); free(o);
}

/* Grades the simulated kernel with the runner's rule and returns the diagnosis ("" = passes). */
static void grade_sim(const slice *s, bug b, char *why, size_t cap, long bad_out[3]) {
    const int N = s->N, d = s->d;
    const size_t n = (size_t)N * d;
    double *ref = malloc(sizeof(double) * 3 * n), *pl = malloc(sizeof(double) * 3 * n), *got = malloc(sizeof(double) * 3 * n);
    attention_backward_slice_f64(s->Q, s->K, s->V, s->dO, N, d, s->scale, s->causal, ref, ref + n, ref + 2 * n);
    attention_backward_slice_lowp(s->Q, s->K, s->V, s->dO, N, d, (float)s->scale, s->causal, DTYPE_FP32, pl, pl + n, pl + 2 * n);
    sim_kernel(s, b, got, got + n, got + 2 * n);
    bwd_facts f;
    bwd_facts_init(&f);
    f.causal = s->causal;
    f.scale = s->scale;
    tolerance tol[3];
    for (int g = 0; g < 3; ++g) {
        double e = 0, big = 0;
        for (size_t k = 0; k < n; ++k) { e = fmax(e, fabs(pl[g * n + k] - ref[g * n + k])); big = fmax(big, fabs(ref[g * n + k])); }
        tol[g] = bwd_tolerance(DTYPE_FP32, e, big, NULL, 0);
        for (size_t k = 0; k < n; ++k) {
            const elem_status st = grade_element(ref[g * n + k], got[g * n + k], 0, tol[g]);
            f.bad[g] += st != ELEM_OK;
            f.nonfinite[g] += st == ELEM_NONFINITE;
        }
        bad_out[g] = f.bad[g];
    }
    const double *r3[3] = {ref, ref + n, ref + 2 * n}, *g3[3] = {got, got + n, got + 2 * n};
    bwd_examine_slice(s->Q, s->K, s->V, s->dO, N, d, r3, g3, tol, &f);
    diagnose_bwd(&f, why, cap);
    free(ref); free(pl); free(got);
}

static void expect_diagnosis(int N, int d, int causal, double qscale, bug b, const char *want) {
    slice s = make_slice(N, d, causal, qscale, 100 + b);
    char why[1024];
    long bad[3];
    grade_sim(&s, b, why, sizeof why, bad);
    if (b == BUG_NONE) {
        cr_assert(bad[0] == 0 && bad[1] == 0 && bad[2] == 0,
                  "a right fp32 kernel fails the fp32 rule (N=%d d=%d causal=%d x%g): bad dQ %ld, dK %ld, dV %ld", N, d,
                  causal, qscale, bad[0], bad[1], bad[2]);
    } else {
        cr_assert(bad[0] + bad[1] + bad[2] > 0, "bug %d passes", b);
        cr_assert(strstr(why, want) != NULL, "bug %d: expected \"%s\" in the diagnosis, got \"%s\"", b, want, why);
    }
    free_slice(&s);
}

Test(backward_sim, right_kernel_passes_fp32_rule) {
    expect_diagnosis(70, 64, 0, 1, BUG_NONE, "");
    expect_diagnosis(70, 64, 1, 1, BUG_NONE, "");
    expect_diagnosis(90, 64, 0, 30, BUG_NONE, "");
    expect_diagnosis(90, 32, 1, 30, BUG_NONE, "");
}

Test(backward_sim, bugs_are_named) {
    expect_diagnosis(60, 32, 0, 1, BUG_NO_D, "dQ and dK match a backward whose dS has no -D term");
    expect_diagnosis(60, 32, 1, 1, BUG_L_BASE2, "they match P = exp(S - L ln 2)");
    expect_diagnosis(60, 32, 0, 1, BUG_S_UNSCALED, "they match P = exp(Q K^T - L)");
    expect_diagnosis(60, 32, 1, 1, BUG_DV_UNMASKED, "causal mask missing from dV");
    expect_diagnosis(60, 32, 0, 1, BUG_SWAP, "dK and dV are swapped");
    expect_diagnosis(60, 32, 0, 1, BUG_DS_NO_SCALE, "the softmax scale is missing");
    expect_diagnosis(60, 32, 0, 1, BUG_DK_ROWS, "dQ and dV pass, so P and dS are right; dK is wrong");
    expect_diagnosis(60, 32, 1, 1, BUG_DV_SCALED, "dV = P^T dO takes no softmax scale");
}

/* Most of dQ right: its median ratio to the reference is 1, which is no "constant factor". */
Test(backward_sim, a_few_wrong_rows_are_no_factor) {
    expect_diagnosis(60, 32, 0, 1, BUG_DQ_LAST_ROW, "dK and dV pass, so P and dS are right; dQ is wrong");
}

/* A loop bound that drops (query tile, K/V tile) pairs: wrong rows in all three gradients, but
 * P is right; the rows that are wrong say which pairs. */
Test(backward_sim, skipped_tile_pairs_are_named) {
    expect_diagnosis(60, 32, 0, 1, BUG_PAIRS_SKIPPED, "among the 32 rows where dQ is wrong and j among the 20 rows");
    expect_diagnosis(60, 32, 1, 1, BUG_PAIRS_SKIPPED, "among the 20 rows where dQ is wrong and j among the 20 rows");
}

Test(backward_sim, zero_p_is_named_before_skipped_pairs) {
    /* P never computed: every gradient is zero, which a backward that skips every pair also gives */
    expect_diagnosis(60, 32, 0, 1, BUG_P_ZERO, "dQ, dK and dV are all zero on most elements");
    expect_diagnosis(60, 32, 1, 1, BUG_P_ZERO, "dQ, dK and dV are all zero on most elements");
}

Test(backward_diagnose, zero_gradient) {
    bwd_facts f;
    char out[600];
    bwd_facts_init(&f);
    f.scale = 0.125;
    f.bad[BWD_DQ] = 5;
    f.factor[BWD_DQ] = 0;
    diagnose_bwd(&f, out, sizeof out);
    cr_assert(strstr(out, "dQ is zero on most elements") == out, "%s", out);
}

Test(backward_diagnose, patterns_and_silence) {
    bwd_facts f;
    char out[600];
    bwd_facts_init(&f);
    diagnose_bwd(&f, out, sizeof out);
    cr_assert_str_empty(out, "nothing bad, nothing said");
    f.bad[BWD_DQ] = f.bad[BWD_DK] = 5;
    diagnose_bwd(&f, out, sizeof out);
    cr_assert(strstr(out, "dV passes, so P is right") == out, "%s", out);
    f.bad[BWD_DV] = 5;
    diagnose_bwd(&f, out, sizeof out);
    cr_assert(strstr(out, "all three gradients are wrong") == out, "%s", out);
    f.unwritten[BWD_DK] = 1; /* the grader's "not written" says more */
    diagnose_bwd(&f, out, sizeof out);
    cr_assert_str_empty(out);
}

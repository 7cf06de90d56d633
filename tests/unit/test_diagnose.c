/* The diagnoses for one of O and L wrong (diagnose.h) and for writes outside an output, on
 * synthetic rows built the way each bug builds them; and the backward CPU references. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "cpu_reference.h"
#include "diagnose.h"
#include "grade.h"
#include "rng.h"

#define NROWS 200
static const double SCALE = 0.125;

/* Rows with a plausible m and l, and the kernel's L from f(m, log l). */
static void l_rows(l_row *r, double (*f)(double m, double logl), uint64_t seed) {
    rng_t g;
    rng_seed(&g, seed);
    for (int k = 0; k < NROWS; ++k) {
        double m = 0.5 + rng_uniform(&g) * 3, logl = log(1 + rng_uniform(&g) * 900);
        r[k] = (l_row){m + logl, f(m, logl), m, SCALE};
    }
}
static double base2(double m, double logl) { return (m + logl) / log(2.0); }
static double no_m(double m, double logl) { (void)m; return logl; }
static double no_log_l(double m, double logl) { (void)logl; return m; }
static double unscaled(double m, double logl) { return m / SCALE + logl; }
static double garbage(double m, double logl) { return sin(7 * m) + cos(5 * logl); }

static void expect_L(double (*f)(double, double), const char *needle) {
    l_row r[NROWS];
    char out[1024];
    l_rows(r, f, 7);
    diagnose_L(r, NROWS, out, sizeof out);
    cr_assert(strstr(out, "O passes; L (logsumexp) is wrong") != NULL, "%s", out);
    cr_assert(strstr(out, needle) != NULL, "expected \"%s\" in: %s", needle, out);
}

Test(diagnose, L_base2) { expect_L(base2, "L is in base 2"); }
Test(diagnose, L_base2_shows_ratio) { expect_L(base2, "reference = 1.443"); }
Test(diagnose, L_without_m) { expect_L(no_m, "L = log(l) without the row max"); }
Test(diagnose, L_without_log_l) { expect_L(no_log_l, "L = m without log(l)"); }
Test(diagnose, L_m_unscaled) { expect_L(unscaled, "not multiplied by the softmax scale"); }
Test(diagnose, L_other_gets_the_usual_causes) { expect_L(garbage, "how L is formed at the end"); }

Test(diagnose, L_one_lane_partial_sum) {
    /* l of one lane of 4: about a quarter of the row sum, give or take */
    l_row r[NROWS];
    rng_t g;
    rng_seed(&g, 3);
    for (int k = 0; k < NROWS; ++k) {
        double m = rng_uniform(&g), l = 50 + 900 * rng_uniform(&g), share = 0.22 + 0.06 * rng_uniform(&g);
        r[k] = (l_row){m + log(l), m + log(l * share), m, SCALE};
    }
    char out[1024];
    diagnose_L(r, NROWS, out, sizeof out);
    cr_assert(strstr(out, "4 lanes") != NULL, "%s", out);
}

Test(diagnose, L_single_key_rows_name_S) {
    /* one key per row (N = 1): l = 1, L = the scaled score; a wrong S moves L and not O */
    l_row r[NROWS];
    rng_t g;
    rng_seed(&g, 5);
    for (int k = 0; k < NROWS; ++k) {
        double s = rng_normal(&g);
        r[k] = (l_row){s, s * 0.8 - 0.2, s, SCALE};
    }
    char out[1024];
    diagnose_L(r, NROWS, out, sizeof out);
    cr_assert(strstr(out, "single key") != NULL && strstr(out, "S = Q K^T is wrong") != NULL, "%s", out);
}

Test(diagnose, L_near_constant_counts_its_rows) {
    /* l off by a factor 1.5 on every row: the sentence gives how many rows share the offset */
    l_row r[NROWS];
    rng_t g;
    rng_seed(&g, 9);
    for (int k = 0; k < NROWS; ++k) {
        double m = rng_uniform(&g), l = 50 + 900 * rng_uniform(&g);
        r[k] = (l_row){m + log(l), m + log(l * 1.5), m, SCALE};
    }
    char out[1024];
    diagnose_L(r, NROWS, out, sizeof out);
    cr_assert(strstr(out, "near-constant") != NULL && strstr(out, "on 200 of the 200 rows") != NULL, "%s", out);
}

/* O rows: reference values, the kernel's O = factor(row) x reference. */
static void expect_O(double (*factor)(double l, int k), const char *needle) {
    static double ref[NROWS][16], got[NROWS][16];
    o_row r[NROWS];
    rng_t g;
    rng_seed(&g, 11);
    for (int k = 0; k < NROWS; ++k) {
        double l = 2 + 100 * rng_uniform(&g);
        for (int c = 0; c < 16; ++c) {
            ref[k][c] = rng_normal(&g);
            got[k][c] = factor(l, k) * ref[k][c];
        }
        if (factor(l, k) == 0) /* "values themselves wrong": scramble */
            for (int c = 0; c < 16; ++c) got[k][c] = rng_normal(&g);
        r[k] = (o_row){ref[k], got[k], 16, l};
    }
    char out[1024];
    diagnose_O(r, NROWS, out, sizeof out);
    cr_assert(strstr(out, "L passes (so m and l are right); O is wrong") != NULL, "%s", out);
    cr_assert(strstr(out, needle) != NULL, "expected \"%s\" in: %s", needle, out);
}
static double times_l(double l, int k) { (void)k; return l; }
static double over_l(double l, int k) { (void)k; return 1 / l; }
static double four(double l, int k) { (void)l; (void)k; return 4.0; }
static double scrambled(double l, int k) { (void)l; (void)k; return 0.0; }
static double per_row(double l, int k) { (void)l; return 1.5 + (k % 7); }

Test(diagnose, O_not_divided_by_l) { expect_O(times_l, "never divided by l"); }
Test(diagnose, O_divided_twice) { expect_O(over_l, "divided by l twice"); }
Test(diagnose, O_one_lane_l) { expect_O(four, "one lane's partial l"); }
Test(diagnose, O_values_wrong) { expect_O(scrambled, "not by a factor per row"); }
Test(diagnose, O_factor_changes) { expect_O(per_row, "changes from row to row"); }

Test(diagnose, write_past_the_end_names_the_row_guard) {
    char out[1024];
    /* B=2, H=3, N=77, d=64: row 77 of the last slice, all 64 columns */
    describe_outside(out, sizeof out, "O", 0, 64, 0, 63, -1, -1, 2, 3, 77, 64);
    cr_assert(strstr(out, "wrote outside O: 64 elements after the end") != NULL, "%s", out);
    cr_assert(strstr(out, "rows 77..77") != NULL, "%s", out);
    cr_assert(strstr(out, "row 77 of head h is row 0 of head h+1") != NULL, "%s", out);
    cr_assert(strstr(out, "row < N guard") != NULL, "%s", out);
}

Test(diagnose, write_before_the_start) {
    char out[1024];
    describe_outside(out, sizeof out, "L", 3, 0, -1, -1, 1, 3, 1, 1, 10, 1);
    cr_assert(strstr(out, "wrote outside L: 3 element(s) before the start") != NULL, "%s", out);
}

Test(diagnose, nothing_outside_is_silent) {
    char out[64];
    describe_outside(out, sizeof out, "O", 0, 0, -1, -1, -1, -1, 1, 1, 10, 8);
    cr_assert_str_empty(out);
}

Test(grade, every_row_message_can_be_replaced) {
    grader *g = grader_new(1, 1, 50, 4);
    for (int i = 0; i < 50; ++i)
        for (int c = 0; c < 4; ++c) grader_check(g, 0, i, c, 0.5, 1.0, 0, (tolerance){1e-5, 1e-4});
    grade_report r;
    grader_finish_ex(g, &r, "");
    cr_assert(strstr(r.summary, "every row") == NULL, "%s", r.summary);
    grader_finish(g, &r);
    cr_assert(strstr(r.summary, "every row is wrong") != NULL, "%s", r.summary);
    grader_free(g);
}

/* ---- the backward references ---- */

/* sum(O * dO) with O from the float64 forward reference: the loss whose gradients they are. */
static double loss(const float *Q, const float *K, const float *V, const float *dO, int N, int d, double scale,
                   int causal) {
    double o[16], L, s = 0;
    for (int i = 0; i < N; ++i) {
        attention_row_f64(Q, K, V, N, d, i, scale, causal, o, &L);
        for (int c = 0; c < d; ++c) s += o[c] * dO[i * d + c];
    }
    return s;
}

Test(backward_reference, matches_finite_differences) {
    enum { N = 9, D = 8 };
    float Q[N * D], K[N * D], V[N * D], dO[N * D];
    rng_t g;
    rng_seed(&g, 5);
    for (int k = 0; k < N * D; ++k) {
        Q[k] = (float)rng_normal(&g); K[k] = (float)rng_normal(&g);
        V[k] = (float)rng_normal(&g); dO[k] = (float)rng_normal(&g);
    }
    for (int causal = 0; causal < 2; ++causal) {
        double dQ[N * D], dK[N * D], dV[N * D];
        const double scale = 0.35;
        attention_backward_slice_f64(Q, K, V, dO, N, D, scale, causal, dQ, dK, dV);
        float *X[3] = {Q, K, V};
        double *G[3] = {dQ, dK, dV}, worst = 0;
        for (int t = 0; t < 3; ++t)
            for (int k = 0; k < N * D; ++k) {
                const float x = X[t][k];
                const float h = 1.0f / 1024; /* exact in float: x +- h is what the loss sees */
                X[t][k] = x + h;
                double up = loss(Q, K, V, dO, N, D, scale, causal);
                X[t][k] = x - h;
                double down = loss(Q, K, V, dO, N, D, scale, causal);
                X[t][k] = x;
                worst = fmax(worst, fabs((up - down) / (2.0 * h) - G[t][k]));
            }
        cr_assert_lt(worst, 1e-4, "causal=%d: max |finite difference - reference| = %g", causal, worst);
    }
}

Test(backward_reference, same_precision_is_close_but_not_exact) {
    enum { N = 40, D = 16 };
    float Q[N * D], K[N * D], V[N * D], dO[N * D];
    rng_t g;
    rng_seed(&g, 9);
    for (int k = 0; k < N * D; ++k) {
        Q[k] = round_to_dtype((float)rng_normal(&g), DTYPE_FP16);
        K[k] = round_to_dtype((float)rng_normal(&g), DTYPE_FP16);
        V[k] = round_to_dtype((float)rng_normal(&g), DTYPE_FP16);
        dO[k] = round_to_dtype((float)rng_normal(&g), DTYPE_FP16);
    }
    static double a[3][N * D], b[3][N * D];
    attention_backward_slice_f64(Q, K, V, dO, N, D, 0.25, 1, a[0], a[1], a[2]);
    attention_backward_slice_lowp(Q, K, V, dO, N, D, 0.25f, 1, DTYPE_FP16, b[0], b[1], b[2]);
    for (int t = 0; t < 3; ++t) {
        double err = 0, big = 0;
        for (int k = 0; k < N * D; ++k) {
            err = fmax(err, fabs(a[t][k] - b[t][k]));
            big = fmax(big, fabs(a[t][k]));
        }
        cr_assert_gt(err, 0.0, "gradient %d: fp16 rounding should show", t);
        cr_assert_lt(err, 2e-2 * big, "gradient %d: fp16 error %g vs magnitude %g", t, err, big);
    }
}

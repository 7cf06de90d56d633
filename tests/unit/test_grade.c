/* The grading logic: what fails, and what the diagnosis says. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>
#include "grade.h"

static const tolerance TOL = {1e-5, 1e-4};

Test(grade, nan_and_inf_never_pass) {
    cr_assert_eq(grade_element(1.0, NAN, 0, TOL), ELEM_NONFINITE);
    cr_assert_eq(grade_element(NAN, 1.0, 0, (tolerance){INFINITY, INFINITY}), ELEM_BAD);
    cr_assert_eq(grade_element(1.0, INFINITY, 0, (tolerance){INFINITY, 0}), ELEM_NONFINITE);
}

Test(grade, poison_is_not_written_even_if_close) {
    cr_assert_eq(grade_element(0.0, 0.0, 1, TOL), ELEM_UNWRITTEN);
}

Test(grade, tolerance_edges) {
    double ref = 2.0, tol = 1e-5 + 1e-4 * 2.0;
    cr_assert_eq(grade_element(ref, ref + tol * 0.999, 0, TOL), ELEM_OK);
    cr_assert_eq(grade_element(ref, ref - tol * 0.999, 0, TOL), ELEM_OK);
    cr_assert_eq(grade_element(ref, ref + tol * 1.001, 0, TOL), ELEM_BAD);
    cr_assert_eq(grade_element(0.0, 1.1e-5, 0, TOL), ELEM_BAD);
}

/* Builds a [BH, N, d] grade where bad(bh, row, col) decides the bad elements. */
static void run(int BH, int N, int d, int (*bad)(int, int, int), elem_status how, grade_report *r) {
    grader *g = grader_new(BH, 1, N, d);
    for (int bh = 0; bh < BH; ++bh)
        for (int i = 0; i < N; ++i)
            for (int c = 0; c < d; ++c) {
                int b = bad(bh, i, c);
                double got = b ? (how == ELEM_NONFINITE ? NAN : 1.0) : 0.5;
                grader_check(g, bh, i, c, 0.5, got, b && how == ELEM_UNWRITTEN, TOL);
            }
    grader_finish(g, r);
    grader_free(g);
}

static int last_partial(int bh, int i, int c) { (void)bh; (void)c; return i >= 64; }
static int not_first_slice(int bh, int i, int c) { (void)i; (void)c; return bh != 0; }
static int last_of_6_slices(int bh, int i, int c) { (void)c; return bh == 5 && i == 39; }
static int every(int bh, int i, int c) { (void)bh; (void)i; (void)c; return 1; }
static int none(int bh, int i, int c) { (void)bh; (void)i; (void)c; return 0; }
static int high_cols(int bh, int i, int c) { (void)bh; (void)i; return c >= 32; }

Test(grade, all_good_has_no_summary) {
    grade_report r;
    run(2, 77, 8, none, ELEM_BAD, &r);
    cr_assert_eq(r.bad, 0);
    cr_assert_str_empty(r.summary);
    cr_assert_eq(r.checked, 2 * 77 * 8);
}

Test(grade, last_partial_tile_is_named) {
    grade_report r;
    run(3, 77, 8, last_partial, ELEM_BAD, &r);
    cr_assert(strstr(r.summary, "last partial tile") != NULL, "%s", r.summary);
    cr_assert(strstr(r.summary, "rows 64..76") != NULL, "%s", r.summary);
}

Test(grade, slice_offset_bug_is_named) {
    grade_report r;
    run(6, 40, 4, not_first_slice, ELEM_BAD, &r);
    cr_assert(strstr(r.summary, "batch/head stride") != NULL, "%s", r.summary);
}

Test(grade, last_slice_alone_names_the_read_past_n) {
    /* a read of row N reaches the NaN guard only after the last slice (the others read the next slice) */
    grade_report r;
    run(6, 40, 4, last_of_6_slices, ELEM_BAD, &r);
    cr_assert(strstr(r.summary, "only the last (b,h) slice is wrong") != NULL, "%s", r.summary);
    cr_assert(strstr(r.summary, "NaN guard") != NULL, "%s", r.summary);
    grade_report r2; /* two slices: the stride message stays first, the read past N beside it */
    run(2, 40, 4, not_first_slice, ELEM_BAD, &r2);
    cr_assert(strstr(r2.summary, "batch/head stride") != NULL && strstr(r2.summary, "NaN guard") != NULL, "%s",
              r2.summary);
}

Test(grade, unwritten_and_nan_are_named) {
    grade_report r;
    run(1, 50, 4, every, ELEM_UNWRITTEN, &r);
    cr_assert(strstr(r.summary, "not written") != NULL, "%s", r.summary);
    cr_assert_eq(r.unwritten, 200);
    run(1, 50, 4, every, ELEM_NONFINITE, &r);
    cr_assert(strstr(r.summary, "overflow/NaN") != NULL, "%s", r.summary);
    cr_assert(strstr(r.summary, "every row") != NULL, "%s", r.summary);
}

/* Values every bad element of a grade of width d takes (ref 0.5): got, as written. */
static void run_all(int d, double got, grade_report *r) {
    grader *g = grader_new(1, 1, 40, d);
    for (int i = 0; i < 40; ++i)
        for (int c = 0; c < d; ++c) grader_check(g, 0, i, c, 0.5, got, 0, TOL);
    grader_finish(g, r);
    grader_free(g);
}

Test(grade, all_minus_inf_l_is_log_zero) {  /* L, width 1: a row sum that stayed 0 */
    grade_report r;
    char err[160];
    run_all(1, -INFINITY, &r);
    cr_assert_eq(r.neginf, 40);
    cr_assert(strstr(r.summary, "row sum l that stayed 0") != NULL, "%s", r.summary);
    cr_assert(strstr(r.summary, "overflow/NaN") == NULL, "%s", r.summary);
    cr_assert(strstr(grade_max_abs_text(&r, err, sizeof err), "no value both written and finite") != NULL, "%s", err);
    run_all(4, -INFINITY, &r);  /* O: -inf is an overflow, not log 0 */
    cr_assert(strstr(r.summary, "overflow/NaN") != NULL, "%s", r.summary);
}

Test(grade, all_zero_is_named_and_max_error_counts_only_finite) {
    grade_report r;
    char err[160];
    run_all(8, 0.0, &r);
    cr_assert_eq(r.zero, 320);
    cr_assert(strstr(r.summary, "all 320 bad values are 0, on every checked row: nothing reached this output") == r.summary,
              "%s", r.summary);
    cr_assert(strstr(grade_max_abs_text(&r, err, sizeof err), "max abs err 0.5") != NULL, "%s", err);
    grader *g = grader_new(1, 1, 40, 8);  /* zeros on some rows only: not "nothing reached" */
    for (int i = 0; i < 40; ++i)
        for (int c = 0; c < 8; ++c) grader_check(g, 0, i, c, 0.5, i < 20 ? 0.5 : 0.0, 0, TOL);
    grader_finish(g, &r);
    grader_free(g);
    cr_assert_eq(r.zero, r.bad);
    cr_assert(strstr(r.summary, "nothing reached") == NULL, "%s", r.summary);
    run(1, 50, 4, every, ELEM_NONFINITE, &r);  /* NaN everywhere: no error to measure */
    cr_assert(strstr(grade_max_abs_text(&r, err, sizeof err), "no value both written and finite") != NULL, "%s", err);
    run(3, 77, 8, last_partial, ELEM_NONFINITE, &r);  /* some NaN: the maximum says it leaves them out */
    cr_assert(strstr(grade_max_abs_text(&r, err, sizeof err), "over the written, finite values (0 not written, 312 NaN or Inf)")
              != NULL, "%s", err);
}

Test(grade, column_range_is_named) {
    grade_report r;
    run(2, 20, 64, high_cols, ELEM_BAD, &r);
    cr_assert(strstr(r.summary, "columns 32..63") != NULL, "%s", r.summary);
}

Test(grade, first_mismatches_are_kept) {
    grade_report r;
    run(1, 100, 2, last_partial, ELEM_BAD, &r);
    cr_assert_eq(r.nfirst, GRADE_FIRST);
    cr_assert_eq(r.first[0].row, 64);
    cr_assert_eq(r.first[0].col, 0);
}

/* The tolerance rules, with the numbers the forward runner held O and L to before the rules were
 * one function (tolerance_from_plain). */
Test(grade, tolerance_rules) {
    tolerance t = tolerance_from_plain(&TOL_RULE_OUTPUT, DTYPE_FP32, 2e-7, 1.0);
    cr_assert_eq(t.atol, 1e-5 + 3 * 2e-7);
    cr_assert_eq(t.rtol, 1e-4);
    t = tolerance_from_plain(&TOL_RULE_OUTPUT, DTYPE_FP16, 3e-4, 1.0);
    cr_assert_eq(t.atol, 2 * 3e-4 + 1e-4);
    cr_assert_eq(t.rtol, 0);
    t = tolerance_from_plain(&TOL_RULE_OUTPUT, DTYPE_BF16, 3e-3, 1.0);
    cr_assert_eq(t.atol, 2 * 3e-3 + 8e-4);
    t = tolerance_from_plain(&TOL_RULE_LSE, DTYPE_FP32, 5e-7, 1.0);
    cr_assert_eq(t.atol, 1e-4 + 3 * 5e-7);
    cr_assert_eq(t.rtol, 1e-5);
    t = tolerance_from_plain(&TOL_RULE_LSE, DTYPE_BF16, 5e-7, 1.0);
    cr_assert_eq(t.atol, 2 * 5e-7 + 1e-4);
    cr_assert_eq(t.rtol, 1e-5);
    /* a gradient's absolute term grows with its size */
    t = tolerance_from_plain(&TOL_RULE_OUTPUT, DTYPE_FP16, 0.01, 5.0);
    cr_assert_eq(t.atol, 2 * 0.01 + 1e-4 * 5.0);
    cr_assert_eq(tolerance_abs_term(&TOL_RULE_OUTPUT, DTYPE_BF16), 8e-4);
    /* NaN never passes, whatever the rule */
    cr_assert_eq(grade_element(1.0, NAN, 0, tolerance_from_plain(&TOL_RULE_LSE, DTYPE_FP16, INFINITY, 1.0)),
                 ELEM_NONFINITE);
}

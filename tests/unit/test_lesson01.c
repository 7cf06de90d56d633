/* Lesson 01's solution on the rows that break softmax implementations. */
#include <criterion/criterion.h>
#include <math.h>
#include "attention.h"
#include "cpu_reference.h"

static void check(const float *x, int n, int block) {
    float y[600], m = NAN, l = NAN;
    double ref[600];
    cr_assert_eq(online_softmax(x, y, n, block, &m, &l), ATTN_OK);
    softmax_f64(x, ref, n);
    for (int k = 0; k < n; ++k)
        cr_assert(fabs(y[k] - ref[k]) <= 1e-9 + 2e-4 * fabs(ref[k]), "y[%d] = %g, expected %g (block %d)", k, y[k], ref[k], block);
}

Test(lesson01, huge_values) {
    float x[300];
    for (int k = 0; k < 300; ++k) x[k] = (float)((k * 7919 % 300) * 10.0 - 1000.0); /* up to 2000 */
    for (int b = 1; b <= 512; b *= 4) check(x, 300, b);
}

Test(lesson01, masked_entries_and_rising_max) {
    float x[257];
    for (int k = 0; k < 257; ++k) x[k] = (k % 3 == 0) ? -INFINITY : (float)(k * 0.5 - 60);
    check(x, 257, 16);
    check(x, 257, 5);
}

Test(lesson01, fully_masked_row_is_defined) {
    float x[40], y[40], m, l;
    for (int k = 0; k < 40; ++k) x[k] = -INFINITY;
    cr_assert_eq(online_softmax(x, y, 40, 8, &m, &l), ATTN_OK);
    for (int k = 0; k < 40; ++k) cr_assert(y[k] == 0.0f);
    cr_assert(m == -INFINITY && l == 0.0f);
}

Test(lesson01, stats_are_max_and_sum) {
    float x[5] = {1, 2, 3, 4, 5}, y[5], m, l;
    online_softmax(x, y, 5, 2, &m, &l);
    cr_assert(m == 5.0f);
    cr_assert_float_eq(l, exp(-4.0) + exp(-3.0) + exp(-2.0) + exp(-1.0) + 1.0, 1e-6);
}

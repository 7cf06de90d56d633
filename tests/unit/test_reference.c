/* The float64 CPU reference against cases worked out by hand. */
#include <criterion/criterion.h>
#include <math.h>
#include "cpu_reference.h"

Test(reference, one_key_gives_its_value_row) {
    float Q[2] = {1, 2}, K[2] = {3, -1}, V[2] = {0.5f, -4};
    double o[2], L;
    attention_row_f64(Q, K, V, 1, 2, 0, 0.5, 0, o, &L);
    cr_assert_float_eq(o[0], 0.5, 1e-15);
    cr_assert_float_eq(o[1], -4.0, 1e-15);
    cr_assert_float_eq(L, 0.5 * (3 - 2), 1e-15); /* logsumexp of one score is the score */
}

Test(reference, two_keys_hand_softmax) {
    /* q.k = 0 and log(3): weights 1/4 and 3/4 */
    float Q[1] = {1}, K[2] = {0, (float)log(3.0)}, V[2] = {4, 8};
    double o, L;
    attention_row_f64(Q, K, V, 2, 1, 0, 1.0, 0, &o, &L);
    cr_assert_float_eq(o, 0.25 * 4 + 0.75 * 8, 1e-6);
    cr_assert_float_eq(L, log(1.0 + 3.0), 1e-6);
}

Test(reference, causal_row0_sees_only_key0) {
    float Q[2] = {1, 1}, K[2] = {0, 100}, V[2] = {7, -7};
    double o, L;
    attention_row_f64(Q, K, V, 2, 1, 0, 1.0, 1, &o, &L);
    cr_assert_float_eq(o, 7.0, 1e-15);
    attention_row_f64(Q, K, V, 2, 1, 1, 1.0, 1, &o, &L);
    cr_assert_float_eq(o, -7.0, 1e-12); /* key 1 dominates row 1 */
}

Test(reference, large_scores_do_not_overflow) {
    float Q[1] = {1}, K[2] = {1000, 999}, V[2] = {1, 0};
    double o, L;
    attention_row_f64(Q, K, V, 2, 1, 0, 1.0, 0, &o, &L);
    cr_assert(isfinite(o) && isfinite(L));
    cr_assert_float_eq(o, 1.0 / (1.0 + exp(-1.0)), 1e-12);
}

Test(reference, softmax_fully_masked_row_is_zero) {
    float x[3] = {-INFINITY, -INFINITY, -INFINITY};
    double y[3];
    softmax_f64(x, y, 3);
    for (int k = 0; k < 3; ++k) cr_assert(y[k] == 0.0);
}

Test(reference, rounding_ties_to_even) {
    cr_assert(round_to_dtype(1.0f + 0x1p-11f, DTYPE_FP16) == 1.0f);         /* tie -> even */
    cr_assert(round_to_dtype(1.0f + 3 * 0x1p-11f, DTYPE_FP16) == 1.0f + 0x1p-9f);
    cr_assert(round_to_dtype(1.0f + 0x1p-8f, DTYPE_BF16) == 1.0f);          /* tie -> even */
    cr_assert(round_to_dtype(1.0f + 3 * 0x1p-8f, DTYPE_BF16) == 1.0f + 0x1p-6f);
    cr_assert(round_to_dtype(0.1f, DTYPE_FP32) == 0.1f);
}

Test(reference, lowp_matches_f64_in_fp32) {
    float Q[4] = {0.1f, -0.2f, 0.3f, 0.4f}, K[8] = {1, 2, 3, 4, -1, 0, 1, 2}, V[8] = {1, 0, 0, 1, 2, 2, -2, 1};
    double a[4], b[4], La, Lb;
    attention_row_f64(Q, K, V, 2, 4, 0, 0.5, 0, a, &La);
    attention_row_lowp(Q, K, V, 2, 4, 0, 0.5f, 0, DTYPE_FP32, b, &Lb);
    for (int c = 0; c < 4; ++c) cr_assert_float_eq(a[c], b[c], 1e-6);
    cr_assert_float_eq(La, Lb, 1e-6);
}

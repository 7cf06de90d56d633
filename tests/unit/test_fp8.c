/* FP8 inputs (reference/cpu/fp8.c) and their grading: the e4m3 encoding against the format's
 * definition, quantization with per-tensor and per-block scales, the Hadamard rotation, the
 * outlier inputs, the plain FP8 reference and its tolerance (lesson 14). No GPU: what the
 * kernel does with them is checked by make hostsim-forward's stand-in and on the GPU. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "cpu_reference.h"
#include "fp8.h"
#include "grade.h"
#include "rng.h"

Test(fp8, e4m3_decodes_the_format) {
    cr_assert_eq(e4m3_decode(0x38), 1.0f);      /* exponent 7 = bias */
    cr_assert_eq(e4m3_decode(0xB8), -1.0f);
    cr_assert_eq(e4m3_decode(0x7E), 448.0f);    /* largest finite */
    cr_assert_eq(e4m3_decode(0x08), ldexpf(1, -6)); /* smallest normal */
    cr_assert_eq(e4m3_decode(0x01), ldexpf(1, -9)); /* smallest subnormal */
    cr_assert_eq(e4m3_decode(0x00), 0.0f);
    cr_assert(isnan(e4m3_decode(0x7F)) && isnan(e4m3_decode(0xFF)));
}

Test(fp8, e4m3_round_trips_every_finite_code) {
    for (int c = 0; c < 256; ++c) {
        if ((c & 0x7F) == 0x7F || c == 0x80) continue; /* NaN; -0 encodes as 0x80 too but compares 0 */
        cr_assert_eq(e4m3_encode(e4m3_decode((uint8_t)c)), c, "code 0x%02x", c);
    }
}

Test(fp8, e4m3_rounds_to_nearest_even_and_saturates) {
    cr_assert_eq(round_e4m3(1.0625f), 1.0f);   /* halfway 1 .. 1.125: the even mantissa */
    cr_assert_eq(round_e4m3(1.1875f), 1.25f);  /* halfway 1.125 .. 1.25 */
    cr_assert_eq(round_e4m3(1.07f), 1.125f);
    cr_assert_eq(round_e4m3(464.0f), 448.0f);  /* halfway 448 .. 480: even, then satfinite */
    cr_assert_eq(round_e4m3(1e6f), 448.0f);
    cr_assert_eq(round_e4m3(-1e6f), -448.0f);
    cr_assert_eq(round_e4m3(INFINITY), 448.0f);   /* satfinite saturates infinities too */
    cr_assert_eq(round_e4m3(-INFINITY), -448.0f);
    cr_assert_eq(round_e4m3(ldexpf(1, -10)), 0.0f);           /* half the smallest subnormal: even = 0 */
    cr_assert_eq(round_e4m3(ldexpf(3, -11)), ldexpf(1, -9));  /* 0.75 of it rounds up */
    cr_assert_eq(e4m3_encode(NAN), 0x7F);
}

Test(fp8, block_scales_map_each_block_max_to_448) {
    const int S = 2, N = 300, d = 8, rows = 128; /* 3 blocks per slice, the last one ragged */
    float X[2 * 300 * 8], deq[2 * 300 * 8], ds[6];
    uint8_t codes[2 * 300 * 8];
    rng_t r;
    rng_seed(&r, 7);
    for (int e = 0; e < S * N * d; ++e) X[e] = (float)rng_normal(&r) * (1 + e / 1000);
    cr_assert_eq(fp8_scale_count(S, N, rows), 6);
    cr_assert_eq(fp8_scale_count(S, N, 0), 1);
    fp8_quantize(X, S, N, d, rows, 1, ds, codes, deq);
    for (int s = 0; s < S; ++s)
        for (int b = 0; b < 3; ++b) {
            float amax = 0;
            for (int i = b * rows; i < N && i < (b + 1) * rows; ++i)
                for (int c = 0; c < d; ++c) amax = fmaxf(amax, fabsf(X[((size_t)s * N + i) * d + c]));
            cr_assert_float_eq(ds[s * 3 + b], amax / 448.0f, 1e-6f * amax);
        }
    for (int e = 0; e < S * N * d; ++e) /* 3 mantissa bits: within 1/16 relative, or a subnormal step */
        cr_assert_leq(fabsf(deq[e] - X[e]), fabsf(X[e]) / 16 + ds[0] * ldexpf(1, -9) * 64, "element %d", e);
    /* fresh = 0 keeps the scales: a redrawn row is quantized with the kernel's */
    float kept[6];
    memcpy(kept, ds, sizeof ds);
    X[0] = 1e6f;
    fp8_quantize(X, S, N, d, rows, 0, ds, codes, deq);
    cr_assert(memcmp(kept, ds, sizeof ds) == 0);
    cr_assert_eq(codes[0], 0x7E); /* saturated, not NaN */
}

Test(fp8, per_tensor_scale_is_one_scale) {
    float X[4] = {1, -3, 0.5f, 2}, deq[4], ds[1];
    uint8_t codes[4];
    fp8_quantize(X, 1, 1, 4, 0, 1, ds, codes, deq);
    cr_assert_float_eq(ds[0], 3.0f / 448, 1e-9f);
    cr_assert_eq(codes[1], 0xFE); /* -448 */
    float Z[2] = {0, 0};
    fp8_quantize(Z, 1, 1, 2, 0, 1, ds, codes, deq);
    cr_assert_eq(ds[0], 1.0f); /* an all-zero block: descale 1, not 0 or NaN */
}

Test(fp8, hadamard_is_orthonormal_and_keeps_qk) {
    enum { d = 128 };
    float q[d], k[d], q2[d], k2[d];
    rng_t r;
    rng_seed(&r, 3);
    for (int c = 0; c < d; ++c) { q[c] = (float)rng_normal(&r); k[c] = (float)rng_normal(&r); }
    q[5] = 40; /* an outlier channel */
    memcpy(q2, q, sizeof q);
    memcpy(k2, k, sizeof k);
    cr_assert_eq(fp8_hadamard_rows(q2, 1, d), 0);
    cr_assert_eq(fp8_hadamard_rows(k2, 1, d), 0);
    double dot = 0, dot2 = 0, amax2 = 0;
    for (int c = 0; c < d; ++c) { dot += q[c] * k[c]; dot2 += q2[c] * k2[c]; amax2 = fmax(amax2, fabs(q2[c])); }
    cr_assert_float_eq(dot2, dot, 1e-4 * (1 + fabs(dot)));
    cr_assert_lt(amax2, 10.0, "the outlier is spread over all channels (%g)", amax2);
    cr_assert_eq(fp8_hadamard_rows(q2, 1, d), 0); /* H is symmetric: applying it twice gives q back */
    for (int c = 0; c < d; ++c) cr_assert_float_eq(q2[c], q[c], 1e-4f);
    cr_assert_eq(fp8_hadamard_rows(q2, 1, 96), -1);
}

Test(fp8, outliers_are_about_one_in_a_thousand) {
    enum { n = 200000 };
    float *X = malloc(sizeof(float) * n);
    for (int e = 0; e < n; ++e) X[e] = 1;
    fp8_add_outliers(X, n, 11);
    int big = 0;
    for (int e = 0; e < n; ++e) big += X[e] == 10.0f;
    cr_assert(big > 150 && big < 250, "%d outliers of %d", big, n);
    free(X);
}

/* The peaked inputs put most of each row's other probabilities below e4m3's subnormals (their
 * mass is what P's scale keeps) while key 0, the peak, adds nothing to O. */
Test(fp8, peaked_inputs_hide_mass_below_the_subnormals) {
    enum { nq = 64, nk = 1024, d = 128 };
    float *Q = malloc(sizeof(float) * nq * d), *K = malloc(sizeof(float) * nk * d), *V = malloc(sizeof(float) * nk * d);
    rng_t r;
    rng_seed(&r, 7);
    for (int e = 0; e < nq * d; ++e) Q[e] = (float)rng_normal(&r);
    for (int e = 0; e < nk * d; ++e) { K[e] = (float)rng_normal(&r); V[e] = (float)rng_normal(&r); }
    fp8_peak_at_key0(Q, nq, K, V, nk, d, FP8_PEAK_GAP);
    for (int c = 0; c < d; ++c) { cr_assert_eq(K[c], 1.0f); cr_assert_eq(V[c], 0.0f); }
    for (int j = 1; j < nk; ++j) {
        double along = 0;
        for (int c = 0; c < d; ++c) along += K[(size_t)j * d + c];
        cr_assert_lt(fabs(along), 1e-3, "key %d keeps %g along u", j, along);
    }
    double tail_share = 0, hidden_share = 0; /* over the rows: the others' share of l, and of that, below 2^-10 */
    for (int i = 0; i < nq; ++i) {
        double s0 = 0, l = 1, tail = 0, hidden = 0;
        for (int c = 0; c < d; ++c) s0 += Q[i * d + c] * K[c] / sqrt((double)d);
        for (int j = 1; j < nk; ++j) {
            double s = 0;
            for (int c = 0; c < d; ++c) s += Q[i * d + c] * K[(size_t)j * d + c] / sqrt((double)d);
            cr_assert_lt(s, s0, "row %d: key %d scores above key 0", i, j);
            const double p = exp(s - s0);
            tail += p;
            if (p < ldexp(1.0, -10)) hidden += p;
        }
        l += tail;
        tail_share += tail / l / nq;
        hidden_share += hidden / tail / nq;
    }
    cr_assert(tail_share > 0.05 && tail_share < 0.5, "the other keys hold %g of l", tail_share);
    cr_assert_gt(hidden_share, 0.5, "only %g of their mass lies below 2^-10", hidden_share);
    free(Q); free(K); free(V);
}

Test(fp8, plain_reference_and_its_tolerance) {
    /* one key: O is V's row rounded to bf16, whatever P's rounding */
    const float q[4] = {1, 2, 3, 4}, K[4] = {0.5f, 0, 0, 1}, V[4] = {1.0f / 3, 2, -7, 0.1f};
    double o[4], L;
    attention_prefix_lowp(q, K, V, 1, 4, 0.5f, DTYPE_E4M3, o, &L);
    for (int c = 0; c < 4; ++c) cr_assert_eq(o[c], round_to_dtype(V[c], DTYPE_BF16));
    cr_assert_float_eq(L, 0.5 * 4.5, 1e-6);
    /* many keys: within a few e4m3 steps of float64, and the tolerance is 2x that plus 2e-3 */
    enum { nk = 500, d = 64 };
    static float Kn[nk * d], Vn[nk * d], qn[d];
    rng_t r;
    rng_seed(&r, 5);
    for (int e = 0; e < nk * d; ++e) { Kn[e] = round_e4m3((float)rng_normal(&r)); Vn[e] = round_e4m3((float)rng_normal(&r)); }
    for (int c = 0; c < d; ++c) qn[c] = round_e4m3((float)rng_normal(&r));
    double o64[d], op[d], L64, Lp, e = 0;
    attention_prefix_f64(qn, Kn, Vn, nk, d, 0.125, o64, &L64);
    attention_prefix_lowp(qn, Kn, Vn, nk, d, 0.125f, DTYPE_E4M3, op, &Lp);
    for (int c = 0; c < d; ++c) e = fmax(e, fabs(op[c] - o64[c]));
    cr_assert(e > 0 && e < 0.05, "plain FP8 error %g", e);
    cr_assert_float_eq(Lp, L64, 1e-3);
    const tolerance t = tolerance_from_plain(&TOL_RULE_OUTPUT, DTYPE_E4M3, e, 1.0);
    cr_assert_float_eq(t.atol, 2 * e + 2e-3, 1e-12);
    cr_assert_eq(tolerance_abs_term(&TOL_RULE_OUTPUT, DTYPE_BF16), 8e-4); /* the others unchanged */
}

Test(fp8, plain_reference_keeps_the_tensor_cores_accumulator_bits) {
    /* S = 32 x (32 x 1) + 0.25 x 0.25 = 1024.0625: after the first 32 products the accumulator holds
     * 1024, whose 12 fraction bits end at 2^-2, so the next instruction's 0.0625 is cut away */
    enum { d = 64 };
    float q[d] = {0}, k[d] = {0}, v[d] = {0};
    for (int c = 0; c < 32; ++c) { q[c] = 32; k[c] = 1; }
    q[32] = 0.25f; k[32] = 0.25f;
    v[0] = 1;
    double o[d], L, o64[d], L64;
    attention_prefix_lowp(q, k, v, 1, d, 1.0f, DTYPE_E4M3, o, &L);
    attention_prefix_f64(q, k, v, 1, d, 1.0, o64, &L64);
    cr_assert_eq(L, 1024.0, "plain FP8 S %.6f: the accumulator keeps 12 fraction bits", L);
    cr_assert_eq(L64, 1024.0625);
    attention_prefix_lowp(q, k, v, 1, d, 1.0f, DTYPE_FP16, o, &L);
    cr_assert_eq(L, 1024.0625, "fp16 inputs accumulate in fp32");
    /* cancelling terms: 14 x (+64), 15 x (-64) and three of +-0.0625 in one instruction: the largest
     * term's 12 bits end at 2^-6, so 0.0625 survives */
    for (int c = 0; c < 32; ++c) { q[c] = 8; k[c] = c < 16 ? 8 : -8; }
    q[32] = 0; k[32] = 0;
    q[1] = 0.25f; k[1] = 0.25f; q[17] = 0.25f; k[17] = -0.25f; q[2] = 0.25f; k[2] = 0.25f;
    attention_prefix_lowp(q, k, v, 1, d, 1.0f, DTYPE_E4M3, o, &L);
    attention_prefix_f64(q, k, v, 1, d, 1.0, o64, &L64);
    cr_assert_eq(L64, 14 * 64.0 - 15 * 64.0 + 0.0625);
    cr_assert_eq(L, L64, "terms of 64: 12 bits reach 2^-6, and 0.0625 is kept");
}

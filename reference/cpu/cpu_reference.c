#include "cpu_reference.h"
#include "fp8.h"
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* The prefix forms do the work; the (N, i, causal) forms of lessons 02-11 are wrappers with
 * nk = causal ? i + 1 : N, so their results are bit-for-bit what they always were. */
void attention_prefix_f64(const float *q, const float *K, const float *V, int nk, int d, double scale,
                          double *o, double *L) {
    if (nk < 1) { /* a fully masked row: the course's definition (attention.h, lesson 01) */
        for (int c = 0; c < d; ++c) o[c] = 0.0;
        *L = -INFINITY;
        return;
    }
    double *s = malloc(sizeof(double) * (size_t)nk);
    double m = -INFINITY;
    for (int j = 0; j < nk; ++j) {
        const float *k = K + (size_t)j * d;
        double acc = 0.0;
        for (int c = 0; c < d; ++c) acc += (double)q[c] * (double)k[c];
        s[j] = acc * scale;
        if (s[j] > m) m = s[j];
    }
    double l = 0.0;
    for (int j = 0; j < nk; ++j) {
        s[j] = exp(s[j] - m);
        l += s[j];
    }
    for (int c = 0; c < d; ++c) o[c] = 0.0;
    for (int j = 0; j < nk; ++j) {
        const float *v = V + (size_t)j * d;
        double p = s[j] / l;
        for (int c = 0; c < d; ++c) o[c] += p * (double)v[c];
    }
    *L = m + log(l);
    free(s);
}

void attention_row_f64(const float *Q, const float *K, const float *V, int N, int d, int i,
                       double scale, int causal, double *o, double *L) {
    attention_prefix_f64(Q + (size_t)i * d, K, V, causal ? i + 1 : N, d, scale, o, L);
}

double attention_prefix_max_f64(const float *q, const float *K, int nk, int d, double scale) {
    double m = -INFINITY;
    for (int j = 0; j < nk; ++j) {
        double acc = 0.0;
        for (int c = 0; c < d; ++c) acc += (double)q[c] * (double)K[(size_t)j * d + c];
        if (acc * scale > m) m = acc * scale;
    }
    return m;
}

double attention_row_max_f64(const float *Q, const float *K, int N, int d, int i, double scale, int causal) {
    return attention_prefix_max_f64(Q + (size_t)i * d, K, causal ? i + 1 : N, d, scale);
}

float round_to_dtype(float x, dtype_t dtype) {
    if (dtype == DTYPE_FP16) return (float)(_Float16)x;
    if (dtype == DTYPE_BF16) {
        if (isnan(x)) return x;
        uint32_t u;
        memcpy(&u, &x, 4);
        u += 0x7fffu + ((u >> 16) & 1u);
        u &= 0xffff0000u;
        memcpy(&x, &u, 4);
        return x;
    }
    return x;
}

/* Hopper's FP8 tensor cores keep about 14 bits of their sums, not fp32's 24 (DeepSeek-V3 technical
 * report, 2024, section 3.3.2, measured on the H800): a kernel's S = Q K^T and O += P V on e4m3
 * wgmma lose low bits that no kernel code can keep. The plain FP8 reference loses them the way a
 * fixed-point adder does: each instruction adds its 32 products (k = 32 for 8-bit operands) to the
 * accumulator after aligning every term to the largest of them and cutting it, toward zero, to
 * FP8_ACC_FRACTION_BITS bits below that term's leading bit. (Aligned to the largest term, not to
 * the result: when the terms cancel, the error stays that of the largest.) The hardware cuts at 13
 * fraction bits of the terms it sees, products of codes; the reference sees the dequantized values,
 * the codes' products times a descale whose mantissa moves every term's leading bit by up to one
 * place, so a cut at 13 bits here can be up to twice as fine as the hardware's. It cuts at 12: never
 * finer than the hardware (a row of the outlier inputs on an H200: the kernel's L 0.028 off, this
 * model's 0.026 at 12 bits and 0.004 at 13; lesson 14's worklog, section 17). */
#define FP8_ACC_FRACTION_BITS 12
#define FP8_K 32
static float fp8_accumulate(float acc, const float *products, int n) {
    float big = fabsf(acc);
    for (int i = 0; i < n; ++i) big = fmaxf(big, fabsf(products[i]));
    if (big == 0.0f) return acc;
    int e;
    frexpf(big, &e);  /* big = f 2^e, f in [0.5, 1): its leading bit is 2^(e - 1) */
    const double ulp = ldexp(1.0, e - 1 - FP8_ACC_FRACTION_BITS);
    double sum = trunc(acc / ulp) * ulp;
    for (int i = 0; i < n; ++i) sum += trunc(products[i] / ulp) * ulp;
    return (float)sum;
}

void attention_prefix_lowp(const float *q, const float *K, const float *V, int nk, int d, float scale,
                           dtype_t dtype, double *o, double *L) {
    if (nk < 1) {
        for (int c = 0; c < d; ++c) o[c] = 0.0;
        *L = -INFINITY;
        return;
    }
    float *s = malloc(sizeof(float) * (size_t)nk);
    float *acc = calloc((size_t)d, sizeof(float));
    float m = -INFINITY;
    for (int j = 0; j < nk; ++j) {
        const float *k = K + (size_t)j * d;
        float a = 0.0f;
        if (dtype == DTYPE_E4M3)
            for (int c0 = 0; c0 < d; c0 += FP8_K) {
                float prod[FP8_K];
                int n = 0;
                for (int c = c0; c < d && c < c0 + FP8_K; ++c) prod[n++] = q[c] * k[c];
                a = fp8_accumulate(a, prod, n);
            }
        else
            for (int c = 0; c < d; ++c) a += q[c] * k[c];
        s[j] = a * scale;
        if (s[j] > m) m = s[j];
    }
    float l = 0.0f;
    for (int j = 0; j < nk; ++j) {
        s[j] = expf(s[j] - m);
        l += s[j];
    }
    /* FP8: the products of 32 keys for each column, added to acc[c] by one instruction */
    float *prod = dtype == DTYPE_E4M3 ? malloc(sizeof(float) * (size_t)d * FP8_K) : NULL;
    for (int j = 0; j < nk; ++j) {
        /* FP8: exp(S - m) <= 1 rounded with its scale, then / l (l from the unrounded values) */
        float p = dtype == DTYPE_E4M3 ? round_e4m3(s[j] * FP8_P_SCALE) / FP8_P_SCALE / l : round_to_dtype(s[j] / l, dtype);
        const float *v = V + (size_t)j * d;
        if (!prod) {
            for (int c = 0; c < d; ++c) acc[c] += p * v[c];
            continue;
        }
        for (int c = 0; c < d; ++c) prod[(size_t)c * FP8_K + j % FP8_K] = p * v[c];
        if (j % FP8_K == FP8_K - 1 || j == nk - 1)
            for (int c = 0; c < d; ++c) acc[c] = fp8_accumulate(acc[c], &prod[(size_t)c * FP8_K], j % FP8_K + 1);
    }
    free(prod);
    for (int c = 0; c < d; ++c) o[c] = round_to_dtype(acc[c], dtype == DTYPE_E4M3 ? DTYPE_BF16 : dtype);
    *L = (double)(m + logf(l));
    free(s);
    free(acc);
}

void attention_row_lowp(const float *Q, const float *K, const float *V, int N, int d, int i,
                        float scale, int causal, dtype_t dtype, double *o, double *L) {
    attention_prefix_lowp(Q + (size_t)i * d, K, V, causal ? i + 1 : N, d, scale, dtype, o, L);
}

void softmax_f64(const float *x, double *y, int n) {
    double m = -INFINITY;
    for (int k = 0; k < n; ++k)
        if (x[k] > m) m = x[k];
    if (m == -INFINITY) { /* fully masked row */
        for (int k = 0; k < n; ++k) y[k] = 0.0;
        return;
    }
    double l = 0.0;
    for (int k = 0; k < n; ++k) l += exp((double)x[k] - m);
    for (int k = 0; k < n; ++k) y[k] = exp((double)x[k] - m) / l;
}

void softmax_three_pass(const float *x, float *y, int n) {
    float m = -INFINITY;
    for (int k = 0; k < n; ++k) m = fmaxf(m, x[k]);
    if (m == -INFINITY) {
        memset(y, 0, sizeof(float) * (size_t)n);
        return;
    }
    float l = 0.0f;
    for (int k = 0; k < n; ++k) l += expf(x[k] - m);
    float inv = 1.0f / l;
    for (int k = 0; k < n; ++k) y[k] = expf(x[k] - m) * inv;
}

void softmax_naive_two_pass(const float *x, float *y, int n) {
    float l = 0.0f;
    for (int k = 0; k < n; ++k) l += expf(x[k]);
    float inv = 1.0f / l;
    for (int k = 0; k < n; ++k) y[k] = expf(x[k]) * inv;
}

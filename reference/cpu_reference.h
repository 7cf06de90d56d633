/* cpu_reference.h: the references every kernel is graded against.
 * All inputs are the values actually stored in the device arrays (already
 * rounded to the lesson's dtype), as float. Layout [B, H, N, d] row-major; a
 * "slice" pointer is the start of one (b, h): Q + (b*H + h)*N*d. */
#ifndef CPU_REFERENCE_H
#define CPU_REFERENCE_H
#include "attention.h"

/* float64 attention for query row i of one (b, h) slice:
 *   S_ij = scale * sum_c Q[i,c] K[j,c] (j <= i only when causal)
 *   o[c] = sum_j softmax(S_i)_j V[j,c],  *L = m + log(sum_j exp(S_ij - m)).
 * Q, K, V point at the slice; o has d doubles. */
void attention_row_f64(const float *Q, const float *K, const float *V, int N, int d, int i,
                       double scale, int causal, double *o, double *L);

/* The "plain same-precision reference" of the FlashAttention test rule for
 * 16-bit lessons: fp32 accumulation, P = softmax(S) rounded to `dtype` before
 * P V, O rounded to `dtype` (what an unfused fp16 attention computes).
 * For DTYPE_FP32 it is the same computation in fp32 without rounding. */
void attention_row_lowp(const float *Q, const float *K, const float *V, int N, int d, int i,
                        float scale, int causal, dtype_t dtype, double *o, double *L);

/* Round a float to the nearest fp16 / bf16 value (ties to even) and back. */
float round_to_dtype(float x, dtype_t dtype);

/* Softmax of one row in float64; a fully masked row (all -inf) gives y = 0
 * (the course's definition, see attention.h). */
void softmax_f64(const float *x, double *y, int n);
/* The two float32 versions lesson 01 is timed against:
 * three-pass (max, sum of exp(x - max), normalize) and the naive two-pass
 * (sum of exp(x), normalize; overflows for x > 88). */
void softmax_three_pass(const float *x, float *y, int n);
void softmax_naive_two_pass(const float *x, float *y, int n);
#endif

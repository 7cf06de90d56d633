/* cpu_reference.h: the references every kernel is graded against.
 * All inputs are the values actually stored in the device arrays (already
 * rounded to the lesson's dtype), as float. Layout [B, H, N, d] row-major; a
 * "slice" pointer is the start of one (b, h): Q + (b*H + h)*N*d. */
#ifndef CPU_REFERENCE_H
#define CPU_REFERENCE_H
#include "attention.h"

/* float64 attention of one query row q[0..d) against the first nk keys of one K/V slice
 * (the keys it sees: all N, the causal prefix i + 1, or a decode row's seqlens_kv[b] - N + i + 1):
 *   S_j = scale * q . K_j (j < nk),  o[c] = sum_j softmax(S)_j V[j,c],
 *   *L = m + log(sum_j exp(S_j - m)) with m = max_j S_j.
 * K, V point at the slice ([nk.., d] floats); o has d doubles. nk < 1 (a fully masked row)
 * gives o = 0 and L = -inf, the course's definition (attention.h). */
void attention_prefix_f64(const float *q, const float *K, const float *V, int nk, int d, double scale,
                          double *o, double *L);
/* The row max m = scale * max_{j < nk} q . K_j (float64; -inf for nk < 1): what the diagnosis of
 * a wrong L compares against (diagnose.h). */
double attention_prefix_max_f64(const float *q, const float *K, int nk, int d, double scale);
/* The "plain same-precision reference" of the FlashAttention test rule for 16-bit lessons,
 * on the same visible prefix: fp32 accumulation, P = softmax(S) rounded to `dtype` before
 * P V, O rounded to `dtype` (what an unfused fp16 attention computes). For DTYPE_FP32 the
 * same computation in fp32 without rounding. For DTYPE_E4M3 (q, K, V the dequantized FP8
 * values): a plain FP8 attention, the unnormalized P = exp(S - m) <= 1 rounded to e4m3 with
 * its scale (e4m3(P * FP8_P_SCALE) / FP8_P_SCALE, fp8.h; l sums the unrounded values, as a
 * kernel's fp32 row sum does), O = P V / l rounded to bf16; both products accumulated the way
 * Hopper's FP8 tensor cores do, 32 products at a time, every term cut to 12 bits below the
 * largest one's leading bit (the hardware's 13 in the codes' units, one less for the descales:
 * cpu_reference.c, fp8_accumulate). nk < 1: o = 0, L = -inf. */
void attention_prefix_lowp(const float *q, const float *K, const float *V, int nk, int d, float scale,
                           dtype_t dtype, double *o, double *L);

/* The same for query row i of one (b, h) slice of N rows ([B, H, N, d] layout, Q, K, V
 * pointing at the slice): nk = causal ? i + 1 : N (key j visible iff j <= i). Wrappers of the
 * prefix forms above, kept for lessons 02-11 and the emulators. */
void attention_row_f64(const float *Q, const float *K, const float *V, int N, int d, int i,
                       double scale, int causal, double *o, double *L);
double attention_row_max_f64(const float *Q, const float *K, int N, int d, int i, double scale, int causal);
void attention_row_lowp(const float *Q, const float *K, const float *V, int N, int d, int i,
                        float scale, int causal, dtype_t dtype, double *o, double *L);

/* ---- backward (lessons 10-11; cpu_reference_bwd.c) ----
 * float64 gradients of sum(O * dO) for one (b, h) slice of N rows, O = softmax(S) V with
 * S = scale Q K^T (keys j > i masked when causal): FlashAttention-2's Algorithm 2 math,
 * unfused. With P = softmax(S) and D_i = dO_i . O_i (= sum_j P_ij dP_ij):
 *   dV = P^T dO,  dP = dO V^T,  dS = P o (dP - D),  dQ = scale dS K,  dK = scale dS^T Q.
 * Q, K, V, dO point at the slice ([N, d] floats, the stored values); dQ, dK, dV receive
 * N * d doubles each. O(N^2 d) time, O(N) extra memory. */
void attention_backward_slice_f64(const float *Q, const float *K, const float *V, const float *dO, int N,
                                  int d, double scale, int causal, double *dQ, double *dK, double *dV);

/* The "plain same-precision backward" of FlashAttention's test rule: the unfused backward
 * of a framework in `dtype`: every matrix product accumulates in fp32 and rounds its
 * result to dtype (S, P, O, dP, dS, dQ, dK, dV all materialised in dtype); D in fp32.
 * For DTYPE_FP32 the same in fp32 without rounding. O(N^2) extra memory. */
void attention_backward_slice_lowp(const float *Q, const float *K, const float *V, const float *dO, int N,
                                   int d, float scale, int causal, dtype_t dtype, double *dQ, double *dK,
                                   double *dV);

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

/* cpu_reference_bwd.c: the references the backward lessons (10-11) are graded against.
 * See cpu_reference.h for the two functions and the math. */
#include "cpu_reference.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Is key j visible to query i? */
static int visible(int i, int j, int causal) { return !causal || j <= i; }

void attention_backward_slice_f64(const float *Q, const float *K, const float *V, const float *dO, int N,
                                  int d, double scale, int causal, double *dQ, double *dK, double *dV) {
    double *P = malloc(sizeof(double) * (size_t)N);
    double *dP = malloc(sizeof(double) * (size_t)N);
    double *o = malloc(sizeof(double) * (size_t)d);
    memset(dQ, 0, sizeof(double) * (size_t)N * d);
    memset(dK, 0, sizeof(double) * (size_t)N * d);
    memset(dV, 0, sizeof(double) * (size_t)N * d);
    for (int i = 0; i < N; ++i) {
        /* P_i = softmax(S_i), S_ij = scale Q_i . K_j over the visible keys */
        double m = -INFINITY;
        for (int j = 0; j < N; ++j) {
            if (!visible(i, j, causal)) { P[j] = -INFINITY; continue; }
            double s = 0;
            for (int c = 0; c < d; ++c) s += (double)Q[(size_t)i * d + c] * K[(size_t)j * d + c];
            P[j] = s * scale;
            if (P[j] > m) m = P[j];
        }
        double l = 0;
        for (int j = 0; j < N; ++j) {
            P[j] = visible(i, j, causal) ? exp(P[j] - m) : 0.0;
            l += P[j];
        }
        for (int j = 0; j < N; ++j) P[j] /= l;
        /* O_i = P_i V, D_i = dO_i . O_i (= sum_j P_ij dP_ij) */
        for (int c = 0; c < d; ++c) o[c] = 0;
        for (int j = 0; j < N; ++j)
            if (P[j] != 0)
                for (int c = 0; c < d; ++c) o[c] += P[j] * V[(size_t)j * d + c];
        double D = 0;
        for (int c = 0; c < d; ++c) D += (double)dO[(size_t)i * d + c] * o[c];
        /* dP_ij = dO_i . V_j, dS_ij = P_ij (dP_ij - D_i); dV_j += P_ij dO_i;
         * dQ_i += scale dS_ij K_j; dK_j += scale dS_ij Q_i */
        for (int j = 0; j < N; ++j) {
            if (!visible(i, j, causal)) continue;
            double dp = 0;
            for (int c = 0; c < d; ++c) dp += (double)dO[(size_t)i * d + c] * V[(size_t)j * d + c];
            dP[j] = dp;
            const double ds = P[j] * (dp - D) * scale;
            for (int c = 0; c < d; ++c) {
                dV[(size_t)j * d + c] += P[j] * dO[(size_t)i * d + c];
                dQ[(size_t)i * d + c] += ds * K[(size_t)j * d + c];
                dK[(size_t)j * d + c] += ds * Q[(size_t)i * d + c];
            }
        }
    }
    free(P);
    free(dP);
    free(o);
}

/* Round to the dtype when it is 16-bit; fp32 arithmetic is already float. */
static float rd(float x, dtype_t t) { return t == DTYPE_FP32 ? x : round_to_dtype(x, t); }

void attention_backward_slice_lowp(const float *Q, const float *K, const float *V, const float *dO, int N,
                                   int d, float scale, int causal, dtype_t dtype, double *dQ, double *dK,
                                   double *dV) {
    /* The whole N x N matrices, as an unfused implementation keeps them. */
    float *P = malloc(sizeof(float) * (size_t)N * N);
    float *dS = malloc(sizeof(float) * (size_t)N * N);
    float *O = malloc(sizeof(float) * (size_t)N * d);
    float *acc = malloc(sizeof(float) * (size_t)d);
    for (int i = 0; i < N; ++i) {
        float *Pi = P + (size_t)i * N;
        float m = -INFINITY;
        for (int j = 0; j < N; ++j) {
            if (!visible(i, j, causal)) { Pi[j] = -INFINITY; continue; }
            float s = 0;
            for (int c = 0; c < d; ++c) s += Q[(size_t)i * d + c] * K[(size_t)j * d + c];
            Pi[j] = rd(s * scale, dtype); /* S materialised in the dtype */
            if (Pi[j] > m) m = Pi[j];
        }
        float l = 0;
        for (int j = 0; j < N; ++j) {
            Pi[j] = visible(i, j, causal) ? expf(Pi[j] - m) : 0.f;
            l += Pi[j];
        }
        for (int j = 0; j < N; ++j) Pi[j] = rd(Pi[j] / l, dtype);
        for (int c = 0; c < d; ++c) acc[c] = 0;
        for (int j = 0; j < N; ++j)
            for (int c = 0; c < d; ++c) acc[c] += Pi[j] * V[(size_t)j * d + c];
        for (int c = 0; c < d; ++c) O[(size_t)i * d + c] = rd(acc[c], dtype);
        /* dP = dO V^T in the dtype, D_i = rowsum(dO o O) in fp32, dS = P o (dP - D) in the dtype */
        float D = 0;
        for (int c = 0; c < d; ++c) D += dO[(size_t)i * d + c] * O[(size_t)i * d + c];
        for (int j = 0; j < N; ++j) {
            float dp = 0;
            if (visible(i, j, causal))
                for (int c = 0; c < d; ++c) dp += dO[(size_t)i * d + c] * V[(size_t)j * d + c];
            dS[(size_t)i * N + j] = rd(Pi[j] * (rd(dp, dtype) - D), dtype);
        }
    }
    /* dQ = scale dS K, dK = scale dS^T Q, dV = P^T dO: fp32 accumulation, outputs in the dtype */
    for (int i = 0; i < N; ++i) {
        for (int c = 0; c < d; ++c) acc[c] = 0;
        for (int j = 0; j < N; ++j)
            for (int c = 0; c < d; ++c) acc[c] += dS[(size_t)i * N + j] * K[(size_t)j * d + c];
        for (int c = 0; c < d; ++c) dQ[(size_t)i * d + c] = rd(acc[c] * scale, dtype);
    }
    for (int j = 0; j < N; ++j) {
        for (int c = 0; c < d; ++c) acc[c] = 0;
        for (int i = 0; i < N; ++i)
            for (int c = 0; c < d; ++c) acc[c] += dS[(size_t)i * N + j] * Q[(size_t)i * d + c];
        for (int c = 0; c < d; ++c) dK[(size_t)j * d + c] = rd(acc[c] * scale, dtype);
        for (int c = 0; c < d; ++c) acc[c] = 0;
        for (int i = 0; i < N; ++i)
            for (int c = 0; c < d; ++c) acc[c] += P[(size_t)i * N + j] * dO[(size_t)i * d + c];
        for (int c = 0; c < d; ++c) dV[(size_t)j * d + c] = rd(acc[c], dtype);
    }
    free(P);
    free(dS);
    free(O);
    free(acc);
}

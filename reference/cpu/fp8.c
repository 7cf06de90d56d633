/* fp8.c: FP8 inputs (fp8.h). */
#include "fp8.h"
#include <math.h>
#include <string.h>
#include "rng.h"

size_t fp8_scale_count(int S, int N, int rows) {
    return rows <= 0 ? 1 : (size_t)S * (size_t)((N + rows - 1) / rows);
}

/* descale of the element at row i of slice s */
static size_t scale_index(int s, int i, int N, int rows) {
    return rows <= 0 ? 0 : (size_t)s * ((N + rows - 1) / rows) + i / rows;
}

void fp8_quantize(const float *X, int S, int N, int d, int rows, int fresh, float *descale, uint8_t *codes,
                  float *deq) {
    const size_t nscale = fp8_scale_count(S, N, rows);
    if (fresh) {
        for (size_t k = 0; k < nscale; ++k) descale[k] = 0.0f;
        for (int s = 0; s < S; ++s)
            for (int i = 0; i < N; ++i)
                for (int c = 0; c < d; ++c) {
                    const float v = fabsf(X[((size_t)s * N + i) * d + c]);
                    float *m = &descale[scale_index(s, i, N, rows)];
                    if (v > *m) *m = v; /* NaN never compares greater */
                }
        for (size_t k = 0; k < nscale; ++k) descale[k] = descale[k] > 0.0f ? descale[k] / 448.0f : 1.0f;
    }
    for (int s = 0; s < S; ++s)
        for (int i = 0; i < N; ++i) {
            const float ds = descale[scale_index(s, i, N, rows)];
            for (int c = 0; c < d; ++c) {
                const size_t e = ((size_t)s * N + i) * d + c;
                codes[e] = e4m3_encode(X[e] / ds);
                if (deq) deq[e] = ds * e4m3_decode(codes[e]);
            }
        }
}

int fp8_hadamard_rows(float *X, size_t n_rows, int d) {
    if (d < 1 || (d & (d - 1))) return -1;
    double buf[1024];
    if (d > 1024) return -1;
    const double norm = 1.0 / sqrt((double)d);
    for (size_t r = 0; r < n_rows; ++r) {
        float *x = X + r * d;
        for (int c = 0; c < d; ++c) buf[c] = x[c];
        for (int h = 1; h < d; h *= 2) /* butterflies of width h */
            for (int i = 0; i < d; i += 2 * h)
                for (int j = i; j < i + h; ++j) {
                    const double a = buf[j], b = buf[j + h];
                    buf[j] = a + b;
                    buf[j + h] = a - b;
                }
        for (int c = 0; c < d; ++c) x[c] = (float)(buf[c] * norm);
    }
    return 0;
}

void fp8_peak_at_key0(float *Q, int nq, float *K, float *V, int nk, int d, float gap) {
    const double u = 1.0 / sqrt((double)d);  /* every component of the unit vector u */
    for (int j = 1; j < nk; ++j) {
        float *k = K + (size_t)j * d;
        double along = 0.0;  /* k.u */
        for (int c = 0; c < d; ++c) along += k[c] * u;
        for (int c = 0; c < d; ++c) k[c] = (float)(k[c] - along * u);
    }
    if (nk > 0)
        for (int c = 0; c < d; ++c) {
            K[c] = 1.0f;  /* sqrt(d) u */
            V[c] = 0.0f;
        }
    for (size_t e = 0; e < (size_t)nq * d; ++e) Q[e] = (float)(Q[e] + gap * u);
}

void fp8_add_outliers(float *X, size_t n, uint64_t seed) {
    rng_t r;
    rng_seed(&r, seed);
    for (size_t e = 0; e < n; ++e)
        if (rng_next(&r) % 1000 == 0) X[e] *= 10.0f;
}

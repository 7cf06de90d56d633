/* fp8.h: FP8 inputs for lesson 14 (dtype DTYPE_E4M3; attention.h, attn_fp8), plain C: the e4m3
 * encoding, quantization with per-tensor or per-block scales, the Hadamard rotation of
 * incoherent processing, and the outlier inputs of FlashAttention-3's FP8 test. The runner
 * (runner_attention.cu) and the unit tests (tests/unit/test_fp8.c) use them. */
#ifndef FP8_H
#define FP8_H
#include <stddef.h>
#include <stdint.h>
#include <math.h>

/* OCP e4m3 (the H100's __nv_fp8_e4m3): round to nearest even, saturating to +-448 (what
 * cvt.rn.satfinite.e4m3x2.f32 does, infinities included); NaN gives 0x7F. Subnormals go down to
 * 2^-9.
 * Inline, so that the float64 references (cpu_reference.c) round P to e4m3 without linking
 * fp8.c: every emulator and test that links the references links nothing more. */
static inline uint8_t e4m3_encode(float x) {
    if (isnan(x)) return 0x7F;
    const uint8_t sign = signbit(x) ? 0x80 : 0;
    const float a = fabsf(x);
    if (isinf(a)) return sign | 0x7E; /* satfinite: +-448 (frexpf says nothing useful of inf) */
    int e;
    frexpf(a, &e); /* a = f 2^e, f in [0.5, 1): the leading bit is 2^(e-1) */
    uint32_t code;
    if (a == 0.0f) {
        code = 0;
    } else if (e - 1 < -6) { /* subnormal: multiples of 2^-9; 8 of them rolls into 2^-6 */
        code = (uint32_t)rintf(ldexpf(a, 9));
    } else {
        float q = rintf(ldexpf(a, 3 - (e - 1))); /* mantissa with its leading 1: 8..16 */
        int be = e - 1 + 7;
        if (q >= 16.0f) { q = 8.0f; ++be; }
        code = be > 15 ? 0x7F : ((uint32_t)be << 3) | ((uint32_t)q - 8u);
    }
    if (code > 0x7E) code = 0x7E; /* satfinite: 448 */
    return sign | (uint8_t)code;
}

static inline float e4m3_decode(uint8_t c) {
    const int e = (c >> 3) & 15, m = c & 7;
    if ((c & 0x7F) == 0x7F) return NAN;
    const float a = e == 0 ? ldexpf((float)m, -9) : ldexpf(1.0f + m / 8.0f, e - 7);
    return (c & 0x80) ? -a : a;
}
static inline float round_e4m3(float x) { return e4m3_decode(e4m3_encode(x)); }

/* The scale P is multiplied by before it is rounded to e4m3 in the plain FP8 reference
 * (cpu_reference.c): P <= 1 becomes <= 256, far from e4m3's subnormals; a power of two, so the
 * scaling itself rounds nothing. A kernel may choose its own. */
#define FP8_P_SCALE 256.0f

/* Quantizes X, S slices of [N, d] floats (NaN entries ignored for the scales): per block of
 * `rows` rows of each slice (rows = 0: one block for the whole tensor), descale = amax / 448
 * (1 for an all-zero block), codes[e] = e4m3(X[e] / descale). With fresh = 0 the descale array
 * is kept as given (re-quantizing redrawn rows with the scales the kernel already has). deq[e],
 * when not NULL, receives descale * decode(codes[e]) as float: the value the kernel sees.
 * descale holds fp8_scale_count(S, N, rows) floats, block k of slice s at s * ceil(N/rows) + k. */
size_t fp8_scale_count(int S, int N, int rows);
void fp8_quantize(const float *X, int S, int N, int d, int rows, int fresh, float *descale, uint8_t *codes,
                  float *deq);

/* Multiplies each of the n_rows rows of X ([n_rows, d], d a power of two) by the orthonormal
 * Hadamard matrix H_d / sqrt(d) (Sylvester's construction, fast Walsh-Hadamard transform in
 * double). Rows holding NaN stay NaN. Q K^T is unchanged when both are rotated. Returns -1
 * when d is not a power of two (X untouched), else 0. */
int fp8_hadamard_rows(float *X, size_t n_rows, int d);

/* FlashAttention-3's outlier inputs: each element of X[0..n) is multiplied by 10 with
 * probability 1/1000, drawn from seed. */
void fp8_add_outliers(float *X, size_t n, uint64_t seed);

/* The peaked inputs (--peaked; the FP8 case matrix has such a case), for one slice: Q [nq, d], K
 * and V [nk, d], row-major, N(0, 1) entries. With u = (1, ..., 1) / sqrt(d), key 0 becomes
 * sqrt(d) u with a value row of zeros, the other keys lose their component along u and every
 * query gains gap u, so that with the scale 1 / sqrt(d) query i scores gap + q_i.u on key 0
 * (q_i.u ~ N(0, 1)) and about N(0, 1) on the others. Each row's other probabilities exp(S - m)
 * then lie mostly between 2^-16 and 2^-8 (at gap = FP8_PEAK_GAP and nk = 1024 about a sixth of
 * the row sum l), and O is their share alone: key 0's zero value row keeps FP8's accumulator,
 * which keeps about 13 bits below its largest term (cpu_reference.c), from losing their
 * products beside key 0's. Rounded to e4m3 without P's scale, most of them fall below half its
 * smallest subnormal (2^-10) and leave P V while l still counts them: what P's scale is for
 * (lesson 14). nq = 0 or nk = 0: that side is left alone (Q or K, V may then be NULL). */
#define FP8_PEAK_GAP 9.0f
void fp8_peak_at_key0(float *Q, int nq, float *K, float *V, int nk, int d, float gap);
#endif

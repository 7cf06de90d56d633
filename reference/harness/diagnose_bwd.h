/* diagnose_bwd.h: tolerance and diagnosis of a backward pass (lessons 10-11), as pure
 * functions the backward runner (runner_backward.cu) calls and tests/unit/test_backward.c checks
 * without a GPU.
 *
 * The three gradients share their inputs, so which of them are wrong, and how, says where the
 * bug is. Algorithm 2 of FlashAttention-2 computes, per (query row i, key j):
 *     P_ij = exp(scale Q_i.K_j - L_i)     dV_j += P_ij dO_i
 *     dP_ij = dO_i . V_j                  dS_ij = P_ij (dP_ij - D_i),  D_i = dO_i . O_i
 *     dQ_i += scale dS_ij K_j             dK_j += scale dS_ij Q_i
 * dV needs only P; dQ and dK need dS, hence P, dP and D. So dV right and dQ, dK wrong puts
 * the bug in dS; all three wrong puts it in P (or in what every product reads); one wrong
 * alone puts it in that product. Beyond that pattern, the runner recomputes the float64
 * reference under a few hypotheses (bwd_variant: D missing, L in the wrong base, L of the
 * wrong row, unscaled scores, a causal mask missing from one product) and reports the one the
 * kernel's numbers match. */
#ifndef DIAGNOSE_BWD_H
#define DIAGNOSE_BWD_H
#include <stddef.h>
#include "attention.h"
#include "grade.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The three gradients, in this order everywhere. */
enum { BWD_DQ = 0, BWD_DK = 1, BWD_DV = 2 };
extern const char *const BWD_NAME[3]; /* "dQ", "dK", "dV" */

/* The tolerance of one gradient (per element: |got - ref| <= atol + rtol |ref|), from the
 * largest error e_plain of the plain same-precision backward (cpu_reference.h,
 * attention_backward_slice_lowp) on the same inputs and the largest |ref| of that gradient:
 *   16-bit: atol = 2 e_plain + a max(1, max|ref|), rtol 0, a = 1e-4 (fp16), 8e-4 (bf16):
 *           FlashAttention's test rule (at most twice the error of a framework's backward in
 *           the same precision) plus a small absolute term scaled to the gradient's size;
 *   fp32:   atol = 3 e_plain + 1e-5 max(1, max|ref|), rtol 1e-4: the forward's fp32 rule. With
 *           x30 logits the plain fp32 backward's own error is about 1e-4 relative (S is
 *           ill-conditioned), which the 3 e_plain term follows.
 * Writes a one-line description of the rule with its numbers into desc (cap bytes). */
tolerance bwd_tolerance(dtype_t dtype, double e_plain, double max_ref, char *desc, size_t cap);

/* Hypotheses about a wrong kernel: the float64 backward of one slice as the kernel would
 * compute it with that bug. BWD_EXACT is the right math (attention_backward_slice_f64). */
typedef enum {
    BWD_EXACT = 0,
    BWD_NO_D,          /* dS = P o dP: D missing, zero, or never subtracted */
    BWD_L_TIMES_LN2,   /* P = exp(S - L ln 2): a natural-log L used as a base-2 one */
    BWD_L_TIMES_LOG2E, /* P = exp(S - L log2 e): L converted to base 2 and used with exp */
    BWD_L_OF_KEY,      /* P_ij = exp(S_ij - L_j): the logsumexp of the key's row */
    BWD_S_UNSCALED,    /* P = exp(Q.K - L): the scores not multiplied by the softmax scale */
    BWD_DV_UNMASKED,   /* causal: dV += P^T dO with P not masked (dS masked) */
    BWD_DS_UNMASKED,   /* causal: dS from P not masked (dV masked) */
    BWD_PAIRS_SKIPPED, /* the pairs (i, j) with dQ's row i and dK's or dV's row j both wrong left
                          out: (query tile, K/V tile) pairs never computed. Needs the kernel's rows,
                          so only bwd_examine_slice tries it (attention_backward_slice_variant
                          computes it as BWD_EXACT) */
    BWD_VARIANT_COUNT
} bwd_variant;

/* Float64 gradients of one (b, h) slice under hypothesis v (layout and math as
 * attention_backward_slice_f64 in cpu_reference.h: Q, K, V, dO [N, d] floats, dQ, dK, dV
 * [N, d] doubles). The forward's L_i and D_i are always the true ones (a kernel reads them
 * from its inputs); v changes how P and dS are formed from them. O(N^2 d) time, O(N) memory. */
void attention_backward_slice_variant(const float *Q, const float *K, const float *V, const float *dO, int N,
                                      int d, double scale, int causal, bwd_variant v, double *dQ, double *dK,
                                      double *dV);

/* Fraction of the n elements where got is finite and within slack x (atol + rtol |ref|) of
 * ref. */
double bwd_fit(const double *got, const double *ref, size_t n, tolerance t, double slack);

/* The factor got / ref when it is one constant for the whole gradient (median over the
 * elements whose |ref| is above 5% of the largest, at least 90% of them within 2% of it);
 * NAN otherwise, and NAN when it is within 2% of 1: a gradient right on most elements and
 * wrong on a few (a row or a tile) has the median 1, which explains none of its errors. */
double bwd_factor(const double *got, const double *ref, size_t n);

/* What the runner found about one failing case, for the cross-gradient diagnosis. */
typedef struct {
    long bad[3];              /* elements out of tolerance, per gradient (0: it passes) */
    long unwritten[3];        /* still holding the poison */
    long nonfinite[3];        /* NaN or Inf */
    int causal;
    double scale;             /* the softmax scale */
    double swap_fit;          /* the smaller of: kernel dK vs reference dV, kernel dV vs reference dK
                                 (bwd_fit); -1 when not measured */
    double factor[3];         /* bwd_factor per gradient; NAN when none or not measured */
    double variant_fit[BWD_VARIANT_COUNT]; /* bwd_fit of all three gradients against the
                                              variant's; -1 when not measured */
    int skip_rows[2];         /* BWD_PAIRS_SKIPPED: how many rows of dQ, and of dK or dV, are wrong */
} bwd_facts;

/* Initializes *f: nothing bad, nothing measured. */
void bwd_facts_init(bwd_facts *f);

/* Fills the measured fields of *f (swap_fit, factor, variant_fit) from one (b, h) slice where the
 * kernel went wrong; the caller has set bad, unwritten, nonfinite (over all it graded), causal and
 * scale. Nothing is measured when a gradient holds unwritten or non-finite elements. Which
 * hypotheses are recomputed follows the pattern of bad gradients (dQ and dK bad, dV right: D
 * missing, or causal dS unmasked; all three bad: the L and scale hypotheses; dV alone bad and
 * causal: dV unmasked; dQ and dK or dV bad on some rows: the pairs of those rows skipped), and
 * only when 6 N^2 d <= 2e9 (a prompt answer). A hypothesis counts only
 * where it differs from the right answer on at least 10% of the elements; the kernel matches it
 * when its gradients are within 5% of the hypothesis' in relative L2 norm and, element by
 * element, within 10 x the tolerance (grown by the ratio of the hypothesis' median magnitude to
 * the reference's: a wrong L can make P many times larger) + 2% of the hypothesis' value.
 *   Q, K, V, dO: the slice's inputs [N, d]; ref, got: the float64 reference and the kernel's
 *   gradients of the slice ([N, d] doubles each, in the order dQ, dK, dV); tol: the tolerances. */
void bwd_examine_slice(const float *Q, const float *K, const float *V, const float *dO, int N, int d,
                       const double *const ref[3], const double *const got[3], const tolerance tol[3], bwd_facts *f);

/* Writes the diagnosis sentence (NUL-terminated, at most cap bytes) for a case where at least
 * one gradient is bad: a matching hypothesis when one fits at least 90% of the elements, else
 * dK and dV swapped, else a constant factor, else what the pattern of passing and failing
 * gradients says. Writes "" when a gradient holds unwritten or non-finite elements (the
 * grader's own words are better there) or nothing is bad. */
void diagnose_bwd(const bwd_facts *f, char *out, size_t cap);

#ifdef __cplusplus
}
#endif
#endif

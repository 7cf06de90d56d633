/* buffers.h: the device arrays a runner grades, as both runners (forward: runner_attention.cu,
 * backward: runner_backward.cu) use them: element encodings, the poison that marks "not
 * written", fresh random inputs, and guard regions around every array.
 *
 * Every array is allocated with GUARD_BYTES of guard before and after its data. Inputs get
 * NaN guards (a read past either end makes NaN, which the grader names); outputs get poison
 * guards, checked after each graded launch: a write outside the array (a row index past N in
 * the last (b, h) slice, a negative offset) shows up there, and the diagnosis says where.
 * Timed launches do not check anything (runner_device.cu's time_launches). */
#ifndef BUFFERS_H
#define BUFFERS_H
#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>
#include <vector>
#include "attention.h"

static const uint32_t POISON32 = 0xFFADDEADu; /* a NaN no arithmetic produces */
static const uint32_t POISON16 = 0xFFADu;     /* NaN in both fp16 and bf16 */
static const uint32_t NAN32 = 0x7FC00000u;    /* quiet NaN for the input guards (fp32) */
static const uint32_t NAN16 = 0x7FC0u;        /* quiet NaN in fp16 and in bf16 */
static const uint32_t NAN8 = 0x7Fu;           /* NaN in e4m3 (FP8 inputs; no poison: outputs are bf16) */
static const size_t GUARD_BYTES = 64 << 10;   /* a whole 128 x 128 fp16 tile fits in it */

int dtype_size(dtype_t t); /* bytes per element: 4, 2, or 1 (e4m3) */
static inline uint32_t poison_of(int elem_bytes) { return elem_bytes == 4 ? POISON32 : POISON16; }
static inline uint32_t nan_of(int elem_bytes) { return elem_bytes == 4 ? NAN32 : elem_bytes == 1 ? NAN8 : NAN16; }

/* float -> the dtype's bytes (round to nearest even), n elements. */
void encode_values(const float *src, void *dst, size_t n, dtype_t t);
/* Element i of an array of dtype t as a double; *poisoned = 1 when its bits are the poison. */
double decode_value(const void *raw, size_t i, dtype_t t, int *poisoned);
/* x rounded to the dtype and back: the value the device array will hold. */
float round_value(float x, dtype_t t);

/* Fills rows [row0[g], row1[g]) of each of the S slices of X ([S, N, d]) with N(0,1) * scale
 * values rounded to t, g = slice / per_group (so row0 and row1 hold S / per_group entries: one
 * range per sequence b of a [B, H_kv, N_kv, d] K/V array with per_group = H_kv, or one for all
 * with per_group = S). Slice s draws from its own stream rng_mix(seed, s), from its first row
 * on, so the slices fill in parallel, the values do not depend on the thread count, and
 * re-drawing rows [r, N) gives the values a full draw from row r on would. */
void random_slice_rows(std::vector<float> &X, int S, int N, int d, int per_group, const int *row0,
                       const int *row1, float scale, dtype_t t, uint64_t seed);
/* Rows [row0, row1) of every one of the BH slices of X ([BH, N, d]); random_slice_rows with
 * one range for all. */
static inline void random_slices(std::vector<float> &X, int BH, int N, int d, int row0, int row1, float scale,
                                 dtype_t t, uint64_t seed) {
    random_slice_rows(X, BH, N, d, BH, &row0, &row1, scale, t, seed);
}

/* Fills n elements of dtype t at device address x with a splitmix hash of (seed, index) made
 * uniform with variance 1, times scale, rounded to t, on stream s (runner_fill.cu). For inputs
 * that are only timed: the host never holds them, so a 32 GiB KV cache needs no 64 GiB of host
 * floats. Errors exit through CUDA_CHECK. */
void device_fill_random(void *x, size_t n, dtype_t t, uint64_t seed, float scale, cudaStream_t s);

/* A device array of n elements of es bytes between two guards. */
struct guarded_buf {
    char *raw;              /* the allocation: guard, data, guard */
    void *data;             /* raw + GUARD_BYTES */
    size_t n;
    int es;
    uint32_t guard_pattern; /* what the guards hold */
};

/* Allocates b and fills guards and data with guard_pattern. Returns cudaErrorMemoryAllocation
 * (nothing allocated) so the caller can print what did not fit; any other error exits through
 * CUDA_CHECK. */
cudaError_t guarded_alloc(guarded_buf *b, size_t n, int es, uint32_t guard_pattern);
void guarded_free(guarded_buf *b);
/* Copies host bytes into the data part (n * es bytes). */
void guarded_upload(guarded_buf *b, const void *host);
/* Refills both guards with the pattern (after a launch wrote into them). */
void guarded_rearm(guarded_buf *b, cudaStream_t s);

/* Elements of the guards that no longer hold the pattern. Distances count elements from the
 * array: after[k] = k elements past the last one (0 = the first element after the end),
 * before: k elements before the first one (1 = the element just before). */
struct guard_hits {
    long before, after;          /* how many elements changed */
    long after_first, after_last;
    long before_nearest, before_farthest;
};
guard_hits guarded_check(const guarded_buf *b);
#endif

/* gpu_env.h: the GPU side of the harness that is not about grading:
 * device report, peak rates, the hang watchdog, poison fills, timing. */
#ifndef GPU_ENV_H
#define GPU_ENV_H
#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>
#include "attention.h"

typedef struct {
    cudaDeviceProp prop;
    int cc;                 /* 90 for sm_90 */
    int clock_khz;          /* max SM clock */
    double peak_fp32;       /* TFLOP/s, plain FMA */
    double peak_tensor16;   /* TFLOP/s, dense fp16/bf16 tensor cores, fp32 accumulate */
    const char *peak_source;
} gpu_env;

/* Finds the GPU, prints the report (name, compute capability, SMs, shared
 * memory per block, the build's target) and checks this binary has code for
 * it. On failure prints why and exits EXIT_NO_GPU. */
void gpu_init(gpu_env *g, int quiet);
/* A lesson built for one architecture only (lesson_info.needs_cc, e.g. 90 for sm_90a):
 * on any other GPU prints "lesson NN needs a Hopper GPU (sm_90); this GPU is sm_XY" and
 * exits EXIT_NO_GPU. needs_cc = 0 accepts every GPU. */
void gpu_require_cc(const gpu_env *g, int lesson, int needs_cc);
double gpu_peak(const gpu_env *g, dtype_t dtype); /* the peak a lesson of this dtype is held to */

/* Waits for `stream` while polling; a launch still running after timeout_s is
 * reported as a hang and the process exits EXIT_TIMEOUT (the driver tears the
 * context down). CUDA errors exit through CUDA_CHECK. */
void wait_stream(cudaStream_t stream, double timeout_s, const char *what);

/* Fills n elements of `elem_bytes` (1, 2 or 4) bytes each with `pattern`. */
void fill_pattern(void *p, size_t n, int elem_bytes, uint32_t pattern, cudaStream_t s);

/* Median milliseconds of `reps` launches of fn(arg) after `warmup` untimed
 * ones, with L2 flushed (a max(2x L2, 64 MiB) buffer read, which leaves L2 clean)
 * before each timed launch, outside the events. */
double time_launches(int (*fn)(void *), void *arg, cudaStream_t s, int warmup, int reps,
                     double timeout_s, const gpu_env *g);
#endif

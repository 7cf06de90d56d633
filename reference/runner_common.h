/* runner_common.h: what the forward runner (runner_attention.cu) and the backward runner
 * (runner_backward.cu) share that is not about buffers (buffers.h) or the device (gpu_env.h):
 * the lesson's declared capabilities as text, the command-line checks against them, the
 * --fuzz shapes, the verdict pattern over cases, the CSV row, and the out-of-memory refusal
 * made before anything is allocated. C++ (the runners are .cu files). */
#ifndef RUNNER_COMMON_H
#define RUNNER_COMMON_H
#include <stddef.h>
#include <stdint.h>
#include <string>
#include <vector>
#include "attention.h"
extern "C" {
#include "cli.h"
}

/* One graded or timed shape. qscale multiplies Q: 30 puts the logits around +-100, where a
 * softmax without max subtraction overflows and fp32 loses about 1e-4 relative. */
struct shape_case {
    const char *name;
    int B, H, N, d, causal;
    float qscale;
};

bool lesson_supports_d(int d);
std::string lesson_head_dims(); /* "64, 128" */
std::string lesson_dtypes();    /* "fp16, bf16" */

/* The checks every runner makes on the parsed options against what LESSON declares:
 * --causal, --dtype, --dim. Prints "<prog>: ..." with the valid values and returns
 * EXIT_USAGE, or returns 0. `causal_from` names the lesson where causal masking starts, for
 * the message. */
int check_lesson_options(const options &o, const char *prog, const char *causal_from);

/* --fuzz K: K random valid shapes, B 1..4, H 1..6, N log-uniform in 1..4096 (ragged tiles and
 * tiny N come up often), a head dim the lesson declares, causal at random where supported,
 * x30 logits in about 15% of them. Deterministic in seed. */
std::vector<shape_case> fuzz_shapes(int K, uint64_t seed);

/* The per-case seed, from the run's seed and everything that identifies the case. */
uint64_t case_seed(uint64_t run_seed, const shape_case &c, int dtype);

/* What the failing cases have in common, when that points at a cause: only the causal ones
 * ("diagnosis: only the causal cases fail ..."), or only those whose N is not a multiple of
 * 16 (a ragged last tile). Prints nothing when no case failed or no pattern shows.
 * `what_causal` / `what_ragged` finish the sentence with where to look in this kind of
 * lesson; NULL gives the forward pass's wording. */
struct case_outcome { int N, causal, pass; };
void print_failure_pattern(const std::vector<case_outcome> &v, const char *what_causal, const char *what_ragged);

/* The --csv output: CSV_HEADER, then one row. ms < 0: the timing columns stay empty. */
void print_csv_row(const char *status, int passed, int total, int dtype, const shape_case &c, double ms,
                   double tflops, double peak_pct, size_t mem_bytes);

/* Exits EXIT_OOM with a message ("out of memory: B=.. H=.. N=.. d=.. fp16 needs 3.2 GiB of
 * device memory for <what>; the GPU has 1.1 GiB free ...") when `device_bytes` exceeds the
 * free device memory or `host_bytes` the machine's physical memory. Called before any
 * allocation, so that a shape far beyond the GPU is a clear refusal, not a bad_alloc. */
void require_memory(const shape_case &c, int dtype, size_t device_bytes, size_t host_bytes, const char *what);
#endif

/* runner_common.cu: shared by the forward and backward runners (runner_common.h). */
#include "runner_common.h"
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include "cuda_check.h"
extern "C" {
#include "rng.h"
}

bool lesson_supports_d(int d) {
    for (int k = 0; k < 8 && LESSON.head_dims[k]; ++k)
        if (LESSON.head_dims[k] == d) return true;
    return false;
}

std::string lesson_head_dims() {
    std::string s;
    for (int k = 0; k < 8 && LESSON.head_dims[k]; ++k) s += (k ? ", " : "") + std::to_string(LESSON.head_dims[k]);
    return s;
}

std::string lesson_dtypes() {
    std::string s;
    for (int t = 0; t < DTYPE_COUNT; ++t)
        if (LESSON.dtypes & DTYPE_BIT(t)) s += std::string(s.empty() ? "" : ", ") + dtype_name(t);
    return s;
}

int check_lesson_options(const options &o, const char *prog, const char *causal_from) {
    if (o.causal && !LESSON.causal) {
        fprintf(stderr, "%s: lesson %02d does not support --causal (causal masking starts in %s)\n", prog,
                LESSON.number, causal_from);
        return EXIT_USAGE;
    }
    if (o.dtype >= 0 && !(LESSON.dtypes & DTYPE_BIT(o.dtype))) {
        fprintf(stderr, "%s: --dtype %s is not supported by lesson %02d: expected one of %s\n", prog,
                dtype_name(o.dtype), LESSON.number, lesson_dtypes().c_str());
        return EXIT_USAGE;
    }
    if (o.shape_given && !lesson_supports_d(o.d)) {
        fprintf(stderr, "%s: --dim %d is not supported by lesson %02d: expected one of %s\n", prog, o.d,
                LESSON.number, lesson_head_dims().c_str());
        return EXIT_USAGE;
    }
    return 0;
}

std::vector<shape_case> fuzz_shapes(int K, uint64_t seed) {
    rng_t r;
    rng_seed(&r, seed ^ 0xf122);
    int nd = 0;
    while (nd < 8 && LESSON.head_dims[nd]) ++nd;
    std::vector<shape_case> v;
    for (int k = 0; k < K; ++k) {
        shape_case c = {"fuzz", 1 + (int)(rng_next(&r) % 4), 1 + (int)(rng_next(&r) % 6),
                        (int)exp(rng_uniform(&r) * log(4096.0)) + (int)(rng_next(&r) % 2),
                        LESSON.head_dims[rng_next(&r) % nd], LESSON.causal ? (int)(rng_next(&r) % 2) : 0,
                        rng_uniform(&r) < 0.15 ? 30.f : 1.f};
        if (c.N > 4096) c.N = 4096;
        v.push_back(c);
    }
    return v;
}

uint64_t case_seed(uint64_t run_seed, const shape_case &c, int t) {
    return rng_mix(run_seed, ((uint64_t)c.B << 40) ^ ((uint64_t)c.H << 28) ^ ((uint64_t)c.N << 8) ^ c.d ^
                                 ((uint64_t)c.causal << 62) ^ ((uint64_t)t << 60) ^ (c.qscale != 1.f));
}

void print_failure_pattern(const std::vector<case_outcome> &v, const char *what_causal, const char *what_ragged) {
    int fail = 0, fail_nc = 0, pass_nc = 0, fail_aligned = 0, pass_aligned = 0;
    for (const case_outcome &o : v) {
        fail += !o.pass;
        if (!o.causal) { fail_nc += !o.pass; pass_nc += o.pass; }
        if (o.N % 16 == 0) { fail_aligned += !o.pass; pass_aligned += o.pass; }
    }
    if (fail == 0) return;
    if (!what_causal)
        what_causal = "check the causal mask (key j is visible to query i iff j <= i, the diagonal included), which "
                      "K/V tiles are skipped above the diagonal, and which tiles get the element-wise mask";
    if (!what_ragged)
        what_ragged = "check the last, partial tiles: keys >= N need a score of -inf, rows >= N must not be read "
                      "or written";
    if (fail_nc == 0 && pass_nc > 0)
        printf("diagnosis: only the causal cases fail, every non-causal one passes: %s\n", what_causal);
    else if (fail_aligned == 0 && pass_aligned > 0 && fail > 1)
        printf("diagnosis: only the cases whose N is not a multiple of 16 fail (those whose N is pass): %s\n",
               what_ragged);
}

/* The columns CSV_HEADER has beyond the first 14 (columns are only ever added at the end), as
 * this runner fills them: N_kv and H_kv are N and H for an ordinary shape, ragged is 0, anything
 * else (a rate only the forward runner measures) stays empty. */
static std::string extra_columns(const shape_case &c) {
    std::string h = CSV_HEADER, out;
    size_t at = 0;
    for (int k = 0; k < 14 && at != std::string::npos; ++k) at = h.find(',', at + (k ? 1 : 0));
    while (at != std::string::npos) {
        const size_t next = h.find(',', at + 1);
        const std::string col = h.substr(at + 1, next == std::string::npos ? std::string::npos : next - at - 1);
        out += "," + (col == "N_kv" ? std::to_string(c.N) : col == "H_kv" ? std::to_string(c.H)
                      : col == "ragged" ? std::string("0") : std::string());
        at = next;
    }
    return out;
}

void print_csv_row(const char *status, int passed, int total, int dt, const shape_case &c, double ms,
                   double tflops, double pct, size_t mem) {
    printf("%s\n", CSV_HEADER);
    if (ms >= 0)
        printf("%s,%s,%d,%d,%s,%d,%d,%d,%d,%d,%.4f,%.2f,%.1f,%zu%s\n", LESSON.name, status, passed, total,
               dtype_name(dt), c.B, c.H, c.N, c.d, c.causal, ms, tflops, pct, mem, extra_columns(c).c_str());
    else
        printf("%s,%s,%d,%d,%s,%d,%d,%d,%d,%d,,,,%s\n", LESSON.name, status, passed, total, dtype_name(dt), c.B,
               c.H, c.N, c.d, c.causal, extra_columns(c).c_str());
}

void require_memory(const shape_case &c, int dt, size_t device_bytes, size_t host_bytes, const char *what) {
    size_t free_b = 0, total_b = 0;
    CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
    if (device_bytes > free_b) {
        fprintf(stderr, "out of memory: B=%d H=%d N=%d d=%d %s needs %.2f GiB of device memory for %s; the GPU has "
                "%.2f GiB free. Use a smaller --batch/--heads/--seq.\n", c.B, c.H, c.N, c.d, dtype_name(dt),
                device_bytes / 1073741824.0, what, free_b / 1073741824.0);
        exit(EXIT_OOM);
    }
    const size_t host_total = (size_t)sysconf(_SC_PHYS_PAGES) * (size_t)sysconf(_SC_PAGESIZE);
    if (host_bytes > host_total) {
        fprintf(stderr, "out of memory: B=%d H=%d N=%d d=%d %s needs %.2f GiB of host memory to grade; this "
                "machine has %.2f GiB. Use a smaller --batch/--heads/--seq.\n", c.B, c.H, c.N, c.d, dtype_name(dt),
                host_bytes / 1073741824.0, host_total / 1073741824.0);
        exit(EXIT_OOM);
    }
}

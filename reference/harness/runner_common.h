/* runner_common.h: what every runner (the skeleton, runner_main.cu, and the kinds: forward and
 * decode, runner_attention.cu; backward, runner_backward.cu) shares that is not about buffers
 * (buffers.h), the device (gpu_env.h) or grading (runner_grade.h): the command line checked
 * against what the lesson declares, the case matrices and the --fuzz shapes, the per-case seed,
 * what the failing cases have in common, the verdict and rerun lines, the CSV row, and the
 * out-of-memory refusals made before anything is allocated. C++ (the runners are .cu files). */
#ifndef RUNNER_COMMON_H
#define RUNNER_COMMON_H
#include <stddef.h>
#include <stdint.h>
#include <string>
#include <vector>
#include "attention.h"
#include "buffers.h"
#include "gpu_env.h"
extern "C" {
#include "cli.h"
}

/* One graded or timed shape. qscale multiplies Q: 30 puts the logits around +-100, where a
 * softmax without max subtraction overflows and fp32 loses about 1e-4 relative. */
struct shape_case {
    const char *name;
    int B, H, N, d, causal;
    float qscale;
    /* Decode shapes (LESSON_DECODE lessons; attention.h): K and V are [B, H_kv, N_kv, d].
     * 0 in a case list means N_kv = N, H_kv = H (normalized() fills them in). */
    int N_kv, H_kv;
    int ragged; /* 1: per-sequence KV lengths drawn from the case seed (seqlens_kv) */
    /* FP8 inputs (dtype e4m3; attention.h, attn_fp8): outliers (0.1% of the inputs x10, any
     * dtype), and how e4m3 inputs are quantized: one scale per tensor instead of per block of
     * FP8_BLOCK_ROWS rows, Q and K rotated by the Hadamard matrix first. From the command line
     * (--outliers, --quant tensor, --hadamard) or the case matrix (the outlier case). */
    int outliers, fp8_tensor, hadamard;
    /* A lesson that runs over ranks (ranks_lesson): the P it is asked for (attention_set_ranks),
     * which the rerun line repeats as --ranks P; 0 for every other lesson, and where the
     * transport fixes the ranks (one per GPU). */
    int ranks;
    /* The serving layouts (attention.h). page_size > 0: a decode shape whose K and V are read
     * through a block table from a pool of pages of page_size keys (LESSON_PAGED_KV lessons), the
     * pool's pages drawn from the case seed. seqlens_q non-empty: a packed batch (LESSON_VARLEN
     * lessons) of B = seqlens_q.size() sequences, sequence b with seqlens_q[b] queries and
     * seqlens_k[b] keys; N and N_kv then hold the most of each (normalized() sets them). */
    int page_size;
    std::vector<int> seqlens_q, seqlens_k;
    /* FP8 inputs: every query's scores peak at key 0 (reference/cpu/fp8.h, fp8_peak_at_key0),
     * from the command line (--peaked) or the case matrix (the peaked case). */
    int peaked;
};
shape_case normalized(shape_case c);
/* A shape only a decode lesson takes: N_kv != N, grouped heads (H_kv < H), or ragged lengths. */
bool is_decode(const shape_case &c);
/* A packed batch (shape_case's seqlens_q), and a paged KV cache (page_size). */
bool is_varlen(const shape_case &c);
bool is_paged(const shape_case &c);
/* The lesson declares LESSON_DECODE (lesson 12), or LESSON_PAGED_KV, which comes with the decode
 * shapes. */
bool decode_lesson();
/* The lesson declares LESSON_PAGED_KV: --paged and the paged cases are its. */
bool paged_lesson();
/* The lesson declares LESSON_VARLEN: --varlen, --seqlens and the packed cases are its. */
bool varlen_lesson();
/* The lesson declares DTYPE_E4M3 (lesson 14): the FP8 options and the outlier case are its. */
bool fp8_lesson();
/* The lesson runs over ranks: it defines attention_set_ranks (attention_ranks.h; lesson 15's
 * ring). --ranks, the grading at several P and the "ring" case are its. */
bool ranks_lesson();

/* The program name the rerun lines print ("lesson3"); set by runner_options. */
extern const char *runner_prog;

bool lesson_supports_d(int d);
std::string lesson_head_dims(); /* "64, 128" */
std::string lesson_dtypes();    /* "fp16, bf16" */

/* Parses the command line and checks it against what LESSON declares, in this order: --causal
 * (`causal_from` names the lesson where causal masking starts), the decode options (refused,
 * naming lesson 12, unless decode_lesson), the FP8 options (naming lesson 14, unless the lesson
 * takes e4m3), --ranks (naming lesson 15, unless ranks_lesson), --paged (unless paged_lesson),
 * --varlen and --seqlens (unless varlen_lesson), the shape (resolve_varlen for a packed batch;
 * else resolve_shape: a decode lesson's defaults, H_kv dividing H, causal N_kv >= N), --dtype,
 * --dim (always checked for a decode lesson, whose default d is its own). --help prints the usage and then `help_note` (NULL: nothing).
 * Returns -1 when the runner should go on, else the exit status (0 after --help, EXIT_USAGE
 * after a message "<prog>: ..." naming the option and its valid values). */
int runner_options(int argc, char **argv, options &o, const char *causal_from, const char *help_note);

/* The ranks a ranks lesson is graded on (runner_main.cu), each confirmed by the lesson's
 * attention_set_ranks: P, --ranks or else each of ATTN_RANKS_GRADED (in that order; the timed
 * shape runs on the first), and nothing to set ({0}) for any other lesson. Where the lesson's
 * transport fixes its ranks (one per GPU) P is {0} too and `fixed` their number; then --ranks
 * is refused, exit EXIT_USAGE, naming how to get the virtual ring. Call after runner_gpu_init. */
struct rank_plan {
    std::vector<int> P;
    int fixed;
};
rank_plan runner_ranks(const options &o);
/* Asks the lesson for P ranks (attention_set_ranks) when P > 0; nothing otherwise. */
void set_ranks(int P);
/* A ring's fault mode (attention_ranks.h): in grading, --ring-delay-us or ATTN_RING_DELAY_GRADED;
 * in timing, off. Nothing for a lesson without attention_set_ring_delay. */
void set_ring_faults(const options &o, bool grading);
/* ", transfers delayed U us (--ring-delay-us)" while grading in the fault mode, else "". */
std::string ring_fault_text(const options &o);

/* Finds the GPU (gpu_init: exits EXIT_NO_GPU without one), refuses a GPU the lesson's code does
 * not run on (LESSON.needs_cc), and returns the free device memory before any case: the
 * baseline of the memory a timed method holds. */
size_t runner_gpu_init(gpu_env &g, const options &o);

/* The timed shape: the command line's (the course's bench shape by default, a decode lesson's
 * decode step, in pages of PAGED_BENCH_PAGE keys for a paged lesson, a varlen lesson's packed
 * batch of VARLEN_BENCH_* drawn from the run's seed when it takes no decode shapes), at d = 64
 * when the lesson has it and no -d was given; with the command line's FP8 options (outliers,
 * fp8_tensor, hadamard). */
shape_case bench_shape(const options &o);

/* The fixed case matrix: tiny, N = 1, N not a multiple of any tile, several B*H, both ends of
 * the supported head dims, x30 logits, the bench shape; causal versions where the lesson
 * supports it (with `causal_edges`, also causal N = 1 and N = 77 at the largest d, which the
 * backward's dependency tests need). A decode lesson gets its own matrix instead: KV length 1,
 * group sizes 1, 4, 8, one and 16 new queries, ragged lengths, causal aligned to the end, x30,
 * long caches split many ways, three ordinary shapes, the decode bench shape. A paged lesson
 * (paged_lesson) also gets paged versions of decode shapes: page sizes 8 to 1024, sequences that
 * end inside a page, one key, causal queries whose keys span pages, GQA, ragged lengths; a varlen
 * lesson (varlen_lesson) packed batches: lengths from 1 to 2000 in one batch, GQA, causal, chunked
 * prefill (more keys than queries, causal aligned bottom-right), x30, 40 short sequences. An FP8
 * lesson (fp8_lesson) also gets FlashAttention-3's outlier case; a ranks lesson (ranks_lesson) a
 * "ring" shape, causal and not, that every P up to ATTN_MAX_RANKS cuts into equal chunks (2P
 * of them when causal), where the matrix's other lengths suit few rings (300 is the only one
 * three ranks split). */
std::vector<shape_case> case_matrix(bool causal_edges);

/* --fuzz K: K random valid shapes, deterministic in seed. B 1..4, H 1..6, N log-uniform in
 * 1..4096 (ragged tiles and tiny N come up often), a head dim the lesson declares, causal at
 * random where supported, x30 logits in about 15%. A decode lesson's: B 1..4, H_kv 1..4, group
 * size 1, 2, 4 or 8, N_kv log-uniform in 1..32768; three in four are decode steps (N 1..16),
 * the rest ordinary (N = N_kv up to 512); ragged lengths in 40%, causal in half; a paged
 * lesson's in pages of 8..256 keys in 40%. A varlen lesson's shapes are packed batches in one of
 * three: 1..6 sequences of log-uniform lengths in 1..2048, a third of them chunked (up to 2048
 * more keys than queries), H_kv 1..4, group size 1, 2 or 4. */
std::vector<shape_case> fuzz_shapes(int K, uint64_t seed);

/* The per-case seed, from the run's seed and everything that identifies the case, so that the
 * rerun line (the same shape on the command line) draws the same inputs. A decode shape mixes
 * in its decode part; every other case keeps the seed it always had. */
uint64_t case_seed(uint64_t run_seed, const shape_case &c, int dtype);

/* "B=2 H=8 N=1 d=128" and, for a decode shape, " N_kv=1000 H_kv=2 ragged". */
std::string shape_text(const shape_case &c);
/* " on 3 ranks" for a case of a ranks lesson asked for P = 3 ranks (shape_case's ranks), else "". */
std::string ranks_text(const shape_case &c);
/* " x30 logits" for a case whose Q is scaled (qscale != 1), "" otherwise. */
std::string logits_text(const shape_case &c);

/* What the failing cases have in common, when that points at a cause: first, for a lesson that
 * takes the serving layouts, only the paged ones, only the packed ones, only the chunked-prefill
 * ones; then only the causal ones
 * ("diagnosis: only the causal cases fail ..."), or only those whose N is not a multiple of
 * 16 (a ragged last tile); for a decode lesson only the grouped-query ones, only the ragged
 * ones, only the causal ones, only the long ones (the split of the keys), only the decode
 * shapes, only those whose KV length is not a multiple of 16. Prints nothing when no case
 * failed or no pattern shows. `what_causal` / `what_ragged` finish the first two sentences
 * with where to look in this kind of lesson; NULL gives the forward pass's wording. */
struct case_outcome {
    int N, causal, pass;
    int gqa, ragged, decode; /* H_kv < H; per-sequence lengths; N_kv != N or either of those (not packed) */
    int keys_aligned;        /* every sequence's KV length is a multiple of 16 */
    int N_kv;
    int ranks;               /* the P a ranks lesson was asked for (shape_case's ranks) */
    int paged, varlen;       /* K and V through a block table; a packed batch */
    int chunked;             /* a packed batch with a sequence of more keys than queries */
    int peaked;              /* FP8's peaked inputs (shape_case's peaked) */
};
case_outcome outcome_of(const shape_case &c, bool pass);
void print_failure_pattern(const std::vector<case_outcome> &v, const char *what_causal, const char *what_ragged);

/* "          rerun: ./lessonN -b .. -H .. -n .. -d .. [--kv-seq .. --kv-heads .. --ragged] --dtype ..
 * [--causal] --seed S --check-only": the line under a failing case. */
void print_rerun(const shape_case &c, int dtype, uint64_t run_seed);

/* The verdict line of one graded case, flushed: "    pass  NAME DTYPE  SHAPE[ causal][ x30 logits]
 * DETAIL" when ok, else the rerun line (the FAIL lines are the grader's, printed before). */
void print_case_line(bool ok, const shape_case &c, int dtype, const std::string &detail, uint64_t run_seed);

/* What a runner does with an entry point's return code other than ATTN_OK: nothing for
 * ATTN_NOT_IMPLEMENTED (the caller says it), exit EXIT_OOM for ATTN_OUT_OF_MEMORY, exit
 * EXIT_FAILED for anything else, naming `entry` ("attention_forward"). */
void report_entry_rc(int rc, const char *entry);

/* The timing of a runner's timed shape. gbps: bytes of K and V read per second (decode lessons). */
struct run_timing { double ms, tflops, pct, gbps; size_t mem, unwritten; };
/* "Causal: 1.234 ms, ...; non-causal time / causal time = 1.8x (2x is the most skipping can give)" */
void print_causal_ratio(const run_timing &causal, double noncausal_ms);

/* The --csv output: CSV_HEADER, then one row. ms < 0: the timing columns stay empty;
 * kv_gbps < 0: so does kv_gbps. The decode columns come from c (N, H, 0 for an ordinary shape). */
void print_csv_row(const char *status, int passed, int total, int dtype, const shape_case &c, double ms,
                   double tflops, double peak_pct, size_t mem_bytes, double kv_gbps);

/* Exits EXIT_OOM with a message ("out of memory: B=.. H=.. N=.. d=.. fp16 needs 3.2 GiB of
 * device memory for <what>; the GPU has 1.1 GiB free ...") when `device_bytes` exceeds the
 * free device memory or `host_bytes` the machine's physical memory. Called before any
 * allocation, so that a shape far beyond the GPU is a clear refusal, not a bad_alloc. */
void require_memory(const shape_case &c, int dtype, size_t device_bytes, size_t host_bytes, const char *what);

/* guarded_alloc, or exit EXIT_OOM with "out of memory: B=.. H=.. N=.. d=.. fp16: <what> needs
 * 12.0 MiB; use a smaller ..." when the allocation does not fit (memory taken since
 * require_memory looked, or fragmentation). */
void guarded_alloc_or_exit(guarded_buf *b, size_t n, int es, uint32_t pattern, const shape_case &c, int dtype,
                           const char *what);
#endif

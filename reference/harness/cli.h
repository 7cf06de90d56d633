/* cli.h: the command line shared by every lesson binary. */
#ifndef CLI_H
#define CLI_H
#include <stddef.h>
#include <stdint.h>

#define BENCH_B 8    /* GPT-2 small layer: the course's default bench shape */
#define BENCH_H 12
#define BENCH_N 1024
#define BENCH_D 64

/* Lessons that take decode shapes (LESSON_DECODE, lesson 12) time a decoding step instead:
 * one new query per sequence against a 16k-token KV cache, grouped-query attention with 32
 * query heads on 8 K/V heads (Llama-3-8B's layout), d = 128. */
#define DECODE_BENCH_B 8
#define DECODE_BENCH_H 32
#define DECODE_BENCH_HKV 8
#define DECODE_BENCH_N 1
#define DECODE_BENCH_NKV 16384
#define DECODE_BENCH_D 128

/* Lessons that take packed batches (LESSON_VARLEN) time FlashAttention's varlen benchmark when
 * --varlen gives no -b/-n: lengths drawn log-uniform up to 16384 until they hold the tokens of a
 * rectangular batch of B = 16 sequences of N = 4096, 16 heads, d = 128. A lesson that reads a
 * paged KV cache (LESSON_PAGED_KV) times the decode step above in pages of 64 keys. */
#define VARLEN_BENCH_B 16
#define VARLEN_BENCH_N 4096
#define VARLEN_BENCH_MAX 16384
#define VARLEN_BENCH_H 16
#define VARLEN_BENCH_D 128
#define PAGED_BENCH_PAGE 64

/* Limits, shown in the refusals. */
#define MAX_B 4096
#define MAX_H 1024
#define MAX_N (1 << 20)
#define MAX_D 256
#define MAX_REPS 100000

/* The --csv header every lesson binary prints; make grade, make results and make bench read it
 * by position, so columns are only ever added at the end. The last four are filled by the
 * forward runner: the keys per K/V slice N_kv and the K/V heads H_kv (N and H for an ordinary
 * shape), ragged (1: per-sequence KV lengths), and kv_gbps, the bytes of K and V the timed
 * shape reads (every key some query sees, once) per second, in GB/s. For a packed batch
 * (LESSON_VARLEN) B is its number of sequences, N and N_kv the most queries and keys of one. */
#define CSV_HEADER "lesson,status,cases_passed,cases_total,dtype,B,H,N,d,causal,ms,tflops,peak_pct,mem_bytes," \
                   "N_kv,H_kv,ragged,kv_gbps"

typedef struct {
    int B, H, N, d;
    int shape_given;      /* any of -b/-H/-n/-d given: grade and time that one shape */
    int causal;
    int dtype;            /* -1: every dtype the lesson supports */
    uint64_t seed;
    int seed_given;
    int reps, warmup;
    double timeout_s;     /* per launch; a kernel running longer is reported as a hang */
    int check_only, bench_only, csv;
    int fuzz;             /* >0: grade this many random valid shapes instead of the matrix */
    float logit_scale;    /* --logit-scale: Q multiplied by it (1: not given; the matrix's x30 case: 30) */
    /* Decode shapes (lessons with LESSON_DECODE): 0 = not given (resolve_shape fills them). */
    int N_kv;             /* --kv-seq: keys per K/V slice, the longest sequence */
    int H_kv;             /* --kv-heads: K/V heads, dividing H */
    int ragged;           /* --ragged: per-sequence KV lengths drawn from the seed */
    /* FP8 inputs (--dtype e4m3; lesson 14): how the harness quantizes them (attention.h, attn_fp8). */
    int quant_tensor;     /* --quant tensor: one scale per tensor (default block: FP8_BLOCK_ROWS rows) */
    int hadamard;         /* --hadamard: Q and K rotated along d before quantizing */
    int outliers;         /* --outliers: 0.1% of the inputs x10 */
    int peaked;           /* --peaked: every query's scores peak at key 0 (fp8.h, fp8_peak_at_key0) */
    /* A lesson that runs over ranks (attention_ranks.h; lesson 15): --ranks P, 0 when not given;
     * --transport (ATTN_TRANSPORT_*, 0 when not given: the lesson's choice); --ring-delay-us, the
     * fault mode's delay in microseconds (-1 when not given: ATTN_RING_DELAY_GRADED in grading). */
    int ranks;
    int transport;
    int ring_delay_us;
    /* The serving layouts (attention.h). A paged KV cache (lessons with LESSON_PAGED_KV): --paged,
     * with the decode shapes above. A packed batch (lessons with LESSON_VARLEN): --varlen MAX draws
     * the lengths (resolve_varlen), --seqlens gives them; then B = n_seqs, N and N_kv are the most
     * queries and keys of a sequence, and sequence b has seqlen_q[b] queries, seqlen_k[b] keys. */
    int page_size;        /* --paged: keys per page, a power of two in ATTN_PAGE_MIN..ATTN_PAGE_MAX; 0: contiguous */
    int varlen_max;       /* --varlen: the longest length drawn; 0: not given */
    int n_seqs;           /* sequences of the packed batch; 0: none */
    int seqlen_q[MAX_B], seqlen_k[MAX_B];
    unsigned given;       /* GIVEN_* bits: which shape options the command line set */
} options;

enum { GIVEN_B = 1u << 0, GIVEN_H = 1u << 1, GIVEN_N = 1u << 2, GIVEN_D = 1u << 3,
       GIVEN_NKV = 1u << 4, GIVEN_HKV = 1u << 5, GIVEN_RAGGED = 1u << 6, GIVEN_FP8 = 1u << 7,
       GIVEN_PAGED = 1u << 8, GIVEN_VARLEN = 1u << 9 };
#define GIVEN_DECODE (GIVEN_NKV | GIVEN_HKV | GIVEN_RAGGED)

/* Parses argv into *o (defaults first). Returns 0 on success, 1 when --help was
 * printed, 2 on a bad value (a message naming the option and its valid range is
 * written to err). Never exits. */
int parse_options(int argc, char **argv, options *o, char *err, size_t errlen);
/* The shape after parse_options, for a lesson that takes decode shapes (decode = 1) or not.
 * An ordinary lesson: N_kv = N, H_kv = H (its runner refuses the decode options before this).
 * A decode lesson: options not given take the decode bench shape (DECODE_BENCH_*), except that
 * H_kv defaults to H when -H was given, and N_kv to N when -n was. Then checks what only the
 * whole shape can show: H_kv must divide H (query head h reads K/V head h / (H / H_kv)), and
 * with --causal N_kv >= N (query i sees keys j <= N_kv - N + i: each must see at least one).
 * Returns 0, or 2 with a message in err naming the options and the valid values. */
int resolve_shape(options *o, int decode, char *err, size_t errlen);
/* The packed batch after parse_options, for a lesson that takes one (--varlen or --seqlens given;
 * instead of resolve_shape). Refuses the decode options (--kv-seq, --ragged) and --paged beside
 * it, and -b/-n beside --seqlens (the list is the batch). --varlen: the lengths drawn from the seed
 * until they hold B x N tokens (-b, -n; VARLEN_BENCH_B x VARLEN_BENCH_N when not given), at most
 * MAX_B sequences. H defaults to VARLEN_BENCH_H, d to default_d, H_kv to H, which it must divide;
 * with --causal each sequence needs seqlen_k >= seqlen_q (aligned bottom-right). Sets B = n_seqs,
 * N, N_kv = the most queries, keys of a sequence. Returns 0, or 2 with a message in err naming
 * the options and the valid values. */
int resolve_varlen(options *o, int default_d, char *err, size_t errlen);
void print_usage(const char *prog, int cpu_lesson);
const char *dtype_name(int dtype);
int dtype_from_name(const char *s); /* -1 if unknown */
#endif

/* attention_serving.h: the checks of the serving layouts of attention.h (a paged KV cache: block_table;
 * a packed batch: cu_seqlens_q, cu_seqlens_k), on host copies of those arrays; and the optional entry
 * point that appends a decoding step's keys to a paged cache (attention_append_kv, at the end).
 *
 * The harness runs them on what it builds before every call of attention_forward, and refuses
 * to call the lesson with what they refuse (reference/harness/runner_attention.cu,
 * runner_varlen.cu); a lesson, or a serving loop around it, may run them on its own arrays
 * before it uploads them: a kernel that trusts a bad table reads another sequence's keys, or
 * outside the pool, without a word. Plain C; implemented in reference/harness/serving.c, which
 * every lesson binary links. */
#ifndef ATTENTION_SERVING_H
#define ATTENTION_SERVING_H
#include <stddef.h>
#include "attention.h" /* dtype_t */

/* The page sizes of a paged KV cache: the powers of two from ATTN_PAGE_MIN to ATTN_PAGE_MAX keys
 * (vLLM's block sizes are 8 .. 256, FlashAttention-3's page sizes any multiple of its tile). */
#define ATTN_PAGE_MIN 8
#define ATTN_PAGE_MAX 1024

#ifdef __cplusplus
extern "C" {
#endif

/* 1 when page_size is a power of two in ATTN_PAGE_MIN .. ATTN_PAGE_MAX. */
int attn_page_size_valid(int page_size);

/* Checks a paged KV cache of B sequences (attention.h, block_table): page_size valid; every length
 * seqlens_kv[b] in 1..N_kv (seqlens_kv NULL: N_kv each); max_pages entries enough for each
 * sequence's ceil(len / page_size) pages; each of those entries a page of the pool, 0..num_pages - 1;
 * no page in two entries (two sequences, or twice in one). block_table is [B, max_pages], host ints;
 * the entries past a sequence's pages are not read. Returns 0 when all hold, else 1 with one
 * sentence in err (NUL-terminated, at most errlen bytes) naming the entry, the sequence and the
 * valid values. */
int attn_check_paged(const int *block_table, const int *seqlens_kv, int B, int N_kv, int page_size, int max_pages,
                     int num_pages, char *err, size_t errlen);

/* Checks the offsets of a packed batch of B sequences (attention.h, cu_seqlens_q, cu_seqlens_k;
 * [B + 1] host ints each): each starts at 0 and increases (every sequence has at least one query
 * and one key), ends at total_q (total_k), and no sequence has more than max_seqlen_q queries
 * (max_seqlen_k keys); with causal (aligned bottom-right) no sequence has more queries than keys,
 * since its query 0 would see none. Returns 0 when all hold, else 1 with one sentence in err
 * naming the offset, the sequence and the valid values. */
int attn_check_varlen(const int *cu_seqlens_q, const int *cu_seqlens_k, int B, int total_q, int total_k,
                      int max_seqlen_q, int max_seqlen_k, int causal, char *err, size_t errlen);

/* ---- the append of a decoding step's keys (an optional entry point beside attention_forward) ----
 * A lesson that reads a paged KV cache may also define attention_append_kv: it writes the n_new
 * newest keys of every sequence, given contiguously, into their rows of the pools (vLLM's
 * reshape_and_cache, FlashAttention's k_new / v_new of flash_attn_with_kvcache). It allocates no
 * page: the table already names the page of every key the lengths count. The harness then grades
 * it in every paged case: it uploads the pools without those rows (NaN there), calls
 * attention_append_kv and attention_forward on the same stream before each graded run, checks the
 * pools element by element afterwards, and names the sequence, key and page of a row written
 * wrong or not at all (reference/harness/runner_attention.cu, runner_serving.cu); every other
 * lesson leaves it undefined. */
typedef struct {
    int B, H_kv, d;
    dtype_t dtype;             /* of K_new, V_new and the pools (fp16, bf16) */
    int n_new;                 /* new keys per sequence: 1 <= n_new <= each sequence's length */
    const void *K_new, *V_new; /* [B, n_new, H_kv, d] device: new token t of sequence b, K/V head h_kv, at
                                  ((b * n_new + t) * H_kv + h_kv) * d */
    void *K, *V;               /* the pools [num_pages, page_size, H_kv, d] (attention.h) */
    const int *block_table;    /* [B, max_pages] device ints, as attention.h's */
    int page_size, max_pages, num_pages;
    const int *seqlens_kv;     /* [B] device ints, or NULL: N_kv each. The lengths after the append (the
                                  ones attention_forward then takes): token t becomes key len - n_new + t */
    int N_kv;
    void *stream;              /* a cudaStream_t: launch on it, do not synchronize */
} attn_append_args;

/* Launches the append on a->stream; returns ATTN_OK, or ATTN_UNSUPPORTED for a dtype, d or page size the
 * lesson does not take. Optional: defined by lesson 16. */
int attention_append_kv(const attn_append_args *a);

#ifdef __cplusplus
}
#endif
#endif

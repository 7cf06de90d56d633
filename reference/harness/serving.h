/* serving.h: the host side of the serving layouts of attention.h (a paged KV cache, packed
 * batches) as the harness builds them: the page map it draws (a shuffled pool with spare pages),
 * the scatter of a contiguous K or V into that pool, the lengths of a packed batch drawn from a
 * seed or read from a list, and the sentence naming the wrong sequences. The checks a lesson may
 * call too are attention_serving.h's (implemented here as well). Plain C: the command line
 * (cli.c), the runner (runner_attention.cu, runner_varlen.cu) and tests/unit/test_serving.c. */
#ifndef SERVING_H
#define SERVING_H
#include <stddef.h>
#include <stdint.h>
#include "attention_serving.h"

/* The pool of a paged KV cache of B sequences and its block table (attention.h). */
typedef struct {
    int B, page_size;
    int max_pages;  /* entries per sequence: ceil(N_kv / page_size) */
    int num_pages;  /* the pool: the pages the sequences use, then spare ones */
    int used;       /* pages the sequences use: sum over b of ceil(len_b / page_size) */
    int spare;      /* a page no sequence uses; the entries past each sequence's pages point at it */
    int *table;     /* [B, max_pages] */
} page_map;

/* Draws the page map of B sequences of len[b] keys (1 <= len[b] <= N_kv; len NULL: N_kv each)
 * from seed: 1 + used / 8 spare pages, the pool's pages in a random order, and no two
 * neighbouring pages of a sequence neighbours in the pool (where the pool has room for that),
 * so that a kernel that walks the pool instead of the table, or reads a page past the one it
 * should, reads another page. Returns 0, or -1 when the pool would have more than INT_MAX pages
 * or memory runs out (m then holds no table). Free with page_map_free. */
int page_map_make(page_map *m, const int *len, int B, int N_kv, int page_size, uint64_t seed);
void page_map_free(page_map *m);
/* The element offset of key j of sequence b, K/V head h_kv, in the pool [num_pages, page_size,
 * H_kv, d] through table row `row` (b itself, or another row when a diagnosis tries one):
 * ((table[row * max_pages + j / page_size] * page_size + j % page_size) * H_kv + h_kv) * d. */
size_t page_map_offset(const page_map *m, int row, int j, int h_kv, int H_kv, int d);
/* pool (num_pages * page_size * H_kv * d floats) = X ([B, H_kv, N_kv, d], contiguous) scattered
 * through the table: key rows j < len[b] at their place (page_map_offset), every other element
 * (rows past a length in a sequence's last page, spare pages) NaN. */
void page_map_scatter(const page_map *m, const float *X, const int *len, int H_kv, int N_kv, int d, float *pool);

/* Lengths of a packed batch drawn log-uniform in [1, max_len] from seed until they hold `tokens`
 * tokens, the last one cut to what is left (so it may be shorter than a draw): len[0..count).
 * Returns the count, or -1 when more than cap lengths would be needed. */
int varlen_draw(int max_len, long tokens, uint64_t seed, int *len, int cap);

/* Reads a list of sequence lengths, "128,4000,17" (as many queries as keys) or with LEN_Q:LEN_K
 * items, "16:2000,1,300:300" (a chunk of LEN_Q new queries after LEN_K - LEN_Q cached keys), each
 * length in 1..max_len, at most cap items. Returns the count, len_q and len_k filled, or -1 with
 * the reason in err (the item and what is valid). */
int parse_seqlens(const char *text, int *len_q, int *len_k, int cap, int max_len, char *err, size_t errlen);

/* Which of B sequences are wrong, in words: "only sequence 3 is wrong (4 of its 4 graded rows;
 * sequences 0..4 graded)", "sequences 1, 3 and 4 are wrong, 0 and 2 right", "every sequence is
 * wrong". bad[b], checked[b]: failing and graded rows of sequence b (a sequence with none graded
 * is left out). Returns how many sequences are wrong; writes "" when none is. */
int describe_sequences(char *out, size_t cap, const long *bad, const long *checked, int B);
#endif

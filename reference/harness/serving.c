/* serving.c: the serving layouts' checks (attention_serving.h) and host side (serving.h). */
#include "serving.h"
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "rng.h"

static long ceil_div(long a, long b) { return (a + b - 1) / b; }

int attn_page_size_valid(int page_size) {
    return page_size >= ATTN_PAGE_MIN && page_size <= ATTN_PAGE_MAX && (page_size & (page_size - 1)) == 0;
}

/* ---- the checks (attention_serving.h) ---- */

int attn_check_paged(const int *table, const int *seqlens, int B, int N_kv, int ps, int max_pages, int num_pages,
                     char *err, size_t errlen) {
    if (!attn_page_size_valid(ps)) {
        snprintf(err, errlen, "page_size %d is not valid: expected a power of two in %d..%d", ps, ATTN_PAGE_MIN,
                 ATTN_PAGE_MAX);
        return 1;
    }
    if (B < 1 || N_kv < 1 || num_pages < 1 || max_pages < 1 || !table) {
        snprintf(err, errlen, "a paged KV cache needs B >= 1 sequences, N_kv >= 1 keys, a block table of max_pages "
                 ">= 1 entries per sequence and a pool of num_pages >= 1 pages (B = %d, N_kv = %d, max_pages = %d, "
                 "num_pages = %d)", B, N_kv, max_pages, num_pages);
        return 1;
    }
    for (int b = 0; b < B; ++b) {
        const int len = seqlens ? seqlens[b] : N_kv;
        if (len < 1 || len > N_kv) {
            snprintf(err, errlen, "seqlens_kv[%d] = %d is not valid: expected 1..N_kv = 1..%d", b, len, N_kv);
            return 1;
        }
        if (ceil_div(len, ps) > max_pages) {
            snprintf(err, errlen, "sequence %d has %d keys, which take %ld pages of page_size = %d keys, but its row of "
                     "block_table has max_pages = %d entries: give max_pages >= ceil(N_kv / page_size) = %ld", b, len,
                     ceil_div(len, ps), ps, max_pages, ceil_div(N_kv, ps));
            return 1;
        }
    }
    /* owner[page] = 1 + the entry (b * max_pages + p) that holds it, 0: free */
    long *owner = calloc((size_t)num_pages, sizeof *owner);
    if (!owner) {
        snprintf(err, errlen, "out of host memory checking a block table of %d pages", num_pages);
        return 1;
    }
    int rc = 0;
    for (int b = 0; b < B && !rc; ++b) {
        const int len = seqlens ? seqlens[b] : N_kv;
        for (int p = 0; p < ceil_div(len, ps) && !rc; ++p) {
            const long e = (long)b * max_pages + p;
            const int page = table[e];
            if (page < 0 || page >= num_pages) {
                snprintf(err, errlen, "block_table[%d * max_pages + %d] = %d (sequence %d, its page %d: keys %ld..%ld) "
                         "is not a page of the pool: expected 0..num_pages - 1 = 0..%d", b, p, page, b, p, (long)p * ps,
                         (long)(p + 1) * ps - 1 < len - 1 ? (long)(p + 1) * ps - 1 : len - 1, num_pages - 1);
                rc = 1;
            } else if (owner[page]) {
                const long o = owner[page] - 1;
                snprintf(err, errlen, "page %d of the pool is in block_table twice: sequence %ld's page %ld and "
                         "sequence %d's page %d: a page holds the keys of one sequence, so each entry in use must "
                         "name a page of its own", page, o / max_pages, o % max_pages, b, p);
                rc = 1;
            } else {
                owner[page] = e + 1;
            }
        }
    }
    free(owner);
    return rc;
}

/* One array of offsets: cu[0] = 0, increasing, cu[B] = total, no step above max_len. */
static int check_offsets(const int *cu, const char *name, const char *what, int B, int total, int max_len, char *err,
                         size_t errlen) {
    if (!cu) {
        snprintf(err, errlen, "%s is NULL: a packed batch needs B + 1 offsets", name);
        return 1;
    }
    if (cu[0] != 0) {
        snprintf(err, errlen, "%s[0] = %d: the offsets start at 0 (sequence 0's first token)", name, cu[0]);
        return 1;
    }
    for (int b = 0; b < B; ++b) {
        const long n = (long)cu[b + 1] - cu[b];
        if (n < 1 || n > max_len) {
            snprintf(err, errlen, "%s[%d] = %d after %s[%d] = %d gives sequence %d %ld %s: offsets must increase, each "
                     "sequence by 1..max_seqlen = 1..%d %s", name, b + 1, cu[b + 1], name, b, cu[b], b, n, what,
                     max_len, what);
            return 1;
        }
    }
    if (cu[B] != total) {
        snprintf(err, errlen, "%s[B] = %s[%d] = %d, but the packed batch holds %d tokens: the last offset is the total",
                 name, name, B, cu[B], total);
        return 1;
    }
    return 0;
}

int attn_check_varlen(const int *cu_q, const int *cu_k, int B, int total_q, int total_k, int max_q, int max_k,
                      int causal, char *err, size_t errlen) {
    if (B < 1) {
        snprintf(err, errlen, "a packed batch needs B >= 1 sequences (B = %d)", B);
        return 1;
    }
    if (check_offsets(cu_q, "cu_seqlens_q", "queries", B, total_q, max_q, err, errlen) ||
        check_offsets(cu_k, "cu_seqlens_k", "keys", B, total_k, max_k, err, errlen))
        return 1;
    if (causal)
        for (int b = 0; b < B; ++b) {
            const int nq = cu_q[b + 1] - cu_q[b], nk = cu_k[b + 1] - cu_k[b];
            if (nk < nq) {
                snprintf(err, errlen, "sequence %d has %d queries but %d keys: with causal, query i sees keys "
                         "j <= seqlen_k - seqlen_q + i (aligned bottom-right), so its first queries would see none: "
                         "each sequence needs seqlen_k >= seqlen_q", b, nq, nk);
                return 1;
            }
        }
    return 0;
}

/* ---- the page map ---- */

/* Builds m->table from perm: the sequences' pages in order of (b, p) take perm[0], perm[1], ... */
static void fill_table(page_map *m, const int *len, int N_kv, const int *perm) {
    int k = 0;
    for (int b = 0; b < m->B; ++b) {
        const int pages = (int)ceil_div(len ? len[b] : N_kv, m->page_size);
        for (int p = 0; p < m->max_pages; ++p) m->table[(size_t)b * m->max_pages + p] = p < pages ? perm[k++] : -1;
    }
    m->spare = perm[m->used];
    for (size_t e = 0; e < (size_t)m->B * m->max_pages; ++e)
        if (m->table[e] < 0) m->table[e] = m->spare;
}

int page_map_make(page_map *m, const int *len, int B, int N_kv, int ps, uint64_t seed) {
    memset(m, 0, sizeof *m);
    m->B = B;
    m->page_size = ps;
    m->max_pages = (int)ceil_div(N_kv, ps);
    long used = 0;
    for (int b = 0; b < B; ++b) used += ceil_div(len ? len[b] : N_kv, ps);
    const long total = used + 1 + used / 8;
    if (total > INT_MAX) return -1;
    m->used = (int)used;
    m->num_pages = (int)total;
    int *perm = malloc(sizeof(int) * (size_t)total);
    m->table = malloc(sizeof(int) * (size_t)B * m->max_pages);
    if (!perm || !m->table) {
        free(perm);
        page_map_free(m);
        return -1;
    }
    rng_t r;
    rng_seed(&r, rng_mix(seed, 0x9a9e));
    for (int k = 0; k < total; ++k) perm[k] = k;
    for (int k = (int)total - 1; k > 0; --k) { /* Fisher-Yates */
        const int s = (int)(rng_next(&r) % (uint64_t)(k + 1)), t = perm[k];
        perm[k] = perm[s];
        perm[s] = t;
    }
    /* No sequence's page p + 1 right after (or before) its page p in the pool: move each such page
     * to a random place of the permutation, a few rounds (a tiny pool may have no such order). */
    for (int round = 0; round < 64; ++round) {
        int moved = 0, k = 0;
        for (int b = 0; b < B; ++b) {
            const int pages = (int)ceil_div(len ? len[b] : N_kv, ps);
            for (int p = 0; p < pages; ++p, ++k) {
                if (p > 0 && abs(perm[k] - perm[k - 1]) == 1) {
                    const int s = (int)(rng_next(&r) % (uint64_t)total), t = perm[k];
                    perm[k] = perm[s];
                    perm[s] = t;
                    ++moved;
                }
            }
        }
        if (!moved) break;
    }
    fill_table(m, len, N_kv, perm);
    free(perm);
    return 0;
}

void page_map_free(page_map *m) {
    free(m->table);
    m->table = NULL;
}

size_t page_map_offset(const page_map *m, int row, int j, int h_kv, int H_kv, int d) {
    const int page = m->table[(size_t)row * m->max_pages + j / m->page_size];
    return (((size_t)page * m->page_size + (size_t)(j % m->page_size)) * H_kv + h_kv) * d;
}

void page_map_scatter(const page_map *m, const float *X, const int *len, int H_kv, int N_kv, int d, float *pool) {
    const size_t n = (size_t)m->num_pages * m->page_size * H_kv * d;
    for (size_t e = 0; e < n; ++e) pool[e] = NAN;
    for (int b = 0; b < m->B; ++b)
        for (int h = 0; h < H_kv; ++h)
            for (int j = 0; j < (len ? len[b] : N_kv); ++j)
                memcpy(&pool[page_map_offset(m, b, j, h, H_kv, d)], &X[(((size_t)b * H_kv + h) * N_kv + j) * d],
                       sizeof(float) * (size_t)d);
}

/* ---- packed batches ---- */

int varlen_draw(int max_len, long tokens, uint64_t seed, int *len, int cap) {
    rng_t r;
    rng_seed(&r, rng_mix(seed, 0x7a41e7));
    int count = 0;
    long sum = 0;
    while (sum < tokens) {
        long L = (long)exp(rng_uniform(&r) * log((double)max_len + 1.0));
        if (L < 1) L = 1;
        if (L > max_len) L = max_len;
        if (L > tokens - sum) L = tokens - sum;
        if (count == cap) return -1;
        len[count++] = (int)L;
        sum += L;
    }
    return count;
}

/* A length of the list at *s, 1..max_len, up to the next ',' or ':' or the end; 0 and *s moved on, or -1. */
static int read_length(const char **s, int max_len, int *out) {
    char *end;
    errno = 0;
    const long v = strtol(*s, &end, 10);
    if (end == *s || errno || v < 1 || v > max_len || (*end && *end != ',' && *end != ':') || **s == '+' ||
        **s == ' ')
        return -1;
    *out = (int)v;
    *s = end;
    return 0;
}

int parse_seqlens(const char *text, int *len_q, int *len_k, int cap, int max_len, char *err, size_t errlen) {
    const char *s = text;
    int n = 0;
    const char *form = "expected lengths separated by commas, each LEN (as many queries as keys) or LEN_Q:LEN_K "
                       "(LEN_Q new queries after LEN_K - LEN_Q cached keys)";
    if (!*s) {
        snprintf(err, errlen, "the list is empty: %s, in 1..%d", form, max_len);
        return -1;
    }
    for (;;) {
        const char *item = s;
        if (n == cap) {
            snprintf(err, errlen, "more than %d sequences: at most %d", cap, cap);
            return -1;
        }
        int q, k;
        if (read_length(&s, max_len, &q)) {
            const size_t w = strcspn(item, ",");
            snprintf(err, errlen, "item %d, '%.*s', is not a length in 1..%d: %s", n + 1, (int)(w > 40 ? 40 : w),
                     item, max_len, form);
            return -1;
        }
        k = q;
        if (*s == ':') {
            ++s;
            if (read_length(&s, max_len, &k) || *s == ':') {
                const size_t w = strcspn(item, ",");
                snprintf(err, errlen, "item %d, '%.*s', is not LEN_Q:LEN_K with both in 1..%d: %s", n + 1,
                         (int)(w > 40 ? 40 : w), item, max_len, form);
                return -1;
            }
        }
        len_q[n] = q;
        len_k[n] = k;
        ++n;
        if (!*s) return n;
        ++s; /* the comma */
        if (!*s) {
            snprintf(err, errlen, "it ends with a comma: %s, in 1..%d", form, max_len);
            return -1;
        }
    }
}

/* ---- the wrong sequences in words ---- */

/* Appends "1, 3 and 4" (the b with pick(b), at most 8 named, then "..."). */
static int list_sequences(char *out, size_t cap, const long *bad, const long *checked, int B, int want_bad) {
    int n = 0, total = 0, len = 0;
    for (int b = 0; b < B; ++b) total += checked[b] > 0 && (bad[b] > 0) == want_bad;
    for (int b = 0; b < B && len >= 0 && (size_t)len < cap; ++b) {
        if (!(checked[b] > 0 && (bad[b] > 0) == want_bad)) continue;
        ++n;
        if (n > 8) {
            len += snprintf(out + len, cap - (size_t)len, ", ... (%d in all)", total);
            break;
        }
        len += snprintf(out + len, cap - (size_t)len, "%s%d", n == 1 ? "" : n == total ? " and " : ", ", b);
    }
    return total;
}

int describe_sequences(char *out, size_t cap, const long *bad, const long *checked, int B) {
    int nbad = 0, ngraded = 0, only = -1;
    for (int b = 0; b < B; ++b) {
        if (checked[b] <= 0) continue;
        ++ngraded;
        if (bad[b] > 0) { ++nbad; only = b; }
    }
    out[0] = '\0';
    if (nbad == 0) return 0;
    if (nbad == ngraded) {
        snprintf(out, cap, ngraded == 1 ? "the one sequence graded is wrong" : "every sequence is wrong (%d graded)",
                 ngraded);
        return nbad;
    }
    if (nbad == 1) {
        snprintf(out, cap, "only sequence %d is wrong (%ld of its %ld graded rows), the other %d sequences graded are "
                 "right", only, bad[only], checked[only], ngraded - 1);
        return nbad;
    }
    int len = snprintf(out, cap, "sequences ");
    char list[200];
    list_sequences(list, sizeof list, bad, checked, B, 1);
    len += snprintf(out + len, cap > (size_t)len ? cap - (size_t)len : 0, "%s are wrong, ", list);
    const int nright = list_sequences(list, sizeof list, bad, checked, B, 0);
    snprintf(out + len, cap > (size_t)len ? cap - (size_t)len : 0, "%s %s right", list, nright == 1 ? "is" : "are");
    return nbad;
}

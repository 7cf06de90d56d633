/* attention.h: the one interface every lesson and solution implements, and the
 * harness (reference/) grades.
 *
 * Layout and names follow FlashAttention-2 (Dao, 2023), Algorithm 1:
 *   Q, K, V, O : [B, H, N, d] row-major, element (b, h, i, c) at ((b*H + h)*N + i)*d + c
 *   L          : [B, H, N] fp32, the logsumexp of row i of the scaled scores
 *                S = scale * Q K^T (natural log): L_i = m_i + log(l_i)
 *   O          = softmax(S [+ causal mask]) V, causal meaning key j is visible to query i
 *                only when j <= i.
 */
#ifndef ATTENTION_H
#define ATTENTION_H

#ifdef __cplusplus
extern "C" {
#endif

/* Element types. The float64 reference is always computed from the values
 * actually stored in the inputs (after rounding to the dtype).
 * DTYPE_E4M3 (lesson 14, FP8): Q, K, V hold OCP FP8 e4m3 codes (1 sign, 4 exponent bits with
 * bias 7, 3 mantissa bits; largest finite 448, 0x7F/0xFF NaN), each meaning descale * value,
 * with the descale factors of attn_args (attn_fp8 below); O is written in bf16, L in fp32. */
typedef enum { DTYPE_FP32 = 0, DTYPE_FP16 = 1, DTYPE_BF16 = 2, DTYPE_E4M3 = 3, DTYPE_COUNT = 4 } dtype_t;
#define DTYPE_BIT(t) (1u << (t))

/* Return values of a lesson's entry point. */
enum {
    ATTN_OK = 0,
    ATTN_NOT_IMPLEMENTED = 1, /* starter as shipped: the grader says "not implemented yet" */
    ATTN_UNSUPPORTED = 2,     /* this shape/dtype is outside what the lesson declares */
    ATTN_OUT_OF_MEMORY = 3    /* a method's workspace (e.g. standard attention's N x N S/P)
                                 could not be allocated; it prints the bytes it needed */
};

/* Process exit statuses of every lesson binary (and of `make grade`'s rows). */
enum {
    EXIT_PASS = 0,
    EXIT_FAILED = 1,          /* at least one case failed */
    EXIT_USAGE = 2,           /* bad command line */
    EXIT_NOT_IMPLEMENTED = 3, /* the entry point says it is not implemented */
    EXIT_NO_GPU = 4,          /* no NVIDIA driver/GPU, or no code for this GPU in the binary */
    EXIT_CUDA_ERROR = 5,      /* a CUDA call failed (illegal address, launch failure, ...) */
    EXIT_TIMEOUT = 6,         /* a kernel did not finish within --timeout seconds */
    EXIT_OOM = 7              /* the method could not allocate its workspace */
};

/* How FP8 inputs were quantized (dtype DTYPE_E4M3; lesson 14). The harness draws Q, K, V in
 * float, optionally rotates Q and K along d (hadamard), and stores code = e4m3(x / descale)
 * with descale = amax / 448 over a block (always > 0: a block of zeros gets 1): one scale for
 * the whole tensor (rows = 0), or one per `rows` consecutive rows of each (b, h) slice (block
 * quantization; FP8_BLOCK_ROWS). The
 * descale arrays are device floats: [1] for a whole tensor, else [B*H][ceil(N / rows)] for Q and
 * [B*H_kv][ceil(N_kv / rows)] for K and V, block k of slice bh at bh * ceil(N / rows) + k.
 * Every other dtype gets all zeros and NULL pointers. */
#define FP8_BLOCK_ROWS 192  /* lesson 14's key tile B_c: a key tile meets one block of K and V */
#define FP8_E4M3_MAX 448.0f
typedef struct {
    int q_rows, kv_rows;   /* rows per scale block of Q, and of K and V; 0: one scale per tensor */
    int hadamard;          /* 1: Q and K were multiplied by the orthonormal Hadamard matrix of size d
                              (incoherent processing); Q K^T is unchanged, so the kernel does nothing */
    const float *descale_q, *descale_k, *descale_v; /* device: the value of a code is descale * code */
} attn_fp8;

/* Everything a GPU lesson's forward pass receives. All pointers are device
 * pointers, written/read on `stream` (a cudaStream_t, kept as void* so this
 * header stays plain C). */
typedef struct {
    int B, H, N, d;     /* batch, heads, sequence length, head dimension */
    int causal;         /* 1: mask keys j > i */
    float scale;        /* softmax scale, 1/sqrt(d) unless the caller says otherwise */
    dtype_t dtype;      /* element type of Q, K, V and O (DTYPE_E4M3: O is bf16) */
    const void *Q, *K, *V;
    void *O;
    float *L;           /* logsumexp per row, always fp32 */
    void *stream;
    /* Decode shapes (lessons that declare LESSON_DECODE; lesson 12). K and V are
     * [B, H_kv, N_kv, d]; Q, O are [B, H, N, d] and L is [B, H, N] as above. For
     * every other lesson the harness passes N_kv = N, H_kv = H, seqlens_kv = NULL. */
    int N_kv;               /* keys per (b, h_kv) slice of K and V (the longest sequence) */
    int H_kv;               /* K/V heads; H % H_kv == 0; query head h reads K/V head h / (H / H_kv) */
    const int *seqlens_kv;  /* NULL, or [B] device ints: sequence b uses keys 0 .. seqlens_kv[b] - 1,
                               1 <= seqlens_kv[b] <= N_kv; rows past it hold NaN. With causal, query i
                               of N sees keys j <= seqlens_kv[b] - N + i (aligned to the end of the cache) */
    attn_fp8 fp8;           /* dtype DTYPE_E4M3 only (O is then bf16); zeros otherwise */
    /* A paged KV cache (lessons that declare LESSON_PAGED_KV; PagedAttention, Kwon et al. 2023, in
     * the layout of vLLM and FlashAttention's kvcache interface). block_table NULL: K and V as above.
     * Otherwise K and V are each one pool of num_pages pages of page_size keys,
     *   K, V        : [num_pages, page_size, H_kv, d]
     *   block_table : [B, max_pages] device ints, entry (b, p) = the pool page holding keys
     *                 p * page_size .. p * page_size + page_size - 1 of sequence b,
     * so key j of sequence b, K/V head h_kv, lies at
     *   K + ((block_table[b * max_pages + j / page_size] * page_size + j % page_size) * H_kv + h_kv) * d
     * (V likewise). Q, O, L, N, H_kv, seqlens_kv and causal mean what they mean above: sequence b
     * has seqlens_kv[b] keys (N_kv when seqlens_kv is NULL) in its first ceil(len / page_size)
     * entries, max_pages = ceil(N_kv / page_size). The pages of a sequence lie anywhere in the pool,
     * in any order; no page belongs to two sequences; the entries past a sequence's pages, the rows
     * past its length in its last page and the pages no sequence uses are not part of the cache
     * (the harness points those entries at a page of NaN, and fills those rows and pages with NaN).
     * page_size is a power of two, 8 .. 1024; attention_serving.h checks a table. Every lesson that
     * does not declare LESSON_PAGED_KV gets NULL and zeros here. */
    const int *block_table;
    int page_size;          /* keys per page */
    int max_pages;          /* entries per sequence in block_table */
    int num_pages;          /* pages in the pool */
    /* A packed batch (lessons that declare LESSON_VARLEN; FlashAttention-2/3's varlen interface).
     * cu_seqlens_q NULL: every layout as above. Otherwise the B sequences are packed without padding:
     *   Q, O        : [total_q, H, d]     token t of the batch, head h at (t * H + h) * d
     *   K, V        : [total_k, H_kv, d]  token t, K/V head h_kv at (t * H_kv + h_kv) * d
     *   L           : [H, total_q] fp32   head h, token t at h * total_q + t (FlashAttention-2/3's
     *                 varlen logsumexp: one head's rows contiguous, whatever the lengths)
     *   cu_seqlens_q, cu_seqlens_k : [B + 1] device ints, offsets into the packed tokens: sequence b's
     *                 queries are tokens cu_seqlens_q[b] .. cu_seqlens_q[b + 1] - 1 and its keys tokens
     *                 cu_seqlens_k[b] .. cu_seqlens_k[b + 1] - 1; cu_seqlens[0] = 0, every sequence
     *                 has at least one query and one key, cu_seqlens_q[B] = total_q, cu_seqlens_k[B] = total_k.
     * A sequence's query and key counts may differ (chunked prefill: its seqlen_q new queries are the
     * last seqlen_q of its seqlen_k keys). With causal, query i of sequence b sees its keys
     * j <= seqlen_k - seqlen_q + i (aligned bottom-right, as with seqlens_kv above; j <= i when the
     * counts are equal), so causal needs seqlen_k >= seqlen_q. N and N_kv hold max_seqlen_q and
     * max_seqlen_k; H_kv divides H as above; seqlens_kv and block_table are NULL. attention_serving.h
     * checks the offsets. Every lesson that does not declare LESSON_VARLEN gets NULL and zeros here. */
    const int *cu_seqlens_q, *cu_seqlens_k;
    int max_seqlen_q, max_seqlen_k; /* the most queries, and keys, of one sequence */
    int total_q, total_k;           /* tokens of the packed Q (and O), and of the packed K and V */
} attn_args;

/* Flags a lesson declares in lesson_info.flags. */
enum {
    /* An output is accumulated with float atomics, in an order that changes from run to run
     * (dQ in lessons 10-11): the grader's re-run must agree within the tolerance, not bit for bit. */
    LESSON_ATOMIC_ACCUMULATION = 1u << 0,
    /* attention_forward accepts N_kv != N, H_kv < H (grouped-query attention) and per-sequence
     * KV lengths (seqlens_kv); the harness refuses those options for every other lesson. */
    LESSON_DECODE = 1u << 1,
    /* attention_forward reads K and V through a block table (a paged KV cache: block_table above)
     * as well as contiguously. Declared with LESSON_DECODE: a paged cache holds decode shapes. The
     * harness refuses --paged for every other lesson. */
    LESSON_PAGED_KV = 1u << 2,
    /* attention_forward takes packed batches of sequences of different lengths (cu_seqlens_q,
     * cu_seqlens_k above) as well as rectangular ones. The harness refuses --varlen and --seqlens
     * for every other lesson. */
    LESSON_VARLEN = 1u << 3
};

/* What a GPU lesson declares about itself; the harness refuses the rest clearly. */
typedef struct {
    int number;               /* 2, 3, ... */
    const char *name;         /* "02-naive-kernel" */
    const char *title;        /* "naive kernel, one thread per query row" */
    unsigned dtypes;          /* DTYPE_BIT(DTYPE_FP32) | ... ; the first set bit is the default */
    int causal;               /* 1 if --causal is supported */
    int head_dims[8];         /* supported d, zero-terminated, e.g. {64, 128, 0} */
    unsigned flags;           /* LESSON_* bits above; 0 for lessons 01-09 */
    int needs_cc;             /* 0: any GPU the build targets; 90: compute capability 9.0 only
                                 (sm_90a code: wgmma, setmaxnreg); the harness refuses others, exit 4 */
} lesson_info;

/* Provided by each GPU lesson/solution. Launches the forward pass on a->stream
 * and returns ATTN_OK without synchronizing; the harness checks launch errors,
 * times, and grades. Must write every element of O and L. */
extern const lesson_info LESSON;
int attention_forward(const attn_args *a);

/* ---- Backward pass (lessons 10-11): FlashAttention-2, Algorithm 2 ----
 * Inputs Q, K, V, O, dO are [B, H, N, d] of `dtype`; L is the forward's [B, H, N] fp32
 * logsumexp (natural log, as above). Outputs dQ, dK, dV are [B, H, N, d] of `dtype`:
 * the gradients of sum(O * dO) with respect to Q, K, V, with P = exp(S - L) recomputed
 * from L. Launch on `stream`, do not synchronize, write every element of dQ, dK, dV. */
typedef struct {
    int B, H, N, d;
    int causal;
    float scale;
    dtype_t dtype;
    const void *Q, *K, *V, *O, *dO;
    const float *L;
    void *dQ, *dK, *dV;
    void *stream;
} attn_bwd_args;

/* Provided by each backward lesson (10, 11) instead of attention_forward; same return codes. */
int attention_backward(const attn_bwd_args *a);

/* ---- Lesson 01 (CPU): online softmax of one row ----
 * x[0..n) may hold -INFINITY (a masked score) and values of any magnitude.
 * Process x in blocks of `block` elements keeping a running max m and a running
 * sum l of exp(x - m) (FlashAttention-2 eq. for m_i^(j), l_i^(j)), then write
 * y[k] = exp(x[k] - m) / l. Returns the final m and l through m_out, l_out.
 * A fully masked row (every x = -inf) has no defined softmax; the course
 * defines it as y = 0, m = -inf, l = 0 (what FlashAttention's kernels write).
 * Returns ATTN_OK or ATTN_NOT_IMPLEMENTED. */
int online_softmax(const float *x, float *y, int n, int block, float *m_out, float *l_out);

#ifdef __cplusplus
}
#endif
#endif

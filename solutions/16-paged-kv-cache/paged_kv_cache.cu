//| /* 16-paged-kv-cache (starter): decoding attention over a paged KV cache, and the append that fills it.
//|  *
//|  * Given: lesson 12's flash-decoding kernel (reference/include/flash_decoding.h: split the keys, one
//|  * K/V load per GQA group, the partials merged by the last block to arrive), which reads a
//|  * contiguous cache as lesson 12 does; the plumbing of the paged view and the launches. You write,
//|  * in the order of the lesson text (lessons/16-paged-kv-cache/README.md, "What you will write"):
//|  * TODO(1) the page lookup (the block's row of the table, its K/V head, key j's place in the pool),
//|  * TODO(2) the gather of a tile row by row, TODO(3) a tile's page range and the tile that lies in one
//|  * page, TODO(4) the address of an appended key, then TODO(0). `make emu-lesson16` checks it on the
//|  * CPU, `./lesson16` on the GPU.
// solution begin
/* 16-paged-kv-cache: decoding attention over a paged KV cache, and the append that fills it.
// solution end
 *
 * A serving engine keeps the KV cache of many sequences of unknown final length. Stored
 * contiguously ([B, H_kv, N_kv, d]) each sequence must reserve its longest possible length up
 * front; PagedAttention (Kwon et al., "Efficient Memory Management for Large Language Model
 * Serving with PagedAttention", SOSP 2023) stores it instead in fixed-size pages of one pool,
 * allocated as the sequence grows, and lists each sequence's pages in a block table. This file is
 * lesson 12's flash-decoding kernel (Dao, Haziza, Massa, Sizov, "Flash-Decoding for long-context
 * inference", 2023: the keys split across blocks, the partials merged with the online softmax's
 * rescaling) with its tile copies reading K and V through that table, in the layout of vLLM and of
 * FlashAttention's kvcache interface; plus the kernel that appends a decoding step's new keys to
 * their pages (vLLM's reshape_and_cache, FlashAttention's k_new).
 *
 * What paging changes, in the order a block meets it: fd_kv_view (its sequence's row of the block
 * table, its K/V head's place inside a key row), fd_key_offset (key j's place in the pool), the tile
 * copies (fd_load_tile: a tile that lies in one page with one lookup, fd_gather_in_page; any other row
 * by row, fd_gather_rows; each row still in 16-byte cp.async chunks). Everything else, scores,
 * softmax, merges and the split plan, is lesson 12's, unchanged (reference/include/flash_decoding.h,
 * made from lesson 12's solution): a page changes where a key is, not what is done with it.
 *
 * Layouts (reference/include/attention.h): Q, O [B, H, N, d]; L [B, H, N] fp32, the natural-log
 * logsumexp of each row of the scaled scores. K, V: contiguous [B, H_kv, N_kv, d] when
 * block_table is NULL, else each one pool [num_pages, page_size, H_kv, d] with block_table
 * [B, max_pages]: key j of sequence b, K/V head h_kv, at
 * ((block_table[b max_pages + j / page_size] page_size + j % page_size) H_kv + h_kv) d.
 * Preconditions: fp16 or bf16, d in {64, 128}, H % H_kv == 0, scale > 0, an sm_80+ GPU,
 * 1 <= seqlens_kv[b] <= N_kv (with causal >= N), page_size a power of two (8 .. 1024), every page
 * the sequence's keys need in its row of the table (attention_serving.h, attn_check_paged).
 * The launch reads no length and no table entry on the host: a serving loop can capture it, with
 * the append, in a CUDA graph and replay it as the sequences grow (worklog/serve_graph.cu).
 */
#include <cuda_runtime.h>
#include <stdio.h>
#include <math.h>
#include "attention.h"
#include "attention_serving.h" /* attention_append_kv: the harness's optional entry point for the append */
#include "ptx_mma.h"           /* lesson 07: ldmatrix_x4(_trans), mma_16816, ex2, pack2, swz, smem_u32, FA_SM80 */
#include "ptx_cp_async.h"      /* lesson 08: cp_async_16, cp_async_commit, cp_async_wait */
#include "flash_decoding.h"    /* lesson 12's kernel in parts: FdArgs, fd_block_work, fd_scores, ..., fd_make_plan */

const lesson_info LESSON = {
    16, "16-paged-kv-cache", "attention for serving: a paged KV cache",
    DTYPE_BIT(DTYPE_FP16) | DTYPE_BIT(DTYPE_BF16), 1, {64, 128, 0}, LESSON_DECODE | LESSON_PAGED_KV, 0};

/* Lesson 12's arguments and the paged cache's: block_table non-NULL means that K and V (FdArgs) are
 * the pools [num_pages, page_size, H_kv, d]. */
template <typename T>
struct PagedArgs : FdArgs<T> {
    const int *block_table; /* [B, max_pages]; NULL: K and V contiguous, [B, H_kv, N_kv, d] */
    int B, max_pages;       /* sequences; entries per sequence in block_table */
    int page_shift;         /* log2(page_size) */
};

// [region page-lookup]
/* Where the keys of a block's group lie, for its tile copies (fd_kv_view fills it). Contiguous
 * (block_table NULL, lesson 12): K and V point at slice (b, h_kv) of [B, H_kv, N_kv, d], pages is
 * NULL, key j at j d. Paged: K and V point at the pools plus the K/V head's place inside a key
 * row, pages at sequence b's row of the block table, key j at fd_key_offset(kv, j). */
template <typename T>
struct FdKv {
    const T *K, *V;
    const int *pages; /* entries page0, page0 + 1, ... of sequence b's row of block_table; NULL: contiguous */
    int page0;        /* the first entry pages holds: 0 (the table's row), or the block's first page (fd_stage_table) */
    int shift;        /* log2(page_size): key j is in the page of entry j >> shift, at row j & (page_size - 1) */
    int row;          /* elements from one key to the next inside a page: H_kv d (a key's heads are neighbours) */
};

/* The block's view of its group's keys, built once after fd_block_work. Contiguous: lesson 12's
 * slice (b, h_kv), read once for its G query heads. Paged: the pools offset to K/V head h_kv's place
 * in a key row ([num_pages, page_size, H_kv, d]: a key's H_kv heads are neighbours) and sequence b's
 * row of the block table. */
template <typename T, int D>
__device__ __forceinline__ FdKv<T> fd_kv_view(const PagedArgs<T> &a, const FdWork &w) {
    FdKv<T> kv;
    if (!a.block_table) {
        const size_t slice = ((size_t)w.b * a.H_kv + w.h_kv) * a.N_kv * D;
        kv.K = a.K + slice;
        kv.V = a.V + slice;
        kv.pages = NULL;
        kv.page0 = 0;
        kv.shift = 0;
        kv.row = D;
        return kv;
    }
    // TODO(1) begin
    //| /* TODO(1), first half: the paged view (README, "The pool and the block table"). kv.K and kv.V at K/V head
    //|  * w.h_kv's place in a key row of the pools a.K, a.V; kv.pages at sequence w.b's row of
    //|  * a.block_table (a.max_pages entries a row), from its entry kv.page0 = 0; kv.shift =
    //|  * a.page_shift; kv.row, the elements from one key of a page to the next. */
    //| kv.K = a.K; kv.V = a.V; kv.pages = a.block_table; kv.page0 = 0; kv.shift = a.page_shift; /* TODO(1) */
    //| kv.row = D;
    kv.K = a.K + (size_t)w.h_kv * D;
    kv.V = a.V + (size_t)w.h_kv * D;
    kv.pages = a.block_table + (size_t)w.b * a.max_pages;
    kv.page0 = 0;
    kv.shift = a.page_shift;
    kv.row = a.H_kv * D;
    // TODO(1) end
    return kv;
}

/* The element offset, from kv.K (and kv.V), of key j of the group's sequence: row j % page_size of
 * the pool page that entry j / page_size of the sequence's row of the table names (PagedAttention's
 * logical block j / page_size), held at kv.pages[j / page_size - kv.page0]. Precondition: j < the
 * sequence's length (the entries past its last page are not its own), and j / page_size among the
 * entries kv.pages holds. One 4-byte load: from shared memory in the kernel (fd_stage_table), from
 * the table in the append. */
template <typename T>
__device__ __forceinline__ size_t fd_key_offset(const FdKv<T> &kv, int j) {
    // TODO(1) begin
    //| /* TODO(1), second half: the page lookup. Key j's page is table entry j / page_size, held at
    //|  * kv.pages[j / page_size - kv.page0] (page_size = 1 << kv.shift: a shift and a mask, no
    //|  * division); its row in that page
    //|  * j % page_size; a page holds page_size rows of kv.row elements. Count the offset in size_t:
    //|  * a pool can hold more than 2^31 elements. */
    //| return (size_t)j * kv.row; /* TODO(1): as if the pool were one page */
    const int page = kv.pages[(j >> kv.shift) - kv.page0];
    const int in_page = j & ((1 << kv.shift) - 1);
    return (((size_t)page << kv.shift) + in_page) * kv.row;
    // TODO(1) end
}
// [end page-lookup]

// [region table-slice]
/* The table entries a block can need: FD16_SLICE_PAGES pages' worth of keys (the plan keeps every
 * split at most that long, fd_launch), plus one for a split that starts inside a page. */
#ifndef FD16_SLICE_PAGES
#define FD16_SLICE_PAGES 1024
#endif
#define FD16_SLICE_ENTRIES (FD16_SLICE_PAGES + 1)

/* Copies the entries of the block's pages, those of keys [w.k_begin, w.k_end), from its sequence's
 * row of the table into slice (shared memory, FD16_SLICE_ENTRIES ints), and points kv at them. One
 * round trip to global memory for all the block's lookups, before its first tile; every lookup of
 * its tile copies is then a shared-memory load, and no copy waits for a table entry on its way from
 * L2 (worklog, step 6). Contiguous view: nothing to do. Paged: ends with __syncthreads, so every
 * thread of the block calls it; kv.pages is then the slice even in a block with no keys (one
 * pointer the compiler knows, not one more register in the tile loop). */
template <typename T>
__device__ __forceinline__ void fd_stage_table(FdKv<T> &kv, const FdWork &w, int *slice, int tid) {
    if (!kv.pages) return;
    const int p0 = w.k_begin >> kv.shift, np = w.n_tiles ? ((w.k_end - 1) >> kv.shift) - p0 + 1 : 0;
    for (int p = tid; p < np; p += FD_THREADS) slice[p] = kv.pages[p0 + p];
    __syncthreads();
    kv.pages = slice;
    kv.page0 = p0;
}
// [end table-slice]

// [region gather]
/* The paged tile copies: rows [row0, row0 + ROWS) of the group's K and V into the swizzled slot
 * tiles tK and tV, rows >= end zero-filled and not read, as lesson 12's load_rows_async (thread tid
 * copies chunk tid % CH of rows tid / CH + i STEP, dst = its chunk of row tid / CH). A row is one
 * key: d contiguous elements inside one page, still copied in 16-byte chunks, and the warp's chunks
 * of a row still make whole 128-byte lines. Rows of a page are H_kv d elements apart, and pages lie
 * anywhere in the pool. */
template <typename T, int D, int ROWS>
__device__ __forceinline__ void fd_gather_rows(uint32_t tK, uint32_t tV, const FdKv<T> &kv, int row0, int end,
                                               int tid) {
    constexpr int CH = D / 8, STEP = FD_THREADS / CH;
    const int r0 = tid / CH, ch = tid % CH;
    const uint32_t dst = swz<D>(r0, ch);
    // TODO(2) begin
    //| /* TODO(2): the gather, row by row (README, "How the loads change"). For i = 0 .. ROWS / STEP - 1 this
    //|  * thread copies chunk ch (8 elements, 16 bytes) of key j = row0 + r0 + i STEP from kv.K and
    //|  * kv.V at the key's offset (TODO(1)) to tK and tV at dst + i STEP D 2 bytes, with cp_async_16:
    //|  * one lookup per row, for K and V. A key j >= end is not the split's: zero-fill it (valid =
    //|  * false, and a source address that is valid, kv.K) and do not look it up. */
    //| (void)tK; (void)tV; (void)kv; (void)row0; (void)end; (void)dst; (void)STEP; /* TODO(2) */
#pragma unroll
    for (int i = 0; i < ROWS / STEP; ++i) {
        const int j = row0 + r0 + i * STEP;
        const bool valid = j < end;
        const size_t at = valid ? fd_key_offset(kv, j) + ch * 8 : 0;
        cp_async_16(tK + dst + i * STEP * D * 2, kv.K + at, valid);
        cp_async_16(tV + dst + i * STEP * D * 2, kv.V + at, valid);
    }
    // TODO(2) end
}

/* The same copy when the tile's page range is one page (a page of at least ROWS keys, and tiles that
 * start at multiples of ROWS: pages of 64 keys and more at d = 128, 128 and more at d = 64): one lookup
 * for the whole tile, and its rows kv.row elements apart, like the rows of the contiguous slice.
 * Returns false, having copied nothing, when the tile's rows span two pages or more. */
template <typename T, int D, int ROWS>
__device__ __forceinline__ bool fd_gather_in_page(uint32_t tK, uint32_t tV, const FdKv<T> &kv, int row0, int end,
                                                  int tid) {
    constexpr int CH = D / 8, STEP = FD_THREADS / CH;
    const int r0 = tid / CH, ch = tid % CH;
    const uint32_t dst = swz<D>(r0, ch);
    // TODO(3) begin
    //| /* TODO(3): a tile's page range (README, "How the loads change"). The tile's first and last rows, row0
    //|  * and row0 + ROWS - 1, are in pages row0 >> kv.shift and (row0 + ROWS - 1) >> kv.shift (compare
    //|  * the numbers: look up no entry past the sequence's end). Two pages or more: return false.
    //|  * One: look up row0 once (TODO(1)), then copy as TODO(2) does, key j = row0 + r0 + i STEP being
    //|  * j - row0 rows further in that page; zero-fill the keys >= end. Without this TODO the copies
    //|  * are right (fd_gather_rows takes every tile), only slower. */
    //| (void)tK; (void)tV; (void)kv; (void)row0; (void)end; (void)dst; (void)r0; (void)ch; (void)STEP;
    //| return false; /* TODO(3) */
    if ((row0 >> kv.shift) != ((row0 + ROWS - 1) >> kv.shift)) return false;
    const size_t at = fd_key_offset(kv, row0) + (size_t)r0 * kv.row + ch * 8;
#pragma unroll
    for (int i = 0; i < ROWS / STEP; ++i) {
        const bool valid = row0 + r0 + i * STEP < end;
        const size_t row = valid ? at + (size_t)i * STEP * kv.row : 0;
        cp_async_16(tK + dst + i * STEP * D * 2, kv.K + row, valid);
        cp_async_16(tV + dst + i * STEP * D * 2, kv.V + row, valid);
    }
    return true;
    // TODO(3) end
}

/* One tile of the group's K and V, rows [row0, row0 + BC), into slot tiles tK and tV: from the
 * contiguous slice (lesson 12's load_rows_async), or through the table, in one page or row by row. */
template <typename T, int D, int BC>
__device__ __forceinline__ void fd_load_tile(uint32_t tK, uint32_t tV, const FdKv<T> &kv, int row0, int end, int tid) {
    constexpr int CH = D / 8, STEP = FD_THREADS / CH;
    static_assert(FD_THREADS % CH == 0 && BC % STEP == 0 && STEP % 8 == 0, "tile copy must split evenly");
    if (!kv.pages) {
        load_rows_async<T, D, BC>(tK, kv.K, row0, end, tid);
        load_rows_async<T, D, BC>(tV, kv.V, row0, end, tid);
    } else if (!fd_gather_in_page<T, D, BC>(tK, tV, kv, row0, end, tid)) {
        fd_gather_rows<T, D, BC>(tK, tV, kv, row0, end, tid);
    }
}
// [end gather]

// [region kernel]
/* Lesson 12's kernel, its tiles read through fd_load_tile (lesson 12's fd_load_first, fd_load_next and
 * fd_block_loop call the one of the view they are given). One block: split s of the keys of
 * sequence b, for rows r0 .. r0 + RB - 1 of the query rows of group (b, h_kv) (fd_block_work). grid = S n_rc B H_kv blocks in one dimension,
 * FD_THREADS threads, fd_smem_bytes() of dynamic shared memory: the Q tile [RB][D], then
 * STAGES K and STAGES V slots [BC][D], all swizzled; after the loop the K/V slots hold the
 * warps' partials. WR warps over rows (MT m-tiles each), WK = 4 / WR over the keys of a tile.
 * K and V come from the contiguous cache or through the block table (fd_kv_view): the same
 * kernel, one branch per tile copy. Writes O and L directly when its sequence has one split, else its partial, and the last
 * block of the group to arrive merges all of them into O and L. */
template <typename T, int D, int BC, int WR, int MT, int STAGES>
__global__ void __launch_bounds__(FD_THREADS) fd_split_kernel(const PagedArgs<T> a) {
#if FA_SM80
    constexpr int RB = WR * MT * 16;
    constexpr uint32_t TILE = BC * D * 2;
    extern __shared__ __align__(128) unsigned char fa_smem[];
    const uint32_t aQ = smem_u32(fa_smem), aK = aQ + RB * D * 2, aV = aK + STAGES * TILE;
    const int tid = threadIdx.x;
    const FdLane<WR> ln(tid >> 5, tid & 31);
    FdWork w;
    if (!fd_block_work<T, BC, RB>(a, w)) return;
    FdKv<T> kv = fd_kv_view<T, D>(a, w); /* where its keys lie: a contiguous slice or pages */
    constexpr int slice_at = fd_smem_bytes<D, BC, WR, MT, STAGES>(); /* the table's slice, after lesson 12's */
    fd_stage_table(kv, w, reinterpret_cast<int *>(fa_smem + slice_at), tid);
    fd_load_first<T, D, BC, RB, STAGES>(aQ, aK, aV, a, w, kv, tid);
    fd_block_loop<T, D, BC, WR, MT, STAGES>(a, w, ln, kv, fa_smem, aQ, aK, aV, tid);
#endif
}
// [end kernel]

// [region append]
/* Everything the append kernel reads (attention_append_kv fills it). */
template <typename T>
struct FdAppend {
    const T *K_new, *V_new; /* [B, n_new, H_kv, d]: the step's new keys */
    T *K, *V;               /* the pools [num_pages, page_size, H_kv, d] */
    const int *block_table; /* [B, max_pages] */
    const int *seqlens;     /* [B], the lengths after the append; NULL: N_kv each */
    int B, H_kv, n_new, N_kv, max_pages, page_shift;
};

/* A decoding step's keys into their pages (PagedAttention's cache write; vLLM's reshape_and_cache):
 * new token t < n_new of sequence b becomes key j = len_b - n_new + t, the len_b counting it
 * (seqlens, the lengths attention_forward then reads), its K/V head h_kv going to the place
 * fd_key_offset gives that key in the pools. No page is allocated: the table already holds the
 * page of every key below len_b. One thread per 16 bytes (8 elements), in a grid-stride loop over
 * the B n_new H_kv D / 8 chunks in the order of K_new: a token's H_kv D elements are contiguous
 * in K_new and in its page row, so a warp reads and writes whole 128-byte lines. The copy is
 * exact, bit for bit. grid: any; block: FD_APPEND_THREADS. */
#define FD_APPEND_THREADS 256
template <typename T, int D>
__global__ void __launch_bounds__(FD_APPEND_THREADS) fd_append_kernel(const FdAppend<T> a) {
    constexpr int CH = D / 8;
    const long long chunks = (long long)a.B * a.n_new * a.H_kv * CH;
    const long long step = (long long)gridDim.x * FD_APPEND_THREADS;
    for (long long e = (long long)blockIdx.x * FD_APPEND_THREADS + threadIdx.x; e < chunks; e += step) {
        const int c = (int)(e % CH) * 8, h_kv = (int)(e / CH % a.H_kv);
        const long long token = e / CH / a.H_kv; /* b n_new + t */
        const int b = (int)(token / a.n_new), t = (int)(token % a.n_new);
        const int len = a.seqlens ? a.seqlens[b] : a.N_kv;
        const FdKv<T> kv = {NULL, NULL, a.block_table + (size_t)b * a.max_pages, 0, a.page_shift, a.H_kv * D};
        // TODO(4) begin
        //| /* TODO(4): the append's address (README, "Appending a step's keys"). Which key of sequence b new token t
        //|  * becomes (len counts the new keys already), and the element offset in the pools of that
        //|  * key's K/V head h_kv, column c: the page lookup of TODO(1) over kv (sequence b's row of the
        //|  * table) gives the key's row; the head is h_kv D elements into it. */
        //| (void)len; (void)kv; (void)t;
        //| const size_t at = 0; /* TODO(4) */
        const int j = len - a.n_new + t;
        const size_t at = fd_key_offset(kv, j) + (size_t)h_kv * D + c;
        // TODO(4) end
        const size_t from = (size_t)token * a.H_kv * D + (size_t)h_kv * D + c;
        *reinterpret_cast<uint4 *>(a.K + at) = *reinterpret_cast<const uint4 *>(a.K_new + from);
        *reinterpret_cast<uint4 *>(a.V + at) = *reinterpret_cast<const uint4 *>(a.V_new + from);
    }
}
// [end append]

// [region host]
static int fd_major = -1; /* compute capability of the current device */

/* log2 of a power of two n (a page size); -1 for any other n. */
static int fd_log2(int n) {
    if (n < 1 || (n & (n - 1))) return -1;
    int k = 0;
    while ((1 << k) < n) ++k;
    return k;
}

/* Lesson 12's plan, its splits shortened where needed so that a block's pages fit its slice of the
 * table (fd_stage_table): at most FD16_SLICE_PAGES pages' worth of keys, whole tiles each. */
static FdPlan fd_paged_plan(const attn_args *a, int R, int BC, long long slots) {
    FdPlan p = fd_make_plan(a->B, a->H_kv, R, a->N_kv, BC, slots, FD_SPLITS);
    if (!a->block_table) return p;
    const int max_tiles = (int)(((long long)FD16_SLICE_PAGES * a->page_size) / BC);
    if (p.chunk / BC > max_tiles) p = fd_make_plan(a->B, a->H_kv, R, a->N_kv, BC, slots, (p.tiles + max_tiles - 1) / max_tiles);
    return p;
}

/* Plan and launch one configuration, as lesson 12 does (its plan, one slot per SM: the split rule
 * counts SMs), with the paged cache's table and, after lesson 12's shared memory, the block's slice
 * of it. */
template <typename T, int D, int BC, int WR, int MT>
static int fd_launch(const attn_args *a) {
    constexpr int smem = fd_smem_bytes<D, BC, WR, MT, FD_STAGES>() + FD16_SLICE_ENTRIES * 4;
    auto kernel = fd_split_kernel<T, D, BC, WR, MT, FD_STAGES>;
    static long long sm_count = 0;
    if (!sm_count && !(sm_count = fd_prepare_kernel(kernel, smem))) return ATTN_UNSUPPORTED;
    const int G = a->H / a->H_kv, R = G * a->N;
    const FdPlan p = fd_paged_plan(a, R, BC, sm_count);
    if (p.blocks > 0x7fffffffLL) return ATTN_UNSUPPORTED;
    PagedArgs<T> args;
    const int rc = fd_fill_args<T, D>(args, a, G, R, p);
    if (rc != ATTN_OK) return rc;
    args.block_table = a->block_table; args.B = a->B; args.max_pages = a->max_pages;
    args.page_shift = fd_log2(a->page_size);
    kernel<<<(unsigned)p.blocks, FD_THREADS, smem, (cudaStream_t)a->stream>>>(args);
    return ATTN_OK;
}

template <typename T, int D, int BC>
static int fd_dispatch(const attn_args *a) {
    int WR, MT;
    fd_rows_config(a->H / a->H_kv * a->N, &WR, &MT);
    if (MT == 2) return fd_launch<T, D, BC, 4, 2>(a);
    if (WR == 4) return fd_launch<T, D, BC, 4, 1>(a);
    if (WR == 2) return fd_launch<T, D, BC, 2, 1>(a);
    return fd_launch<T, D, BC, 1, 1>(a);
}

//| /* TODO(0): set to 0 when you have written TODO(1)..TODO(4); the grader then grades you. */
//| #define STARTER_NOT_DONE 1
//|
/* The compute capability's major number of the current device, asked once (0: none). */
static int fd_device_major() {
    if (fd_major < 0) {
        int dev = 0;
        if (cudaGetDevice(&dev) != cudaSuccess ||
            cudaDeviceGetAttribute(&fd_major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess)
            fd_major = 0;
    }
    return fd_major;
}

/* Entry point (reference/include/attention.h): fp16/bf16, d = 64 or 128, H_kv dividing H, scale > 0,
 * sm_80 or newer, K and V contiguous or paged (block_table, a page_size that is a power of two);
 * anything else is ATTN_UNSUPPORTED. Reads no length and no table entry on the host, allocates only
 * at the first launch that needs a larger split workspace: the launches after that can be captured
 * in a CUDA graph. */
int attention_forward(const attn_args *a) {
    //| if (STARTER_NOT_DONE) return ATTN_NOT_IMPLEMENTED;
    if (fd_device_major() < 8 || !(a->scale > 0.f) || a->H_kv < 1 || a->H % a->H_kv || a->N_kv < 1) return ATTN_UNSUPPORTED;
    if (a->block_table && (fd_log2(a->page_size) < 0 || a->max_pages < 1)) return ATTN_UNSUPPORTED;
    if (a->N < 1 || a->B < 1 || a->H < 1) return ATTN_OK;
    const int fp16 = a->dtype == DTYPE_FP16, bf16 = a->dtype == DTYPE_BF16;
    if (a->d == 64 && fp16) return fd_dispatch<__half, 64, FD64_BC>(a);
    if (a->d == 64 && bf16) return fd_dispatch<__nv_bfloat16, 64, FD64_BC>(a);
    if (a->d == 128 && fp16) return fd_dispatch<__half, 128, FD128_BC>(a);
    if (a->d == 128 && bf16) return fd_dispatch<__nv_bfloat16, 128, FD128_BC>(a);
    return ATTN_UNSUPPORTED;
}

// [region append-host]
/* The append's launch: FD_APPEND_THREADS threads a block, one per 16 bytes, as many blocks as that
 * takes (at most 65535: the kernel loops over the rest). */
template <typename T, int D>
static int fd_append_launch(const attn_append_args *a) {
    FdAppend<T> args;
    args.K_new = (const T *)a->K_new; args.V_new = (const T *)a->V_new;
    args.K = (T *)a->K; args.V = (T *)a->V;
    args.block_table = a->block_table; args.seqlens = a->seqlens_kv;
    args.B = a->B; args.H_kv = a->H_kv; args.n_new = a->n_new; args.N_kv = a->N_kv;
    args.max_pages = a->max_pages; args.page_shift = fd_log2(a->page_size);
    const long long chunks = (long long)a->B * a->n_new * a->H_kv * (D / 8);
    const long long need = (chunks + FD_APPEND_THREADS - 1) / FD_APPEND_THREADS, blocks = need < 65535 ? need : 65535;
    fd_append_kernel<T, D><<<(unsigned)blocks, FD_APPEND_THREADS, 0, (cudaStream_t)a->stream>>>(args);
    return ATTN_OK;
}

/* Entry point of the append (reference/include/attention_serving.h): a decoding step's n_new keys of
 * every sequence from K_new, V_new [B, n_new, H_kv, d] into their pages; fp16/bf16, d = 64 or 128, a
 * page size that is a power of two; anything else is ATTN_UNSUPPORTED. Launches on a->stream and
 * reads no length on the host: it goes into the same CUDA graph as attention_forward. */
int attention_append_kv(const attn_append_args *a) {
    //| if (STARTER_NOT_DONE) return ATTN_NOT_IMPLEMENTED;
    if (fd_device_major() < 8 || fd_log2(a->page_size) < 0 || a->H_kv < 1 || a->n_new < 1 || !a->block_table)
        return ATTN_UNSUPPORTED;
    if (a->B < 1) return ATTN_OK;
    const int fp16 = a->dtype == DTYPE_FP16, bf16 = a->dtype == DTYPE_BF16;
    if (a->d == 64 && fp16) return fd_append_launch<__half, 64>(a);
    if (a->d == 64 && bf16) return fd_append_launch<__nv_bfloat16, 64>(a);
    if (a->d == 128 && fp16) return fd_append_launch<__half, 128>(a);
    if (a->d == 128 && bf16) return fd_append_launch<__nv_bfloat16, 128>(a);
    return ATTN_UNSUPPORTED;
}
// [end append-host]
// [end host]

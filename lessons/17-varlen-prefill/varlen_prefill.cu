/* 17-varlen-prefill (starter): lesson 09's forward pass over a packed batch: B sequences of
 * different lengths laid end to end without padding, as a serving engine prefills them
 * (FlashAttention-2/3's varlen interface, cu_seqlens), with grouped-query attention and chunked
 * prefill (a sequence's new queries attend to a longer cached prefix, causal aligned bottom-right).
 *
 * What is here: lesson 09's kernel in parts (reference/include/hopper_forward.h: the ring, the
 * MMA loop, the online softmax, the roles), the host side, the plan kernel's sort and scan. What
 * you write: the TODO(n) below, in order; README.md explains each.
 *
 * Layout (reference/include/attention.h): Q, O [total_q, H, d] and K, V [total_k, H_kv, d], token t
 * of the batch at row t; L [H, total_q] fp32; sequence b's queries are tokens cu_seqlens_q[b] ..
 * cu_seqlens_q[b + 1] - 1, its keys cu_seqlens_k[b] .. cu_seqlens_k[b + 1] - 1; query head h reads
 * K/V head h / (H / H_kv); with causal, query i of a sequence sees its keys j <= n_k - n_q + i. A
 * rectangular batch (cu_seqlens_q NULL: Q, K, V, O [B, H, N, d], L [B, H, N]) is the same problem
 * with every sequence N long, and runs through the same kernel.
 *
 * Design: the host knows no length (the offsets live on the GPU), so a one-block plan kernel sorts
 * the sequences longest first and numbers their work items (varlen_plan_kernel); the persistent
 * kernel (varlen_forward_kernel) hands out lesson 09's roles, its producer copying each work item's
 * tiles from the sequence's rows of the packed tensors (the tensor maps see them as H slices of
 * total rows), its consumers running lesson 09's MMA loop with the sequence's own key count and
 * diagonal, and storing O by TMA where a tile lies inside its sequence, from registers where it
 * would spill into the next one.
 * Sources: Shah, Bikshandi, Zhang, Thakkar, Ramani, Dao, "FlashAttention-3" (2024), Algorithm 1 and
 * its varlen scheduler (sequences sorted by length, longest first); Dao, "FlashAttention-2" (2023),
 * the varlen interface; Agrawal et al., "SARATHI" (2023), chunked prefill.
 * Preconditions: fp16 or bf16, d in {64, 128}, scale > 0, compute capability 9.0 (sm_90a), at most
 * VARLEN_MAX_B sequences. */
// build: sm_90a
#include <cuda.h>  // CUtensorMap
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <stdint.h>
#include <stdio.h>
#include <math.h>
#include "attention.h"
#include "tma_params.h"       // tma_view_map_make: a packed tensor as H slices of its rows
#include "ptx_mma.h"          // lesson 07: smem_u32, ex2, pack2
#include "ptx_hopper.h"       // lesson 09's wrappers: wgmma, TMA, mbarriers
#include "hopper_forward.h"   // lesson 09's kernel in parts: Config, Consumer, Warpgroup, Kernel

const lesson_info LESSON = {
    17, "17-varlen-prefill", "varlen prefill: packed batches of sequences of different lengths",
    DTYPE_BIT(DTYPE_FP16) | DTYPE_BIT(DTYPE_BF16), 1, {64, 128, 0}, LESSON_VARLEN, 90};

/* TODO(0): set to 0 when you have written TODO(1)-(5); the grader then grades you. */
#define STARTER_NOT_DONE 1

/* The tiles: lesson 09's at d = 128 (B_c = 128, two slots, two consumer warpgroups: B_r = 128), and
 * at d = 64 three slots of the same B_c and B_r = 128 (lesson 09's causal short-sequence kernel: a
 * packed batch is mostly short sequences). Step 7 of lesson 09's ladder: persistent, the next work
 * item from a counter, turns chained across items, O by TMA store. */
constexpr int VL_BC = 128, VL_NC = 2, VL_STEP = 7;
template <int D> struct Tiles { static constexpr int STAGES = D == 64 ? 3 : 2; };
/* The plan kernel's block, and the most sequences it sorts in its shared memory (two ints each: 36 KiB
 * with the scan's, under the 48 KiB a launch gets without opting in). */
constexpr int PLAN_THREADS = 1024, VARLEN_MAX_B = 4096;

// [region batch]
/* A batch as the kernels see it. Packed (cu_q not NULL): Q, O [total_q, H, d], K, V [total_k, H_kv,
 * d]; rectangular: [B, H, N, d]. The tensor maps see either as slices of rows: packed, H (H_kv)
 * slices of total_q (total_k) rows; rectangular, B H (B H_kv) slices of N rows. */
struct Batch {
    const int *cu_q, *cu_k;    // [B + 1] device offsets of the packed tokens; NULL: rectangular
    const int *order, *first;  // the plan: order[i] the i-th longest sequence, first[i] its first work
                               // item, first[B] the number of items (varlen_plan_kernel)
    int B, H, G, N;            // sequences, query heads, query heads per K/V head, rectangular length
    int q_rows;                // rows of the Q and O views: total_q (packed) or N
    int causal;
    float l2_kv;               // bytes of L2 for the K and V of a section of heads (heads_per_section)
    long long o_row, o_head;   // elements between O rows of a slice, and between slices
    long long l_head;          // elements between the L rows of two slices (rows are 1 apart)
};
/* Where sequence b lies: the view row of its first query and first key, its first query and K/V
 * slice (h and h / G are added to them), its query and key counts. */
struct Seq { int q_row, kv_row, q_slice, kv_slice, n_q, n_k; };
__device__ __forceinline__ Seq seq_of(const Batch &bt, int b) {
    // TODO(1): sequence b of a packed batch from its offsets (README, "One tensor, many
    //   sequences"); a rectangular one is given.
    if (!bt.cu_q) return {0, 0, b * bt.H, b * (bt.H / bt.G), bt.N, bt.N};
    return {0, 0, 0, 0, 0, 0};
}
// [end batch]

// [region plan]
/* The plan (one block of PLAN_THREADS; dynamic shared memory plan_smem_bytes): order[] the sequences by key
 * count, longest first (ties in batch order), so that the persistent grid starts the longest work
 * items first and the short ones fill the end (FlashAttention-3 sorts its varlen batches the same
 * way); first[] the exclusive prefix sum of their work items, ceil(n_q / BR) H each, in that order;
 * first[B] their number. A rank sort: B^2 / PLAN_THREADS comparisons per thread, from shared memory
 * (B = 4096: 16 k each, tens of microseconds; make bench-17's batch of 18 sequences: nothing). */
static size_t plan_smem_bytes(int B) { return sizeof(int) * (2 * (size_t)B + PLAN_THREADS); }
template <int BR>
__global__ void __launch_bounds__(PLAN_THREADS) varlen_plan_kernel(Batch bt, int *order, int *first) {
    extern __shared__ __align__(1024) unsigned char fa_smem[];  // (the CPU emulator's name for it)
    int *keys = reinterpret_cast<int *>(fa_smem), *items = keys + bt.B, *part = items + bt.B;
    const int tid = threadIdx.x, B = bt.B;
    for (int b = tid; b < B; b += PLAN_THREADS) {
        keys[b] = seq_of(bt, b).n_k;
        order[b] = b;  // overwritten below; were two ranks equal, a sequence would be missing, not garbage
    }
    __syncthreads();
    for (int b = tid; b < B; b += PLAN_THREADS) {
        int rank = 0;
        // TODO(2): the position of sequence b when the sequences are sorted by key count, longest
        //   first, ties in batch order: how many sequences come before it (README, "Longest
        //   first"). Every position must be taken exactly once.
        order[rank] = b;
    }
    __syncthreads();
    for (int p = tid; p < B; p += PLAN_THREADS) items[p] = (seq_of(bt, order[p]).n_q + BR - 1) / BR * bt.H;
    __syncthreads();
    /* first[]: each thread sums a run of positions, a scan of the runs' sums, then each run again. */
    const int run = (B + PLAN_THREADS - 1) / PLAN_THREADS, lo = min(B, tid * run), hi = min(B, lo + run);
    int sum = 0;
    for (int p = lo; p < hi; ++p) sum += items[p];
    part[tid] = sum;
    __syncthreads();
    for (int off = 1; off < PLAN_THREADS; off *= 2) {  // inclusive scan of part (Hillis and Steele)
        const int add = tid >= off ? part[tid - off] : 0;
        __syncthreads();
        part[tid] += add;
        __syncthreads();
    }
    int at = part[tid] - sum;
    for (int p = lo; p < hi; ++p) {
        first[p] = at;
        at += items[p];
    }
    if (tid == PLAN_THREADS - 1) first[B] = part[tid];
}
// [end plan]

// [region item]
/* A work item: lesson 09's (query tile q0 of head bh = h, K/V tiles n_tiles, counted from the
 * sequence's start) in sequence s, whose causal diagonal is shifted by diag = n_k - n_q keys. */
struct Item {
    Work w;
    Seq s;
    int diag;
};
static_assert(sizeof(Item) == 10 * sizeof(int), "an Item is ten ints (Varlen::put_item)");
/* Work item t: the sequence whose items hold t (first[] is sorted), then lesson 09's work_of inside
 * it (causal: its longest query tiles first, in sections of heads whose K and V fit in L2). */
template <int BR, int BC, int D>
__device__ __forceinline__ Item item_of(const Batch &bt, int t) {
    int lo = 0, hi = bt.B - 1;  // the last position whose first item is <= t
    while (lo < hi) {
        const int mid = (lo + hi + 1) >> 1;
        if (bt.first[mid] <= t) lo = mid;
        else hi = mid - 1;
    }
    Item it;
    it.s = seq_of(bt, bt.order[lo]);
    const float hs = bt.l2_kv / (4.f * it.s.n_k * D) * bt.G;  // heads whose K and V fit (GQA: G share them)
    it.w = work_of<BR, BC>(t - bt.first[lo], it.s.n_q, bt.H, bt.causal, hs < 1.f ? 1 : hs > bt.H ? bt.H : (int)hs);
    // TODO(3): the diagonal's shift and the item's K/V tile count: every key of the sequence, or,
    //   causal, those up to the last row's diagonal (README, "Chunked prefill: the diagonal moves").
    //   work_of counted the tiles of a square sequence of n_q keys: set it.w.n_tiles anew.
    it.diag = 0;
    return it;
}
// [end item]

/* The roles of lesson 09's kernel over a batch: k is lesson 09's Kernel (ring, barriers, MMA loop),
 * with N, BH, HS and n_work unused (per item: the Item). */
template <class C>
struct Varlen {
    using T = typename C::T;
    using SL = typename C::SL;
    static constexpr int D = C::D, BR = C::BR, BC = C::BC;
    /* The producer decodes each item (item_of: a search in global memory, microseconds) while the
     * consumers still work on the one before, and hands it to them decoded, beside lesson 09's WORK
     * word, before its arrival on full Q: in two slots, item qn in slot qn % 2, which the producer
     * overwrites only after the consumers released Q for item qn + 1, so past item qn's epilogue. The
     * consumers read it where they use it and hold none of it in registers across the MMA loop. The
     * launch takes ALLOC bytes. */
    static constexpr uint32_t ITEM = SL::WORK + 16, ALLOC = SL::ALLOC + 2 * sizeof(Item);
    Kernel<C> k;
    Batch bt;
    __device__ __forceinline__ int n_items() const { return bt.first[bt.B]; }
    __device__ __forceinline__ Item item(int t) const { return item_of<BR, BC, D>(bt, t); }
    __device__ __forceinline__ void put_item(const Item &it, int slot) const {
        const int *w = reinterpret_cast<const int *>(&it);
#pragma unroll
        for (int i = 0; i < 10; ++i) st_shared_u32(k.base + ITEM + (uint32_t)sizeof(Item) * slot + 4 * i, (uint32_t)w[i]);
    }
    __device__ __forceinline__ Item get_item(int slot) const {
        Item it;
        int *w = reinterpret_cast<int *>(&it);
#pragma unroll
        for (int i = 0; i < 10; ++i) w[i] = (int)ld_shared_u32(k.base + ITEM + (uint32_t)sizeof(Item) * slot + 4 * i);
        return it;
    }
    // [region producer]
    /* The producer's thread 0: lesson 09's step 7 loop, each item's Q_i and K/V tiles taken from its
     * sequence's rows (row = the sequence's first plus the tile's) and slices (K/V: h / G). */
    __device__ __forceinline__ void producer_mainloop() const {
        const int n_work = n_items();
        int item = blockIdx.x, gi = 0;
        for (int qn = 0;; ++qn) {
            if (qn > 0) mbar_wait(k.bar(EMPTY_Q), (qn - 1) & 1);  // Q_i's buffer is free
            st_shared_u32(k.base + SL::WORK, (uint32_t)item);
            if (item >= n_work) {
                mbar_arrive(k.bar(FULL_Q));
                break;
            }
            const Item it = this->item(item);
            put_item(it, qn & 1);
            const int h = it.w.bh, n = it.w.n_tiles;
            mbar_arrive_expect_tx(k.bar(FULL_Q), BR * D * 2);
            // TODO(4): Q_i (rows q0 .. of the item's sequence, query head h) into SL::Q, as lesson
            //   09's producer copies it: d / 64 boxes of 64 columns, box x at SL::Q + x BR 128 bytes
            //   (README, "One tensor, many sequences")...
            (void)h;
            const int next = atomicAdd(k.sched, 1) + (int)gridDim.x;  // claimed while Q_i's copies fly
            // TODO(4): ...then its n K/V tiles, the last first, as mma_loop reads them (load_kv takes the
            //   slot count gi + j, the view row of the tile's first key and the K/V slice; README,
            //   "Grouped queries").
            (void)n;
            gi += n;
            item = next;
        }
        __threadfence();  // the last block out puts the counter back to 0 for the next launch
        if (atomicAdd(k.sched + 1, 1) == (int)gridDim.x - 1) {
            atomicExch(k.sched, 0);
            atomicExch(k.sched + 1, 0);
        }
    }
    // [end producer]
    // [region epilogue]
    /* O and L of the warpgroup's 64 rows that its sequence has. A TMA store writes the whole box
     * except rows past the end of the view: inside a packed tensor that end is the last sequence's,
     * so a box that would run into the next sequence is stored from registers instead. */
    __device__ __forceinline__ void epilogue(const Warpgroup<C> &wg, Consumer<C> &w, const Item &it) const {
        const int r0 = it.w.q0 + wg.wg_row0, h = it.w.bh, bar = C::R::EPILOGUE_WG0 + wg.c;
        const uint32_t sO = k.base + SL::O + (uint32_t)wg.c * SL::OTILE;
        T *O = k.O + (long long)(it.s.q_slice + h) * bt.o_head;
        float *L = k.L + (long long)(it.s.q_slice + h) * bt.l_head + it.s.q_row;
        bool by_tma = false;
        // TODO(5): may this warpgroup's 64 rows leave by a TMA store (README, "The last tile of a
        //   sequence")? Until you write it, every box does, the last one of a sequence too.
        by_tma = true;
        if (by_tma) {
            if (wg.tid % 128 == 0) bulk_wait_read<0>();  // the previous item's store has read the O tile
            named_sync(bar, 128);
        }
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            const float lr = w.row_sum(r), inv = lr > 0.f ? __fdividef(1.f, lr) : 0.f;  // l >= 1: exact to 2 ulp
            const int srow = 16 * wg.wq + wg.g + 8 * r, i = r0 + srow;  // row in the O tile, in the sequence
            if (by_tma) {
                const uint32_t o_row = sO + tma_tile_offset(srow, 2 * wg.t, 64);  // chunk 0 of the row
#pragma unroll  // chunk j: one XOR of chunk 0's address (tma_tile_chunk)
                for (int j = 0; j < D / 8; ++j) st_shared_u32(tma_tile_chunk(o_row, j, 64), w.o_pair(j, r, inv));
            } else if (i < it.s.n_q) {
#pragma unroll
                for (int j = 0; j < D / 8; ++j)
                    *reinterpret_cast<uint32_t *>(O + (it.s.q_row + i) * bt.o_row + 8 * j + 2 * wg.t) =
                        w.o_pair(j, r, inv);
            }
            if (wg.t == 0 && i < it.s.n_q) L[i] = w.lse(r, lr, k.scale_log2);
        }
        if (by_tma) {
            fence_proxy_async();  // ordinary stores -> the TMA store's reads (async proxy)
            named_sync(bar, 128);
            if (wg.tid % 128 == 0 && r0 < it.s.n_q) {
                for (int b = 0; b < D / 64; ++b)
                    tma_store_3d(k.tmO, 64 * b, it.s.q_row + r0, it.s.q_slice + h, sO + b * 64 * 128);
                bulk_commit();
            }
        }
    }
    // [end epilogue]
    // [region consumer]
    /* A consumer thread: each item lesson 09's MMA loop sees with the sequence's key count as its N
     * (keys past it masked) and the diagonal shifted by diag (the loop masks key j > row; here row +
     * diag), then the epilogue. */
    __device__ __forceinline__ void consumer_mainloop(int tid) const {
        const Warpgroup<C> wg(k.base, tid);
        const int n_work = n_items();
        if (wg.c == C::NC - 1) wg.pass_turn();  // warpgroup 0 takes the first turn
        int gi = 0;
        for (int qn = 0;; ++qn) {
            mbar_wait(wg.bar(FULL_Q), qn & 1);
            const int t = (int)ld_shared_u32(k.base + SL::WORK);
            if (t >= n_work) break;
            Consumer<C> w;
            {
                const Item it = get_item(qn & 1);
                Kernel<C> seq = k;
                seq.N = it.s.n_k;
                Work shifted = it.w;
                shifted.q0 += it.diag;
                const int row = it.w.q0 + wg.wg_row0 + 16 * wg.wq + wg.g;  // query row of s[4 j + e], e < 2
                const int g0 = gi;
                gi += it.w.n_tiles;
                seq.mma_loop(wg, w, shifted, row + it.diag, g0);
            }
            epilogue(wg, w, get_item(qn & 1));
        }
        if (wg.c == 0) wg.begin_turn();  // takes the last warpgroup's final hand-over
        if (tid % 128 == 0) bulk_wait_read<0>();  // shared memory must outlive the last store's reads
    }
    // [end consumer]
};

// [region roles]
/* O and L of a batch (Batch) in query tiles of B_r = 64 NC rows; warpgroup 0 the producer, the NC
 * after it consumers (lesson 09's step 7). Grid: at most one block per SM, items from `sched` (two
 * ints, 0 before the launch and after it), after varlen_plan_kernel wrote bt.order and bt.first on
 * the same stream. tmQ, tmK, tmV, tmO: tensor maps of the views (Batch), boxes of B_r, B_c, B_c, 64
 * rows; Config::THREADS threads, Varlen::ALLOC bytes of dynamic shared memory. */
template <typename T, int D, int NC>
__global__ void __launch_bounds__(Config<T, D, VL_BC, Tiles<D>::STAGES, VL_STEP, NC>::THREADS, 1)
varlen_forward_kernel(const __grid_constant__ CUtensorMap tmQ, const __grid_constant__ CUtensorMap tmK,
                      const __grid_constant__ CUtensorMap tmV, const __grid_constant__ CUtensorMap tmO,
                      T *__restrict__ O, float *__restrict__ L, Batch bt, float scale_log2, int *sched) {
    using C = Config<T, D, VL_BC, Tiles<D>::STAGES, VL_STEP, NC>;
    extern __shared__ __align__(1024) unsigned char fa_smem[];
    const int tid = threadIdx.x;
    const Varlen<C> v{{&tmQ, &tmK, &tmV, &tmO, O, L, scale_log2, 0, 0, bt.causal, 0, sched, 0,
                       (smem_u32(fa_smem) + 1023u) & ~1023u},
                      bt};
    if (tid == 0) v.k.init_barriers();
    __syncthreads();
    if (tid < 128) {  // the producer warpgroup: one thread issues every copy
        setmaxnreg_dec<C::R::REG_PRODUCER>();
        if (tid == 0) v.producer_mainloop();
        return;
    }
    setmaxnreg_inc<C::R::REG_CONSUMER>();
    v.consumer_mainloop(tid);
}
// [end roles]

// [region host]
/* The plan's arrays (order[B], first[B + 1]) of a launch on `stream` of device `dev`: like the tile
 * counter, one per (device, stream) so that launches on two streams never share one; grown (after
 * the device has finished with the old one) when a batch has more sequences than it holds. */
static int *plan_workspace(int dev, cudaStream_t stream, int B) {
    static struct { unsigned long long id[FA_MAX_STREAMS]; int *p[FA_MAX_STREAMS], cap[FA_MAX_STREAMS], n; }
        ws[FA_MAX_DEVICES];
    auto &w = ws[dev];
    unsigned long long id = 0;
    cudaError_t e = cudaStreamGetId(stream, &id);
    int i = 0;
    while (e == cudaSuccess && i < w.n && w.id[i] != id) ++i;
    if (e == cudaSuccess && i == FA_MAX_STREAMS) i = 0;  // every slot taken: reuse the first (synchronized below)
    if (e == cudaSuccess && (i == w.n || w.id[i] != id || w.cap[i] < 2 * B + 1)) {
        if (w.p[i]) e = cudaDeviceSynchronize();
        if (e == cudaSuccess && w.p[i]) e = cudaFree(w.p[i]);
        w.p[i] = NULL;
        const int cap = 2 * (B < 64 ? 64 : B) + 1;
        if (e == cudaSuccess) e = cudaMalloc(&w.p[i], sizeof(int) * cap);
        if (e == cudaSuccess) {
            w.id[i] = id;
            w.cap[i] = cap;
            if (i == w.n) ++w.n;
        }
    }
    if (e == cudaSuccess) return w.p[i];
    fprintf(stderr, "%s:%d: the plan's workspace (%d ints) on device %d: %s\n  hint: the GPU is out of memory, or an "
            "earlier kernel failed\n", __FILE__, __LINE__, 2 * B + 1, dev, cudaGetErrorString(e));
    return NULL;
}

/* The batch of a call: packed when a->cu_seqlens_q is set, else rectangular. */
static Batch batch_of(const attn_args *a, int l2) {
    const bool packed = a->cu_seqlens_q != NULL;
    Batch bt = {};
    bt.cu_q = a->cu_seqlens_q;
    bt.cu_k = a->cu_seqlens_k;
    bt.B = a->B;
    bt.H = a->H;
    bt.G = a->H / a->H_kv;
    bt.N = a->N;
    bt.q_rows = packed ? a->total_q : a->N;
    bt.causal = a->causal;
    bt.l2_kv = (float)l2 * 5.f / 8.f;  // lesson 09's budget (heads_per_section)
    bt.o_row = packed ? (long long)a->H * a->d : a->d;
    bt.o_head = packed ? a->d : (long long)a->N * a->d;
    bt.l_head = packed ? a->total_q : a->N;
    return bt;
}

/* The tensor maps of a call's views (Batch), kept for the next call on the same buffers and shape. */
struct VarlenMaps {
    const void *q, *k, *v, *o;
    int B, H, H_kv, N, N_kv, total_q, total_k, d, packed;
    dtype_t dtype;
    CUtensorMap mq, mk, mv, mo;
    bool same(const attn_args *a) const {
        return q == a->Q && k == a->K && v == a->V && o == a->O && B == a->B && H == a->H && H_kv == a->H_kv &&
               N == a->N && N_kv == a->N_kv && total_q == a->total_q && total_k == a->total_k && d == a->d &&
               packed == (a->cu_seqlens_q != NULL) && dtype == a->dtype;
    }
};
static const VarlenMaps *maps_of(VarlenMaps *m, const attn_args *a, int br, int bc) {
    if (m->q && m->same(a)) return m;
    m->q = NULL;
    const long long d = a->d, H = a->H, Hk = a->H_kv;
    const bool packed = a->cu_seqlens_q != NULL;
    /* packed: H slices of total rows (rows H d apart, slices d); rectangular: B H slices of N rows */
    const long long sq = packed ? H : a->B * H, nq = packed ? a->total_q : a->N, lq = packed ? H * d : d;
    const long long sk = packed ? Hk : a->B * Hk, nk = packed ? a->total_k : a->N_kv, lk = packed ? Hk * d : d;
    const long long pq = packed ? d : nq * d, pk = packed ? d : nk * d;
    if (tma_view_map_make(&m->mq, a->Q, a->dtype, sq, nq, a->d, lq, pq, br) ||
        tma_view_map_make(&m->mk, a->K, a->dtype, sk, nk, a->d, lk, pk, bc) ||
        tma_view_map_make(&m->mv, a->V, a->dtype, sk, nk, a->d, lk, pk, bc) ||
        tma_view_map_make(&m->mo, a->O, a->dtype, sq, nq, a->d, lq, pq, 64))
        return NULL;
    *m = {a->Q, a->K, a->V, a->O, a->B, a->H, a->H_kv, a->N, a->N_kv, a->total_q, a->total_k, a->d, packed, a->dtype,
          m->mq, m->mk, m->mv, m->mo};
    return m;
}

/* The plan, then the kernel, on the current device `dev`. */
template <typename T, int D>
static int launch(const attn_args *a, int dev) {
    using C = Config<T, D, VL_BC, Tiles<D>::STAGES, VL_STEP, VL_NC>;
    using V = Varlen<C>;
    auto kernel = varlen_forward_kernel<T, D, VL_NC>;
    const DeviceInfo &di = device_info(dev);
    static unsigned long long opted = 0;  // a bit per device: the kernel may use its shared memory there
    if (!(opted >> dev & 1)) {
        const cudaError_t e = (int)V::ALLOC > di.smem_optin ? cudaErrorInvalidValue
            : cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)V::ALLOC);
        if (e != cudaSuccess) {
            fprintf(stderr, "%s:%d: the kernel needs %d bytes of shared memory per block, device %d allows %d (%s)\n"
                    "  hint: lesson 17 runs lesson 09's tiles, sized for an H100 or H200\n", __FILE__, __LINE__,
                    (int)V::ALLOC, dev, di.smem_optin, cudaGetErrorString(e));
            return ATTN_UNSUPPORTED;
        }
        opted |= 1ull << dev;
    }
    static VarlenMaps maps = {};
    const VarlenMaps *m = maps_of(&maps, a, C::BR, VL_BC);
    if (!m) return ATTN_UNSUPPORTED;
    cudaStream_t stream = (cudaStream_t)a->stream;
    int *sched = tile_counter(dev, stream), *ws = plan_workspace(dev, stream, a->B);
    if (!sched || !ws) return ATTN_OUT_OF_MEMORY;
    Batch bt = batch_of(a, di.l2);
    bt.order = ws;
    bt.first = ws + a->B;
    /* The items, at most: every sequence's query tiles, one partial tile each, every head. */
    const long long q_tiles = a->cu_seqlens_q ? (long long)(a->total_q + C::BR - 1) / C::BR + a->B
                                              : (long long)((a->N + C::BR - 1) / C::BR) * a->B;
    const long long items = q_tiles * a->H;
    if (items > 0x3fffffffLL) {
        fprintf(stderr, "%s:%d: %lld work items: more than the counter holds (2^30)\n  hint: split the batch\n",
                __FILE__, __LINE__, items);
        return ATTN_UNSUPPORTED;
    }
    varlen_plan_kernel<C::BR><<<1, PLAN_THREADS, plan_smem_bytes(a->B), stream>>>(bt, ws, ws + a->B);
    kernel<<<(unsigned)(items < di.sms ? items : di.sms), C::THREADS, V::ALLOC, stream>>>(
        m->mq, m->mk, m->mv, m->mo, (T *)a->O, a->L, bt, a->scale * 1.4426950408889634f, sched);
    return ATTN_OK;
}

/* attention.h's entry point: a packed or rectangular batch (fp16 or bf16, d = 64 or 128, H_kv
 * dividing H, at most VARLEN_MAX_B sequences, a Hopper GPU), else ATTN_UNSUPPORTED. */
int attention_forward(const attn_args *a) {
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || dev >= FA_MAX_DEVICES) return ATTN_UNSUPPORTED;
    if (device_info(dev).cc != 90 || !(a->scale > 0.f) || a->H_kv < 1 || a->H % a->H_kv) return ATTN_UNSUPPORTED;
    if (STARTER_NOT_DONE) return ATTN_NOT_IMPLEMENTED;  // TODO(0)
    if (a->B > VARLEN_MAX_B) {
        fprintf(stderr, "%s:%d: %d sequences: the plan sorts at most %d\n  hint: split the batch\n", __FILE__, __LINE__,
                a->B, VARLEN_MAX_B);
        return ATTN_UNSUPPORTED;
    }
    if (a->B < 1 || a->H < 1 || a->N < 1) return ATTN_OK;  // nothing to compute
    const int fp16 = a->dtype == DTYPE_FP16, bf16 = a->dtype == DTYPE_BF16;
    if (a->d == 64 && fp16) return launch<__half, 64>(a, dev);
    if (a->d == 64 && bf16) return launch<__nv_bfloat16, 64>(a, dev);
    if (a->d == 128 && fp16) return launch<__half, 128>(a, dev);
    if (a->d == 128 && bf16) return launch<__nv_bfloat16, 128>(a, dev);
    return ATTN_UNSUPPORTED;
}
// [end host]

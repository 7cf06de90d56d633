/* 15-ring-attention (starter): attention over a sequence split across P GPUs. Each rank (GPU) keeps its
 * query chunks; the K/V blocks travel around a ring (rank r sends to r + 1 and receives from
 * r - 1) while every rank computes attention of its queries against the block it holds, with
 * lesson 09's kernel (ring_block.h); the partial results (O_s, L_s) merge with lesson 01's
 * rescaling. Causal attention uses the balanced layout: with 2P chunks of c rows, rank r holds
 * chunks r and 2P - 1 - r, so every rank does the same work.
 * Source: Liu, Zaharia, Abbeel, "Ring Attention with Blockwise Transformers" (2023), Section 3 (the
 * ring, overlap of the transfer with the blockwise compute); Brandon et al., "Striped Attention"
 * (2023) and Megatron-LM's context parallelism for the causal load balance; the merge is
 * FlashAttention-2's rescaling (lesson 01).
 * Q, K, V, O: [B, H, N, d] row-major on the harness's device (device 0); L: [B, H, N] fp32,
 * natural log (reference/include/attention.h). Preconditions: fp16 or bf16, d in {64, 128},
 * Hopper GPUs (lesson 09's kernel). */
// build: sm_90a
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include "attention.h"
#include "attention_ranks.h"  // attention_set_ranks: the virtual ring's P, chosen when it runs
#include "ring_block.h"     // given: lesson 09's kernel on one chunk pair
#include "ring_timeline.h"  // given: what the timeline tool (worklog/tools) reads of the ring
#ifdef RING_NCCL
#include <nccl.h>
#endif

const lesson_info LESSON = {
    15, "15-ring-attention", "ring attention across GPUs (NCCL)",
    DTYPE_BIT(DTYPE_FP16) | DTYPE_BIT(DTYPE_BF16), 1, {64, 128, 0}, 0, 90};

// [region config]
/* Compile-time choices (mk/ring.mk sets them: make solution15 RING=virtual RING_NAIVE=1):
 *   RING_NCCL            the ranks are all visible GPUs (up to RING_MAX_RANKS), exchanging by NCCL;
 *                        where the process sees one GPU, the run takes the virtual ring (printed).
 *                        Without it, the virtual ring always.
 *   RING_NAIVE_CAUSAL    1: causal attention on the naive layout (rank r holds chunk r) instead
 *                        of the balanced one, to measure the imbalance.
 * The virtual ring (P ranks on the current GPU, exchanging by device copies: the ring's logic on
 * one GPU) takes its P when it runs, from attention_set_ranks (the grader's --ranks P), so that
 * one binary is graded on rings of 2, 3 and 4 ranks. */
#ifndef RING_NAIVE_CAUSAL
#define RING_NAIVE_CAUSAL 0
#endif
// [end config]

// [region layout]
/* Which rows of the sequence a rank holds. The sequence is cut into P * per_rank chunks of c
 * rows (global chunk g = rows g c .. g c + c - 1); rank r holds per_rank of them. Non-causal and
 * naive causal: one chunk each, chunk r. Balanced causal: two, r and 2P - 1 - r, so that the
 * long rows at the end of the sequence are shared out with the short ones at its start. */
struct Layout {
    int P, per_rank, c;
    bool balanced;
};
static Layout layout_of(int P, int N, int causal) {
    Layout L;
    L.P = P;
    L.balanced = causal && !RING_NAIVE_CAUSAL && P > 1;
    L.per_rank = L.balanced ? 2 : 1;
    L.c = N / (P * L.per_rank);
    return L;
}
/* The ranks a sequence of N rows runs on: the most, up to P, that cut it into equal chunks (the
 * block kernel takes one length for queries and keys); 1 always does. */
static int ranks_for(int P, int N, int causal) {
    for (int p = P; p > 1; --p) {
        const Layout L = layout_of(p, N, causal);
        if (N % (p * L.per_rank) == 0) return p;
    }
    return 1;
}
/* Global chunk index of rank r's j-th chunk (j < per_rank). */
static int chunk_of(const Layout &L, int r, int j) {
    /* TODO(1): the global chunk index of rank r's j-th chunk, for both layouts: one chunk per rank
     * (non-causal and naive causal, L.per_rank == 1) and the balanced one (two per rank, paired so
     * that every rank's rows add up to the same causal work). "The layout" says which. */
    (void)L; (void)r; (void)j;
    return -1;
}

/* What a (query chunk, key chunk) pair needs, from the global chunk indices: without a mask,
 * every pair is full attention; causal, a key chunk before the query chunk is entirely in its
 * past (full), the same chunk is the diagonal (lesson 05's mask, j <= i), a later one is
 * entirely in its future (nothing to do). */
enum PairKind { PAIR_SKIP, PAIR_FULL, PAIR_DIAGONAL };
static PairKind pair_kind(int causal, int q_chunk, int k_chunk) {
    /* TODO(2): which of the three a pair is, from the two global chunk indices alone (chunks have
     * equal lengths). "Three kinds of pairs" explains why no other case exists. */
    (void)causal; (void)q_chunk; (void)k_chunk;
    return PAIR_SKIP;
}
// [end layout]

/* Per rank: its device, a stream for compute and one for communication (the virtual ring shares
 * one copy stream among its ranks), and its buffers, every chunk [B, H, c, d]:
 *   Q       per_rank query chunks; kv[2] the K/V block it holds and the spare one it receives
 *           into: per_rank K chunks, then per_rank V chunks; cur: which of kv[] it holds now
 *   o_acc, l_acc   the running O (fp32) and L of each query chunk, merged after every pair
 *   o_blk, l_blk   one pair's partial result (lesson 09's output); o_out: the final O (dtype)
 * Events: received (the spare block has arrived), consumed (compute is done with the block it
 * read), start and done (the harness's stream hands over and takes back). */
struct Rank {
    int dev, cur;
    cudaStream_t compute, comm;
    cudaEvent_t received, consumed, done;
    void *Q, *kv[2], *o_blk, *o_out;
    float *o_acc, *l_acc, *l_blk;
};

struct Ring {
    int ranks;                        // the ranks asked for (ring_devices); P may be fewer (ranks_for)
    int P, B, H, N, d, causal;
    dtype_t dtype;
    float scale;
    Layout lay;
    size_t chunk_elems, chunk_bytes;  // B H c d, and times the element size
    Rank rank[RING_MAX_RANKS];
    cudaEvent_t start;                // on the harness's device: its stream hands over to the ranks
    bool nccl;                        // this run's transport: NCCL (a comm stream per rank), or the
                                      // virtual ring's device copies (the ranks share one)
#ifdef RING_NCCL
    ncclComm_t comm[RING_MAX_RANKS];
#endif
};

#define RING_CUDA(call)                                                                                       \
    do {                                                                                                      \
        cudaError_t e_ = (call);                                                                              \
        if (e_ != cudaSuccess) {                                                                              \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_));           \
            return e_ == cudaErrorMemoryAllocation ? ATTN_OUT_OF_MEMORY : ATTN_UNSUPPORTED;                   \
        }                                                                                                     \
    } while (0)

static void *chunk(void *base, const Ring &g, int j) { return (char *)base + (size_t)j * g.chunk_bytes; }
static void *k_chunk(const Ring &g, const Rank &r, int j) { return chunk(r.kv[r.cur], g, j); }
static void *v_chunk(const Ring &g, const Rank &r, int j) { return chunk(r.kv[r.cur], g, g.lay.per_rank + j); }

// [region merge]
/* Lesson 01's rule for two partial results (L_a, O_a), (L_b, O_b) of one query row over disjoint
 * sets of keys: L = log(exp(L_a) + exp(L_b)) and O = exp(L_a - L) O_a + exp(L_b - L) O_b. The
 * weights and L, computed from m = max(L_a, L_b) so that no exp overflows; L natural log.
 * Precondition: m finite (each row of the ring sees at least one key). */
struct MergeWeights {
    float a, b;  // the weights of O_a and O_b, summing to 1
    float L;     // the merged logsumexp
};
__host__ __device__ inline MergeWeights merge_weights(float la, float lb) {
    /* TODO(3): the two weights and the merged L of "Merging two partial results", computed so
     * that no exp overflows whatever the magnitudes of la and lb (natural logs, fp32). */
    (void)la; (void)lb;
    return {0.f, 0.f, 0.f};
}

/* Merges one pair's partial result into a query chunk's running one: one warp per row of `rows`
 * rows of d values (o_acc fp32, o_blk T; l_* fp32). first = 1 for the chunk's first pair (the
 * accumulator holds nothing yet). Launched on the rank's compute stream after each
 * block_attention (compute_step). */
template <typename T>
__global__ void merge_partial(float *__restrict__ o_acc, float *__restrict__ l_acc, const T *__restrict__ o_blk,
                              const float *__restrict__ l_blk, long long rows, int d, int first) {
    /* TODO(4): one warp per row (row = blockIdx.x * warps per block + warp): the row's weights and
     * new L (merge_weights), then each of its d columns of o_acc replaced by the weighted sum with
     * o_blk's, in fp32; with `first` set the accumulator just takes the block's values ("Merging
     * two partial results"). Every lane reads l_acc[row] before one of them overwrites it. */
    (void)o_acc; (void)l_acc; (void)o_blk; (void)l_blk; (void)rows; (void)d; (void)first;
}
// [end merge]

/* O in the dtype, from the fp32 accumulator: n elements. */
template <typename T>
__global__ void convert_out(T *__restrict__ out, const float *__restrict__ in, long long n) {
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
        out[i] = (T)in[i];
}

// [region compute]
/* Rank rid's compute at one step: every (query chunk, key chunk) pair of its queries and the K/V
 * block it holds, each merged into the accumulator; `pairs_done` counts each query chunk's
 * pairs so far (the first one starts the accumulator). Runs on r.compute, on r's device (the
 * caller's cudaSetDevice(r.dev)), after the block has arrived (the caller's wait on r.received);
 * records r.consumed when it no longer reads it.
 * src: the rank whose chunks the block holds. */
static int compute_step(const Ring &g, int rid, int src, int pairs_done[2]) {
    const Layout &L = g.lay;
    const Rank &r = g.rank[rid];
    const long long rows = (long long)g.B * g.H * L.c;
    for (int j = 0; j < L.per_rank; ++j) {
        const int q_chunk = chunk_of(L, rid, j);
        for (int i = 0; i < L.per_rank; ++i) {
            const PairKind kind = pair_kind(g.causal, q_chunk, chunk_of(L, src, i));
            if (kind == PAIR_SKIP) continue;
            /* TODO(5): this pair's partial O and L with block_attention (query chunk j of r.Q; key and
             * value chunk i of the block r holds now, k_chunk and v_chunk; the mask only on the
             * diagonal) into r.o_blk and r.l_blk, then merge_partial into query chunk j's
             * accumulator (first when pairs_done[j] is 0; one warp per row, e.g. 8 warps = 256
             * threads per block), both on r.compute, launch errors checked; count the pair.
             * "One step of one rank" walks through it. */
            (void)r; (void)rows; (void)kind; (void)pairs_done;
            return ATTN_NOT_IMPLEMENTED;
        }
    }
    RING_CUDA(cudaEventRecord(r.consumed, r.compute));
    return ATTN_OK;
}
// [end compute]

// [region transport]
/* The transport's sends and receives: every rank r sends the block it holds (kv[cur], `bytes`
 * bytes) to rank r + 1 and receives rank r - 1's into its spare (kv[cur ^ 1]) on r's comm
 * stream. NCCL: one group of a send and a receive per rank (one thread drives every
 * communicator, and only a group lets a send wait for a receive issued after it). Virtual: the
 * ranks share one GPU and one copy stream, so each copy is ordered after the copies of the step
 * before, and none overwrites a block another copy has still to read. */
static int send_recv(Ring &g, size_t bytes) {
    /* TODO(6): every rank r sends the block it holds (kv[cur], `bytes` bytes) to rank r + 1 and
     * receives rank r - 1's into its spare (kv[cur ^ 1]), on its comm stream. When the run is over
     * NCCL (g.nccl, only in a build with RING_NCCL defined): one ncclSend and one ncclRecv per rank
     * on g.comm[r], all in one group; a failed NCCL call printed with ncclGetErrorString and
     * answered with ATTN_UNSUPPORTED, the group closed by ncclGroupEnd even then; otherwise (the
     * virtual ring): a device-to-device copy into the next rank's spare. "The transport" says
     * why the group is needed and on which stream each copy goes. */
    (void)g; (void)bytes;
    return ATTN_NOT_IMPLEMENTED;
}

/* exchange(step): the sends and receives above, each rank's comm stream first waiting until its
 * compute no longer reads the spare (r.consumed, recorded by the step before), then recording
 * r.received when the spare has arrived. */
static int exchange(Ring &g, RingTimeline *tl, int step) {
    for (int r = 0; r < g.P; ++r) {
        Rank &k = g.rank[r];
        RING_CUDA(cudaSetDevice(k.dev));
        RING_CUDA(cudaStreamWaitEvent(k.comm, k.consumed, 0));
        if (tl) RING_CUDA(cudaEventRecord(tl->comm_begin[step][r], k.comm));
    }
    if (int rc = send_recv(g, 2 * (size_t)g.lay.per_rank * g.chunk_bytes); rc != ATTN_OK) return rc;
    for (int r = 0; r < g.P; ++r) {
        Rank &k = g.rank[r];
        RING_CUDA(cudaSetDevice(k.dev));
        RING_CUDA(cudaEventRecord(k.received, k.comm));
        if (tl) RING_CUDA(cudaEventRecord(tl->comm_end[step][r], k.comm));
    }
    return ATTN_OK;
}
// [end transport]

/* ---- Setup: the ranks, their streams, events and buffers (kept for the next call of the same
 * shape: the harness times repeated calls) ---- */

/* The transport and the ranks' devices, decided once, when the ring is first asked for (a call
 * of ring_forward or attention_set_ranks), and kept: with NCCL built in and two or more GPUs
 * visible, one rank per visible GPU (up to RING_MAX_RANKS), the harness's first; else the
 * virtual ring on the harness's GPU (an NCCL build says so on stderr), whose P is
 * virtual_ranks. */
struct Transport {
    bool decided, nccl;
    int n;                     // NCCL: the ranks, one per GPU in devs; virtual: 0
    int dev0;                  // the harness's GPU, where the virtual ranks run
    int devs[RING_MAX_RANKS];
};
static Transport transport;
static int virtual_ranks = 2;  // the virtual ring's P: attention_set_ranks

/* Returns 0, or -1 when CUDA cannot say which GPU is current. */
static int ring_transport() {
    Transport &t = transport;
    if (t.decided) return 0;
    if (cudaGetDevice(&t.dev0) != cudaSuccess) return -1;
    t.decided = true;
#ifdef RING_NCCL
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) n = 0;
    if (n >= 2) {
        t.n = n < RING_MAX_RANKS ? n : RING_MAX_RANKS;
        t.devs[0] = t.dev0;
        for (int i = 0, k = 1; i < n && k < t.n; ++i)
            if (i != t.dev0) t.devs[k++] = i;
        t.nccl = true;
        return 0;
    }
    fprintf(stderr, "lesson 15: one GPU visible: the ring runs on virtual ranks on it (--ranks P, 1..%d), blocks "
            "exchanged by device copies (NCCL needs two or more GPUs)\n", RING_MAX_RANKS);
#endif
    return 0;
}

/* The ranks' devices for the next call, and its transport (*nccl): NCCL's GPUs, or the
 * harness's GPU virtual_ranks times. Returns their number, 0 without a GPU. */
static int ring_devices(int devs[RING_MAX_RANKS], bool *nccl) {
    if (ring_transport()) return 0;
    const Transport &t = transport;
    *nccl = t.nccl;
    const int P = t.nccl ? t.n : virtual_ranks;
    for (int r = 0; r < P; ++r) devs[r] = t.nccl ? t.devs[r] : t.dev0;
    return P;
}

/* attention_ranks.h: the virtual ring runs on P ranks from the next call on; the NCCL ring has
 * one rank per GPU whatever P asks, and says how many. */
int attention_set_ranks(int P) {
    if (P < 1 || P > RING_MAX_RANKS || ring_transport()) return 0;
    if (transport.nccl) return transport.n;
    virtual_ranks = P;
    return P;
}

#ifdef RING_NCCL
/* One communicator per GPU, made once (ncclCommInitAll: one process, all ranks). The ring only
 * sends and receives, so NVLink SHARP (NVLS, multicast objects made at init for collectives) is
 * switched off. Returns 0 or -1 (printed why). */
static int ring_comms(ncclComm_t comm[RING_MAX_RANKS], int P, const int *devs) {
    static ncclComm_t made[RING_MAX_RANKS];
    static int n_made = 0;
    if (!n_made) {
        setenv("NCCL_NVLS_ENABLE", "0", 1);
        const ncclResult_t e = ncclCommInitAll(made, P, devs);
        if (e != ncclSuccess) {
            fprintf(stderr, "%s:%d: ncclCommInitAll over %d GPUs: %s\n", __FILE__, __LINE__, P, ncclGetErrorString(e));
            return -1;
        }
        n_made = P;
    }
    for (int r = 0; r < P; ++r) comm[r] = made[r];
    return 0;
}
#endif

static void rank_release(Rank &k, bool own_comm) {
    cudaSetDevice(k.dev);
    void *bufs[] = {k.Q, k.kv[0], k.kv[1], k.o_blk, k.o_out, k.o_acc, k.l_acc, k.l_blk};
    for (void *b : bufs)
        if (b) cudaFree(b);
    if (k.compute) cudaStreamDestroy(k.compute);
    if (k.comm && own_comm) cudaStreamDestroy(k.comm);
    cudaEvent_t evs[] = {k.received, k.consumed, k.done};
    for (cudaEvent_t e : evs)
        if (e) cudaEventDestroy(e);
    k = Rank{};
}

static void ring_release(Ring &g, int dev0) {
    for (int r = 0; r < g.P; ++r) rank_release(g.rank[r], g.nccl || r == 0);
    cudaSetDevice(dev0);
    if (g.start) cudaEventDestroy(g.start);
    g.P = 0;
    g.start = NULL;
}

/* Rank k's streams, events and buffers for the ring's shape; shared_comm: the virtual ring's
 * one copy stream (NULL: make its own). */
static int rank_alloc(const Ring &g, Rank &k, int dev, cudaStream_t shared_comm) {
    k = Rank{};
    k.dev = dev;
    RING_CUDA(cudaSetDevice(dev));
    RING_CUDA(cudaStreamCreateWithFlags(&k.compute, cudaStreamNonBlocking));
    if (shared_comm) k.comm = shared_comm;
    else RING_CUDA(cudaStreamCreateWithFlags(&k.comm, cudaStreamNonBlocking));
    RING_CUDA(cudaEventCreateWithFlags(&k.received, cudaEventDisableTiming));
    RING_CUDA(cudaEventCreateWithFlags(&k.consumed, cudaEventDisableTiming));
    RING_CUDA(cudaEventCreateWithFlags(&k.done, cudaEventDisableTiming));
    const size_t n = g.lay.per_rank, rows = (size_t)g.B * g.H * g.lay.c;
    const size_t want[] = {n * g.chunk_bytes, 2 * n * g.chunk_bytes, 2 * n * g.chunk_bytes, g.chunk_bytes,
                           n * g.chunk_bytes, n * g.chunk_elems * 4, n * rows * 4, rows * 4};
    void **ptrs[] = {&k.Q, &k.kv[0], &k.kv[1], &k.o_blk, &k.o_out, (void **)&k.o_acc, (void **)&k.l_acc,
                     (void **)&k.l_blk};
    for (int i = 0; i < 8; ++i)
        if (cudaMalloc(ptrs[i], want[i]) != cudaSuccess) {
            size_t total = 0;
            for (size_t w : want) total += w;
            fprintf(stderr, "out of memory: a ring rank on device %d needs %.1f MiB (its chunks, K/V double buffer, "
                    "accumulators)\n", dev, total / 1048576.0);
            *ptrs[i] = NULL;
            return ATTN_OUT_OF_MEMORY;
        }
    return ATTN_OK;
}

/* Lets GPUs a and b read each other's memory directly where they can (the scatter and gather
 * copy between each rank's GPU and the harness's); without it the copies still work, slower. */
static void enable_peer(int a, int b) {
    int ab = 0, ba = 0;
    cudaDeviceCanAccessPeer(&ab, a, b);
    cudaDeviceCanAccessPeer(&ba, b, a);
    if (ab && cudaSetDevice(a) == cudaSuccess) cudaDeviceEnablePeerAccess(b, 0);
    if (ba && cudaSetDevice(b) == cudaSuccess) cudaDeviceEnablePeerAccess(a, 0);
    cudaGetLastError();  // "already enabled" is no error here
}

/* Makes g match the call's shape and ranks: the same, nothing to do; else the ranks are (re)made. */
static int ring_prepare(Ring &g, const attn_args *a) {
    int dev0 = 0;
    RING_CUDA(cudaGetDevice(&dev0));
    int devs[RING_MAX_RANKS];
    bool nccl = false;
    const int n_devs = ring_devices(devs, &nccl);
    if (n_devs < 1) return ATTN_UNSUPPORTED;
    if (g.P && g.ranks == n_devs && g.B == a->B && g.H == a->H && g.N == a->N && g.d == a->d &&
        g.causal == a->causal && g.dtype == a->dtype) {
        g.scale = a->scale;
        return ATTN_OK;
    }
    static bool prepared[RING_MAX_RANKS] = {};  // rank r's device, which the transport fixes, prepared
    ring_release(g, dev0);
    g.nccl = nccl;
#ifdef RING_NCCL
    if (g.nccl && ring_comms(g.comm, n_devs, devs)) return ATTN_UNSUPPORTED;
#endif
    g.ranks = n_devs;
    g.P = ranks_for(n_devs, a->N, a->causal);
    g.B = a->B; g.H = a->H; g.N = a->N; g.d = a->d; g.causal = a->causal; g.dtype = a->dtype; g.scale = a->scale;
    g.lay = layout_of(g.P, a->N, a->causal);
    g.chunk_elems = (size_t)a->B * a->H * g.lay.c * a->d;
    g.chunk_bytes = g.chunk_elems * 2;  // fp16 or bf16
    for (int r = 0; r < g.P; ++r) {
        if (!prepared[r] && block_prepare_device(devs[r])) return ATTN_UNSUPPORTED;
        prepared[r] = true;
        const int rc = rank_alloc(g, g.rank[r], devs[r], g.nccl || r == 0 ? NULL : g.rank[0].comm);
        if (rc != ATTN_OK) {
            ring_release(g, dev0);
            return rc;
        }
        if (devs[r] != dev0) enable_peer(devs[r], dev0);
    }
    RING_CUDA(cudaSetDevice(dev0));
    RING_CUDA(cudaEventCreateWithFlags(&g.start, cudaEventDisableTiming));
    return ATTN_OK;
}

// [region scatter-gather]
/* Copies `rows_per_chunk` rows of `row_bytes` for every (b, h) slice between the full tensor on
 * the harness's device (slices `full_rows` rows apart, chunk starting at row `row0`) and a chunk
 * buffer on rank k's device (slices rows_per_chunk rows apart), on k's compute stream.
 * to_chunk: full -> chunk (scatter), else chunk -> full (gather). */
static int copy_rows(const Ring &g, const Rank &k, int dev0, const void *full, void *chunk_buf, int row0,
                     size_t row_bytes, bool to_chunk) {
    cudaMemcpy3DPeerParms p = {};
    const size_t bh = (size_t)g.B * g.H, c = g.lay.c;
    cudaPitchedPtr f = make_cudaPitchedPtr((char *)full + (size_t)row0 * row_bytes, (size_t)g.N * row_bytes,
                                           c * row_bytes, bh);
    cudaPitchedPtr ch = make_cudaPitchedPtr(chunk_buf, c * row_bytes, c * row_bytes, bh);
    p.srcPtr = to_chunk ? f : ch;
    p.dstPtr = to_chunk ? ch : f;
    p.srcDevice = to_chunk ? dev0 : k.dev;
    p.dstDevice = to_chunk ? k.dev : dev0;
    p.extent = make_cudaExtent(c * row_bytes, bh, 1);
    RING_CUDA(cudaMemcpy3DPeerAsync(&p, k.compute));
    return ATTN_OK;
}

/* Rank r's query chunks into Q, its K and V chunks into the block it holds (kv[0]). */
static int scatter(Ring &g, int r, const attn_args *a, int dev0) {
    Rank &k = g.rank[r];
    k.cur = 0;
    const size_t row = (size_t)g.d * 2;
    for (int j = 0; j < g.lay.per_rank; ++j) {
        const int row0 = chunk_of(g.lay, r, j) * g.lay.c;
        int rc = copy_rows(g, k, dev0, a->Q, chunk(k.Q, g, j), row0, row, true);
        if (rc == ATTN_OK) rc = copy_rows(g, k, dev0, a->K, k_chunk(g, k, j), row0, row, true);
        if (rc == ATTN_OK) rc = copy_rows(g, k, dev0, a->V, v_chunk(g, k, j), row0, row, true);
        if (rc != ATTN_OK) return rc;
    }
    return ATTN_OK;
}

/* Rank r's result into the harness's O and L: the accumulator converted to the dtype, then
 * every query chunk's rows of O and L copied to their place in the sequence. */
static int gather(Ring &g, int r, const attn_args *a, int dev0) {
    Rank &k = g.rank[r];
    const long long n = (long long)g.lay.per_rank * (long long)g.chunk_elems;
    if (g.dtype == DTYPE_FP16) convert_out<<<1024, 256, 0, k.compute>>>((__half *)k.o_out, k.o_acc, n);
    else convert_out<<<1024, 256, 0, k.compute>>>((__nv_bfloat16 *)k.o_out, k.o_acc, n);
    RING_CUDA(cudaGetLastError());
    const size_t rows = (size_t)g.B * g.H * g.lay.c;
    for (int j = 0; j < g.lay.per_rank; ++j) {
        const int row0 = chunk_of(g.lay, r, j) * g.lay.c;
        int rc = copy_rows(g, k, dev0, a->O, chunk(k.o_out, g, j), row0, (size_t)g.d * 2, false);
        if (rc == ATTN_OK) rc = copy_rows(g, k, dev0, a->L, k.l_acc + j * rows, row0, sizeof(float), false);
        if (rc != ATTN_OK) return rc;
    }
    return ATTN_OK;
}
// [end scatter-gather]

// [region ring]
/* The P steps of the ring, once every rank holds its own chunks: at each, the blocks held move
 * on to the next rank while every rank computes on the one it holds. The host issues, per step:
 * the compute streams' waits for the blocks received at the step before, then the exchange (its
 * comm streams wait for the compute of the step before), then the compute; in that order each
 * wait sees the event recorded for it, not the one of the next step. tl: see ring_forward. */
static int run_steps(Ring &g, RingTimeline *tl) {
    /* TODO(7): the P steps. At each: every rank's compute stream waits for the block received at
     * the step before (none at step 0); the exchange of the blocks held now starts (none at the
     * last step); every rank computes on the block it holds (compute_step: rank r holds rank
     * (r - step) mod P's block), between tl's two events when tl is set; then the received block
     * becomes the held one. Each rank's pairs_done (compute_step's counters) starts at zero at
     * every call: a local int pairs_done[RING_MAX_RANKS][2] = {}, since the harness calls
     * attention_forward many times. "Overlap: two streams, four events" gives the order of these
     * calls on the host and why it matters. */
    (void)g; (void)tl; (void)exchange; (void)compute_step;
    return ATTN_NOT_IMPLEMENTED;
}

static Ring the_ring;  // the ranks of the last shape (the harness calls again with the same one)
/* The whole forward pass: scatter, the P steps, gather; the harness's stream waits for every
 * rank's last copy. tl: NULL, or events to record per step and rank (ring_timeline.h). */
int ring_forward(const attn_args *a, RingTimeline *tl) {
    Ring &g = the_ring;
    if ((a->dtype != DTYPE_FP16 && a->dtype != DTYPE_BF16) || (a->d != 64 && a->d != 128) || !(a->scale > 0.f))
        return ATTN_UNSUPPORTED;
    if (a->N < 1 || a->B < 1 || a->H < 1) return ATTN_OK;
    int dev0 = 0;
    RING_CUDA(cudaGetDevice(&dev0));
    if (int rc = ring_prepare(g, a); rc != ATTN_OK) return rc;
    RING_CUDA(cudaEventRecord(g.start, (cudaStream_t)a->stream));
    for (int r = 0; r < g.P; ++r) {
        Rank &k = g.rank[r];
        RING_CUDA(cudaSetDevice(k.dev));
        RING_CUDA(cudaStreamWaitEvent(k.compute, g.start, 0));
        if (int rc = scatter(g, r, a, dev0); rc != ATTN_OK) return rc;
        RING_CUDA(cudaEventRecord(k.consumed, k.compute));  // the first send waits for the scatter
    }
    if (int rc = run_steps(g, tl); rc != ATTN_OK) return rc;
    for (int r = 0; r < g.P; ++r) {
        Rank &k = g.rank[r];
        RING_CUDA(cudaSetDevice(k.dev));
        if (int rc = gather(g, r, a, dev0); rc != ATTN_OK) return rc;
        RING_CUDA(cudaEventRecord(k.done, k.compute));
    }
    RING_CUDA(cudaSetDevice(dev0));
    for (int r = 0; r < g.P; ++r) RING_CUDA(cudaStreamWaitEvent((cudaStream_t)a->stream, g.rank[r].done, 0));
    return ATTN_OK;
}
// [end ring]

/* ring_timeline.h: the ranks of the last call. */
int ring_ranks(int devs[RING_MAX_RANKS], int *chunk_rows) {
    for (int r = 0; r < the_ring.P; ++r) devs[r] = the_ring.rank[r].dev;
    *chunk_rows = the_ring.lay.c;
    return the_ring.P;
}

/* Entry point (reference/include/attention.h): fp16/bf16, d = 64 or 128, scale > 0, Hopper GPUs;
 * anything else is ATTN_UNSUPPORTED. */
int attention_forward(const attn_args *a) { return ring_forward(a, NULL); }

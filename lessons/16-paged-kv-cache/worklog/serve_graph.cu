/* serve_graph.cu: lesson 16's kernels in a serving loop, the step captured in a CUDA graph and
 * replayed; checked against the same steps launched directly, and against float64.
 *
 *   build/serve_graph [--page P] [--steps T] [--seed S]      (make graph-16 builds and runs it)
 *
 * A decoding loop does the same launches every step on inputs that grow: one new key per sequence
 * (the append, attention_append_kv), then the attention of the new query over the cache
 * (attention_forward). Neither reads a length or a table entry on the host, and neither allocates
 * after the first step, so the pair can be recorded once into a CUDA graph and replayed: the host
 * then writes the step's inputs into the same device buffers (a query, a new key and value per
 * sequence, the lengths one longer) and launches one graph instead of two kernels (the persistent
 * input buffers of vLLM's CUDA-graph mode).
 *
 * The batch: B = 8 sequences of 1000 .. 3000 keys to start (drawn from the seed), H = 32 query
 * heads, H_kv = 8, d = 128, fp16, pages of P keys (16 by default) in a shuffled pool that already
 * holds the pages of every key the T steps will append (reference/harness/serving.c's page_map_make
 * over the final lengths: the loop allocates nothing), a capacity of N_kv = 4096 keys per sequence
 * (the plan, and so the split count, depends on it alone). The steps run twice from the same
 * start: launched directly, then replayed from a graph captured once. Checks, each printed with
 * PASS or FAIL:
 *   - every step's O and L from the replay equal the direct launch's, bit for bit;
 *   - the pools after the replays equal the pools after the direct steps, bit for bit;
 *   - the last step's O and L are within the harness's 16-bit rule of the float64 attention
 *     (cpu_reference.h) over each sequence's contiguous keys, new ones included.
 * Then the time per step, direct and replayed (CUDA events around T steps, the inputs' copies
 * included, no L2 flush: the loop as a server runs it). Exit status 0 when every check passes, 1
 * otherwise, 4 without a GPU. */
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <algorithm>
#include <vector>
#include "attention.h"
#include "attention_serving.h"
#include "cuda_check.h"
extern "C" {
#include "cpu_reference.h"
#include "rng.h"
#include "serving.h"
}

static const int B = 8, H = 32, H_KV = 8, D = 128, N_KV = 4096;

/* The loop's inputs on the host, every step's, and where they go on the device. */
struct Loop {
    int page, steps;
    std::vector<int> len0;           /* [B] lengths before the first step */
    std::vector<float> K, V;         /* [B, H_kv, N_kv, d]: every key the loop will have, fp16-rounded */
    std::vector<__half> pool0[2];    /* the pools before the first step (NaN past len0) */
    std::vector<__half> q, kn, vn;   /* per step: Q [B, H, 1, d]; K_new, V_new [B, 1, H_kv, d] */
    std::vector<int> lens;           /* per step: [B] lengths after its append */
    page_map m;
    /* device */
    __half *dK, *dV, *dQ, *dKn, *dVn, *dO;
    float *dL;
    int *dTable, *dLens;
    /* every step's inputs again in pinned memory, the source of the asynchronous copies */
    __half *hQ, *hKn, *hVn;
    int *hLens;
};

static float rounded(float x) { return __half2float(__float2half(x)); }

/* Draws the batch and builds the pools and the steps' inputs. */
static void make_loop(Loop &L, uint64_t seed) {
    rng_t r;
    rng_seed(&r, seed);
    L.len0.resize(B);
    std::vector<int> fin(B);
    for (int b = 0; b < B; ++b) {
        L.len0[b] = 1000 + (int)(rng_next(&r) % 2001);
        fin[b] = L.len0[b] + L.steps;
    }
    L.K.assign((size_t)B * H_KV * N_KV * D, NAN);
    L.V = L.K;
    for (int b = 0; b < B; ++b)
        for (int h = 0; h < H_KV; ++h)
            for (int j = 0; j < fin[b]; ++j)
                for (int c = 0; c < D; ++c) {
                    const size_t at = (((size_t)b * H_KV + h) * N_KV + j) * D + c;
                    L.K[at] = rounded((float)rng_normal(&r));
                    L.V[at] = rounded((float)rng_normal(&r));
                }
    if (page_map_make(&L.m, fin.data(), B, N_KV, L.page, rng_mix(seed, 31))) {
        fprintf(stderr, "serve_graph: out of host memory for the page map\n");
        exit(1);
    }
    char err[600];
    if (attn_check_paged(L.m.table, fin.data(), B, N_KV, L.page, L.m.max_pages, L.m.num_pages, err, sizeof err)) {
        fprintf(stderr, "serve_graph: %s\n", err);
        exit(1);
    }
    const size_t npool = (size_t)L.m.num_pages * L.page * H_KV * D;
    std::vector<float> pool(npool);
    for (int w = 0; w < 2; ++w) {
        page_map_scatter(&L.m, w ? L.V.data() : L.K.data(), L.len0.data(), H_KV, N_KV, D, pool.data());
        L.pool0[w].resize(npool);
        for (size_t e = 0; e < npool; ++e) L.pool0[w][e] = __float2half(pool[e]);
    }
    L.q.resize((size_t)L.steps * B * H * D);
    for (auto &x : L.q) x = __float2half((float)rng_normal(&r));
    L.kn.resize((size_t)L.steps * B * H_KV * D);
    L.vn.resize(L.kn.size());
    L.lens.resize((size_t)L.steps * B);
    for (int s = 0; s < L.steps; ++s)
        for (int b = 0; b < B; ++b) {
            const int j = L.len0[b] + s; /* the key step s appends */
            L.lens[(size_t)s * B + b] = j + 1;
            for (int h = 0; h < H_KV; ++h)
                for (int c = 0; c < D; ++c) {
                    const size_t from = (((size_t)b * H_KV + h) * N_KV + j) * D + c;
                    const size_t to = (((size_t)s * B + b) * H_KV + h) * D + c;
                    L.kn[to] = __float2half(L.K[from]);
                    L.vn[to] = __float2half(L.V[from]);
                }
        }
}

static void alloc_device(Loop &L) {
    const size_t npool = L.pool0[0].size();
    CUDA_CHECK(cudaMalloc(&L.dK, npool * 2));
    CUDA_CHECK(cudaMalloc(&L.dV, npool * 2));
    CUDA_CHECK(cudaMalloc(&L.dQ, (size_t)B * H * D * 2));
    CUDA_CHECK(cudaMalloc(&L.dKn, (size_t)B * H_KV * D * 2));
    CUDA_CHECK(cudaMalloc(&L.dVn, (size_t)B * H_KV * D * 2));
    CUDA_CHECK(cudaMalloc(&L.dO, (size_t)B * H * D * 2));
    CUDA_CHECK(cudaMalloc(&L.dL, (size_t)B * H * 4));
    CUDA_CHECK(cudaMalloc(&L.dTable, (size_t)B * L.m.max_pages * 4));
    CUDA_CHECK(cudaMalloc(&L.dLens, B * 4));
    CUDA_CHECK(cudaMemcpy(L.dTable, L.m.table, (size_t)B * L.m.max_pages * 4, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMallocHost(&L.hQ, L.q.size() * 2));
    CUDA_CHECK(cudaMallocHost(&L.hKn, L.kn.size() * 2));
    CUDA_CHECK(cudaMallocHost(&L.hVn, L.vn.size() * 2));
    CUDA_CHECK(cudaMallocHost(&L.hLens, L.lens.size() * 4));
    memcpy(L.hQ, L.q.data(), L.q.size() * 2);
    memcpy(L.hKn, L.kn.data(), L.kn.size() * 2);
    memcpy(L.hVn, L.vn.data(), L.vn.size() * 2);
    memcpy(L.hLens, L.lens.data(), L.lens.size() * 4);
}

static void reset_pools(Loop &L) {
    CUDA_CHECK(cudaMemcpy(L.dK, L.pool0[0].data(), L.pool0[0].size() * 2, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(L.dV, L.pool0[1].data(), L.pool0[1].size() * 2, cudaMemcpyHostToDevice));
}

/* Step s's inputs into the same device buffers every step, from pinned memory: the copies are
 * asynchronous, on the step's stream, and stay outside the graph. */
static void stage_inputs(Loop &L, int s, cudaStream_t st) {
    CUDA_CHECK(cudaMemcpyAsync(L.dQ, L.hQ + (size_t)s * B * H * D, (size_t)B * H * D * 2, cudaMemcpyHostToDevice, st));
    CUDA_CHECK(cudaMemcpyAsync(L.dKn, L.hKn + (size_t)s * B * H_KV * D, (size_t)B * H_KV * D * 2, cudaMemcpyHostToDevice, st));
    CUDA_CHECK(cudaMemcpyAsync(L.dVn, L.hVn + (size_t)s * B * H_KV * D, (size_t)B * H_KV * D * 2, cudaMemcpyHostToDevice, st));
    CUDA_CHECK(cudaMemcpyAsync(L.dLens, L.hLens + (size_t)s * B, B * 4, cudaMemcpyHostToDevice, st));
}

/* The step itself: the append, then the decode, both on st. Returns the first entry point's error. */
static int launch_step(Loop &L, cudaStream_t st) {
    attn_append_args w = {};
    w.B = B; w.H_kv = H_KV; w.d = D; w.dtype = DTYPE_FP16; w.n_new = 1;
    w.K_new = L.dKn; w.V_new = L.dVn; w.K = L.dK; w.V = L.dV;
    w.block_table = L.dTable; w.page_size = L.page; w.max_pages = L.m.max_pages; w.num_pages = L.m.num_pages;
    w.seqlens_kv = L.dLens; w.N_kv = N_KV; w.stream = st;
    int rc = attention_append_kv(&w);
    if (rc != ATTN_OK) return rc;
    attn_args a = {};
    a.B = B; a.H = H; a.N = 1; a.d = D; a.causal = 0; a.scale = 1.0f / sqrtf((float)D); a.dtype = DTYPE_FP16;
    a.Q = L.dQ; a.K = L.dK; a.V = L.dV; a.O = L.dO; a.L = L.dL; a.stream = st;
    a.N_kv = N_KV; a.H_kv = H_KV; a.seqlens_kv = L.dLens;
    a.block_table = L.dTable; a.page_size = L.page; a.max_pages = L.m.max_pages; a.num_pages = L.m.num_pages;
    return attention_forward(&a);
}

/* O and L of one step, copied back. */
struct StepOut {
    std::vector<__half> O;
    std::vector<float> L;
};
static StepOut read_out(Loop &L, cudaStream_t st) {
    StepOut o;
    o.O.resize((size_t)B * H * D);
    o.L.resize((size_t)B * H);
    CUDA_CHECK(cudaStreamSynchronize(st));
    CUDA_CHECK(cudaMemcpy(o.O.data(), L.dO, o.O.size() * 2, cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(o.L.data(), L.dL, o.L.size() * 4, cudaMemcpyDeviceToHost));
    return o;
}

static std::vector<__half> read_pool(const __half *p, size_t n) {
    std::vector<__half> h(n);
    CUDA_CHECK(cudaMemcpy(h.data(), p, n * 2, cudaMemcpyDeviceToHost));
    return h;
}

/* The last step's O and L against float64 over each sequence's contiguous keys: the harness's rule
 * for 16-bit lessons, |err| <= 2 x the error of a plain fp16 attention + 1e-4 (O), and L within
 * 2 x its plain error + 1e-4 + 1e-5 |L|. */
static bool check_f64(const Loop &L, const StepOut &o) {
    const int s = L.steps - 1;
    double eO = 0, eL = 0, pO = 0, pL = 0, maxL = 0;
    std::vector<double> ref(D), plain(D);
    std::vector<float> q(D);
    for (int b = 0; b < B; ++b)
        for (int h = 0; h < H; ++h) {
            const size_t row = (size_t)b * H + h, kv = (((size_t)b * H_KV + h / (H / H_KV)) * N_KV) * D;
            const int nk = L.lens[(size_t)s * B + b];
            for (int c = 0; c < D; ++c) q[c] = __half2float(L.q[((size_t)s * B * H + row) * D + c]);
            double rl, pl;
            attention_prefix_f64(q.data(), &L.K[kv], &L.V[kv], nk, D, 1.0 / sqrt((double)D), ref.data(), &rl);
            attention_prefix_lowp(q.data(), &L.K[kv], &L.V[kv], nk, D, 1.0 / sqrt((double)D), DTYPE_FP16, plain.data(), &pl);
            for (int c = 0; c < D; ++c) {
                eO = std::max(eO, fabs(__half2float(o.O[row * D + c]) - ref[c]));
                pO = std::max(pO, fabs(plain[c] - ref[c]));
            }
            eL = std::max(eL, fabs(o.L[row] - rl));
            pL = std::max(pL, fabs(pl - rl));
            maxL = std::max(maxL, fabs(rl));
        }
    const double tO = 2 * pO + 1e-4, tL = 2 * pL + 1e-4 + 1e-5 * maxL;
    const bool ok = eO <= tO && eL <= tL;
    printf("%s  the last step against float64 (B H = %d rows, %d..%d keys): max err O %.2g (tol %.2g), L %.2g (tol %.2g)\n",
           ok ? "PASS" : "FAIL", B * H, *std::min_element(L.lens.end() - B, L.lens.end()),
           *std::max_element(L.lens.end() - B, L.lens.end()), eO, tO, eL, tL);
    return ok;
}

static bool same_bits(const void *a, const void *b, size_t n) { return memcmp(a, b, n) == 0; }

int main(int argc, char **argv) {
    Loop L = {};
    L.page = 16;
    L.steps = 16;
    uint64_t seed = 1;
    for (int k = 1; k + 1 < argc; k += 2) {
        if (!strcmp(argv[k], "--page")) L.page = atoi(argv[k + 1]);
        else if (!strcmp(argv[k], "--steps")) L.steps = atoi(argv[k + 1]);
        else if (!strcmp(argv[k], "--seed")) seed = strtoull(argv[k + 1], NULL, 10);
        else { fprintf(stderr, "serve_graph: unknown option %s (--page P, --steps T, --seed S)\n", argv[k]); return 2; }
    }
    if (!attn_page_size_valid(L.page) || L.steps < 1 || L.steps > 1000 || (argc - 1) % 2) {
        fprintf(stderr, "serve_graph: --page takes a power of two in %d..%d, --steps 1..1000\n", ATTN_PAGE_MIN, ATTN_PAGE_MAX);
        return 2;
    }
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev < 1) { fprintf(stderr, "serve_graph: no GPU\n"); return 4; }
    cudaDeviceProp prop;
    CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    make_loop(L, seed);
    alloc_device(L);
    printf("serve_graph: %s; B = %d sequences of %d..%d keys to start, H = %d, H_kv = %d, d = %d, fp16, pages of %d keys "
           "(%d in the pool, %d entries a sequence), %d steps of one new key and one query per sequence\n", prop.name, B,
           *std::min_element(L.len0.begin(), L.len0.end()), *std::max_element(L.len0.begin(), L.len0.end()), H, H_KV, D,
           L.page, L.m.num_pages, L.m.max_pages, L.steps);
    cudaStream_t st;
    CUDA_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    cudaEvent_t e0, e1;
    CUDA_CHECK(cudaEventCreate(&e0));
    CUDA_CHECK(cudaEventCreate(&e1));

    /* the steps launched directly: the first one also allocates the split workspace */
    reset_pools(L);
    std::vector<StepOut> direct;
    for (int s = 0; s < L.steps; ++s) {
        stage_inputs(L, s, st);
        const int rc = launch_step(L, st);
        if (rc != ATTN_OK) { fprintf(stderr, "serve_graph: the lesson returned %d\n", rc); return 1; }
        direct.push_back(read_out(L, st));
    }
    const size_t npool = L.pool0[0].size();
    const std::vector<__half> poolK = read_pool(L.dK, npool), poolV = read_pool(L.dV, npool);

    /* the same steps from a graph captured once */
    reset_pools(L);
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    CUDA_CHECK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
    const int rc = launch_step(L, st);
    CUDA_CHECK(cudaStreamEndCapture(st, &graph));
    if (rc != ATTN_OK) { fprintf(stderr, "serve_graph: the lesson returned %d while captured\n", rc); return 1; }
    CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    size_t nodes = 0;
    CUDA_CHECK(cudaGraphGetNodes(graph, NULL, &nodes));
    bool same = true;
    for (int s = 0; s < L.steps; ++s) {
        stage_inputs(L, s, st);
        CUDA_CHECK(cudaGraphLaunch(exec, st));
        const StepOut o = read_out(L, st);
        same &= same_bits(o.O.data(), direct[s].O.data(), o.O.size() * 2) &&
                same_bits(o.L.data(), direct[s].L.data(), o.L.size() * 4);
    }
    printf("%s  every step's O and L from the graph (%zu nodes, captured once, replayed %d times) equal the direct "
           "launches', bit for bit\n", same ? "PASS" : "FAIL", nodes, L.steps);
    const bool pools = same_bits(read_pool(L.dK, npool).data(), poolK.data(), npool * 2) &&
                       same_bits(read_pool(L.dV, npool).data(), poolV.data(), npool * 2);
    printf("%s  the pools after the replays equal the pools after the direct steps (%d new keys appended per "
           "sequence, in place)\n", pools ? "PASS" : "FAIL", L.steps);
    const bool f64 = check_f64(L, direct.back());

    /* time per step: T steps, the inputs' copies included, direct then replayed */
    float ms[2];
    for (int g = 0; g < 2; ++g) {
        reset_pools(L);
        CUDA_CHECK(cudaStreamSynchronize(st));
        CUDA_CHECK(cudaEventRecord(e0, st));
        for (int s = 0; s < L.steps; ++s) {
            stage_inputs(L, s, st);
            if (g) CUDA_CHECK(cudaGraphLaunch(exec, st));
            else if (launch_step(L, st) != ATTN_OK) return 1;
        }
        CUDA_CHECK(cudaEventRecord(e1, st));
        CUDA_CHECK(cudaEventSynchronize(e1));
        CUDA_CHECK(cudaEventElapsedTime(&ms[g], e0, e1));
    }
    printf("time per step (%d steps, inputs copied each step, no L2 flush): direct launches %.1f us, graph replay %.1f us\n",
           L.steps, 1000 * ms[0] / L.steps, 1000 * ms[1] / L.steps);
    CUDA_CHECK(cudaGraphExecDestroy(exec));
    CUDA_CHECK(cudaGraphDestroy(graph));
    page_map_free(&L.m);
    return same && pools && f64 ? 0 : 1;
}

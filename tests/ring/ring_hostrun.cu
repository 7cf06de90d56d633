/* tests/ring/ring_hostrun.cu: lesson 15's ring run for real on the CPU (tests/ring/hostrun.sh: make
 * emu-15). The solution's host code, unchanged, over the fake CUDA runtime and NCCL of
 * tests/fake_cuda/fake_cuda.cpp and tests/ring/fake_nccl.cpp: lesson 09's library (reference/include/hopper_attention.h, which
 * ring_block.h calls), merge_partial and convert_out replaced by CPU stand-ins (standins.h:
 * float64 attention of one chunk pair, rounded as the kernel rounds), the rest (the
 * layout, the scatter's strided copies, the double buffers, the exchange, the order of pairs and
 * merges, the gather) as the GPU runs it, but synchronously. O and L are graded against float64
 * attention of the whole sequence, on ragged and aligned shapes, causal or not, fp16 and bf16,
 * with a shape repeated (the ranks kept) and changed (the ranks remade).
 * Built twice: without RING_NCCL (the virtual ring, on each P the grader runs by default,
 * ATTN_RANKS_GRADED, asked for as the grader does, with attention_set_ranks) and with it (2, 3 and 4
 * fake GPUs, one rank each whatever attention_set_ranks asks, the blocks moved by the copy engines
 * and by a fake NCCL; with one GPU it must run the virtual ring, on each P again).
 * Order between streams: every ring runs under the fake's two schedules (tests/fake_cuda/fake_cuda.h:
 * each stream's work in its order, a wait holding it until its event's work has run, the copies
 * run last, then first), in the fault mode (the receive buffers poisoned before each transfer and
 * each block checked at the start and the end of each step), so that a missing wait, an event
 * recorded on the wrong stream or a copy into the wrong buffer reads the wrong data in one of the
 * two schedules on every run. What it cannot see: the real kernels (merge_partial's body included:
 * its rule is merge_weights, checked by ring_logic.cu's tests, linked in here), speed. */
#include "ring_logic.cu"  // the solution (or RING_LOGIC_SRC, a student's file) and the logic tests
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <type_traits>
#include <vector>

#define STANDIN_REQUIRE(cond, ...) cr_assert(cond, __VA_ARGS__)
#include "standins.h"  // lesson 09's library, merge_partial and convert_out on the CPU

static const int SCHEDULES[] = {FAKE_COPIES_LAST, FAKE_COPIES_FIRST};
static const char *schedule_name(int s) { return s == FAKE_COPIES_LAST ? "copies last" : "copies first"; }

static void setup(int devices) {
    ring_standins(devices);
    fake_poison_allocations(1);  // a read of a buffer before any write shows as NaN
    cr_assert_eq(attention_set_ring_delay(1), 0, "attention_set_ring_delay(1): the fault mode");
}

/* The transport asked for, and the one the ring must run on. */
static void use_transport(int asked, int want) {
    const int got = attention_set_transport(asked);
    cr_assert_eq(got, want, "attention_set_transport(%d) = %d, want %d (1 copy engines, 2 NCCL, -1 refused)", asked,
                 got, want);
}

/* One call of attention_forward on random inputs (the fake device's memory is host memory),
 * graded against float64 attention of whole rows. */
template <typename T>
static void check_shape(int B, int H, int N, int d, int causal, float qscale, RingTimeline *tl = NULL) {
    const size_t n = (size_t)B * H * N * d;
    T *Q, *K, *V, *O;
    float *L;
    cudaMalloc((void **)&Q, n * sizeof(T)); cudaMalloc((void **)&K, n * sizeof(T)); cudaMalloc((void **)&V, n * sizeof(T));
    cudaMalloc((void **)&O, n * sizeof(T)); cudaMalloc((void **)&L, (size_t)B * H * N * sizeof(float));
    uint64_t x = 88172645463325252ULL ^ (uint64_t)(N * 131 + d * 7 + causal);
    auto uni = [&x]() { x ^= x << 13; x ^= x >> 7; x ^= x << 17; return (float)((x >> 11) * (2.0 / 9007199254740992.0) - 1.0); };
    for (size_t i = 0; i < n; ++i) { Q[i] = from_f<T>(uni() * qscale); K[i] = from_f<T>(uni()); V[i] = from_f<T>(uni()); }
    attn_args a = {};
    a.B = B; a.H = H; a.N = N; a.d = d; a.causal = causal; a.scale = 1.f / sqrtf((float)d);
    a.dtype = std::is_same<T, __half>::value ? DTYPE_FP16 : DTYPE_BF16;
    a.Q = Q; a.K = K; a.V = V; a.O = O; a.L = L; a.N_kv = N; a.H_kv = H;
    cudaStreamCreateWithFlags((cudaStream_t *)&a.stream, 0);
    const int rc = ring_forward(&a, tl);
    cudaStreamSynchronize((cudaStream_t)a.stream);  // under a schedule: runs the queued work
    const char *sched = fake_get_schedule() == FAKE_SYNC ? "" : schedule_name(fake_get_schedule());
    cr_assert_eq(rc, ATTN_OK, "B=%d H=%d N=%d d=%d causal %d: ring_forward returned %d%s", B, H, N, d, causal, rc,
                 rc == ATTN_NOT_IMPLEMENTED ? " (ATTN_NOT_IMPLEMENTED: TODO(5), (6), (7) or (8) still returns it)" : "");
    int devs[RING_MAX_RANKS], rows = 0;
    const int P = ring_ranks(devs, &rows);  // the ranks this shape ran on, for the messages
    const double tol_o = std::is_same<T, __half>::value ? 4e-3 : 3e-2;
    std::vector<double> s(N);
    int bad = 0;
    for (int bh = 0; bh < B * H && bad < 5; ++bh)
        for (int i = 0; i < N && bad < 5; ++i) {
            const int keys = causal ? i + 1 : N;
            double m = -INFINITY, l = 0;
            for (int j = 0; j < keys; ++j) {
                double dot = 0;
                for (int c = 0; c < d; ++c)
                    dot += (double)to_f(Q[((size_t)bh * N + i) * d + c]) * to_f(K[((size_t)bh * N + j) * d + c]);
                s[j] = dot * a.scale;
                m = std::max(m, s[j]);
            }
            for (int j = 0; j < keys; ++j) l += exp(s[j] - m);
            const double Lref = m + log(l), Lgot = L[(size_t)bh * N + i];
            if (!(fabs(Lgot - Lref) <= 1e-4 * (1 + fabs(Lref)))) {
                cr_log_error("B=%d H=%d N=%d d=%d causal %d on %d ranks (%s): L[bh %d][%d] = %g, want %g", B, H, N,
                             d, causal, P, sched, bh, i, Lgot, Lref);
                ++bad;
            }
            for (int c = 0; c < d; ++c) {
                double o = 0;
                for (int j = 0; j < keys; ++j) o += exp(s[j] - m) * to_f(V[((size_t)bh * N + j) * d + c]);
                const double got = to_f(O[((size_t)bh * N + i) * d + c]);
                if (!(fabs(got - o / l) <= tol_o)) {
                    cr_log_error("B=%d H=%d N=%d d=%d causal %d on %d ranks (%s): O[bh %d][%d][%d] = %g, want %g",
                                 B, H, N, d, causal, P, sched, bh, i, c, got, o / l);
                    ++bad;
                    break;
                }
            }
        }
    cr_assert_eq(bad, 0, "B=%d H=%d N=%d d=%d causal %d on %d ranks, %s: the gathered O or L is wrong (above; the "
                 "fault mode's finding, if any, on stderr)", B, H, N, d, causal, P, sched[0] ? sched : "no schedule");
    cudaFree(Q); cudaFree(K); cudaFree(V); cudaFree(O); cudaFree(L);
}

/* The shapes: ragged (77, 1: fewer ranks), aligned on every ring size up to 4 (24, 48, 96),
 * both head dimensions, logits of about +-30, a shape twice in a row, bf16 (last: 96 rows, causal,
 * which every ring up to 4 ranks cuts into 2P equal chunks). */
static void check_shapes() {
    check_shape<__half>(1, 1, 4, 64, 1, 1.f);
    check_shape<__half>(2, 3, 77, 64, 0, 1.f);
    check_shape<__half>(2, 3, 77, 64, 1, 1.f);
    check_shape<__half>(1, 2, 1, 128, 1, 1.f);
    check_shape<__half>(2, 2, 48, 64, 0, 1.f);
    check_shape<__half>(2, 2, 48, 64, 1, 1.f);
    check_shape<__half>(2, 2, 48, 64, 1, 1.f);  // the ranks kept from the call before
    check_shape<__half>(1, 3, 96, 128, 1, 30.f);
    check_shape<__half>(1, 2, 24, 128, 0, 30.f);
    check_shape<__nv_bfloat16>(2, 1, 96, 64, 1, 1.f);
}

/* The shapes under each schedule. */
static void check_shapes_scheduled() {
    for (int sch : SCHEDULES) {
        fake_set_schedule(sch);
        check_shapes();
    }
    fake_set_schedule(FAKE_SYNC);
}

/* The virtual ring on each P the grader runs by default, asked for as the grader asks
 * (attention_set_ranks, its --ranks): two ranks alone would let through a ring that mixes up
 * which rank's block it holds, since the rank before and the rank after are then the same. */
static void check_virtual_rings() {
    static const int graded[] = ATTN_RANKS_GRADED;
    for (int P : graded) {
        cr_assert_eq(attention_set_ranks(P), P, "attention_set_ranks(%d): the virtual ring takes any P in 1..%d", P,
                     RING_MAX_RANKS);
        check_shapes_scheduled();
        int devs[RING_MAX_RANKS], rows = 0;
        cr_assert_eq(ring_ranks(devs, &rows), P, "the virtual ring asked for %d ranks ran the last shape on %d", P,
                     ring_ranks(devs, &rows));
    }
    cr_assert_eq(attention_set_ranks(0), 0, "attention_set_ranks(0): P is 1..%d", RING_MAX_RANKS);
    cr_assert_eq(attention_set_ranks(RING_MAX_RANKS + 1), 0, "attention_set_ranks(%d): P is 1..%d", RING_MAX_RANKS + 1,
                 RING_MAX_RANKS);
}

#ifdef RING_NCCL
Test(ring_hostrun, copy_engines_two_gpus) {  // peer access everywhere (the fake's): the default
    setup(2);
    use_transport(ATTN_TRANSPORT_AUTO, ATTN_TRANSPORT_CE);
    check_shapes_scheduled();
}
Test(ring_hostrun, copy_engines_three_gpus) {
    setup(3);
    use_transport(ATTN_TRANSPORT_CE, ATTN_TRANSPORT_CE);
    check_shapes_scheduled();
}
Test(ring_hostrun, nccl_two_gpus) {
    setup(2);
    use_transport(ATTN_TRANSPORT_NCCL, ATTN_TRANSPORT_NCCL);
    check_shapes_scheduled();
}
Test(ring_hostrun, nccl_four_gpus) {  // one rank per GPU, whatever attention_set_ranks asks
    setup(4);
    use_transport(ATTN_TRANSPORT_NCCL, ATTN_TRANSPORT_NCCL);
    cr_assert_eq(attention_set_ranks(3), 4, "the ring on 4 GPUs has 4 ranks, not the 3 asked for");
    check_shapes_scheduled();
}
/* The timeline's events on both transports (the fake's events: the tool's code path, not its times). */
static void check_timeline(int transport) {
    setup(3);
    use_transport(transport, transport);
    static RingTimeline tl;
    for (int s = 0; s < 3; ++s)
        for (int r = 0; r < 3; ++r) {
            cudaEventCreate(&tl.compute_begin[s][r]); cudaEventCreate(&tl.compute_end[s][r]);
            cudaEventCreate(&tl.comm_begin[s][r]); cudaEventCreate(&tl.comm_end[s][r]);
        }
    fake_set_schedule(FAKE_COPIES_LAST);
    check_shape<__half>(1, 2, 96, 64, 1, 1.f, &tl);
    check_shape<__half>(1, 2, 48, 128, 0, 1.f, &tl);
}
Test(ring_hostrun, nccl_three_gpus_with_timeline) { check_timeline(ATTN_TRANSPORT_NCCL); }
Test(ring_hostrun, copy_engines_three_gpus_with_timeline) { check_timeline(ATTN_TRANSPORT_CE); }
Test(ring_hostrun, nccl_build_one_gpu_runs_virtual) {  // decided when it runs: the virtual ring
    setup(1);
    cr_redirect_stderr();
    cr_assert_eq(attention_set_transport(ATTN_TRANSPORT_NCCL), -1, "--transport nccl on one GPU: refused");
    use_transport(ATTN_TRANSPORT_AUTO, ATTN_TRANSPORT_CE);
    check_virtual_rings();
}
#else
Test(ring_hostrun, virtual_ranks) {
    setup(1);
    use_transport(ATTN_TRANSPORT_CE, ATTN_TRANSPORT_CE);
    check_virtual_rings();
}
Test(ring_hostrun, virtual_refuses_nccl) {  // a build without NCCL
    setup(1);
    cr_redirect_stderr();
    cr_assert_eq(attention_set_transport(ATTN_TRANSPORT_NCCL), -1, "--transport nccl without NCCL: refused");
}
#endif

/* emu.h: run a lesson's CUDA kernel on the CPU, on the emulator core (tests/emu/core.h:
 * one fiber per CUDA thread, run until it waits), to check fragment index math without a GPU.
 *
 * The kernel source is compiled by g++ with its PTX wrappers (the region
 * "ptx" of the lesson file) replaced by the functions below, which implement
 * the PTX ISA semantics of ldmatrix (.x4, .trans), mma.sync.m16n8k16
 * (.row.col, f16/bf16 -> f32), cp.async (with zero fill), commit/wait_group
 * and ex2. Warp-collective operations exchange operands through a per-warp
 * rendezvous; __syncthreads is a per-block barrier (the core's barriers). ldmatrix also counts bank
 * conflicts (8 row addresses of one 8x8 matrix must hit 8 different 16-byte
 * bank groups) and checks alignment and bounds.
 *
 * cp.async modes (EMU_CPASYNC): "now" copies when issued (exposes a missing
 * barrier before overwriting a buffer other warps still read), "late" copies
 * only when a wait_group retires the group (exposes reading before waiting).
 *
 * Independently of the mode, shadow state per 16-byte chunk of shared memory
 * reports cp.async hazards deterministically, whatever the threads'
 * interleaving (see "cp.async hazards" below). Plain C++ loads and stores
 * through shared pointers are not tracked, only ldmatrix and cp.async.
 *
 * The performance report (tests/emu/perf_report.h, on when EMU_REPORT_OUT names a file): the
 * wavefronts of every ldmatrix and st.shared by the line that called it, the cp.async groups
 * in flight at each ldmatrix, and, in a report build (tests/emu/perf_hooks.h), the plain C++
 * loads and stores of shared memory too, by their instruction.
 */
#pragma once
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <stdint.h>
#include <math.h>
#include <vector>
#include <deque>
#include <atomic>
#include <cstring>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <functional>
#include <memory>
#include "../emu/core.h"
#include "../emu/perf_report.h"  // the performance report (EMU_REPORT_OUT): bank conflicts per line, copies in flight

#define __launch_bounds__(...)
#ifndef EMU_NAME  // the kernel's source file, printed in the banner (make passes it)
#define EMU_NAME EMU_SRC
#endif

static emu::Idx emu_gdim;
#define threadIdx (emu::tid())
#define blockIdx (emu::bid())
#define gridDim emu_gdim

static inline int min(int a, int b) { return a < b ? a : b; }
static inline int max(int a, int b) { return a > b ? a : b; }

constexpr size_t EMU_SMEM = 256 * 1024;
alignas(128) unsigned char fa_smem[EMU_SMEM];
static size_t emu_smem_bytes = 0;  // dynamic smem of the current launch

struct EmuWarp {
    emu::Barrier bar{32, "__syncwarp or a warp-collective operation (shuffle, ldmatrix, mma, st.shared)"};
    uint32_t u[32][4];
    uint32_t v[32][2];
    float f[32][4];
};
struct EmuBlock {
    emu::Barrier bar;
    std::vector<EmuWarp> warps;
    EmuBlock(int nt) : bar(nt, "__syncthreads"), warps(nt / 32) {
        for (int w = 0; w < nt / 32; ++w) warps[w].bar.arg = w;
    }
};
static EmuBlock *emu_block;  // the running block's (blocks run one after another)
/* Each CUDA thread's own state, indexed by the core's fiber (emu::self()). */
struct EmuCopy { uint32_t dst; const void *src; bool valid; };
struct EmuThreadState {
    EmuWarp *warp;
    int lane;
    unsigned epoch, wsync;                           // __syncthreads / __syncwarp passed
    std::vector<EmuCopy> cur;                        // cp.async since the last commit
    std::deque<std::vector<EmuCopy>> groups;         // committed, not yet retired
};
static std::vector<EmuThreadState> emu_ts;
#define emu_warp (emu_ts[emu::self()].warp)
#define emu_lane (emu_ts[emu::self()].lane)
#define emu_epoch (emu_ts[emu::self()].epoch)
#define emu_wsync (emu_ts[emu::self()].wsync)
#define emu_cur (emu_ts[emu::self()].cur)
#define emu_groups (emu_ts[emu::self()].groups)
static std::atomic<long> emu_ldsm_conflicts{0}, emu_ldsm_count{0}, emu_errors{0};
static int emu_cpasync_late = 0;

static void emu_fail(const char *msg) {
    if (emu_errors.fetch_add(1) < 5) fprintf(stderr, "EMU ERROR: %s\n", msg);
}

static inline void __syncthreads() { emu_block->bar.arrive_and_wait(); ++emu_epoch; }
static inline void __syncwarp(unsigned = 0xffffffffu) { emu_warp->bar.arrive_and_wait(); ++emu_wsync; }
EMU_UNCOUNTED static inline float __shfl_xor_sync(unsigned, float x, int m) {
    EmuWarp *w = emu_warp;
    w->f[emu_lane][0] = x;
    w->bar.arrive_and_wait();
    float r = w->f[emu_lane ^ m][0];
    w->bar.arrive_and_wait();
    return r;
}

static inline uint32_t smem_u32(const void *p) {
    const unsigned char *c = (const unsigned char *)p;
    if (c < fa_smem || c >= fa_smem + EMU_SMEM) emu_fail("smem_u32 of a non-shared pointer");
    return (uint32_t)(c - fa_smem);
}
/* ---- cp.async hazards ----
 * Every thread of a block passes the same __syncthreads in the same order, so
 * its count (emu_epoch) names the interval between two barriers; the same for
 * __syncwarp within a warp. Per 16-byte chunk:
 *   wr: the last cp.async into it: in flight (issued, its group not yet
 *       retired by a wait_group of the issuing thread) or landed, by thread
 *       `tid`, retired in epoch `epoch` after `wsync` __syncwarps;
 *   rd: the last epoch in which ldmatrix read it, and by which warp (or many).
 * A read is safe only of a landed copy that this thread retired itself, or
 * that a __syncthreads (or, same warp, a __syncwarp) separates from the
 * retiring wait_group. A cp.async may overwrite a chunk only when no copy into
 * it is in flight and no other warp read it since the last __syncthreads.
 * Both orders of a racing pair are caught: whichever happens second sees the
 * first one's state. Hazards are reported in both cp.async modes. */
static std::atomic<uint64_t> emu_wr[EMU_SMEM / 16];  // 0: no cp.async yet
static std::atomic<uint64_t> emu_rd[EMU_SMEM / 16];  // 0: not read yet
constexpr uint64_t EMU_INFLIGHT = 1ull << 63, EMU_WRITTEN = 1ull << 62, EMU_MANY = 0xff;
constexpr uint64_t EMU_PLAIN = 1ull << 61;  // written by a plain st.shared (emu_bwd.h), not a cp.async
static inline uint64_t emu_wr_pack(uint64_t flags, unsigned tid) {
    return flags | EMU_WRITTEN | (uint64_t)(tid & 0x3ff) | (uint64_t)(emu_epoch & 0xffffff) << 10 |
           (uint64_t)(emu_wsync & 0xffffff) << 34;
}
static inline unsigned emu_wr_tid(uint64_t w) { return (unsigned)(w & 0x3ff); }
static inline unsigned emu_wr_epoch(uint64_t w) { return (unsigned)(w >> 10) & 0xffffff; }
static inline unsigned emu_wr_wsync(uint64_t w) { return (unsigned)(w >> 34) & 0xffffff; }
static void emu_hazard(uint32_t chunk, const char *what, const char *who, int other) {
    char msg[320], o[48];
    if (other >= 0) snprintf(o, sizeof o, "%s %d", who, other); else snprintf(o, sizeof o, "%ss: several", who);
    snprintf(msg, sizeof msg, "cp.async hazard: block (%u,%u,%u) thread %u, shared bytes [%u, %u): %s (%s)",
             blockIdx.x, blockIdx.y, blockIdx.z, threadIdx.x, chunk * 16, chunk * 16 + 16, what, o);
    emu_fail(msg);
}
/* ldmatrix reads bytes of chunk `c` in this thread. */
EMU_UNCOUNTED static void emu_track_read(uint32_t c) {
    const unsigned tid = threadIdx.x, warp = tid / 32;
    const uint64_t w = emu_wr[c].load(std::memory_order_acquire);
    if (w & EMU_INFLIGHT)
        emu_hazard(c, "ldmatrix reads it before the wait_group that retires its cp.async", "issued by thread",
                   emu_wr_tid(w));
    else if (w && emu_wr_tid(w) != tid && emu_wr_epoch(w) == (emu_epoch & 0xffffff) &&
             !(emu_wr_tid(w) / 32 == warp && emu_wsync > emu_wr_wsync(w)))
        emu_hazard(c, (w & EMU_PLAIN) ? "a load reads it with no barrier after another thread's st.shared into it"
                                      : "ldmatrix reads it with no __syncthreads after the wait_group that retired its cp.async",
                   "in thread", emu_wr_tid(w));
    uint64_t r = emu_rd[c].load(std::memory_order_relaxed), n;
    do {
        const bool same_epoch = (r >> 8) == (uint64_t)emu_epoch + 1;
        if (same_epoch && ((r & 0xff) == warp || (r & 0xff) == EMU_MANY)) return;
        n = ((uint64_t)emu_epoch + 1) << 8 | (same_epoch ? EMU_MANY : warp);
    } while (!emu_rd[c].compare_exchange_weak(r, n, std::memory_order_acq_rel));
}
/* This thread issues a cp.async into chunk `c`. */
EMU_UNCOUNTED static void emu_track_issue(uint32_t c) {
    const unsigned tid = threadIdx.x, warp = tid / 32;
    const uint64_t w = emu_wr[c].exchange(emu_wr_pack(EMU_INFLIGHT, tid), std::memory_order_acq_rel);
    if (w & EMU_INFLIGHT)
        emu_hazard(c, "cp.async into it while an earlier cp.async into it is still in flight", "issued by thread",
                   emu_wr_tid(w));
    else if (w && emu_wr_tid(w) != tid && emu_wr_epoch(w) == (emu_epoch & 0xffffff))
        emu_hazard(c, "cp.async into it with no __syncthreads after another thread's wait_group retired one",
                   "thread", emu_wr_tid(w));
    const uint64_t r = emu_rd[c].load(std::memory_order_acquire);
    if ((r >> 8) == (uint64_t)emu_epoch + 1 && (r & 0xff) != warp)
        emu_hazard(c, "cp.async into it with no __syncthreads after another warp's ldmatrix of it", "reader warp",
                   (r & 0xff) == EMU_MANY ? -1 : (int)(r & 0xff));
}
/* This thread's wait_group retires its cp.async into chunk `c`. */
static inline void emu_track_retire(uint32_t c) {
    emu_wr[c].store(emu_wr_pack(0, threadIdx.x), std::memory_order_release);
}

EMU_UNCOUNTED static inline uint16_t emu_ld16(uint32_t a) {
    if (a + 2 > emu_smem_bytes) { emu_fail("ldmatrix out of bounds"); return 0; }
    emu_track_read(a / 16);
    uint16_t v; memcpy(&v, fa_smem + a, 2); return v;
}
/* This thread's cp.async groups still in flight (committed and not waited for, or not committed
 * yet), when it reads a tile that cp.async wrote: the pipeline's depth, for the report. */
static void emu_count_flight(uint32_t addr, const char *file, int line) {
    const uint64_t w = addr / 16 < EMU_SMEM / 16 ? emu_wr[addr / 16].load(std::memory_order_relaxed) : 0;
    if (!emu_perf::on() || !(w & EMU_WRITTEN) || (w & EMU_PLAIN)) return;
    long n = !emu_cur.empty();
    for (auto &g : emu_groups) n += !g.empty();
    emu_perf::flight(file, line, n);
}
/* ldmatrix's request for the report: one phase per 8x8 matrix, its 8 rows of 16 bytes. */
static void emu_ldmatrix_request(const EmuWarp *w, const char *kind, const char *file, int line) {
    uint32_t a[32];
    unsigned b[32];
    for (int k = 0; k < 32; ++k) { a[k] = w->u[k][0]; b[k] = 16; }
    emu_perf::warp_request(file, line, kind, a, b, 4, 8);
}
EMU_UNCOUNTED static void emu_ldmatrix(uint32_t r[4], uint32_t addr, bool trans, const char *file, int line) {
    EmuWarp *w = emu_warp;
    const int l = emu_lane;
    w->u[l][0] = addr;
    emu_count_flight(addr, file, line);
    w->bar.arrive_and_wait();
    if (l == 0) {
        emu_ldmatrix_request(w, trans ? "ldmatrix.x4.trans" : "ldmatrix.x4", file, line);
        for (int i = 0; i < 4; ++i) {
            unsigned seen = 0; int conf = 0;
            for (int k = 0; k < 8; ++k) {
                uint32_t a = w->u[8 * i + k][0];
                if (a % 16) emu_fail("ldmatrix row address not 16-byte aligned");
                unsigned bit = 1u << ((a >> 4) & 7);
                if (seen & bit) conf++;
                seen |= bit;
            }
            emu_ldsm_conflicts += conf; emu_ldsm_count += 1;
        }
    }
    for (int i = 0; i < 4; ++i) {
        uint16_t lo, hi;
        if (!trans) {  // row lane/4, cols 2*(lane%4), +1
            uint32_t row = w->u[8 * i + (l >> 2)][0];
            lo = emu_ld16(row + 4 * (l & 3)); hi = emu_ld16(row + 4 * (l & 3) + 2);
        } else {       // rows 2*(lane%4), +1; col lane/4
            lo = emu_ld16(w->u[8 * i + 2 * (l & 3)][0] + 2 * (l >> 2));
            hi = emu_ld16(w->u[8 * i + 2 * (l & 3) + 1][0] + 2 * (l >> 2));
        }
        r[i] = (uint32_t)lo | ((uint32_t)hi << 16);
    }
    w->bar.arrive_and_wait();
}
static inline void ldmatrix_x4(uint32_t r[4], uint32_t addr EMU_SITE) { emu_ldmatrix(r, addr, false, emu_file, emu_line); }
static inline void ldmatrix_x4_trans(uint32_t r[4], uint32_t addr EMU_SITE) {
    emu_ldmatrix(r, addr, true, emu_file, emu_line);
}

/* A 16-bit operand's value, exactly (both widen to fp32 without rounding). Bit arithmetic rather
 * than cuda_fp16.h's conversions: mma_16816 makes 384 per call, and a report build instruments
 * the headers' functions (perf_hooks.h), not these. */
template <typename T> EMU_UNCOUNTED static inline float emu_tof(uint16_t b) {
    uint32_t u;
    if constexpr (std::is_same<T, __half>::value) {
        const uint32_t sign = (uint32_t)(b & 0x8000u) << 16, e = (b >> 10) & 0x1f, m = b & 0x3ffu;
        if (e == 0) {  // zero or subnormal: m * 2^-24
            const float f = (float)m * 5.9604644775390625e-8f;
            return sign ? -f : f;
        }
        u = sign | (e == 0x1f ? 0x7f800000u | m << 13 : (e + 112) << 23 | m << 13);
    } else {
        u = (uint32_t)b << 16;
    }
    float f;
    memcpy(&f, &u, 4);
    return f;
}
/* PTX ISA fragment layouts of mma.m16n8k16 (g = lane>>2, t = lane&3):
 * A: a_i, i = 0..7 (reg i/2, half i%2): row g for i in {0,1,4,5} else g+8,
 *    col 2t + (i&1) (+8 for i >= 4).
 * B: b_i, i = 0..3: row 2t + (i&1) (+8 for i >= 2), col g.
 * C: c_i, i = 0..3: row g (i < 2) or g+8, col 2t + (i&1). */
template <typename T>
EMU_UNCOUNTED static void mma_16816(float d[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
    EmuWarp *w = emu_warp;
    const int l = emu_lane;
    for (int i = 0; i < 4; ++i) { w->u[l][i] = a[i]; w->f[l][i] = d[i]; }
    w->v[l][0] = b0; w->v[l][1] = b1;
    w->bar.arrive_and_wait();
    float A[16][16], B[16][8], C[16][8];
    for (int ln = 0; ln < 32; ++ln) {
        const int g = ln >> 2, t = ln & 3;
        for (int i = 0; i < 8; ++i) {
            uint16_t bits = (uint16_t)(w->u[ln][i / 2] >> (16 * (i & 1)));
            int row = (i < 2 || (i >= 4 && i < 6)) ? g : g + 8;
            int col = 2 * t + (i & 1) + (i >= 4 ? 8 : 0);
            A[row][col] = emu_tof<T>(bits);
        }
        for (int i = 0; i < 4; ++i) {
            uint16_t bits = (uint16_t)(w->v[ln][i / 2] >> (16 * (i & 1)));
            int row = 2 * t + (i & 1) + (i >= 2 ? 8 : 0);
            B[row][g] = emu_tof<T>(bits);
        }
        for (int i = 0; i < 4; ++i) C[i < 2 ? g : g + 8][2 * t + (i & 1)] = w->f[ln][i];
    }
    const int g = l >> 2, t = l & 3;
    for (int i = 0; i < 4; ++i) {
        const int row = i < 2 ? g : g + 8, col = 2 * t + (i & 1);
        float acc = C[row][col];
        for (int k = 0; k < 16; ++k) acc += A[row][k] * B[k][col];
        d[i] = acc;
    }
    w->bar.arrive_and_wait();
}
static inline float ex2(float x) { return exp2f(x); }

/* A fence, an integer atomic add and loads through L2 (lesson 12's last-block merge). Blocks
 * run one after another here, so they are plain memory operations. */
static inline void __threadfence() { std::atomic_thread_fence(std::memory_order_seq_cst); }
static inline int atomicAdd(int *p, int v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }
template <typename T> static inline T __ldcg(const T *p) { return *p; }

EMU_UNCOUNTED static inline void emu_do_copy(const EmuCopy &c) {
    if (c.dst % 16 || c.dst + 16 > emu_smem_bytes) { emu_fail("cp.async destination out of bounds/misaligned"); return; }
    if (c.valid) memcpy(fa_smem + c.dst, c.src, 16); else memset(fa_smem + c.dst, 0, 16);
}
EMU_UNCOUNTED static inline void cp_async_16(uint32_t dst, const void *src, bool valid) {
    if ((uintptr_t)src % 16) emu_fail("cp.async source not 16-byte aligned");
    EmuCopy c{dst, src, valid};
    if (dst % 16 == 0 && dst + 16 <= emu_smem_bytes) emu_track_issue(dst / 16);
    if (!emu_cpasync_late) emu_do_copy(c);
    emu_cur.push_back(c);  // in flight (for the shadow) until a wait_group retires it, in both modes
}
static inline void cp_async_commit() { emu_groups.push_back(emu_cur); emu_cur.clear(); }
template <int N> static inline void cp_async_wait() {
    while ((int)emu_groups.size() > N) {
        for (auto &c : emu_groups.front()) {
            if (emu_cpasync_late) emu_do_copy(c);
            if (c.dst % 16 == 0 && c.dst + 16 <= emu_smem_bytes) emu_track_retire(c.dst / 16);
        }
        emu_groups.pop_front();
    }
}

/* Run fn() as grid x nt CUDA threads, one block after another, on the emulator core. */
static void emu_launch(dim3 grid, int nt, size_t smem, const std::function<void()> &fn) {
    if (smem > EMU_SMEM) { emu_fail("smem too large"); return; }
    if (nt % 32) { emu_fail("a block that is not whole warps"); return; }
    emu_gdim = {grid.x, grid.y, grid.z};
    emu_smem_bytes = smem;
    std::unique_ptr<EmuBlock> blk;
    emu::Hooks h;
    h.block_begin = [&] {
        memset(fa_smem, 0xff, EMU_SMEM);  // NaN in fp16 and bf16
        for (auto &w : emu_wr) w.store(0, std::memory_order_relaxed);
        for (auto &r : emu_rd) r.store(0, std::memory_order_relaxed);
        blk = std::make_unique<EmuBlock>(nt);
        emu_block = blk.get();
        emu_ts.assign(nt, EmuThreadState{});
        for (int i = 0; i < nt; ++i) { emu_ts[i].warp = &blk->warps[i / 32]; emu_ts[i].lane = i % 32; }
    };
    h.thread = [&](int) {
        fn();
        if (!emu_cur.empty()) emu_fail("uncommitted cp.async at exit");
    };
    h.block_end = [] { emu_perf::block_end(); };
    h.on_hang = [] {
        emu_fail("the block hangs (see EMU HANG above)");
        printf("EMU FAILED (hang)\n");
        fflush(stdout);
        _exit(3);
    };
    emu::run_grid(emu::Idx{grid.x, grid.y, grid.z}, nt, h);
    emu_block = nullptr;
}

/* ---- test data and float64 reference ---- */
template <typename T> static T emu_cvt(float x) {
    if constexpr (std::is_same<T, __half>::value) return __float2half_rn(x);
    else return __float2bfloat16_rn(x);
}
template <typename T> static double emu_val(T x) {
    if constexpr (std::is_same<T, __half>::value) return __half2float(x);
    else return __bfloat162float(x);
}
struct EmuResult { double err_o, err_l; int nan; };
template <typename T>
struct EmuCase {
    int B, H, N, D, causal; float scale;
    std::vector<T> Q, K, V, O; std::vector<float> L;
    EmuCase(int B_, int H_, int N_, int D_, int c, float qmul, unsigned seed) : B(B_), H(H_), N(N_), D(D_), causal(c) {
        scale = 1.0f / sqrtf((float)D);
        size_t n = (size_t)B * H * N * D;
        std::mt19937 rng(seed);
        std::uniform_real_distribution<float> u(-1.f, 1.f);
        Q.resize(n); K.resize(n); V.resize(n); O.resize(n); L.resize((size_t)B * H * N);
        for (size_t i = 0; i < n; ++i) { Q[i] = emu_cvt<T>(u(rng) * qmul); K[i] = emu_cvt<T>(u(rng)); V[i] = emu_cvt<T>(u(rng)); }
        uint16_t nanbits = 0x7fff;
        for (auto &o : O) memcpy(&o, &nanbits, 2);
        for (auto &x : L) x = NAN;
    }
    EmuResult check() const {
        EmuResult r{0, 0, 0};
        std::vector<double> s(N);
        for (int bh = 0; bh < B * H; ++bh)
            for (int i = 0; i < N; ++i) {
                const size_t qi = ((size_t)bh * N + i) * D;
                double mx = -INFINITY;
                int kend = causal ? i + 1 : N;
                for (int j = 0; j < kend; ++j) {
                    double acc = 0;
                    for (int c = 0; c < D; ++c) acc += emu_val(Q[qi + c]) * emu_val(K[((size_t)bh * N + j) * D + c]);
                    s[j] = acc * scale;
                    mx = s[j] > mx ? s[j] : mx;
                }
                double l = 0;
                for (int j = 0; j < kend; ++j) { s[j] = exp(s[j] - mx); l += s[j]; }
                for (int c = 0; c < D; ++c) {
                    double acc = 0;
                    for (int j = 0; j < kend; ++j) acc += s[j] * emu_val(V[((size_t)bh * N + j) * D + c]);
                    double o = emu_val(O[qi + c]);
                    if (std::isnan(o)) r.nan++;
                    double e = fabs(o - acc / l);
                    if (!(e <= r.err_o)) r.err_o = std::isnan(e) ? INFINITY : e;
                }
                double Lr = mx + log(l), Lk = L[(size_t)bh * N + i];
                if (std::isnan(Lk)) r.nan++;
                double e = fabs(Lk - Lr);
                if (!(e <= r.err_l)) r.err_l = std::isnan(e) ? INFINITY : e;
            }
        return r;
    }
};

/* A report build (tests/emu/grade.py, EMU_REPORT on) also counts the kernel's ordinary loads and
 * stores of shared memory: tests/emu/perf_hooks.h, with a lane's barriers as its position. */
#ifdef EMU_PERF_HOOKS
static inline uint64_t emu_perf_sync() { return (uint64_t)emu_epoch << 32 | emu_wsync; }
#define EMU_PERF_SMEM fa_smem
#define EMU_PERF_SMEM_BYTES EMU_SMEM
#include "../emu/perf_hooks.h"
#endif

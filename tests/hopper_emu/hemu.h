/* hemu.h: lesson 09's kernel on the CPU, on the emulator core (tests/emu/core.h: one fiber per
 * CUDA thread, run until it waits or polls in vain), with the Hopper
 * instructions it uses emulated from their PTX ISA definitions, to check index math,
 * descriptors, barrier protocols and ordering without a GPU.
 *
 * The kernel source is compiled by g++ with FA_EMULATOR defined, so that it leaves out its own
 * PTX wrappers; the stand-ins ptx_hopper.h and ptx_mma.h in this directory, first on the
 * include path, bring the functions below instead:
 *   - wgmma.mma_async m64nNk16 (ss and rs, f16/bf16 -> f32), fence, commit_group, wait_group:
 *     descriptors decoded with the canonical shared-memory layouts of the PTX ISA (none,
 *     32/64/128-byte swizzle; K-major and MN-major); the products land in the accumulators
 *     only when a wait_group retires their group. EMU_WGMMA=late also reads the operands
 *     then (not at issue), and lets the other threads run at every mbarrier arrive, which
 *     exposes a slot released before its wgmma finished;
 *   - cp.async.bulk.tensor (3-D tiled, 128-byte swizzle, zero fill out of bounds) with
 *     complete_tx on an mbarrier. EMU_TMA=late delivers a copy only when some thread waits on
 *     its barrier (a consumer that reads without waiting sees old bytes);
 *   - the TMA store (shared -> global, rows out of bounds skipped) with bulk_group commit and
 *     wait_group.read: its reads of shared memory are checked like wgmma's (async proxy);
 *     EMU_TMA=late makes them only at the wait_group.read that covers the store (a tile
 *     rewritten before that wait is stored with the new values);
 *   - atomicAdd / atomicExch on int in global memory (blocks run one after another);
 *   - mbarrier init / arrive / arrive.expect_tx / try_wait.parity with phases and tx-counts;
 *   - bar.sync / bar.arrive (named barriers), __syncthreads, __syncwarp, shuffles, warp votes;
 *   - setmaxnreg with a per-block register pool (inc blocks until the pool has enough);
 *   - fence.proxy.async, ordinary shared loads and stores.
 * Lesson 13 adds: wgmma with both operands MN-major (wgmma_ss_mn); the bulk copy without a tensor
 * map (cp.async.bulk global -> shared, complete_tx on an mbarrier, delivered like a TMA copy); the
 * bulk reduce-add (cp.reduce.async.bulk .add.f32 shared -> global, a bulk group whose reads of
 * shared memory are checked like a TMA store's); ld.shared.v2.f32; cp.async.bulk.wait_group
 * (bulk_wait, the writes done too).
 *
 * Ordering is checked, whatever the interleaving of the threads, with vector clocks (a
 * happens-before relation built from every barrier, mbarrier phase and TMA delivery) and a
 * shadow record per 16-byte chunk of shared memory: every read must be ordered after the
 * write it reads (and, for wgmma reading ordinary stores, after a fence.proxy.async of the
 * writer); every write (TMA or ordinary) must be ordered after every earlier read and write
 * of its bytes. The PTX rules checked besides: a wgmma.fence before the first wgmma after a
 * wait_group; every wgmma committed before a wait; none in flight at exit; likewise every TMA
 * store committed and waited for; no mbarrier phase with more arrivals than its count; no
 * named barrier left with arrivals nobody matched. The core reports a hang (no thread can make
 * progress: every one waits at a barrier that cannot complete or polls an mbarrier that nothing
 * can complete any more) at once, with what each thread waits for. Async engines are no threads:
 * a TMA copy lands at issue, or (EMU_TMA=late) when a thread polls its mbarrier; a wgmma's
 * products at its wait_group.
 *
 * Diagnoses speak the kernel's terms where the driver describes them: emu_bar_name names each
 * mbarrier by its role, emu_regions is the kernel's shared-memory layout as a table of named
 * regions (so a shared address reads "dO_i slot 1: row 0, columns 0-1"), emu_role_name names
 * the threads ("the producer", "consumer warpgroup 1"), emu_globals the launch's global buffers
 * (a bulk copy or reduce-add outside them is reported, not let loose on the host's memory). A
 * wgmma read that fails names the operand element and its descriptor (start, LBO, SBO, major-
 * ness). After a hang, each mbarrier a thread is stuck on gets its side of the story: the
 * threads of its arriving side that have not arrived and what they wait on (a cycle, named),
 * phases that ran ahead of their waiter (too many arrivals per round), and waits that passed
 * before their barrier completed any phase (a parity one phase off).
 *
 * The performance report (tests/emu/perf_report.h, on when EMU_REPORT_OUT names a file): for each
 * wait_group line, the wgmma groups it retired and the ex2 and shuffles the thread ran while they
 * were in flight (the overlap of softmax and GEMM); at each wgmma line, the tiles TMA brought that
 * no wgmma had read yet (the ring's depth). */
#pragma once
#include <cuda.h>
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <stdint.h>
#include <math.h>
#include <algorithm>
#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <unistd.h>
#include <vector>
#include "../emu/core.h"
#include "../emu/perf_report.h"  // the performance report (EMU_REPORT_OUT): wgmma overlap, the TMA ring

#define __launch_bounds__(...)
#ifndef EMU_NAME
#define EMU_NAME "kernel"
#endif

static emu::Idx emu_gdim;
#define threadIdx (emu::tid())
#define blockIdx (emu::bid())
/* gridDim: a reference, not a macro, so that host code may name a launch configuration's field of
 * that name (cudaLaunchConfig_t: emu_host.h's cudaLaunchKernelEx). */
static emu::Idx &gridDim = emu_gdim;
static inline int min(int a, int b) { return a < b ? a : b; }
static inline int max(int a, int b) { return a > b ? a : b; }

constexpr size_t EMU_SMEM = 232448;  // 227 KiB, an H100's largest block
alignas(1024) unsigned char fa_smem[EMU_SMEM];
static size_t emu_smem_bytes = 0;

/* ---------------------------------------------------------------- errors ---- */
static std::atomic<long> emu_errors{0};
static void emu_fail(const std::string &msg) {
    if (emu_errors.fetch_add(1) < 8) {
        fprintf(stderr, "EMU ERROR: block %u thread %u: %s\n", blockIdx.x, threadIdx.x, msg.c_str());
    }
}
static std::string emu_fmt(const char *f, ...) __attribute__((format(printf, 1, 2)));
static std::string emu_fmt(const char *f, ...) {
    char b[512];
    va_list ap;
    va_start(ap, f);
    vsnprintf(b, sizeof b, f, ap);
    va_end(ap);
    return b;
}

/* ---------------------------------------------------------------- block state ---- */
static int emu_nt = 0;            // threads per block
static int emu_nv = 0;            // vector-clock width: threads + TMA agents (one per mbarrier)
constexpr int EMU_MAX_MBAR = 64;
/* Anything that changes the state another thread may wait on counts as progress for the core's
 * hang detection (emu::progress; a poll that fails does not). */
#define emu_progress (emu::core.progress)
static bool emu_wgmma_late = false, emu_tma_late = false;
static std::function<std::string(uint32_t)> emu_bar_name;  // names an mbarrier by its address (driver)
/* The kernel's shared memory in the lesson's words, described by the driver: a table of named
 * regions, so that a diagnosis says which tile, slot, row and columns an address holds instead of
 * its bytes. A region is `count` instances (ring slots, double buffers) of `bytes` each from
 * `start` (from the block's 1024-byte aligned base): a tile in the layout TMA writes (`rows` > 0:
 * d / 64 boxes of `rows` rows of 128 bytes, 16-bit elements, the 128-byte swizzle; a 1024-byte
 * aligned start) or an array of `esize`-byte elements, each an `element` ("query", "float"). */
struct EmuRegion {
    std::string name;
    uint32_t start = 0, bytes = 0;
    int count = 1;
    std::string instance = "slot";
    int rows = 0;
    int esize = 4;
    std::string element = "element";
};
static std::vector<EmuRegion> emu_regions;
/* The launch's global buffers, named by the driver (optional): a bulk copy or reduce-add that
 * leaves them is reported by the buffer it runs past, not left to corrupt the host's memory. */
struct EmuGlobal {
    std::string name;
    const void *p;
    size_t bytes;
};
static std::vector<EmuGlobal> emu_globals;
/* A thread's role in the kernel ("the producer", "consumer warpgroup 1"), set by the driver. */
static std::function<std::string(int)> emu_role_name;

struct EmuTh;
/* the core's words for a lane that never reaches a warp's rendezvous (hang report) */
static const char *const EMU_WARP_EXCHANGE = "a warp-level exchange (shuffle or wgmma operand) a lane never reached";
struct EmuWarp {
    emu::Barrier bar{32, EMU_WARP_EXCHANGE};
    uint32_t u[32][4];
    uint64_t da[32], db[32];
    float f[32];
    std::vector<float> Bf;  // decoded B operand [16][N] of the current wgmma
};
struct EmuNamedBar {
    int expected = 0, arrived = 0;
    unsigned long gen = 0;
    std::vector<uint32_t> acc, done;
    std::vector<int> waiters;  // fibers in bar.sync / __syncwarp
};
struct EmuMbar {
    int index = -1, expected = 0, pending = 0;
    long long tx = 0;
    unsigned phase = 0;
    std::vector<uint32_t> acc, done[2], agent;  // agent: the VC of the TMA copies into this barrier
    std::vector<int> arrivers;                  // threads that arrived in the current phase
    int last_threads = 0, last_warps = 0;       // ... and in the last completed one: how many, in how many warps
    /* for a hang's diagnosis: which threads ever arrived on it (its arriving side), how many waits
     * each thread passed on it, and the first thread whose wait passed before any phase completed */
    std::vector<char> ever;
    std::vector<int> passes;
    int early = -1;
};
struct EmuTmaCopy {
    uint32_t dst; const CUtensorMap *map; int c[3]; uint32_t bar; std::vector<uint32_t> vc;
    const void *src = nullptr;  // map == nullptr: a bulk copy of `bytes` bytes from src (lesson 13)
    uint32_t bytes = 0;
};

/* A tile a TMA or bulk copy brought (or is bringing) that no wgmma has read yet: its bytes and the
 * mbarrier phase it completes (the copies of one phase are one tile), for the report's ring depth. */
struct EmuTileAhead {
    uint32_t lo, hi, bar;
    unsigned phase;
};
struct EmuBlockState {
    std::vector<uint32_t> vc;             // [thread][emu_nv]
    std::unique_ptr<std::atomic<uint64_t>[]> wr;  // per 4-byte word: last write
    std::unique_ptr<std::atomic<uint32_t>[]> wf;  // per 4-byte word: fence after an ordinary store
    std::unique_ptr<std::atomic<uint32_t>[]> rd;  // [chunk][thread]: clock of the last read
    std::unique_ptr<std::atomic<int>[]> store_rd; // per chunk: TMA stores that may still read it
    std::map<uint32_t, EmuMbar> mbar;
    std::vector<uint32_t> mbar_addr;      // by index
    EmuNamedBar named[16];
    std::vector<EmuNamedBar> warpbar;     // __syncwarp, per warp
    std::vector<EmuWarp> warps;
    std::deque<EmuTmaCopy> tma_queue;     // EMU_TMA=late
    std::vector<EmuTileAhead> ahead;      // copies no wgmma has read yet (the report)
    long long reg_pool = 0;
};
static EmuBlockState *emu_blk = nullptr;

constexpr size_t EMU_CHUNKS = EMU_SMEM / 16, EMU_WORDS = EMU_SMEM / 4;

/* ---------------------------------------------------------------- thread state ---- */
struct EmuWgOp {
    float *d;
    int N;
    bool rs;
    uint64_t da, db;
    float A[2][16];  // rs: this thread's two rows of A, gathered at issue
    int scale_d;
    std::vector<float> prod;
    bool computed;
    void (*compute)(EmuWgOp &);
    bool ta = false, tb = false;  // A, B MN-major (imm-trans-a, imm-trans-b); rs: B MN-major
    /* Hook for operand types of other widths (wgmma_e4m3.h): their own chunk list, and A's
     * rows gathered at issue for rs (64 8-bit codes). Unset for the 16-bit types here. */
    void (*chunks)(const EmuWgOp &, std::vector<uint32_t> &) = nullptr;
    uint8_t A8[2][32] = {};
};
struct EmuBulkStore {
    const CUtensorMap *map; int c[3]; uint32_t src; bool done;
    float *gdst = nullptr;  // map == nullptr: a bulk reduce-add of `bytes` bytes into gdst (lesson 13)
    uint32_t bytes = 0;
};
struct EmuTh {
    int tid, warp, lane;
    uint32_t *vc;
    bool wg_fenced = false;
    std::vector<EmuWgOp> uncommitted;
    std::deque<std::vector<EmuWgOp>> groups;
    /* for the report: this thread's other work so far (ex2, shuffles), and that count when each
     * group in `groups` was committed: the difference at its wait is the work it overlapped */
    long ops = 0;
    std::deque<long> group_ops;
    std::vector<EmuBulkStore> bulk_open;             // TMA stores since the last bulk commit
    std::deque<std::vector<EmuBulkStore>> bulk_groups;
    int regs = 0;
    std::vector<uint32_t> unfenced;  // words this thread stored since its last fence.proxy.async
};
/* Each CUDA thread's state, indexed by the core's fiber. */
static std::vector<EmuTh> emu_ths;
static inline EmuTh *emu_me() { return &emu_ths[emu::self()]; }

static inline void emu_tick() { emu_me()->vc[emu_me()->tid]++; }
static inline void vc_join(uint32_t *a, const uint32_t *b) {
    for (int i = 0; i < emu_nv; ++i) a[i] = std::max(a[i], b[i]);
}
static inline void vc_join(std::vector<uint32_t> &a, const uint32_t *b) { vc_join(a.data(), b); }

/* ---------------------------------------------------------------- the kernel's words ---- */
/* What shared bytes [a, b) hold, from the driver's table (emu_regions): "dO_i slot 1: row 5,
 * columns 16-17"; "" where the table says nothing. [a, b) lies in one 16-byte chunk, so within
 * one row of a TMA tile (the swizzle moves whole chunks). */
static std::string emu_where(uint32_t a, uint32_t b) {
    for (const EmuRegion &r : emu_regions) {
        if (!r.bytes || a < r.start || a >= r.start + (uint32_t)r.count * r.bytes) continue;
        const uint32_t i = (a - r.start) / r.bytes, o = (a - r.start) % r.bytes;
        std::string s = r.name + (r.count > 1 ? emu_fmt(" %s %u", r.instance.c_str(), i) : std::string());
        if (r.rows > 0) {
            const uint32_t lin = o ^ (((o >> 7) & 7u) << 4), box = (uint32_t)r.rows * 128;  // unswizzled
            const uint32_t row = lin % box / 128, col = lin / box * 64 + lin % 128 / 2, n = (b - a + 1) / 2;
            return s + emu_fmt(": row %u, column%s %u", row, n > 1 ? "s" : "", col) +
                   (n > 1 ? emu_fmt("-%u", col + n - 1) : std::string());
        }
        const uint32_t e = o / (uint32_t)r.esize, n = (b - a + r.esize - 1) / (uint32_t)r.esize;
        return s + emu_fmt(": %s %u", r.element.c_str(), e) + (n > 1 ? emu_fmt("-%u", e + n - 1) : std::string());
    }
    return "";
}
/* Global bytes [p, p + bytes) lie in one of the driver's buffers (or it named none); else the
 * diagnosis says where they start: past the end of the nearest buffer before them (and inside
 * which other one), or inside one they run out of; and false. */
static bool emu_global_ok(const void *p, size_t bytes, const char *what) {
    const char *a = (const char *)p;
    const EmuGlobal *before = nullptr, *in = nullptr;
    for (const EmuGlobal &g : emu_globals) {
        const char *s = (const char *)g.p, *e = s + g.bytes;
        if (a >= s && a + bytes <= e) return true;
        if (a >= s && a < e) in = &g;
        if (e <= a && (!before || e > (const char *)before->p + before->bytes)) before = &g;
    }
    if (emu_globals.empty()) return true;
    std::string where;
    if (before)
        where = emu_fmt("it starts %zu bytes past the end of %s", (size_t)(a - (const char *)before->p) - before->bytes,
                        before->name.c_str()) + (in ? " (inside " + in->name + ")" : std::string());
    else if (in)
        where = emu_fmt("it starts %zu bytes into %s (%zu bytes) and runs past its end", (size_t)(a - (const char *)in->p),
                        in->name.c_str(), in->bytes);
    else
        where = "it starts before every one";
    emu_fail(emu_fmt("%s of %zu bytes lies outside the launch's buffers: %s", what, bytes, where.c_str()));
    return false;
}
/* "shared bytes [a, b)", with what they hold where the driver's table says. */
static std::string emu_bytes(uint32_t a, uint32_t b) {
    const std::string w = emu_where(a, b);
    return emu_fmt("shared bytes [%u, %u)", a, b) + (w.empty() ? "" : " (" + w + ")");
}
/* A set of the block's threads, by role where the driver names them: "the producer (thread 0),
 * consumer warpgroup 0 (lane 0 of warps 4-7)". */
static std::string emu_threads(std::vector<int> t) {
    std::sort(t.begin(), t.end());
    t.erase(std::unique(t.begin(), t.end()), t.end());
    std::vector<std::pair<std::string, std::vector<int>>> roles;
    for (int x : t) {
        const std::string r = emu_role_name ? emu_role_name(x) : "";
        if (roles.empty() || roles.back().first != r) roles.push_back({r, {}});
        roles.back().second.push_back(x);
    }
    std::string out;
    for (auto &rv : roles) {
        const std::vector<int> &v = rv.second;
        bool lane0 = v.size() > 1;
        for (int x : v) lane0 = lane0 && x % 32 == 0;
        std::string ids;
        for (size_t i = 0; i < v.size();) {  // runs of consecutive threads (of warps, for lane 0s)
            const int step = lane0 ? 32 : 1;
            size_t j = i;
            while (j + 1 < v.size() && v[j + 1] == v[j] + step) ++j;
            const int a = lane0 ? v[i] / 32 : v[i], b = lane0 ? v[j] / 32 : v[j];
            ids += (ids.empty() ? "" : ", ") + (a == b ? emu_fmt("%d", a) : emu_fmt("%d-%d", a, b));
            i = j + 1;
        }
        const bool one = v.size() == 1;
        ids = lane0 ? "lane 0 of warp" + std::string(v.size() > 1 ? "s " : " ") + ids
                    : (one ? "thread " : "threads ") + ids;
        out += (out.empty() ? "" : ", ") + (rv.first.empty() ? ids : rv.first + " (" + ids + ")");
    }
    return out.empty() ? "no thread" : out;
}

/* ---------------------------------------------------------------- shadow memory ---- */
/* Per 4-byte word, the last write: bit 63 valid, bit 62 ordinary store (generic proxy), bits
 * 40-55 the writer (thread, or emu_nt + mbarrier index for a TMA copy), bits 0-31 the
 * writer's clock; and for an ordinary store, the writer's clock at its first
 * fence.proxy.async after it (0: none yet). Per 16-byte chunk and thread, the clock of the
 * thread's last read. */
static inline uint64_t emu_wr_pack(int who, bool generic, uint32_t clock) {
    return 1ull << 63 | (generic ? 1ull << 62 : 0) | (uint64_t)(who & 0xffff) << 40 | clock;
}
#define emu_unfenced (emu_me()->unfenced)
/* The wgmma whose operands are being checked (emu_checking_op), in a read's diagnosis: which
 * operand and element the address is, and that operand's descriptor. */
static const EmuWgOp *emu_checking_op = nullptr;
static std::string emu_read_context(uint32_t addr);
static std::string emu_who(int who) {
    if (who < emu_nt) return emu_threads({who});
    const size_t i = (size_t)(who - emu_nt);
    const uint32_t addr = i < emu_blk->mbar_addr.size() ? emu_blk->mbar_addr[i] : 0;
    return emu_fmt("a TMA copy completing on %s", emu_bar_name ? emu_bar_name(addr).c_str() : "an mbarrier");
}
/* A read of 16-byte chunk `chunk` by this thread (`what`: "wgmma", "ld.shared") must be
 * ordered after the writes of its 4 words. */
static void emu_check_words(uint32_t wd0, uint32_t wd1, bool async, const char *what) {
    for (uint32_t wd = wd0; wd < wd1; ++wd) {
        const uint64_t w = emu_blk->wr[wd].load(std::memory_order_acquire);
        if (!w) {
            emu_fail(emu_fmt("%s reads %s that nothing has written in this block%s", what,
                             emu_bytes(4 * wd, 4 * wd + 4).c_str(), emu_read_context(4 * wd).c_str()));
            return;
        }
        const int who = (int)((w >> 40) & 0xffff);
        const uint32_t k = (uint32_t)w;
        if (emu_me()->vc[who] < k) {
            emu_fail(emu_fmt("hazard: %s reads %s written by %s with nothing ordering the write "
                             "before the read (a missing mbarrier wait, or a wrong phase parity?)%s",
                             what, emu_bytes(4 * wd, 4 * wd + 4).c_str(), emu_who(who).c_str(),
                             emu_read_context(4 * wd).c_str()));
            return;
        }
        if (async && (w >> 62 & 1)) {
            const uint32_t f = emu_blk->wf[wd].load(std::memory_order_acquire);
            if (!f || emu_me()->vc[who] <= f) {
                emu_fail(emu_fmt("hazard: %s (async proxy) reads %s that %s stored with "
                                 "ordinary stores, with no fence.proxy.async between the store and the barrier",
                                 what, emu_bytes(4 * wd, 4 * wd + 4).c_str(), emu_threads({who}).c_str()));
                return;
            }
        }
    }
}
static inline void emu_check_read(uint32_t chunk, bool async, const char *what) {
    emu_check_words(4 * chunk, 4 * chunk + 4, async, what);
}
static inline void emu_record_read(uint32_t chunk) {
    emu_blk->rd[(size_t)chunk * emu_nt + emu_me()->tid].store(emu_me()->vc[emu_me()->tid], std::memory_order_relaxed);
}
/* A write of [addr, addr + bytes) (4-byte aligned) by `who` whose vector clock is `vc` (a
 * thread's own, or a TMA agent's). */
static void emu_write(uint32_t addr, uint32_t bytes, int who, const uint32_t *vc, bool generic) {
    const char *kind = generic ? "an ordinary store" : "a TMA copy";
    for (uint32_t c = addr / 16; c < (addr + bytes + 15) / 16; ++c)
        if (emu_blk->store_rd[c].load()) {
            emu_fail(emu_fmt("hazard: %s overwrites %s that a TMA store may still be reading (no "
                             "cp.async.bulk.wait_group.read by its thread, ordered before this write)",
                             kind, emu_bytes(16 * c, 16 * c + 16).c_str()));
            break;
        }
    for (uint32_t wd = addr / 4; wd < (addr + bytes) / 4; ++wd) {
        const uint64_t w = emu_blk->wr[wd].load(std::memory_order_acquire);
        if (w) {
            const int pw = (int)((w >> 40) & 0xffff);
            if (pw != who && vc[pw] < (uint32_t)w) {
                emu_fail(emu_fmt("hazard: %s overwrites %s written by %s with nothing ordering "
                                 "the two writes", kind, emu_bytes(4 * wd, 4 * wd + 4).c_str(), emu_who(pw).c_str()));
                break;
            }
        }
    }
    for (uint32_t c = addr / 16; c < (addr + bytes + 15) / 16; ++c) {
        for (int t = 0; t < emu_nt; ++t) {
            const uint32_t r = emu_blk->rd[(size_t)c * emu_nt + t].load(std::memory_order_relaxed);
            if (r && vc[t] < r && t != who) {
                emu_fail(emu_fmt("hazard: %s overwrites %s that %s read (its wgmma or "
                                 "load) with no release between the read and the write (a slot refilled before every "
                                 "consumer released it: the producer's empty-barrier wait, or a ring index, off? or a "
                                 "consumer that released the slot before the wgmma_wait that retires its read)",
                                 kind, emu_bytes(16 * c, 16 * c + 16).c_str(), emu_threads({t}).c_str()));
                break;
            }
        }
        if (bytes == 16)  // a whole chunk replaced: its earlier reads are settled
            for (int t = 0; t < emu_nt; ++t) emu_blk->rd[(size_t)c * emu_nt + t].store(0, std::memory_order_relaxed);
    }
    for (uint32_t wd = addr / 4; wd < (addr + bytes) / 4; ++wd) {
        emu_blk->wf[wd].store(0, std::memory_order_relaxed);
        emu_blk->wr[wd].store(emu_wr_pack(who, generic, vc[who]), std::memory_order_release);
        if (generic) emu_unfenced.push_back(wd);
    }
}
/* Does [a, a + 16) hold an mbarrier? (data written over a barrier) */
static bool emu_hits_mbar(uint32_t a) {
    auto it = emu_blk->mbar.lower_bound(a & ~15u);
    return it != emu_blk->mbar.end() && it->first < (a & ~15u) + 16;
}
static inline bool emu_smem_ok(uint32_t addr, uint32_t bytes, const char *what) {
    if (addr + bytes > emu_smem_bytes || addr + bytes < addr) {
        emu_fail(emu_fmt("%s at shared address %u (+%u) is outside the %zu bytes of dynamic shared memory", what, addr,
                         bytes, emu_smem_bytes));
        return false;
    }
    return true;
}

/* ---------------------------------------------------------------- basic PTX ---- */
static inline uint32_t smem_u32(const void *p) {
    const unsigned char *c = (const unsigned char *)p;
    if (c < fa_smem || c >= fa_smem + EMU_SMEM) emu_fail("smem_u32 of a non-shared pointer");
    return (uint32_t)(c - fa_smem);
}
static inline float ex2(float x) {
    emu_me()->ops++;  // the softmax's work, which a wgmma group in flight may overlap (the report)
    return exp2f(x);
}
/* The fast-math intrinsics an epilogue may use: exact here (the GPU's are within 2 ulp). */
static inline float __fdividef(float a, float b) { return a / b; }
#define __log2f log2f /* glibc declares a __log2f of its own */
static inline unsigned __float_as_uint(float x) { unsigned u; memcpy(&u, &x, 4); return u; }
static inline float __uint_as_float(unsigned u) { float x; memcpy(&x, &u, 4); return x; }
static void st_shared_u32(uint32_t addr, uint32_t v) {
    emu_progress++;
    if (addr % 4) emu_fail("st.shared.b32 misaligned");
    if (!emu_smem_ok(addr, 4, "st.shared.b32")) return;
    if (emu_hits_mbar(addr)) emu_fail("st.shared.b32 overwrites an mbarrier");
    emu_write(addr, 4, emu_me()->tid, emu_me()->vc, true);
    memcpy(fa_smem + addr, &v, 4);
}
static void st_shared_v4(uint32_t addr, uint4 v) {
    emu_progress++;
    if (addr % 16) emu_fail("st.shared.v4 misaligned");
    if (!emu_smem_ok(addr, 16, "st.shared.v4")) return;
    if (emu_hits_mbar(addr)) emu_fail("st.shared.v4 overwrites an mbarrier");
    emu_write(addr, 16, emu_me()->tid, emu_me()->vc, true);
    memcpy(fa_smem + addr, &v, 16);
}
static uint32_t ld_shared_u32(uint32_t addr) {
    emu_progress++;
    uint32_t v = 0;
    if (addr % 4) emu_fail("ld.shared.b32 misaligned");
    if (!emu_smem_ok(addr, 4, "ld.shared.b32")) return v;
    emu_check_words(addr / 4, addr / 4 + 1, false, "ld.shared");
    emu_record_read(addr / 16);
    memcpy(&v, fa_smem + addr, 4);
    return v;
}
static uint4 ld_shared_v4(uint32_t addr) {
    emu_progress++;
    uint4 v = make_uint4(0, 0, 0, 0);
    if (addr % 16) emu_fail("ld.shared.v4 misaligned");
    if (!emu_smem_ok(addr, 16, "ld.shared.v4")) return v;
    emu_check_read(addr / 16, false, "ld.shared");
    emu_record_read(addr / 16);
    memcpy(&v, fa_smem + addr, 16);
    return v;
}
static void fence_proxy_async() {
    for (uint32_t wd : emu_unfenced) {
        const uint64_t w = emu_blk->wr[wd].load(std::memory_order_acquire);
        if ((int)((w >> 40) & 0xffff) == emu_me()->tid && (w >> 62 & 1)) emu_blk->wf[wd].store(emu_me()->vc[emu_me()->tid]);
    }
    emu_unfenced.clear();
    emu_tick();
}

/* Named barrier `id`: `count` threads, some waiting (sync), some not (arrive). */
static void emu_named(int id, int count, bool wait) {
    emu_progress++;
    if (id < 0 || id > 15 || count <= 0 || count % 32) {
        emu_fail(emu_fmt("bar %s %d, %d: id must be 0..15 and the count a positive multiple of 32",
                         wait ? "sync" : "arrive", id, count));
        return;
    }
    EmuNamedBar &b = emu_blk->named[id];
    if (b.arrived == 0) b.expected = count;
    else if (b.expected != count)
        emu_fail(emu_fmt("barrier %d: thread counts differ (%d and %d)", id, b.expected, count));
    b.arrived++;
    vc_join(b.acc, emu_me()->vc);
    emu_tick();
    const unsigned long gen = b.gen;
    if (b.arrived >= b.expected) {
        b.done = b.acc;
        std::fill(b.acc.begin(), b.acc.end(), 0);
        b.arrived = 0;
        b.gen++;
        for (int w : b.waiters) emu::wake(w);
        b.waiters.clear();
    } else if (wait) {
        b.waiters.push_back(emu::self());
        while (b.gen == gen) emu::block(id == 0 ? "__syncthreads" : "bar.sync (named barrier)", (uint32_t)id);
    }
    if (wait) vc_join(emu_me()->vc, b.done.data());
}
static inline void named_sync(int id, int count) { emu_named(id, count, true); }
static inline void named_arrive(int id, int count) { emu_named(id, count, false); }
static inline void __syncthreads() { emu_named(0, emu_nt, true); }
/* Programmatic dependent launch (griddepcontrol.launch_dependents / .wait): the emulator runs one
 * launch to its end before the next begins, so a dependent launch never starts early and its wait
 * has nothing to wait for. A lesson's wrappers of the two instructions (behind FA_EMULATOR) are these. */
static inline void griddep_launch_dependents() {}
static inline void griddep_wait() {}
static void __syncwarp(unsigned = 0xffffffffu) {
    emu_progress++;
    EmuNamedBar &b = emu_blk->warpbar[emu_me()->warp];
    b.arrived++;
    vc_join(b.acc, emu_me()->vc);
    emu_tick();
    const unsigned long gen = b.gen;
    if (b.arrived == 32) {
        b.done = b.acc;
        std::fill(b.acc.begin(), b.acc.end(), 0);
        b.arrived = 0;
        b.gen++;
        for (int w : b.waiters) emu::wake(w);
        b.waiters.clear();
    } else {
        b.waiters.push_back(emu::self());
        while (b.gen == gen) emu::block("__syncwarp", (uint32_t)emu_me()->warp);
    }
    vc_join(emu_me()->vc, b.done.data());
}
static inline float __shfl_xor_sync(unsigned, float x, int m) {
    emu_me()->ops++;
    EmuWarp &w = emu_blk->warps[emu_me()->warp];
    w.f[emu_me()->lane] = x;
    w.bar.arrive_and_wait();
    const float r = w.f[emu_me()->lane ^ m];
    w.bar.arrive_and_wait();
    return r;
}
/* Lane src's int to every lane (the float slots carry its bits). */
static inline int __shfl_sync(unsigned, int x, int src) {
    emu_me()->ops++;
    EmuWarp &w = emu_blk->warps[emu_me()->warp];
    std::memcpy(&w.f[emu_me()->lane], &x, sizeof x);
    w.bar.arrive_and_wait();
    int r;
    std::memcpy(&r, &w.f[src & 31], sizeof r);
    w.bar.arrive_and_wait();
    return r;
}
/* Votes over the whole warp (the mask is taken as all 32 lanes, as the lessons use them). */
static inline unsigned __ballot_sync(unsigned, int pred) {
    emu_me()->ops++;
    EmuWarp &w = emu_blk->warps[emu_me()->warp];
    w.f[emu_me()->lane] = pred ? 1.f : 0.f;
    w.bar.arrive_and_wait();
    unsigned r = 0;
    for (int l = 0; l < 32; ++l) r |= (w.f[l] != 0.f ? 1u : 0u) << l;
    w.bar.arrive_and_wait();
    return r;
}
static inline int __all_sync(unsigned m, int pred) { return __ballot_sync(m, pred) == 0xffffffffu; }
static inline int __any_sync(unsigned m, int pred) { return __ballot_sync(m, pred) != 0u; }

/* prmt.b32 in its default mode (CUDA's __byte_perm): byte n of the result is byte (s >> 4 n) & 7 of
 * the 8 bytes {y, x} (x bytes 0-3, y bytes 4-7). */
static inline uint32_t __byte_perm(uint32_t x, uint32_t y, uint32_t s) {
    const uint64_t v = (uint64_t)y << 32 | x;
    uint32_t r = 0;
    for (int n = 0; n < 4; ++n) r |= (uint32_t)(v >> (8 * ((s >> (4 * n)) & 7)) & 0xffu) << (8 * n);
    return r;
}

/* ---------------------------------------------------------------- setmaxnreg ---- */
static void emu_setmaxnreg(int r, bool inc) {
    emu_progress++;
    if (r < 24 || r > 256 || r % 8) emu_fail(emu_fmt("setmaxnreg %d: must be a multiple of 8 in [24, 256]", r));
    if (inc) {
        if (r < emu_me()->regs) emu_fail(emu_fmt("setmaxnreg.inc %d below the current %d registers", r, emu_me()->regs));
        const long long need = r - emu_me()->regs;
        while (emu_blk->reg_pool < need) emu::spin("setmaxnreg.inc (the block's register pool is short)", (uint32_t)r);
        emu_blk->reg_pool -= need;
    } else {
        if (r > emu_me()->regs) emu_fail(emu_fmt("setmaxnreg.dec %d above the current %d registers", r, emu_me()->regs));
        emu_blk->reg_pool += emu_me()->regs - r;
    }
    emu_me()->regs = r;
}
template <int R> static inline void setmaxnreg_dec() { emu_setmaxnreg(R, false); }
template <int R> static inline void setmaxnreg_inc() { emu_setmaxnreg(R, true); }

/* ---------------------------------------------------------------- mbarrier ---- */
static EmuMbar *emu_mbar(uint32_t bar, const char *what) {
    if (bar % 8 || !emu_smem_ok(bar, 8, what)) {
        emu_fail(emu_fmt("%s: mbarrier address %u is not 8-byte aligned shared memory", what, bar));
        return nullptr;
    }
    auto it = emu_blk->mbar.find(bar);
    if (it == emu_blk->mbar.end()) {
        emu_fail(emu_fmt("%s on shared address %u, which is not an initialised mbarrier", what, bar));
        return nullptr;
    }
    return &it->second;
}
static void emu_mbar_complete(EmuMbar &b) {
    if (b.pending == 0 && b.tx == 0) {
        std::sort(b.arrivers.begin(), b.arrivers.end());
        b.arrivers.erase(std::unique(b.arrivers.begin(), b.arrivers.end()), b.arrivers.end());
        b.last_threads = (int)b.arrivers.size();
        b.last_warps = 0;
        for (size_t i = 0; i < b.arrivers.size(); ++i)
            b.last_warps += i == 0 || b.arrivers[i] / 32 != b.arrivers[i - 1] / 32;
        b.arrivers.clear();
        b.done[b.phase & 1] = b.acc;
        std::fill(b.acc.begin(), b.acc.end(), 0);
        b.phase++;
        b.pending = b.expected;
        emu_progress++;
    }
}
static void mbar_init(uint32_t bar, int count) {
    emu_progress++;
    if (bar % 8 || !emu_smem_ok(bar, 8, "mbarrier.init")) return;
    if ((int)emu_blk->mbar.size() >= EMU_MAX_MBAR) { emu_fail("too many mbarriers"); return; }
    EmuMbar b;
    b.index = (int)emu_blk->mbar.size();
    b.expected = b.pending = count;
    b.acc.assign(emu_nv, 0);
    b.done[0].assign(emu_nv, 0);
    b.done[1].assign(emu_nv, 0);
    b.agent.assign(emu_nv, 0);
    b.ever.assign(emu_nt, 0);
    b.passes.assign(emu_nt, 0);
    if (count < 1) emu_fail("mbarrier.init with a count below 1");
    emu_blk->mbar[bar] = b;
    emu_blk->mbar_addr.push_back(bar);
}
static inline void mbar_fence_init() { emu_tick(); }
static void emu_arrive(uint32_t bar, uint32_t tx, const char *what) {
    emu_progress++;
    EmuMbar *b = emu_mbar(bar, what);
    if (!b) return;
    b->tx += tx;
    if (--b->pending < 0) {
        emu_fail(emu_fmt("%s on %s: more arrivals than its count in one phase", what,
                         emu_bar_name ? emu_bar_name(bar).c_str() : "?"));
        b->pending = 0;
    }
    vc_join(b->acc, emu_me()->vc);
    b->arrivers.push_back(emu::self());
    b->ever[emu_me()->tid] = 1;
    emu_tick();
    emu_mbar_complete(*b);
    /* EMU_WGMMA=late: the other threads run before this one goes on, so that a producer waiting for
     * this release refills the slot at once; a consumer that released a slot before the wait_group
     * of the wgmma that reads it then reads the refill, which no full-barrier wait ordered. */
    if (emu_wgmma_late) emu::to_scheduler();
}
static inline void mbar_arrive(uint32_t bar) { emu_arrive(bar, 0, "mbarrier.arrive"); }
static inline void mbar_arrive_expect_tx(uint32_t bar, uint32_t bytes) {
    emu_arrive(bar, bytes, "mbarrier.arrive.expect_tx");
}

/* ---------------------------------------------------------------- TMA ---- */
/* The emulator's tensor map: the fields of tma_tile_params in CUtensorMap's opaque words. */
constexpr uint64_t EMU_TMAP_MAGIC = 0x544d4150454d55ull;
static void emu_encode_tensor_map(CUtensorMap *m, const void *base, const uint64_t dims[3], const uint64_t strides[2],
                                  const uint32_t box[3], unsigned esize, unsigned swizzle) {
    memset(m, 0, sizeof *m);
    uint64_t *o = m->opaque;
    o[0] = EMU_TMAP_MAGIC;
    o[1] = (uint64_t)(uintptr_t)base;
    o[2] = dims[0]; o[3] = dims[1]; o[4] = dims[2];
    o[5] = strides[0]; o[6] = strides[1];
    o[7] = box[0]; o[8] = box[1]; o[9] = box[2];
    o[10] = esize; o[11] = swizzle;
}
static void emu_bulk_deliver(EmuTmaCopy &cp);
static void emu_tma_deliver(EmuTmaCopy &cp) {
    if (!cp.map) { emu_bulk_deliver(cp); return; }
    const uint64_t *o = cp.map->opaque;
    auto it = emu_blk->mbar.find(cp.bar);
    if (it == emu_blk->mbar.end()) { emu_fail("TMA completes on an address that is not an mbarrier"); return; }
    EmuMbar &b = it->second;
    const int agent = emu_nt + b.index;
    vc_join(b.agent, cp.vc.data());
    b.agent[agent]++;
    const unsigned esize = (unsigned)o[10], box0 = (unsigned)o[7], box1 = (unsigned)o[8], box2 = (unsigned)o[9];
    const unsigned row_bytes = box0 * esize, bytes = row_bytes * box1 * box2;
    const unsigned char *base = (const unsigned char *)(uintptr_t)o[1];
    std::vector<unsigned char> tmp(bytes, 0);
    for (unsigned i2 = 0; i2 < box2; ++i2)
        for (unsigned i1 = 0; i1 < box1; ++i1)
            for (unsigned i0 = 0; i0 < box0; ++i0) {
                const long long g0 = (long long)cp.c[0] + i0, g1 = (long long)cp.c[1] + i1, g2 = (long long)cp.c[2] + i2;
                const size_t lin = ((size_t)i2 * box1 + i1) * row_bytes + (size_t)i0 * esize;
                if (g0 < 0 || g1 < 0 || g2 < 0 || g0 >= (long long)o[2] || g1 >= (long long)o[3] || g2 >= (long long)o[4])
                    continue;  // out of bounds: zeros
                memcpy(&tmp[lin], base + g2 * o[6] + g1 * o[5] + g0 * esize, esize);
            }
    for (unsigned off = 0; off < bytes; off += 16) {
        uint32_t a = cp.dst + off;
        if (o[11] == 128) a ^= ((a >> 7) & 7u) << 4;  // the 128-byte swizzle, on address bits
        if (a + 16 > emu_smem_bytes) { emu_fail("TMA writes past the end of shared memory"); return; }
        if (emu_hits_mbar(a)) { emu_fail(emu_fmt("a TMA copy overwrites the mbarrier at shared %u", a & ~15u)); return; }
        emu_write(a, 16, agent, b.agent.data(), false);
        memcpy(fa_smem + a, &tmp[off], 16);
    }
    b.tx -= bytes;
    vc_join(b.acc, b.agent.data());
    emu_mbar_complete(b);
}
/* The report's ring depth: a copy issued into [dst, dst + bytes), completing `bar`'s current phase. */
static void emu_tile_ahead(uint32_t dst, uint32_t bytes, uint32_t bar) {
    if (!emu_perf::on()) return;
    auto it = emu_blk->mbar.find(bar);
    emu_blk->ahead.push_back(EmuTileAhead{dst, dst + bytes, bar, it == emu_blk->mbar.end() ? 0u : it->second.phase});
}
/* The region (driver's emu_regions) an address lies in, or -1. */
static int emu_region_index(uint32_t a) {
    for (size_t i = 0; i < emu_regions.size(); ++i) {
        const EmuRegion &r = emu_regions[i];
        if (a >= r.start && a < r.start + (uint32_t)r.count * r.bytes) return (int)i;
    }
    return -1;
}
/* A wgmma at file:line reads `chunks`: the first to read a tile a copy brought counts the tiles of
 * that ring (its region) landed or landing and not read yet, this one included, and retires it. */
static void emu_tiles_read(const std::vector<uint32_t> &chunks, const char *file, int line) {
    if (!emu_perf::on() || emu_blk->ahead.empty()) return;
    auto &v = emu_blk->ahead;
    const EmuTileAhead *hit = nullptr;
    for (const EmuTileAhead &t : v)
        for (uint32_t c : chunks)
            if (!hit && c * 16 >= t.lo && c * 16 < t.hi) hit = &t;
    if (!hit) return;
    const EmuTileAhead read = *hit;
    const int region = emu_region_index(read.lo);
    std::vector<std::pair<uint32_t, unsigned>> tiles;
    for (const EmuTileAhead &t : v)
        if (emu_region_index(t.lo) == region) tiles.emplace_back(t.bar, t.phase);
    std::sort(tiles.begin(), tiles.end());
    emu_perf::tma(file, line, (long)(std::unique(tiles.begin(), tiles.end()) - tiles.begin()));
    v.erase(std::remove_if(v.begin(), v.end(), [&](const EmuTileAhead &t) { return t.bar == read.bar && t.phase == read.phase; }),
            v.end());
}
static void tma_load_3d(uint32_t dst, const CUtensorMap *map, int c0, int c1, int c2, uint32_t bar) {
    emu_progress++;
    if (map->opaque[0] != EMU_TMAP_MAGIC) { emu_fail("TMA with a tensor map the emulator did not make"); return; }
    if (map->opaque[11] == 128 && dst % 1024)
        emu_fail(emu_fmt("TMA destination %u is not 1024-byte aligned: the 128-byte swizzle pattern would not start "
                         "where wgmma expects it", dst));
    if (dst % 128) emu_fail(emu_fmt("TMA destination %u is not 128-byte aligned", dst));
    if (!emu_mbar(bar, "cp.async.bulk.tensor completion")) return;
    EmuTmaCopy cp{dst, map, {c0, c1, c2}, bar, std::vector<uint32_t>(emu_me()->vc, emu_me()->vc + emu_nv)};
    const uint64_t *o = map->opaque;
    emu_tile_ahead(dst, (uint32_t)(o[7] * o[10] * o[8] * o[9]), bar);
    emu_tick();
    if (emu_tma_late) emu_blk->tma_queue.push_back(cp);
    else emu_tma_deliver(cp);
}
static bool mbar_try_wait(uint32_t bar, uint32_t parity) {
    EmuMbar *b = emu_mbar(bar, "mbarrier.try_wait");
    if (!b) return true;
    if (parity > 1) emu_fail("mbarrier.try_wait.parity with a parity other than 0 or 1");
    for (auto it = emu_blk->tma_queue.begin(); it != emu_blk->tma_queue.end();) {  // late copies land now
        if (it->bar == bar) { emu_tma_deliver(*it); it = emu_blk->tma_queue.erase(it); emu_progress++; }
        else ++it;
    }
    auto done = [&] { return (b->phase & 1) != (parity & 1); };
    // the others run; back after some progress (the wait names its parity for a hang report)
    if (!done()) emu::spin("mbarrier.try_wait", bar | (uint64_t)(parity & 1) << 32);
    if (!done()) return false;  // a thread polling here while nothing progresses is a hang (the core)
    emu_progress++;
    b->passes[emu_me()->tid]++;
    if (b->phase == 0 && b->early < 0) b->early = emu_me()->tid;  // parity 1 on a fresh barrier: at once
    vc_join(emu_me()->vc, b->done[parity & 1].data());
    return true;
}

/* TMA store: the box of the tensor map at (c0, c1, c2) from shared `src` (the layout a load
 * of the box writes); elements out of bounds are skipped. Its reads of shared memory are the
 * issuing thread's, through the async proxy: at issue, or with EMU_TMA=late at the
 * wait_group.read that covers it. */
static void emu_bulk_reduce_do(EmuBulkStore &st);
static void emu_bulk_store_do(EmuBulkStore &st) {
    if (!st.map) { emu_bulk_reduce_do(st); return; }
    st.done = true;
    const uint64_t *o = st.map->opaque;
    const unsigned esize = (unsigned)o[10], box0 = (unsigned)o[7], box1 = (unsigned)o[8], box2 = (unsigned)o[9];
    const unsigned row_bytes = box0 * esize, bytes = row_bytes * box1 * box2;
    auto saddr = [&](size_t lin) {
        uint32_t a = st.src + (uint32_t)lin;
        if (o[11] == 128) a ^= ((a >> 7) & 7u) << 4;
        return a;
    };
    for (unsigned off = 0; off < bytes; off += 16) {
        const uint32_t a = saddr(off);
        if (a + 16 > emu_smem_bytes) { emu_fail("a TMA store reads past the end of shared memory"); return; }
        emu_check_read(a / 16, true, "a TMA store");
        emu_record_read(a / 16);
    }
    unsigned char *base = (unsigned char *)(uintptr_t)o[1];
    for (unsigned i2 = 0; i2 < box2; ++i2)
        for (unsigned i1 = 0; i1 < box1; ++i1)
            for (unsigned i0 = 0; i0 < box0; ++i0) {
                const long long g0 = (long long)st.c[0] + i0, g1 = (long long)st.c[1] + i1, g2 = (long long)st.c[2] + i2;
                if (g0 < 0 || g1 < 0 || g2 < 0 || g0 >= (long long)o[2] || g1 >= (long long)o[3] || g2 >= (long long)o[4])
                    continue;  // out of bounds: not written
                const size_t lin = ((size_t)i2 * box1 + i1) * row_bytes + (size_t)i0 * esize;
                memcpy(base + g2 * o[6] + g1 * o[5] + g0 * esize, fa_smem + saddr(lin), esize);
            }
}
/* The chunks a store reads stay marked from its issue to the wait_group.read that covers it:
 * a write to them in between is a hazard, whenever the store actually reads. */
static void emu_bulk_pending(const EmuBulkStore &st, int delta) {
    if (!st.map) {  // a bulk reduce-add: [src, src + bytes), no swizzle
        for (uint32_t a = st.src; a < st.src + st.bytes; a += 16)
            if (a / 16 < EMU_CHUNKS) emu_blk->store_rd[a / 16] += delta;
        return;
    }
    const uint64_t *o = st.map->opaque;
    const unsigned bytes = (unsigned)(o[7] * o[10] * o[8] * o[9]);
    for (unsigned off = 0; off < bytes; off += 16) {
        uint32_t a = st.src + off;
        if (o[11] == 128) a ^= ((a >> 7) & 7u) << 4;
        if (a / 16 < EMU_CHUNKS) emu_blk->store_rd[a / 16] += delta;
    }
}
static void tma_store_3d(const CUtensorMap *map, int c0, int c1, int c2, uint32_t src) {
    emu_progress++;
    if (map->opaque[0] != EMU_TMAP_MAGIC) { emu_fail("TMA store with a tensor map the emulator did not make"); return; }
    if (map->opaque[11] == 128 && src % 1024)
        emu_fail(emu_fmt("TMA store source %u is not 1024-byte aligned: the 128-byte swizzle pattern would not start "
                         "where the stores put the rows", src));
    EmuBulkStore st{map, {c0, c1, c2}, src, false};
    emu_bulk_pending(st, +1);
    if (!emu_tma_late) emu_bulk_store_do(st);
    emu_me()->bulk_open.push_back(st);
    emu_tick();
}
static void bulk_commit() {
    emu_progress++;
    emu_me()->bulk_groups.push_back(std::move(emu_me()->bulk_open));
    emu_me()->bulk_open.clear();
}
template <int N> static void bulk_wait_read() {
    emu_progress++;
    if (!emu_me()->bulk_open.empty())
        emu_fail("cp.async.bulk.wait_group.read while TMA stores are not committed (a missing "
                 "cp.async.bulk.commit_group): the wait does not cover them");
    while ((int)emu_me()->bulk_groups.size() > N) {
        for (EmuBulkStore &st : emu_me()->bulk_groups.front()) {
            if (!st.done) emu_bulk_store_do(st);
            emu_bulk_pending(st, -1);
        }
        emu_me()->bulk_groups.pop_front();
    }
    emu_tick();
}

/* ---------------------------------------------------------------- lesson 13 ---- */
/* cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes: `bytes` contiguous bytes
 * from global `src` to shared `dst`, no tensor map, no swizzle; delivered like a TMA copy (at
 * issue, or with EMU_TMA=late when a thread waits on its barrier). */
static void emu_bulk_deliver(EmuTmaCopy &cp) {
    auto it = emu_blk->mbar.find(cp.bar);
    if (it == emu_blk->mbar.end()) { emu_fail("a bulk copy completes on an address that is not an mbarrier"); return; }
    EmuMbar &b = it->second;
    const int agent = emu_nt + b.index;
    vc_join(b.agent, cp.vc.data());
    b.agent[agent]++;
    for (uint32_t off = 0; off < cp.bytes; off += 16) {
        const uint32_t a = cp.dst + off;
        if (emu_hits_mbar(a)) { emu_fail(emu_fmt("a bulk copy overwrites the mbarrier at shared %u", a & ~15u)); return; }
        emu_write(a, 16, agent, b.agent.data(), false);
        if (cp.src) memcpy(fa_smem + a, (const unsigned char *)cp.src + off, 16);
        else memset(fa_smem + a, 0, 16);
    }
    b.tx -= cp.bytes;
    vc_join(b.acc, b.agent.data());
    emu_mbar_complete(b);
}
static void bulk_load_1d(uint32_t dst, const void *src, uint32_t bytes, uint32_t bar) {
    emu_progress++;
    if (dst % 16 || (uintptr_t)src % 16 || bytes % 16 || !bytes)
        emu_fail(emu_fmt("bulk copy: shared %u, global %p, %u bytes: addresses 16-byte aligned, size a positive "
                         "multiple of 16", dst, src, bytes));
    if (!emu_smem_ok(dst, bytes, "bulk copy destination")) return;
    const bool inside = emu_global_ok(src, bytes, "a bulk copy's read");  // outside: zeros land, reported
    if (!emu_mbar(bar, "cp.async.bulk completion")) return;
    EmuTmaCopy cp{dst, nullptr, {0, 0, 0}, bar, std::vector<uint32_t>(emu_me()->vc, emu_me()->vc + emu_nv)};
    cp.src = inside ? src : nullptr;
    cp.bytes = bytes;
    emu_tile_ahead(dst, bytes, bar);
    emu_tick();
    if (emu_tma_late) emu_blk->tma_queue.push_back(cp);
    else emu_bulk_deliver(cp);
}
/* cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32: gdst[k] += shared floats at src. Its
 * reads of shared memory are the issuing thread's, through the async proxy, checked and recorded
 * like a TMA store's (at issue, or with EMU_TMA=late at the wait_group.read that covers it). */
static void emu_bulk_reduce_do(EmuBulkStore &st) {
    st.done = true;
    for (uint32_t a = st.src; a < st.src + st.bytes; a += 16) {
        emu_check_read(a / 16, true, "a bulk reduce-add");
        emu_record_read(a / 16);
    }
    for (uint32_t k = 0; st.gdst && k < st.bytes / 4; ++k) {
        float v;
        memcpy(&v, fa_smem + st.src + 4 * k, 4);
        st.gdst[k] += v;
    }
}
static void bulk_reduce_add_f32(float *dst, uint32_t src, uint32_t bytes) {
    emu_progress++;
    if (src % 16 || (uintptr_t)dst % 16 || bytes % 16 || !bytes)
        emu_fail(emu_fmt("bulk reduce-add: shared %u, global %p, %u bytes: addresses 16-byte aligned, size a "
                         "positive multiple of 16", src, (void *)dst, bytes));
    if (!emu_smem_ok(src, bytes, "bulk reduce-add source")) return;
    EmuBulkStore st{nullptr, {0, 0, 0}, src, false};
    st.gdst = emu_global_ok(dst, bytes, "a bulk reduce-add") ? dst : nullptr;  // outside: reported, not added
    st.bytes = bytes;
    emu_bulk_pending(st, +1);
    if (!emu_tma_late) emu_bulk_reduce_do(st);
    emu_me()->bulk_open.push_back(st);
    emu_tick();
}
/* cp.async.bulk.wait_group N (no .read): the groups' writes are done too; here as the .read form. */
template <int N> static void bulk_wait() { bulk_wait_read<N>(); }
static float2 ld_shared_f32x2(uint32_t addr) {
    emu_progress++;
    float2 v = make_float2(0.f, 0.f);
    if (addr % 8) emu_fail("ld.shared.v2.f32 misaligned");
    if (!emu_smem_ok(addr, 8, "ld.shared.v2.f32")) return v;
    emu_check_words(addr / 4, addr / 4 + 2, false, "ld.shared");
    emu_record_read(addr / 16);
    memcpy(&v, fa_smem + addr, 8);
    return v;
}

/* __trap(): where the starter stops for a TODO not written yet. The run ends here. */
static void __trap() {
    fprintf(stderr, "EMU ERROR: block %u thread %u reached __trap() (a TODO not written yet?)\n", blockIdx.x,
            threadIdx.x);
    printf("EMU FAILED (trap)\n");
    fflush(stdout);
    _exit(3);
}

/* Global-memory atomics: blocks run one after another, so a host atomic is exact. */
static inline int atomicAdd(int *p, int v) {
    emu_progress++;
    return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST);
}
static inline int atomicExch(int *p, int v) {
    emu_progress++;
    return __atomic_exchange_n(p, v, __ATOMIC_SEQ_CST);
}
static inline void __threadfence() { std::atomic_thread_fence(std::memory_order_seq_cst); }

/* ---------------------------------------------------------------- wgmma ---- */
/* Byte address of element (mn, k) of a wgmma operand described by `desc`, from the
 * canonical layouts of the PTX ISA (T = 8 16-bit elements = 16 bytes, x = the swizzle width
 * in 16-byte units; MN-major when `mn_major`). */
static uint32_t emu_desc_addr(uint64_t desc, int mn, int k, bool mn_major) {
    const uint32_t start = (uint32_t)(desc & 0x3fff) << 4, lbo = (uint32_t)((desc >> 16) & 0x3fff) << 4,
                   sbo = (uint32_t)((desc >> 32) & 0x3fff) << 4;
    const int mode = (int)(desc >> 62);  // 0 none, 1 128B, 2 64B, 3 32B
    const int x = mode == 1 ? 8 : mode == 2 ? 4 : mode == 3 ? 2 : 1;
    uint32_t off;
    if (mode == 0) {  // core matrices of 8 x 16 bytes
        if (!mn_major) off = (mn % 8) * 16 + (mn / 8) * sbo + (k % 8) * 2 + (k / 8) * lbo;
        else off = (mn % 8) * 2 + (mn / 8) * sbo + (k % 8) * 16 + (k / 8) * lbo;
    } else if (!mn_major) {
        off = (mn % 8) * (16 * x) + (mn / 8) * sbo + k * 2;
    } else {
        off = (mn % (8 * x)) * 2 + (mn / (8 * x)) * lbo + (k % 8) * (16 * x) + (k / 8) * sbo;
    }
    uint32_t a = start + off;
    if (mode) {
        const int bits = mode == 1 ? 3 : mode == 2 ? 2 : 1;
        a ^= ((a >> 7) & ((1u << bits) - 1)) << 4;
    }
    return a;
}
/* A descriptor in the lesson's terms: where its operand starts, and its strides. */
static std::string emu_desc_words(uint64_t desc, bool mn_major) {
    const uint32_t start = (uint32_t)(desc & 0x3fff) << 4, lbo = (uint32_t)((desc >> 16) & 0x3fff) << 4,
                   sbo = (uint32_t)((desc >> 32) & 0x3fff) << 4;
    const std::string w = emu_where(start, start + 2);
    return emu_fmt("read %s through a descriptor from shared %u%s, LBO %u bytes, SBO %u bytes",
                   mn_major ? "MN-major" : "K-major", start, w.empty() ? "" : (" (" + w + ")").c_str(), lbo, sbo);
}
/* Which element of the checked wgmma's operands lies in the word at `addr`, and how the operand is
 * described: " (the wgmma's B operand, element k 8, n 0: read MN-major through a descriptor
 * from ...)". Only the thread's own rows of A (ss) and all of B are read by a thread. */
static std::string emu_read_context(uint32_t addr) {
    const EmuWgOp *op = emu_checking_op;
    if (!op || op->chunks) return "";
    const int g = emu_me()->lane >> 2, wq = emu_me()->warp % 4;
    for (int n = 0; n < op->N; ++n)
        for (int k = 0; k < 16; ++k)
            if (emu_desc_addr(op->db, n, k, op->tb) / 4 == addr / 4)
                return emu_fmt(" (the wgmma's B operand, element k %d, n %d: %s)", k, n,
                               emu_desc_words(op->db, op->tb).c_str());
    if (!op->rs)
        for (int r = 0; r < 2; ++r)
            for (int k = 0; k < 16; ++k)
                if (emu_desc_addr(op->da, 16 * wq + g + 8 * r, k, op->ta) / 4 == addr / 4)
                    return emu_fmt(" (the wgmma's A operand, element m %d, k %d: %s)", 16 * wq + g + 8 * r, k,
                                   emu_desc_words(op->da, op->ta).c_str());
    return "";
}
template <typename T> static inline float emu_tof(uint16_t b) {
    T h;
    memcpy(&h, &b, 2);
    if constexpr (std::is_same<T, __half>::value) return __half2float(h);
    else return __bfloat162float(h);
}
template <typename T> static float emu_ld_op(uint32_t a) {
    if (a + 2 > emu_smem_bytes) { emu_fail("wgmma operand outside shared memory"); return 0.f; }
    uint16_t v;
    memcpy(&v, fa_smem + a, 2);
    return emu_tof<T>(v);
}
/* The chunks of shared memory this thread's part of a wgmma reads: its 2 rows of A (ss) and
 * all of B. */
static void emu_op_chunks(const EmuWgOp &op, std::vector<uint32_t> &out) {
    if (op.chunks) return op.chunks(op, out);  // wgmma_e4m3.h
    out.clear();
    const int g = emu_me()->lane >> 2, wq = emu_me()->warp % 4;
    if (!op.rs && !op.ta)
        for (int r = 0; r < 2; ++r)
            for (int k = 0; k < 16; k += 8) out.push_back(emu_desc_addr(op.da, 16 * wq + g + 8 * r, k, false) / 16);
    if (!op.rs && op.ta)  // A MN-major: each k of the thread's two rows in its own chunk
        for (int r = 0; r < 2; ++r)
            for (int k = 0; k < 16; ++k) out.push_back(emu_desc_addr(op.da, 16 * wq + g + 8 * r, k, true) / 16);
    /* 8 consecutive k (K-major) or n (MN-major) elements share one 16-byte chunk */
    if (!op.tb)
        for (int n = 0; n < op.N; ++n)
            for (int k = 0; k < 16; k += 8) out.push_back(emu_desc_addr(op.db, n, k, false) / 16);
    else
        for (int n = 0; n < op.N; n += 8)
            for (int k = 0; k < 16; ++k) out.push_back(emu_desc_addr(op.db, n, k, true) / 16);
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    while (!out.empty() && (size_t)out.back() * 16 + 16 > emu_smem_bytes) {
        emu_fail(emu_fmt("wgmma operand bytes [%u, %u) lie outside the %zu bytes of shared memory (descriptor?)",
                         out.back() * 16, out.back() * 16 + 16, emu_smem_bytes));
        out.pop_back();
    }
}
/* The warp decodes B [16][N] cooperatively; each lane then forms its N/2 products. */
template <typename T> static void emu_compute(EmuWgOp &op) {
    EmuWarp &w = emu_blk->warps[emu_me()->warp];
    w.da[emu_me()->lane] = op.da;
    w.db[emu_me()->lane] = op.db;
    w.bar.arrive_and_wait();
    if (emu_me()->lane == 0) {
        for (int l = 1; l < 32; ++l)
            if (w.db[l] != op.db || (!op.rs && w.da[l] != op.da))
                emu_fail("wgmma: the lanes of a warp pass different descriptors");
        w.Bf.assign((size_t)16 * op.N, 0.f);
    }
    w.bar.arrive_and_wait();
    for (int i = emu_me()->lane; i < 16 * op.N; i += 32) {
        const int k = i / op.N, n = i % op.N;
        w.Bf[i] = emu_ld_op<T>(emu_desc_addr(op.db, n, k, op.tb));
    }
    w.bar.arrive_and_wait();
    const int g = emu_me()->lane >> 2, t = emu_me()->lane & 3, wq = emu_me()->warp % 4;
    float A[2][16];
    for (int r = 0; r < 2; ++r)
        for (int k = 0; k < 16; ++k)
            A[r][k] = op.rs ? op.A[r][k] : emu_ld_op<T>(emu_desc_addr(op.da, 16 * wq + g + 8 * r, k, op.ta));
    op.prod.assign(op.N / 2, 0.f);
    for (int j = 0; j < op.N / 8; ++j)
        for (int e = 0; e < 4; ++e) {
            const int r = e >> 1, n = 8 * j + 2 * t + (e & 1);
            float acc = 0.f;
            for (int k = 0; k < 16; ++k) acc += A[r][k] * w.Bf[(size_t)k * op.N + n];
            op.prod[4 * j + e] = acc;
        }
    w.bar.arrive_and_wait();
    op.computed = true;
}
template <typename T>
static void emu_wgmma_issue(float *d, int N, bool rs, uint64_t da, const uint32_t *a, uint64_t db, int scale_d,
                            bool mn = false, const char *file = "", int line = 0) {
    emu_progress++;
    if (!emu_me()->wg_fenced)
        emu_fail("wgmma.mma_async without a wgmma.fence since this thread's last wgmma.wait_group (or since the "
                 "start): registers written by other instructions may not be seen");
    if ((da >> 49 & 7) || (db >> 49 & 7)) emu_fail("wgmma descriptor with a non-zero base offset (not emulated)");
    EmuWgOp op{d, N, rs, da, db, {}, scale_d, {}, false, emu_compute<T>};
    op.ta = mn;        // wgmma_ss_mn: A and B MN-major
    op.tb = rs || mn;  // rs: B MN-major (imm-trans-b = 1)
    if (rs) {  // gather rows g and g + 8 of A from the 4 lanes of this quad
        EmuWarp &w = emu_blk->warps[emu_me()->warp];
        for (int i = 0; i < 4; ++i) w.u[emu_me()->lane][i] = a[i];
        w.bar.arrive_and_wait();
        const int g = emu_me()->lane >> 2;
        for (int tq = 0; tq < 4; ++tq) {
            const uint32_t *q = w.u[4 * g + tq];
            for (int h = 0; h < 2; ++h) {
                op.A[0][2 * tq + h] = emu_tof<T>((uint16_t)(q[0] >> (16 * h)));
                op.A[1][2 * tq + h] = emu_tof<T>((uint16_t)(q[1] >> (16 * h)));
                op.A[0][2 * tq + 8 + h] = emu_tof<T>((uint16_t)(q[2] >> (16 * h)));
                op.A[1][2 * tq + 8 + h] = emu_tof<T>((uint16_t)(q[3] >> (16 * h)));
            }
        }
        w.bar.arrive_and_wait();
    }
    std::vector<uint32_t> chunks;
    emu_op_chunks(op, chunks);
    emu_checking_op = &op;
    for (uint32_t c : chunks) emu_check_read(c, true, "wgmma");
    emu_checking_op = nullptr;
    emu_tiles_read(chunks, file, line);
    if (!emu_wgmma_late) emu_compute<T>(op);
    emu_me()->uncommitted.push_back(std::move(op));
}
template <typename T, int N>
static inline void wgmma_ss(float (&d)[N / 2], uint64_t desc_a, uint64_t desc_b, int scale_d EMU_SITE) {
    emu_wgmma_issue<T>(d, N, false, desc_a, nullptr, desc_b, scale_d, false, emu_file, emu_line);
}
template <typename T, int N>
static inline void wgmma_rs(float (&d)[N / 2], const uint32_t (&a)[4], uint64_t desc_b, int scale_d EMU_SITE) {
    emu_wgmma_issue<T>(d, N, true, 0, a, desc_b, scale_d, false, emu_file, emu_line);
}
/* Lesson 13: imm-trans-a = imm-trans-b = 1, both operands MN-major. */
template <typename T, int N>
static inline void wgmma_ss_mn(float (&d)[N / 2], uint64_t desc_a, uint64_t desc_b, int scale_d EMU_SITE) {
    emu_wgmma_issue<T>(d, N, false, desc_a, nullptr, desc_b, scale_d, true, emu_file, emu_line);
}
static inline void wgmma_fence() { emu_me()->wg_fenced = true; }
static inline void wgmma_commit() {
    emu_progress++;
    emu_me()->group_ops.push_back(emu_me()->ops);
    emu_me()->groups.push_back(std::move(emu_me()->uncommitted));
    emu_me()->uncommitted.clear();
}
template <int N> static void wgmma_wait(EMU_SITE_ONLY) {
    emu_progress++;
    if (!emu_me()->uncommitted.empty())
        emu_fail("wgmma.wait_group while wgmma.mma_async instructions are not committed (a missing "
                 "wgmma.commit_group): the wait does not cover them");
    std::vector<uint32_t> chunks;
    while ((int)emu_me()->groups.size() > N) {
        for (EmuWgOp &op : emu_me()->groups.front()) {
            if (!op.computed) op.compute(op);
            emu_op_chunks(op, chunks);
            emu_checking_op = &op;
            for (uint32_t c : chunks) {
                if (emu_wgmma_late) emu_check_read(c, true, "wgmma");
                emu_record_read(c);
            }
            emu_checking_op = nullptr;
            for (int i = 0; i < op.N / 2; ++i) op.d[i] = op.prod[i] + (op.scale_d ? op.d[i] : 0.f);
        }
        emu_me()->groups.pop_front();
        emu_perf::overlap(emu_file, emu_line, emu_me()->ops - emu_me()->group_ops.front());
        emu_me()->group_ops.pop_front();
    }
    emu_me()->wg_fenced = false;
}
template <int K> static inline void fence_acc(float (&)[K]) {}

/* ---------------------------------------------------------------- launch ---- */
/* The core's hang report, in this emulator's words: an mbarrier by its role (the driver names it),
 * with the phase a thread waits for and how far that phase has come. */
static std::string emu_mbar_words(uint32_t bar) {
    return emu_bar_name ? emu_bar_name(bar) : emu_fmt("the mbarrier at shared %u", bar);
}
static std::string emu_wait_name(const char *what, uint64_t arg) {
    if (what == EMU_WARP_EXCHANGE) return what;
    const uint32_t bar = (uint32_t)arg;
    std::string name = !strncmp(what, "mbarrier", 8) ? std::string(what) + " on " + emu_mbar_words(bar)
                                                     : emu_fmt("%s %u", what, (unsigned)bar);
    auto it = emu_blk ? emu_blk->mbar.find(bar) : decltype(emu_blk->mbar.end()){};
    if (strcmp(what, "mbarrier.try_wait") || !emu_blk || it == emu_blk->mbar.end()) return name;
    const EmuMbar &b = it->second;
    return name + emu_fmt(", parity %u (its phase %u in progress: %d of %d arrivals", (unsigned)(arg >> 32) & 1u, b.phase,
                          b.expected - b.pending, b.expected) +
           (b.tx > 0 ? emu_fmt(", %lld bytes of its copies still to land", b.tx) : std::string()) + ")";
}
/* After the core's report of a hang: for every mbarrier a thread is stuck on, which side is at
 * fault, in the kernel's terms. The arriving side is the threads that arrived on it in earlier
 * phases: the report names those that have not arrived in this phase and what they wait on
 * themselves (a cycle, when that is a barrier only the waiters here arrive on). A barrier whose
 * phases ran ahead of its waiter (more arrivals per round than its count: one per lane where the
 * count is one per warp) and a wait that passed before its barrier completed any phase (the
 * parity of the phase before the first, which counts as completed) point at a wrong parity. */
static void emu_hang_diagnosis(FILE *out) {
    if (!emu_blk) return;
    std::map<uint32_t, std::vector<int>> waiters;  // mbarrier -> the threads stuck on it
    std::map<uint32_t, unsigned> parity;
    const int nf = (int)emu::core.fibers.size();
    for (int i = 0; i < nf; ++i) {
        const emu::Fiber &f = emu::core.fibers[i];
        if (f.state == emu::DONE || !f.wait_what || strcmp(f.wait_what, "mbarrier.try_wait")) continue;
        waiters[(uint32_t)f.wait_arg].push_back(i);
        parity[(uint32_t)f.wait_arg] = (unsigned)(f.wait_arg >> 32) & 1u;
    }
    auto ever = [&](const EmuMbar &b) {
        std::vector<int> v;
        for (int i = 0; i < (int)b.ever.size(); ++i) if (b.ever[i]) v.push_back(i);
        return v;
    };
    /* where threads are now: grouped by what they wait on ("have exited", "wait on X") */
    auto whereabouts = [&](const std::vector<int> &ts) {
        std::map<std::string, std::vector<int>> by;
        for (int x : ts) {
            const emu::Fiber &f = emu::core.fibers[x];
            by[f.state == emu::DONE ? "exited" : !f.wait_what ? "run on"
               : !strcmp(f.wait_what, "mbarrier.try_wait") ? "wait on " + emu_mbar_words((uint32_t)f.wait_arg)
                                                           : emu_fmt("wait in %s %u", f.wait_what, (unsigned)f.wait_arg)].push_back(x);
        }
        std::string s;
        for (auto &kv : by) s += (s.empty() ? "" : "; ") + emu_threads(kv.second) + (kv.first == "exited" ? ": exited" : ": " + kv.first);
        return s;
    };
    if (waiters.empty()) return;
    fprintf(out, "EMU HANG, the mbarriers it is stuck on:\n");
    for (auto &kv : waiters) {
        const EmuMbar &b = emu_blk->mbar[kv.first];
        const std::vector<int> &w = kv.second;
        const std::string who = emu_threads(w), name = emu_mbar_words(kv.first);
        std::string s = emu_fmt("  %s: %s wait%s for parity %u; it has completed %u phase%s, and the one in progress "
                                "has %d of its %d arrivals", name.c_str(), who.c_str(), w.size() > 1 ? "" : "s",
                                parity[kv.first], b.phase, b.phase == 1 ? "" : "s", b.expected - b.pending, b.expected);
        if (b.pending == 0 && b.tx > 0) {
            s += emu_fmt(". Every arrival came, but %lld bytes it expects never landed: the bytes announced by "
                         "arrive.expect_tx are more than its copies deliver", b.tx);
        } else {
            std::vector<int> missing, came = b.arrivers;
            std::sort(came.begin(), came.end());
            for (int x : ever(b)) if (!std::binary_search(came.begin(), came.end(), x)) missing.push_back(x);
            if (missing.empty() && came.empty()) s += ". Nothing has arrived on it in this block yet";
            else if (!missing.empty()) {
                s += ". Not arrived in this phase, of those that arrived in earlier ones: " + whereabouts(missing);
                /* a cycle: the missing side waits on a barrier that only the waiters here arrive on */
                for (int x : missing) {
                    const emu::Fiber &f = emu::core.fibers[x];
                    if (f.state == emu::DONE || !f.wait_what || strcmp(f.wait_what, "mbarrier.try_wait")) continue;
                    auto jt = emu_blk->mbar.find((uint32_t)f.wait_arg);
                    if (jt == emu_blk->mbar.end()) continue;
                    bool ours = false;
                    for (int y : w) ours = ours || jt->second.ever[y];
                    if (ours) {
                        s += ". So each side waits for the other (" + emu_mbar_words((uint32_t)f.wait_arg) +
                             " gets its arrivals from " + who + ")";
                        break;
                    }
                }
            }
        }
        int passed = 0;
        for (int x : w) passed = std::max(passed, b.passes[x]);
        if ((int)b.phase > passed + 1) {
            s += emu_fmt(". It ran ahead of its waiters: %u phases completed, and they passed %d wait%s on it, so the "
                         "phase they wait for went by", b.phase, passed, passed == 1 ? "" : "s");
            if (b.last_threads > b.last_warps)
                s += emu_fmt(": each phase completes with %d arrivals from %d warp%s, for a count of %d (one arrival "
                             "per lane, where the count asks for one per warp?)", b.last_threads, b.last_warps,
                             b.last_warps == 1 ? "" : "s", b.expected);
            else
                s += ": its arriving side does not wait for them to take each phase (does its own wait for their "
                     "release pass too early?)";
        }
        fprintf(out, "%s\n", s.c_str());
    }
    for (auto &kv : emu_blk->mbar)
        if (kv.second.early >= 0)
            fprintf(out, "  note: %s passed a wait on %s before that barrier had completed any phase: a wait for parity 1 "
                         "returns at once there (the phase before the first counts as completed), right for a first "
                         "wait on a slot that starts free, one phase off anywhere else\n",
                    emu_threads({kv.second.early}).c_str(), emu_mbar_words(kv.first).c_str());
    fflush(out);
}
/* Runs fn() as grid x nt CUDA threads, one block after another, on the emulator core; `regs`:
 * registers per thread at launch (what setmaxnreg moves). A hang ends the run (EMU FAILED, exit 3). */
static bool emu_launch(unsigned grid, int nt, size_t smem, int regs, const std::function<void()> &fn) {
    if (smem > EMU_SMEM) { emu_fail("dynamic shared memory above 227 KiB"); return false; }
    emu_gdim = {grid, 1, 1};
    emu_smem_bytes = smem;
    emu_nt = nt;
    emu_nv = nt + EMU_MAX_MBAR;
    std::unique_ptr<EmuBlockState> blk;
    emu::core.name_wait = emu_wait_name;
    emu::Hooks h;
    h.on_hang = [] {
        emu_hang_diagnosis(stderr);
        printf("EMU FAILED (hang)\n");
        fflush(stdout);
        _exit(3);
    };
    h.block_begin = [&] {
        blk = std::make_unique<EmuBlockState>();
        blk->vc.assign((size_t)nt * emu_nv, 0);
        blk->wr.reset(new std::atomic<uint64_t>[EMU_WORDS]);
        blk->wf.reset(new std::atomic<uint32_t>[EMU_WORDS]);
        blk->rd.reset(new std::atomic<uint32_t>[EMU_CHUNKS * (size_t)nt]);
        blk->store_rd.reset(new std::atomic<int>[EMU_CHUNKS]);
        for (size_t i = 0; i < EMU_CHUNKS; ++i) blk->store_rd[i].store(0);
        for (size_t i = 0; i < EMU_WORDS; ++i) { blk->wr[i].store(0, std::memory_order_relaxed); blk->wf[i].store(0); }
        for (size_t i = 0; i < EMU_CHUNKS * (size_t)nt; ++i) blk->rd[i].store(0, std::memory_order_relaxed);
        for (auto &b : blk->named) { b.acc.assign(emu_nv, 0); b.done.assign(emu_nv, 0); }
        blk->warpbar.resize(nt / 32);
        for (auto &b : blk->warpbar) { b.acc.assign(emu_nv, 0); b.done.assign(emu_nv, 0); }
        blk->warps = std::vector<EmuWarp>(nt / 32);
        emu_blk = blk.get();
        emu_ths.assign(nt, EmuTh{});
        for (int i = 0; i < nt; ++i) {
            EmuTh &t = emu_ths[i];
            t.tid = i; t.warp = i / 32; t.lane = i % 32; t.regs = regs;
            t.vc = &blk->vc[(size_t)i * emu_nv];
            t.vc[i] = 1;
        }
        memset(fa_smem, 0xff, EMU_SMEM);  // NaN in fp16 and bf16
    };
    h.thread = [&](int) {
        fn();
        EmuTh &t = *emu_me();
        if (!t.uncommitted.empty() || !t.groups.empty())
            emu_fail("the thread exits with wgmma instructions in flight (a missing wgmma.wait_group)");
        if (!t.bulk_open.empty() || !t.bulk_groups.empty())
            emu_fail("the thread exits with TMA stores that may still read shared memory (a missing "
                     "cp.async.bulk.wait_group.read)");
        for (auto &grp : t.bulk_groups)  // late stores still land (the kernel's results)
            for (auto &st : grp) if (!st.done) emu_bulk_store_do(st);
    };
    h.block_end = [&] {
        if (!blk->tma_queue.empty()) emu_fail("TMA copies still undelivered when the block ends");
        for (int id = 1; id < 16; ++id)
            if (blk->named[id].arrived)
                emu_fail(emu_fmt("named barrier %d ends the block with %d of its %d arrivals: a bar.arrive (or bar.sync) "
                                 "that no other thread matched", id, blk->named[id].arrived, blk->named[id].expected));
        for (auto &kv : blk->mbar)
            if (kv.second.tx != 0)
                emu_fail(emu_fmt("%s ends the block with %lld transaction bytes outstanding",
                                 emu_bar_name ? emu_bar_name(kv.first).c_str() : "an mbarrier", kv.second.tx));
        emu_blk = nullptr;
    };
    return emu::run_grid(emu::Idx{grid, 1, 1}, nt, h);
}

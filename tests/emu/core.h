/* tests/emu/core.h: the one emulator core every CPU emulator of the course runs its kernels on
 * (tests/fp32_emu, tests/wmma_emu, tests/warp_emu, tests/hopper_emu): threads, barriers, launch.
 *
 * Each CUDA thread of a block is a fiber: its own stack, switched to and from by hand (a few
 * instructions on x86-64; ucontext elsewhere), all fibers of a block on the one OS thread that
 * launched the kernel. Blocks run one after another. What a fiber-based core gives every emulator:
 *   - threadIdx / blockIdx / gridDim / blockDim (emu::tid(), emu::bid(), ...), and emu::self(),
 *     the running fiber's index, which an emulator uses to index its own per-thread state
 *     (epochs, vector clocks, async groups) instead of thread_local;
 *   - emu::Barrier: a barrier of a fixed count (the block's __syncthreads, a warp's __syncwarp and
 *     the rendezvous of warp-collective operations: shuffles, ldmatrix, mma); emu::block() and
 *     emu::wake() for an emulator's own waits (named barriers with arrive and sync, counts);
 *     emu::spin() for a poll that failed (an mbarrier try_wait, a register pool);
 *   - the launch: emu::run_grid(grid, threads, hooks) runs hooks.thread() as every CUDA thread of
 *     every block, with hooks.block_begin / block_end around each block;
 *   - deadlock detection: when no fiber can run (every live fiber waits at a barrier that cannot
 *     complete, or spins on a poll with no progress anywhere since its last failed try), the block
 *     is reported as a hang, with what each waiting thread waits on, at once and deterministically
 *     (no watchdog timeout);
 *   - an adversarial, deterministic schedule: a fiber runs until it blocks or spins, then the next
 *     one in order runs. So a missing barrier shows every time: the first thread runs through the
 *     place where it should have waited before any other thread has written what it reads.
 *     EMU_SCHED=reverse (the drivers' second run) takes the threads in the reverse order;
 *     EMU_SCHED=shuffle:SEED in a seeded random order (both fixed for the whole run).
 * Stacks (EMU_STACK_KB, default 512 KiB each, enough for the Hopper kernels' accumulator arrays
 * at -O1, which spill to the stack on the CPU) are mapped once and reused by every block and
 * launch; the page under each is a guard page, so an overflow is a crash, not a silent overwrite.
 * What fibers cannot show that OS threads could: a data race between two plain C++ accesses with
 * no emulated operation between them (a fiber is never preempted in straight-line code); the
 * emulators' shadow checks (hazards, happens-before) are what find races, not the interleaving.
 * One launch at a time, from one OS thread (the emulators' state is global). */
#pragma once
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>
#if !defined(__x86_64__)
#include <ucontext.h>
#endif

namespace emu {

struct Idx { unsigned x = 0, y = 0, z = 0; };

/* ---- the context switch ---- */
#if defined(__x86_64__)
/* Saves the callee-saved registers, MXCSR and the x87 control word of the running context on its
 * stack, stores its stack pointer in *from, and resumes the context whose stack pointer is `to`
 * (the System V ABI: everything else is caller-saved, so the compiler has saved it already). */
__attribute__((naked, noinline)) static void ctx_switch(void ** /*from*/, void * /*to*/) {
    asm volatile(
        "pushq %rbp\n\t"
        "pushq %rbx\n\t"
        "pushq %r12\n\t"
        "pushq %r13\n\t"
        "pushq %r14\n\t"
        "pushq %r15\n\t"
        "subq $8, %rsp\n\t"
        "stmxcsr (%rsp)\n\t"
        "fnstcw 4(%rsp)\n\t"
        "movq %rsp, (%rdi)\n\t"
        "movq %rsi, %rsp\n\t"
        "ldmxcsr (%rsp)\n\t"
        "fldcw 4(%rsp)\n\t"
        "addq $8, %rsp\n\t"
        "popq %r15\n\t"
        "popq %r14\n\t"
        "popq %r13\n\t"
        "popq %r12\n\t"
        "popq %rbx\n\t"
        "popq %rbp\n\t"
        "ret\n\t");
}
#endif

enum FiberState { READY, BLOCKED, DONE };

struct Fiber {
#if defined(__x86_64__)
    void *sp = nullptr;
#else
    ucontext_t uc;
#endif
    int id = 0;
    Idx tid;
    FiberState state = READY;
    bool spinning = false;       // last left the CPU by emu::spin (a poll that failed)
    unsigned long spin_at = 0;   // the core's progress count at that spin
    const char *wait_what = nullptr;
    uint64_t wait_arg = 0;
};

/* A hang report names what a thread waits on; an emulator may name the argument itself (an
 * mbarrier by its role, say) through Core::name_wait. */
struct Core {
    std::vector<Fiber> fibers;
    std::vector<char *> stacks;  // mapped once, reused
    size_t stack_bytes = 0;
    int cur = -1;                // running fiber, -1: the scheduler
#if defined(__x86_64__)
    void *sched_sp = nullptr;
#else
    ucontext_t sched_uc;
#endif
    unsigned long progress = 0;  // any completed barrier, arrival, delivery: see emu::progress()
    Idx bid, grid_dim, block_dim;
    std::vector<int> order;
    std::function<void(int)> body;
    std::function<std::string(const char *, uint64_t)> name_wait;
    bool running = false;
    int sched_mode = -1;  // 0 forward, 1 reverse, 2 shuffle
    unsigned sched_seed = 0;
};
inline Core core;

inline int self() { return core.cur; }
inline Fiber &me() { return core.fibers[core.cur]; }
/* threadIdx; outside any fiber (an emulator's checks at the end of a block) thread 0's, as a
 * kernel's host-side caller would see it */
inline const Idx &tid() {
    static const Idx none{};
    return core.cur < 0 ? none : core.fibers[core.cur].tid;
}
inline const Idx &bid() { return core.bid; }
inline void progress() { ++core.progress; }

/* Back to the scheduler; returns when this fiber is resumed. */
inline void to_scheduler() {
    Fiber &f = me();
#if defined(__x86_64__)
    ctx_switch(&f.sp, core.sched_sp);
#else
    swapcontext(&f.uc, &core.sched_uc);
#endif
}
/* Wait until emu::wake(this fiber). `what`, `arg`: for the hang report. */
inline void block(const char *what, uint64_t arg = 0) {
    Fiber &f = me();
    f.state = BLOCKED;
    f.spinning = false;
    f.wait_what = what;
    f.wait_arg = arg;
    to_scheduler();
    f.wait_what = nullptr;
}
inline void wake(int fiber) {
    Fiber &f = core.fibers[fiber];
    if (f.state == BLOCKED) f.state = READY;
}
/* A poll that failed (an mbarrier try_wait, a register pool too small): let the other fibers
 * run. This fiber runs again only after some progress elsewhere; with none anywhere, the block
 * is a hang. */
inline void spin(const char *what, uint64_t arg = 0) {
    Fiber &f = me();
    f.spinning = true;
    f.spin_at = core.progress;
    f.wait_what = what;
    f.wait_arg = arg;
    to_scheduler();
    f.spinning = false;
    f.wait_what = nullptr;
}

/* A barrier of `count` threads (fibers): __syncthreads, __syncwarp, a warp's rendezvous. The
 * fiber that completes it goes on; the others become ready, in the order they arrived. */
struct Barrier {
    int count = 0, arrived = 0;
    std::vector<int> waiters;
    const char *what = "a barrier";
    uint64_t arg = 0;
    Barrier() = default;
    explicit Barrier(int n, const char *w = "a barrier", uint64_t a = 0) : count(n), what(w), arg(a) {}
    void arrive_and_wait() {
        ++core.progress;
        if (++arrived >= count) {
            arrived = 0;
            for (int w : waiters) wake(w);
            waiters.clear();
            return;
        }
        waiters.push_back(self());
        block(what, arg);
    }
};

/* ---- stacks and fibers ---- */
inline size_t stack_size() {
    if (!core.stack_bytes) {
        const char *kb = getenv("EMU_STACK_KB");
        core.stack_bytes = (size_t)(kb && atoi(kb) > 0 ? atoi(kb) : 512) * 1024;
    }
    return core.stack_bytes;
}
inline char *stack_of(int i) {
    const size_t page = (size_t)sysconf(_SC_PAGESIZE), bytes = stack_size();
    while ((int)core.stacks.size() <= i) {
        void *p = mmap(nullptr, bytes + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p == MAP_FAILED) { perror("emu core: mmap of a fiber stack"); exit(9); }
        mprotect(p, page, PROT_NONE);  // guard page below the stack
        core.stacks.push_back((char *)p + page);
    }
    return core.stacks[i];
}
[[noreturn]] inline void fiber_exit() {
    Fiber &f = me();
    f.state = DONE;
    ++core.progress;
#if defined(__x86_64__)
    void *dead;
    ctx_switch(&dead, core.sched_sp);
#else
    swapcontext(&f.uc, &core.sched_uc);
#endif
    __builtin_unreachable();
}
inline void fiber_main() {
    core.body(core.cur);
    fiber_exit();
}
inline void fiber_init(Fiber &f, int i) {
    char *lo = stack_of(i), *hi = lo + stack_size();
#if defined(__x86_64__)
    /* What ctx_switch pops: MXCSR and x87 control word (this thread's), six registers, then the
     * return address, fiber_main, entered with the stack aligned as after a call. */
    uint64_t *sp = (uint64_t *)(((uintptr_t)hi & ~(uintptr_t)15) - 16);
    *--sp = 0;                                  // fiber_main's return address (never used)
    *--sp = (uint64_t)(uintptr_t)&fiber_main;  // ctx_switch's ret
    for (int r = 0; r < 6; ++r) *--sp = 0;
    uint32_t csr;
    uint16_t cw;
    asm volatile("stmxcsr %0" : "=m"(csr));
    asm volatile("fnstcw %0" : "=m"(cw));
    *--sp = (uint64_t)csr | (uint64_t)cw << 32;
    f.sp = sp;
#else
    getcontext(&f.uc);
    f.uc.uc_stack.ss_sp = lo;
    f.uc.uc_stack.ss_size = hi - lo;
    f.uc.uc_link = nullptr;
    makecontext(&f.uc, (void (*)())fiber_main, 0);
#endif
}
inline void resume(int i) {
    core.cur = i;
#if defined(__x86_64__)
    ctx_switch(&core.sched_sp, core.fibers[i].sp);
#else
    swapcontext(&core.sched_uc, &core.fibers[i].uc);
#endif
    core.cur = -1;
}

/* The order the scheduler takes the threads in: EMU_SCHED=forward (default), reverse,
 * shuffle:SEED. */
inline void make_order(int n) {
    if (core.sched_mode < 0) {
        const char *s = getenv("EMU_SCHED");
        core.sched_mode = 0;
        if (s && !strcmp(s, "reverse")) core.sched_mode = 1;
        else if (s && !strncmp(s, "shuffle", 7)) {
            core.sched_mode = 2;
            core.sched_seed = s[7] == ':' ? (unsigned)atoi(s + 8) : 1;
        } else if (s && *s && strcmp(s, "forward")) {
            fprintf(stderr, "emu core: EMU_SCHED=%s: expected forward, reverse or shuffle:SEED\n", s);
            exit(9);
        }
    }
    core.order.resize(n);
    for (int i = 0; i < n; ++i) core.order[i] = core.sched_mode == 1 ? n - 1 - i : i;
    if (core.sched_mode == 2) {
        std::mt19937 rng(core.sched_seed);
        std::shuffle(core.order.begin(), core.order.end(), rng);
    }
}
inline const char *sched_name() {
    return core.sched_mode == 1 ? "reverse" : core.sched_mode == 2 ? "shuffle" : "forward";
}

/* The hang report: every live thread and what it waits on, grouped. */
inline void report_hang(FILE *out) {
    std::map<std::string, int> waits;
    int live = 0;
    for (Fiber &f : core.fibers) {
        if (f.state == DONE) continue;
        ++live;
        std::string k = f.wait_what ? f.wait_what : "nothing it could name";
        if (f.wait_what) k = core.name_wait ? core.name_wait(f.wait_what, f.wait_arg) : k + " " + std::to_string(f.wait_arg);
        waits[k]++;
    }
    fprintf(out, "EMU HANG: block (%u,%u,%u): no thread can make progress (every one waits on something no other "
                 "thread will do); %d threads still run:\n", core.bid.x, core.bid.y, core.bid.z, live);
    for (auto &kv : waits) fprintf(out, "  %4d threads wait in %s\n", kv.second, kv.first.c_str());
    fflush(out);
}

/* Runs one block of `n` fibers, each calling body(fiber index), until all end. Returns false on
 * a hang (reported on stderr; the fibers that were left are abandoned, their stacks reused). */
inline bool run_block(int n, const std::function<void(int)> &body) {
    core.body = body;
    core.fibers.assign(n, Fiber());
    for (int i = 0; i < n; ++i) {
        core.fibers[i].id = i;
        fiber_init(core.fibers[i], i);
    }
    make_order(n);
    int live = n, pos = 0;
    while (live) {
        int pick = -1;
        for (int k = 0; k < n; ++k) {
            const int i = core.order[(pos + k) % n];
            const Fiber &f = core.fibers[i];
            if (f.state != READY || (f.spinning && f.spin_at == core.progress)) continue;
            pick = i;
            pos = (pos + k + 1) % n;
            break;
        }
        if (pick < 0) {
            report_hang(stderr);
            return false;
        }
        resume(pick);
        if (core.fibers[pick].state == DONE) --live;
    }
    return true;
}

/* EMU_STACK_REPORT=1: the deepest any fiber's stack has been (resident pages of the stacks, from
 * the top), printed after each launch, to size EMU_STACK_KB. */
inline void report_stacks() {
    static const bool on = getenv("EMU_STACK_REPORT") != nullptr;
    if (!on) return;
    const size_t page = (size_t)sysconf(_SC_PAGESIZE), pages = stack_size() / page;
    std::vector<unsigned char> res(pages);
    size_t deepest = 0;
    for (char *s : core.stacks) {
        if (mincore(s, stack_size(), res.data())) continue;
        for (size_t p = 0; p < pages; ++p)
            if (res[p] & 1) { deepest = std::max(deepest, (pages - p) * page); break; }
    }
    fprintf(stderr, "emu core: %zu fiber stacks of %zu KiB, the deepest used %zu KiB\n", core.stacks.size(),
            stack_size() / 1024, deepest / 1024);
}

/* What an emulator does around its blocks and threads. */
struct Hooks {
    std::function<void()> block_begin;   // the block's state (blockIdx is set)
    std::function<void(int)> thread;     // one CUDA thread: per-thread setup, the kernel, checks
    std::function<void()> block_end;     // after every thread of the block ended
    std::function<void()> on_hang;       // after a hang report (default: exit 3 with "EMU FAILED (hang)")
};
/* Runs the grid, blocks in x, then y, then z order; each block's `threads` CUDA threads as
 * fibers. Returns false on a hang (after on_hang, when given). */
inline bool run_grid(Idx grid, int threads, const Hooks &h) {
    if (core.running) { fprintf(stderr, "emu core: a launch from inside a launch\n"); exit(9); }
    if (threads < 1 || threads > 1024) { fprintf(stderr, "emu core: %d threads per block\n", threads); exit(9); }
    core.running = true;
    core.grid_dim = grid;
    core.block_dim = Idx{(unsigned)threads, 1, 1};
    bool ok = true;
    for (unsigned z = 0; z < grid.z && ok; ++z)
        for (unsigned y = 0; y < grid.y && ok; ++y)
            for (unsigned x = 0; x < grid.x && ok; ++x) {
                core.bid = Idx{x, y, z};
                if (h.block_begin) h.block_begin();
                ok = run_block(threads, [&](int t) {
                    core.fibers[t].tid = Idx{(unsigned)t, 0, 0};
                    h.thread(t);
                });
                if (!ok) break;
                if (h.block_end) h.block_end();
            }
    core.running = false;
    report_stacks();
    if (!ok) {
        if (h.on_hang) h.on_hang();
        else {
            printf("EMU FAILED (hang)\n");
            fflush(stdout);
            _exit(3);
        }
    }
    return ok;
}

}  // namespace emu

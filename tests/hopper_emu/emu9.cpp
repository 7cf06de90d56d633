/* emu9.cpp: lesson 09's kernel, every step of its ladder and several tile configurations,
 * on the CPU Hopper emulator (hemu.h), graded against float64 on small shapes. The kernel
 * source (EMU_SRC: the lesson's file whole, its launch rewritten by tests/emu/prep.py, and steps
 * 1-4 added from lessons/09-hopper-wgmma/worklog/variants/steps-1-4.var; see mk/emu.mk) is compiled with
 * FA_EMULATOR defined, so that its PTX wrappers give way to the stand-ins of ptx_hopper.h and
 * ptx_mma.h here.
 *
 * First a layout check that needs no kernel run: the kernel's own wgmma descriptors
 * (desc_kmajor, desc_mnmajor), decoded with the PTX ISA's canonical layouts, must address
 * exactly the bytes where TMA put each element (tma_tile_offset, reference/include/tma_params.h).
 * Then the kernel runs: O and L against float64, NaN never passes, the inputs surrounded by
 * NaN (a read outside shows), O and L poisoned, writes outside O and L detected.
 * Usage: emu9 [quick]: quick (make test) runs the shipped design, step 7, on all its shapes, and
 * every other step on two (a ragged N; causal with x30 logits at d = 128), those only when
 * operands and copies land at issue: the late run of the quick set (EMU_WGMMA or EMU_TMA late)
 * is step 7's alone (every emulator mutant is still rejected: make mutants-emu LESSONS=9);
 * without it (make test-full) every step gets every shape, in both runs, and the tile
 * configurations the ladder measured.
 * Environment: EMU_STEP=k (only that step), EMU_WGMMA=late,
 * EMU_TMA=late (see hemu.h), EMU_SCHED=reverse (tests/emu/core.h). */
#define FA_EMULATOR 1
#include "ptx_hopper.h"
#include "emu_driver.h"  // the file is compiled whole, host code included (never called here)
#include EMU_SRC

static int g_fail = 0;
static int g_sms = 2;  // blocks of a persistent launch (EMU_SMS)
static bool g_late = false;  // operands or copies land late (EMU_WGMMA, EMU_TMA)

/* ---- layout check ---- */
template <int D, int ROWS>
static int check_layout() {
    int bad = 0;
    auto report = [&](const char *what, int kk, int mn, int k, uint32_t got, uint32_t want) {
        if (bad++ < 4)
            printf("layout: %s (D=%d, tile of %d rows) slice %d element (mn=%d, k=%d): the descriptor reads byte %u, "
                   "TMA wrote it at %u\n", what, D, ROWS, kk, mn, k, got, want);
    };
    for (int kk = 0; kk < D / 16; ++kk)  // K-major: Q (A, 64 rows from row0) and K (B, all rows)
        for (int row0 = 0; row0 + 64 <= ROWS; row0 += 64)
            for (int m = 0; m < 64; ++m)
                for (int k = 0; k < 16; ++k) {
                    const uint32_t got = emu_desc_addr(desc_kmajor<ROWS>(0, row0, kk), m, k, false);
                    const uint32_t want = tma_tile_offset(row0 + m, 16 * kk + k, ROWS);
                    if (got != want) report("K-major (Q, K)", kk, row0 + m, k, got, want);
                }
    for (int ks = 0; ks < ROWS / 16; ++ks)  // MN-major: V (B, keys 16 ks .. + 15, all D columns)
        for (int n = 0; n < D; ++n)
            for (int k = 0; k < 16; ++k) {
                const uint32_t got = emu_desc_addr(desc_mnmajor<ROWS>(0, ks), n, k, true);
                const uint32_t want = tma_tile_offset(16 * ks + k, n, ROWS);
                if (got != want) report("MN-major (V)", ks, n, k, got, want);
            }
    return bad;
}

/* ---- test data with NaN guards, float64 reference ---- */
template <typename T> static T to16(float x) {
    if constexpr (std::is_same<T, __half>::value) return __float2half_rn(x);
    else return __float2bfloat16_rn(x);
}
template <typename T> static double from16(T x) {
    if constexpr (std::is_same<T, __half>::value) return __half2float(x);
    else return __bfloat162float(x);
}
constexpr size_t GUARD = 4096;  // elements of NaN on each side of every array
template <typename E> struct Guarded {
    std::vector<E> buf;
    size_t n;
    Guarded(size_t n_, E fill) : buf(n_ + 2 * GUARD, fill), n(n_) {}
    E *data() { return buf.data() + GUARD; }
    E &operator[](size_t i) { return buf[GUARD + i]; }
    bool guards_intact(const E &fill) const {
        for (size_t i = 0; i < GUARD; ++i)
            if (memcmp(&buf[i], &fill, sizeof(E)) || memcmp(&buf[GUARD + n + i], &fill, sizeof(E))) return false;
        return true;
    }
};
template <typename T> static T nan16() { uint16_t b = 0x7fff; T t; memcpy(&t, &b, 2); return t; }
template <typename T> static T poison16() { uint16_t b = 0xffad; T t; memcpy(&t, &b, 2); return t; }

#ifndef EMU9_O_BOX
#define EMU9_O_BOX 64  // rows of O's TMA store box, as the solution's host code makes it (a variant may change it)
#endif
/* One launch on B H heads of N rows, graded. NC: consumer warpgroups (B_r = 64 NC); HS: heads
 * per section of the causal order (0: all, one section). */
template <typename T, int D, int BC, int STAGES, int STEP, int NC = 2>
static void run(int B, int H, int N, int causal, float qmul, unsigned seed, int HS = 0) {
    using Cfg = Config<T, D, BC, STAGES, STEP, NC>;
    using SL = typename Cfg::SL;
    constexpr int BR = 64 * NC;
    const size_t n = (size_t)B * H * N * D;
    Guarded<T> Q(n, nan16<T>()), K(n, nan16<T>()), V(n, nan16<T>()), O(n, poison16<T>());
    Guarded<float> L((size_t)B * H * N, NAN);
    std::mt19937 rng(seed);
    std::normal_distribution<float> nd(0.f, 1.f);
    for (size_t i = 0; i < n; ++i) { Q[i] = to16<T>(nd(rng) * qmul); K[i] = to16<T>(nd(rng)); V[i] = to16<T>(nd(rng)); }
    const float scale = 1.0f / sqrtf((float)D);
    const dtype_t dt = std::is_same<T, __half>::value ? DTYPE_FP16 : DTYPE_BF16;
    CUtensorMap mq, mk, mv, mo;
    T *ptr[4] = {Q.data(), K.data(), V.data(), O.data()};
    CUtensorMap *maps[4] = {&mq, &mk, &mv, &mo};
    const int rows[4] = {BR, BC, BC, EMU9_O_BOX};
    for (int i = 0; i < 4; ++i) {
        tma_tile_params p;
        char err[256];
        if (tma_tile_params_make(&p, ptr[i], (long long)B * H, N, D, D, dt, rows[i], err, sizeof err)) {
            printf("tensor map refused: %s\n", err);
            g_fail++;
            return;
        }
        emu_encode_tensor_map(maps[i], ptr[i], p.dims, p.strides, p.box, p.esize, p.swizzle_bytes);
    }
    emu_bar_name = [](uint32_t a) {
        if (a == SL::bar(FULL_Q)) return std::string("the full barrier of Q");
        if (a == SL::bar(EMPTY_Q)) return std::string("the empty barrier of Q");
        for (int s = 0; s < STAGES; ++s) {
            if (a == SL::bar(FULL_K, s)) return emu_fmt("the full barrier of K slot %d", s);
            if (a == SL::bar(FULL_V, s)) return emu_fmt("the full barrier of V slot %d", s);
            if (a == SL::bar(EMPTY_K, s)) return emu_fmt("the empty barrier of K slot %d", s);
            if (a == SL::bar(EMPTY_V, s)) return emu_fmt("the empty barrier of V slot %d", s);
        }
        return emu_fmt("the mbarrier at shared %u", a);
    };
    /* the kernel's shared memory (SmemLayout) and threads (Roles), in the lesson's words, for the
     * emulator's diagnoses */
    emu_regions = {{"Q_i", SL::Q, BR * D * 2, (int)((SL::K - SL::Q) / (BR * D * 2)), "buffer", BR},
                   {"K_j", SL::K, SL::TILE, STAGES, "slot", BC},
                   {"V_j", SL::V, SL::TILE, STAGES, "slot", BC},
                   {"O", SL::O, (SL::BAR - SL::O) / NC, NC, "tile of consumer warpgroup", 64},
                   {"the next work item's word", SL::WORK, 16, 1, "", 0, 4, "word"}};
    const bool producer = Cfg::THREADS > 128 * NC;
    emu_role_name = [producer](int t) {
        if (producer && t == 0) return std::string("the producer");
        if (producer && t < 128) return std::string("the producer warpgroup");
        return emu_fmt("consumer warpgroup %d", t / 128 - (producer ? 1 : 0));
    };
    const long errors0 = emu_errors.load();
    const int Tr = (N + BR - 1) / BR, NT = Cfg::THREADS;
    const int regs = NT > 128 * NC ? 65536 / NT / 8 * 8 : 0;  // with a producer: what setmaxnreg starts from
    /* steps 6-7 are persistent: few "SMs", so that every block takes several query tiles in turn */
    const int work = Tr * B * H, grid = STEP >= 6 ? std::min(work, g_sms) : work;
    const float sl2 = scale * 1.4426950408889634f;
    T *Qp = Q.data(), *Kp = K.data(), *Vp = V.data(), *Op = O.data();
    float *Lp = L.data();
    int sched[2] = {0, 0};  // step 7's counter: 0 before the launch, and the kernel leaves it at 0
    const int hs = HS > 0 ? HS : B * H;
    emu_launch((unsigned)grid, NT, SL::ALLOC, regs, [&] {
        fa3_forward_kernel<T, D, BC, STAGES, STEP, NC>(mq, mk, mv, mo, Qp, Kp, Vp, Op, Lp, N, B * H, sl2, causal, hs,
                                                       sched);
    });
    if (sched[0] || sched[1]) {
        printf("the tile counter is {%d, %d} after the launch, not {0, 0}: the next launch would skip work items\n",
               sched[0], sched[1]);
        g_fail++;
    }
    /* float64 reference */
    double err_o = 0, err_l = 0;
    long nan = 0;
    std::vector<double> s(N);
    for (int bh = 0; bh < B * H; ++bh)
        for (int i = 0; i < N; ++i) {
            const size_t qi = ((size_t)bh * N + i) * D;
            const int kend = causal ? i + 1 : N;
            double mx = -INFINITY;
            for (int j = 0; j < kend; ++j) {
                double acc = 0;
                for (int c = 0; c < D; ++c) acc += from16(Q[qi + c]) * from16(K[((size_t)bh * N + j) * D + c]);
                s[j] = acc * scale;
                mx = std::max(mx, s[j]);
            }
            double l = 0;
            for (int j = 0; j < kend; ++j) { s[j] = exp(s[j] - mx); l += s[j]; }
            for (int c = 0; c < D; ++c) {
                double acc = 0;
                for (int j = 0; j < kend; ++j) acc += s[j] * from16(V[((size_t)bh * N + j) * D + c]);
                const double o = from16(O[qi + c]);
                if (std::isnan(o)) nan++;
                const double e = fabs(o - acc / l);
                if (!(e <= err_o)) err_o = std::isnan(e) ? INFINITY : e;
            }
            const double Lk = L[(size_t)bh * N + i], e = fabs(Lk - (mx + log(l)));
            if (std::isnan(Lk)) nan++;
            if (!(e <= err_l)) err_l = std::isnan(e) ? INFINITY : e;
        }
    const bool guards = O.guards_intact(poison16<T>()) && L.guards_intact(NAN);
    const double tol = std::is_same<T, __half>::value ? 4e-3 : 3e-2;
    const bool ok = nan == 0 && err_o < tol && err_l < 1e-2 * (qmul > 1 ? 10 : 1) && guards &&
                    emu_errors.load() == errors0;
    printf("step %d %-4s d=%-3d Br=%-3d Bc=%-3d S=%d B=%d H=%d N=%-4d %-6s %s%s blocks=%-2d err_O=%.2e err_L=%.2e "
           "nan=%ld%s %s\n",
           STEP, std::is_same<T, __half>::value ? "fp16" : "bf16", D, BR, BC, STAGES, B, H, N, causal ? "causal" : "",
           qmul > 1 ? "x30" : "   ", HS > 0 ? emu_fmt(" HS=%d", HS).c_str() : "", grid,
           err_o, err_l, nan, guards ? "" : " WRITES OUTSIDE O/L", ok ? "ok" : "FAIL");
    fflush(stdout);
    g_fail += !ok;
}

/* EMU_QUICK_ONLY (make emu-09 with EMU_QUICK=1, as make test runs it): only what the quick set
 * runs is compiled, since each kernel configuration is a template instance and the build is most
 * of the step's time; the binary then always runs the quick set. */
#ifdef EMU_QUICK_ONLY
constexpr bool QUICK_ONLY = true;
#else
constexpr bool QUICK_ONLY = false;
#endif

/* The shapes of one step: ragged N, a single tile, several query tiles, causal, x30, bf16. */
template <int STEP>
static void step_cases(bool quick) {
    if (quick && g_late && STEP < 7) return;  // the late pass of the quick set: the shipped design only
    run<__half, 64, 128, 3, STEP>(1, 2, 77, 0, 1.f, 1);
    run<__half, 128, 128, 2, STEP>(1, 1, 300, 1, 30.f, 2);
    if constexpr (!(QUICK_ONLY && STEP < 7)) {  // else these instances are not even compiled
        if (quick && STEP < 7) return;
        run<__nv_bfloat16, 64, 128, 3, STEP>(2, 1, 300, 1, 1.f, 3);
        run<__nv_bfloat16, 128, 128, 2, STEP>(1, 1, 200, 0, 30.f, 4);
        run<__half, 64, 128, 3, STEP>(1, 1, 1, 0, 1.f, 5);
        run<__half, 128, 128, 2, STEP>(1, 1, 1, 1, 1.f, 6);
        if (quick) return;
        run<__half, 64, 128, 3, STEP>(1, 1, 640, 0, 1.f, 7);   // 5 K/V tiles: the ring wraps
        run<__half, 128, 128, 2, STEP>(1, 1, 520, 1, 1.f, 8);  // causal, 5 query tiles
        run<__half, 128, 128, 2, STEP>(1, 1, 129, 0, 1.f, 9);
    }
}

#ifdef EMU_REPORT_CASE
/* make test's check of the performance report (tests/emu/report_check.py): one case of the shipped
 * design with three key tiles per work item (so that the MMA loop turns), one kernel instance to
 * compile; its counts go to EMU_REPORT_OUT. */
int main() {
    emu_wgmma_late = getenv("EMU_WGMMA") && !strcmp(getenv("EMU_WGMMA"), "late");
    emu_tma_late = getenv("EMU_TMA") && !strcmp(getenv("EMU_TMA"), "late");
    run<__half, 64, 128, 3, 7>(1, 1, 384, 0, 1.f, 1);
    printf("emulator errors: %ld\n%s\n", emu_errors.load(), g_fail || emu_errors.load() ? "EMU FAILED" : "EMU PASSED");
    return g_fail || emu_errors.load() ? 1 : 0;
}
#else
int main(int argc, char **argv) {
    const bool quick = QUICK_ONLY || (argc > 1 && !strcmp(argv[1], "quick"));
    emu_wgmma_late = getenv("EMU_WGMMA") && !strcmp(getenv("EMU_WGMMA"), "late");
    emu_tma_late = getenv("EMU_TMA") && !strcmp(getenv("EMU_TMA"), "late");
    g_late = emu_wgmma_late || emu_tma_late;
    const int only = getenv("EMU_STEP") ? atoi(getenv("EMU_STEP")) : 0;
    if (getenv("EMU_SMS")) g_sms = std::max(1, atoi(getenv("EMU_SMS")));
    printf("emu9: kernel %s; wgmma operands read %s, TMA copies land %s\n", EMU_NAME,
           emu_wgmma_late ? "at the wait_group that retires them" : "at issue",
           emu_tma_late ? "when a thread waits on their barrier" : "at issue");
    int lay = check_layout<64, 128>() + check_layout<128, 128>() + check_layout<64, 192>() +
              check_layout<128, 176>() + check_layout<64, 64>() + check_layout<64, 96>();
    printf("layout check: the kernel's descriptor functions %s the TMA layout (the base addresses the kernel passes "
           "them are checked by the results below, not here)\n", lay ? "DO NOT MATCH" : "match");
    g_fail += lay != 0;
#ifdef FA_EXP2_FMA
    /* the exp2-fma variant's polynomial against exp2, on every exponent it can meet */
    double worst = 0;
    for (double x = -126.0; x <= 0.0; x += 1.0 / 4096) {
        const double e = fabs(exp2_fma((float)x) / exp2(x) - 1.0);
        worst = std::max(worst, e);
    }
    const bool poly_ok = worst < 1e-4 && exp2_fma(-INFINITY) == 0.f && exp2_fma(-127.5f) == 0.f &&
                         std::isnan(exp2_fma(NAN)) && exp2_fma(0.f) > 0.9999f;
    printf("exp2_fma: largest relative error %.2e on [-126, 0], 2^-inf = %g, NaN %s: %s\n", worst, exp2_fma(-INFINITY),
           std::isnan(exp2_fma(NAN)) ? "stays NaN" : "LOST", poly_ok ? "ok" : "FAIL");
    g_fail += !poly_ok;
#endif
    if (!only || only == 1) step_cases<1>(quick);
    if (!only || only == 2) step_cases<2>(quick);
    if (!only || only == 3) step_cases<3>(quick);
    if (!only || only == 4) step_cases<4>(quick);
    if (!only || only == 5) step_cases<5>(quick);
    if (!only || only == 6) {
        step_cases<6>(quick);
#ifndef EMU_QUICK_ONLY
        if (!quick) {
            run<__half, 128, 128, 2, 6>(2, 3, 200, 1, 1.f, 16);  // 12 work items on 2 blocks, causal
            run<__nv_bfloat16, 64, 128, 3, 6>(3, 2, 77, 0, 30.f, 17);
            /* other tile shapes */
            run<__half, 128, 176, 2, 6>(1, 2, 300, 0, 1.f, 11);
            run<__half, 64, 192, 2, 6>(1, 2, 300, 1, 1.f, 12);
            run<__nv_bfloat16, 128, 64, 1, 6>(1, 2, 300, 1, 30.f, 13);
            run<__half, 128, 176, 2, 5>(1, 1, 400, 1, 1.f, 14);
            run<__half, 64, 192, 2, 5>(1, 1, 500, 0, 30.f, 15);
            run<__half, 128, 128, 2, 6>(4, 3, 129, 0, 1.f, 18);
        }
#endif
    }
    if (!only || only == 7) {
        step_cases<7>(quick);
        /* 12 work items on 2 blocks from the counter, causal, sections of 4 heads: the last one
         * holds the 2 heads left (a schedule that takes every section as full fails here) */
        run<__half, 128, 128, 2, 7>(2, 3, 200, 1, 1.f, 16, 4);
        run<__nv_bfloat16, 64, 128, 3, 7>(3, 2, 77, 0, 30.f, 17);
        run<__half, 128, 128, 2, 7>(1, 2, 50, 0, 1.f, 19);  // warpgroup 1 has no row < N: no store
        /* other tile shapes; B_c = 176 at d = 128 leaves no room for the O tiles: O from registers */
        run<__half, 128, 176, 2, 7>(1, 2, 300, 0, 1.f, 11);
#ifndef EMU_QUICK_ONLY
        if (!quick) {
            run<__half, 64, 192, 2, 7>(1, 2, 300, 1, 1.f, 12, 1);
            run<__nv_bfloat16, 128, 64, 1, 7>(1, 2, 300, 1, 30.f, 13);
            run<__half, 128, 128, 2, 7>(4, 3, 129, 0, 1.f, 18);
        }
#endif
    }
    /* three consumer warpgroups (B_r = 192, FA64_WG=3) at every step that has turns and rings
     * (the late pass of the quick set: step 7's only) */
    const bool ladder = !(quick && g_late);
    if (ladder && (!only || only == 3)) run<__half, 64, 128, 3, 3, 3>(1, 2, 300, 1, 1.f, 21);
    if (ladder && (!only || only == 4)) run<__nv_bfloat16, 64, 128, 3, 4, 3>(1, 1, 77, 0, 30.f, 22);
    if (ladder && (!only || only == 5)) run<__half, 64, 128, 3, 5, 3>(1, 2, 300, 1, 1.f, 23);
    if (ladder && (!only || only == 6)) run<__half, 64, 128, 3, 6, 3>(2, 2, 200, 0, 1.f, 24);
    if (!only || only == 7) {
        run<__half, 64, 128, 3, 7, 3>(2, 2, 250, 1, 1.f, 25, 1);  // 8 work items, sections of 1 head
        run<__nv_bfloat16, 64, 96, 4, 7, 3>(1, 2, 300, 0, 30.f, 26);
        if (!quick) run<__half, 64, 128, 3, 7, 3>(2, 3, 500, 1, 1.f, 29, 2);
    }
#ifndef EMU_QUICK_ONLY
    if (!quick && (!only || only == 1)) run<__half, 64, 128, 3, 1, 3>(1, 1, 200, 1, 1.f, 27);
    if (!quick && (!only || only == 2)) run<__half, 64, 128, 3, 2, 3>(1, 1, 200, 0, 1.f, 28);
#endif
    printf("emulator errors: %ld\n", emu_errors.load());
    g_fail += emu_errors.load() != 0;
    printf("%s\n", g_fail ? "EMU FAILED" : "EMU PASSED");
    return g_fail ? 1 : 0;
}
#endif

/* emu13.cpp: lesson 13's three backward kernels (preprocess, the warp-specialized main kernel,
 * convert) on the CPU Hopper emulator (hemu.h), graded against float64 on small shapes. The
 * kernel source (EMU_SRC: the lesson's file whole, its launches rewritten by tests/emu/prep.py)
 * is compiled with FA_EMULATOR defined, so that its own PTX wrappers give way to hemu.h's, and
 * with EMU_PTX_HOPPER_PLAIN, so that the stand-in ptx_hopper.h here also brings what the real
 * header writes in plain C++ (mbar_wait, the descriptors).
 *
 * First a layout check that needs no kernel run: desc_kmajor and desc_mnmajor (ptx_hopper.h) for
 * every tile and operand role of the kernel (K-major K_j, V_j, Q_i, dO_i; MN-major Q_i, dO_i, K_j
 * and dS^T, the last read as the A operand of dQ), decoded with the PTX ISA's canonical layouts,
 * must address exactly the bytes where TMA (or the dS^T stores) put each element
 * (tma_tile_offset, reference/include/tma_params.h).
 * Then per case: random Q (x30 for logits of about +-100), K, V, dO; O (rounded) and L of the
 * float64 forward pass; the three kernels as attention_backward launches them (bwd_geometry);
 * dQ, dK, dV poisoned before, every buffer between guard regions. Graded with the FlashAttention
 * rule the harness uses (reference/harness/diagnose_bwd.c, bwd_tolerance): per gradient, max |kernel -
 * float64| <= 2 x max |plain same-precision backward - float64| + atol x max(1, max |float64|),
 * atol 1e-4 (fp16) or 8e-4 (bf16); NaN never passes. The emulator's own errors (hazards, protocol)
 * must be zero. Usage: emu13 [quick]. Environment: EMU_WGMMA=late, EMU_TMA=late (hemu.h),
 * EMU_SCHED=reverse (tests/emu/core.h). A step of the lesson's ladder below the last (make emu-13
 * EMU_STEP=k, as make emu-lesson13 asks for the step a file has reached) is a build of its own:
 * the file with the worklog variant stepK applied (mk/emu.mk), whose kernel also takes the
 * inputs as pointers (FA13_LADDER). */
#define FA_EMULATOR 1
#define EMU_PTX_HOPPER_PLAIN 1
#include "ptx_hopper.h"
#include "emu_driver.h"  // the file is compiled whole, host code included (never called here)
#include EMU_SRC
extern "C" {
#include "cpu_reference.h"
}

static int g_fail = 0;

/* ---- layout check ---- */
static int g_bad_layout = 0;
static void layout_report(const char *what, int slice, int mn, int k, uint32_t got, uint32_t want) {
    if (g_bad_layout++ < 4)
        printf("layout: %s slice %d element (mn=%d, k=%d): the descriptor reads byte %u, the tile holds it at %u\n",
               what, slice, mn, k, got, want);
}
/* K-major: rows [row0, row0 + 64) (A) or all ROWS rows (B) of a tile of ROWS rows and D columns. */
template <int D, int ROWS>
static void check_kmajor(const char *what) {
    for (int kk = 0; kk < D / 16; ++kk)
        for (int row0 = 0; row0 + 64 <= ROWS; row0 += 64)
            for (int m = 0; m < 64; ++m)
                for (int k = 0; k < 16; ++k) {
                    const uint32_t got = emu_desc_addr(desc_kmajor<ROWS>(0, row0, kk), m, k, false);
                    const uint32_t want = tma_tile_offset(row0 + m, 16 * kk + k, ROWS);
                    if (got != want) layout_report(what, kk, row0 + m, k, got, want);
                }
}
/* MN-major: rows 16 ks .. + 15 (k) and columns 64 box .. (mn, NMN of them) of a tile of ROWS rows. */
template <int ROWS, int COLS, int NMN>
static void check_mnmajor(const char *what) {
    for (int box = 0; box + NMN <= COLS; box += NMN)
        for (int ks = 0; ks < ROWS / 16; ++ks)
            for (int n = 0; n < NMN; ++n)
                for (int k = 0; k < 16; ++k) {
                    const uint32_t got = emu_desc_addr(desc_mnmajor<ROWS>((uint32_t)(box / 64) * ROWS * 128, ks), n, k, true);
                    const uint32_t want = tma_tile_offset(16 * ks + k, box + n, ROWS);
                    if (got != want) layout_report(what, ks, box + n, k, got, want);
                }
}
template <int D>
static void check_layouts() {
    using C = Config<__half, D>;
    check_kmajor<D, C::BC>("K-major K_j, V_j (A of S^T, dP^T)");
    check_kmajor<D, C::BR>("K-major Q_i, dO_i (B of S^T, dP^T)");
    check_mnmajor<C::BR, D, D>("MN-major Q_i, dO_i (B of dK, dV)");
    check_mnmajor<C::BC, D, 64>("MN-major K_j (B of dQ)");
    check_mnmajor<C::BC, C::BR, 64>("MN-major dS^T (A of dQ)");
}

/* ---- test data with guards ---- */
template <typename T> static T to16(float x) {
    if constexpr (std::is_same<T, __half>::value) return __float2half_rn(x);
    else return __float2bfloat16_rn(x);
}
template <typename T> static double from16(T x) {
    if constexpr (std::is_same<T, __half>::value) return __half2float(x);
    else return __bfloat162float(x);
}
template <typename T> static T bits16(uint16_t b) { T t; memcpy(&t, &b, 2); return t; }
constexpr size_t GUARD = 1024;  // elements of a known pattern on each side of every array
template <typename E> struct Guarded {
    std::vector<E> buf;
    E pat;
    Guarded(size_t n, E fill, E guard) : buf(n + 2 * GUARD, fill), pat(guard) {
        for (size_t i = 0; i < GUARD; ++i) buf[i] = buf[buf.size() - 1 - i] = guard;
    }
    E *data() { return buf.data() + GUARD; }
    E &operator[](size_t i) { return buf[GUARD + i]; }
    bool intact() const {
        for (size_t i = 0; i < GUARD; ++i)
            if (memcmp(&buf[i], &pat, sizeof(E)) || memcmp(&buf[buf.size() - 1 - i], &pat, sizeof(E))) return false;
        return true;
    }
};

/* One backward pass on B H heads of N rows, graded. */
template <typename T, int D>
static void run(int B, int H, int N, int causal, float qmul, unsigned seed) {
    using C = Config<T, D>;
    using SL = typename C::SL;
    const dtype_t dt = std::is_same<T, __half>::value ? DTYPE_FP16 : DTYPE_BF16;
    const float scale = 1.0f / sqrtf((float)D);
    const int BH = B * H;
    const size_t n = (size_t)BH * N * D, sl = (size_t)N * D;
    const T nan = bits16<T>(0x7fff), poison = bits16<T>(0xffad);
    std::mt19937 rng(seed);
    std::normal_distribution<float> nd(0.f, 1.f);
    Guarded<T> Q(n, nan, nan), K(n, nan, nan), V(n, nan, nan), dO(n, nan, nan), O(n, nan, nan);
    std::vector<float> Qf(n), Kf(n), Vf(n), dOf(n);
    for (size_t i = 0; i < n; ++i) {
        Q[i] = to16<T>(nd(rng) * qmul); K[i] = to16<T>(nd(rng)); V[i] = to16<T>(nd(rng)); dO[i] = to16<T>(nd(rng));
        Qf[i] = (float)from16(Q[i]); Kf[i] = (float)from16(K[i]); Vf[i] = (float)from16(V[i]);
        dOf[i] = (float)from16(dO[i]);
    }
    Guarded<float> L((size_t)BH * N, NAN, NAN);
    std::vector<double> orow(D);
    for (int bh = 0; bh < BH; ++bh)
        for (int i = 0; i < N; ++i) {
            double Li;
            attention_row_f64(&Qf[bh * sl], &Kf[bh * sl], &Vf[bh * sl], N, D, i, scale, causal, orow.data(), &Li);
            for (int c = 0; c < D; ++c) O[bh * sl + (size_t)i * D + c] = to16<T>((float)orow[c]);
            L[(size_t)bh * N + i] = (float)Li;
        }
    const BwdGeometry geo = bwd_geometry(B, H, N, D, C::BR, C::BC);
    Guarded<float> ws(geo.ws_floats, NAN, -12345.f);  // the kernels must initialise what they use
    float *dQacc = ws.data(), *L2 = dQacc + (size_t)geo.rows * D, *Dv = L2 + geo.rows;
    Guarded<T> dQ(n, poison, nan), dK(n, poison, nan), dV(n, poison, nan);

    CUtensorMap maps[6];  // Q, K, V, dO, dK, dV, as bwd_maps_get makes them
    T *ptr[6] = {Q.data(), K.data(), V.data(), dO.data(), dK.data(), dV.data()};
    const int rows[6] = {C::BR, C::BC, C::BC, C::BR, 64, 64};
    for (int i = 0; i < 6; ++i) {
        tma_tile_params p;
        char err[256];
        if (tma_tile_params_make(&p, ptr[i], BH, N, D, D, dt, rows[i], err, sizeof err)) {
            printf("tensor map refused: %s\n", err);
            g_fail++;
            return;
        }
        emu_encode_tensor_map(&maps[i], ptr[i], p.dims, p.strides, p.box, p.esize, p.swizzle_bytes);
    }
    emu_bar_name = [](uint32_t a) {
        const int i = ((int)a - (int)SL::BAR) / 8, S = C::STAGES;
        static const char *const kind[4] = {"full barrier of Q", "full barrier of dO", "empty barrier of Q",
                                            "empty barrier of dO"};
        if (i == 0) return std::string("the full barrier of K and V");
        if (i >= 1 && i < 1 + 4 * S) return emu_fmt("the %s slot %d", kind[(i - 1) / S], (i - 1) % S);
        return emu_fmt("the mbarrier at shared %u", a);
    };
    /* the kernel's shared memory (SmemLayout) and threads (the roles), in the lesson's words, for
     * the emulator's diagnoses; step 1 of the ladder keeps dS^T row-major, not as TMA would */
#if defined(FA13_LADDER) && FA13_STEP == 1
    const EmuRegion ds = {"dS^T (row-major: key B_r + query)", SL::DS, SL::DST, 2, "buffer", 0, 2, "element"};
#else
    const EmuRegion ds = {"dS^T", SL::DS, SL::DST, 2, "buffer", C::BC};
#endif
    emu_regions = {{"K_j", SL::K, SL::KV, 1, "", C::BC},
                   {"V_j", SL::V, SL::KV, 1, "", C::BC},
                   {"Q_i", SL::Q, SL::QT, C::STAGES, "slot", C::BR},
                   {"dO_i", SL::DO, SL::QT, C::STAGES, "slot", C::BR},
                   ds,
                   {"the dQ block", SL::DQ, SL::DQT, 2, "of consumer warpgroup", 0, 4, "float"},
                   {"L2", SL::L, C::BR * 4, C::STAGES, "slot", 0, 4, "query"},
                   {"D", SL::DD, C::BR * 4, C::STAGES, "slot", 0, 4, "query"}};
    emu_globals = {{"the dQ accumulator", dQacc, (size_t)geo.rows * D * 4},
                   {"preprocess's L2", L2, (size_t)geo.rows * 4},
                   {"preprocess's D", Dv, (size_t)geo.rows * 4}};
    emu_role_name = [](int t) {
        if (t == 0) return std::string("the producer");
        if (t / 32 == 1) return std::string("the dQ warp");
        if (t < 128) return std::string("the producer warpgroup");
        return emu_fmt("consumer warpgroup %d", t / 128 - 1);
    };
    const long errors0 = emu_errors.load();
    const T *Op = O.data(), *dOp = dO.data();
    const float *Lp = L.data();
    emu_launch((unsigned)geo.pre_blocks, 256, 0, 0, [&] {
        fa3_bwd_preprocess_kernel<T, D>(Op, dOp, Lp, L2, Dv, dQacc, N, geo.Npad, geo.rows);
    });
    const int hs = causal && BH > 1 ? 1 + (int)(seed % BH) : BH;  // sections of several sizes
    emu_launch((unsigned)geo.main_blocks, C::THREADS, SL::ALLOC, 65536 / C::THREADS / 8 * 8, [&] {
        fa3_backward_kernel<T, D>(maps[0], maps[1], maps[2], maps[3], maps[4], maps[5], L2, Dv, dQacc, N, BH,
                                  scale * 1.4426950408889634f, scale, causal, hs
#ifdef FA13_LADDER  // a step below the last (worklog/variants/steps.var): the inputs as pointers too
                                  , Q.data(), K.data(), V.data(), dO.data()
#endif
        );
    });
    /* a small grid, so that the grid-stride loop of the convert kernel runs */
    const unsigned cb = (unsigned)std::min<long long>(geo.conv_blocks, 3);
    T *dQp = dQ.data();
    emu_launch(cb, 256, 0, 0, [&] { fa3_bwd_convert_kernel<T, D>(dQacc, dQp, N, geo.Npad, scale, geo.quads); });

    /* grade against float64, with the plain same-precision backward's error as the yardstick */
    double e_k[3] = {0, 0, 0}, e_lp[3] = {0, 0, 0}, mref[3] = {0, 0, 0};
    long nonfinite = 0;
    std::vector<double> r[3], lp[3];
    for (int x = 0; x < 3; ++x) { r[x].resize(sl); lp[x].resize(sl); }
    T *got[3] = {dQ.data(), dK.data(), dV.data()};
    for (int bh = 0; bh < BH; ++bh) {
        attention_backward_slice_f64(&Qf[bh * sl], &Kf[bh * sl], &Vf[bh * sl], &dOf[bh * sl], N, D, scale, causal,
                                     r[0].data(), r[1].data(), r[2].data());
        attention_backward_slice_lowp(&Qf[bh * sl], &Kf[bh * sl], &Vf[bh * sl], &dOf[bh * sl], N, D, scale, causal, dt,
                                      lp[0].data(), lp[1].data(), lp[2].data());
        for (int x = 0; x < 3; ++x)
            for (size_t i = 0; i < sl; ++i) {
                const double k = from16(got[x][bh * sl + i]), e = fabs(k - r[x][i]);
                if (!std::isfinite(k)) nonfinite++;
                if (!(e <= e_k[x])) e_k[x] = std::isfinite(e) ? e : INFINITY;
                e_lp[x] = fmax(e_lp[x], fabs(lp[x][i] - r[x][i]));
                mref[x] = fmax(mref[x], fabs(r[x][i]));
            }
    }
    const double atol = dt == DTYPE_FP16 ? 1e-4 : 8e-4;
    bool ok = nonfinite == 0 && emu_errors.load() == errors0;
    for (int x = 0; x < 3; ++x) ok = ok && e_k[x] <= 2 * e_lp[x] + atol * fmax(1.0, mref[x]);
    const bool guards = Q.intact() && K.intact() && V.intact() && dO.intact() && O.intact() && L.intact() &&
                        ws.intact() && dQ.intact() && dK.intact() && dV.intact();
    printf("%-4s d=%-3d Br=%-3d Bc=%d B=%d H=%d N=%-4d %-6s %s blocks=%-2lld HS=%d err dQ %.1e (plain %.1e) dK %.1e "
           "(%.1e) dV %.1e (%.1e) nonfinite=%ld%s %s\n",
           dt == DTYPE_FP16 ? "fp16" : "bf16", D, C::BR, C::BC, B, H, N, causal ? "causal" : "", qmul > 1 ? "x30" : "   ",
           geo.main_blocks, hs, e_k[0], e_lp[0], e_k[1], e_lp[1], e_k[2], e_lp[2], nonfinite,
           guards ? "" : " WRITES OUTSIDE A BUFFER", ok && guards ? "ok" : "FAIL");
    fflush(stdout);
    g_fail += !(ok && guards);
}

int main(int argc, char **argv) {
    const bool quick = argc > 1 && !strcmp(argv[1], "quick");
    emu_wgmma_late = getenv("EMU_WGMMA") && !strcmp(getenv("EMU_WGMMA"), "late");
    emu_tma_late = getenv("EMU_TMA") && !strcmp(getenv("EMU_TMA"), "late");
    printf("emu13: kernel %s; wgmma operands read %s, TMA and bulk copies land %s\n", EMU_NAME,
           emu_wgmma_late ? "at the wait_group that retires them" : "at issue",
           emu_tma_late ? "when a thread waits on their barrier" : "at issue");
    check_layouts<64>();
    check_layouts<128>();
    printf("layout check: desc_kmajor and desc_mnmajor %s the tiles' layout (a tile's base and a box's offset, which the "
           "kernel adds, are checked by the results below, not here)\n", g_bad_layout ? "DO NOT MATCH" : "match");
    g_fail += g_bad_layout != 0;
    /* ragged N, one tile, several query tiles (the ring of 2 slots wraps), causal (the diagonal
     * inside a warpgroup's keys, tiles skipped), x30 logits, both dtypes, both d */
    run<__half, 64>(1, 2, 77, 0, 1.f, 1);
    run<__half, 128>(1, 1, 200, 1, 30.f, 2);
    run<__nv_bfloat16, 64>(1, 1, 300, 1, 1.f, 3);
    run<__nv_bfloat16, 128>(1, 1, 130, 0, 30.f, 4);
    run<__half, 64>(1, 3, 130, 1, 1.f, 10);  // causal, 3 heads in sections of 2: the last one is short
    if (!quick) {
        run<__half, 64>(1, 1, 1, 1, 1.f, 5);
        run<__half, 128>(2, 1, 190, 1, 1.f, 6);  // 4 key tiles, sections of heads
        run<__nv_bfloat16, 128>(1, 2, 257, 0, 1.f, 7);
        run<__half, 64>(1, 1, 129, 1, 30.f, 8);
    }
    printf("emulator errors: %ld\n", emu_errors.load());
    g_fail += emu_errors.load() != 0;
    printf("%s\n", g_fail ? "EMU FAILED" : "EMU PASSED");
    return g_fail ? 1 : 0;
}

/* emu11.cpp: lesson 11's backward kernels (preprocess, main, convert) on the
 * CPU warp emulator (emu.h and the stand-ins of ptx_mma.h, ptx_cp_async.h,
 * ptx_memory.h in this directory), for the configurations of one source file:
 * the solution's two (BwdConfig<64>, BwdConfig<128>), and more when the file is
 * the options variant (lessons/11-backward-tensor-cores/worklog/variants/options.patch:
 * its BwdOptions template, other tiles and options of the sweep). The source
 * comes whole, host code included (tests/emu/prep.py rewrites
 * its <<<...>>> launches); this driver calls the kernels itself.
 *
 * Per case: random Q, K, V, dO (Q scaled by qmul: x30 gives logits ~ +-100),
 * the forward pass's O (rounded to the dtype) and L from the float64 reference,
 * then the three kernels, run as attention_backward launches them
 * (bwd_geometry); dQ, dK, dV poisoned with NaN before, every buffer inside
 * guard regions checked after. Graded with the FlashAttention test rule the
 * harness uses: per tensor, max |kernel - float64| <= 2 x max |plain
 * same-precision backward - float64| + atol x max(1, max |float64|), atol 1e-4
 * for fp16 and 8e-4 for bf16 (reference/cpu/cpu_reference_bwd.c has both
 * references). Also: ldmatrix and st.shared bank conflicts, cp.async and
 * shared-store hazards (emu.h), and the emulator's own errors must be zero.
 * `quick` runs the shapes `make test` needs; no argument runs more. */
#include "emu_driver.h"  // the lesson's host code is compiled too (never called here)
#include EMU_SRC
extern "C" {
#include "cpu_reference.h"
}

static const unsigned GUARD = 64;  // elements of guard on each side of every device buffer
static const uint16_t POISON16 = 0x7fff;
static const float GUARD_F = -12345.f;

/* A buffer with GUARD elements of a known pattern before and after it. */
template <typename E>
struct Guarded {
    std::vector<E> v;
    E pat;
    Guarded(size_t n, E fill, E guard) : v(n + 2 * GUARD, fill), pat(guard) {
        for (unsigned i = 0; i < GUARD; ++i) v[i] = v[v.size() - 1 - i] = guard;
    }
    E *data() { return v.data() + GUARD; }
    E &operator[](size_t i) { return v[GUARD + i]; }
    bool guards_intact() const {
        for (unsigned i = 0; i < GUARD; ++i)
            if (memcmp(&v[i], &pat, sizeof(E)) || memcmp(&v[v.size() - 1 - i], &pat, sizeof(E))) return false;
        return true;
    }
};

template <typename T> static T bits16(uint16_t b) { T x; memcpy(&x, &b, 2); return x; }

/* The options variant's configurations carry the sweep's knobs; the solution's do not. */
template <class Cfg> constexpr bool is_variant() { return requires { Cfg::PSMEM; }; }
/* The convert kernel's work items: 4-float fragments, or (the variant's row-major
 * accumulator, DQACC = 0) 8-element chunks of dQ's real rows. */
template <class Cfg, class G> static long long convert_items(const G &geo) {
    if constexpr (is_variant<Cfg>()) {
        if constexpr (!Cfg::DQACC) return geo.chunks;
    }
    return geo.quads;
}
template <class Cfg> static void print_config() {
    printf("d=%-3d Br=%-3d Bc=%-3d W=%d ", Cfg::D, Cfg::BR, Cfg::BC, Cfg::WARPS);
    if constexpr (is_variant<Cfg>())
        printf("S=%d KV=%d PS=%d PF=%d SM=%d DQ=%d DH=%d QA=%d ", Cfg::STAGES, (int)Cfg::KVREG, (int)Cfg::PSMEM,
               Cfg::PFIRST, (int)Cfg::STSM, Cfg::DQFIRST, (int)Cfg::DSH, (int)Cfg::DQACC);
    else
        printf("P_ORDER=%d STSM=%d DQ_ORDER=%d ", (int)Cfg::P_ORDER, (int)Cfg::STSM, (int)Cfg::DQ_ORDER);
}

template <typename T, class Cfg>
static int run(const char *tn, int B, int H, int N, int causal, float qmul, unsigned seed) {
    using C = BwdTiles<Cfg>;
    constexpr int D = C::D, BR = C::BR, BC = C::BC, W = C::WARPS;
    static_assert(C::SMEM <= 227 * 1024, "more shared memory than a block may have");
    const dtype_t dt = std::is_same<T, __half>::value ? DTYPE_FP16 : DTYPE_BF16;
    const float scale = 1.0f / sqrtf((float)D);
    const int BH = B * H;
    const size_t n = (size_t)BH * N * D, sl = (size_t)N * D;
    const T guard = bits16<T>(0x7bff), poison = bits16<T>(POISON16);

    /* inputs, and their stored values as float for the references */
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(-1.f, 1.f);
    Guarded<T> Q(n, guard, guard), K(n, guard, guard), V(n, guard, guard), dO(n, guard, guard), O(n, guard, guard);
    std::vector<float> Qf(n), Kf(n), Vf(n), dOf(n);
    for (size_t i = 0; i < n; ++i) {
        Q[i] = emu_cvt<T>(u(rng) * qmul); K[i] = emu_cvt<T>(u(rng));
        V[i] = emu_cvt<T>(u(rng)); dO[i] = emu_cvt<T>(u(rng));
        Qf[i] = (float)emu_val(Q[i]); Kf[i] = (float)emu_val(K[i]);
        Vf[i] = (float)emu_val(V[i]); dOf[i] = (float)emu_val(dO[i]);
    }
    /* the forward pass's outputs: O rounded to the dtype, L in fp32 */
    Guarded<float> L((size_t)BH * N, GUARD_F, GUARD_F);
    std::vector<double> orow(D);
    for (int bh = 0; bh < BH; ++bh)
        for (int i = 0; i < N; ++i) {
            double Li;
            attention_row_f64(&Qf[bh * sl], &Kf[bh * sl], &Vf[bh * sl], N, D, i, scale, causal, orow.data(), &Li);
            for (int c = 0; c < D; ++c) O[bh * sl + (size_t)i * D + c] = emu_cvt<T>((float)orow[c]);
            L[(size_t)bh * N + i] = (float)Li;
        }

    const BwdGeometry geo = bwd_geometry(B, H, N, D, BR, BC);
    Guarded<float> ws(geo.ws_floats, NAN, GUARD_F);  // the kernels must initialise what they use
    float *dQacc = ws.data(), *L2 = dQacc + (size_t)geo.rows * D, *Dv = L2 + geo.rows;
    Guarded<T> dQ(n, poison, guard), dK(n, poison, guard), dV(n, poison, guard);

    emu_launch(dim3((unsigned)geo.pre_blocks), 256, 0, [&] {
        fa2_bwd_preprocess_kernel<T, D>(O.data(), dO.data(), L.data(), L2, Dv, dQacc, N, geo.Npad, geo.rows);
    });
    emu_launch(dim3((unsigned)geo.main_blocks), W * 32, C::SMEM, [&] {
        fa2_bwd_kernel<T, Cfg>(Q.data(), K.data(), V.data(), dO.data(), L2, Dv, dQacc, dK.data(), dV.data(), N,
                               geo.Npad, scale * 1.4426950408889634f, scale, causal);
    });
    /* a small grid, so that the grid-stride loop of the convert kernel runs */
    const unsigned cb = (unsigned)(geo.conv_blocks < 3 ? geo.conv_blocks : 3);
    const long long items = convert_items<Cfg>(geo);
    emu_launch(dim3(cb), 256, 0, [&] { fa2_bwd_convert_dq_kernel<T, Cfg>(dQacc, dQ.data(), N, geo.Npad, scale, items); });

    /* grade against float64, with the plain same-precision backward's error as the yardstick */
    double e_k[3] = {0, 0, 0}, e_lp[3] = {0, 0, 0}, mref[3] = {0, 0, 0};
    long bad_values = 0;
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
                const double k = emu_val(got[x][bh * sl + i]), e = fabs(k - r[x][i]);
                if (!std::isfinite(k)) bad_values++;
                if (!(e <= e_k[x])) e_k[x] = std::isfinite(e) ? e : INFINITY;
                e_lp[x] = fmax(e_lp[x], fabs(lp[x][i] - r[x][i]));
                mref[x] = fmax(mref[x], fabs(r[x][i]));
            }
    }
    const double atol = dt == DTYPE_FP16 ? 1e-4 : 8e-4;
    bool ok = bad_values == 0;
    for (int x = 0; x < 3; ++x) ok = ok && e_k[x] <= 2 * e_lp[x] + atol * fmax(1.0, mref[x]);
    const bool guards = Q.guards_intact() && K.guards_intact() && V.guards_intact() && dO.guards_intact() &&
                        O.guards_intact() && L.guards_intact() && ws.guards_intact() && dQ.guards_intact() &&
                        dK.guards_intact() && dV.guards_intact();
    if (!guards) { emu_fail("a kernel wrote outside its buffers (a guard region changed)"); ok = false; }
    printf("%-4s ", tn);
    print_config<Cfg>();
    printf("B=%d H=%d N=%-4d causal=%d qx%-3g  err dQ %.1e (plain %.1e) dK %.1e (%.1e) dV %.1e (%.1e) nonfinite=%ld %s\n",
           B, H, N, causal, qmul, e_k[0], e_lp[0], e_k[1], e_lp[1], e_k[2], e_lp[2], bad_values, ok ? "ok" : "FAIL");
    return ok ? 0 : 1;
}

/* One configuration over a list of shapes: ragged N around the tile sizes, N = 1,
 * causal and not, fp16 (x30 logits on odd N) and bf16. */
template <class Cfg>
static int sweep(bool quick) {
    int fails = 0;
    const int quick_ns[] = {1, 77, 130};
    const int full_ns[] = {1, 5, 64, 65, 77, 128, 130, 200, 257};
    const int *ns = quick ? quick_ns : full_ns;
    const int nn = quick ? 3 : 9;
    // the late pass of the quick set (copies landing at the retiring wait): N = 130 only, the
    // shape with the most K/V and query tiles (make test-full runs every shape both ways)
    const bool late_quick = quick && emu_cpasync_late;
    for (int causal = 0; causal <= 1; ++causal)
        for (int k = 0; k < nn; ++k)
            if (!late_quick || ns[k] == 130)
                fails += run<__half, Cfg>("fp16", 1, 1, ns[k], causal, (ns[k] % 2) ? 30.f : 1.f, 11 + ns[k]);
    if (late_quick) return fails;
    fails += run<__nv_bfloat16, Cfg>("bf16", 1, 2, 77, 1, 1.f, 5);
    fails += run<__nv_bfloat16, Cfg>("bf16", 2, 1, 130, 0, 30.f, 6);
    return fails;
}

int main(int argc, char **argv) {
    emu_cpasync_late = getenv("EMU_CPASYNC") && !strcmp(getenv("EMU_CPASYNC"), "late");
    printf("emu11: kernel %s; cp.async copies land %s\n", EMU_NAME,
           emu_cpasync_late ? "at the wait_group that retires them (EMU_CPASYNC=late)" : "when issued");
    const bool quick = argc > 1 && !strcmp(argv[1], "quick");
    int fails = 0;
    /* EMU11_DEFAULTS_ONLY=1: the file's two configurations only; EMU11_OTHERS_ONLY=1: the
     * variant's others only (make emu-11 runs the solution for the first, the variant for these) */
    const bool defaults = !getenv("EMU11_OTHERS_ONLY"), others = !getenv("EMU11_DEFAULTS_ONLY");
    /* the file's configurations of d = 64 and 128 (region config; for the options variant, the
     * FB64_* / FB128_* macros, make emu-11-variant EMU11_DEFS="-DFB64_PFIRST=1 ...") */
    if (defaults) {
        fails += sweep<BwdConfig<64>>(quick);
        fails += sweep<BwdConfig<128>>(quick);
    }
#ifdef FB64_PSMEM
    /* the options variant: other shapes its template allows (BwdOptions<d, Br, Bc, warps, stages,
     * KVREG, PSMEM, PFIRST, STSM, DQFIRST, DSH, DQACC>): one buffer, 16 or 32 keys per warp, K/V
     * in registers or re-read, P^T in registers or through shared memory, Br < Bc and Br = Bc,
     * both layouts of the dQ accumulator, the three orders of P^T and of dQ_i (not DSH, which
     * the grader's rule rejects on some shapes: the worklog's step 4) */
    if (others) {
        fails += sweep<BwdOptions<64, 64, 128, 4, 1, 1, 0, 0, 0, 0, 0, 0>>(quick);
        fails += sweep<BwdOptions<128, 64, 128, 8, 1, 0, 0, 0, 0, 0, 0, 1>>(quick);
        if (!quick) {
            fails += sweep<BwdOptions<64, 64, 128, 8, 2, 1, 0, 0, 0, 0, 0, 0>>(quick);
            fails += sweep<BwdOptions<64, 64, 128, 8, 1, 1, 1, 0, 0, 0, 0, 0>>(quick);
            fails += sweep<BwdOptions<64, 64, 64, 4, 2, 1, 1, 0, 0, 1, 0, 1>>(quick);
            fails += sweep<BwdOptions<128, 64, 64, 4, 2, 0, 1, 0, 0, 0, 0, 0>>(quick);
            fails += sweep<BwdOptions<64, 128, 128, 8, 2, 1, 0, 0, 0, 0, 0, 0>>(quick);
            fails += sweep<BwdOptions<64, 128, 128, 8, 2, 0, 1, 1, 0, 0, 0, 1>>(quick);
            fails += sweep<BwdOptions<128, 64, 128, 8, 2, 0, 1, 0, 1, 0, 0, 0>>(quick);
        }
    }
#endif
    printf("ldmatrix: %ld matrices, %ld bank conflicts; st.shared: %ld warp stores, %ld bank conflicts; "
           "emulator errors: %ld\n",
           emu_ldsm_count.load(), emu_ldsm_conflicts.load(), emu_sts_count.load(), emu_sts_conflicts.load(),
           emu_errors.load());
    fails += emu_ldsm_conflicts.load() != 0 || emu_sts_conflicts.load() != 0 || emu_errors.load() != 0;
    printf("%s\n", fails ? "EMU FAILED" : "EMU PASSED");
    return fails ? 1 : 0;
}

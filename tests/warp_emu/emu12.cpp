/* emu12.cpp: lesson 12's split-KV decoding kernel on the CPU warp emulator (emu.h).
 *
 * Per case: random Q, K, V (Q scaled by qmul: x30 gives logits ~ +-100), per-sequence KV
 * lengths when ragged (key rows past a length hold NaN, as in the GPU harness), O and L
 * poisoned with NaN, every buffer (O, L, the split workspace) inside guard regions. The
 * launch is planned by the kernel file's own fd_make_plan (a small `slots` or a forced
 * split count, so that short sequences split too), then every block runs on the emulator,
 * one after another (the last one of each group to arrive does the merge). Graded against
 * the float64 reference (reference/cpu/cpu_reference.c, attention_prefix_f64 over the keys each
 * row sees) with the harness's rule for 16-bit lessons: max |kernel - float64| <= 2 x the
 * max error of a plain same-precision attention + 1e-4 (fp16) or 8e-4 (bf16); L within
 * 2 x its plain error + 1e-4 + 1e-5 |L|. Also: the arrival counters are back to 0, no
 * ldmatrix bank conflict, no cp.async hazard, no emulator error.
 * `quick` runs the cases `make test` needs; no argument runs more. Built by `make emu-12`
 * (mk/emu.mk); EMU12_SRC=lessons/12-flash-decoding/flash_decoding.cu runs the starter, and
 * EMU12_SRC=build/variants/solution12-merge-kernel.cu (make solution12-merge-kernel) that variant. The
 * kernel file includes "ptx_mma.h" and "ptx_cp_async.h", which resolve to this directory's
 * stand-ins; __threadfence, atomicAdd and __ldcg come from emu.h. */
#include "emu_driver.h"  // the file is compiled whole (tests/emu/prep.py rewrites its launch)
#ifndef FA_SM80
#define FA_SM80 1 /* the kernel bodies are compiled here (the real ptx_mma.h sets it for sm_80+) */
#endif
#include EMU_SRC
extern "C" {
#include "cpu_reference.h"
}

static const unsigned GUARD = 256;  // elements of guard on each side of every output buffer

template <typename E>
struct Guarded {
    std::vector<E> v;
    E pat;
    Guarded(size_t n, E fill, E guard) : v(n + 2 * GUARD, fill), pat(guard) {
        for (unsigned i = 0; i < GUARD; ++i) v[i] = v[v.size() - 1 - i] = guard;
    }
    E *data() { return v.data() + GUARD; }
    bool guards_intact() const {
        for (unsigned i = 0; i < GUARD; ++i)
            if (memcmp(&v[i], &pat, sizeof(E)) || memcmp(&v[v.size() - 1 - i], &pat, sizeof(E))) return false;
        return true;
    }
};

struct Shape {
    int B, H, H_kv, N, N_kv, causal, ragged;
    float qmul;
    int forced;  // splits forced (0: the rule, with `slots`)
    long long slots;
};

template <typename T, int D, int BC, int WR, int MT>
static int run(const char *tn, const Shape &sh, unsigned seed) {
    const int G = sh.H / sh.H_kv, R = G * sh.N;
    const float scale = 1.0f / sqrtf((float)D);
    const dtype_t dt = std::is_same<T, __half>::value ? DTYPE_FP16 : DTYPE_BF16;
    std::mt19937 rng(seed);
    std::normal_distribution<float> nrm;
    /* lengths: ragged ones in [lo, N_kv], the first the longest, the last the shortest */
    std::vector<int> lens(sh.B, sh.N_kv);
    const int lo = sh.causal ? sh.N : 1;
    if (sh.ragged) {
        for (int b = 0; b < sh.B; ++b) lens[b] = lo + (int)(rng() % (unsigned)(sh.N_kv - lo + 1));
        if (sh.B >= 2) { lens[0] = sh.N_kv; lens[sh.B - 1] = lo; }
    }
    const size_t nq = (size_t)sh.B * sh.H * sh.N * D, nkv = (size_t)sh.B * sh.H_kv * sh.N_kv * D;
    std::vector<T> Q(nq), K(nkv), V(nkv);
    std::vector<float> Qf(nq), Kf(nkv), Vf(nkv);
    for (size_t i = 0; i < nq; ++i) { Q[i] = emu_cvt<T>(nrm(rng) * sh.qmul); Qf[i] = emu_val(Q[i]); }
    for (size_t i = 0; i < nkv; ++i) {
        K[i] = emu_cvt<T>(nrm(rng)); Kf[i] = emu_val(K[i]);
        V[i] = emu_cvt<T>(nrm(rng)); Vf[i] = emu_val(V[i]);
    }
    uint16_t nanbits = 0x7fff;
    for (int b = 0; b < sh.B; ++b)
        for (int h = 0; h < sh.H_kv; ++h)
            for (size_t e = (size_t)lens[b] * D; e < (size_t)sh.N_kv * D; ++e) {
                const size_t at = ((size_t)b * sh.H_kv + h) * sh.N_kv * D + e;
                memcpy(&K[at], &nanbits, 2); memcpy(&V[at], &nanbits, 2);
            }
    T poison, guard16;
    uint16_t pb = 0x7fff, gb = 0x7ffe;
    memcpy(&poison, &pb, 2); memcpy(&guard16, &gb, 2);
    Guarded<T> O(nq, poison, guard16);
    Guarded<float> L((size_t)sh.B * sh.H * sh.N, NAN, -12345.f);

    const FdPlan p = fd_make_plan(sh.B, sh.H_kv, R, sh.N_kv, BC, sh.slots, sh.forced);
    if (p.WR != WR || p.MT != MT) { printf("driver error: plan picked WR=%d MT=%d\n", p.WR, p.MT); return 1; }
    const size_t groups = (size_t)sh.B * sh.H_kv;
    Guarded<float> Op(groups * p.S * R * D, NAN, -12345.f), Lp(groups * p.S * R, NAN, -12345.f);
    Guarded<int> cnt(groups * p.n_rc, 0, -7);
    FdArgs<T> a;
    a.Q = Q.data(); a.K = K.data(); a.V = V.data(); a.O = O.data(); a.L = L.data();
    a.seqlens = sh.ragged ? lens.data() : nullptr;
    a.Opart = Op.data(); a.Lpart = Lp.data(); a.count = cnt.data();
    a.H = sh.H; a.H_kv = sh.H_kv; a.N = sh.N; a.N_kv = sh.N_kv; a.G = G; a.R = R; a.n_rc = p.n_rc;
    a.S = p.S; a.chunk = p.chunk; a.causal = sh.causal; a.scale_log2 = scale * 1.4426950408889634f;
    constexpr int smem = fd_smem_bytes<D, BC, WR, MT, FD_STAGES>();
#ifdef FD_MERGE /* the merge-kernel variant (lessons/12-flash-decoding/worklog/variants): a second kernel merges */
    a.merge_kernel = p.S > 1;
    a.pdl = 0;
#endif
    emu_launch(dim3((unsigned)p.blocks), FD_THREADS, smem, [&] { fd_split_kernel<T, D, BC, WR, MT, FD_STAGES>(a); });
#ifdef FD_MERGE
    if (a.merge_kernel)
        emu_launch(dim3((unsigned)(p.blocks / p.S)), FD_THREADS, p.RB * sizeof(float),
                   [&] { fd_merge_kernel<T, D, WR * MT * 16>(a); });
#endif

    /* grade: the plain same-precision attention's error sets the bar (FlashAttention's rule) */
    double eO = 0, eL = 0, errO = 0, errL = 0, maxL = 0;
    long nan = 0;
    std::vector<double> ref(D), base(D);
    for (int b = 0; b < sh.B; ++b)
        for (int h = 0; h < sh.H; ++h)
            for (int i = 0; i < sh.N; ++i) {
                const size_t row = ((size_t)b * sh.H + h) * sh.N + i;
                const size_t kv = ((size_t)b * sh.H_kv + h / G) * sh.N_kv * D;
                const int nk = sh.causal ? lens[b] - sh.N + i + 1 : lens[b];
                double rl, bl;
                attention_prefix_f64(&Qf[row * D], &Kf[kv], &Vf[kv], nk, D, scale, ref.data(), &rl);
                attention_prefix_lowp(&Qf[row * D], &Kf[kv], &Vf[kv], nk, D, scale, dt, base.data(), &bl);
                for (int c = 0; c < D; ++c) {
                    const double got = emu_val(O.data()[row * D + c]);
                    if (!std::isfinite(got)) { ++nan; continue; }
                    eO = std::max(eO, fabs(base[c] - ref[c]));
                    errO = std::max(errO, fabs(got - ref[c]));
                }
                const double gl = L.data()[row];
                if (!std::isfinite(gl)) ++nan;
                else errL = std::max(errL, fabs(gl - rl));
                eL = std::max(eL, fabs(bl - rl));
                maxL = std::max(maxL, fabs(rl));
            }
    const double tolO = 2 * eO + (dt == DTYPE_FP16 ? 1e-4 : 8e-4), tolL = 2 * eL + 1e-4 + 1e-5 * maxL;
    bool counters_zero = true;
    for (size_t k = 0; k < groups * p.n_rc; ++k) counters_zero &= cnt.data()[k] == 0;
    const bool guards = O.guards_intact() && L.guards_intact() && Op.guards_intact() && Lp.guards_intact() &&
                        cnt.guards_intact();
    const bool ok = nan == 0 && errO <= tolO && errL <= tolL && counters_zero && guards;
    printf("%-4s d=%-3d B=%d H=%-2d H_kv=%d N=%-2d N_kv=%-4d%s%s x%-2g rows/block=%-3d splits=%d: err O %.2e (tol %.1e) "
           "L %.2e (tol %.1e)%s%s%s %s\n", tn, D, sh.B, sh.H, sh.H_kv, sh.N, sh.N_kv, sh.causal ? " causal" : "",
           sh.ragged ? " ragged" : "", sh.qmul, p.RB, p.S, errO, tolO, errL, tolL,
           nan ? " NaN/unwritten" : "", counters_zero ? "" : " COUNTERS NOT RESET", guards ? "" : " GUARD WRITTEN",
           ok ? "ok" : "FAIL");
    return ok ? 0 : 1;
}

/* The kernel's own dispatch (fd_dispatch), for the emulator. */
template <typename T, int D, int BC>
static int run_any(const char *tn, const Shape &sh, unsigned seed) {
    int WR, MT;
    fd_rows_config(sh.H / sh.H_kv * sh.N, &WR, &MT);
    if (MT == 2) return run<T, D, BC, 4, 2>(tn, sh, seed);
    if (WR == 4) return run<T, D, BC, 4, 1>(tn, sh, seed);
    if (WR == 2) return run<T, D, BC, 2, 1>(tn, sh, seed);
    return run<T, D, BC, 1, 1>(tn, sh, seed);
}

int main(int argc, char **argv) {
    emu_cpasync_late = getenv("EMU_CPASYNC") && !strcmp(getenv("EMU_CPASYNC"), "late");
    printf("emu12: kernel %s; cp.async copies land %s\n", EMU_NAME,
           emu_cpasync_late ? "at the wait_group that retires them (EMU_CPASYNC=late)" : "when issued");
    const bool quick = argc > 1 && !strcmp(argv[1], "quick");
    int fails = 0;
    /* B, H, H_kv, N, N_kv, causal, ragged, qmul, forced splits, slots */
    const Shape d128[] = {
        {1, 4, 1, 1, 300, 0, 0, 1.f, 3, 0},     /* G = 4, one query: 3 splits merged */
        {2, 8, 2, 16, 200, 1, 1, 1.f, 2, 0},    /* 64 rows a group, ragged (one sequence of 16 keys: 1 split) */
        {1, 1, 1, 16, 130, 1, 0, 1.f, 3, 0},    /* the last split is invisible to rows 0..13: L_s = -inf */
        {1, 8, 1, 12, 70, 1, 0, 1.f, 2, 0},     /* 96 rows: 4 warps of 2 m-tiles */
        {1, 2, 2, 5, 5, 1, 0, 1.f, 0, 132},     /* an ordinary causal shape, N_kv = N */
        {2, 2, 1, 1, 1, 0, 0, 30.f, 0, 132},    /* one key */
        {2, 4, 1, 1, 1400, 0, 1, 30.f, 11, 0},  /* 11 splits: one merge batch, partly past the end */
        {2, 4, 1, 1, 1280, 0, 1, 30.f, 20, 0},  /* 20 splits: two merge batches (the first loaded before L) */
        {1, 4, 1, 1, 8960, 0, 0, 30.f, 140, 0}, /* 140 splits: L over two rounds of 128, rescaled */
        {1, 16, 1, 2, 2100, 1, 0, 30.f, 33, 0}, /* 32 rows: 8 (row, columns) items a merge thread, 3 batches */
    };
    const Shape d64[] = {
        {2, 2, 2, 1, 1, 0, 0, 1.f, 0, 132},     /* one key, G = 1 */
        {1, 8, 1, 16, 150, 1, 0, 30.f, 2, 0},   /* 128 rows, x30 logits */
        {1, 4, 2, 16, 260, 0, 1, 30.f, 0, 4},   /* 32 rows, the split rule on a 4-slot GPU, ragged */
        {3, 16, 2, 1, 1000, 0, 1, 1.f, 0, 8},   /* G = 8 */
    };
    const Shape more[] = {
        {2, 8, 2, 4, 777, 1, 1, 30.f, 0, 16},
        {1, 32, 4, 16, 100, 1, 0, 1.f, 2, 0},   /* 128 rows, 1 row chunk */
        {1, 32, 2, 16, 90, 0, 0, 1.f, 2, 0},    /* 256 rows: 2 row chunks */
    };
    unsigned seed = 11;
    for (const Shape &s : d128) fails += run_any<__half, 128, FD128_BC>("fp16", s, ++seed);
    for (const Shape &s : d64) fails += run_any<__half, 64, FD64_BC>("fp16", s, ++seed);
    fails += run_any<__nv_bfloat16, 128, FD128_BC>("bf16", d128[1], ++seed);
    fails += run_any<__nv_bfloat16, 64, FD64_BC>("bf16", d64[2], ++seed);
    if (!quick) {
        for (const Shape &s : more) fails += run_any<__half, 128, FD128_BC>("fp16", s, ++seed);
        for (const Shape &s : more) fails += run_any<__nv_bfloat16, 64, FD64_BC>("bf16", s, ++seed);
    }
    printf("ldmatrix: %ld matrices, %ld bank conflicts; emulator errors: %ld\n", emu_ldsm_count.load(),
           emu_ldsm_conflicts.load(), emu_errors.load());
    fails += emu_ldsm_conflicts.load() != 0 || emu_errors.load() != 0;
    printf("%s\n", fails ? "EMU FAILED" : "EMU PASSED");
    return fails ? 1 : 0;
}

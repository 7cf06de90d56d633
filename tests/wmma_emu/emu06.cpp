/* emu06.cpp: grade lesson 06's kernel, run on the CPU by wmma_emu.h, against the
 * harness's own float64 and same-precision references with the harness's 16-bit rule
 * (error <= 2x the plain same-precision reference's + a small absolute term).
 * Build: see mk/emu.mk and lesson 06's descriptor (make emu-06). The kernel source arrives as
 * EMU_SRC, the lesson file whole with its launch rewritten (tests/emu/prep.py); emu_host.h
 * (force-included) answers its host code's device queries, and the runtime calls the fake
 * device would make are stubs below, never called: this driver launches the kernel itself. */
#include "wmma_emu.h"
extern "C" {
cudaError_t CUDARTAPI cudaGetDevice(int *d) { *d = 0; return cudaSuccess; }
cudaError_t CUDARTAPI cudaMalloc(void **p, size_t) { *p = nullptr; return cudaErrorMemoryAllocation; }
cudaError_t CUDARTAPI cudaFree(void *) { return cudaSuccess; }
cudaError_t CUDARTAPI cudaGetLastError(void) { return cudaSuccess; }
}
#include EMU_SRC
extern "C" {
#include "cpu_reference.h"
}
#include <random>

template <class T> static T to_t(float x);
template <> __half to_t<__half>(float x) { return __float2half_rn(x); }
template <> __nv_bfloat16 to_t<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }

template <class T, int D>
static bool run_case(int B, int H, int N, int causal, float qmul, unsigned seed) {
    const dtype_t dt = std::is_same<T, __half>::value ? DTYPE_FP16 : DTYPE_BF16;
    const size_t n = (size_t)B * H * N * D, sl = (size_t)N * D;
    std::vector<T> Q(n), K(n), V(n), O(n, to_t<T>(NAN));
    std::vector<float> Qf(n), Kf(n), Vf(n), L((size_t)B * H * N, NAN);
    std::mt19937 rng(seed);
    std::normal_distribution<float> nd(0.f, 1.f);
    for (size_t i = 0; i < n; ++i) {
        Q[i] = to_t<T>(nd(rng) * qmul); K[i] = to_t<T>(nd(rng)); V[i] = to_t<T>(nd(rng) + 0.5f);
        Qf[i] = emu_f(Q[i]); Kf[i] = emu_f(K[i]); Vf[i] = emu_f(V[i]);
    }
    const float scale = 1.0f / std::sqrt((float)D);

    const int Tr = (N + Br - 1) / Br;
    emu_launch(dim3(B * H, Tr), THREADS, Smem<D>::bytes, [&] {
        attention_wmma_kernel<T, D>(Q.data(), K.data(), V.data(), O.data(), L.data(), N, causal,
                                    scale * 1.4426950408889634f);
    });

    double eO = 0, eL = 0, bO = 0, bL = 0, tolL = 0;
    bool written = true;
    std::vector<double> ro(D), rb(D);
    for (int bh = 0; bh < B * H; ++bh)
        for (int i = 0; i < N; ++i) {
            double rL, bLi;
            attention_row_f64(&Qf[bh * sl], &Kf[bh * sl], &Vf[bh * sl], N, D, i, scale, causal, ro.data(), &rL);
            attention_row_lowp(&Qf[bh * sl], &Kf[bh * sl], &Vf[bh * sl], N, D, i, scale, causal, dt, rb.data(), &bLi);
            const double gotL = L[(size_t)bh * N + i];
            written &= std::isfinite(gotL);
            eL = std::max(eL, std::fabs(gotL - rL));
            bL = std::max(bL, std::fabs(bLi - rL));
            tolL = std::max(tolL, 1e-5 * std::fabs(rL));
            for (int c = 0; c < D; ++c) {
                const double got = emu_f(O[bh * sl + (size_t)i * D + c]);
                written &= std::isfinite(got);
                eO = std::max(eO, std::fabs(got - ro[c]));
                bO = std::max(bO, std::fabs(rb[c] - ro[c]));
            }
        }
    const double atol = dt == DTYPE_FP16 ? 1e-4 : 8e-4;
    const bool ok = written && eO <= 2 * bO + atol && eL <= 2 * bL + 1e-4 + tolL;
    printf("%s %s d=%3d B=%d H=%d N=%4d causal=%d x%-2.0f  O err %.2e (plain %.2e)  L err %.2e (plain %.2e)%s\n",
           ok ? "ok  " : "FAIL", dt == DTYPE_FP16 ? "fp16" : "bf16", D, B, H, N, causal, qmul, eO, bO, eL, bL,
           written ? "" : "  NaN/not written");
    return ok;
}

/* emu06 [quick]: quick (make test) leaves out N = 7 and 64 */
int main(int argc, char **argv) {
    const bool quick = argc > 1 && !strcmp(argv[1], "quick");
    int fails = 0, cases = 0;
    auto count = [&](bool ok) { ++cases; fails += !ok; };
    for (int N : {1, 7, 64, 77, 130})
        for (int causal = 0; causal < 2; ++causal) {
            if (quick && (N == 7 || N == 64)) continue;
            count(run_case<__half, 64>(1, 2, N, causal, 1.f, 3 * N + causal));
            count(run_case<__half, 128>(2, 1, N, causal, 1.f, 5 * N + causal));
            count(run_case<__nv_bfloat16, 64>(1, 1, N, causal, 1.f, 7 * N + causal));
            count(run_case<__nv_bfloat16, 128>(1, 1, N, causal, 1.f, 11 * N + causal));
        }
    count(run_case<__half, 64>(1, 1, 200, 1, 30.f, 99));   // logits ~ +-100
    count(run_case<__half, 128>(1, 1, 130, 0, 30.f, 98));
    count(run_case<__nv_bfloat16, 128>(1, 1, 130, 1, 30.f, 97));
    printf("%d of %d cases passed\n", cases - fails, cases);
    return fails ? 1 : 0;
}

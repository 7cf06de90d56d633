/* emu7.cpp: lesson 07's kernel on the CPU warp emulator (see emu.h). The build defines
 * FA_EMULATOR, so the lesson file's own PTX wrappers (ldmatrix, mma, ex2, smem_u32) drop
 * out and emu.h's take their place; its pack2 and swz are plain C++ and run as written, so
 * the bank-conflict count below checks the file's own swizzle. The file is compiled whole
 * (tests/emu/prep.py rewrites its launch); this driver launches the kernel itself. */
#define FA_SM80 1  // every kernel body runs on the emulator
#include "emu_driver.h"
#include EMU_SRC

template <typename T, int D>
static int run(const char *tn, int B, int H, int N, int causal, float qmul, unsigned seed) {
    EmuCase<T> c(B, H, N, D, causal, qmul, seed);
    const dim3 grid((N + 63) / 64, H, B);
    const float sl2 = c.scale * 1.4426950408889634f;
    emu_launch(grid, 128, (64 + 2 * 64) * D * 2, [&] {
        fa2_mma_kernel<T, D>(c.Q.data(), c.K.data(), c.V.data(), c.O.data(), c.L.data(), N, sl2, causal);
    });
    EmuResult r = c.check();
    const double tol = std::is_same<T, __half>::value ? 4e-3 : 3e-2;
    const bool ok = r.nan == 0 && r.err_o < tol && r.err_l < 1e-2 * (qmul > 1 ? 10 : 1);
    printf("%-4s d=%-3d B=%d H=%d N=%-4d causal=%d qx%-3g  err_O=%.2e err_L=%.2e nan=%d  %s\n", tn, D, B, H, N,
           causal, qmul, r.err_o, r.err_l, r.nan, ok ? "ok" : "FAIL");
    return ok ? 0 : 1;
}

int main(int argc, char **argv) {
    emu_cpasync_late = getenv("EMU_CPASYNC") && !strcmp(getenv("EMU_CPASYNC"), "late");
    printf("emu7: kernel %s\n", EMU_NAME);
    int fails = 0;
    const int Ns[] = {1, 5, 16, 63, 64, 65, 77, 130, 200};
    const bool quick = argc > 1 && !strcmp(argv[1], "quick");
    for (int causal = 0; causal <= 1; ++causal)
        for (int N : Ns) {
            if (quick && N != 77 && N != 130) continue;
            fails += run<__half, 64>("fp16", 1, 2, N, causal, 1.f, 1 + N);
            fails += run<__nv_bfloat16, 128>("bf16", 1, 1, N, causal, 1.f, 2 + N);
        }
    fails += run<__half, 128>("fp16", 2, 1, 100, 1, 30.f, 7);
    fails += run<__nv_bfloat16, 64>("bf16", 1, 2, 150, 0, 30.f, 8);
    printf("ldmatrix: %ld matrices, %ld bank conflicts; emulator errors: %ld\n", emu_ldsm_count.load(),
           emu_ldsm_conflicts.load(), emu_errors.load());
    fails += emu_ldsm_conflicts.load() != 0 || emu_errors.load() != 0;
    printf("%s\n", fails ? "EMU FAILED" : "EMU PASSED");
    return fails ? 1 : 0;
}

/* tests/checks/headers/ptx_hopper_fp8.cu: every wrapper of reference/include/ptx_hopper_fp8.h instantiated
 * once, so that `make check-14` sees ptxas accept them for sm_90a (the e4m3 wgmma shapes and
 * operand lists, the cvt). Compiled, never run. */
#include "ptx_hopper_fp8.h"
__global__ void fp8_wrappers(float *out, uint64_t da, uint64_t db, uint32_t a0) {
    float d[64]; float e[32];
    for (int i = 0; i < 64; ++i) d[i] = 0;
    for (int i = 0; i < 32; ++i) e[i] = 0;
    const uint32_t a[4] = {a0, a0 + 1, a0 + 2, a0 + 3};
    wgmma_fence();
    wgmma_ss_e4m3<128>(d, da, db, 1);
    wgmma_ss_e4m3<64>(e, da, db, 0);
    wgmma_rs_e4m3<128>(d, a, db, 1);
    wgmma_rs_e4m3<64>(e, a, db, 1);
    wgmma_commit(); wgmma_wait<0>(); fence_acc(d); fence_acc(e);
    uint16_t c = cvt_e4m3x2(d[0], d[1]);
    out[threadIdx.x] = d[threadIdx.x % 64] + e[threadIdx.x % 32] + c + desc_kmajor_e4m3<128>(a0, 64, 3);
}

# mk/14-fp8.mk: lesson 14 (FP8 attention on Hopper). So far the harness's FP8 inputs
# (--dtype e4m3; reference/fp8.c, tests/test_fp8.c, make hostsim-forward's FP8 stand-in) and the
# e4m3 wrappers (reference/include/ptx_hopper_fp8.h); the lesson's own kernel is still to come.
# In `make test` (no GPU needed):
#   make check-14     reference/include/ptx_hopper_fp8.h compiles for sm_90a with every wrapper
#                     instantiated (tests/gpu_fp8/header_check.cu). SKIPs without nvcc
# On a Hopper GPU (H100/H200):
#   make fp8-scalar   ./build/fp8scalar: the forward runner with a one-thread-per-row FP8 kernel on
#                     CUDA cores (tests/gpu_fp8/scalar_fp8.cu): the harness's FP8 path on a real
#                     GPU (codes, descale arrays, bf16 O), e.g.
#                     ./build/fp8scalar --check-only --seed 1   (the case matrix, 14 cases)
.PHONY: check-14 fp8-scalar

check-14:
	@if ! command -v $(NVCC) >/dev/null 2>&1; then echo "check-14: SKIP (no nvcc)"; exit 0; fi; \
	mkdir -p build && $(NVCC) $(SM90A_FLAGS) -Ireference/include -Ireference -Xptxas -v -c tests/gpu_fp8/header_check.cu \
	  -o build/fp8_header_check.o 2>build/fp8_header_check.log || { cat build/fp8_header_check.log; exit 1; }; \
	if grep -q "warning" build/fp8_header_check.log; then cat build/fp8_header_check.log; exit 1; fi; \
	echo "check-14: reference/include/ptx_hopper_fp8.h compiles for sm_90a (e4m3 wgmma ss and rs, N = 64 and 128; cvt e4m3x2)"

FP8_SCALAR_SRC := tests/gpu_fp8/scalar_fp8.cu $(filter-out reference/runner_backward.cu,$(wildcard reference/runner_*.cu)) $(HARNESS_C)
fp8-scalar: build/fp8scalar
build/fp8scalar: $(FP8_SCALAR_SRC) $(HARNESS_H)
	@mkdir -p build
	$(NVCC) -O2 -std=c++17 $(SM90A_FLAGS) -Xcompiler -fopenmp -Ireference/include -Ireference $(FP8_SCALAR_SRC) -o $@ -lgomp

TEST_STEPS += check-14

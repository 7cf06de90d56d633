# mk/gpu-check.mk: the maintainer's full check on a GPU (tests/gpu/gpu_check.sh says it all).
#   make gpu-check          on any machine with an NVIDIA GPU: build everything, then make results,
#                           make grade (the starters), make sanitize-solutionN for every GPU
#                           solution, make fuzz, make mutants-gpu, make bench-quick; a log per
#                           stage in build/gpu-check/, a summary table last. Without a GPU it
#                           refuses (exit 4) and names what runs without one.
#                           GPU_CHECK_STAGES="results sanitize" runs some stages, LESSONS="7 8"
#                           some solutions (sanitize, fuzz, mutants), FUZZ_K shapes per solution
#   make text-experiments   (GPU) rerun the measurements lesson texts quote that make results and
#                           make bench do not make (experiment builds of lessons 04, 05, 07, 08;
#                           ncu on solution 06; TEXT_EXPERIMENTS=grid: lessons 06-08 vs PyTorch
#                           over the grid); output in build/text-experiments/
#   make text-exp-variant TEXT_EXP_N=4 TEXT_EXP_DEFS=-DRUNTIME_INDEX TEXT_EXP_OUT=build/x
#                           one solution built with extra -D flags, anywhere (the experiments' builds)
#   make gpu-check-selftest (CPU, in make test) the refusals: no GPU (exit 4), bad variables (exit 2)
.PHONY: gpu-check text-experiments text-exp-variant gpu-check-selftest

GPU_CHECK_ENV = MAKE='$(MAKE)' NVCC='$(NVCC)' FUZZ_K='$(FUZZ_K)' LESSONS='$(LESSONS)' \
  GPU_CHECK_STAGES='$(GPU_CHECK_STAGES)'

gpu-check:
	@$(GPU_CHECK_ENV) bash tests/gpu/gpu_check.sh

text-experiments:
	@MAKE='$(MAKE)' TEXT_EXPERIMENTS='$(TEXT_EXPERIMENTS)' bash tests/checks/text_experiments.sh

TEXT_EXP_SRC = $(call src_of,solutions,$(TEXT_EXP_N))
text-exp-variant: $(HARNESS_C_OBJ) $(HARNESS_ALL_CU_OBJ)
	@if [ -z "$(TEXT_EXP_SRC)" ] || [ -z "$(TEXT_EXP_OUT)" ]; then \
	  echo "usage: make text-exp-variant TEXT_EXP_N=<solution number> TEXT_EXP_DEFS='-DX=1' TEXT_EXP_OUT=<binary>"; exit 2; fi
	@mkdir -p $(dir $(TEXT_EXP_OUT))
	$(NVCC) $(NVCC_FLAGS) $(TEXT_EXP_DEFS) $(call arch_of,$(TEXT_EXP_SRC)) $(REF_INC) $(TEXT_EXP_SRC) \
	  $(call runner_obj_of,$(TEXT_EXP_SRC)) $(HARNESS_C_OBJ) -o $(TEXT_EXP_OUT) -lgomp

gpu-check-selftest:
	@bash tests/gpu/gpu_check_selftest.sh

TEST_STEPS += gpu-check-selftest

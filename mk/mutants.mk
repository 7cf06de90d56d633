# mk/mutants.mk: a grader that passes a wrong kernel teaches the wrong lesson.
#   make mutants          every planted-bug mutant (tests/mutants/NN/*.mut) through the grader,
#                         one table row each; lesson 01's run on the CPU, 02+ need a GPU and
#                         write docs/results/mutants-<gpu>.md. LESSONS="2 7" picks lessons.
#   make mutants-cpu      lesson 01's mutants + the command-line refusal tests (in make test)
#   make mutants-gpu      lessons 02+ only, and `make grade` with a hanging lesson 02 (GPU)
#   make mutants-apply    every mutant still applies to its solution (nothing built; in make test)
#   make mutants-emu      the mutants marked `emu: N` on the CPU emulator alone (no GPU; slow:
#                         one emulator build and run each; LESSONS="9" picks lessons)
#   make mutants-build    apply + compile every GPU mutant, no GPU needed (GPU_ARCH=90);
#                         MUTANTS_EQUIV=1 also flags mutants whose SASS equals the solution's
#   make fuzz             (GPU) every GPU solution on FUZZ_K (500) random valid shapes,
#                         FUZZ_SEED (1); table in docs/results/fuzz-<gpu>.md
.PHONY: mutants mutants-cpu mutants-cpu-only mutants-cli mutants-gpu mutants-build mutants-apply mutants-emu fuzz

MUTANTS_ENV = MUTANTS_FROM_MAKE=1 CC='$(CC)' CFLAGS='$(CFLAGS)' NVCC='$(NVCC)' NVCC_FLAGS='$(NVCC_FLAGS)' \
  ARCH_FLAGS='$(ARCH_FLAGS)' ARCH_TAG='$(ARCH_TAG)' HARNESS_C_OBJ='$(HARNESS_C_OBJ)' \
  HARNESS_CU_OBJ='$(HARNESS_CU_OBJ)' HARNESS_BWD_CU_OBJ='$(HARNESS_BWD_CU_OBJ)' SM90A_FLAGS='$(SM90A_FLAGS)' \
  LESSONS='$(LESSONS)'
# Every lesson number that has a solution source (the CLI tests run each solution binary).
SOLUTION_NUMS := $(shell ls solutions/[0-9][0-9]-*/*.c solutions/[0-9][0-9]-*/*.cu 2>/dev/null \
                   | sed -E 's@solutions/0?([0-9]+)-.*@\1@' | sort -un)
MUTANTS_NO_GPU_MSG := make mutants: lessons 02+ need an NVIDIA GPU (nvidia-smi found none); \
  `make mutants-build GPU_ARCH=90` checks here that they still apply and compile

mutants:
	@$(MAKE) --no-print-directory mutants-cpu
	@if nvidia-smi -L >/dev/null 2>&1; then $(MAKE) --no-print-directory mutants-gpu; \
	 else echo "$(MUTANTS_NO_GPU_MSG)"; exit 4; fi

mutants-cpu: mutants-cpu-only mutants-cli

mutants-cpu-only: $(HARNESS_C_OBJ) build/host/runner_softmax.o
	@$(MUTANTS_ENV) bash tests/mutants/run.sh cpu

mutants-cli: $(addprefix solution,$(SOLUTION_NUMS))
	@bash tests/mutants/cli.sh $(SOLUTION_NUMS)

mutants-gpu:
	@nvidia-smi -L >/dev/null 2>&1 || { echo "$(MUTANTS_NO_GPU_MSG)"; exit 4; }
	@$(MAKE) --no-print-directory -s $(HARNESS_C_OBJ) build/host/runner_softmax.o $(HARNESS_ALL_CU_OBJ)
	@$(MUTANTS_ENV) bash tests/mutants/run.sh gpu

mutants-apply:
	@LESSONS='$(LESSONS)' python3 tests/mutants/run.py apply

mutants-emu:
	@LESSONS='$(LESSONS)' python3 tests/mutants/run.py emu

mutants-build: $(HARNESS_C_OBJ) build/host/runner_softmax.o $(HARNESS_ALL_CU_OBJ)
	@$(MUTANTS_ENV) bash tests/mutants/run.sh build $(if $(MUTANTS_EQUIV),--equiv)

FUZZ_K ?= 500
FUZZ_SEED ?= 1
fuzz:
	@FUZZ_K=$(FUZZ_K) FUZZ_SEED=$(FUZZ_SEED) LESSONS='$(LESSONS)' bash tests/mutants/fuzz.sh

TEST_STEPS += mutants-cpu mutants-apply

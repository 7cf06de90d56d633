# mk/tools.mk: baselines, benchmarks, the site, the GPU check, mutants, and the worklogs' scripts
# (CONTRIBUTING.md, "Make targets").
.PHONY: bench bench-quick bench-plots bench-selftest bench-decode bench-decode-quick decode-plots decode-sweep \
  decode-selftest compare docs docs-texts docs-check docs-browser-check docs-fence-bodies test-docs test-docs-selftest \
  gpu-check gpu-check-selftest text-experiments mutants mutants-cpu mutants-cpu-only mutants-cli mutants-gpu \
  mutants-build mutants-apply mutants-emu fuzz fp8-scalar

# the unfused cuBLAS baselines, graded and timed by the runners like a lesson
standard: reference/gpu/standard_attention.cu $(HARNESS_CU_OBJ) $(HARNESS_C_OBJ) $(HARNESS_H)
	$(NVCC) $(NVCC_FLAGS) $(ARCH_FLAGS) $(REF_INC) $< $(HARNESS_CU_OBJ) $(HARNESS_C_OBJ) -o $@ -lcublas -lgomp
standard_backward: reference/gpu/standard_attention_bwd.cu $(HARNESS_BWD_CU_OBJ) $(HARNESS_C_OBJ) $(HARNESS_H)
	$(NVCC) $(NVCC_FLAGS) $(ARCH_FLAGS) $(REF_INC) $< $(HARNESS_BWD_CU_OBJ) $(HARNESS_C_OBJ) -o $@ -lcublas -lgomp
build/copy_bandwidth: bench/copy_bandwidth.cu $(HARNESS_H)
	@mkdir -p build
	$(NVCC) -O3 -std=c++17 $(ARCH_FLAGS) $(REF_INC) $< -o $@
# the scalar FP8 kernel the FP8 case matrix was first checked with (tests/gpu_fp8)
fp8-scalar: build/fp8scalar
build/fp8scalar: tests/gpu_fp8/scalar_fp8.cu $(HARNESS_CU_OBJ:$(BUILD)/%.o=reference/harness/%.cu) $(HARNESS_C) $(HARNESS_H)
	@mkdir -p build
	$(NVCC) -O2 -std=c++17 $(SM90A_FLAGS) -Xcompiler -fopenmp $(REF_INC) $(filter %.c %.cu,$^) -o $@ -lgomp
# a worklog's C tool, lessons/NN-*/worklog/NAME.c, linked with the C harness: build/tools/NAME
build/tools/%: $$(wildcard lessons/*/worklog/%.c) $(HARNESS_C_OBJ)
	@mkdir -p build/tools
	$(CC) $(CFLAGS) $(REF_INC) $^ -o $@ -lm
# a worklog's script, lessons/NN-*/worklog/NAME.sh: make NAME-NN ARGS='...' (ladder-09, bench-13, sweep-11)
WORKLOG_SCRIPTS := $(sort $(basename $(notdir $(wildcard lessons/*/worklog/*.sh))))
define worklog_rule
$(1)-%:
	@s=$$$$(ls lessons/$$*-*/worklog/$(1).sh 2>/dev/null); [ -n "$$$$s" ] || { echo "$$@: lesson $$* has no worklog/$(1).sh"; exit 2; }; bash $$$$s $$(ARGS)
endef
$(foreach s,$(WORKLOG_SCRIPTS),$(eval $(call worklog_rule,$(s))))

# benchmarks (GPU; bench/*.sh --help). make bench runs the decode sweep after the grid unless BENCH_DECODE=0.
BENCH_DECODE ?= 1
then_decode = if [ $$rc != 4 ] && [ "$(BENCH_DECODE)" = 1 ]; then echo "== the decode sweep: bench/decode.sh $$dargs"; \
	bash bench/decode.sh $$dargs; d=$$?; [ $$rc = 0 ] && rc=$$d; fi; exit $$rc
bench:
	@rc=0; dargs='$(BENCH_DECODE_ARGS)'; bash bench/bench.sh $(BENCH_ARGS) || rc=$$?; $(then_decode)
bench-quick:
	@rc=0; dargs='--quick $(BENCH_DECODE_ARGS)'; bash bench/bench.sh --quick $(BENCH_ARGS) || rc=$$?; $(then_decode)
bench-plots:
	@bash bench/plot.sh
bench-decode:
	@bash bench/decode.sh $(BENCH_DECODE_ARGS)
bench-decode-quick:
	@bash bench/decode.sh --quick $(BENCH_DECODE_ARGS)
decode-plots:
	@bash bench/decode.sh --plots-only
decode-sweep:
	@bash bench/decode_sweep.sh $(DECODE_SWEEP_ARGS)
compare:
	@bash bench/compare_builds.sh $(COMPARE_ARGS)
bench-selftest:
	@bash bench/selftest.sh
decode-selftest:
	@bash bench/decode_selftest.sh
TEST_STEPS += bench-selftest decode-selftest

# the site (docs/build.sh; pandoc); the checks SKIP without their tools unless DOCS_REQUIRE=1
docs:
	@bash docs/build.sh docs/site
docs-texts:
	@python3 tests/docs/check_texts.py .
docs-check:
	@bash tests/docs/check_site.sh
docs-fence-bodies:
	@python3 tests/docs/fence_bodies.py --fix lessons/*/*.md
docs-browser-check:
	@bash tests/docs/browser_check.sh
test-docs:
	@DOCS_SELFTEST=0 $(MAKE) --no-print-directory docs-check && DOCS_SITE_BUILT=1 $(MAKE) --no-print-directory docs-browser-check
test-docs-selftest:
	@if ! command -v pandoc >/dev/null || ! command -v python3 >/dev/null; then \
	  if [ "$${DOCS_REQUIRE:-0}" = 1 ]; then echo "test-docs-selftest: FAIL: pandoc or python3 not installed (DOCS_REQUIRE=1)"; exit 1; fi; \
	  echo "test-docs-selftest: SKIP: pandoc or python3 not installed (apt-get install pandoc python3)"; exit 0; fi; \
	bash tests/docs/selftest.sh
# the site's checker tested on planted faults: make test-full (it changes rarely; make test checks the site)
TEST_STEPS += test-docs
TEST_FULL_STEPS += test-docs-selftest

# the maintainer's check on a GPU (tests/gpu/gpu_check.sh), and the texts' own experiments
gpu-check:
	@MAKE='$(MAKE)' NVCC='$(NVCC)' FUZZ_K='$(FUZZ_K)' LESSONS='$(LESSONS)' GPU_CHECK_STAGES='$(GPU_CHECK_STAGES)' bash tests/gpu/gpu_check.sh
text-experiments:
	@MAKE='$(MAKE)' TEXT_EXPERIMENTS='$(TEXT_EXPERIMENTS)' bash tests/checks/text_experiments.sh
gpu-check-selftest:
	@bash tests/gpu/gpu_check_selftest.sh
TEST_STEPS += gpu-check-selftest

# planted bugs (tests/mutants/README.md) and random shapes
MUTANTS_ENV = MUTANTS_FROM_MAKE=1 CC='$(CC)' CFLAGS='$(CFLAGS)' NVCC='$(NVCC)' NVCC_FLAGS='$(NVCC_FLAGS)' \
  ARCH_FLAGS='$(ARCH_FLAGS)' ARCH_TAG='$(ARCH_TAG)' HARNESS_C_OBJ='$(HARNESS_C_OBJ)' LESSONS='$(LESSONS)' \
  HARNESS_CU_OBJ='$(HARNESS_CU_OBJ)' HARNESS_BWD_CU_OBJ='$(HARNESS_BWD_CU_OBJ)' SM90A_FLAGS='$(SM90A_FLAGS)'
MUTANTS_NO_GPU_MSG := make mutants: lessons 02+ need an NVIDIA GPU (nvidia-smi found none); \
  `make mutants-build GPU_ARCH=90` checks here that they still apply and compile
mutants:
	@$(MAKE) --no-print-directory mutants-cpu
	@if nvidia-smi -L >/dev/null 2>&1; then $(MAKE) --no-print-directory mutants-gpu; else echo "$(MUTANTS_NO_GPU_MSG)"; exit 4; fi
mutants-cpu: mutants-cpu-only mutants-cli
mutants-cpu-only: $(HARNESS_C_OBJ) build/host/runner_softmax.o
	@$(MUTANTS_ENV) bash tests/mutants/run.sh cpu
mutants-cli: $(addprefix solution,$(LESSON_NUMS))
	@bash tests/mutants/cli.sh $(LESSON_NUMS)
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

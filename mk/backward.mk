# mk/backward.mk: the backward pass: lesson 10, the standard backward, their checks.
#   make standard_backward   ./standard_backward: unfused cuBLAS backward (S, P in HBM), graded and
#                            timed by the backward runner like a lesson (reference/gpu/standard_attention_bwd.cu)
#   make solution10-dq-pass  lesson 10 with dQ in a separate pass instead of atomics (-DDQ_ATOMIC=0),
#                            for the text's comparison (also lesson10-dq-pass, and ...-dq-atomic for
#                            the default)
# In `make test`:
#   make check-10            starter (sm_90) and solution (sm_80, sm_90) of 10, both dQ strategies, compile
#                            without warnings; the solution spills nothing (ptxas -v). SKIPs without nvcc
#   make emu-10              the solution's kernels on the CPU (tests/fp32_emu, emu10.cpp): dQ, dK, dV
#                            graded against float64 with the runner's fp32 rule, guards, re-run, the
#                            causal dependency tests; both dQ strategies. EMU10_SRC=lessons/10-backward-fp32/
#                            backward_fp32.cu runs your file (STARTER_NOT_DONE set to 0)
#   make test-backward-unit  Criterion tests of the backward tolerance and diagnoses (diagnose_bwd.c)
# sanitize-solution10/lesson10 run in fp32 (the Makefile's default for lessons after 05 is fp16).
.PHONY: check-10 emu-10 test-backward-unit

standard_backward: reference/gpu/standard_attention_bwd.cu $(HARNESS_BWD_CU_OBJ) $(HARNESS_C_OBJ) $(HARNESS_H)
	$(NVCC) $(NVCC_FLAGS) $(ARCH_FLAGS) $(REF_INC) reference/gpu/standard_attention_bwd.cu $(HARNESS_BWD_CU_OBJ) \
	  $(HARNESS_C_OBJ) -o standard_backward -lcublas -lgomp

L10_VARIANTS := solution10-dq-pass lesson10-dq-pass solution10-dq-atomic lesson10-dq-atomic
l10_kind = $(if $(filter solution%,$(1)),solutions,lessons)
$(L10_VARIANTS): %: $(HARNESS_C_OBJ) $(HARNESS_BWD_CU_OBJ) FORCE_L10
	$(NVCC) $(NVCC_FLAGS) -DDQ_ATOMIC=$(if $(findstring dq-pass,$@),0,1) $(ARCH_FLAGS) $(REF_INC) \
	  $(call src_of,$(call l10_kind,$@),10) $(HARNESS_BWD_CU_OBJ) $(HARNESS_C_OBJ) -o $@ -lgomp
.PHONY: FORCE_L10
FORCE_L10:

sanitize-solution10 sanitize-lesson10: DTYPE = fp32

check-10:
	@if ! command -v $(NVCC) >/dev/null 2>&1; then echo "check-10: SKIP (no nvcc)"; exit 0; fi; \
	if [ -z "$(call src_of,solutions,10)" ]; then echo "check-10: SKIP (no solutions/10-*/)"; exit 0; fi; \
	for f in $(call src_of,lessons,10) $(call src_of,solutions,10); do \
	  archs="$$([ "$${f#solutions/}" != "$$f" ] && echo 80) 90"; \
	  for q in 1 0; do \
	    flags=$$(grep -q "^$(HASH)define DQ_ATOMIC $$q\b" $$f || echo "-- -DDQ_ATOMIC=$$q"); \
	    out=$$($(PTXAS_REPORT) $$f $$archs $$flags) || { echo "$$out"; echo "check-10: $$f does not build"; exit 1; }; \
	    if echo "$$out" | grep -qiE 'warning'; then echo "check-10: $$f DQ_ATOMIC=$$q warns:"; echo "$$out"; exit 1; fi; \
	    if [ "$${f#solutions/}" != "$$f" ] && echo "$$out" | grep -qE '[1-9][0-9]* bytes spill'; then \
	      echo "check-10: $$f DQ_ATOMIC=$$q spills:"; echo "$$out" | grep -E 'entry function|spill|registers'; exit 1; fi; \
	  done; \
	done; echo "check-10: starter (sm_90) and solution (sm_80, sm_90) of 10, dQ by atomics and by a separate pass, build without warnings; the solution spills nothing"

CXX_BWD ?= g++
EMU10_SRC ?= $(call src_of,solutions,10)
EMU10_OBJ := build/host/cpu_reference.o build/host/cpu_reference_bwd.o build/host/diagnose_bwd.o build/host/grade.o
emu-10: $(EMU10_OBJ)
	@if [ -z "$(EMU10_SRC)" ]; then echo "emu-10: SKIP (no solutions/10-*/)"; exit 0; fi; \
	mkdir -p build/emu10 && python3 tests/fp32_emu/prep.py $(EMU10_SRC) build/emu10/kernel.cpp && \
	$(CXX_BWD) -O2 -std=c++20 -Wall -Wno-unknown-pragmas -Itests/fp32_emu $(REF_INC) -include emu_bwd_runtime.h \
	  -c tests/fp32_emu/emu10.cpp -o build/emu10/emu10.o || exit 1; \
	for q in 1 0; do \
	  $(CXX_BWD) -O2 -std=c++20 -Wall -Wno-unknown-pragmas -DDQ_ATOMIC=$$q -Itests/fp32_emu $(REF_INC) \
	    -include emu_bwd_runtime.h -x c++ build/emu10/kernel.cpp -x none build/emu10/emu10.o $(EMU10_OBJ) \
	    -o build/emu10/emu10-$$q -fopenmp -lpthread -lm || exit 1; \
	  timeout 600 ./build/emu10/emu10-$$q $$([ $$q = 0 ] && echo 6) || exit 1; \
	done

TEST_BWD_SRC := tests/unit/test_backward.c
tests/bin/unit_backward: $(TEST_BWD_SRC) $(HARNESS_C_OBJ) $(HARNESS_H)
	@mkdir -p tests/bin
	$(CC) $(CFLAGS) $(REF_INC) $(filter %.c %.o,$^) -o $@ -lcriterion -lm
test-backward-unit: tests/bin/unit_backward
	tests/bin/unit_backward --jobs 2

TEST_STEPS += check-10 emu-10 test-backward-unit

# ---- the backward runner itself on the CPU (tests/hostsim; no GPU) ----
#   make hostsim-10            reference/harness/runner_backward.cu compiled with g++ over a fake CUDA runtime,
#                              lesson 10's kernels through the fp32 emulator: a few small shapes must
#                              pass, and the plain same-precision backward (tests/hostsim/lowp_lesson.cpp)
#                              in fp16 and bf16 (in `make test`); HOSTSIM_SRC=lessons/10-backward-fp32/backward_fp32.cu
#                              grades your file instead
#   make hostsim-mutants-10    every tests/mutants/10/*.mut through it: each must fail with its diagnosis
#                              (a few minutes; HOSTSIM_MUTANTS="d-missing dk-dv-swapped" picks some)
HOSTSIM_CXX = $(CXX_BWD) -O2 -std=c++17 -fopenmp -w -I$(CUDA_INC) $(REF_INC)
HOSTSIM_OBJ := build/hostsim/runner_backward.o build/hostsim/runner_main.o build/hostsim/runner_grade.o \
               build/hostsim/runner_common.o build/hostsim/runner_buffers.o build/hostsim/fake_device.o $(HARNESS_C_OBJ)
build/hostsim/%.o: %.cu $(HARNESS_H)
	@mkdir -p build/hostsim
	$(HOSTSIM_CXX) -x c++ -c $< -o $@
build/hostsim/fake_device.o: tests/hostsim/fake_device.cpp $(HARNESS_H)
	@mkdir -p build/hostsim
	$(HOSTSIM_CXX) -c $< -o $@
.PHONY: hostsim-10 hostsim-mutants-10
# The objects are prerequisites (not a sub-make): make test runs steps two at a time, and two
# sub-makes would build the same object at once. Without the CUDA headers the targets SKIP.
HOSTSIM_HAVE_CUDA := $(wildcard $(CUDA_INC)/cuda_runtime_api.h)
hostsim-10: $(if $(HOSTSIM_HAVE_CUDA),$(HOSTSIM_OBJ))
	@if [ ! -f $(CUDA_INC)/cuda_runtime_api.h ]; then echo "hostsim-10: SKIP (no CUDA headers)"; exit 0; fi; \
	if [ -z "$(call src_of,solutions,10)" ]; then echo "hostsim-10: SKIP (no solutions/10-*/)"; exit 0; fi; \
	HOSTSIM_OBJ='$(HOSTSIM_OBJ)' CXX_BWD='$(CXX_BWD)' CUDA_INC='$(CUDA_INC)' python3 tests/hostsim/run.py solution $(HOSTSIM_SRC)
hostsim-mutants-10: $(HOSTSIM_OBJ)
	@HOSTSIM_OBJ='$(HOSTSIM_OBJ)' CXX_BWD='$(CXX_BWD)' python3 tests/hostsim/run.py mutants $(HOSTSIM_MUTANTS)

TEST_STEPS += hostsim-10
TEST_FULL_STEPS += hostsim-mutants-10

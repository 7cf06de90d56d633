# mk/03-05-fp32.mk: the fp32 lessons 03-05 (shared-memory tiling, registers, causal).
#   make check-03-05   starters and solutions of 03, 04, 05 compile for sm_75 and sm_90
#                      (nvcc, ptxas -v); no solution spills; the -DRUNTIME_INDEX build of
#                      solution 04 does get a stack frame (the lesson's claim). SKIPs without nvcc
#   make emu-03-05     the three solutions run on the CPU through an emulated CUDA
#                      (tests/fp32_emu over the emulator core tests/emu/core.h: a fiber per
#                      CUDA thread, barriers and shuffles) and graded on small shapes against reference/cpu/cpu_reference.c.
#                      EMU_SRC=lessons/04-register-outputs/registers.cu runs your file instead
#                      (with STARTER_NOT_DONE set to 0)
# Lesson 04's register experiments, the `make ptxas-lesson4` report with one extra flag:
#   make ptxas-lesson4-runtime-index   -DRUNTIME_INDEX: O's rescale loop gets a run-time bound
#   make ptxas-lesson4-4blocks         -DMIN_BLOCKS_D64=4: at most 128 registers per thread (d = 64)
#   make lesson4-runtime-index, make lesson4-4blocks   the same builds as binaries, to time them
#   (each also as ...solution4...)
.PHONY: check-03-05 emu-03-05

FP32_LESSONS := 03-shared-memory-tiling/tiled.cu 04-register-outputs/registers.cu 05-causal/causal.cu
CXX_0305 ?= g++
EMU_SRC ?=

check-03-05:
	@if ! command -v $(NVCC) >/dev/null 2>&1; then echo "check-03-05: SKIP (no nvcc)"; exit 0; fi; \
	for f in $(addprefix lessons/,$(FP32_LESSONS)) $(addprefix solutions/,$(FP32_LESSONS)); do \
	  out=$$($(PTXAS_REPORT) $$f 75 90) || { echo "$$out"; exit 1; }; \
	  if echo "$$out" | grep -qiE 'warning'; then echo "check-03-05: $$f (sm_75, sm_90) warns:"; echo "$$out"; exit 1; fi; \
	  if echo "$$out" | grep -qE '[1-9][0-9]* bytes spill'; then \
	    echo "check-03-05: $$f spills:"; echo "$$out" | grep -E 'entry function|spill|registers'; exit 1; fi; \
	done; \
	out=$$($(NVCC) -O3 -std=c++17 -DRUNTIME_INDEX -gencode arch=compute_90,code=sm_90 $(REF_INC) \
	       -Xptxas -v -c solutions/04-register-outputs/registers.cu -o /dev/null 2>&1); \
	if ! echo "$$out" | grep -qE '[1-9][0-9]* bytes stack frame'; then \
	  echo "check-03-05: -DRUNTIME_INDEX no longer puts o[][] in local memory; lesson 04's text is wrong:"; \
	  echo "$$out"; exit 1; fi; \
	echo "check-03-05: lessons 03-05 (starters, solutions) build for sm_75 and sm_90 without warnings or spills"

# The emulator's driver (emu_fp32.cpp) is one object, compiled once for the three kernels.
EMU0305_CXXFLAGS = -O2 -std=c++20 -Wall -Wno-unknown-pragmas -Itests/fp32_emu $(REF_INC)
build/emu0305/emu_fp32.o: tests/fp32_emu/emu_fp32.cpp $(wildcard tests/fp32_emu/*.h) $(HARNESS_H)
	@mkdir -p build/emu0305
	$(CXX_0305) $(EMU0305_CXXFLAGS) -c $< -o $@
emu-03-05: build/host/cpu_reference.o build/emu0305/emu_fp32.o
	@mkdir -p build/emu0305; \
	for f in $(if $(EMU_SRC),$(EMU_SRC),$(addprefix solutions/,$(FP32_LESSONS))); do \
	  n=$$(basename $$(dirname $$f) | cut -c1-2); \
	  python3 tests/fp32_emu/prep.py $$f build/emu0305/kernel$$n.cpp && \
	  $(CXX_0305) $(EMU0305_CXXFLAGS) -x c++ build/emu0305/kernel$$n.cpp \
	    -x none build/emu0305/emu_fp32.o build/host/cpu_reference.o -o build/emu0305/emu$$n -lpthread -lm && \
	  timeout 600 ./build/emu0305/emu$$n || exit 1; \
	done

# ---- lesson 04's experiments ----
R4_VARIANTS := runtime-index 4blocks
R4_FLAGS_runtime-index := -DRUNTIME_INDEX
R4_FLAGS_4blocks := -DMIN_BLOCKS_D64=4
R4_PTXAS := $(foreach k,lesson solution,$(foreach v,$(R4_VARIANTS),ptxas-$(k)4-$(v)))
R4_BINS := $(foreach k,lesson solution,$(foreach v,$(R4_VARIANTS),$(k)4-$(v)))
r4_kind = $(firstword $(subst 4-, ,$(1)))
r4_variant = $(patsubst $(call r4_kind,$(1))4-%,%,$(1))
.PHONY: $(R4_PTXAS)

$(R4_PTXAS): ptxas-%:
	@$(MAKE) --no-print-directory ptxas-$(call r4_kind,$*)4 \
	  NVCC_FLAGS='$(NVCC_FLAGS) $(R4_FLAGS_$(call r4_variant,$*))'

$(R4_BINS): %: $(HARNESS_C_OBJ) $(HARNESS_CU_OBJ) FORCE_R4
	$(NVCC) $(NVCC_FLAGS) $(R4_FLAGS_$(call r4_variant,$@)) $(ARCH_FLAGS) $(REF_INC) \
	  $(call src_of,$(call r4_kind,$@)s,4) $(HARNESS_CU_OBJ) $(HARNESS_C_OBJ) -o $@ -lgomp
.PHONY: FORCE_R4
FORCE_R4:

TEST_STEPS += check-03-05 emu-03-05

# mk/advanced.mk: lessons 07-08 (mma.sync + ldmatrix, cp.async pipeline). In `make test`:
#   make check-07-08  starters and solutions of 07 and 08 compile for sm_75 and sm_90, and
#                     the solutions' kernels do not spill (ptxas -v; a starter's unfinished
#                     kernel is not held to that); SKIPs without nvcc
#   make emu-07 / emu-08   the kernel on the CPU warp emulator (tests/warp_emu): ldmatrix,
#                     mma.m16n8k16 and cp.async emulated from the PTX ISA's definitions,
#                     one fiber per CUDA thread (tests/emu/core.h); checks O and L against float64 for
#                     ragged N, causal, x30 logits, fp16 and bf16, counts ldmatrix bank
#                     conflicts, and runs 08 twice (cp.async landing at issue, and at the
#                     wait that retires it, the threads then scheduled in reverse order; in the
#                     quick set this second run takes N = 250, the most tiles in flight, and
#                     make test-full's emu-full-08 every case); in both runs, shadow state per 16-byte chunk
#                     reports any cp.async hazard (ldmatrix of a chunk before the retiring
#                     wait_group + __syncthreads, a refill of a chunk another warp read since
#                     the last __syncthreads), whatever the threads' interleaving.
#                     EMU07_SRC=lessons/07-mma-ldmatrix/mma.cu (or
#                     EMU08_SRC=...) runs your kernel instead. EMU_QUICK=0: more shapes.
#                     The build defines FA_EMULATOR: the lesson file's own PTX wrappers drop
#                     out (#ifndef FA_EMULATOR) for the emulator's, tests/warp_emu/ptx_mma.h
#                     and ptx_cp_async.h (first on the include path); the file is compiled
#                     whole, its launch rewritten (tests/emu/prep.py), host code unused.
# Not in `make test`:
#   make solution7-no-swizzle, make solution8-no-lpt   (and any lessons/0N-*/worklog/variants/X.patch:
#                     make solutionN-X) the solution with one experiment of the lesson's
#                     worklog patched in, as ./solutionN-X; the patched source stays in
#                     build/variants/solutionN-X.cu. check-07-08 checks that every patch
#                     applies and compiles.
#   make sweep8-variant SWEEP8_DEFS="-DFA64_BR=..." SWEEP8_OUT=build/sweep8/x
#                     one build of solution 8 with another tile configuration, ptxas -v in
#                     $(SWEEP8_OUT).ptxas (lessons/08-async-pipeline/worklog/sweep.sh runs these)

.PHONY: check-07-08 emu-07 emu-08 sweep8-variant

# The worklogs' experiments, one patch each against the solution (lessons/0N-*/worklog/variants/).
VARIANT_PATCHES_07_08 := $(wildcard lessons/07-*/worklog/variants/*.patch lessons/08-*/worklog/variants/*.patch)
# $(call variant_src,N,NAME): patch solution N with lesson N's variants/NAME.patch into
# build/variants/solutionN-NAME.cu (a shell fragment that fails when the patch does not apply)
variant_src = mkdir -p build/variants && \
	patch -s -o build/variants/solution$(1)-$(2).cu $(call src_of,solutions,$(1)) \
	  $(dir $(call src_of,lessons,$(1)))worklog/variants/$(2).patch >/dev/null \
	  || { echo "$(dir $(call src_of,lessons,$(1)))worklog/variants/$(2).patch no longer applies to $(call src_of,solutions,$(1))"; exit 1; }
define build_variant
	@$(call variant_src,$(1),$(2))
	$(NVCC) $(NVCC_FLAGS) $(ARCH_FLAGS) $(REF_INC) build/variants/solution$(1)-$(2).cu \
	  $(HARNESS_CU_OBJ) $(HARNESS_C_OBJ) -o solution$(1)-$(2) -lgomp
endef
solution7-%: lessons/07-mma-ldmatrix/worklog/variants/%.patch $(call src_of,solutions,7) $(ARCH_STAMP) $(HARNESS_C_OBJ) $(HARNESS_CU_OBJ)
	$(call build_variant,7,$*)
solution8-%: lessons/08-async-pipeline/worklog/variants/%.patch $(call src_of,solutions,8) $(ARCH_STAMP) $(HARNESS_C_OBJ) $(HARNESS_CU_OBJ)
	$(call build_variant,8,$*)

# Lesson 08's measured d=64 choice (128x128 tiles, Q re-read from shared memory) spills
# 16 bytes and is still 10% faster than the best spill-free tile on the H200 (sweep in the
# lesson text); anything more is a regression.
SPILL_BUDGET := 16
check-07-08:
	@if ! command -v $(NVCC) >/dev/null 2>&1; then echo "check-07-08: SKIP (no nvcc)"; exit 0; fi; \
	for f in $(call src_of,lessons,7) $(call src_of,solutions,7) $(call src_of,lessons,8) $(call src_of,solutions,8); do \
	  out=$$($(PTXAS_REPORT) $$f 75 90) || { echo "$$out"; exit 1; }; \
	  worst=$$(echo "$$out" | sed -nE 's/.* ([0-9]+) bytes spill stores.*/\1/p' | sort -n | tail -n1); \
	  if [ "$${f#solutions/}" != "$$f" ] && [ "$${worst:-0}" -gt $(SPILL_BUDGET) ]; then \
	    echo "check-07-08: $$f spills $$worst bytes (budget $(SPILL_BUDGET)):"; echo "$$out" | grep -E 'entry function|spill|registers'; exit 1; fi; \
	done; \
	for p in $(VARIANT_PATCHES_07_08); do \
	  n=$$(echo "$$p" | sed -E 's@lessons/0?([0-9]+)-.*@\1@'); v=$$(basename "$$p" .patch); \
	  case $$n in 7) $(call variant_src,7,$$v) ;; 8) $(call variant_src,8,$$v) ;; esac; \
	  [ "$(VARIANT_BUILDS)" = 0 ] && continue; \
	  out=$$($(NVCC) -O3 -std=c++17 -gencode arch=compute_90,code=sm_90 $(REF_INC) \
	         -c build/variants/solution$$n-$$v.cu -o /dev/null 2>&1) || { echo "$$out"; echo "check-07-08: variant $$p does not build"; exit 1; }; \
	done; \
	echo "check-07-08: starters and solutions build for sm_75 and sm_90, solutions spill at most $(SPILL_BUDGET) bytes; $(words $(VARIANT_PATCHES_07_08)) worklog variants apply$(if $(filter 0,$(VARIANT_BUILDS)), (their builds: make test-full), and build)"

EMU07_SRC ?= $(call src_of,solutions,7)
EMU08_SRC ?= $(call src_of,solutions,8)
EMU_QUICK ?= 1
EMU_CXX ?= g++
EMU_CUDA_INC := $(CUDA_INC)
# Each invocation builds into its own directory (removed when the recipe ends): a shared
# build/emu/emu8 let a concurrent `make emu-08 EMU08_SRC=<mutant>` replace the binary between
# another run's default and late passes, which then graded the mutant.
EMU_BUILD = if [ ! -f $(EMU_CUDA_INC)/cuda_fp16.h ]; then echo "$@: SKIP (no CUDA headers)"; exit 0; fi; \
	mkdir -p build/emu && emu=$$(mktemp -d "$(CURDIR)/build/emu/$@.XXXXXX") && trap 'rm -rf "$$emu"' EXIT && \
	python3 tests/emu/prep.py $(1) > "$$emu/kernel.cu" && \
	$(EMU_CXX) -std=c++20 -O1 -w -DFA_EMULATOR -I$(EMU_CUDA_INC) -Itests/warp_emu $(REF_INC) \
	  -DEMU_SRC="\"$$emu/kernel.cu\"" -DEMU_NAME='"$(1)"' -x c++ tests/warp_emu/emu$(2).cpp \
	  -o "$$emu/emu$(2)" -lpthread
EMU_ARG = $(if $(filter 1,$(EMU_QUICK)),quick,)

emu-07:
	@$(call EMU_BUILD,$(EMU07_SRC),7) && "$$emu/emu7" $(EMU_ARG)
emu-08:
	@$(call EMU_BUILD,$(EMU08_SRC),8) && "$$emu/emu8" $(EMU_ARG) && \
	  EMU_CPASYNC=late EMU_SCHED=reverse "$$emu/emu8" $(EMU_ARG)

TEST_STEPS += check-07-08 emu-07 emu-08
TEST_FULL_STEPS += emu-full-07 emu-full-08

SWEEP8_SRC ?= $(call src_of,solutions,8)
SWEEP8_DEFS ?=
SWEEP8_OUT ?= build/sweep8/solution8
sweep8-variant: $(HARNESS_C_OBJ) $(HARNESS_CU_OBJ)
	@mkdir -p $(dir $(SWEEP8_OUT))
	$(NVCC) $(NVCC_FLAGS) $(ARCH_FLAGS) $(SWEEP8_DEFS) -Xptxas -v $(REF_INC) $(SWEEP8_SRC) \
	  $(HARNESS_CU_OBJ) $(HARNESS_C_OBJ) -o $(SWEEP8_OUT) -lgomp 2> $(SWEEP8_OUT).ptxas \
	  || { cat $(SWEEP8_OUT).ptxas; exit 1; }

# mk/backward-mma.mk: lesson 11 (the backward pass on tensor cores). In `make test`:
#   make check-11   starter and solution of 11 compile for sm_75 (empty kernels), sm_80 and
#                   sm_90 without warnings, and the solution's kernels spill at most 24 bytes
#                   (ptxas -v; SPILL_BUDGET_11_SM80, SPILL_BUDGET_11_SM90; the starter's
#                   unfinished kernels are not held to that); the options variant (below)
#                   still applies to the solution and compiles for sm_90; SKIPs without nvcc
#   make emu-11     the three backward kernels on the CPU warp emulator (tests/warp_emu,
#                   emu11.cpp and the stand-ins of ptx_mma.h, ptx_cp_async.h, ptx_memory.h):
#                   dQ, dK, dV graded against float64 with the FlashAttention rule (2 x the
#                   plain same-precision backward's error + atol) for N = 1, 77, 130, causal
#                   and not, x30 logits, fp16 and bf16, d = 64 and 128; bank conflicts of
#                   ldmatrix and st.shared, cp.async and shared-store hazards, writes outside
#                   any buffer; run twice (cp.async landing at issue, and at the wait that
#                   retires it: N = 130 alone in the quick set). The solution's two configurations (EMU_QUICK=0, in make
#                   test-full: more shapes, then the options variant's other tiles and options,
#                   eleven, several minutes).
#                   EMU11_SRC=lessons/11-backward-tensor-cores/backward.cu runs your kernel
#                   (its two configurations only).
#   make hostsim-11 the real backward runner on the CPU over lesson 11's emulated kernels (below)
# Not in `make test`:
#   make variant11  writes the options variant, build/variants11/backward_options.cu: the
#                   solution with lessons/11-backward-tensor-cores/worklog/variants/options.patch,
#                   every tile shape and step option the lesson's worklog measured, as macros
#                   (FB64_*, FB128_*; defaults: the solution's kernels). To change the variant,
#                   edit that file and run `make variant11-patch`, which rewrites the patch.
#   make emu-11-variant EMU11_DEFS="-DFB64_PFIRST=1 ..."  the variant's two configurations,
#                   with those macros, on the emulator (what make sweep-11 times)
#   make sweep-11   (GPU) builds the variant once per configuration and times each on a few
#                   grid shapes, with PyTorch's SDPA backward (flash, cuDNN) timed beside them
#                   (lessons/11-backward-tensor-cores/worklog/sweep.sh; SWEEP11_ARGS="--quick" etc.)
#   make sweep11-variant SWEEP11_DEFS="-DFB64_BR=..." SWEEP11_OUT=build/sweep11/x
#                   one build of the variant with those macros, ptxas -v beside it
#                   (SWEEP11_SRC=file builds another source the same way)
.PHONY: check-11 emu-11 emu-11-variant variant11 variant11-patch sweep-11 sweep11-variant

VARIANT11 := build/variants11/backward_options.cu
VARIANT11_PATCH := lessons/11-backward-tensor-cores/worklog/variants/options.patch
# The patch must apply exactly (no fuzz): a solution edit that moves its context fails here
# (make check-11), and the patch is then brought up to date with make variant11-patch.
$(VARIANT11): $(call src_of,solutions,11) $(VARIANT11_PATCH)
	@mkdir -p $(dir $@)
	@patch --quiet --force --fuzz=0 --reject-file=- --no-backup-if-mismatch -o $@.tmp \
	  $(call src_of,solutions,11) $(VARIANT11_PATCH) >/dev/null \
	  || { rm -f $@.tmp; echo "variant11: $(VARIANT11_PATCH) no longer applies to $(call src_of,solutions,11)"; exit 1; }
	@mv $@.tmp $@
variant11: $(VARIANT11)
	@echo "variant11: $(VARIANT11)"
variant11-patch:
	@test -f $(VARIANT11) || { echo "variant11-patch: no $(VARIANT11) (make variant11, then edit it)"; exit 1; }
	@diff -u --label a/$(call src_of,solutions,11) --label b/$(call src_of,solutions,11) \
	  $(call src_of,solutions,11) $(VARIANT11) > $(VARIANT11_PATCH); test $$? -le 1 && touch $(VARIANT11) && \
	  echo "variant11-patch: $(VARIANT11_PATCH) rewritten ($$(wc -l < $(VARIANT11_PATCH)) lines)"

# The kernels use all 255 registers. The defaults spill nothing with nvcc 13.0 (sm_80 and
# sm_90); option sets of make sweep-11 spill 4-28 bytes on sm_90 and were timed all the same
# (lessons/11-backward-tensor-cores/worklog/README.md). More than 24 in the defaults is a regression.
SPILL_BUDGET_11_SM80 := 24
SPILL_BUDGET_11_SM90 := 24
check-11: $(if $(shell command -v $(NVCC) 2>/dev/null),$(VARIANT11))
	@if ! command -v $(NVCC) >/dev/null 2>&1; then echo "check-11: SKIP (no nvcc)"; exit 0; fi; \
	if [ -z "$(call src_of,solutions,11)" ]; then echo "check-11: SKIP (no solutions/11-*/)"; exit 0; fi; \
	for f in $(call src_of,lessons,11) $(call src_of,solutions,11); do \
	  all=$$($(PTXAS_REPORT) $$f 75 80 90) || { echo "$$all"; echo "check-11: $$f does not build for sm_75, sm_80, sm_90"; exit 1; }; \
	  for a in 75 80 90; do \
	    out=$$(echo "$$all" | awk -v a="sm_$$a" '/Compiling entry function/ {on = index($$0, "for '"'"'" a "'"'"'") > 0} on || /warning/'); \
	    if echo "$$out" | grep -qiE 'warning'; then echo "check-11: $$f sm_$$a warns:"; echo "$$out" | grep -iA3 warning; exit 1; fi; \
	    worst=$$(echo "$$out" | sed -nE 's/.* ([0-9]+) bytes spill stores.*/\1/p' | sort -n | tail -n1); \
	    budget=$$(case $$a in 80) echo $(SPILL_BUDGET_11_SM80);; 90) echo $(SPILL_BUDGET_11_SM90);; *) echo 0;; esac); \
	    if [ "$${f#solutions/}" != "$$f" ] && [ "$${worst:-0}" -gt $$budget ]; then \
	      echo "check-11: $$f sm_$$a spills $$worst bytes (budget $$budget):"; echo "$$out" | grep -E 'spill|registers'; exit 1; fi; \
	  done; \
	done; \
	if [ "$(VARIANT_BUILDS)" != 0 ]; then \
	  out=$$($(NVCC) -O3 -std=c++17 -Xcompiler -Wall -gencode arch=compute_90,code=sm_90 $(REF_INC) \
	         -c $(VARIANT11) -o /dev/null 2>&1) || { echo "$$out"; echo "check-11: the options variant does not build"; exit 1; }; \
	fi; \
	echo "check-11: starter and solution build for sm_75, sm_80 and sm_90 without warnings; the solution spills at most $(SPILL_BUDGET_11_SM90) bytes on sm_90, $(SPILL_BUDGET_11_SM80) on sm_80; the options variant applies$(if $(filter 0,$(VARIANT_BUILDS)), (its build: make test-full), and builds)"

EMU11_SRC ?= $(call src_of,solutions,11)
# Own build directory per invocation (see EMU_BUILD in advanced.mk); the float64 and
# same-precision CPU references are compiled in as C. The source is compiled whole
# (tests/emu/prep.py only rewrites its <<<...>>> launches): its PTX wrappers come from the
# emulator's stand-in headers, first on the include path. $(1): the source, $(2): -D flags.
EMU11_BUILD = if [ ! -f $(EMU_CUDA_INC)/cuda_fp16.h ]; then echo "$@: SKIP (no CUDA headers)"; exit 0; fi; \
	mkdir -p build/emu && emu=$$(mktemp -d "$(CURDIR)/build/emu/$@.XXXXXX") && trap 'rm -rf "$$emu"' EXIT && \
	python3 tests/emu/prep.py $(1) > "$$emu/kernel.cu" && \
	$(CC) -O2 -std=c11 $(REF_INC) -c reference/cpu/cpu_reference.c -o "$$emu/ref.o" && \
	$(CC) -O2 -std=c11 $(REF_INC) -c reference/cpu/cpu_reference_bwd.c -o "$$emu/ref_bwd.o" && \
	$(EMU_CXX) -std=c++20 -O1 -w -I$(EMU_CUDA_INC) -Itests/warp_emu $(REF_INC) $(2) \
	  -DEMU_SRC="\"$$emu/kernel.cu\"" -DEMU_NAME='"$(1)$(if $(2), $(2))"' -x c++ tests/warp_emu/emu11.cpp \
	  -x none "$$emu/ref.o" "$$emu/ref_bwd.o" -o "$$emu/emu11" -lpthread -lm

# The variant's other configurations run when emu-11 runs the solution with EMU_QUICK=0 (make
# test-full), not in make test nor for EMU11_SRC=your file.
EMU11_OTHERS := $(if $(filter $(EMU11_SRC),$(call src_of,solutions,11)),$(if $(filter 1,$(EMU_QUICK)),,1))
emu-11: $(if $(EMU11_OTHERS),$(VARIANT11))
	@$(call EMU11_BUILD,$(EMU11_SRC),) && EMU11_DEFAULTS_ONLY=1 "$$emu/emu11" $(EMU_ARG) && \
	  EMU11_DEFAULTS_ONLY=1 EMU_CPASYNC=late EMU_SCHED=reverse "$$emu/emu11" $(EMU_ARG)
	@if [ -n "$(EMU11_OTHERS)" ]; then $(MAKE) --no-print-directory emu-11-variant-others; fi
.PHONY: emu-11-variant-others
emu-11-variant-others: $(VARIANT11)
	@$(call EMU11_BUILD,$(VARIANT11),) && EMU11_OTHERS_ONLY=1 "$$emu/emu11" $(EMU_ARG) && \
	  EMU11_OTHERS_ONLY=1 EMU_CPASYNC=late EMU_SCHED=reverse "$$emu/emu11" $(EMU_ARG)
emu-11-variant: $(VARIANT11)
	@$(call EMU11_BUILD,$(VARIANT11),$(EMU11_DEFS)) && EMU11_DEFAULTS_ONLY=1 "$$emu/emu11" $(EMU_ARG) && \
	  EMU11_DEFAULTS_ONLY=1 EMU_CPASYNC=late EMU_SCHED=reverse "$$emu/emu11" $(EMU_ARG)

TEST_STEPS += check-11 emu-11
TEST_FULL_STEPS += emu-full-11

SWEEP11_SRC ?= $(VARIANT11)
SWEEP11_DEFS ?=
SWEEP11_OUT ?= build/sweep11/solution11
sweep11-variant: $(HARNESS_C_OBJ) $(HARNESS_BWD_CU_OBJ) $(if $(filter $(VARIANT11),$(SWEEP11_SRC)),$(VARIANT11))
	@mkdir -p $(dir $(SWEEP11_OUT))
	$(NVCC) $(NVCC_FLAGS) $(ARCH_FLAGS) $(SWEEP11_DEFS) -Xptxas -v $(REF_INC) $(SWEEP11_SRC) \
	  $(HARNESS_BWD_CU_OBJ) $(HARNESS_C_OBJ) -o $(SWEEP11_OUT) -lgomp 2> $(SWEEP11_OUT).ptxas \
	  || { cat $(SWEEP11_OUT).ptxas; exit 1; }

sweep-11:
	@bash lessons/11-backward-tensor-cores/worklog/sweep.sh $(SWEEP11_ARGS)

# ---- lesson 11 through the real backward runner, on the CPU (no GPU) ----
#   make hostsim-11           reference/harness/runner_backward.cu over tests/hostsim's fake CUDA runtime
#                             (objects from mk/backward.mk), with lesson 11's source, host code
#                             included, on the warp emulator: attention_backward, its workspace and
#                             launches, and the runner's grading, re-run and causal tests, on a few
#                             small shapes (tests/warp_emu/hostsim11.py). HOSTSIM11_SRC=your file.
#   make hostsim-mutants-11   every tests/mutants/11/*.mut through it: each must fail with its
#                             expect: diagnosis (several minutes; HOSTSIM_MUTANTS="d-missing ..." picks)
.PHONY: hostsim-11 hostsim-mutants-11
HOSTSIM11_ENV = HOSTSIM_OBJ='$(HOSTSIM_OBJ)' CXX_BWD='$(CXX_BWD)' NVCC='$(NVCC)'
hostsim-11: $$(if $$(HOSTSIM_HAVE_CUDA),$$(HOSTSIM_OBJ))
	@if [ ! -f $(EMU_CUDA_INC)/cuda_runtime_api.h ]; then echo "hostsim-11: SKIP (no CUDA headers)"; exit 0; fi; \
	if [ -z "$(call src_of,solutions,11)" ]; then echo "hostsim-11: SKIP (no solutions/11-*/)"; exit 0; fi; \
	$(HOSTSIM11_ENV) python3 tests/warp_emu/hostsim11.py solution $(HOSTSIM11_SRC)
hostsim-mutants-11: $$(HOSTSIM_OBJ)
	@$(HOSTSIM11_ENV) python3 tests/warp_emu/hostsim11.py mutants $(HOSTSIM_MUTANTS)

TEST_STEPS += hostsim-11
TEST_FULL_STEPS += hostsim-mutants-11

# mk/14-fp8.mk: lesson 14 (FP8 attention on Hopper: e4m3 wgmma, block scales, incoherent
# processing). Its source carries `// build: sm_90a` (make solution14 / lesson14 build it for sm_90a
# through the Makefile's own rule). The harness's FP8 inputs: --dtype e4m3 (reference/cpu/fp8.c,
# tests/unit/test_fp8.c, make hostsim-forward's FP8 stand-in); the wrappers: reference/include/ptx_hopper_fp8.h.
# In `make test` (no GPU needed):
#   make check-14     reference/include/ptx_hopper_fp8.h compiles for sm_90a with every wrapper
#                     instantiated (tests/gpu_fp8/header_check.cu); the starter and the solution
#                     compile for sm_90a with no ptxas warning (C7519 included), the solution with no
#                     spill and 168 registers per thread in its main kernel (24 + 2 x 240 = 3 x 168);
#                     the header is made from the solution's wrappers (make starters); the same build
#                     checks for the solution with each variant (lessons/14-fp8-attention/worklog/variants/,
#                     applied by its variant.sh: transpose-in-kernel, V^T made inside the kernel;
#                     persistent, at most one block per SM taking several work items; wide, key tiles
#                     of 224 keys).
#                     SKIPs without nvcc
#   make emu-14       the solution on the CPU Hopper emulator (tests/hopper_emu: wgmma_e4m3.h, the e4m3
#                     wgmma; emu_host14.h; grade14.py) graded by the real runner: block and per-tensor
#                     scales, --hadamard, --outliers, causal, ragged N; each case twice (operands and
#                     copies at once, then as late as the rules allow; the quick set's late run: its
#                     two cases with several key tiles). EMU14_SRC=... another file;
#                     EMU14_VARIANTS="transpose-in-kernel" with variants; EMU_QUICK=0 more shapes
#   make emu-lesson14 / emu-solution14   the student's CPU path: your file (or the solution) the same way;
#                     the starter as shipped says "not implemented" (exit 3)
#   make quant-error-14   (CPU) where FP8 attention's error comes from on the outlier inputs
# On a Hopper GPU (H100/H200):
#   make solution14-VARIANT   ./solution14-VARIANT: the solution with variants/VARIANT.var applied
#   make fp8-scalar   ./build/fp8scalar: the forward runner with a one-thread-per-row FP8 kernel on
#                     CUDA cores (tests/gpu_fp8/scalar_fp8.cu): the harness's FP8 path on a real
#                     GPU (codes, descale arrays, bf16 O), e.g.
#                     ./build/fp8scalar --check-only --seed 1   (the case matrix, 14 cases)
.PHONY: check-14 fp8-scalar emu-14 emu-lesson14 emu-solution14

SOL14_SRC := $(call src_of,solutions,14)
LES14_SRC := $(call src_of,lessons,14)
check-14:
	@if ! command -v $(NVCC) >/dev/null 2>&1; then echo "check-14: SKIP (no nvcc)"; exit 0; fi; \
	mkdir -p build && $(NVCC) $(SM90A_FLAGS) $(REF_INC) -Xptxas -v -cubin tests/gpu_fp8/header_check.cu \
	  -o build/fp8_header_check.cubin 2>build/fp8_header_check.log || { cat build/fp8_header_check.log; exit 1; }; \
	if grep -q "warning" build/fp8_header_check.log; then cat build/fp8_header_check.log; exit 1; fi; \
	echo "check-14: reference/include/ptx_hopper_fp8.h compiles for sm_90a (e4m3 wgmma ss and rs, N = 64 and 128; cvt e4m3x2)"; \
	compile() { $(PTXAS_REPORT) "$$1" 90a; }; \
	for f in $(LES14_SRC); do \
	  out=$$(compile $$f) || { echo "$$out"; echo "check-14: the starter $$f does not compile"; exit 1; }; \
	  if echo "$$out" | grep -qiE 'warning|C7519'; then echo "check-14: the starter $$f: ptxas warns:"; echo "$$out" | grep -iE -A2 'warning|C7519'; exit 1; fi; \
	done; \
	if [ -n "$(SOL14_SRC)" ]; then \
	  out=$$(compile $(SOL14_SRC)) || { echo "$$out"; echo "check-14: $(SOL14_SRC) does not compile"; exit 1; }; \
	  if echo "$$out" | grep -qiE 'warning|C7519'; then \
	    echo "check-14: the solution: ptxas warns (or injects a warpgroup.arrive):"; echo "$$out" | grep -iE -A2 'warning|C7519'; exit 1; fi; \
	  if echo "$$out" | grep -qE '[1-9][0-9]* bytes (spill|stack)'; then \
	    echo "check-14: the solution spills:"; echo "$$out" | grep -E 'spill|stack|registers'; exit 1; fi; \
	  regs=$$(echo "$$out" | awk '/Compiling entry function .*fp8_forward_kernel/ {on = 1} on && /Used [0-9]+ registers/ {sub(/.*Used /, ""); print $$1; on = 0}' | sort -n | uniq | tr '\n' ' '); \
	  if [ "$$regs" != "168 " ]; then echo "check-14: the main kernel uses $$regs registers per thread; setmaxnreg's split needs 168"; exit 1; fi; \
	  echo "check-14: the solution and the starter build for sm_90a: main kernel 168 registers, no spill, no warning"; \
	  mkdir -p build/check14; \
	  for v in $(VARIANT14_NAMES); do \
	    bash $(VARIANT14_SH) $(SOL14_SRC) build/check14/$$v.cu $$v || { echo "check-14: variants/$$v.var does not apply"; exit 1; }; \
	    if [ "$(VARIANT_BUILDS)" = 0 ]; then echo "check-14: solution + $$v: applies (its build: make test-full)"; continue; fi; \
	    out=$$(compile build/check14/$$v.cu) || { echo "$$out"; echo "check-14: solution + $$v does not compile"; exit 1; }; \
	    if echo "$$out" | grep -qiE 'warning|C7519|C7508'; then echo "check-14: solution + $$v: ptxas warns:"; echo "$$out" | grep -iE -A2 'warning|C75'; exit 1; fi; \
	    if echo "$$out" | grep -qE '[1-9][0-9]* bytes (spill|stack)'; then echo "check-14: solution + $$v spills"; exit 1; fi; \
	    regs=$$(echo "$$out" | awk '/Compiling entry function .*fp8_forward_kernel/ {on = 1} on && /Used [0-9]+ registers/ {sub(/.*Used /, ""); print $$1; on = 0}' | sort -n | uniq | tr '\n' ' '); \
	    if [ "$$regs" != "168 " ]; then echo "check-14: solution + $$v: the main kernel uses $$regs registers per thread; setmaxnreg's split needs 168"; exit 1; fi; \
	    echo "check-14: solution + $$v: builds for sm_90a, main kernel 168 registers, no spill, no warning"; \
	  done; \
	fi

# The CPU Hopper emulator graded by the real runner (the runner's objects: mk/hostsim-forward.mk).
EMU14_SRC ?= $(SOL14_SRC)
EMU14_VARIANTS ?=
EMU14_MODE = $(if $(filter 0,$(EMU_QUICK)),full,quick)
VARIANT14_SH := lessons/14-fp8-attention/worklog/variant.sh
VARIANT14_NAMES := $(patsubst lessons/14-fp8-attention/worklog/variants/%.var,%,$(wildcard lessons/14-fp8-attention/worklog/variants/*.var))
define EMU14_RUN
	@if [ ! -f $(CUDA_INC)/cuda_runtime_api.h ]; then echo "$(2): SKIP (no CUDA headers: install the CUDA toolkit)"; exit 0; fi; \
	[ -n "$(1)" ] || { echo "$(2): no source (expected $(3)/14-*/*.cu)"; exit 2; }; \
	src=$(1); if [ -n "$(4)" ]; then mkdir -p build/emu-grade && src=build/emu-grade/$(2)-variants.cu && \
	  bash $(VARIANT14_SH) $(1) $$src $(4) || exit 2; fi; \
	EMU_FWD_OBJ='$(HOSTSIM_FWD_OBJ)' EMU_CXX='$(EMU_CXX)' EMU_OPT='$(EMU_OPT)' CUDA_INC='$(CUDA_INC)' \
	  python3 tests/hopper_emu/grade14.py $$src $(2) $(EMU14_MODE)
endef
emu-14: $$(if $$(HOSTSIM_HAVE_CUDA),$$(HOSTSIM_FWD_OBJ))
	$(call EMU14_RUN,$(EMU14_SRC),emu-14,solutions,$(EMU14_VARIANTS))
emu-lesson14: $$(if $$(HOSTSIM_HAVE_CUDA),$$(HOSTSIM_FWD_OBJ))
	$(call EMU14_RUN,$(LES14_SRC),emu-lesson14,lessons)
emu-solution14: $$(if $$(HOSTSIM_HAVE_CUDA),$$(HOSTSIM_FWD_OBJ))
	$(call EMU14_RUN,$(SOL14_SRC),emu-solution14,solutions)

FP8_SCALAR_SRC := tests/gpu_fp8/scalar_fp8.cu $(filter-out reference/harness/runner_backward.cu,$(wildcard reference/harness/runner_*.cu)) $(HARNESS_C)
fp8-scalar: build/fp8scalar
build/fp8scalar: $(FP8_SCALAR_SRC) $(HARNESS_H)
	@mkdir -p build
	$(NVCC) -O2 -std=c++17 $(SM90A_FLAGS) -Xcompiler -fopenmp $(REF_INC) $(FP8_SCALAR_SRC) -o $@ -lgomp

TEST_STEPS += check-14 emu-14

# make quant-error-14: where FP8 attention's error comes from on the outlier inputs (CPU, no GPU):
# lessons/14-fp8-attention/worklog/quant_error.c with the harness's quantization (reference/cpu/fp8.c)
QUANT14 := lessons/14-fp8-attention/worklog/quant_error.c
build/quant_error14: $(QUANT14) reference/cpu/fp8.c reference/cpu/fp8.h reference/cpu/cpu_reference.c reference/harness/rng.c
	@mkdir -p build
	$(CC) $(CFLAGS) $(REF_INC) $(QUANT14) reference/cpu/fp8.c reference/cpu/cpu_reference.c reference/harness/rng.c -o $@ -lm
.PHONY: quant-error-14
quant-error-14: build/quant_error14
	build/quant_error14 $(QUANT14_SEED)

# make solution14-VARIANT: ./solution14-VARIANT, the solution with variants/VARIANT.var applied
.PHONY: FORCE_SOL14
FORCE_SOL14:
solution14-%: FORCE_SOL14 $(HARNESS_C_OBJ) $(HARNESS_CU_OBJ)
	@mkdir -p build/variant14 && bash $(VARIANT14_SH) $(SOL14_SRC) build/variant14/$*.cu $* && \
	echo "$(NVCC) ... build/variant14/$*.cu (solution 14 + variants/$*.var) -o $@" && \
	$(NVCC) $(NVCC_FLAGS) $(SM90A_FLAGS) $(REF_INC) build/variant14/$*.cu \
	  $(HARNESS_CU_OBJ) $(HARNESS_C_OBJ) -o $@ -lgomp

# make sanitize-solution14 / sanitize-lesson14 (the Makefile's sanitize-%): FP8 inputs, d = 128 only
sanitize-solution14 sanitize-lesson14: DTYPE = e4m3
sanitize-solution14 sanitize-lesson14: SAN_D = 128

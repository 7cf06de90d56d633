# mk/hopper.mk: lesson 09 (Hopper: wgmma, TMA, mbarriers, warp specialization). Its source
# carries `// build: sm_90a`, so every build here is for sm_90a alone (SM90A_FLAGS).
# The source builds steps 5-7 of the lesson's ladder (FA9_STEP, default 7); steps 1-4 and the
# experiments that lost (lessons/09-hopper-wgmma/worklog/README.md) are variant files,
# lessons/09-hopper-wgmma/worklog/variants/NAME.var, applied by lessons/09-hopper-wgmma/worklog/variant.sh.
# In `make test` (no GPU needed):
#   make check-09   the starter and the solution compile for sm_90a: the solution as shipped (in
#                   make test; make check-09-full, in make test-full: at every step of the ladder,
#                   FA9_STEP=1..7, steps 1-4 through variants/steps-1-4.var, and in
#                   CHECK09_BUILDS), with no ptxas warning (among them C7508, "setmaxnreg
#                   ignored", and the wgmma serialization warnings) and no spill; the
#                   warp-specialized kernels use exactly the registers per thread that their
#                   setmaxnreg split assumes (168 with two consumer warpgroups: 24 + 2 x 240 =
#                   3 x 168; 128 with three: 32 + 3 x 160 = 4 x 128). Also: every variant file
#                   applies to the solution, steps-1-4 to the starter too; and
#                   reference/include/ptx_hopper.h (made from the solution's wrappers by make
#                   starters) compiles. Prints each build's registers. SKIPs without nvcc
#   make test-tma   tests/unit/test_tma.c (Criterion): the tensor-map parameters of
#                   reference/include/tma_params.h for each d and dtype, ragged N, refusals, the swizzle
#   make emu-09     the kernel on the CPU Hopper emulator (tests/hopper_emu): the shipped design
#                   (step 7) on its full quick set, every other step of the ladder on two shapes:
#                   wgmma, TMA, mbarriers, named barriers and setmaxnreg from their PTX
#                   definitions, a happens-before check of every shared-memory access, hang
#                   detection (tests/emu/core.h); run twice (operands and copies landing at once,
#                   then as late as the rules allow, the threads scheduled in reverse order). EMU09_SRC=lessons/09-hopper-wgmma/hopper.cu runs yours;
#                   EMU_QUICK=0 more shapes; EMU_STEP=k that step only; EMU09_VARIANTS="exp2-fma"
#                   EMU09_DEFS="-DFA_EXP2_FMA=2" the kernel with variants and switches
# On a Hopper GPU (H100/H200):
#   make ladder-09  builds FA9_STEP=1..7 (and any --variant), grades each on a few cases, times
#                   each on the course shapes next to PyTorch's SDPA (flash and cuDNN
#                   backends); tables of TFLOP/s and of ratios to cuDNN
#                   (LADDER_ARGS='...', lessons/09-hopper-wgmma/worklog/ladder.sh --help)
#   make ncu-09     Nsight Compute, per step, on one shape: tensor-pipe activity, issue
#                   stalls (lessons/09-hopper-wgmma/worklog/ncu.sh)
#   make hopper-variant HOPPER_DEFS="-DFA9_STEP=3" HOPPER_VARIANTS="..." HOPPER_OUT=build/ladder09/step3
#                   one build of solution 9 (HOPPER_SRC=... another source) with extra -D flags
#                   and variant files (steps-1-4 is added for FA9_STEP=1..4): what ladder.sh runs
#   make lesson9-stepK / solution9-stepK   ./lesson9-stepK (your file) or ./solution9-stepK, built
#                   at step K of the ladder with two consumer warpgroups, as ladder.sh builds it
.PHONY: check-09 check-09-full test-tma emu-09 ladder-09 ncu-09 hopper-variant
CHECK09_FULL ?= 0

HOPPER_SRC := $(call src_of,solutions,9)
HOPPER_STARTER := $(call src_of,lessons,9)
HOPPER_VARIANT_SH := lessons/09-hopper-wgmma/worklog/variant.sh
HOPPER_VARIANT_NAMES := $(patsubst lessons/09-hopper-wgmma/worklog/variants/%.var,%,$(wildcard lessons/09-hopper-wgmma/worklog/variants/*.var))
# the variant files a build needs: its own, and steps-1-4 for the ladder's first steps
hopper_variants = $(strip $(if $(filter -DFA9_STEP=1 -DFA9_STEP=2 -DFA9_STEP=3 -DFA9_STEP=4,$(1)),steps-1-4) $(2))

# extra builds of check-09: "variant files|defines|registers expected (sorted, distinct)"
# (the steps themselves are checked with two consumer warpgroups, -DFA64_WG=2; the first
# build is the source's default)
CHECK09_BUILDS := "||128 168" "|-DFA9_STEP=7 -DFA64_WG=3|128 168" "|-DFA9_STEP=5 -DFA64_WG=3|128 168" \
  "stride-items o-from-registers no-causal-lpt no-l2-sections|-DFA9_STEP=7 -DFA64_WG=2|168" \
  "exp2-fma|-DFA9_STEP=7 -DFA64_WG=2|168" "|-DFA9_STEP=7 -DFA64_WG=2 -DFA128_BC=176 -DFA128_STAGES=2|168"
check-09:
	@if ! command -v $(NVCC) >/dev/null 2>&1; then echo "check-09: SKIP (no nvcc)"; exit 0; fi; \
	if [ -z "$(HOPPER_SRC)" ]; then echo "check-09: no solutions/09-*/*.cu"; exit 1; fi; \
	mkdir -p build/check09 && tmp=$$(mktemp -d "$(CURDIR)/build/check09/XXXXXX") && trap 'rm -rf "$$tmp"' EXIT; \
	report() { s=$$1; shift; if [ $$# -gt 0 ]; then $(PTXAS_REPORT) $$s 90a -- "$$@"; else $(PTXAS_REPORT) $$s 90a; fi; }; \
	for f in $(HOPPER_STARTER); do \
	  out=$$(report $$f) || { echo "$$out"; echo "check-09: the starter $$f does not compile"; exit 1; }; \
	  bash $(HOPPER_VARIANT_SH) $$f "$$tmp/starter.cu" steps-1-4 || { echo "check-09: variants/steps-1-4.var does not apply to the starter $$f"; exit 1; }; \
	done; \
	for v in $(HOPPER_VARIANT_NAMES); do \
	  bash $(HOPPER_VARIANT_SH) $(HOPPER_SRC) "$$tmp/v.cu" $$v || { echo "check-09: variants/$$v.var does not apply"; exit 1; }; \
	done; \
	check() { \
	  src=$(HOPPER_SRC); \
	  if [ -n "$$1" ]; then bash $(HOPPER_VARIANT_SH) $(HOPPER_SRC) "$$tmp/build.cu" $$1 || exit 1; src="$$tmp/build.cu"; fi; \
	  what="$${2:-solution}$${1:+ + $$1}"; \
	  out=$$(report $$src $$2) || { echo "$$out"; echo "check-09: $$what does not compile"; exit 1; }; \
	  if echo "$$out" | grep -qi 'warning'; then \
	    echo "check-09: $$what: ptxas warns:"; echo "$$out" | grep -i -A2 'warning'; exit 1; fi; \
	  if echo "$$out" | grep -qE '[1-9][0-9]* bytes (spill|stack)'; then \
	    echo "check-09: $$what spills:"; echo "$$out" | grep -E 'spill|stack|registers'; exit 1; fi; \
	  regs=$$(echo "$$out" | sed -nE 's/.*Used ([0-9]+) registers.*/\1/p' | sort -n | uniq | tr '\n' ' '); \
	  if [ -n "$$3" ] && [ "$$regs" != "$$3 " ]; then \
	    echo "check-09: $$what uses $$regs registers per thread; setmaxnreg's split needs $$3"; exit 1; fi; \
	  echo "check-09: $$what: $${regs}registers, no spill, no warning"; \
	}; \
	if [ "$(CHECK09_FULL)" = 1 ]; then \
	  for s in 1 2 3 4 5 6 7; do \
	    v=""; [ $$s -le 4 ] && v=steps-1-4; \
	    if [ $$s -ge 3 ]; then check "$$v" "-DFA9_STEP=$$s -DFA64_WG=2" 168; else check "$$v" "-DFA9_STEP=$$s -DFA64_WG=2" ""; fi || exit 1; \
	  done; \
	  for b in $(CHECK09_BUILDS); do v=$${b%%|*}; r=$${b#*|}; check "$$v" "$${r%|*}" "$${r#*|}" || exit 1; done; \
	else \
	  check "" "" "128 168" || exit 1; \
	fi; \
	printf '#include "ptx_mma.h"\n#include "ptx_hopper.h"\n__global__ void k(float *o) {\n  float d[64] = {}; uint32_t a[4] = {};\n  wgmma_fence(); wgmma_ss<__half, 128>(d, 0, 0, 0); wgmma_rs<__nv_bfloat16, 128>(d, a, 0, 1); wgmma_commit(); wgmma_wait<0>(); fence_acc(d);\n  mbar_wait(0, 0); named_sync(1, 256); o[threadIdx.x] = d[0] + desc_kmajor<128>(0, 0, 1) + desc_mnmajor<64>(0, 1);\n}\n' > "$$tmp/h.cu"; \
	out=$$($(NVCC) -O3 -std=c++17 $(SM90A_FLAGS) $(REF_INC) -cubin "$$tmp/h.cu" -o /dev/null 2>&1) || \
	  { echo "$$out"; echo "check-09: reference/include/ptx_hopper.h does not compile for sm_90a"; exit 1; }; \
	echo "check-09: the starter, $(if $(filter 1,$(CHECK09_FULL)),steps 1-7 of the solution and its builds,the solution as shipped), its variants (applied) and ptx_hopper.h build for sm_90a"
# make test-full: every step of the ladder and every build of CHECK09_BUILDS
check-09-full:
	@$(MAKE) --no-print-directory check-09 CHECK09_FULL=1

tests/bin/tma: tests/unit/test_tma.c reference/include/tma_params.h reference/include/attention.h
	@mkdir -p tests/bin
	$(CC) $(CFLAGS) $(REF_INC) tests/unit/test_tma.c -o $@ -lcriterion
test-tma: tests/bin/tma
	tests/bin/tma --jobs 2

EMU09_SRC ?= $(HOPPER_SRC)
EMU09_VARIANTS ?=
emu-09:
	@if [ ! -f $(EMU_CUDA_INC)/cuda_fp16.h ]; then echo "emu-09: SKIP (no CUDA headers)"; exit 0; fi; \
	mkdir -p build/emu && emu=$$(mktemp -d "$(CURDIR)/build/emu/emu-09.XXXXXX") && trap 'rm -rf "$$emu"' EXIT && \
	bash $(HOPPER_VARIANT_SH) $(EMU09_SRC) "$$emu/full.cu" steps-1-4 $(EMU09_VARIANTS) && \
	python3 tests/emu/prep.py "$$emu/full.cu" > "$$emu/kernel.cu" && \
	$(EMU_CXX) -std=c++20 $(or $(EMU_OPT),-O1) -w -Wno-psabi -I$(EMU_CUDA_INC) -Itests/hopper_emu $(REF_INC) $(EMU09_DEFS) \
	  $(if $(filter 1,$(EMU_QUICK)),-DEMU_QUICK_ONLY) \
	  -DEMU_SRC="\"$$emu/kernel.cu\"" -DEMU_NAME='"$(EMU09_SRC)"' -x c++ tests/hopper_emu/emu9.cpp \
	  -o "$$emu/emu9" -lpthread && \
	"$$emu/emu9" $(EMU_ARG) && EMU_WGMMA=late EMU_TMA=late EMU_SCHED=reverse "$$emu/emu9" $(EMU_ARG)

TEST_STEPS += check-09 test-tma emu-09
TEST_FULL_STEPS += emu-full-09 check-09-full

HOPPER_DEFS ?=
HOPPER_VARIANTS ?=
HOPPER_OUT ?= build/ladder09/solution9
hopper-variant: $(HARNESS_C_OBJ) $(HARNESS_CU_OBJ)
	@mkdir -p $(dir $(HOPPER_OUT))
	@src=$(HOPPER_SRC); vs="$(call hopper_variants,$(HOPPER_DEFS),$(HOPPER_VARIANTS))"; \
	gen=build/hopper-variant/$(notdir $(HOPPER_OUT)).cu; mkdir -p build/hopper-variant; \
	if [ -n "$$vs" ]; then bash $(HOPPER_VARIANT_SH) $(HOPPER_SRC) $$gen $$vs || exit 1; src=$$gen; fi; \
	echo "$(NVCC) ... $(HOPPER_DEFS) $$src$${vs:+ (variants: $$vs)} -o $(HOPPER_OUT)"; \
	$(NVCC) $(NVCC_FLAGS) $(SM90A_FLAGS) $(HOPPER_DEFS) -Xptxas -v $(REF_INC) $$src \
	  $(HARNESS_CU_OBJ) $(HARNESS_C_OBJ) -o $(HOPPER_OUT) -lgomp 2> $(HOPPER_OUT).ptxas \
	  || { cat $(HOPPER_OUT).ptxas; exit 1; }

.PHONY: FORCE_HOPPER
FORCE_HOPPER:
lesson9-step%: FORCE_HOPPER
	@$(MAKE) --no-print-directory hopper-variant HOPPER_SRC=$(HOPPER_STARTER) HOPPER_DEFS="-DFA9_STEP=$* -DFA64_WG=2" \
	  HOPPER_OUT=$@
solution9-step%: FORCE_HOPPER
	@$(MAKE) --no-print-directory hopper-variant HOPPER_DEFS="-DFA9_STEP=$* -DFA64_WG=2" HOPPER_OUT=$@

ladder-09:
	@bash lessons/09-hopper-wgmma/worklog/ladder.sh $(LADDER_ARGS)

ncu-09:
	@bash lessons/09-hopper-wgmma/worklog/ncu.sh $(NCU_ARGS)

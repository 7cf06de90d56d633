# mk/hopper.mk: lesson 09 (Hopper: wgmma, TMA, mbarriers, warp specialization). Its source
# carries `// build: sm_90a`, so every build here is for sm_90a alone (SM90A_FLAGS).
# In `make test` (no GPU needed):
#   make check-09   the starter, and the solution at every step of the ladder (FA9_STEP=1..7),
#                   compile for sm_90a with no ptxas warning (among them C7508, "setmaxnreg
#                   ignored", and the wgmma serialization warnings) and no spill; the
#                   warp-specialized steps (3-7) use exactly the 168 registers per thread that
#                   the setmaxnreg split 24 / 240 / 240 assumes (24 x 128 + 2 x 240 x 128 =
#                   168 x 384); so do the variants in CHECK09_VARIANTS (three consumer
#                   warpgroups at d = 64: 128 registers, 32 + 3 x 160 = 4 x 128; the default
#                   build has both kernels at d = 64, 2 and 3 consumer warpgroups; the step-7
#                   switches; FA_EXP2_FMA). Prints each build's registers. SKIPs without nvcc
#   make test-tma   tests/test_tma.c (Criterion): the tensor-map parameters of
#                   reference/include/tma_params.h for each d and dtype, ragged N, refusals, the swizzle
#   make emu-09     the kernel of every step on the CPU Hopper emulator (tests/hopper_emu):
#                   wgmma, TMA, mbarriers, named barriers and setmaxnreg from their PTX
#                   definitions, a happens-before check of every shared-memory access, a hang
#                   watchdog; run twice (operands and copies landing at once, then as late as
#                   the rules allow). EMU09_SRC=lessons/09-hopper-wgmma/hopper.cu runs yours;
#                   EMU_QUICK=0 more shapes; EMU09_DEFS="-DFA7_DYNAMIC=0 -DFA_EXP2_FMA=4" the
#                   kernel with other switches (EMU_STEP=7 to run that step only)
# On a Hopper GPU (H100/H200):
#   make ladder-09  builds FA9_STEP=1..7 (and any --variant), grades each on a few cases, times
#                   each on the course shapes next to PyTorch's SDPA (flash and cuDNN
#                   backends); tables of TFLOP/s and of ratios to cuDNN
#                   (LADDER_ARGS='...', lessons/09-hopper-wgmma/ladder.sh --help)
#   make ncu-09     Nsight Compute, per step, on one shape: tensor-pipe activity, issue
#                   stalls (lessons/09-hopper-wgmma/ncu.sh)
#   make hopper-variant HOPPER_DEFS="-DFA9_STEP=3" HOPPER_OUT=build/ladder09/step3
#                   one build of solution 9 with extra -D flags (what ladder.sh runs)
.PHONY: check-09 test-tma emu-09 ladder-09 ncu-09 hopper-variant

HOPPER_SRC := $(call src_of,solutions,9)
HOPPER_STARTER := $(call src_of,lessons,9)

# extra builds of check-09: "defines|registers expected (sorted, distinct)"
# (the steps themselves are checked with two consumer warpgroups, -DFA64_WG=2; the first
# variant is the source's default build)
CHECK09_VARIANTS := "-DFA9_STEP=7|128 168" "-DFA9_STEP=7 -DFA64_WG=3|128 168" "-DFA9_STEP=5 -DFA64_WG=3|128 168" \
  "-DFA9_STEP=7 -DFA64_WG=2 -DFA7_DYNAMIC=0 -DFA7_O_TMA=0|168" "-DFA9_STEP=7 -DFA64_WG=2 -DFA_EXP2_FMA=4|168" \
  "-DFA9_STEP=7 -DFA64_WG=2 -DFA128_BC=176 -DFA128_STAGES=2|168"
check-09:
	@if ! command -v $(NVCC) >/dev/null 2>&1; then echo "check-09: SKIP (no nvcc)"; exit 0; fi; \
	if [ -z "$(HOPPER_SRC)" ]; then echo "check-09: no solutions/09-*/*.cu"; exit 1; fi; \
	compile() { $(NVCC) -O3 -std=c++17 $(SM90A_FLAGS) -Ireference/include -Ireference -Xptxas -v -c "$$@" -o /dev/null 2>&1; }; \
	for f in $(HOPPER_STARTER); do \
	  out=$$(compile $$f) || { echo "$$out"; echo "check-09: the starter $$f does not compile"; exit 1; }; \
	done; \
	check() { \
	  out=$$(compile $$1 $(HOPPER_SRC)) || { echo "$$out"; echo "check-09: $$1 does not compile"; exit 1; }; \
	  if echo "$$out" | grep -qi 'warning'; then \
	    echo "check-09: $$1: ptxas warns:"; echo "$$out" | grep -i -A2 'warning'; exit 1; fi; \
	  if echo "$$out" | grep -qE '[1-9][0-9]* bytes (spill|stack)'; then \
	    echo "check-09: $$1 spills:"; echo "$$out" | grep -E 'spill|stack|registers'; exit 1; fi; \
	  regs=$$(echo "$$out" | sed -nE 's/.*Used ([0-9]+) registers.*/\1/p' | sort -n | uniq | tr '\n' ' '); \
	  if [ -n "$$2" ] && [ "$$regs" != "$$2 " ]; then \
	    echo "check-09: $$1 uses $$regs registers per thread; setmaxnreg's split needs $$2"; exit 1; fi; \
	  echo "check-09: $$1: $${regs}registers, no spill, no warning"; \
	}; \
	for s in 1 2 3 4 5 6 7; do \
	  if [ $$s -ge 3 ]; then check "-DFA9_STEP=$$s -DFA64_WG=2" 168; else check "-DFA9_STEP=$$s -DFA64_WG=2" ""; fi; \
	done; \
	for v in $(CHECK09_VARIANTS); do check "$${v%|*}" "$${v#*|}"; done; \
	echo "check-09: the starter, steps 1-7 of the solution and its variants build for sm_90a"

tests/bin/tma: tests/test_tma.c reference/include/tma_params.h reference/include/attention.h
	@mkdir -p tests/bin
	$(CC) $(CFLAGS) -Ireference/include -Ireference tests/test_tma.c -o $@ -lcriterion
test-tma: tests/bin/tma
	tests/bin/tma --jobs 2

EMU09_SRC ?= $(HOPPER_SRC)
emu-09:
	@if [ ! -f $(EMU_CUDA_INC)/cuda_fp16.h ]; then echo "emu-09: SKIP (no CUDA headers)"; exit 0; fi; \
	mkdir -p build/emu && emu=$$(mktemp -d "$(CURDIR)/build/emu/emu-09.XXXXXX") && trap 'rm -rf "$$emu"' EXIT && \
	bash tests/hopper_emu/strip.sh $(EMU09_SRC) > "$$emu/kernel.cu" && \
	$(EMU_CXX) -std=c++20 -O1 -w -Wno-psabi -I$(EMU_CUDA_INC) -Itests/hopper_emu -Ireference/include -Ireference $(EMU09_DEFS) \
	  -DEMU_SRC="\"$$emu/kernel.cu\"" -DEMU_NAME='"$(EMU09_SRC)"' -x c++ tests/hopper_emu/emu9.cpp \
	  -o "$$emu/emu9" -lpthread && \
	"$$emu/emu9" $(EMU_ARG) && EMU_WGMMA=late EMU_TMA=late "$$emu/emu9" $(EMU_ARG)

test:: check-09 test-tma emu-09

HOPPER_DEFS ?=
HOPPER_OUT ?= build/ladder09/solution9
hopper-variant: $(HARNESS_C_OBJ) $(HARNESS_CU_OBJ)
	@mkdir -p $(dir $(HOPPER_OUT))
	$(NVCC) $(NVCC_FLAGS) $(SM90A_FLAGS) $(HOPPER_DEFS) -Xptxas -v -Ireference/include -Ireference $(HOPPER_SRC) \
	  $(HARNESS_CU_OBJ) $(HARNESS_C_OBJ) -o $(HOPPER_OUT) -lgomp 2> $(HOPPER_OUT).ptxas \
	  || { cat $(HOPPER_OUT).ptxas; exit 1; }

ladder-09:
	@bash lessons/09-hopper-wgmma/ladder.sh $(LADDER_ARGS)

ncu-09:
	@bash lessons/09-hopper-wgmma/ncu.sh $(NCU_ARGS)

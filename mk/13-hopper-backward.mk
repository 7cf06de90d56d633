# mk/13-hopper-backward.mk: lesson 13 (the backward pass on Hopper: wgmma, TMA, dQ by bulk
# reduce-add). Its source carries `// build: sm_90a`, so every build here is for sm_90a alone.
# In `make test` (no GPU needed):
#   make check-13   the starter and the solution compile for sm_90a (the solution also with each
#                   variant of lessons/13-hopper-backward/worklog/variants/ but the ladder's rungs, which
#                   make check-13-ladder builds, in make test-full), with no ptxas warning and no
#                   spill, and the main kernel uses exactly the 168 registers per thread that its
#                   setmaxnreg split assumes (24 + 2 x 240 = 3 x 168), or the budget a variant
#                   file states in its header line "registers: N" (exactly N) or "registers: max
#                   N" (at most N: the ladder's rungs without setmaxnreg); ptxas injects no
#                   warpgroup.arrive (C7519: a register a wgmma uses written after wgmma.fence);
#                   every variant applies; reference/include/ptx_hopper_bwd.h (made from the
#                   solution's wrappers by make starters; make check-starters checks it) compiles.
#                   SKIPs without nvcc
#   make emu-13     the three kernels on the CPU Hopper emulator (tests/hopper_emu/emu13.cpp):
#                   dQ, dK, dV against float64 with the FlashAttention rule, ragged N, causal, x30
#                   logits, d = 64 and 128, fp16 and bf16; the descriptors against the tile
#                   layouts; a happens-before check of every shared-memory access, the wgmma, TMA,
#                   mbarrier and named-barrier rules, hang detection; run twice (operands and
#                   copies landing at once, then as late as the rules allow, with the threads
#                   scheduled in reverse order: tests/emu/core.h).
#                   EMU13_SRC=lessons/13-hopper-backward/hopper_backward.cu runs yours;
#                   EMU13_VARIANTS="deterministic" the kernel with variant files (a ladder rung,
#                   ladder-K-NAME, brings the rungs above it: see below); EMU_QUICK=0 more shapes
# On a Hopper GPU (H100/H200):
#   make bench-13   lessons/13-hopper-backward/worklog/bench.sh: the solution (and its variants) timed on the
#                   course's shapes next to lesson 11 and PyTorch's SDPA backward (flash and cuDNN)
#                   (BENCH13_ARGS='...', bench.sh --help)
#   make solution13-VARIANT   ./solution13-VARIANT: the solution with variants/VARIANT.var applied
#   make ladder-13  bench.sh --ladder: the ladder from lesson 11 to this lesson, rung by rung, timed
#                   (LADDER13_ARGS='--ncu' adds Nsight Compute's figures per rung); CSV, table and
#                   chart into docs/results/lessons/ladder-13-<gpu>.*
# The ladder: variants/ladder-K-NAME.var, K = 4 .. 1, rung K = the solution without the steps
# above K. Each file removes one step from the rung above it, so rung K is the solution with
# ladder-4-*, ..., ladder-K-* applied in that order; every target here that takes a variant name
# (check-13, emu-13, solution13-NAME) expands a rung's name to that chain (ladder13_chain).
.PHONY: check-13 check-13-ladder emu-13 bench-13 ladder-13

SOL13_SRC := $(call src_of,solutions,13)
LES13_SRC := $(call src_of,lessons,13)
VARIANT13_SH := lessons/13-hopper-backward/worklog/variant.sh
VARIANT13_NAMES := $(patsubst lessons/13-hopper-backward/worklog/variants/%.var,%,$(wildcard lessons/13-hopper-backward/worklog/variants/*.var))
# the rungs from the top (ladder-4-*) down; a rung's chain: the rungs from the top down to it
LADDER13_DOWN := $(shell printf '%s\n' $(filter ladder-%,$(VARIANT13_NAMES)) | sort -t- -k2,2nr)
LADDER13_SP := $() $()
ladder13_rung = $(word 2,$(subst -, ,$(1)))
ladder13_chain = $(if $(filter $(1),$(LADDER13_DOWN)),$(foreach v,$(LADDER13_DOWN),$(if $(shell [ $(call ladder13_rung,$(v)) -ge $(call ladder13_rung,$(1)) ] && echo y),$(v))),$(1))

# make test compiles the solution's variants but not the ladder's rungs (four more builds of the
# big kernel): check-13-ladder does those, in make test-full.
CHECK13_VARIANTS ?= $(filter-out ladder-%,$(VARIANT13_NAMES))
check-13-ladder:
	@$(MAKE) --no-print-directory check-13 CHECK13_VARIANTS='$(filter ladder-%,$(VARIANT13_NAMES))'
check-13:
	@if ! command -v $(NVCC) >/dev/null 2>&1; then echo "check-13: SKIP (no nvcc)"; exit 0; fi; \
	if [ -z "$(SOL13_SRC)" ]; then echo "check-13: no solutions/13-*/*.cu"; exit 1; fi; \
	mkdir -p build/check13 && tmp=$$(mktemp -d "$(CURDIR)/build/check13/XXXXXX") && trap 'rm -rf "$$tmp"' EXIT; \
	compile() { $(PTXAS_REPORT) "$$1" 90a; }; \
	for f in $(LES13_SRC); do \
	  out=$$(compile $$f) || { echo "$$out"; echo "check-13: the starter $$f does not compile"; exit 1; }; \
	  if echo "$$out" | grep -qi 'warning'; then echo "check-13: the starter $$f: ptxas warns:"; echo "$$out" | grep -i -A2 warning; exit 1; fi; \
	done; \
	check() { \
	  src=$(SOL13_SRC); what=solution; budget=168; \
	  if [ -n "$$1" ]; then \
	    chain=$$(echo "$$1" | tr + ' '); \
	    bash $(VARIANT13_SH) $(SOL13_SRC) "$$tmp/v.cu" $$chain || exit 1; src="$$tmp/v.cu"; what="solution + $$chain"; \
	    for v in $$chain; do b=$$(sed -n 's/^registers: *//p' lessons/13-hopper-backward/worklog/variants/$$v.var | head -n1); [ -z "$$b" ] || budget=$$b; done; \
	  fi; \
	  out=$$(compile $$src) || { echo "$$out"; echo "check-13: $$what does not compile"; exit 1; }; \
	  if echo "$$out" | grep -qiE 'warning|C7519'; then \
	    echo "check-13: $$what: ptxas warns (or injects a warpgroup.arrive):"; echo "$$out" | grep -iE -A2 'warning|C7519'; exit 1; fi; \
	  if echo "$$out" | grep -qE '[1-9][0-9]* bytes (spill|stack)'; then \
	    echo "check-13: $$what spills:"; echo "$$out" | grep -E 'spill|stack|registers'; exit 1; fi; \
	  regs=$$(echo "$$out" | awk '/Compiling entry function .*fa3_backward_kernel/ {on = 1} on && /Used [0-9]+ registers/ {sub(/.*Used /, ""); print $$1; on = 0}' | sort -n | uniq | tr '\n' ' '); \
	  case "$$budget" in \
	  max*) lim=$$(echo "$$budget" | awk '{print $$2}'); over=$$(for r in $$regs; do [ "$$r" -le "$$lim" ] || echo "$$r"; done); \
	    if [ -z "$$regs" ] || [ -n "$$over" ]; then echo "check-13: $$what: the main kernel uses $$regs registers per thread; its variant allows at most $$lim"; exit 1; fi ;; \
	  *) want=$$(echo "$$budget" | awk '{print $$1}'); \
	    if [ "$$regs" != "$$want " ]; then echo "check-13: $$what: the main kernel uses $$regs registers per thread; setmaxnreg's split needs $$want"; exit 1; fi ;; \
	  esac; \
	  echo "check-13: $$what: main kernel $${regs% } registers (budget $${budget%% (*}), no spill, no warning"; \
	}; \
	check "" || exit 1; \
	for v in $(foreach v,$(CHECK13_VARIANTS),$(subst $(LADDER13_SP),+,$(strip $(call ladder13_chain,$(v))))); do check $$v || exit 1; done; \
	printf '#include "ptx_mma.h"\n#include "ptx_hopper_bwd.h"\n__global__ void k(float *o, float *g) {\n  float d[32] = {};\n  wgmma_fence(); wgmma_ss_mn<__half, 64>(d, 0, 0, 0); wgmma_ss_mn<__nv_bfloat16, 64>(d, 0, 0, 1); wgmma_commit(); wgmma_wait<0>(); fence_acc(d);\n  bulk_load_1d(0, o, 16, 8); bulk_reduce_add_f32(g, 0, 16); bulk_commit(); bulk_wait_read<0>();\n  o[threadIdx.x] = d[0] + ld_shared_f32x2(0).x;\n}\n' > "$$tmp/h.cu"; \
	out=$$($(NVCC) -O3 -std=c++17 $(SM90A_FLAGS) $(REF_INC) -cubin "$$tmp/h.cu" -o /dev/null 2>&1) || \
	  { echo "$$out"; echo "check-13: reference/include/ptx_hopper_bwd.h does not compile for sm_90a"; exit 1; }; \
	echo "check-13: the starter, the solution, its variants and ptx_hopper_bwd.h build for sm_90a"

EMU13_SRC ?= $(SOL13_SRC)
EMU13_VARIANTS ?=
EMU13_CHAIN = $(strip $(foreach v,$(EMU13_VARIANTS),$(call ladder13_chain,$(v))))
emu-13:
	@if [ ! -f $(EMU_CUDA_INC)/cuda_fp16.h ]; then echo "emu-13: SKIP (no CUDA headers)"; exit 0; fi; \
	mkdir -p build/emu && emu=$$(mktemp -d "$(CURDIR)/build/emu/emu-13.XXXXXX") && trap 'rm -rf "$$emu"' EXIT && \
	bash $(VARIANT13_SH) $(EMU13_SRC) "$$emu/full.cu" $(EMU13_CHAIN) && \
	python3 tests/emu/prep.py "$$emu/full.cu" > "$$emu/kernel.cu" && \
	$(CC) -O2 -std=c11 $(REF_INC) -c reference/cpu/cpu_reference.c -o "$$emu/ref.o" && \
	$(CC) -O2 -std=c11 $(REF_INC) -c reference/cpu/cpu_reference_bwd.c -o "$$emu/ref_bwd.o" && \
	$(EMU_CXX) -std=c++20 $(or $(EMU_OPT),-O1) -w -Wno-psabi -I$(EMU_CUDA_INC) -Itests/hopper_emu $(REF_INC) \
	  -DEMU_SRC="\"$$emu/kernel.cu\"" -DEMU_NAME='"$(EMU13_SRC)$(if $(EMU13_CHAIN), + $(EMU13_CHAIN))"' \
	  -x c++ tests/hopper_emu/emu13.cpp -x none "$$emu/ref.o" "$$emu/ref_bwd.o" -o "$$emu/emu13" -lpthread -lm && \
	"$$emu/emu13" $(EMU_ARG) && EMU_WGMMA=late EMU_TMA=late EMU_SCHED=reverse "$$emu/emu13" $(EMU_ARG)

TEST_STEPS += check-13 emu-13
TEST_FULL_STEPS += emu-full-13 check-13-ladder

BENCH13_ARGS ?=
bench-13:
	@bash lessons/13-hopper-backward/worklog/bench.sh $(BENCH13_ARGS)
LADDER13_ARGS ?=
ladder-13:
	@bash lessons/13-hopper-backward/worklog/bench.sh --ladder $(LADDER13_ARGS)

.PHONY: FORCE_SOL13
FORCE_SOL13:
solution13-%: FORCE_SOL13 $(HARNESS_C_OBJ) $(HARNESS_BWD_CU_OBJ)
	@mkdir -p build/variant13 && bash $(VARIANT13_SH) $(SOL13_SRC) build/variant13/$*.cu $(call ladder13_chain,$*) && \
	echo "$(NVCC) ... build/variant13/$*.cu (solution 13 + variants $(strip $(call ladder13_chain,$*))) -o $@" && \
	$(NVCC) $(NVCC_FLAGS) $(SM90A_FLAGS) $(REF_INC) build/variant13/$*.cu \
	  $(HARNESS_BWD_CU_OBJ) $(HARNESS_C_OBJ) -o $@ -lgomp

# mk/ring.mk: lesson 15 (ring attention across GPUs). Its sources carry `// build: sm_90a`
# (lesson 09's kernel does every block) and link NCCL when it is found.
#   make solution15 / lesson15           the ring over every visible GPU, blocks exchanged by NCCL
#                                        (one GPU: the binary refuses, exit 4)
#   make solution15 RING=virtual P=4     P ranks on one GPU, blocks exchanged by device copies: the
#                                        ring's logic on one GPU (default when NCCL is not found)
#   make solution15 RING_NAIVE=1         causal attention on the naive layout (rank r: chunk r)
#   make emu-lesson15 / emu-solution15   (no GPU) your ring (or the solution's) on the CPU: the host
#                                        code over a fake CUDA runtime and fake NCCL, float64
#                                        stand-ins for the kernels, graded (tests/ring/ring_hostrun.cu)
#   make ring15-tools                    (bench.sh) build/ring15/: the solution in each transport
#                                        and layout, and the timeline tool (tools/ring_timeline.cu)
#   make check-15                        (in make test, no GPU) the starter compiles; the solution's
#                                        ring runs on the CPU over a fake CUDA runtime (and fake
#                                        NCCL), graded against float64 (tests/ring/ring_hostrun.cu,
#                                        tests/ring/ring_logic.cu); the timeline tool compiles
#   bash lessons/15-ring-attention/worklog/bench.sh OUTDIR   (on P >= 2 Hopper GPUs) the measurements
# NCCL is looked for in NCCL_HOME, /usr (libnccl-dev), the CUDA toolkit nvcc belongs to, and the
# nvidia-nccl Python wheel (pip install nvidia-nccl-cu13), in that order: include/nccl.h and
# libnccl.so.2, linked with an rpath.
.PHONY: check-15 ring15-tools ring15-note ring-hostrun emu-lesson15 emu-solution15

NCCL_HOME ?=
# The toolkit's root (where a toolkit-installed nccl.h would be): the parent of its include folder.
RING_NVCC_ROOT := $(patsubst %/,%,$(dir $(CUDA_INC)))
NCCL_ROOT := $(firstword $(foreach d,$(NCCL_HOME) /usr $(RING_NVCC_ROOT),$(if $(wildcard $(d)/include/nccl.h),$(d))))
ifeq ($(NCCL_ROOT),)
  NCCL_ROOT := $(shell python3 -c 'import nvidia.nccl as m, os; d = list(m.__path__)[0]; print(d if os.path.exists(d + "/include/nccl.h") else "")' 2>/dev/null)
endif
NCCL_LIB := $(patsubst %/,%,$(dir $(firstword $(wildcard $(NCCL_ROOT)/lib/libnccl.so.2 $(NCCL_ROOT)/lib64/libnccl.so.2 \
              $(if $(filter /usr,$(NCCL_ROOT)),/usr/lib/*/libnccl.so.2 /usr/lib64/libnccl.so.2)))))
RING_NCCL_HOW := NCCL not found (looked in NCCL_HOME, /usr, $(RING_NVCC_ROOT), the nvidia-nccl Python wheel): \
  install libnccl-dev (apt) or the wheel (pip install nvidia-nccl-cu13), or point NCCL_HOME at a directory with \
  include/nccl.h and lib/libnccl.so.2

RING ?= $(if $(NCCL_ROOT),nccl,virtual)
P ?= 2
RING_NAIVE ?= 0
ring_flags = $(if $(filter nccl,$(1)),-DRING_NCCL -I$(NCCL_ROOT)/include,-DRING_VIRTUAL_RANKS=$(2)) \
  $(if $(filter 1,$(3)),-DRING_NAIVE_CAUSAL=1)
ring_libs = $(if $(filter nccl,$(1)),-L$(NCCL_LIB) -l:libnccl.so.2 -Xlinker -rpath -Xlinker $(NCCL_LIB))
RING_FLAGS := $(call ring_flags,$(RING),$(P),$(RING_NAIVE))
RING_LIBS := $(call ring_libs,$(RING))

# A change of RING, P or RING_NAIVE rebuilds the binaries (like GPU_ARCH, ARCH_STAMP).
RING_STAMP := build/ring-stamp
$(if $(DRY_RUN),,$(shell mkdir -p build; [ "$$(cat $(RING_STAMP) 2>/dev/null)" = "$(RING_FLAGS) $(RING_LIBS)" ] || echo "$(RING_FLAGS) $(RING_LIBS)" > $(RING_STAMP)))
RING_SOL := $(call src_of,solutions,15)
RING_STARTER := $(call src_of,lessons,15)
RING_GIVEN := lessons/15-ring-attention/ring_block.h $(call src_of,solutions,9) $(HARNESS_H)
ring_link = $(NVCC) $(NVCC_FLAGS) $(SM90A_FLAGS) $(2) $(REF_INC) $(1) $(HARNESS_CU_OBJ) \
  $(HARNESS_C_OBJ) -o $(3) -lgomp $(4)

ring15-note:
	@if [ "$(RING)" = nccl ] && [ -z "$(NCCL_ROOT)" ]; then echo "$(RING_NCCL_HOW)"; exit 4; fi
	@if [ -z "$(NCCL_ROOT)" ]; then echo "note: $(RING_NCCL_HOW); building the virtual ring ($(P) ranks on one GPU)"; fi

# Explicit rules: they take the place of the Makefile's lesson%/solution% for lesson 15.
solution15: $(RING_SOL) $(RING_GIVEN) $(RING_STAMP) $(call deps_of,$(RING_SOL)) | ring15-note
	$(call ring_link,$(RING_SOL),$(RING_FLAGS),$@,$(RING_LIBS))
lesson15: $(RING_STARTER) $(RING_GIVEN) $(RING_STAMP) $(call deps_of,$(RING_STARTER)) | ring15-note
	$(call ring_link,$(RING_STARTER),$(RING_FLAGS),$@,$(RING_LIBS))

# bench.sh's binaries: NAME:RING:P:NAIVE; each a solution (build/ring15/solution-NAME) and a
# timeline tool (build/ring15/timeline-NAME). The NCCL ones only where NCCL is found.
RING_TOOL := lessons/15-ring-attention/worklog/tools/ring_timeline.cu
# NAME:RING:P:NAIVE[:SMS_LEFT] (RING_SMS_LEFT, ring_block.h: SMs lesson 09's grid leaves to NCCL).
RING_BUILDS := virtual2:virtual:2:0 $(if $(NCCL_ROOT),nccl:nccl:2:0 nccl-naive:nccl:2:1 nccl-left4:nccl:2:0:4 \
  nccl-left16:nccl:2:0:16 nccl-naive-left4:nccl:2:1:4)
ring15-tools: $(HARNESS_C_OBJ) $(HARNESS_CU_OBJ)
	@mkdir -p build/ring15
	@for b in $(RING_BUILDS); do IFS=: read -r name ring p naive left <<<"$$b"; \
	  flags=$$( [ $$ring = nccl ] && echo "-DRING_NCCL -I$(NCCL_ROOT)/include" || echo "-DRING_VIRTUAL_RANKS=$$p"); \
	  [ $$naive = 1 ] && flags="$$flags -DRING_NAIVE_CAUSAL=1"; \
	  [ -n "$$left" ] && flags="$$flags -DRING_SMS_LEFT=$$left"; \
	  libs=$$( [ $$ring = nccl ] && echo "-L$(NCCL_LIB) -l:libnccl.so.2 -Xlinker -rpath -Xlinker $(NCCL_LIB)" || true); \
	  echo "  build/ring15/{solution,timeline}-$$name ($$flags)"; \
	  $(NVCC) $(NVCC_FLAGS) $(SM90A_FLAGS) $$flags $(REF_INC) $(RING_SOL) $(HARNESS_CU_OBJ) \
	    $(HARNESS_C_OBJ) -o build/ring15/solution-$$name -lgomp $$libs & \
	  $(NVCC) $(NVCC_FLAGS) $(SM90A_FLAGS) $$flags $(REF_INC) $(RING_TOOL) \
	    -o build/ring15/timeline-$$name $$libs & \
	done; fail=0; for j in $$(jobs -p); do wait $$j || fail=1; done; exit $$fail

# No GPU needed (PTX only: lesson 09's kernels are ptxas-checked by check-09): the starter
# compiles and still says "not implemented"; tests/ring_hostrun (with tests/ring/ring_logic.cu's
# tests) runs the solution's ring on the CPU over a fake CUDA runtime, with fake NCCL on 1 to 4
# fake GPUs and then the virtual ring where nccl.h is found, else the virtual ring alone; the timeline
# tool compiles.
# RING_LOGIC_SRC=lessons/15-ring-attention/ring_attention.cu runs the tests on your file.
# (the device code is compiled to PTX, never run here: cicc at -O0 spends less time on it)
RING_CHECK_FLAGS = -O2 -std=c++17 -gencode arch=compute_90a,code=compute_90a -Xcicc -O0 $(REF_INC)
RING_LOGIC_SRC ?=
CXX_RING ?= g++
ring-hostrun:
	@if ! command -v $(NVCC) >/dev/null 2>&1; then echo "ring-hostrun: SKIP (no nvcc)"; exit 0; fi; \
	set -e; mkdir -p tests/bin build/ring_hostrun; \
	if [ -n "$(NCCL_ROOT)" ]; then t="-DRING_NCCL -I$(NCCL_ROOT)/include"; else t="-DRING_VIRTUAL_RANKS=3"; fi; \
	$(CXX_RING) -O2 -std=c++17 -I$(CUDA_INC) $$t -c tests/ring/ring_fake_cuda.cpp -o build/ring_hostrun/fake.o; \
	$(NVCC) $(RING_CHECK_FLAGS) -cudart none $$t -Itests/ring $(if $(RING_LOGIC_SRC),-DRING_LOGIC_SRC='"../../$(RING_LOGIC_SRC)"') \
	  tests/ring/ring_hostrun.cu build/ring_hostrun/fake.o -o tests/bin/ring_hostrun -lcriterion; \
	tests/bin/ring_hostrun --jobs 1 || { echo "ring-hostrun: $(or $(RING_LOGIC_SRC),$(RING_SOL)) fails the tests above; each failure names the TODO it checks"; exit 1; }; \
	echo "ring-hostrun: $(or $(RING_LOGIC_SRC),$(RING_SOL)) runs right on the CPU ($$( [ -n "$(NCCL_ROOT)" ] && echo fake NCCL || echo virtual ring))"
# Both transports of send_recv where nccl.h is found (fake NCCL, then the virtual ring's copies),
# else the virtual ring alone: $(call ring_hostrun_all,SRC) (empty SRC: the solution).
# The second make (no NCCL_ROOT, so RING=virtual) keeps a stamp of its own: writing the build's
# would mark ./lesson15 and ./solution15 out of date, and the next make would build them again.
ring_hostrun_all = $(MAKE) --no-print-directory ring-hostrun RING_LOGIC_SRC=$(1)$(if $(NCCL_ROOT), && \
  $(MAKE) --no-print-directory ring-hostrun RING_LOGIC_SRC=$(1) NCCL_ROOT= RING_STAMP=build/ring-stamp-hostrun)
# The student's CPU path: your file (emu-lesson15) or the solution (emu-solution15) on the fake runtime.
emu-lesson15:
	@$(call ring_hostrun_all,$(RING_STARTER))
emu-solution15:
	@$(call ring_hostrun_all,)
check-15:
	@if ! command -v $(NVCC) >/dev/null 2>&1; then echo "check-15: SKIP (no nvcc)"; exit 0; fi; \
	set -e; \
	$(NVCC) $(RING_CHECK_FLAGS) -DRING_VIRTUAL_RANKS=2 -c $(RING_STARTER) -o /dev/null || { echo "check-15: the starter does not compile"; exit 1; }; \
	grep -q 'return ATTN_NOT_IMPLEMENTED' $(RING_STARTER) || { echo "check-15: the starter no longer returns ATTN_NOT_IMPLEMENTED"; exit 1; }; \
	$(call ring_hostrun_all,); \
	if [ -n "$(NCCL_ROOT)" ]; then t="-DRING_NCCL -I$(NCCL_ROOT)/include"; else t="-DRING_VIRTUAL_RANKS=3"; fi; \
	$(NVCC) $(RING_CHECK_FLAGS) $$t -c $(RING_TOOL) -o /dev/null; \
	echo "check-15: the starter compiles; the solution's ring runs right on the CPU$(if $(NCCL_ROOT), (fake NCCL and virtual ring)); the timeline tool compiles"

TEST_STEPS += check-15

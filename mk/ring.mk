# mk/ring.mk: what a lesson whose descriptor says transport := nccl builds with (lesson 15, the
# ring across GPUs; its README says how to run it). NCCL is looked for in NCCL_HOME, /usr
# (libnccl-dev), the CUDA toolkit nvcc belongs to, and the nvidia-nccl Python wheel, in that
# order: include/nccl.h and libnccl.so.2, linked with an rpath.
#   RING=nccl (default where NCCL is found): the ring over every visible GPU, one rank each, blocks
#     moved by the copy engines or NCCL, chosen when it runs (./lesson15 --transport ce|nccl; the
#     default: the copy engines where every neighbouring pair has peer access); where the binary
#     sees one GPU when it runs, it takes the virtual ring on it
#   RING=virtual: the ranks on one GPU, blocks moved by device copies (the default without NCCL)
#   RING_NAIVE=1: causal attention on the naive layout (rank r: chunk r)
# How many ranks the virtual ring has is chosen when it runs (./lesson15 --ranks P), not here.
NCCL_HOME ?=
RING_NVCC_ROOT := $(patsubst %/,%,$(dir $(CUDA_INC)))
NCCL_ROOT := $(firstword $(foreach d,$(NCCL_HOME) /usr $(RING_NVCC_ROOT),$(if $(wildcard $(d)/include/nccl.h),$(d))))
ifeq ($(NCCL_ROOT),)
  NCCL_ROOT := $(shell python3 -c 'import nvidia.nccl as m, os; d = list(m.__path__)[0]; print(d if os.path.exists(d + "/include/nccl.h") else "")' 2>/dev/null)
endif
export NCCL_ROOT
NCCL_LIB := $(patsubst %/,%,$(dir $(firstword $(wildcard $(NCCL_ROOT)/lib/libnccl.so.2 $(NCCL_ROOT)/lib64/libnccl.so.2 \
              $(if $(filter /usr,$(NCCL_ROOT)),/usr/lib/*/libnccl.so.2 /usr/lib64/libnccl.so.2)))))
RING_NCCL_HOW := NCCL not found (looked in NCCL_HOME, /usr, $(RING_NVCC_ROOT), the nvidia-nccl Python wheel): \
  install libnccl-dev (apt) or the wheel (pip install nvidia-nccl-cu13), or point NCCL_HOME at a directory with \
  include/nccl.h and lib/libnccl.so.2
RING ?= $(if $(NCCL_ROOT),nccl,virtual)
RING_NAIVE ?= 0
RING_FLAGS = $(if $(filter nccl,$(RING)),-DRING_NCCL -I$(NCCL_ROOT)/include) \
  $(if $(filter 1,$(RING_NAIVE)),-DRING_NAIVE_CAUSAL=1)
ifeq ($(origin P),command line)
  $(warning P=$(P): the virtual ring's ranks are chosen when it runs: ./lesson$(strip $(call lessons_with,transport,nccl)) --ranks $(P))
endif
RING_LIBS = $(if $(filter nccl,$(RING)),-L$(NCCL_LIB) -l:libnccl.so.2 -Xlinker -rpath -Xlinker $(NCCL_LIB))
# a change of RING, RING_NAIVE or LIB_FLAGS relinks the binaries (as GPU_ARCH does)
RING_STAMP := build/ring-stamp
RING_STAMP_TEXT := $(RING_FLAGS) $(RING_LIBS) $(LIB_FLAGS)
$(if $(DRY_RUN),,$(shell mkdir -p build; [ "$$(cat $(RING_STAMP) 2>/dev/null)" = "$(RING_STAMP_TEXT)" ] || echo "$(RING_STAMP_TEXT)" > $(RING_STAMP)))
# the shell lines a build of such a lesson runs first
RING_NOTE = if [ "$(RING)" = nccl ] && [ -z "$(NCCL_ROOT)" ]; then echo "$(RING_NCCL_HOW)"; exit 4; fi; \
	if [ -z "$(NCCL_ROOT)" ]; then echo "note: $(RING_NCCL_HOW); building the virtual ring (its ranks on one GPU: --ranks P)"; fi
# make print-VAR: a variable's value, for the worklogs' scripts (lesson 15's bench.sh: RING_FLAGS, RING_LIBS)
print-%:
	@echo '$($*)'

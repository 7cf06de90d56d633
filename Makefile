# flash-attention-course: build, grade, test.
#   make lessonN / solutionN   build ./lessonN (your file) or ./solutionN
#   make grade [SOLUTIONS=1]   build and grade every lesson, one scoreboard row as each finishes
#   make test (test-full)      the test suite (CPU; GPU tests run when a GPU is present); make emu-lessonN: your file on the CPU
#   make results               on a GPU: grade + time every solution into docs/results/<gpu>.csv
#   make ptxas-lessonN / sass-lessonN / sanitize-lessonN   (also for solutionN)
#   make clean
# GPU_ARCH=90 (or sm_90) picks the target; by default it is read from nvidia-smi,
# and with no GPU a portable build (sm_75, sm_80, sm_90 SASS + compute_90 PTX) is made.
# Every other target, and the lesson descriptors the rules read: CONTRIBUTING.md, "Make targets".

SHELL := /bin/bash
NVCC ?= $(shell command -v nvcc 2>/dev/null || echo /usr/local/cuda/bin/nvcc)
# The CUDA toolkit's include folder, for the CPU emulators' host builds: asked of nvcc itself (it
# may be a wrapper or a link outside its toolkit). Exported, so sub-makes do not ask again.
HASH := \#
space := $() $()
ifeq ($(origin CUDA_INC),undefined)
CUDA_INC := $(or $(realpath $(shell echo '$(HASH)include <cuda_runtime_api.h>' | $(NVCC) -E -x c++ - 2>/dev/null | \
              sed -n 's|^$(HASH) *[0-9]* "\(.*\)/cuda_runtime_api\.h".*|\1|p' | head -n 1)),$(dir $(NVCC))../include)
endif
export CUDA_INC
# python3 as the interpreter itself, first on every recipe's PATH: `make test` starts python3 some
# 120 times, and a version manager's shim adds about 0.6 s of CPU to each start. A small sh script
# rather than a link, so that a virtual environment keeps its environment. `make -n` writes nothing.
DRY_RUN := $(findstring n,$(firstword -$(MAKEFLAGS)))
ifeq ($(origin FA_PYTHON),undefined)
FA_PYTHON := $(shell python3 -c 'import sys; print(sys.executable)' 2>/dev/null)
ifneq ($(FA_PYTHON),)
ifeq ($(DRY_RUN),)
$(shell mkdir -p build/python-bin && printf '#!/bin/sh\nexec "%s" "$$@"\n' '$(FA_PYTHON)' > build/python-bin/python3.$$$$ && \
        chmod +x build/python-bin/python3.$$$$ && mv build/python-bin/python3.$$$$ build/python-bin/python3)
endif
export PATH := $(CURDIR)/build/python-bin:$(PATH)
endif
endif
export FA_PYTHON
CC ?= cc
CFLAGS ?= -O2 -std=c11 -Wall -Wextra -fopenmp
NVCC_FLAGS_DEFAULT := -O3 -std=c++17 -lineinfo -Xcompiler -fopenmp -Xcompiler -Wall
NVCC_FLAGS ?= $(NVCC_FLAGS_DEFAULT)
# Experiments: make ptxas-solution4 EXTRA_NVCC_FLAGS=-DRUNTIME_INDEX (keeps the defaults)
NVCC_FLAGS += $(EXTRA_NVCC_FLAGS)

GPU_ARCH ?= $(shell nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n1 | tr -d '. ')
override GPU_ARCH := $(patsubst sm_%,%,$(GPU_ARCH))
ifeq ($(strip $(GPU_ARCH)),)
  ARCH_TAG := portable
  ARCH_FLAGS := -gencode arch=compute_75,code=sm_75 -gencode arch=compute_80,code=sm_80 \
                -gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90
else
  ARCH_TAG := sm_$(GPU_ARCH)
  ARCH_FLAGS := -gencode arch=compute_$(GPU_ARCH),code=sm_$(GPU_ARCH)
endif
BUILD := build/$(ARCH_TAG)
# A lesson whose descriptor says arch := sm_90a (wgmma, setmaxnreg) is built for sm_90a alone,
# whatever GPU_ARCH is (its binary refuses other GPUs at run time, exit 4).
SM90A_FLAGS := -gencode arch=compute_90a,code=sm_90a

# reference/ by role: harness/ (command line, runners, grading, diagnoses), cpu/ (the float64 CPU
# references, FP8 inputs), gpu/ (the unfused baseline, the float64 GPU forward), include/ (what a
# lesson includes), tools/ (the scripts that make and check the course)
HARNESS_C := $(addprefix reference/harness/,cli.c grade.c diagnose.c diagnose_bwd.c rng.c serving.c) \
             $(addprefix reference/cpu/,cpu_reference.c fp8.c cpu_reference_bwd.c)
HARNESS_H := $(wildcard reference/*/*.h)
HARNESS_C_OBJ := $(addprefix build/host/,$(notdir $(HARNESS_C:.c=.o)))
REF_INC := -Ireference/include -Ireference/harness -Ireference/cpu -Ireference/gpu
vpath %.c reference/harness reference/cpu
vpath %.cu reference/harness reference/gpu
# What every GPU binary links (runner_main: main, the runner skeleton; the grading pieces,
# options, cases, CSV, device report, timing, watchdog, poison), plus its runner kind: forward
# (runner_attention: forward and decode, with the serving layouts of runner_serving and
# runner_varlen) or backward (runner_backward), from its descriptor.
HARNESS_FWD_CU := $(addprefix reference/harness/,runner_attention.cu runner_serving.cu runner_varlen.cu)
HARNESS_CU_COMMON := $(filter-out $(HARNESS_FWD_CU) %/runner_backward.cu,$(wildcard reference/harness/runner_*.cu))
HARNESS_CU_COMMON_OBJ := $(addprefix $(BUILD)/,$(notdir $(HARNESS_CU_COMMON:.cu=.o)))
HARNESS_CU_OBJ := $(HARNESS_CU_COMMON_OBJ) $(addprefix $(BUILD)/,$(notdir $(HARNESS_FWD_CU:.cu=.o)))
HARNESS_BWD_CU_OBJ := $(HARNESS_CU_COMMON_OBJ) $(BUILD)/runner_backward.o
HARNESS_ALL_CU_OBJ := $(HARNESS_CU_OBJ) $(BUILD)/runner_backward.o

include mk/lessons.mk
.SECONDEXPANSION:
# a lesson's facts, from its number N or from a path in its folders
runner_obj_n = $(if $(filter backward,$(L$(1)_runner)),$(HARNESS_BWD_CU_OBJ),$(HARNESS_CU_OBJ))
arch_n = $(if $(filter sm_90a,$(L$(1)_arch)),$(SM90A_FLAGS),$(ARCH_FLAGS))
runner_obj_of = $(call runner_obj_n,$(call lesson_num_of_path,$(1)))
arch_of = $(call arch_n,$(call lesson_num_of_path,$(1)))
# another lesson's solution linked as a library (descriptor: library := N FLAGS; compiled once with
# -DFA_LIBRARY_ONLY and FLAGS, or LIB_FLAGS), and a transport (transport := nccl: mk/ring.mk)
lib_flags_n = -DFA_LIBRARY_ONLY $(or $(LIB_FLAGS),$(wordlist 2,99,$(L$(1)_library)))
lib_obj_n = $(if $(L$(1)_library),$(BUILD)/lib/solution$(firstword $(L$(1)_library))$(subst =,_,$(subst -D,-,$(subst $(space),,$(call lib_flags_n,$(1))))).o)
link_flags_n = $(if $(L$(1)_transport),$(RING_FLAGS))
link_libs_n = $(call lib_obj_n,$(1)) $(call runner_obj_n,$(1)) $(HARNESS_C_OBJ) -lgomp $(if $(L$(1)_transport),$(RING_LIBS))
pad = $(if $(filter 1 2 3 4 5 6 7 8 9,$(1)),0$(1),$(1))
src_of = $(firstword $(wildcard $(1)/$(call pad,$(2))-*/$(L$(2)_source)))
# a binary's name: lesson9, solution9-step3 (lesson 9, its worklog's variant step3)
kind_of = $(if $(filter solution%,$(1)),solutions,lessons)
stem_of = $(patsubst solution%,%,$(patsubst lesson%,%,$(1)))
num_of = $(firstword $(subst -, ,$(call stem_of,$(1))))
variant_of = $(patsubst -%,%,$(patsubst $(call num_of,$(1))%,%,$(call stem_of,$(1))))
bin_src = $(call src_of,$(call kind_of,$(1)),$(call num_of,$(1)))

.PHONY: all lessons solutions grade test clean results help FORCE
.DEFAULT_GOAL := help
help:
	@sed -n "2,11p" Makefile | sed "s/^# \{0,1\}//"
FORCE:

all: lessons solutions
lessons: $(addprefix lesson,$(LESSON_NUMS))
solutions: $(addprefix solution,$(LESSON_NUMS))

build/host/%.o: %.c $(HARNESS_H) | build/host
	$(CC) $(CFLAGS) $(REF_INC) -c $< -o $@
$(BUILD)/%.o: %.cu $(HARNESS_H) | $(BUILD)
	$(NVCC) $(NVCC_FLAGS) $(ARCH_FLAGS) -DBUILD_TARGET='"$(ARCH_TAG)"' $(REF_INC) -c $< -o $@
build/host $(BUILD):
	@mkdir -p $@

# $(call variant_src,BINARY): writes build/variants/BINARY.cu, the binary's source with its worklog
# variants applied (reference/tools/variant.py), and sets $$src and $$defs (the variants' -D flags)
variant_src = src=$(call bin_src,$(1)); defs=; if [ -n "$(call variant_of,$(1))" ]; then \
	defs=$$(python3 reference/tools/variant.py $(call num_of,$(1)) $$src build/variants/$(1).cu $(subst +, ,$(call variant_of,$(1)))) \
	  || exit 1; src=build/variants/$(1).cu; fi
# A lesson is one source file: .c (CPU, lesson 01) links the C harness with runner_softmax.c; .cu
# the GPU runner of its kind. nvcc's -Xptxas -v report is kept in build/ptxas/BINARY.log (first
# line: the source and whether the flags were the defaults), which tests/checks/ptxas_report.sh
# reads instead of compiling the same file again; written beside, then renamed.
nvcc_flags_kind = $(if $(filter-out $(NVCC_FLAGS_DEFAULT),$(NVCC_FLAGS))$(filter-out $(NVCC_FLAGS),$(NVCC_FLAGS_DEFAULT)),custom,default)
define link_lesson
	@mkdir -p build/ptxas build/variants; $(call variant_src,$(1)); \
	if [ -z "$$src" ]; then echo "no source for $(1) (expected lessons/NN-*/*.cu)"; exit 2; fi; \
	if [ "$${src%.c}" != "$$src" ]; then cmd="$(CC) $(CFLAGS) $(REF_INC) $$src build/host/runner_softmax.o $(HARNESS_C_OBJ) -o $(1) -lm"; \
	  echo "$$cmd"; $$cmd; exit; fi; \
	$(if $(L$(call num_of,$(1))_transport),$(RING_NOTE);) \
	cmd="$(NVCC) $(NVCC_FLAGS) $(call arch_n,$(call num_of,$(1))) $$defs $(call link_flags_n,$(call num_of,$(1))) $(REF_INC) $$src -o $(1) $(call link_libs_n,$(call num_of,$(1)))"; \
	echo "$$cmd"; log=build/ptxas/$(1).log; rm -f $$log; \
	{ echo "$(HASH) ptxas -v of $$src, $(if $(call variant_of,$(1)),custom,$(nvcc_flags_kind)) flags, $(call arch_n,$(call num_of,$(1)))"; $$cmd -Xptxas -v 2>&1; } > $$log.part; rc=$$?; \
	grep -vE '^ptxas info|^ +[0-9]+ bytes stack frame|^$(HASH) ptxas -v of' $$log.part >&2; \
	if [ $$rc -ne 0 ]; then rm -f $$log $$log.part; exit $$rc; fi; mv $$log.part $$log
endef

# Binaries depend on the target architecture: changing GPU_ARCH relinks them.
ARCH_STAMP := build/arch-stamp
$(if $(DRY_RUN),,$(shell mkdir -p build; [ "$$(cat $(ARCH_STAMP) 2>/dev/null)" = "$(ARCH_TAG)" ] || echo "$(ARCH_TAG)" > $(ARCH_STAMP)))
deps_of = $(ARCH_STAMP) $(HARNESS_C_OBJ) $(if $(filter %.cu,$(1)),$(call runner_obj_of,$(1)),build/host/runner_softmax.o)
bin_deps = $(call bin_src,$(1)) $(call deps_of,$(call bin_src,$(1))) $(if $(call variant_of,$(1)),FORCE) \
  $(call lib_obj_n,$(call num_of,$(1))) $(if $(L$(call num_of,$(1))_transport),$(RING_STAMP))
define lib_rule
$(call lib_obj_n,$(1)): $(call src_of,solutions,$(firstword $(L$(1)_library))) $(HARNESS_H)
	@mkdir -p $$(dir $$@)
	$(NVCC) $(NVCC_FLAGS) $(call arch_n,$(firstword $(L$(1)_library))) $(call lib_flags_n,$(1)) $(REF_INC) -c $$< -o $$@
endef
$(foreach n,$(LESSON_NUMS),$(if $(L$(n)_library),$(eval $(call lib_rule,$(n)))))
# make link-objects-N: the library objects lesson N links (tests/mutants/run.py links its mutants so)
link-objects-%: $$(call lib_obj_n,$$*)
	@echo $(call lib_obj_n,$*)
lesson%: $$(call bin_deps,$$@)
	$(call link_lesson,$@)
solution%: $$(call bin_deps,$$@)
	$(call link_lesson,$@)

# Inspection: registers/smem/spills, SASS, sanitizers. STEM is a binary's name (lessonN, solutionN-VARIANT);
# ptxas-lessonN SRC=path compiles that file (a copy of the lesson's) instead.
ptxas-%:
	@mkdir -p build/variants; $(if $(SRC),src=$(SRC); defs=,$(call variant_src,$*)); echo "== nvcc -Xptxas -v $$src $$defs ($(call arch_n,$(call num_of,$*)))"; \
	log=build/variants/ptxas-$*.log; \
	if ! $(NVCC) $(NVCC_FLAGS) $$defs $(call arch_n,$(call num_of,$*)) $(REF_INC) -Xptxas -v -c $$src -o /dev/null > $$log 2>&1; then \
	  grep -vE '^ptxas info *: (Compiling|Function properties|Used)|bytes stack frame' $$log; echo "ptxas-$*: nvcc failed on $$src (its messages above)"; exit 1; fi; \
	grep -E 'Compiling entry|Function properties|registers|spill|stack frame' $$log | sed -E 's/^ptxas info *: //'
sass-%: %
	@mkdir -p build && cuobjdump --dump-sass ./$* > build/$*.sass
	@echo "== instruction counts in ./$* (full listing: build/$*.sass)"
	@grep -oE '\b(HMMA|LDSM|LDGSTS|HGMMA|UTMALDG|SYNCS|FFMA|MUFU\.EX2|BAR\.SYNC|LDS|STS|LDL|STL)[.A-Z0-9]*' build/$*.sass | sort | uniq -c
# Each head dimension of the descriptor (each is its own kernel instantiation), causal too where
# the lesson has it, in its first dtype (or DTYPE); SAN_D=128 runs one d. A descriptor's
# sanitize_cases replaces that grid. racecheck does not model mbarriers (nor TMA writes, wgmma
# reads): where the descriptor says racecheck := advisory, memcheck is the gate and racecheck's
# report is printed with that note (the grader's re-run and the mutants catch those races).
SAN_D = $(L$(call num_of,$*)_head_dims)
SAN_ARGS = --check-only --dtype $(or $(DTYPE),$(firstword $(L$(call num_of,$*)_dtypes)))
SAN_GRID = $(or $(L$(call num_of,$*)_sanitize_cases),$(foreach d,$(SAN_D),-b 1 -H 2 -n 77 -d $(d) \
  $(if $(filter yes,$(L$(call num_of,$*)_causal)),| -b 1 -H 2 -n 77 -d $(d) --causal) |))
SAN_RACE_NOTE = racecheck on $*: the hazards above (if any) are not a verdict: this kernel orders its shared memory with mbarriers, which racecheck does not model (memcheck above is the gate)
sanitize-%: %
	@set -e; IFS='|' read -ra cases <<<'$(SAN_GRID)'; for c in "$${cases[@]}"; do [ -n "$${c// }" ] || continue; \
	  echo "+ compute-sanitizer --tool memcheck ./$* $(SAN_ARGS) $$c"; \
	  compute-sanitizer --tool memcheck --error-exitcode 9 ./$* $(SAN_ARGS) $$c; \
	  echo "+ compute-sanitizer --tool racecheck ./$* $(SAN_ARGS) $$c"; \
	  compute-sanitizer --tool racecheck --racecheck-report all --error-exitcode 9 ./$* $(SAN_ARGS) $$c $(if $(filter advisory,$(L$(call num_of,$*)_racecheck)),|| true; echo "$(SAN_RACE_NOTE)"); \
	done

# make variant N=9 OUT=build/x/s [VARIANTS="step3 exp2-fma"] [DEFS=-DX=1] [SRC=your file]: one build
# of lesson N's solution (or SRC) with worklog variants and flags, ptxas's report in OUT.ptxas:
# what the worklogs' scripts build
variant: $(HARNESS_C_OBJ) $$(call runner_obj_n,$$(N)) $$(call lib_obj_n,$$(N))
	@[ -n "$(N)" ] && [ -n "$(OUT)" ] || { echo "usage: make variant N=<lesson> OUT=<binary> [VARIANTS='a b'] [DEFS='-DX=1'] [SRC=<file>]"; exit 2; }
	@mkdir -p $(dir $(OUT)); defs=$$(python3 reference/tools/variant.py $(N) $(or $(SRC),$(call src_of,solutions,$(N))) $(OUT).cu $(VARIANTS)) || exit 1; \
	echo "$(NVCC) ... $$defs $(DEFS) $(OUT).cu ($(or $(SRC),solution $(N))$(if $(VARIANTS), + $(VARIANTS))) -o $(OUT)"; \
	$(NVCC) $(NVCC_FLAGS) $(call arch_n,$(N)) $$defs $(DEFS) $(call link_flags_n,$(N)) -Xptxas -v $(REF_INC) $(OUT).cu \
	  -o $(OUT) $(call link_libs_n,$(N)) 2> $(OUT).ptxas || { cat $(OUT).ptxas; exit 1; }

grade:
	@bash reference/tools/grade.sh $(if $(SOLUTIONS),solutions,lessons)
results:
	@NVCC=$(NVCC) bash reference/tools/results.sh
clean:
	rm -rf build lesson[0-9]* solution[0-9]* tests/bin

# Tests: each mk/*.mk adds its steps to TEST_STEPS (and the exhaustive ones to TEST_FULL_STEPS).
# `make test` runs the steps TEST_JOBS (2) at a time, each step's output printed whole when it
# ends (--output-sync), the longest first, then test-results (last: the other checks run and
# report even while the GPU results are stale); `make test-full` adds the exhaustive steps.
TEST_STEPS :=
TEST_FULL_STEPS :=
TEST_JOBS ?= 2
-include $(filter-out mk/lessons.mk,$(wildcard mk/*.mk))
.PHONY: test-steps test-full-steps test-full test-results
# the longest first (each alone on a 2-core machine: emu-report-check about 65 s, test-docs 50, the
# sm_90a lessons' emulators 15-40, test-step-ladder 30, test-docs-selftest 26; the other lessons'
# emulators 8-27), so that two at a time end together instead of one long step ending alone
TEST_LONG := emu-report-check test-docs $(addprefix emu-,$(foreach n,$(call lessons_with,arch,sm_90a),$(call pad,$(n)))) \
  hostsim-forward test-step-ladder test-docs-selftest emu-starters $(filter emu-%,$(TEST_STEPS)) \
  $(filter hostsim-%,$(TEST_STEPS)) test-new-lesson bench-selftest mutants-cpu
test-steps: $(filter $(TEST_STEPS),$(TEST_LONG)) $(filter-out $(TEST_LONG),$(TEST_STEPS))
test-full-steps: $(TEST_FULL_STEPS)
test-results:
	bash tests/checks/check_results_fresh.sh
test:
	@$(MAKE) --no-print-directory -j$(TEST_JOBS) --output-sync=target test-steps
	@$(MAKE) --no-print-directory test-results
test-full:
	@$(MAKE) --no-print-directory -j$(TEST_JOBS) --output-sync=target test-steps test-full-steps CHECK_FULL=1
	@$(MAKE) --no-print-directory test-results

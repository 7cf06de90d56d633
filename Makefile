# flash-attention-course: build, grade, test.
#   make lessonN / solutionN   build ./lessonN (your file) or ./solutionN
#   make grade [SOLUTIONS=1]   build and grade every lesson, one scoreboard row as each finishes
#   make test (test-full)      the test suite (CPU; GPU tests run when a GPU is present); make emu-lessonN: your file on the CPU
#   make results               on a GPU: grade + time every solution into docs/results/<gpu>.csv
#   make ptxas-lessonN / sass-lessonN / sanitize-lessonN   (also for solutionN)
#   make clean
# GPU_ARCH=90 (or sm_90) picks the target; by default it is read from nvidia-smi,
# and with no GPU a portable build (sm_75, sm_80, sm_90 SASS + compute_90 PTX) is made.

SHELL := /bin/bash
NVCC ?= $(shell command -v nvcc 2>/dev/null || echo /usr/local/cuda/bin/nvcc)
# The CUDA toolkit's include folder (cuda.h, cuda_runtime_api.h, cuda_fp16.h), for the CPU
# emulators' host builds: asked of nvcc itself, because nvcc may be a wrapper or a link outside
# its toolkit (its own path then says nothing). Exported, so sub-makes do not ask again.
HASH := \#
ifeq ($(origin CUDA_INC),undefined)
CUDA_INC := $(or $(realpath $(shell echo '$(HASH)include <cuda_runtime_api.h>' | $(NVCC) -E -x c++ - 2>/dev/null | \
              sed -n 's|^$(HASH) *[0-9]* "\(.*\)/cuda_runtime_api\.h".*|\1|p' | head -n 1)),$(dir $(NVCC))../include)
endif
export CUDA_INC
# python3 as the interpreter itself, first on every recipe's PATH: `make test` starts python3
# some 120 times, and a version manager's shim (pyenv's is a bash script) adds about 0.6 s of
# CPU to each start. Asked once (exported, so sub-makes do not ask again); a small sh script
# rather than a link, so that a virtual environment's interpreter keeps its environment.
# `make -n` writes nothing: the shim and the stamps below are written only when make runs recipes.
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

# Shared C part of the harness (no CUDA): lesson 01 and the unit tests link only this.
HARNESS_C := reference/harness/cli.c reference/harness/grade.c reference/cpu/cpu_reference.c reference/cpu/fp8.c reference/cpu/cpu_reference_bwd.c reference/harness/diagnose.c reference/harness/diagnose_bwd.c reference/harness/rng.c
HARNESS_H := $(wildcard reference/*/*.h)
HARNESS_C_OBJ := $(addprefix build/host/,$(notdir $(HARNESS_C:.c=.o)))
# reference/ by role: harness/ (command line, runners, grading, diagnoses), cpu/ (the float64 CPU
# references, FP8 inputs), gpu/ (the unfused baseline, the float64 GPU forward), include/ (what a
# lesson includes), tools/ (the scripts that make and check the course)
REF_INC := -Ireference/include -Ireference/harness -Ireference/cpu -Ireference/gpu
vpath %.c reference/harness reference/cpu
vpath %.cu reference/harness reference/gpu
# GPU part: what every GPU binary links (runner_main: main, the one runner skeleton; runner_grade:
# the grading pieces; runner_common: options, cases, CSV; the device report, timing, watchdog,
# poison), plus the kind of lesson it plugs in (runner_main.h). HARNESS_CU_OBJ is what a forward
# lesson links (runner_attention: forward and decode); a source that defines attention_backward
# (lessons 10-11) links HARNESS_BWD_CU_OBJ (runner_backward) instead.
HARNESS_CU_COMMON := $(filter-out reference/harness/runner_attention.cu reference/harness/runner_backward.cu,$(wildcard reference/harness/runner_*.cu))
HARNESS_CU_COMMON_OBJ := $(addprefix $(BUILD)/,$(notdir $(HARNESS_CU_COMMON:.cu=.o)))
HARNESS_CU_OBJ := $(HARNESS_CU_COMMON_OBJ) $(BUILD)/runner_attention.o
HARNESS_BWD_CU_OBJ := $(HARNESS_CU_COMMON_OBJ) $(BUILD)/runner_backward.o
HARNESS_ALL_CU_OBJ := $(HARNESS_CU_OBJ) $(if $(wildcard reference/harness/runner_backward.cu),$(BUILD)/runner_backward.o)
# Which runner a source links, and which GPU code it gets, are its lesson's descriptor's (runner,
# arch; mk/lessons.mk): a lesson whose kernels need sm_90a (wgmma, setmaxnreg; 09, 13-15) is
# built for sm_90a alone, whatever GPU_ARCH is (its binary refuses other GPUs at run time, exit 4).
SM90A_FLAGS := -gencode arch=compute_90a,code=sm_90a
include mk/lessons.mk
# a lesson's facts come from its descriptor (mk/lessons.mk); these take a source path
runner_obj_of = $(if $(filter backward,$(L$(call lesson_num_of_path,$(1))_runner)),$(HARNESS_BWD_CU_OBJ),$(HARNESS_CU_OBJ))
arch_of = $(if $(filter sm_90a,$(L$(call lesson_num_of_path,$(1))_arch)),$(SM90A_FLAGS),$(ARCH_FLAGS))

pad = $(if $(filter 1 2 3 4 5 6 7 8 9,$(1)),0$(1),$(1))
src_of = $(firstword $(wildcard $(1)/$(call pad,$(2))-*/$(L$(2)_source)))

.PHONY: all lessons solutions grade test clean results help
.DEFAULT_GOAL := help
help:
	@sed -n "2,10p" Makefile | sed "s/^# \{0,1\}//"; echo "  make docs / docs-check / docs-browser-check, make bench / bench-quick, make mutants / fuzz"; echo "  make gpu-check             maintainers, on a GPU: the full check, a summary table (CONTRIBUTING.md)"; echo "  make starters / new-lesson  maintainers: the starters from the solutions; a new lesson (CONTRIBUTING.md)"

all: lessons solutions
lessons: $(addprefix lesson,$(LESSON_NUMS))
solutions: $(addprefix solution,$(LESSON_NUMS))

build/host/%.o: %.c $(HARNESS_H) | build/host
	$(CC) $(CFLAGS) $(REF_INC) -c $< -o $@
$(BUILD)/%.o: %.cu $(HARNESS_H) | $(BUILD)
	$(NVCC) $(NVCC_FLAGS) $(ARCH_FLAGS) -DBUILD_TARGET='"$(ARCH_TAG)"' $(REF_INC) -c $< -o $@
build/host $(BUILD):
	@mkdir -p $@

# A lesson is one source file: .c (CPU, lesson 01) links the C harness with
# reference/harness/runner_softmax.c (build/host/runner_softmax.o); .cu links the GPU runner.
define link_lesson
	@if [ -z "$(2)" ]; then echo "no source for $(1) (expected lessons/NN-*/*.cu)"; exit 2; fi
	$(if $(filter %.c,$(2)),\
	  $(CC) $(CFLAGS) $(REF_INC) $(2) build/host/runner_softmax.o $(HARNESS_C_OBJ) -o $(1) -lm,\
	  $(call nvcc_with_ptxas_log,$(1),$(2),$(NVCC) $(NVCC_FLAGS) $(call arch_of,$(2)) $(REF_INC) $(2) $(call runner_obj_of,$(2)) $(HARNESS_C_OBJ) -o $(1) -lgomp))
endef
# $(call nvcc_with_ptxas_log,BINARY,SOURCE,COMMAND): run the nvcc COMMAND with -Xptxas -v and keep
# ptxas's report (registers, spills, stack per kernel and architecture) in build/ptxas/BINARY.log;
# print everything else (warnings, errors) as usual. The check-NN steps of `make test` read
# the report through tests/checks/ptxas_report.sh instead of compiling the same file again; its first
# line says whether the build used the default flags (only then is it reused); it appears
# only once complete (written beside, then renamed), so a check never reads half a report.
PTXAS_REPORT = NVCC=$(NVCC) bash tests/checks/ptxas_report.sh
nvcc_flags_kind = $(if $(filter-out $(NVCC_FLAGS_DEFAULT),$(NVCC_FLAGS))$(filter-out $(NVCC_FLAGS),$(NVCC_FLAGS_DEFAULT)),custom,default)
nvcc_with_ptxas_log = @echo '$(3)'; mkdir -p build/ptxas; rm -f build/ptxas/$(1).log; \
	{ echo "$(HASH) ptxas -v of $(2), $(nvcc_flags_kind) flags, $(call arch_of,$(2))"; $(3) -Xptxas -v 2>&1; } > build/ptxas/$(1).log.part; rc=$$?; \
	grep -vE '^ptxas info|^ +[0-9]+ bytes stack frame|^$(HASH) ptxas -v of' build/ptxas/$(1).log.part >&2; \
	if [ $$rc -ne 0 ]; then rm -f build/ptxas/$(1).log build/ptxas/$(1).log.part; exit $$rc; fi; mv build/ptxas/$(1).log.part build/ptxas/$(1).log

# Binaries depend on the target architecture: changing GPU_ARCH relinks them.
ARCH_STAMP := build/arch-stamp
$(if $(DRY_RUN),,$(shell mkdir -p build; [ "$$(cat $(ARCH_STAMP) 2>/dev/null)" = "$(ARCH_TAG)" ] || echo "$(ARCH_TAG)" > $(ARCH_STAMP)))
deps_of = $(ARCH_STAMP) $(HARNESS_C_OBJ) $(if $(filter %.cu,$(1)),$(call runner_obj_of,$(1)),build/host/runner_softmax.o)
.SECONDEXPANSION:
lesson%: $$(call src_of,lessons,$$*) $$(call deps_of,$$(call src_of,lessons,$$*))
	$(call link_lesson,$@,$(call src_of,lessons,$*))
solution%: $$(call src_of,solutions,$$*) $$(call deps_of,$$(call src_of,solutions,$$*))
	$(call link_lesson,$@,$(call src_of,solutions,$*))

# Inspection targets: registers/smem/spills, SASS, sanitizers. STEM is lessonN or solutionN.
kind_of = $(if $(filter solution%,$(1)),solutions,lessons)
num_of = $(patsubst solution%,%,$(patsubst lesson%,%,$(1)))
ptxas-%:
	@src=$(call src_of,$(call kind_of,$*),$(call num_of,$*)); echo "== nvcc -Xptxas -v $$src ($(if $(filter sm_90a,$(L$(call num_of,$*)_arch)),sm_90a,$(ARCH_TAG)))"; \
	$(NVCC) $(NVCC_FLAGS) $(call arch_of,$(call src_of,$(call kind_of,$*),$(call num_of,$*))) $(REF_INC) -Xptxas -v -c $$src -o /dev/null 2>&1 \
	  | grep -E 'Compiling entry|Function properties|registers|spill|stack frame' | sed -E 's/^ptxas info *: //'
sass-%: %
	@mkdir -p build && cuobjdump --dump-sass ./$* > build/$*.sass
	@echo "== instruction counts in ./$* (full listing: build/$*.sass)"
	@grep -oE '\b(HMMA|LDSM|LDGSTS|HGMMA|UTMALDG|SYNCS|FFMA|MUFU\.EX2|BAR\.SYNC|LDL|STL)[.A-Z0-9]*' build/$*.sass | sort | uniq -c
# Every head dimension the lesson has (its descriptor): each is its own kernel instantiation
# (tiles, registers, shared memory), so a bug in one is invisible in the other. SAN_D=128 runs
# just one. The dtype: the lesson's default (the first of its descriptor's), or DTYPE.
SAN_D = $(L$(call num_of,$*)_head_dims)
SAN_ARGS = --check-only -b 1 -H 2 -n 77 --dtype $(or $(DTYPE),$(firstword $(L$(call num_of,$*)_dtypes)))
# racecheck sees __syncthreads and named barriers, not mbarriers: an mbarrier's arrive (release)
# and wait (acquire) order plain shared-memory accesses that racecheck then reports as hazards,
# and it does not see TMA writes or wgmma reads of shared memory at all. So for a source built
# for sm_90a (lesson 09: TMA + mbarrier rings) memcheck is the gate and racecheck's report is
# printed with that note; the grader's determinism re-run and the mutants catch its races.
SAN_MBARRIER = $(if $(filter advisory,$(L$(call num_of,$*)_racecheck)),1,0)
SAN_MEMCHECK = compute-sanitizer --tool memcheck --error-exitcode 9 ./$* $(SAN_ARGS)
SAN_RACECHECK = compute-sanitizer --tool racecheck --racecheck-report all --error-exitcode 9 ./$* $(SAN_ARGS)
SAN_RACE_NOTE = racecheck on $*: the hazards above (if any) are not a verdict: this kernel orders its shared memory with mbarriers, which racecheck does not model (memcheck above is the gate)
# Causal runs too where the lesson's descriptor says causal := yes.
sanitize-%: %
	@set -e; for d in $(SAN_D); do \
	  for c in "" $(if $(filter yes,$(L$(call num_of,$*)_causal)),--causal); do \
	    echo "+ $(SAN_MEMCHECK) -d $$d $$c"; $(SAN_MEMCHECK) -d $$d $$c; \
	    echo "+ $(SAN_RACECHECK) -d $$d $$c"; \
	    $(if $(filter 1,$(SAN_MBARRIER)),$(SAN_RACECHECK) -d $$d $$c || true; echo "$(SAN_RACE_NOTE)",$(SAN_RACECHECK) -d $$d $$c); \
	  done; done

grade:
	@bash reference/tools/grade.sh $(if $(SOLUTIONS),solutions,lessons)

results:
	@NVCC=$(NVCC) bash reference/tools/results.sh

# Tests: Criterion unit tests (CPU), the binaries as a student runs them (GPU
# parts skip without a GPU), and the freshness of the GPU results. Fragments in
# mk/*.mk add their own steps to TEST_STEPS (and the exhaustive ones to TEST_FULL_STEPS).
# `make test` runs the steps TEST_JOBS (2) at a time, each step's output printed whole when it
# ends (--output-sync), then test-results; `make test-full` then runs the exhaustive steps.
TEST_UNIT_SRC := tests/unit/test_reference.c tests/unit/test_fp8.c tests/unit/test_grade.c tests/unit/test_diagnose.c tests/unit/test_cli.c tests/unit/test_lesson01.c
tests/bin/unit: $(TEST_UNIT_SRC) $(HARNESS_C_OBJ) solutions/01-online-softmax/online_softmax.c $(HARNESS_H)
	@mkdir -p tests/bin
	$(CC) $(CFLAGS) $(REF_INC) $(filter %.c %.o,$^) -o $@ -lcriterion -lm
tests/bin/binaries: tests/unit/test_binaries.c $(HARNESS_H)
	@mkdir -p tests/bin
	$(CC) $(CFLAGS) $(REF_INC) $< -o $@ -lcriterion
.PHONY: test-toolkit test-unit test-binaries test-results
test-unit: tests/bin/unit
	tests/bin/unit --jobs 2
test-binaries: tests/bin/binaries lesson1 solution1 lesson2 solution2
	tests/bin/binaries --jobs 1
	@nvidia-smi -L >/dev/null 2>&1 || echo "note: 3 of those tests were skipped (Criterion's synthesis omits them): no NVIDIA driver/GPU found, so GPU grading did not run here"
test-results:
	bash tests/checks/check_results_fresh.sh
# With nvcc present, the emulator steps need its headers: they say SKIP only where nvcc is absent,
# so headers that cannot be found are an error here rather than a silent skip of every emulator.
test-toolkit:
	@if ! command -v $(NVCC) >/dev/null 2>&1; then echo "test-toolkit: no nvcc: the emulator and compile steps SKIP"; \
	 elif [ -f $(CUDA_INC)/cuda_runtime_api.h ] && [ -f $(CUDA_INC)/cuda.h ] && [ -f $(CUDA_INC)/cuda_fp16.h ]; then \
	   echo "test-toolkit: nvcc $(NVCC), CUDA headers in $(CUDA_INC)"; \
	 else echo "test-toolkit: nvcc ($(NVCC)) is here but its headers are not in $(CUDA_INC): set CUDA_INC=<toolkit>/include"; exit 1; fi
TEST_STEPS := test-toolkit test-unit test-binaries
TEST_FULL_STEPS := check-variant-builds
TEST_JOBS ?= 2
# The worklogs' variants (experiments kept as patches and .var files): the check-NN steps of
# make test show that each still applies to its solution; VARIANT_BUILDS=1 (a check-NN run by
# hand, and make test-full's check-variant-builds) also compiles each one.
VARIANT_BUILDS ?= 1
.PHONY: check-variant-builds
check-variant-builds:
	@$(MAKE) --no-print-directory check-07-08 check-11 check-14 VARIANT_BUILDS=1

clean:
	rm -rf build lesson[0-9]* solution[0-9]* tests/bin

-include $(filter-out mk/lessons.mk,$(wildcard mk/*.mk))

.PHONY: test-steps test-full-steps test-full
# the longest steps first (measured one at a time on a fresh clone), so that two at a time end
# close together
TEST_LONG := test-docs emu-starters check-15 test-docs-selftest emu-09 hostsim-forward bench-selftest emu-08 hostsim-11 \
  mutants-cpu emu-11 emu-12 check-07-08 emu-10 emu-03-05 emu-14 emu-13 gpu-check-selftest hostsim-10 check-11 emu-07
test-steps: $(foreach t,$(TEST_LONG),$(filter $(t),$(TEST_STEPS))) $(filter-out $(TEST_LONG),$(TEST_STEPS))
test-full-steps: $(TEST_FULL_STEPS)
# test-results last: the other checks run (and report) even while the GPU results are stale
test:
	@$(MAKE) --no-print-directory -j$(TEST_JOBS) --output-sync=target test-steps VARIANT_BUILDS=0
	@$(MAKE) --no-print-directory test-results
test-full:
	@$(MAKE) --no-print-directory -j$(TEST_JOBS) --output-sync=target test-steps test-full-steps VARIANT_BUILDS=0
	@$(MAKE) --no-print-directory test-results

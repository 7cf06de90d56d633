# mk/emu.mk: the lessons on the CPU, no GPU needed. Each lesson's emulator is its descriptor's
# (emulator, emu_*; CONTRIBUTING.md, "Make targets" and "The lesson descriptor").
#   make emu-lessonN / emu-solutionN   your file (the solution) graded by the real runner over the
#        lesson's emulator (tests/emu/grade.py, or the descriptor's emu_grader); EMU_FILE=path grades
#        that file as lesson N's; EMU_STEP=k a step of a lesson built in steps
#   make emu-NN    the lesson's own emulator driver (emu_main) over the solution, or EMUNN_SRC=file,
#        with EMUNN_VARIANTS (worklog variants, their defines: too) and EMUNN_DEFS; EMU_QUICK=0 (make
#        emu-full-NN): every case; EMU_CASES='args | args' replaces an emu_grader lesson's cases
EMU_CXX ?= g++
EMU_QUICK ?= 1
EMU_ARG = $(if $(filter 1,$(EMU_QUICK)),quick,)
.PHONY: emu-starters emu-starters-all emu-solutions emu-report-check emu-report-check-full test-step-ladder test-step-ladder-full hostsim-forward hostsim-serving

# The real runners compiled by g++ over the fake CUDA runtime (tests/fake_cuda) and tests/hostsim's
# fake harness device (forward; backward)
HOSTSIM_CXX = $(EMU_CXX) -O2 -std=c++17 -fopenmp -w -I$(CUDA_INC) $(REF_INC)
HOSTSIM_COMMON := $(addprefix build/hostsim/,runner_main.o runner_grade.o runner_common.o runner_buffers.o fake_device.o fake_cuda.o) \
  $(HARNESS_C_OBJ)
HOSTSIM_FWD_OBJ := $(addprefix build/hostsim/,runner_attention.o runner_serving.o runner_varlen.o) $(HOSTSIM_COMMON)
HOSTSIM_OBJ := build/hostsim/runner_backward.o $(HOSTSIM_COMMON)
HOSTSIM_HAVE_CUDA := $(wildcard $(CUDA_INC)/cuda_runtime_api.h)
build/hostsim/%.o: %.cu $(HARNESS_H)
	@mkdir -p build/hostsim
	$(HOSTSIM_CXX) -x c++ -c $< -o $@
build/hostsim/fake_device.o: tests/hostsim/fake_device.cpp $(HARNESS_H)
build/hostsim/fake_cuda.o: tests/fake_cuda/fake_cuda.cpp tests/fake_cuda/fake_cuda.h
build/hostsim/fake_device.o build/hostsim/fake_cuda.o:
	@mkdir -p build/hostsim
	$(HOSTSIM_CXX) -Itests/fake_cuda -c $< -o $@
# Every object named as a target, its recipe still the pattern rule's: GNU make 4.4 (Debian 13,
# Homebrew) first tries only the pattern rules whose prerequisites exist or are named so, and on a
# fresh tree would give emu-lessonN to the rule emu-% below ("has no emulator driver"); 4.3 did not
$(HOSTSIM_FWD_OBJ) $(HOSTSIM_OBJ) build/host/cpu_reference.o:
# objects are prerequisites, not a sub-make: two steps of make -j2 would build the same one at once
EMU_OBJS = $(if $(HOSTSIM_HAVE_CUDA),$(HOSTSIM_FWD_OBJ) $(HOSTSIM_OBJ) build/host/cpu_reference.o)
EMU_ENV = EMU_FWD_OBJ='$(HOSTSIM_FWD_OBJ)' EMU_BWD_OBJ='$(HOSTSIM_OBJ)' EMU_CXX='$(EMU_CXX)' EMU_OPT='$(EMU_OPT)' \
  CUDA_INC='$(CUDA_INC)' MAKE='$(MAKE)' HOSTSIM_OBJ='$(HOSTSIM_OBJ)' HOSTSIM_FWD_OBJ='$(HOSTSIM_FWD_OBJ)' CXX_BWD='$(EMU_CXX)' NVCC='$(NVCC)'
NO_CUDA_SKIP = if [ ! -f $(CUDA_INC)/cuda_fp16.h ]; then echo "$@: SKIP (no CUDA headers: install the CUDA toolkit)"; exit 0; fi

# $(call emu_driver,N,SRC,EXTRA_VARIANTS,ENV): lesson N's driver over SRC (its own build directory,
# removed at the end, so that concurrent runs never share a binary); every emu_builds entry
# ("label: -D flags"), each run as it comes, then again with emu_late's environment
emu_driver = $(NO_CUDA_SKIP); \
	mkdir -p build/emu && emu=$$(mktemp -d "$(CURDIR)/build/emu/$@.XXXXXX") && trap 'rm -rf "$$emu"' EXIT && \
	f=$(2); defs=; vs="$(strip $(L$(1)_emu_variants) $(call emu_step_variant,$(1)) $(EMU$(call pad,$(1))_VARIANTS) $(3))"; if [ -n "$$vs" ]; then f="$$emu/full.cu"; \
	  defs=$$(python3 reference/tools/variant.py $(1) $(2) $$f $$vs) || exit 1; fi; \
	python3 $(or $(L$(1)_emu_prep),tests/emu/prep.py) $$f > "$$emu/kernel.cu" || exit 1; \
	IFS='|' read -ra builds <<<'$(or $(L$(1)_emu_builds),:)'; for b in "$${builds[@]}"; do \
	  $(EMU_CXX) -std=c++20 $(or $(EMU_OPT),-O1) -w -Wno-psabi $(L$(1)_emu_flags) -I$(CUDA_INC) $(REF_INC) $$defs $${b$(HASH)*:} \
	    $(EMU$(call pad,$(1))_DEFS) $(if $(EMU_ARG),-DEMU_QUICK_ONLY) -DEMU_NAME='"$(2)$(if $(3), + $(3))"' \
	    $(if $(filter unit,$(L$(1)_emu_kernel)),-x c++ "$$emu/kernel.cu",-DEMU_SRC="\"$$emu/kernel.cu\"") -x c++ $(L$(1)_emu_main) \
	    -x none $(addprefix build/host/,$(addsuffix .o,$(L$(1)_emu_link))) -o "$$emu/emu" -fopenmp -lpthread -lm || exit 1; \
	  $(or $(4),$(L$(1)_emu_env)) timeout 1200 "$$emu/emu" $(EMU_ARG) || exit 1; \
	  $(if $(L$(1)_emu_late),echo "== the same cases again on the late schedule ($(L$(1)_emu_late): asynchronous copies and GEMMs complete as late as allowed; EMU_SCHED=reverse also runs the threads in reverse order)"; \
	    $(or $(4),$(L$(1)_emu_env)) $(L$(1)_emu_late) timeout 1200 "$$emu/emu" $(EMU_ARG) || exit 1;) \
	done
# EMU_STEP=k for a lesson whose steps are builds (the descriptor's emu_step_variant, NAME: the
# worklog variant NAMEk builds step k, with its -D flags; the last step has none: the file as it is)
emu_step_variant = $(if $(and $(EMU_STEP),$(L$(1)_emu_step_variant)),$(notdir $(basename $(wildcard \
  lessons/$(call pad,$(1))-*/worklog/variants/$(L$(1)_emu_step_variant)$(EMU_STEP).var))))
emu_src = $(or $(EMU$(call pad,$(1))_SRC),$(call src_of,solutions,$(1)))
# a lesson with its own grader (emu_grader: SRC NAME quick|full) instead of a driver
emu_grader = $(NO_CUDA_SKIP); src=$(2); [ -n "$$src" ] || { echo "$@: no source"; exit 2; }; \
	defs=; if [ -n "$(strip $(3))" ]; then mkdir -p build/emu && src=build/emu/$@-variants.cu && \
	  defs=$$(python3 reference/tools/variant.py $(1) $(2) $$src $(3)) || exit 2; fi; \
	EMU_DEFS="$$defs $(EMU$(call pad,$(1))_DEFS)" $(EMU_ENV) $(if $(filter %.py,$(L$(1)_emu_grader)),python3,bash) $(L$(1)_emu_grader) $$src $@ $(if $(EMU_ARG),quick,full)
emu-%: $$(if $$(HOSTSIM_HAVE_CUDA),$$(if $$(L$$(call nopad,$$*)_emu_grader),$$(HOSTSIM_FWD_OBJ),$$(addprefix build/host/,$$(addsuffix .o,$$(L$$(call nopad,$$*)_emu_link)))))
	@$(if $(L$(call nopad,$*)_emu_grader),$(call emu_grader,$(call nopad,$*),$(call emu_src,$(call nopad,$*)),$(EMU$*_VARIANTS)),\
	  $(if $(L$(call nopad,$*)_emu_main),$(call emu_driver,$(call nopad,$*),$(call emu_src,$(call nopad,$*)),,),echo "$@: lesson $* has no emulator driver"; exit 2))
	@$(if $(and $(filter 0,$(EMU_QUICK)),$(L$(call nopad,$*)_emu_full),$(if $(EMU$*_SRC),,1)),$(call emu_driver,$(call nopad,$*),$(call emu_src,$(call nopad,$*)),$(firstword $(L$(call nopad,$*)_emu_full)),$(wordlist 2,99,$(L$(call nopad,$*)_emu_full))))
emu-full-%:
	@$(MAKE) --no-print-directory emu-$* EMU_QUICK=0
EMU_DRIVER_NUMS := $(foreach n,$(LESSON_NUMS),$(if $(L$(n)_emu_main)$(L$(n)_emu_grader),$(n)))
TEST_STEPS += $(foreach n,$(EMU_DRIVER_NUMS),emu-$(call pad,$(n)))
TEST_FULL_STEPS += $(foreach n,$(EMU_DRIVER_NUMS),emu-full-$(call pad,$(n)))

# the student's path: the runner over the lesson's emulator (a lesson whose emulator is "own"
# and that has no emu_grader defines emu-lessonN in its own fragment)
EMU_GRADE_NUMS := $(call lessons_with,emulator,fp32 wmma warp driver)
emu_grade = $(if $(L$(1)_emu_grader),$(call emu_grader,$(1),$(or $(EMU_FILE),$(call src_of,$(2),$(1))),),$(NO_CUDA_SKIP); \
	src=$(or $(EMU_FILE),$(call src_of,$(2),$(1))); [ -n "$$src" ] || { echo "$@: no $(2)/$(call pad,$(1))-*/*.cu"; exit 2; }; \
	$(EMU_ENV) python3 tests/emu/grade.py $(1) $$src $(3))
emu-lesson%: $$(EMU_OBJS)
	@$(call emu_grade,$*,lessons,lesson$*)
emu-solution%: $$(EMU_OBJS)
	@$(call emu_grade,$*,solutions,solution$*)

# every starter as shipped says "not implemented" on the CPU path (the runner's exit 3, not a
# crash; built at -O0: a starter runs no kernel to speak of), then solution 02 passes it. make test
# takes the first starter of each emulator (the path a starter takes to its exit is the emulator's
# and the harness's, the same for its lessons); make test-full (emu-starters-all) takes every one.
EMU_STARTER_NUMS := $(filter-out $(call lessons_with,emu_starter,no),$(call lessons_with,emulator,fp32 wmma warp driver own))
EMU_STARTER_FIRST := $(foreach k,fp32 wmma warp driver own,$(firstword $(filter $(call lessons_with,emulator,$(k)),$(EMU_STARTER_NUMS))))
emu-starters-all:
	@$(MAKE) --no-print-directory emu-starters EMU_STARTER_SET='$(EMU_STARTER_NUMS)'
EMU_STARTER_SET ?= $(EMU_STARTER_FIRST)
emu-starters: $$(EMU_OBJS)
	@for n in $(EMU_STARTER_SET); do \
	  out=$$($(MAKE) --no-print-directory emu-lesson$$n EMU_OPT=-O0 EMU_REPORT=0 2>&1); rc=$$?; \
	  if echo "$$out" | grep -q 'SKIP (no CUDA headers'; then echo "emu-starters: SKIP (no CUDA headers)"; exit 0; fi; \
	  if ! echo "$$out" | grep -q '^NOT IMPLEMENTED' || echo "$$out" | grep -qE 'Error 1|Error 2|EMU ERROR|Segmentation'; then \
	    echo "$$out"; echo "emu-starters: make emu-lesson$$n does not say 'not implemented' for the starter as shipped"; exit 1; fi; \
	done; echo "emu-starters: make emu-lessonN says 'not implemented' (the runner's exit 3) for the starters as shipped of lessons $(EMU_STARTER_SET)$(if $(filter-out $(EMU_STARTER_SET),$(EMU_STARTER_NUMS)), (one per emulator; all: make emu-starters-all))"; \
	$(MAKE) --no-print-directory emu-solution$(firstword $(EMU_GRADE_NUMS)) EMU_REPORT=0
emu-solutions:
	@for n in $(EMU_GRADE_NUMS); do $(MAKE) --no-print-directory emu-solution$$n || exit 1; done
TEST_STEPS += emu-starters
TEST_FULL_STEPS += emu-solutions emu-starters-all

# the performance report that follows a passing make emu-lessonN (tests/emu/report.py): each planted
# slow variant flagged for its slowness, no solution flagged (tests/emu/report_check.py, one small case
# each: lessons 08 and 09 in make test, 03 and 07 too in make test-full)
emu-report-check: $(if $(HOSTSIM_HAVE_CUDA),$(HOSTSIM_FWD_OBJ))
	@$(NO_CUDA_SKIP); $(EMU_ENV) python3 tests/emu/report_check.py
emu-report-check-full: $(if $(HOSTSIM_HAVE_CUDA),$(HOSTSIM_FWD_OBJ))
	@$(NO_CUDA_SKIP); $(EMU_ENV) python3 tests/emu/report_check.py rest
TEST_STEPS += emu-report-check
TEST_FULL_STEPS += emu-report-check-full

# step ladders (a descriptor's `steps`): each step passes with its TODOs written, fails without the
# last (tests/checks/step_ladder_test.sh): the first step in make test, every step in test-full
test-step-ladder: $$(EMU_OBJS)
	@$(NO_CUDA_SKIP); bash tests/checks/step_ladder_test.sh
test-step-ladder-full: $$(EMU_OBJS)
	@bash tests/checks/step_ladder_test.sh all
TEST_STEPS += test-step-ladder
TEST_FULL_STEPS += test-step-ladder-full

# The runners themselves on the CPU: hostsim-forward (tests/hostsim/forward.py: a stand-in lesson
# with planted bugs, solutions through the fp32 emulator); hostsim-serving (tests/hostsim/serving.py:
# the paged KV cache and packed batches, a stand-in lesson with planted bugs); hostsim-NN, a lesson's kernels through
# the real runner (descriptor: hostsim := SCRIPT, run as SCRIPT solution [HOSTSIM_SRC]), and
# hostsim-mutants-NN, its mutants through it (SCRIPT mutants [HOSTSIM_MUTANTS])
hostsim-forward: $(if $(HOSTSIM_HAVE_CUDA),$(HOSTSIM_FWD_OBJ))
	@$(NO_CUDA_SKIP); $(EMU_ENV) python3 tests/hostsim/forward.py $(HOSTSIM_FWD_ARGS)
hostsim-serving: $(if $(HOSTSIM_HAVE_CUDA),$(HOSTSIM_FWD_OBJ))
	@$(NO_CUDA_SKIP); $(EMU_ENV) python3 tests/hostsim/serving.py $(HOSTSIM_SERVING_ARGS)
hostsim-mutants-%: $$(EMU_OBJS)
	@$(EMU_ENV) python3 $(L$(call nopad,$*)_hostsim) mutants $(HOSTSIM_MUTANTS)
hostsim-%: $$(EMU_OBJS)
	@$(NO_CUDA_SKIP); $(EMU_ENV) python3 $(L$(call nopad,$*)_hostsim) solution $(HOSTSIM_SRC)
HOSTSIM_NUMS := $(foreach n,$(LESSON_NUMS),$(if $(L$(n)_hostsim),$(n)))
TEST_STEPS += hostsim-forward hostsim-serving $(foreach n,$(HOSTSIM_NUMS),hostsim-$(call pad,$(n)))
TEST_FULL_STEPS += $(foreach n,$(HOSTSIM_NUMS),hostsim-mutants-$(call pad,$(n)))

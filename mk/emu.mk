# mk/emu.mk: the student's CPU path, no GPU needed (tests/emu/grade.py).
#   make emu-lessonN     grade your file, lessons/NN-*/*.cu, on the CPU emulator of its lesson with
#                        the grader's own report and diagnoses: the real runner over a fake CUDA
#                        runtime (tests/hostsim), your kernels emulated one fiber per CUDA
#                        thread (tests/emu/core.h), on the small shapes the emulator can afford (each lesson's list is
#                        in its descriptor, lessons/NN-*/lesson.mk: ragged N, causal, both d, both
#                        dtypes where the lesson has them). Exit status as the runner's: 0 pass, 1 fail, 3 not implemented.
#                        Lessons 09 and 13 run on their emulator's own driver (make
#                        emu-09, emu-13 with your file); for 07, 08, 11 and 12 the emulator's driver
#                        (make emu-NN) then runs your file too. It says what it cannot check: speed, and
#                        races that only real hardware shows.
#   make emu-solutionN   the same for solutions/NN-*/*.cu
#   EMU_FILE=path        grade that file instead (a copy of yours, say), as lesson N's
#   EMU_STEP=k           a lesson built in steps (its descriptor's `steps`: 09) is graded at the step
#                        the file's STARTER_DONE_STEP says it has reached, or at step k when that
#                        is not above it; the run says which step it graded
# the lessons graded here: those whose descriptor names a runner-case emulator or a driver (a
# lesson whose emulator is "own" defines emu-lessonN in its own fragment)
EMU_GRADE_NUMS := $(call lessons_with,emulator,fp32 wmma warp driver)
.PHONY: $(addprefix emu-lesson,$(EMU_GRADE_NUMS)) $(addprefix emu-solution,$(EMU_GRADE_NUMS))
# the runner objects (mk/backward.mk builds them: build/hostsim/%.o)
EMU_FWD_OBJ = $(HOSTSIM_FWD_OBJ)
EMU_BWD_OBJ = $(HOSTSIM_OBJ)
define EMU_GRADE
	@if [ ! -f $(CUDA_INC)/cuda_runtime_api.h ]; then echo "$@: SKIP (no CUDA headers: install the CUDA toolkit)"; exit 0; fi; \
	n=$(1); src=$(or $(EMU_FILE),$(call src_of,$(2),$(1))); [ -n "$$src" ] || { echo "$@: no $(2)/$(call pad,$(1))-*/*.cu"; exit 2; }; \
	$(if $(EMU_OBJS_BUILT),,$(MAKE) --no-print-directory -s $(EMU_FWD_OBJ) $(EMU_BWD_OBJ) build/host/cpu_reference.o &&) \
	EMU_FWD_OBJ='$(EMU_FWD_OBJ)' EMU_BWD_OBJ='$(EMU_BWD_OBJ)' EMU_CXX='$(EMU_CXX)' EMU_OPT='$(EMU_OPT)' CUDA_INC='$(CUDA_INC)' \
	  MAKE='$(MAKE)' python3 tests/emu/grade.py $(1) $$src $(3)
endef
$(foreach n,$(EMU_GRADE_NUMS),$(eval emu-lesson$(n): ; $$(call EMU_GRADE,$(n),lessons,lesson$(n))))
$(foreach n,$(EMU_GRADE_NUMS),$(eval emu-solution$(n): ; $$(call EMU_GRADE,$(n),solutions,solution$(n))))

# make test runs each emulator's quick set (emu-NN); make test-full the exhaustive one of some
# (TEST_FULL_STEPS: emu-full-NN is emu-NN with EMU_QUICK=0, for lesson 12 EMU12_ARG= ).
emu-full-%:
	@$(MAKE) --no-print-directory emu-$* EMU_QUICK=0 EMU12_ARG=

# In make test (emu-starters): every starter, as shipped, is graded "not implemented" on the CPU
# path (exit 3, not a crash; built at -O0, EMU_OPT: a starter runs no kernel to speak of), then
# solution 02 passes it (the other solutions' CPU path runs in
# make test-full: emu-solutions; their emulators run in make test).
EMU_STARTER_NUMS := $(filter-out $(call lessons_with,emu_starter,no),$(call lessons_with,emulator,fp32 wmma warp driver own))
.PHONY: emu-starters emu-solutions
emu-starters: $$(if $$(HOSTSIM_HAVE_CUDA),$$(EMU_FWD_OBJ) $$(EMU_BWD_OBJ) build/host/cpu_reference.o)
	@for n in $(EMU_STARTER_NUMS); do \
	  out=$$($(MAKE) --no-print-directory emu-lesson$$n EMU_OPT=-O0 EMU_OBJS_BUILT=1 2>&1); rc=$$?; \
	  if echo "$$out" | grep -q 'SKIP (no CUDA headers'; then echo "emu-starters: SKIP (no CUDA headers)"; exit 0; fi; \
	  if ! echo "$$out" | grep -q '^NOT IMPLEMENTED' || echo "$$out" | grep -qE 'Error 1|Error 2|EMU ERROR|Segmentation'; then \
	    echo "$$out"; echo "emu-starters: make emu-lesson$$n does not say 'not implemented' for the starter as shipped"; exit 1; fi; \
	done; echo "emu-starters: make emu-lessonN says 'not implemented' (the runner's exit 3) for every starter as shipped ($(EMU_STARTER_NUMS))"; \
	$(MAKE) --no-print-directory emu-solution2 EMU_OBJS_BUILT=1
emu-solutions:
	@for n in $(EMU_GRADE_NUMS); do $(MAKE) --no-print-directory emu-solution$$n || exit 1; done
TEST_STEPS += emu-starters
TEST_FULL_STEPS += emu-solutions

# The step ladders (a descriptor's `steps`): each step passes with its TODOs written, fails
# without the last (tests/checks/step_ladder_test.sh); make test checks each ladder's first step,
# make test-full every step.
.PHONY: test-step-ladder test-step-ladder-full
test-step-ladder: $$(if $$(HOSTSIM_HAVE_CUDA),$$(EMU_FWD_OBJ) $$(EMU_BWD_OBJ) build/host/cpu_reference.o)
	@if [ ! -f $(CUDA_INC)/cuda_fp16.h ]; then echo "test-step-ladder: SKIP (no CUDA headers)"; exit 0; fi; \
	bash tests/checks/step_ladder_test.sh
test-step-ladder-full: $$(if $$(HOSTSIM_HAVE_CUDA),$$(EMU_FWD_OBJ) $$(EMU_BWD_OBJ) build/host/cpu_reference.o)
	@bash tests/checks/step_ladder_test.sh all
TEST_STEPS += test-step-ladder
TEST_FULL_STEPS += test-step-ladder-full

# mk/checks.mk: the checks that need no GPU, each lesson's from its descriptor (CONTRIBUTING.md,
# "Make targets" and "The lesson descriptor").
nopad = $(patsubst 0%,%,$(1))
.PHONY: check-structure test-source-hash starters check-starters new-lesson test-new-lesson test-toolkit \
  test-unit test-binaries check-variant-builds

# make check-NN: lesson NN compiles as its descriptor says (ptxas, spill_budget, registers,
# check_builds, header_check; tests/checks/compile_check.py); CHECK_FULL=1 adds check_builds_full
CHECK_NUMS := $(foreach n,$(LESSON_NUMS),$(if $(L$(n)_ptxas),$(n)))
check-%:
	@NVCC=$(NVCC) python3 tests/checks/compile_check.py $(call nopad,$*) $(if $(filter 1,$(CHECK_FULL)),--full)
check-variant-builds:
	@$(MAKE) --no-print-directory $(foreach n,$(CHECK_NUMS),check-$(call pad,$(n))) CHECK_FULL=1
TEST_STEPS += $(foreach n,$(CHECK_NUMS),check-$(call pad,$(n)))

# Criterion: the harness's C parts (reference/, lesson 01's solution), and the binaries as a student
# runs them (GPU parts skip without a GPU)
TEST_UNIT_SRC := $(filter-out tests/unit/test_binaries.c $(foreach n,$(LESSON_NUMS),$(firstword $(L$(n)_unit_test))),$(wildcard tests/unit/test_*.c))
tests/bin/unit: $(TEST_UNIT_SRC) $(HARNESS_C_OBJ) $(call src_of,solutions,1) $(HARNESS_H)
	@mkdir -p tests/bin
	$(CC) $(CFLAGS) $(REF_INC) $(filter %.c %.o,$^) -o $@ -lcriterion -lm
tests/bin/binaries: tests/unit/test_binaries.c $(HARNESS_H)
	@mkdir -p tests/bin
	$(CC) $(CFLAGS) $(REF_INC) $< -o $@ -lcriterion
test-unit: tests/bin/unit
	tests/bin/unit --jobs 2
# the binaries tests/unit/test_binaries.c runs (./lessonN, ./solutionN): named in the test alone
TEST_BINARIES := $(sort $(patsubst ./%,%,$(filter ./lesson% ./solution%,$(subst ", ,$(file < tests/unit/test_binaries.c)))))
test-binaries: tests/bin/binaries $(TEST_BINARIES)
	tests/bin/binaries --jobs 1
	@nvidia-smi -L >/dev/null 2>&1 || echo "note: 3 of those tests were skipped (Criterion's synthesis omits them): no NVIDIA driver/GPU found, so GPU grading did not run here"
# make test-unit-NN: a lesson's own Criterion test (descriptor: unit_test := TEST.c HEADER REGION...),
# HEADER made from the `// [region R]` parts of the solution (or UNIT_SRC), so that the test checks
# the lesson's own code
test-unit-%: $(HARNESS_C_OBJ)
	@set -- $(L$(call nopad,$*)_unit_test); t=$$1; h=$$2; shift 2; d=build/unit/$*; mkdir -p $$d; \
	src=$(or $(UNIT_SRC),$(call src_of,solutions,$(call nopad,$*))); echo "test-unit-$*: $$t over the regions $$* of $$src"; \
	{ echo "/* made by make test-unit-$* from $$src, its regions $$* */"; echo '$(HASH)include <math.h>'; for r in "$$@"; do \
	  grep -q "// \[region $$r\]" $$src || { echo "test-unit-$*: $$src has no region $$r" >&2; exit 1; }; \
	  awk -v r="$$r" 'index($$0, "// [region " r "]") {on = 1; next} index($$0, "// [end " r "]") {on = 0} on' $$src | grep -v '// \[\(region\|end\) '; \
	done; } > $$d/$$h && $(CC) $(CFLAGS) $(REF_INC) -I$$d $$t $(HARNESS_C_OBJ) -o $$d/test -lcriterion -lm && $$d/test --jobs 2
TEST_STEPS += test-toolkit test-unit test-binaries $(foreach n,$(LESSON_NUMS),$(if $(L$(n)_unit_test),test-unit-$(call pad,$(n))))

# With nvcc present the emulator steps need its headers: they SKIP only where nvcc is absent.
test-toolkit:
	@if ! command -v $(NVCC) >/dev/null 2>&1; then echo "test-toolkit: no nvcc: the emulator and compile steps SKIP"; \
	 elif [ -f $(CUDA_INC)/cuda_runtime_api.h ] && [ -f $(CUDA_INC)/cuda.h ] && [ -f $(CUDA_INC)/cuda_fp16.h ]; then \
	   echo "test-toolkit: nvcc $(NVCC), CUDA headers in $(CUDA_INC)"; \
	 else echo "test-toolkit: nvcc ($(NVCC)) is here but its headers are not in $(CUDA_INC): set CUDA_INC=<toolkit>/include"; exit 1; fi

# the shape of the lesson files (tests/checks/check_structure.py), then its self-test
check-structure:
	@python3 tests/checks/check_structure.py && python3 tests/checks/check_structure.py --selftest >/dev/null || \
	  { python3 tests/checks/check_structure.py --selftest; exit 1; }
# the results fingerprint follows the code, not its comments (reference/tools/source_hash.py)
test-source-hash:
	@bash tests/checks/source_hash_selftest.sh
# starters made from their solutions (reference/tools/starters.py); FORCE=1 overwrites a starter edited by hand
starters:
	@python3 reference/tools/starters.py --write $(if $(filter 1,$(FORCE)),--force)
check-starters:
	@python3 reference/tools/starters.py --check && python3 tests/checks/starters_selftest.py
# make new-lesson NUM=16 NAME=paged-decode [TITLE="one line"]: a lesson from reference/tools/lesson_template
new-lesson:
	@python3 reference/tools/new_lesson.py "$(NUM)" "$(NAME)" "$(TITLE)"
test-new-lesson: $$(if $$(HOSTSIM_HAVE_CUDA),$$(HOSTSIM_FWD_OBJ) build/host/cpu_reference.o)
	@bash tests/checks/new_lesson_test.sh
TEST_STEPS += check-structure test-source-hash check-starters test-new-lesson

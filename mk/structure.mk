# mk/structure.mk: the shape of the lesson files (tests/checks/check_structure.py). In `make test`:
#   make check-structure   no getenv in solutions/, no __global__ over 200 lines (starters and
#                          solutions), no solution over 850 lines, every PTX wrapper defined in
#                          its header in reference/include/ and in the lesson that teaches it,
#                          nowhere else, the two copies the same; then the check's self-test
.PHONY: check-structure
check-structure:
	@python3 tests/checks/check_structure.py && python3 tests/checks/check_structure.py --selftest >/dev/null || \
	  { python3 tests/checks/check_structure.py --selftest; exit 1; }

TEST_STEPS += check-structure

# The results fingerprint follows the code, not its comments (reference/tools/source_hash.py).
.PHONY: test-source-hash
test-source-hash:
	@bash tests/checks/source_hash_selftest.sh

TEST_STEPS += test-source-hash

# Starters are made from their solutions (reference/tools/starters.py: the solution marks each
# TODO's answer and carries the starter's lines as "//| " comments).
#   make starters          write every lessons/NN-*/<file> from solutions/NN-*/<file>; a starter
#                          edited by hand since it was last made is kept and named (FORCE=1
#                          overwrites it)
#   make check-starters    (in make test) every committed starter is what its solution makes;
#                          then the generator's self-test
.PHONY: starters check-starters
starters:
	@python3 reference/tools/starters.py --write $(if $(filter 1,$(FORCE)),--force)
check-starters:
	@python3 reference/tools/starters.py --check && python3 tests/checks/starters_selftest.py

TEST_STEPS += check-starters

# A new lesson from the template (reference/tools/new_lesson.py): make new-lesson NUM=16
# NAME=paged-decode [TITLE="one line"] writes its solution, descriptor, text and starter.
.PHONY: new-lesson
new-lesson:
	@python3 reference/tools/new_lesson.py "$(NUM)" "$(NAME)" "$(TITLE)"
# make test-new-lesson (in make test): tests/checks/new_lesson_test.sh, make new-lesson in a copy of the tree
.PHONY: test-new-lesson
test-new-lesson: $$(if $$(HOSTSIM_HAVE_CUDA),$$(EMU_FWD_OBJ) build/host/cpu_reference.o)
	@bash tests/checks/new_lesson_test.sh
TEST_STEPS += test-new-lesson

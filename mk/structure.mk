# mk/structure.mk: the shape of the lesson files (tests/check_structure.py). In `make test`:
#   make check-structure   no getenv in solutions/, no __global__ over 200 lines (starters and
#                          solutions), no solution over 850 lines, every PTX wrapper defined in
#                          its header in reference/include/ and in the lesson that teaches it,
#                          nowhere else, the two copies the same; then the check's self-test
.PHONY: check-structure
check-structure:
	@python3 tests/check_structure.py && python3 tests/check_structure.py --selftest >/dev/null || \
	  { python3 tests/check_structure.py --selftest; exit 1; }

TEST_STEPS += check-structure

# The results fingerprint follows the code, not its comments (reference/source_hash.py).
.PHONY: test-source-hash
test-source-hash:
	@bash tests/source_hash_selftest.sh

TEST_STEPS += test-source-hash

# mk/decode.mk: lesson 12, flash decoding. In `make test` (no GPU needed):
#   make check-12        starter and solution compile for sm_75 and sm_90; the solution's kernels
#                        do not spill (ptxas -v); SKIP without nvcc
#   make emu-12          the solution's kernel on the CPU warp emulator (tests/warp_emu/emu12.cpp):
#                        decode shapes split and merged by the last block of each group, ragged
#                        lengths, causal aligned to the end, GQA groups, 16 to 256 rows per group,
#                        fp16 and bf16, d 64 and 128, graded against float64; both cp.async
#                        timings. EMU12_SRC=lessons/12-flash-decoding/flash_decoding.cu runs yours
#   make test-decode     Criterion (tests/unit/test_decode.c): the merge of splits (and why it needs
#                        the max), the prefix reference, the decode command line, the solution's
#                        split plan. DECODE_SRC=lessons/12-flash-decoding/flash_decoding.cu checks
#                        yours (its "config" and "plan" regions) instead
#   make decode-selftest the decode benchmark's scripts on made-up data (bench/decode_selftest.sh)
#   make decode-cli      the binaries refuse what does not fit, exit 2: decode options for another
#                        lesson (naming lesson 12), H_kv not dividing H, causal with N_kv < N
#   make decode-variants-apply  every variant's patches (lessons/12-flash-decoding/worklog/variants/)
#                        still apply to the solution
# The experiments of lessons/12-flash-decoding/worklog/README.md, each a variant of the solution:
#   make decode-variant V=NAME   build/decode-variants/NAME: the solution with the variant's
#                        patches applied (its source NAME.cu and ptxas -v report NAME.ptxas beside
#                        it); names: $(DV_NAMES). Or DV_PATCHES="plan rules" DV_DEFS="-DFD_RULE=2"
#                        DV_OUT=build/x for any other combination
#   make decode-variants every named variant (nvcc; a few minutes)
# On a GPU:
#   make bench-decode        the decode sweep (bench/decode.sh; also run by make bench, and its
#                            quick form by make bench-quick: mk/bench.mk): lesson 12, its
#                            -DFD_SPLITS=1 variant, PyTorch SDPA's backends and a device-to-device
#                            copy, same run; CSV, summary and bandwidth chart in
#                            docs/results/decode-<gpu>.*  (BENCH_DECODE_ARGS passes options, e.g.
#                            "--dtypes fp16 --d 128")
#   make bench-decode-quick  6 shapes in under a minute; CSV and summary in build/
#   make decode-plots        redraw the summary and chart from the committed CSV (no GPU)
#   make decode-sweep        lesson 12's variants (split rules, merge kernel, FD_STAGES, tile size,
#                            forced split counts, L2 evict-first) on small and mid decode shapes,
#                            with copies and reads of the same bytes under two L2 flushes, and a
#                            per-block trace (bench/decode_sweep.sh; tables in build/decode-sweep/)
#   make sanitize-lesson12 / sanitize-solution12   compute-sanitizer memcheck and racecheck on
#                            an ordinary shape and on decode shapes (split, GQA, ragged, causal)
.PHONY: check-12 emu-12 test-decode decode-selftest decode-cli bench-decode bench-decode-quick decode-plots \
        sanitize-lesson12 sanitize-solution12 decode-sweep decode-variant decode-variants decode-variants-apply

check-12:
	@if ! command -v $(NVCC) >/dev/null 2>&1; then echo "check-12: SKIP (no nvcc)"; exit 0; fi; \
	for f in $(call src_of,lessons,12) $(call src_of,solutions,12); do \
	  out=$$($(PTXAS_REPORT) $$f 75 90) || { echo "$$out"; exit 1; }; \
	  if echo "$$out" | grep -q 'warning'; then echo "check-12: $$f (sm_75, sm_90): warnings"; echo "$$out" | grep warning; exit 1; fi; \
	  worst=$$(echo "$$out" | sed -nE 's/.* ([0-9]+) bytes spill stores.*/\1/p' | sort -n | tail -n1); \
	  if [ "$${f#solutions/}" != "$$f" ] && [ "$${worst:-0}" -gt 0 ]; then \
	    echo "check-12: $$f spills $$worst bytes:"; echo "$$out" | grep -E 'entry function|spill|registers'; exit 1; fi; \
	done; echo "check-12: starter and solution build for sm_75 and sm_90 without warnings, the solution without spills"

EMU12_SRC ?= $(call src_of,solutions,12)
EMU12_CXX ?= g++
EMU12_INC := $(CUDA_INC)
EMU12_ARG ?= quick
EMU12_DEFS ?=
emu-12: build/host/cpu_reference.o
	@if [ ! -f $(EMU12_INC)/cuda_fp16.h ]; then echo "emu-12: SKIP (no CUDA headers)"; exit 0; fi; \
	mkdir -p build/emu && emu=$$(mktemp -d "$(CURDIR)/build/emu/emu-12.XXXXXX") && trap 'rm -rf "$$emu"' EXIT && \
	python3 tests/emu/prep.py $(EMU12_SRC) > "$$emu/kernel.cu" && \
	$(EMU12_CXX) -std=c++20 -O1 -w $(EMU12_DEFS) -I$(EMU12_INC) -Itests/warp_emu $(REF_INC) -DEMU_SRC="\"$$emu/kernel.cu\"" \
	  -DEMU_NAME='"$(EMU12_SRC)"' -x c++ tests/warp_emu/emu12.cpp -x none build/host/cpu_reference.o \
	  -o "$$emu/emu12" -lpthread -lm && \
	"$$emu/emu12" $(EMU12_ARG) && EMU_CPASYNC=late "$$emu/emu12" $(EMU12_ARG)

# The config and plan regions (plain C) of DECODE_SRC, the solution unless given, for the unit
# test of its split plan; header and test binary live in a folder of their own per source.
DECODE_SRC ?= $(call src_of,solutions,12)
DECODE_DIR := build/decode/$(subst /,_,$(basename $(DECODE_SRC)))
$(DECODE_DIR)/fd_plan.h: $(DECODE_SRC)
	@mkdir -p $(dir $@)
	@grep -q '// \[region plan\]' $< || { echo "test-decode: $< has no \"plan\" region"; exit 1; }
	@{ echo '/* generated by mk/decode.mk from $<: its "config" and "plan" regions */'; echo '#include <math.h>'; \
	  awk '/\/\/ \[region config\]/{on=1;next} /\/\/ \[end config\]/{on=0} on' $<; \
	  awk '/\/\/ \[region plan\]/{on=1;next} /\/\/ \[end plan\]/{on=0} on' $< | grep -v '// \[\(region\|end\) '; } > $@
$(DECODE_DIR)/test_decode: tests/unit/test_decode.c $(DECODE_DIR)/fd_plan.h build/host/cli.o build/host/cpu_reference.o $(HARNESS_H)
	$(CC) $(CFLAGS) $(REF_INC) -I$(DECODE_DIR) tests/unit/test_decode.c build/host/cli.o build/host/cpu_reference.o \
	  -o $@ -lcriterion -lm
test-decode: $(DECODE_DIR)/test_decode
	@echo "test-decode: the split plan of $(DECODE_SRC)"
	$(DECODE_DIR)/test_decode --jobs 2

decode-selftest:
	@bash bench/decode_selftest.sh

# refused BINARY "TEXT" ARGS...: exit status 2 and TEXT in the message
DECODE_REFUSED = out=$$(./$(1) $(3) 2>&1); rc=$$?; if [ $$rc -ne 2 ] || ! grep -qF -- $(2) <<<"$$out"; then \
	  echo "decode-cli: ./$(1) $(3): expected exit 2 and" $(2) ", got exit $$rc: $$out"; exit 1; fi
decode-cli: solution8 solution12
	@$(call DECODE_REFUSED,solution8,"lesson 12 (flash decoding) takes them",--kv-seq 100)
	@$(call DECODE_REFUSED,solution8,"does not take decode shapes",--kv-heads 2 -H 4)
	@$(call DECODE_REFUSED,solution8,"does not take decode shapes",--ragged)
	@$(call DECODE_REFUSED,solution12,"--kv-heads 3 does not divide --heads 8",-H 8 --kv-heads 3)
	@$(call DECODE_REFUSED,solution12,"--kv-heads 5 does not divide --heads 32",--kv-heads 5)
	@$(call DECODE_REFUSED,solution12,"give --kv-seq >= 16",-n 16 --kv-seq 8 --causal)
	@$(call DECODE_REFUSED,solution12,"--kv-seq '0' is not valid: expected an integer in 1..1048576",--kv-seq 0)
	@$(call DECODE_REFUSED,solution12,"--kv-heads 'x' is not valid",--kv-heads x)
	@$(call DECODE_REFUSED,solution12,"--fuzz draws its own shapes",--fuzz 3 --ragged)
	@$(call DECODE_REFUSED,solution12,"--dim 96 is not supported by lesson 12",-d 96 --kv-seq 10)
	@echo "decode-cli: 10 refusals with exit 2 and the valid values"

TEST_STEPS += check-12 emu-12 test-decode decode-selftest decode-cli decode-variants-apply
TEST_FULL_STEPS += emu-full-12

build/copy_bandwidth: bench/copy_bandwidth.cu reference/include/cuda_check.h reference/include/attention.h reference/harness/l2_read.h
	@mkdir -p build
	$(NVCC) -O3 -std=c++17 $(ARCH_FLAGS) $(REF_INC) $< -o $@

BENCH_DECODE_ARGS ?=
bench-decode:
	@bash bench/decode.sh $(BENCH_DECODE_ARGS)
bench-decode-quick:
	@bash bench/decode.sh --quick $(BENCH_DECODE_ARGS)
decode-plots:
	@bash bench/decode.sh --plots-only

# The variants: V=NAME picks patches (lessons/12-flash-decoding/worklog/variants/NAME.patch, applied in
# order to a copy of the solution with `patch`) and macros; worklog/README.md says what each measured.
DV_DIR := lessons/12-flash-decoding/worklog/variants
DV_NAMES := base splits1 rule-resident rule-tiles rule-fill merge-kernel merge-pdl stages2 stages4 bc-alt \
            trace evict-first
DV.base.patches := plan
DV.splits1.defs := -DFD_SPLITS=1
DV.rule-resident.patches := plan rules
DV.rule-resident.defs := -DFD_RULE=1
DV.rule-tiles.patches := plan rules
DV.rule-tiles.defs := -DFD_RULE=2
DV.rule-fill.patches := plan rules
DV.rule-fill.defs := -DFD_RULE=3
DV.merge-kernel.patches := plan merge-kernel
DV.merge-kernel.defs := -DFD_MERGE=1
DV.merge-pdl.patches := plan merge-kernel
DV.merge-pdl.defs := -DFD_MERGE=2
DV.stages2.patches := plan
DV.stages2.defs := -DFD_STAGES=2
DV.stages4.patches := plan
DV.stages4.defs := -DFD_STAGES=4
DV.bc-alt.patches := plan
DV.bc-alt.defs := -DFD128_BC=128 -DFD64_BC=64
DV.trace.patches := plan trace
DV.evict-first.patches := plan evict-first
V ?=
DV_PATCHES ?= $(DV.$(V).patches)
DV_DEFS ?= $(DV.$(V).defs)
DV_OUT ?= build/decode-variants/$(or $(V),custom)
SOL12 = $(call src_of,solutions,12)
# DV_SOURCE OUT PATCHES: OUT.cu, the solution with PATCHES applied in order (exit 1 naming the
# one that does not apply: bring it along when the solution changes)
DV_SOURCE = $(if $(strip $(2)),command -v patch >/dev/null || { echo "decode-variant: needs patch (apt-get install patch)"; exit 1; };) \
	mkdir -p $(dir $(1)) && cp $(SOL12) $(1).cu && for p in $(2); do \
	  [ -f $(DV_DIR)/$$p.patch ] || { echo "decode-variant: no $(DV_DIR)/$$p.patch"; exit 1; }; \
	  patch -s -f --no-backup-if-mismatch -r - $(1).cu $(DV_DIR)/$$p.patch >$(1).patch-log 2>&1 || \
	    { cat $(1).patch-log; echo "decode-variant: $(DV_DIR)/$$p.patch does not apply to $(SOL12) (the variant's patches, in order: $(2))"; exit 1; }; \
	done; rm -f $(1).patch-log
decode-variant: $(HARNESS_C_OBJ) $(HARNESS_CU_OBJ)
	@$(if $(V),$(if $(filter $(V),$(DV_NAMES)),,echo "decode-variant: V=$(V) is none of: $(DV_NAMES)"; exit 2;)) \
	$(call DV_SOURCE,$(DV_OUT),$(DV_PATCHES))
	$(NVCC) $(NVCC_FLAGS) $(ARCH_FLAGS) $(DV_DEFS) -Xptxas -v $(REF_INC) $(DV_OUT).cu \
	  $(HARNESS_CU_OBJ) $(HARNESS_C_OBJ) -o $(DV_OUT) -lgomp 2> $(DV_OUT).ptxas || { cat $(DV_OUT).ptxas; exit 1; }
decode-variants:
	@for v in $(DV_NAMES); do $(MAKE) --no-print-directory decode-variant V=$$v || exit 1; done; \
	echo "decode-variants: $(words $(DV_NAMES)) variants in build/decode-variants/"
decode-variants-apply:
	@if ! command -v patch >/dev/null 2>&1; then echo "decode-variants-apply: SKIP (no patch)"; exit 0; fi; \
	set -e; tmp=$$(mktemp -d "$${TMPDIR:-/tmp}/decode-variants.XXXXXX"); trap 'rm -rf "$$tmp"' EXIT; \
	$(foreach v,$(DV_NAMES),$(call DV_SOURCE,$$tmp/$(v),$(DV.$(v).patches));) \
	echo "decode-variants-apply: the patches of $(words $(DV_NAMES)) variants apply to $(SOL12)"
DECODE_SWEEP_ARGS ?=
decode-sweep:
	@bash bench/decode_sweep.sh $(DECODE_SWEEP_ARGS)

# compute-sanitizer on the shapes lesson 12 is about: the generic rule's ordinary shape, then
# a split GQA decode step with ragged lengths, and a causal one of 16 queries (fp16).
SAN12_SHAPES := "-b 1 -H 2 -n 77 -d 64" "-b 2 -H 8 --kv-heads 2 -n 1 --kv-seq 3000 -d 128 --ragged" \
                "-b 1 -H 4 --kv-heads 1 -n 16 --kv-seq 1000 -d 64 --causal"
define SAN12
	@set -e; for a in $(SAN12_SHAPES); do echo "== compute-sanitizer ./$(1) $$a"; \
	  compute-sanitizer --tool memcheck --error-exitcode 9 ./$(1) --check-only --dtype fp16 $$a; \
	  compute-sanitizer --tool racecheck --racecheck-report all --error-exitcode 9 ./$(1) --check-only --dtype fp16 $$a; \
	done
endef
sanitize-lesson12: lesson12
	$(call SAN12,lesson12)
sanitize-solution12: solution12
	$(call SAN12,solution12)

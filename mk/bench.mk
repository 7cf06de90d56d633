# mk/bench.mk: standard attention baseline and `make bench` (issues 6 and 12).
#   make standard       ./standard: unfused cuBLAS attention, same harness/CLI as a lesson
#                       (the backward's ./standard_backward is in mk/backward.mk)
#   make bench          (GPU) standard vs every flash solution (+ PyTorch peers when torch is
#                       importable) over the course grid, forward and backward (the backward
#                       solutions, 10 and 11, against ./standard_backward and SDPA's backward);
#                       CSV + SVG charts in docs/results/ (BENCH_ARGS="--pass backward": one pass)
#                       then the decode sweep of lesson 12 (make bench-decode, mk/decode.mk:
#                       docs/results/decode-<gpu>.csv, .md and -bandwidth.svg)
#   make bench-quick    (GPU) a few shapes in about a minute, for a demo, forward and backward,
#                       then the quick decode sweep (make bench-decode-quick); CSVs in build/
#   make bench-plots    redraw the charts from the committed docs/results/bench-*.csv
#   make bench-selftest (CPU) plots a synthetic CSV in /tmp, checks the no-GPU message; in `make test`
#   make compare COMPARE_ARGS="--build-before main --grids"   (GPU) two builds of the solutions
#                       timed against each other in one run (bench/compare_builds.sh --help): a
#                       change that must not cost speed, checked
# BENCH_ARGS passes options to bench/bench.sh, e.g. make bench BENCH_ARGS="--d 64 --no-plots"
# BENCH_DECODE=0 then make bench BENCH_ARGS="--d 128 --append" (two commands of about half the
# time each; the decode sweep runs with the second). BENCH_DECODE=0 leaves the decode sweep out
# (the default is 1 when solutions/12-*/ exists); BENCH_DECODE_ARGS passes options to
# bench/decode.sh. Without a GPU both refuse with one message (exit 4).

.PHONY: bench bench-quick bench-plots bench-selftest compare
compare:
	@bash bench/compare_builds.sh $(COMPARE_ARGS)


standard: reference/gpu/standard_attention.cu $(HARNESS_CU_OBJ) $(HARNESS_C_OBJ) $(HARNESS_H)
	$(NVCC) $(NVCC_FLAGS) $(ARCH_FLAGS) $(REF_INC) reference/gpu/standard_attention.cu $(HARNESS_CU_OBJ) $(HARNESS_C_OBJ) -o standard -lcublas -lgomp

BENCH_DECODE ?= $(if $(call src_of,solutions,12),1,0)
# then_decode: after bench.sh (its status in rc), the decode sweep with the options in dargs,
# unless BENCH_DECODE=0 or bench.sh found no GPU (exit 4: its message says so once); the first
# failure is the status.
then_decode = if [ $$rc != 4 ] && [ "$(BENCH_DECODE)" = 1 ]; then \
	  echo "== the decode sweep of lesson 12: bench/decode.sh $$dargs"; bash bench/decode.sh $$dargs; d=$$?; \
	  [ $$rc = 0 ] && rc=$$d; fi; exit $$rc

bench:
	@rc=0; dargs='$(BENCH_DECODE_ARGS)'; bash bench/bench.sh $(BENCH_ARGS) || rc=$$?; $(then_decode)

bench-quick:
	@rc=0; dargs='--quick $(BENCH_DECODE_ARGS)'; bash bench/bench.sh --quick $(BENCH_ARGS) || rc=$$?; $(then_decode)

bench-plots:
	@bash bench/plot.sh

bench-selftest:
	@bash bench/selftest.sh

TEST_STEPS += bench-selftest

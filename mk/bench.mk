# mk/bench.mk: standard attention baseline and `make bench` (issues 6 and 12).
#   make standard       ./standard: unfused cuBLAS attention, same harness/CLI as a lesson
#                       (the backward's ./standard_backward is in mk/backward.mk)
#   make bench          (GPU) standard vs every flash solution (+ PyTorch peers when torch is
#                       importable) over the course grid, forward and backward (the backward
#                       solutions, 10 and 11, against ./standard_backward and SDPA's backward);
#                       CSV + SVG charts in docs/results/ (BENCH_ARGS="--pass backward": one pass)
#   make bench-quick    (GPU) a few shapes in about a minute, for a demo, forward and backward;
#                       CSV in build/
#   make bench-plots    redraw the charts from the committed docs/results/bench-*.csv
#   make bench-selftest (CPU) plots a synthetic CSV in /tmp, checks the no-GPU message; in `make test`
# BENCH_ARGS passes options to bench/bench.sh, e.g. make bench BENCH_ARGS="--d 64 --no-plots"
# then make bench BENCH_ARGS="--d 128 --append" (two commands of about half the time each).

.PHONY: bench bench-quick bench-plots bench-selftest

standard: reference/standard_attention.cu $(HARNESS_CU_OBJ) $(HARNESS_C_OBJ) $(HARNESS_H)
	$(NVCC) $(NVCC_FLAGS) $(ARCH_FLAGS) -Ireference reference/standard_attention.cu $(HARNESS_CU_OBJ) $(HARNESS_C_OBJ) -o standard -lcublas -lgomp

bench:
	@bash bench/bench.sh $(BENCH_ARGS)

bench-quick:
	@bash bench/bench.sh --quick $(BENCH_ARGS)

bench-plots:
	@bash bench/plot.sh

bench-selftest:
	@bash bench/selftest.sh

test:: bench-selftest

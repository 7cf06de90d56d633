# mk/bench.mk: standard attention baseline and `make bench` (issue 6).
#   make standard       ./standard: unfused cuBLAS attention, same harness/CLI as a lesson
#   make bench          (GPU) standard vs every flash solution (+ PyTorch peers when torch is
#                       importable) over the course grid; CSV + SVG charts in docs/results/
#   make bench-quick    (GPU) a few shapes in well under a minute, for a demo; CSV in build/
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

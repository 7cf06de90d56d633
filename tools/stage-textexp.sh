#!/usr/bin/env bash
# Measurements the lesson texts quote (lessons 04, 05, 06, 07): variants built
# with experiment flags, timed with the harness on the GPU. Output: a list of
# "what: ms, TFLOP/s" lines.
set -u
t() { # label, binary, args...
    local label=$1 bin=$2; shift 2
    local row; row=$("./$bin" --bench-only --csv --reps 30 "$@" 2>/dev/null | tail -n1)
    IFS=, read -r _ status _ _ _ _ _ _ _ _ ms tflops _ <<<"$row"
    printf '%-60s %-6s %9s ms %8s TFLOP/s\n' "$label" "$status" "$ms" "$tflops"
}
make -s solution4 solution5 solution6 solution7 solution8 solution4-runtime-index solution4-4blocks >/dev/null
t "04 bench shape (fp32, B8 H12 N1024 d64)" solution4
t "04 -DRUNTIME_INDEX" solution4-runtime-index
t "04 -DMIN_BLOCKS_D64=4 (128-register cap)" solution4-4blocks
for N in 1024 4096 8192; do
    B=$((16384 / N)); [ $B -lt 1 ] && B=1
    t "05 B$B H16 N$N d64 non-causal" solution5 -b $B -H 16 -n $N -d 64
    t "05 B$B H16 N$N d64 causal" solution5 -b $B -H 16 -n $N -d 64 --causal
done
t "07 fp16 B4 H16 N4096 d128 (swizzled)" solution7 -b 4 -H 16 -n 4096 -d 128 --dtype fp16
t "07 fp16 B4 H16 N4096 d64 (swizzled)" solution7 -b 4 -H 32 -n 4096 -d 64 --dtype fp16
rm -f solution7; make -s solution7 EXTRA_NVCC_FLAGS=-DFA_NO_SWIZZLE >/dev/null
t "07 fp16 B4 H16 N4096 d128 -DFA_NO_SWIZZLE" solution7 -b 4 -H 16 -n 4096 -d 128 --dtype fp16
t "07 fp16 B4 H16 N4096 d64 -DFA_NO_SWIZZLE" solution7 -b 4 -H 32 -n 4096 -d 64 --dtype fp16
rm -f solution7; make -s solution7 >/dev/null
t "08 fp16 B1 H16 N16384 d128 causal (longest first)" solution8 -b 1 -H 16 -n 16384 -d 128 --dtype fp16 --causal
t "08 fp16 B4 H16 N4096 d128 causal (longest first)" solution8 -b 4 -H 16 -n 4096 -d 128 --dtype fp16 --causal
rm -f solution8; make -s solution8 EXTRA_NVCC_FLAGS=-DFA_CAUSAL_LPT=0 >/dev/null
t "08 fp16 B1 H16 N16384 d128 causal -DFA_CAUSAL_LPT=0" solution8 -b 1 -H 16 -n 16384 -d 128 --dtype fp16 --causal
t "08 fp16 B4 H16 N4096 d128 causal -DFA_CAUSAL_LPT=0" solution8 -b 4 -H 16 -n 4096 -d 128 --dtype fp16 --causal
rm -f solution8; make -s solution8 >/dev/null
if command -v ncu >/dev/null; then
    timeout 240 ncu --clock-control none --section SpeedOfLight --section ComputeWorkloadAnalysis \
        --section MemoryWorkloadAnalysis --section WarpStateStats -k regex:wmma -c 1 \
        ./solution6 --bench-only -b 4 -H 16 -n 4096 -d 128 --dtype fp16 --reps 1 --warmup 0 > "${OUT:-/tmp}/ncu-solution6.txt" 2>&1
    grep -E "Duration|Compute \(SM\) Throughput|Memory Throughput|Shared|Issue Slots|Stall|Pipe|Tensor|Bank|Achieved Occupancy|Registers" "${OUT:-/tmp}/ncu-solution6.txt" | head -40
fi

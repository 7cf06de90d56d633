#!/usr/bin/env bash
# tests/checks/text_experiments.sh (run it as `make text-experiments`, on a GPU): the measurements the
# lesson texts quote that neither `make results` nor `make bench` makes, rerun on the current
# code. The numbers in the texts come from the runs kept in docs/results/lessons/ (see its
# README.md); this repeats them, it does not edit anything. Output under build/text-experiments/.
#
# TEXT_EXPERIMENTS picks some of (default: timings ncu):
#   timings  experiment builds, timed with the harness (--bench-only, median of 30):
#              04  -DRUNTIME_INDEX, -DMIN_BLOCKS_D64=4 against the default (bench shape, fp32)
#              05  causal against non-causal, N = 1024, 4096, 8192 (B = 16384/N, H = 16, d = 64)
#              07  the no-swizzle variant against the swizzle (fp16, B = 4, N = 4096, d = 128 and 64)
#              08  the no-lpt variant (non-causal block order) against longest-first (fp16, causal, d = 128)
#            -> timings.txt (a table) and timings.csv
#   ncu      Nsight Compute on solution 06 (fp16, B = 4, H = 16, N = 4096, d = 128), lesson 06's
#            "What limits it" -> ncu-solution6.txt; skipped when ncu is not installed
#   grid     solutions GRID_LESSONS (default "6 7 8") in GRID_DTYPES (default "fp16 bf16") over
#            the course grid, with PyTorch SDPA's flash and cuDNN backends when torch is
#            importable: lessons 06 and 07's "What to expect" -> grid.csv, grid.txt (about
#            10 minutes on an H200)
# Experiment builds go to build/text-experiments/solutionN-<variant> (`make variant`),
# so ./solutionN stays the default build.
set -uo pipefail
cd "$(dirname "$0")/../.."
MAKE=${MAKE:-make}
OUT=build/text-experiments
WHAT=$(echo "${TEXT_EXPERIMENTS:-timings ncu}" | tr ',' ' ')
for w in $WHAT; do
    case $w in timings | ncu | grid) ;;
    *) echo "make text-experiments: unknown experiment '$w' in TEXT_EXPERIMENTS (expected some of: timings ncu grid)" >&2; exit 2 ;;
    esac
done
if ! nvidia-smi -L >/dev/null 2>&1; then
    echo "make text-experiments needs an NVIDIA GPU (nvidia-smi found none): it times lesson binaries" >&2
    exit 4
fi
mkdir -p "$OUT"
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n1)
fail=0

# build N VARIANT DEFS: solution N with extra -D flags, as $OUT/solutionN-VARIANT
build() {
    $MAKE -s variant N="$1" DEFS="$3" OUT="$OUT/solution$1-$2" \
        >"$OUT/build-$1-$2.log" 2>&1 || { echo "build of solution $1 with $3 failed: $OUT/build-$1-$2.log"; fail=1; }
}

# variant N NAME: solution N with the patch lessons/NN-*/variants/NAME.patch (make solutionN-NAME),
# as $OUT/solutionN-NAME
variant() {
    $MAKE -s "solution$1-$2" >"$OUT/build-$1-$2.log" 2>&1 && mv "solution$1-$2" "$OUT/" ||
        { echo "build of solution$1-$2 failed: $OUT/build-$1-$2.log"; fail=1; }
}

# t LESSON LABEL BINARY ARGS...: one harness timing, a row of the table and the CSV
t() {
    local lesson=$1 label=$2 bin=$3; shift 3
    local row status ms tflops
    row=$("$bin" --bench-only --csv --reps 30 "$@" 2>>"$OUT/timings.log" | tail -n1)
    IFS=, read -r _ status _ _ _ _ _ _ _ _ ms tflops _ <<<"$row"
    [ "$status" = pass ] || [ "$status" = ok ] || fail=1
    printf '%-6s %-58s %-8s %10s ms %9s TFLOP/s\n' "$lesson" "$label" "${status:-error}" "${ms:--}" "${tflops:--}" | tee -a "$OUT/timings.txt"
    echo "$lesson,\"$label\",${bin#./},\"$*\",${status:-error},$ms,$tflops" >>"$OUT/timings.csv"
}

timings() {
    echo "== timings on $gpu (harness --bench-only --reps 30)"
    : >"$OUT/timings.txt"; : >"$OUT/timings.log"
    echo "lesson,what,binary,args,status,ms,tflops" >"$OUT/timings.csv"
    $MAKE -s solution4 solution5 solution7 solution8 >"$OUT/build.log" 2>&1 || { cat "$OUT/build.log"; return 1; }
    build 4 runtime-index -DRUNTIME_INDEX
    build 4 4blocks -DMIN_BLOCKS_D64=4
    variant 7 no-swizzle
    variant 8 no-lpt
    t 04 "bench shape (fp32, B8 H12 N1024 d64), default" ./solution4
    t 04 "bench shape, -DRUNTIME_INDEX" "$OUT/solution4-runtime-index"
    t 04 "bench shape, -DMIN_BLOCKS_D64=4 (128-register cap)" "$OUT/solution4-4blocks"
    local N B
    for N in 1024 4096 8192; do
        B=$((16384 / N))
        t 05 "B$B H16 N$N d64 non-causal" ./solution5 -b $B -H 16 -n $N -d 64
        t 05 "B$B H16 N$N d64 causal" ./solution5 -b $B -H 16 -n $N -d 64 --causal
    done
    t 07 "fp16 B4 H16 N4096 d128, swizzled" ./solution7 -b 4 -H 16 -n 4096 -d 128 --dtype fp16
    t 07 "fp16 B4 H16 N4096 d128, no-swizzle variant" "$OUT/solution7-no-swizzle" -b 4 -H 16 -n 4096 -d 128 --dtype fp16
    t 07 "fp16 B4 H32 N4096 d64, swizzled" ./solution7 -b 4 -H 32 -n 4096 -d 64 --dtype fp16
    t 07 "fp16 B4 H32 N4096 d64, no-swizzle variant" "$OUT/solution7-no-swizzle" -b 4 -H 32 -n 4096 -d 64 --dtype fp16
    t 08 "fp16 B1 H16 N16384 d128 causal, longest first" ./solution8 -b 1 -H 16 -n 16384 -d 128 --dtype fp16 --causal
    t 08 "fp16 B1 H16 N16384 d128 causal, no-lpt variant" "$OUT/solution8-no-lpt" -b 1 -H 16 -n 16384 -d 128 --dtype fp16 --causal
    t 08 "fp16 B4 H16 N4096 d128 causal, longest first" ./solution8 -b 4 -H 16 -n 4096 -d 128 --dtype fp16 --causal
    t 08 "fp16 B4 H16 N4096 d128 causal, no-lpt variant" "$OUT/solution8-no-lpt" -b 4 -H 16 -n 4096 -d 128 --dtype fp16 --causal
}

ncu_solution6() {
    if ! command -v ncu >/dev/null 2>&1; then
        echo "== ncu: skipped (Nsight Compute's ncu is not installed)"; return 0
    fi
    echo "== ncu on solution 6 -> $OUT/ncu-solution6.txt"
    $MAKE -s solution6 >/dev/null || return 1
    timeout 300 ncu --clock-control none --section SpeedOfLight --section ComputeWorkloadAnalysis \
        --section MemoryWorkloadAnalysis --section WarpStateStats -k regex:wmma -c 1 \
        ./solution6 --bench-only -b 4 -H 16 -n 4096 -d 128 --dtype fp16 --reps 1 --warmup 0 >"$OUT/ncu-solution6.txt" 2>&1 || fail=1
    grep -E "Duration|Compute \(SM\) Throughput|L1/TEX Cache Throughput|L2 Cache Throughput|DRAM Throughput|Issue Slots|Warp Cycles Per Issued|highest-utilized" \
        "$OUT/ncu-solution6.txt" | sed 's/^ */   /'
}

grid() {
    local lessons=${GRID_LESSONS:-6 7 8} dtypes=${GRID_DTYPES:-fp16 bf16}
    local csv=$OUT/grid.csv shapes=$OUT/grid-shapes.txt n d causal N dt row name status ms tflops mem
    echo "== grid: solutions $lessons in $dtypes -> $csv"
    for n in $lessons; do $MAKE -s "solution$n" >/dev/null || return 1; done
    echo "gpu,date,commit,method,dtype,B,H,N,d,causal,status,ms,tflops,mem_bytes,speedup_vs_standard,reps,sweep,gpu_mem_bytes,timing" >"$csv"
    : >"$shapes"
    for d in 64 128; do for causal in 0 1; do for N in 512 1024 2048 4096 8192 16384; do
        echo "grid,$((16384 / N)),$((2048 / d)),$N,$d,$causal" >>"$shapes"
    done; done; done
    while IFS=, read -r _ B H N d causal; do
        for n in $lessons; do for dt in $dtypes; do
            row=$("./solution$n" --bench-only --csv -b "$B" -H "$H" -n "$N" -d "$d" --dtype "$dt" --reps 20 \
                  $([ "$causal" = 1 ] && echo --causal) 2>/dev/null | tail -n1)
            IFS=, read -r name status _ _ _ _ _ _ _ _ ms tflops _ mem <<<"$row"
            echo "$gpu,,,$name,$dt,$B,$H,$N,$d,$causal,$status,$ms,$tflops,$mem,,20,grid,," >>"$csv"
        done; done
    done <"$shapes"
    if python3 -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" >/dev/null 2>&1; then
        python3 bench/peers.py --csv "$csv" --shapes "$shapes" --dtypes "${dtypes// /,}" \
            --methods torch-flash,torch-cudnn --rep-ms 300 >"$OUT/grid-peers.log" 2>&1 || tail -n 5 "$OUT/grid-peers.log"
    else
        echo "   PyTorch peers skipped: python3 with a CUDA-enabled torch is not importable"
    fi
    # one line per shape: TFLOP/s of every method
    python3 - "$csv" <<'PY' | tee "$OUT/grid.txt"
import collections, csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
cell = collections.defaultdict(dict)
for r in rows:
    try:
        v = float(r["tflops"])
    except ValueError:
        v = float("nan")
    cell[(r["dtype"], int(r["d"]), int(r["causal"]), int(r["N"]))][r["method"]] = v
methods = sorted({r["method"] for r in rows})
print("TFLOP/s by method; " + ", ".join(methods))
print("%-5s %4s %2s %6s " % ("dtype", "d", "c", "N") + " ".join("%12s" % m[:12] for m in methods))
for k in sorted(cell):
    print("%-5s %4d %2d %6d " % k + " ".join("%12.1f" % cell[k].get(m, float("nan")) for m in methods))
PY
}

for w in $WHAT; do
    case $w in
    timings) timings || fail=1 ;;
    ncu) ncu_solution6 || fail=1 ;;
    grid) grid || fail=1 ;;
    esac
done
echo "text-experiments ($WHAT): $([ $fail = 0 ] && echo done || echo 'FAILED (see above)'); output in $OUT/"
exit $fail

#!/usr/bin/env bash
# One call on the GPU machine: build, check and time what is asked, logs under $OUT,
# a short table last. Usage: tools/gpu_session.sh STAGE... (grade lessons results
# sanitize ptxas sass bench bench-quick peers mutants fuzz sweep)
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export GPU_ARCH=${GPU_ARCH:-90}
summary=$OUT/summary.txt; : >"$summary"
nvidia-smi --query-gpu=name,compute_cap,driver_version,clocks.sm,clocks.max.sm --format=csv | tee "$OUT/gpu.txt"
nproc >>"$OUT/gpu.txt"
make -j8 all >"$OUT/build.log" 2>&1 || { echo "BUILD FAILED"; grep -E 'error' "$OUT/build.log" | head -30; }
for stage in "$@"; do
    t0=$(date +%s)
    case $stage in
        grade)    make grade SOLUTIONS=1 2>&1 | tee "$OUT/grade-solutions.log" ;;
        lessons)  make grade 2>&1 | tee "$OUT/grade-lessons.log" ;;
        results)  make results 2>&1 | tee "$OUT/results.log"; cp docs/results/*.csv "$OUT/" 2>/dev/null ;;
        sanitize) for b in $(ls -d solutions/[0-9]* | sed -E 's@solutions/0?([0-9]+)-.*@\1@'); do
                      [ "$b" = 1 ] && continue
                      if make -s sanitize-solution$b >"$OUT/sanitize-$b.log" 2>&1; then r=clean; else r=ERRORS; fi
                      echo "sanitize solution$b: $r" | tee -a "$summary"; done ;;
        ptxas)    for b in $(ls -d solutions/[0-9]* | sed -E 's@solutions/0?([0-9]+)-.*@\1@'); do make -s ptxas-solution$b; done 2>&1 | tee "$OUT/ptxas.log" ;;
        sass)     for b in 6 7 8; do make -s sass-solution$b 2>&1; done | tee "$OUT/sass.log" ;;
        *)        if [ -f "tools/stage-$stage.sh" ]; then bash "tools/stage-$stage.sh" 2>&1 | tee "$OUT/$stage.log"; else echo "unknown stage $stage"; fi ;;
    esac
    echo "stage $stage: $(( $(date +%s) - t0 )) s" | tee -a "$summary"
done
echo "=== summary"; cat "$summary"
grep -h -E '^(lesson|solution|[0-9][0-9]-)' "$OUT"/grade-*.log 2>/dev/null | column -t | tail -30

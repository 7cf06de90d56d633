#!/usr/bin/env bash
# The closing GPU run: make results (every solution graded and timed, hashes
# recorded), the starters' scoreboard, sanitizers + fuzz + mutants for
# FINAL_LESSONS (default 8). Needs GIT_COMMIT set by the caller.
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
git config --global --add safe.directory '*' 2>/dev/null
make -s -j16 all >/dev/null 2>&1
make results 2>&1 | tail -12
make grade 2>&1 | tail -10
L=${FINAL_LESSONS:-8}
for n in ${SAN_LESSONS:-6 7 8}; do
    if make -s sanitize-solution$n >"$OUT/sanitize-$n.log" 2>&1; then r=clean; else r=ERRORS; fi
    echo "sanitize solution$n: $r  $(grep -h 'ERROR SUMMARY\|RACECHECK SUMMARY' "$OUT/sanitize-$n.log" | sort | uniq -c | tr -s ' ' | tr '\n' ' ')"
done
make fuzz LESSONS="$L" FUZZ_K=500 2>&1 | grep -E 'cases passed' | tail -3
make mutants-gpu LESSONS="$L" 2>&1 | grep -E '^[0-9][0-9]/|mutants:|grade \+' | tail -12
cp docs/results/*.csv docs/results/fuzz-*.md docs/results/mutants-*.md "$OUT/" 2>/dev/null

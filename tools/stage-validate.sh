#!/usr/bin/env bash
# Sanitizers, fuzzing and the GPU mutants for LESSONS (default every GPU lesson).
# Results land in docs/results/ (fuzz-*.md, mutants-*.md) and are copied to $OUT.
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
L=${LESSONS:-2 3 4 5 6 7 8}
for n in $L; do
    if make -s sanitize-solution$n >"$OUT/sanitize-$n.log" 2>&1; then r=clean; else r=ERRORS; fi
    echo "sanitize solution$n (memcheck + racecheck$([ $n -ge 5 ] && echo ', causal too')): $r  $(grep -h 'ERROR SUMMARY' "$OUT/sanitize-$n.log" | sort | uniq -c | tr '\n' ' ')"
done
make fuzz LESSONS="$L" FUZZ_K=${FUZZ_K:-500} 2>&1 | grep -E '^ |cases passed|FAIL|wrote' | tail -12
make mutants-gpu LESSONS="$L" 2>&1 | tee "$OUT/mutants.log" | tail -70
cp docs/results/*.md "$OUT/" 2>/dev/null
tar czf "$OUT/validate-logs.tgz" build/fuzz build/mutants/*.log 2>/dev/null || true

#!/bin/bash
export PATH=$PATH:/usr/local/cuda/bin
S=$SECONDS
make -j16 solution9 solution17 GPU_ARCH=90 > $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
echo "build $((SECONDS-S)) s"
timeout 120 make sanitize-solution17 GPU_ARCH=90 > $OUT/san.log 2>&1; echo "sanitize rc=$? $((SECONDS-S)) s"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY" $OUT/san.log
timeout 260 make bench-17 GPU_ARCH=90 GIT_COMMIT=3c0a79c > $OUT/bench.log 2>&1; echo "bench rc=$? $((SECONDS-S)) s"; cp docs/results/lessons/varlen-17-*.md build/bench17/bench.csv $OUT/ 2>/dev/null; grep -E "^\| |Targets" docs/results/lessons/varlen-17-*.md | grep -v "^|---"
timeout $((585-SECONDS)) make mutants-gpu LESSONS=17 GPU_ARCH=90 > $OUT/mut.log 2>&1; echo "mutants rc=$? $((SECONDS-S)) s"; grep "17/" $OUT/mut.log | head -7 | cut -c1-110; cp docs/results/mutants-nvidia-h200.md $OUT/

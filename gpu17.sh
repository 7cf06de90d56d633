#!/bin/bash
export PATH=$PATH:/usr/local/cuda/bin
S=$SECONDS
make -j16 solution17 lesson17 solution9 GPU_ARCH=90 > $OUT/build.log 2>&1 || { tail -40 $OUT/build.log; exit 1; }
echo "build $((SECONDS-S)) s"
timeout 120 ./solution17 > $OUT/grade17.log 2>&1; echo "solution17 rc=$? $((SECONDS-S)) s"; tail -4 $OUT/grade17.log
./lesson17 2>&1 | tail -2
timeout 150 ./solution17 --fuzz 300 > $OUT/fuzz17.log 2>&1; echo "fuzz rc=$? $((SECONDS-S)) s"; tail -2 $OUT/fuzz17.log
timeout 150 make sanitize-solution17 GPU_ARCH=90 > $OUT/san.log 2>&1; echo "sanitize rc=$? $((SECONDS-S)) s"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY" $OUT/san.log
timeout 240 make bench-17 GPU_ARCH=90 GIT_COMMIT=61b8713 > $OUT/bench.log 2>&1; echo "bench rc=$? $((SECONDS-S)) s"; cp docs/results/lessons/varlen-17-*.md build/bench17/bench.csv $OUT/ 2>/dev/null; grep -E "^\| lesson 17, packed|Targets" docs/results/lessons/varlen-17-*.md
timeout $((570-SECONDS)) make mutants-gpu LESSONS=17 GPU_ARCH=90 > $OUT/mut.log 2>&1; echo "mutants rc=$? $((SECONDS-S)) s"; grep "17/" $OUT/mut.log | cut -c1-100; cp docs/results/mutants-*17*.md $OUT/ 2>/dev/null

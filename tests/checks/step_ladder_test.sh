#!/usr/bin/env bash
# tests/checks/step_ladder_test.sh [all]: the step ladders on the CPU emulator (make test-step-ladder, in
# make test; `all` in make test-full). For every lesson whose descriptor has `steps` (STEP:LAST_TODO
# ...): the starter made from the solution with TODO(1)..TODO(LAST_TODO) written and
# STARTER_DONE_STEP STEP (reference/tools/starters.py --upto) must pass `make emu-lessonN` at that
# step, and say it graded that step; the same file with its last TODO not written must fail
# there, unless that TODO changes only the speed (the descriptor's `speed_todos`: no run on the
# emulator or a GPU can fail without it). make test checks that the first step of each ladder passes;
# `all` (make test-full) checks every step both ways. Exit 0, or 1 naming the lesson and step.
set -uo pipefail
which=${1:-first}
mkdir -p build/step-ladder
fails=0; runs=0
while read -r n name steps; do
    [ -n "$steps" ] || continue
    speed=" $(python3 reference/tools/lessons.py speed_todos | awk -v n="$n" '$1 == n { $1 = $2 = ""; print }') "
    src=$(ls solutions/"$name"/*.cu | head -n1)
    for pair in $steps; do
        step=${pair%%:*}; last=${pair##*:}
        ks=$last; [[ $speed == *" $last "* || $which != all ]] || ks="$last $((last - 1))"
        for k in $ks; do
            f=build/step-ladder/$name-step$step-todo$k.cu
            python3 reference/tools/starters.py --upto "$k" "$src" |
                sed "s/^#define STARTER_DONE_STEP 0\$/#define STARTER_DONE_STEP $step/" > "$f"
            out=$(make --no-print-directory emu-lesson"$n" EMU_FILE="$f" EMU_OBJS_BUILT=1 EMU_STEP= 2>&1); rc=$?
            runs=$((runs + 1))
            if [ "$k" = "$last" ]; then
                if [ $rc != 0 ] || ! grep -q "^lesson$n: grading step $step," <<<"$out"; then
                    echo "$out" | tail -n 20
                    echo "step-ladder: lesson $n with TODO(1)-($k) written does not pass step $step on the emulator"; fails=$((fails + 1))
                fi
            elif [ $rc = 0 ]; then
                echo "step-ladder: lesson $n passes step $step with TODO($last) not written: the step checks nothing of it"
                fails=$((fails + 1))
            fi
        done
        [ "$which" = all ] || break
    done
done < <(python3 reference/tools/lessons.py steps)
if [ $fails = 0 ]; then
    if [ "$which" = all ]; then echo "step-ladder: $runs emulator runs: each step passes with its TODOs written and fails without the last one"
    else echo "step-ladder: $runs emulator runs: the first step of each ladder passes with its TODOs written (both ways, every step: make test-full)"; fi
fi
[ $fails = 0 ]

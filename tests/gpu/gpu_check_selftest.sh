#!/usr/bin/env bash
# tests/gpu/gpu_check_selftest.sh (make gpu-check-selftest, in make test; no GPU needed): make
# gpu-check refuses clearly before it runs anything. Without a GPU (a stand-in nvidia-smi that
# finds none, so this also holds on a GPU machine): exit 4 and a message naming what runs
# without one. Bad variables: exit 2 and the valid values, whether or not there is a GPU. And
# which sanitizer gates each solution (make -n: nothing runs).
set -uo pipefail
cd "$(dirname "$0")/../.."
fails=0
# check NAME EXPECTED_EXIT PATTERN ENV...: run tests/gpu/gpu_check.sh with ENV, want the exit and output
check() {
    local name=$1 want=$2 pattern=$3; shift 3
    local out rc
    out=$(env "$@" bash tests/gpu/gpu_check.sh 2>&1); rc=$?
    if [ "$rc" = "$want" ] && grep -qE -- "$pattern" <<<"$out"; then
        echo "ok   $name: exit $rc"
    else
        echo "FAIL $name: expected exit $want and /$pattern/, got exit $rc:"; sed 's/^/     | /' <<<"$out"
        fails=$((fails + 1))
    fi
}
check no-gpu 4 'needs an NVIDIA GPU \(nvidia-smi found none\).*' GPU_CHECK_NVIDIA_SMI=false
check no-gpu-says-what-runs 4 'make mutants-build GPU_ARCH=90' GPU_CHECK_NVIDIA_SMI=false
check bad-stage 2 "unknown stage 'sanitise' in GPU_CHECK_STAGES \(expected some of: build results" \
    GPU_CHECK_STAGES="build sanitise" GPU_CHECK_NVIDIA_SMI=false
check bad-lesson 2 'lesson 99 has no GPU solution \(GPU lessons here: 2 3' LESSONS="7 99" GPU_CHECK_NVIDIA_SMI=false
check cpu-lesson 2 'lesson 1 has no GPU solution' LESSONS=1 GPU_CHECK_NVIDIA_SMI=false
check bad-fuzz-k 2 "FUZZ_K='0' is not valid: expected an integer >= 1" FUZZ_K=0 GPU_CHECK_NVIDIA_SMI=false
# The sanitize stage's rule (Makefile, sanitize-%): racecheck gates every lesson but the sm_90a
# ones (mbarriers, which racecheck does not model), where memcheck gates and racecheck reports.
# what make would run for every solution's sanitize target, without running it (one make -n:
# each start of make reads every mk/*.mk); a solution's lines are those of ./solutionN
nums=$(ls -d solutions/[0-9][0-9]-*/ | sed -E 's@solutions/0?([0-9]+)-.*@\1@')
plans=$(make -n --no-print-directory $(for n in $nums; do printf 'sanitize-solution%s ' "$n"; done) 2>&1 | grep compute-sanitizer)
san() { # NAME TARGET: the recipe lines of solution NAME
    local n=$1; shift 2; "$@" <<<"$(grep -F -- "./solution$n --check-only" <<<"$plans")"
}
for n in $nums; do
    src=$(ls solutions/$(printf %02d "$n")-*/*.cu 2>/dev/null | head -n1); [ -n "$src" ] || continue
    if grep -q '^racecheck := advisory' lessons/$(printf %02d "$n")-*/lesson.mk 2>/dev/null; then  # its descriptor
        if san "$n" "sanitize-solution$n" grep -q 'racecheck .*|| true; echo "racecheck on solution'"$n"': .*not a verdict'; then
            echo "ok   sanitize-solution$n: memcheck gates, racecheck reports (mbarriers)"
        else echo "FAIL sanitize-solution$n: expected racecheck as a report (its descriptor: racecheck := advisory)"; fails=$((fails + 1)); fi
    elif san "$n" "sanitize-solution$n" grep -E 'racecheck .*--error-exitcode 9' | grep -qv 'not a verdict' &&
         ! san "$n" "sanitize-solution$n" grep -q '|| true'; then
        echo "ok   sanitize-solution$n: memcheck and racecheck gate"
    else echo "FAIL sanitize-solution$n: expected racecheck to gate"; fails=$((fails + 1)); fi
done
[ $fails = 0 ] && echo "gpu-check-selftest: OK (the refusals of make gpu-check, the sanitize rule)" || echo "gpu-check-selftest: FAILED ($fails)"
[ $fails = 0 ]

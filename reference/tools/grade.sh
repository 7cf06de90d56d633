#!/usr/bin/env bash
# make grade [SOLUTIONS=1]: build and grade every lesson (or solution) in order,
# printing one scoreboard row as each finishes. Full logs: build/grade/<name>.log.
# Exit status: with solutions, non-zero if any is not a pass; with the student's
# lessons, 0 (a scoreboard, not a verdict) unless a build breaks.
set -u
kind=${1:-lessons}
prefix=${kind%s}                       # lesson | solution
limit=${GRADE_LIMIT:-900}              # seconds for one lesson binary, all cases
mkdir -p build/grade
printf '%-28s %-16s %-8s %10s %10s\n' "$prefix" status cases ms "TFLOP/s"
printf '%-28s %-16s %-8s %10s %10s\n' ---------------------------- ---------------- -------- ---------- ----------
bad=0
for dir in "$kind"/[0-9][0-9]-*/; do
    name=$(basename "$dir")
    n=$((10#${name%%-*}))
    log=build/grade/$prefix$n.log
    if ! make -s "$prefix$n" >"$log" 2>&1; then
        printf '%-28s %-16s %-8s %10s %10s\n' "$name" build-error - - -
        sed 's/^/    /' "$log" | grep -m5 -E 'error' ; bad=1; continue
    fi
    timeout --kill-after=10 "$limit" "./$prefix$n" --csv >>"$log" 2>&1
    rc=$?
    row=$(grep -E "^$name," "$log" | tail -n1)
    if [ -n "$row" ]; then
        IFS=, read -r _ status passed total _ _ _ _ _ _ ms tflops _ _ <<<"$row"
    else
        passed=-; total=-; ms=-; tflops=-
        case $rc in
            4) status=no-gpu; echo "no NVIDIA GPU here: make emu-$prefix$n grades it on the CPU emulator (slow, small shapes)" >>"$log" ;; 5) status=cuda-error ;; 6|124|137) status=timeout ;;
            7) status=oom ;; *) status="crash(rc=$rc)" ;;
        esac
    fi
    [ "$status" = not-implemented ] && status="not implemented"
    printf '%-28s %-16s %-8s %10s %10s\n' "$name" "$status" "$passed/$total" "${ms:--}" "${tflops:--}"
    [ "$status" = pass ] || bad=1
    [ "$status" = pass ] || grep -m3 -E 'FAIL|hint|error|TIMEOUT|no NVIDIA' "$log" | sed 's/^/    /'
done
if [ "$kind" = solutions ]; then exit $bad; fi
exit 0

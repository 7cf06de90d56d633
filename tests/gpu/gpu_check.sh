#!/usr/bin/env bash
# tests/gpu/gpu_check.sh (run it as `make gpu-check`): the full check of the course on a machine
# with an NVIDIA GPU, in stages, each logged to build/gpu-check/<stage>.log, with a summary
# table last (stage, status, seconds, one-line result; also in build/gpu-check/summary.txt).
#
# Stages, in this order (GPU_CHECK_STAGES picks some, same names):
#   build        make -k all standard: every starter and solution, and standard attention
#   results      make results: every solution graded and timed; rewrites docs/results/<gpu>.csv
#   grade        make grade: every starter as shipped must say "not implemented" (exit 3)
#   sanitize     make sanitize-solutionN for every GPU solution (compute-sanitizer memcheck
#                and racecheck, causal too where the lesson has it)
#   fuzz         make fuzz: random valid shapes (FUZZ_K per solution); docs/results/fuzz-<gpu>.md
#   mutants      make mutants-gpu: planted bugs the grader must reject; docs/results/mutants-<gpu>.md
#   bench-quick  make bench-quick: a few shapes, standard vs the solutions, forward and backward
#                (build/bench-quick-*.csv), then lesson 12's quick decode sweep (build/decode-quick-*.csv)
# Not run unless named in GPU_CHECK_STAGES:
#   text-experiments   make text-experiments: the measurements the lesson texts quote
#
# Variables (from make): GPU_CHECK_STAGES (default: the seven above), LESSONS ("7 8": the
# solutions that sanitize, fuzz and mutants check; the others always cover every lesson),
# FUZZ_K (shapes per solution, default 500), NVCC, MAKE. GIT_COMMIT names the commit in the
# results files where the tree has no .git (see reference/tools/results.sh).
#
# Lessons are found in the tree: every solutions/NN-*/ with a .cu file is a GPU lesson. A
# lesson whose binary refuses this GPU because its kernels need another architecture (exit 4,
# "lesson NN needs a ... GPU": lesson 09's sm_90a code on anything but compute capability 9.0)
# is marked skipped, not failed, in every stage; any other exit 4 ("no code for this GPU")
# is a failure.
#
# Exit status: 0 every stage passed or was skipped, 1 a stage failed, 2 bad variables,
# 4 no NVIDIA GPU (nothing is run; the message says what runs without one).
set -uo pipefail
cd "$(dirname "$0")/../.."

MAKE=${MAKE:-make}
NVCC=${NVCC:-nvcc}
SMI=${GPU_CHECK_NVIDIA_SMI:-nvidia-smi} # overridable so that the self-test can check the refusal
LOGS=build/gpu-check
DEFAULT_STAGES="build results grade sanitize fuzz mutants bench-quick"
KNOWN_STAGES="$DEFAULT_STAGES text-experiments"
FUZZ_K=${FUZZ_K:-500}

die_usage() { echo "make gpu-check: $*" >&2; exit 2; }

# ---- the variables: checked before anything runs ----
stages=$(echo "${GPU_CHECK_STAGES:-$DEFAULT_STAGES}" | tr ',' ' ')
for s in $stages; do
    [[ " $KNOWN_STAGES " == *" $s "* ]] || die_usage "unknown stage '$s' in GPU_CHECK_STAGES (expected some of: $KNOWN_STAGES)"
done
[ -n "${stages// /}" ] || die_usage "GPU_CHECK_STAGES is empty (expected some of: $KNOWN_STAGES)"
[[ $FUZZ_K =~ ^[0-9]+$ ]] && [ "$FUZZ_K" -ge 1 ] || die_usage "FUZZ_K='$FUZZ_K' is not valid: expected an integer >= 1"

# GPU lessons: solutions/NN-*/ holding a .cu file, by number.
all_gpu=()
for dir in solutions/[0-9][0-9]-*/; do
    ls "$dir"*.cu >/dev/null 2>&1 || continue
    name=$(basename "$dir"); all_gpu+=("$((10#${name%%-*}))")
done
selected=("${all_gpu[@]}")
if [ -n "${LESSONS:-}" ]; then
    selected=()
    for n in $(echo "$LESSONS" | tr ',' ' '); do
        [[ $n =~ ^[0-9]+$ ]] || die_usage "LESSONS='$LESSONS': '$n' is not a lesson number"
        n=$((10#$n))
        [[ " ${all_gpu[*]} " == *" $n "* ]] || die_usage "LESSONS='$LESSONS': lesson $n has no GPU solution (GPU lessons here: ${all_gpu[*]})"
        selected+=("$n")
    done
fi

# ---- a GPU, or a clear refusal ----
if ! gpu=$("$SMI" --query-gpu=name,compute_cap,driver_version --format=csv,noheader 2>/dev/null | head -n1) || [ -z "$gpu" ]; then
    cat >&2 <<'EOF'
make gpu-check needs an NVIDIA GPU (nvidia-smi found none): it runs every lesson binary.
  Without a GPU, these run here: make test (unit tests, CPU emulators of lessons 03-08,
  the site), make mutants-build GPU_ARCH=90 (every mutant applies and compiles),
  make ptxas-solutionN GPU_ARCH=90 (registers and spills).
EOF
    exit 4
fi
IFS=, read -r gpu_name gpu_cc driver <<<"$gpu"
gpu_name=$(echo "$gpu_name" | sed 's/^ *//; s/ *$//'); gpu_cc=$(echo "$gpu_cc" | tr -d ' .'); driver=${driver// /}
# compute-sanitizer and cuobjdump live next to nvcc, which may not be on PATH
nvcc_dir=$(dirname "$(command -v "$NVCC" 2>/dev/null || echo "$NVCC")")
export PATH="$PATH:$nvcc_dir"
# The sub-makes run one after another from this script: they get their own -j, not the jobserver
# of a `make -jN gpu-check` whose descriptors they could not use.
MAKEFLAGS=$(sed -E 's/(^| )--jobserver-(auth|fds)=[^ ]*//g; s/(^| )-j[0-9]*//g' <<<"${MAKEFLAGS:-}")
export MAKEFLAGS
JOBS=$(nproc 2>/dev/null || echo 4)

mkdir -p "$LOGS"
commit=${GIT_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
header="make gpu-check: $gpu_name (sm_$gpu_cc, driver $driver), commit $commit, $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "== $header"
echo "   stages: $stages; GPU lessons: ${selected[*]}; logs: $LOGS/"

rows=()      # stage|status|seconds|result
failed=0
row() { rows+=("$1|$2|$3|$4"); [ "$2" = FAIL ] && failed=1; printf '   %s: %s, %s s: %s\n' "$1" "$2" "$3" "$4"; }
nn() { printf '%02d' "$1"; }

# ---- which GPU lessons run on this GPU (every one probed after the build) ----
declare -A skip=()   # lesson number -> why
runnable=()          # the selected lessons that are not skipped
probe() {
    runnable=(); skip=()
    for n in "${all_gpu[@]}"; do
        if ! $MAKE -s "solution$n" >"$LOGS/probe-$n.log" 2>&1; then
            continue   # the build stage reports it; the stages below then fail on it
        fi
        timeout 120 "./solution$n" --bench-only --csv --reps 1 --warmup 0 -b 1 -H 1 -n 16 >"$LOGS/probe-$n.log" 2>&1
        rc=$?
        if [ $rc = 4 ] && grep -q 'needs a .* GPU' "$LOGS/probe-$n.log"; then
            skip[$n]=$(grep -m1 -o 'needs a .* GPU (sm_[0-9]*)' "$LOGS/probe-$n.log")
        fi
    done
    for n in "${selected[@]}"; do [ -n "${skip[$n]:-}" ] || runnable+=("$n"); done
}
skipped_note() {
    local out="" n
    for n in $(printf '%s\n' "${!skip[@]}" | sort -n); do out+="$(nn "$n") ${skip[$n]}; "; done
    [ -z "$out" ] || echo "skipped: ${out%; }"
}
# LESSONS= for the stages that take it: nothing when every GPU lesson runs (full tables)
lessons_arg() {
    if [ -z "${LESSONS:-}" ] && [ ${#skip[@]} -eq 0 ]; then echo ""; else echo "${runnable[*]}"; fi
}
# with every selected lesson skipped, a stage that takes LESSONS has nothing to do
nothing_to_run() { [ ${#runnable[@]} -eq 0 ]; }

probed=0
ensure_probe() { [ $probed = 1 ] || { probe; probed=1; }; }

# ---- the stages ----
stage_build() {
    local log=$LOGS/build.log
    if $MAKE -k -j"$JOBS" all standard >"$log" 2>&1; then
        echo "pass|every starter and solution built, and ./standard ($(sed -n 1p build/arch-stamp 2>/dev/null))"
    else
        local bad
        bad=$(grep -oE "No rule to make target '[^']*'|\*\*\* \[[^]]*\]" "$log" | sed -E "s/.*\[([^]]*)\].*/\1/" | sort -u | tr '\n' ' ')
        echo "FAIL|build errors (${bad:-see the log}); $log"
    fi
}

stage_results() {
    local log=$LOGS/results.log
    $MAKE results >"$log" 2>&1; local rc=$?
    local out; out=$(sed -n 's/^wrote //p' "$log" | tail -n1)
    local pass=0 bad="" sk="" line name status n
    while IFS= read -r line; do
        name=${line%%,*}; status=$(cut -d, -f3 <<<"$line"); n=$((10#${name%%-*}))
        if [ "$status" = pass ]; then pass=$((pass + 1))
        elif [ -n "${skip[$n]:-}" ]; then sk+="$(nn "$n") "
        else bad+="$(nn "$n"):$status "; fi
    done < <(grep -E '^[0-9][0-9]-[^,]*,[0-9a-f]*,' "$log")
    if [ $rc != 0 ] || [ -z "$out" ]; then echo "FAIL|make results exited $rc; $log"
    elif [ -n "$bad" ]; then echo "FAIL|$pass pass, not: ${bad% }${sk:+; skipped: ${sk% }}; wrote $out"
    else echo "pass|$pass solutions pass${sk:+, skipped: ${sk% }}; wrote $out"; fi
}

stage_grade() {
    local log=$LOGS/grade.log
    $MAKE grade >"$log" 2>&1; local rc=$?
    local ni=0 bad="" sk="" name status n
    while read -r name status rest; do
        n=$((10#${name%%-*}))
        if [ "$status" = not ] && [[ $rest == implemented* ]]; then ni=$((ni + 1))
        elif [ -n "${skip[$n]:-}" ] && [ "$status" = no-gpu ]; then sk+="$(nn "$n") "
        else bad+="$(nn "$n"):$status "; fi
    done < <(grep -E '^[0-9][0-9]-' "$log")
    if [ $rc != 0 ]; then echo "FAIL|make grade exited $rc; $log"
    elif [ -n "$bad" ]; then echo "FAIL|$ni starters say not implemented, not: ${bad% }${sk:+; skipped: ${sk% }} (a starter as shipped must exit 3)"
    else echo "pass|$ni starters say not implemented${sk:+, skipped: ${sk% }}"; fi
}

stage_sanitize() {
    if nothing_to_run; then echo "skip|every selected lesson is skipped on this GPU"; return; fi
    local log=$LOGS/sanitize.log
    : >"$log"
    if ! command -v compute-sanitizer >/dev/null 2>&1; then
        echo "skip|compute-sanitizer not found (not on PATH nor next to $NVCC)"; return
    fi
    # mbarrier lessons (sm_90a sources): memcheck is the gate, racecheck only reports (Makefile)
    local clean="" bad="" mem="" n one
    for n in "${runnable[@]}"; do
        echo "==== make sanitize-solution$n" >>"$log"
        one=$($MAKE -s "sanitize-solution$n" 2>&1); local rc=$?
        echo "$one" >>"$log"
        if [ $rc != 0 ]; then bad+="$(nn "$n") "
        elif grep -q "^racecheck on solution$n: " <<<"$one"; then mem+="$(nn "$n") "
        else clean+="$(nn "$n") "; fi
    done
    local ok="memcheck and racecheck clean: ${clean:-none}"
    [ -z "$mem" ] || ok="${ok% }; memcheck clean, racecheck not a verdict (mbarriers): ${mem% }"
    if [ -n "$bad" ]; then echo "FAIL|errors in solution ${bad% } (${ok% }); $log"
    else echo "pass|${ok% }"; fi
}

stage_fuzz() {
    if nothing_to_run; then echo "skip|every selected lesson is skipped on this GPU"; return; fi
    local log=$LOGS/fuzz.log
    $MAKE fuzz FUZZ_K="$FUZZ_K" LESSONS="$(lessons_arg)" >"$log" 2>&1; local rc=$?
    local cases; cases=$(awk '/cases passed/ {p += $2; t += $4} END {print p + 0 " of " t + 0}' "$log")
    local out; out=$(sed -n 's/^wrote //p' "$log" | tail -n1)
    if [ $rc = 0 ]; then echo "pass|$cases cases passed ($FUZZ_K shapes per solution); wrote $out"
    else
        local bad; bad=$(grep -E '^ +[0-9][0-9]-[^:]*: ' "$log" | grep -vE ': ([0-9]+) of \1 ' | cut -c1-5 | tr -d ' ' | tr '\n' ' ')
        echo "FAIL|$cases cases passed; failing: ${bad% } ($log)"
    fi
}

stage_mutants() {
    if nothing_to_run; then echo "skip|every selected lesson is skipped on this GPU"; return; fi
    local log=$LOGS/mutants.log
    $MAKE mutants-gpu LESSONS="$(lessons_arg)" >"$log" 2>&1; local rc=$?
    local line; line=$(grep -E '^[0-9]+ mutants:' "$log" | tail -n1)
    if [ $rc = 0 ]; then echo "pass|${line:-done}"
    else echo "FAIL|${line:-make mutants-gpu exited $rc}; $log"; fi
}

stage_bench_quick() {
    local log=$LOGS/bench-quick.log
    $MAKE bench-quick >"$log" 2>&1; local rc=$?
    # bench.sh's "== results:" line, then decode.sh's (the decode sweep runs second)
    local line; line=$(grep -E '^== results:' "$log" | sed 's/^== results: //' | paste -sd ';' - | sed 's/;/; /g')
    if [ $rc = 0 ]; then echo "pass|${line:-done}"; else echo "FAIL|make bench-quick exited $rc; $log"; fi
}

stage_text_experiments() {
    local log=$LOGS/text-experiments.log
    $MAKE text-experiments >"$log" 2>&1; local rc=$?
    if [ $rc = 0 ]; then echo "pass|$(tail -n1 "$log")"; else echo "FAIL|make text-experiments exited $rc; $log"; fi
}

for s in $DEFAULT_STAGES text-experiments; do   # always in this order, whatever order was given
    [[ " $stages " == *" $s "* ]] || continue
    [ "$s" = build ] || ensure_probe
    echo "== $s (log: $LOGS/$s.log)"
    t0=$SECONDS
    res=$("stage_${s//-/_}")
    row "$s" "${res%%|*}" "$((SECONDS - t0))" "${res#*|}"
done
ensure_probe

# ---- the summary ----
{
    echo
    echo "== $header"
    printf '%-17s %-6s %8s  %s\n' stage status seconds result
    printf '%-17s %-6s %8s  %s\n' ----------------- ------ -------- ------------------------------------------------
    for r in "${rows[@]}"; do
        IFS='|' read -r s st sec res <<<"$r"
        printf '%-17s %-6s %8s  %s\n' "$s" "$st" "$sec" "$res"
    done
    note=$(skipped_note); [ -z "$note" ] || echo "$note"
    echo "gpu-check: $([ $failed = 0 ] && echo 'every stage passed' || echo 'FAILED (see the logs above)')"
} | tee "$LOGS/summary.txt"
exit $failed

#!/usr/bin/env bash
# tests/ring/hostrun.sh SRC NAME [quick|full]: lesson 15's emulator (its descriptor's emu_grader:
# make emu-15, emu-lesson15, emu-solution15; no GPU). The ring's host code, SRC, runs over the fake
# CUDA runtime (tests/fake_cuda/fake_cuda.cpp, and tests/ring/fake_nccl.cpp) with float64 stand-ins for lesson 09's library, and
# is graded by the Criterion tests of tests/ring/ring_logic.cu and ring_hostrun.cu: the virtual ring
# on one "GPU" with 2, 3 and 4 ranks (attention_set_ranks, as the grader's --ranks), and also rings
# of one rank per fake GPU, by the copy engines and over a fake NCCL, where nccl.h is found
# (NCCL_ROOT, from make); each under the fake's two schedules of the streams (copies last, copies
# first) in the fault mode. Then the real grader (tests/ring/ring_runner.cu: the forward runner over
# the fake CUDA runtime, HOSTSIM_FWD_OBJ from make) grades SRC on small shapes, each on 2, 3 and 4
# ranks as on a GPU: quick, two shapes, the first under the copies-last schedule and the second
# under copies-first; full, five shapes under both, and the timeline tool (the worklog's) must
# compile. Every stage runs; any failure fails the whole. Each
# test failure names the TODO it checks; the grader's lines are its own.
set -uo pipefail
cd "$(dirname "$0")/../.."
src=$1; name=$2; NVCC=${NVCC:-nvcc}; CXX=${CXX_RING:-g++}
command -v "$NVCC" >/dev/null || { echo "$name: SKIP (no nvcc)"; exit 0; }
# -I the lesson folder: a copy elsewhere (EMU_FILE) finds the given ring_block.h and ring_timeline.h
flags=(-O2 -std=c++17 -gencode arch=compute_90a,code=compute_90a -Xcicc -O0 -Ireference/include -Ireference/harness -Ireference/cpu -Ireference/gpu -Ilessons/15-ring-attention)
dir=$(mktemp -d "$PWD/build/ring-hostrun.XXXXXX" 2>/dev/null || { mkdir -p build && mktemp -d "$PWD/build/ring-hostrun.XXXXXX"; })
trap 'rm -rf "$dir"' EXIT
# each transport's build flags: the virtual ring needs none
transports=(" "); [ -n "${NCCL_ROOT:-}" ] && transports+=("-DRING_NCCL -I$NCCL_ROOT/include")
failed=0
for t in "${transports[@]}"; do
    # shellcheck disable=SC2086
    what="virtual ring"; fakes=(tests/fake_cuda/fake_cuda.cpp)
    [[ $t == *NCCL* ]] && { what="one rank per fake GPU: copy engines, fake NCCL"; fakes+=(tests/ring/fake_nccl.cpp); }
    objs=(); for f in "${fakes[@]}"; do o="$dir/$(basename "$f" .cpp).o"; objs+=("$o")
        $CXX -O2 -std=c++17 -I"${CUDA_INC:-/usr/local/cuda/include}" -Itests/fake_cuda $t -c "$f" -o "$o" || exit 1; done
    "$NVCC" "${flags[@]}" -cudart none $t -Itests/ring -Itests/fake_cuda -DRING_LOGIC_SRC="\"$(realpath "$src")\"" \
        tests/ring/ring_hostrun.cu "${objs[@]}" -o "$dir/hostrun" -lcriterion || { echo "$name: the host run of $src does not build"; exit 1; }
    if "$dir/hostrun" --jobs 1; then echo "$name: $src runs right on the CPU ($what)"
    else echo "$name: $src fails the tests above ($what): a unit test's failure names its TODO; a wrong gathered O or L names none (TODO(5)-(8): the fault mode's finding, if any, is above)"; failed=1; fi
done
# the grader, as on one GPU: the virtual ring, each shape on 2, 3 and 4 ranks (its default)
# (quick: each shape under one schedule, the two shapes covering both)
shapes=("-b 1 -H 2 -n 120 -d 64 --causal" "-b 2 -H 1 -n 96 -d 128")
full=0; [ "${3:-quick}" = full ] && full=1
[ $full = 1 ] && shapes+=("-b 2 -H 3 -n 77 -d 64 --causal" "-b 1 -H 2 -n 1680 -d 64 --causal" "-b 1 -H 2 -n 1680 -d 64")
if [ -z "${HOSTSIM_FWD_OBJ:-}" ]; then
    echo "$name: the grader stage needs the runner's host objects (make emu-lesson15 passes them): skipped"
# shellcheck disable=SC2086
elif "$NVCC" "${flags[@]}" -cudart none -Itests/ring -Itests/fake_cuda -DRING_LOGIC_SRC="\"$(realpath "$src")\"" \
        tests/ring/ring_runner.cu $HOSTSIM_FWD_OBJ -o "$dir/lesson15" -Xcompiler -fopenmp -lm; then
    k=0
    for s in "${shapes[@]}"; do
        scheds=(copies-last copies-first); [ $full = 1 ] || scheds=("${scheds[k % 2]}"); k=$((k + 1))
        for sched in "${scheds[@]}"; do
            # shellcheck disable=SC2086
            out=$(cd "$dir" && RING_FAKE_SCHEDULE=$sched ./lesson15 --check-only --seed 1 $s 2>&1); rc=$?
            if [ $rc = 0 ]; then echo "$name: the grader on the CPU ($sched): $s: $(grep -E '^[0-9]+ of [0-9]+ cases passed' <<<"$out")"
            else echo "$out"; echo "$name: the grader on the CPU ($sched) fails $src on $s (exit $rc)"; failed=1; fi
        done
    done
else
    echo "$name: $src does not build with the grader (tests/ring/ring_runner.cu)"; failed=1
fi
# shellcheck disable=SC2086
[ $full = 0 ] || "$NVCC" "${flags[@]}" ${transports[-1]} -c lessons/15-ring-attention/worklog/tools/ring_timeline.cu -o /dev/null ||
    { echo "$name: the timeline tool (lessons/15-ring-attention/worklog/tools/ring_timeline.cu) does not compile"; failed=1; }
[ $failed = 0 ] || { echo "$name: FAILED (above)"; exit 1; }
echo "$name: PASS"

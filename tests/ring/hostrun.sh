#!/usr/bin/env bash
# tests/ring/hostrun.sh SRC NAME [quick|full]: lesson 15's emulator (its descriptor's emu_grader:
# make emu-15, emu-lesson15, emu-solution15; no GPU). The ring's host code, SRC, runs over the fake
# CUDA runtime (tests/fake_cuda/fake_cuda.cpp, and tests/ring/fake_nccl.cpp) with float64 stand-ins for lesson 09's library, and
# is graded by the Criterion tests of tests/ring/ring_logic.cu: the virtual ring (3 ranks on one
# "GPU"), and also the NCCL ring over a fake NCCL where nccl.h is found (NCCL_ROOT, from make).
# Then the timeline tool (the worklog's) compiles. Each failure names the TODO it checks.
set -uo pipefail
cd "$(dirname "$0")/../.."
src=$1; name=$2; NVCC=${NVCC:-nvcc}; CXX=${CXX_RING:-g++}
command -v "$NVCC" >/dev/null || { echo "$name: SKIP (no nvcc)"; exit 0; }
flags=(-O2 -std=c++17 -gencode arch=compute_90a,code=compute_90a -Xcicc -O0 -Ireference/include -Ireference/harness -Ireference/cpu -Ireference/gpu)
dir=$(mktemp -d "$PWD/build/ring-hostrun.XXXXXX" 2>/dev/null || { mkdir -p build && mktemp -d "$PWD/build/ring-hostrun.XXXXXX"; })
trap 'rm -rf "$dir"' EXIT
transports=("-DRING_VIRTUAL_RANKS=3"); [ -n "${NCCL_ROOT:-}" ] && transports+=("-DRING_NCCL -I$NCCL_ROOT/include")
for t in "${transports[@]}"; do
    # shellcheck disable=SC2086
    fakes=(tests/fake_cuda/fake_cuda.cpp); [[ $t == *NCCL* ]] && fakes+=(tests/ring/fake_nccl.cpp)
    objs=(); for f in "${fakes[@]}"; do o="$dir/$(basename "$f" .cpp).o"; objs+=("$o")
        $CXX -O2 -std=c++17 -I"${CUDA_INC:-/usr/local/cuda/include}" -Itests/fake_cuda $t -c "$f" -o "$o" || exit 1; done
    "$NVCC" "${flags[@]}" -cudart none $t -Itests/ring -Itests/fake_cuda -DRING_LOGIC_SRC="\"$(realpath "$src")\"" \
        tests/ring/ring_hostrun.cu "${objs[@]}" -o "$dir/hostrun" -lcriterion || { echo "$name: the host run of $src does not build"; exit 1; }
    "$dir/hostrun" --jobs 1 || { echo "$name: $src fails the tests above ($t); each failure names the TODO it checks"; exit 1; }
    echo "$name: $src runs right on the CPU ($([[ $t == *NCCL* ]] && echo fake NCCL || echo virtual ring))"
done
# shellcheck disable=SC2086
"$NVCC" "${flags[@]}" ${transports[-1]} -c lessons/15-ring-attention/worklog/tools/ring_timeline.cu -o /dev/null ||
    { echo "$name: the timeline tool (lessons/15-ring-attention/worklog/tools/ring_timeline.cu) does not compile"; exit 1; }
echo "$name: PASS"

#!/usr/bin/env bash
# lessons/16-paged-kv-cache/worklog/graph.sh: lesson 16's append and decode in a serving loop, captured
# in a CUDA graph and replayed (serve_graph.cu: its checks and what it times).
#
#   bash lessons/16-paged-kv-cache/worklog/graph.sh [--page P] [--steps T] [--seed S]   (or make graph-16 ARGS='...')
# Environment: SRC (the lesson file linked in: default the solution; lessons/16-paged-kv-cache/paged_kv_cache.cu
# for yours), GPU_ARCH (as make's; default read from nvidia-smi), NO_BUILD=1 (run build/serve_graph as built).
# Builds build/serve_graph (nvcc: the lesson file, serve_graph.cu and the C harness's serving.c, rng.c,
# cpu_reference.c), then runs it; its exit status: 0 every check passed, 1 one failed, 4 no GPU.
set -euo pipefail
cd "$(dirname "$0")/../../.."
src=${SRC:-solutions/16-paged-kv-cache/paged_kv_cache.cu}
if [ "${NO_BUILD:-0}" != 1 ]; then
    make -s --no-print-directory build/host/serving.o build/host/rng.o build/host/cpu_reference.o
    arch=$(make -s --no-print-directory print-ARCH_FLAGS ${GPU_ARCH:+GPU_ARCH=$GPU_ARCH})
    nvcc=$(make -s --no-print-directory print-NVCC)
    # shellcheck disable=SC2086
    "$nvcc" -O3 -std=c++17 $arch -Ireference/include -Ireference/harness -Ireference/cpu "$src" \
        lessons/16-paged-kv-cache/worklog/serve_graph.cu build/host/serving.o build/host/rng.o build/host/cpu_reference.o \
        -o build/serve_graph -Xcompiler -fopenmp -lgomp
fi
exec build/serve_graph "$@"

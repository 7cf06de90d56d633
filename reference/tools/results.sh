#!/usr/bin/env bash
# make results (on a GPU): grade and time every solution on the bench shape and
# write docs/results/<gpu-name>.csv with the date, commit, nvcc version and, per
# solution, the fingerprint of its source and the reference/include headers it includes
# (reference/tools/source_hash.py). `make test` checks those hashes against
# the sources (tests/checks/check_results_fresh.sh), so a kernel changed without a GPU
# run cannot land unnoticed.
set -euo pipefail
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n1 || true)
if [ -z "$gpu" ]; then echo "make results needs an NVIDIA GPU (nvidia-smi found none)" >&2; exit 4; fi
slug=$(echo "$gpu" | tr 'A-Z ' 'a-z-' | tr -cd 'a-z0-9-')
out=docs/results/$slug.csv
mkdir -p docs/results build/results
nvcc_v=$(${NVCC:-nvcc} --version | sed -n 's/.*release \([0-9.]*\).*/\1/p')
# GIT_COMMIT: where the tree travels without .git (a GPU machine), the caller names the commit
commit=${GIT_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
dirty=""
if [ -z "${GIT_COMMIT:-}" ] && git status --porcelain -- solutions reference 2>/dev/null | grep -q .; then dirty="+uncommitted"; fi
tmp=$(mktemp)
{
    echo "# gpu: $gpu"
    echo "# date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "# commit: $commit$dirty"
    echo "# nvcc: $nvcc_v"
    echo "# driver: $(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -n1)"
    echo "# source_sha256: the code fingerprint of reference/tools/source_hash.py (comments and spacing not hashed), of the sources this run built"
    echo "solution,source_sha256,status,cases_passed,cases_total,dtype,B,H,N,d,causal,ms,tflops,peak_pct"
} >"$tmp"
for dir in solutions/[0-9][0-9]-*/; do
    name=$(basename "$dir")
    n=$((10#${name%%-*}))
    src=$(ls "$dir"*.c "$dir"*.cu 2>/dev/null | head -n1 || true)
    sha=$(python3 reference/tools/source_hash.py "$src")
    make -s "solution$n" >/dev/null
    log=build/results/solution$n.log
    set +e
    timeout --kill-after=10 900 "./solution$n" --csv >"$log" 2>&1
    rc=$?
    set -e
    row=$(grep -E "^$name," "$log" | tail -n1 || true)
    if [ -z "$row" ]; then # no CSV row: the exit status says why (as make grade reads it)
        case $rc in
            4) if grep -q "needs a .* GPU" "$log"; then status=needs-other-gpu; else status=no-gpu; fi ;;
            5) status=cuda-error ;; 6|124|137) status=timeout ;; 7) status=oom ;; *) status="crash(rc=$rc)" ;;
        esac
        row="$name,$status,,,,,,,,,,,,"
    fi
    IFS=, read -r _ status passed total dtype B H N d causal ms tflops pct _ <<<"$row"
    echo "$name,$sha,$status,$passed,$total,$dtype,$B,$H,$N,$d,$causal,$ms,$tflops,$pct" | tee -a "$tmp"
done
mv "$tmp" "$out"
echo "wrote $out"

#!/usr/bin/env bash
# tests/checks/ptxas_report.sh SRC ARCH... [-- FLAG...]: ptxas's report (nvcc -Xptxas -v: registers, spills, stack
# frame per kernel) for SRC compiled for the architectures ARCH (75, 80, 90 or 90a), with every
# warning, on stdout; the exit status is nvcc's. The check-NN steps of `make test` use it.
#
# Building ./lessonN or ./solutionN (the Makefile's link rule) keeps that report in
# build/ptxas/<binary>.log. The report is read from there when it is the same compilation:
# the binary's source is SRC, it was built with the default NVCC_FLAGS for (at least) these
# architectures, and the log is newer than SRC, the files beside SRC and the harness headers.
# Otherwise SRC is compiled here:
#   nvcc -O3 -std=c++17 -Xcompiler -Wall <archs> -Ireference/include -Ireference/harness -Ireference/cpu -Ireference/gpu -Xptxas -v -c SRC
# A build that is not a binary's own (FLAGs after --, e.g. -DDQ_ATOMIC=0, or a generated variant
# file outside lessons/ and solutions/) always compiles here, device code only (-cubin).
# Only the entries for the requested architectures are printed (warnings always are).
# NVCC (environment) names the compiler, default nvcc. PTXAS_REPORT_FRESH=1 always compiles.
set -uo pipefail
if [ $# -lt 2 ]; then echo "usage: $0 SRC ARCH... [-- NVCC_FLAG...] (ARCH: 75, 80, 90, 90a)" >&2; exit 2; fi
src=$1; shift
archs=(); flags=()
while [ $# -gt 0 ] && [ "$1" != -- ]; do archs+=("$1"); shift; done
[ $# -gt 0 ] && { shift; flags=("$@"); }
NVCC=${NVCC:-nvcc}

# lessons/07-mma-ldmatrix/mma.cu -> lesson7; solutions/11-x/y.cu -> solution11
bin=$(sed -nE 's@^(lesson|solution)s/0?([0-9]+)-[^/]*/[^/]*$@\1\2@p' <<<"$src")
log=build/ptxas/$bin.log

only_archs() {  # keep the entries of the requested architectures, and every warning
    awk -v want=" ${archs[*]} " '
        /Compiling entry function/ { a = $0; sub(/.*for .sm_/, "", a); sub(/.$/, "", a); on = index(want, " " a " ") > 0 }
        /^ptxas info *: [0-9]+ bytes gmem/ { next }
        on || /[Ww]arning|[Ee]rror/ { print }'
}

usable() {
    [ -n "$bin" ] && [ -f "$log" ] && [ ${#flags[@]} -eq 0 ] && [ "${PTXAS_REPORT_FRESH:-0}" != 1 ] || return 1
    head -n1 "$log" | grep -qF "ptxas -v of $src, default flags," || return 1
    local a f
    for a in "${archs[@]}"; do head -n1 "$log" | grep -qE "code=sm_$a( |$)" || return 1; done
    for f in "$(dirname "$src")"/* reference/*/*.h; do
        [ -f "$f" ] && [ "$f" -nt "$log" ] && return 1
    done
    return 0
}

if usable; then
    tail -n +2 "$log" | only_archs
    exit 0
fi
compile() {  # compile ARCH...: nvcc's whole output
    local gencode=() a
    for a in "$@"; do gencode+=(-gencode "arch=compute_$a,code=sm_$a"); done
    "$NVCC" -O3 -std=c++17 -Xcompiler -Wall "${flags[@]}" "${gencode[@]}" -Ireference/include -Ireference/harness -Ireference/cpu -Ireference/gpu -Xptxas -v \
        $mode "$src" -o /dev/null 2>&1
}
if [ -n "$bin" ] && [ ${#flags[@]} -eq 0 ]; then
    mode=-c; out=$(compile "${archs[@]}"); rc=$?
else
    # not a binary's own build (a variant, extra flags): device code only, one architecture at a
    # time (-cubin), since ptxas's report does not depend on the host code
    mode=-cubin; out=""; rc=0
    for a in "${archs[@]}"; do
        o=$(compile "$a"); r=$?; out+="$o"$'\n'; [ $r -eq 0 ] || rc=$r
    done
fi
if [ $rc -ne 0 ]; then echo "$out"; exit $rc; fi
only_archs <<<"$out"

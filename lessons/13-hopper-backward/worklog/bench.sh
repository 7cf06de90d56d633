#!/usr/bin/env bash
# lessons/13-hopper-backward/worklog/bench.sh: lesson 13's backward on a Hopper GPU, on the shapes of the
# lesson's text (H d = 2048, B N = 16384), next to lesson 11's and PyTorch's SDPA backward
# (FlashAttention-2 and cuDNN) timed the same way in the same run; prints per head dimension a
# table of TFLOP/s and one of ratios to cuDNN.
#
#   bash lessons/13-hopper-backward/worklog/bench.sh           (from the repository root; or make bench-13)
#   bash lessons/13-hopper-backward/worklog/bench.sh --ladder  (or make bench-13 ARGS=--ladder): the ladder, below
# Options:
#   --d 64|128|64,128     head dimensions (default both; --ladder: 128)
#   --n "1024 4096 16384" sequence lengths (B = 16384 / N, at least 1; H = 2048 / d;
#                         --ladder: "4096 16384")
#   --causal 0|1|0,1      (default both)
#   --dtype fp16|bf16     (default fp16)
#   --variant NAME        also the solution with variants/NAME.var (make solution13-NAME); repeatable
#   --lesson              time your lessons/13-hopper-backward/hopper_backward.cu (./lesson13), not the solution
#   --no-build --no-grade --no-peers --no-lesson11
# Every binary is graded first (--check-only: the full case matrix) unless --no-grade; a build
# that fails grading is timed all the same and flagged. TFLOP/s as the harness counts them: 2.5 x
# 4 B H N^2 d / time, halved when causal. Every timing: build/bench13/bench.csv; each grading log
# in build/bench13/<name>.grade.
#
# --ladder: the ladder from lesson 11 (worklog/README.md, "The ladder from lesson 11"): lesson 11's
# solution, rungs 1 to 4 (variants/ladder-K-*.var: the final kernel without the steps above K;
# make solution13-ladder-K-NAME) and the solution (rung 5), each graded on six cases (both d, both
# types, causal, ragged N, more blocks than SMs), then timed next to PyTorch's cuDNN and
# FlashAttention-2 backward. Writes RESULTS/ladder-13-<gpu>.csv (every timing, each rung's source
# fingerprint, reference/tools/source_hash.py, and registers), .md (the tables) and .svg (the chart);
# the binaries, their sources, ptxas reports and logs in build/ladder13/. Options besides the above:
#   --ncu                 also Nsight Compute on each rung: one launch of the main kernel at
#                         --ncu-shape (default "-b 1 -H 16 -n 16384 -d 128"): its duration, the
#                         tensor pipe's activity, issue activity, the three largest stall reasons
#                         (of all the kernel's warps: ncu does not tell roles apart) and the bank
#                         conflicts of ordinary shared-memory loads and stores (the dS^T and dQ
#                         stores, the L and D loads; wgmma's and TMA's accesses are not counted
#                         there); into RESULTS/ladder-13-<gpu>-ncu.csv and the .md
#   --build-only          build into build/ladder13/ and stop: no GPU needed (carry that folder to
#                         a GPU machine and run there with --no-build)
#   --jobs J              parallel builds (default: the number of CPUs)
#   --results DIR         where the CSV, .md and .svg go (default docs/results/lessons)
#   --plot CSV SVG        only draw the chart of a ladder CSV and print its tables (with the
#                         ncu table when CSV's -ncu.csv is next to it); no GPU needed
#   GIT_COMMIT=abc123     the commit to record where the tree has no .git (as make results)
# Exit status: 0; 1 a build or a run failed, or a binary failed grading (after everything is
# written); 2 a bad command line; 4 no Hopper GPU (make check-13, make emu-13, --build-only and
# --plot need none).
set -uo pipefail
ARGS="$*"
cd "$(dirname "$0")/../../.." || exit 1

DLIST="" NLIST="" CLIST="0 1" DTYPE=fp16 MINE=0
BUILD=1 GRADE=1 PEERS=1 L11=1 VARIANTS=()
LADDER=0 NCU=0 NCU_SHAPE="-b 1 -H 16 -n 16384 -d 128" BUILD_ONLY=0 PLOT_CSV="" PLOT_SVG=""
RESULTS=docs/results/lessons JOBS=$(nproc 2>/dev/null || echo 4)
while [ $# -gt 0 ]; do
    case "$1" in
    --d) DLIST=$(echo "${2:?}" | tr ',' ' '); shift ;;
    --n) NLIST="${2:?}"; shift ;;
    --causal) CLIST=$(echo "${2:?}" | tr ',' ' '); shift ;;
    --dtype) DTYPE="${2:?}"; shift ;;
    --variant)
        [ -f "lessons/13-hopper-backward/worklog/variants/${2:?}.var" ] ||
            { echo "bench.sh: no variant file lessons/13-hopper-backward/worklog/variants/$2.var" >&2; exit 2; }
        VARIANTS+=("$2"); shift ;;
    --lesson) MINE=1 ;;
    --no-build) BUILD=0 ;;
    --no-grade) GRADE=0 ;;
    --no-peers) PEERS=0 ;;
    --no-lesson11) L11=0 ;;
    --ladder) LADDER=1 ;;
    --ncu) NCU=1 ;;
    --ncu-shape) NCU_SHAPE="${2:?}"; shift ;;
    --build-only) BUILD_ONLY=1 ;;
    --jobs) JOBS="${2:?}"; shift ;;
    --results) RESULTS="${2:?}"; shift ;;
    --plot)
        [ $# -ge 3 ] || { echo "bench.sh: --plot takes CSV SVG" >&2; exit 2; }
        PLOT_CSV=$2 PLOT_SVG=$3; shift 2 ;;
    -h | --help) sed -n '2,/^set -uo pipefail/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
    esac
    shift
done
[ -n "$DLIST" ] || DLIST=$([ "$LADDER" = 1 ] && echo 128 || echo "64 128")
[ -n "$NLIST" ] || NLIST=$([ "$LADDER" = 1 ] && echo "4096 16384" || echo "1024 4096 16384")
case "$DTYPE" in fp16 | bf16) ;; *) echo "bench.sh: --dtype must be fp16 or bf16" >&2; exit 2 ;; esac
for d in $DLIST; do case "$d" in 64 | 128) ;; *) echo "bench.sh: --d takes 64 and 128" >&2; exit 2 ;; esac; done
for N in $NLIST; do
    [[ $N =~ ^[0-9]+$ && $N -ge 1 ]] || { echo "bench.sh: --n takes positive lengths, got '$N'" >&2; exit 2; }
done
for c in $CLIST; do [[ $c =~ ^[01]$ ]] || { echo "bench.sh: --causal takes 0 and/or 1, got '$c'" >&2; exit 2; }; done
[[ $JOBS =~ ^[0-9]+$ && $JOBS -ge 1 ]] || { echo "bench.sh: --jobs takes a positive count, got '$JOBS'" >&2; exit 2; }
if [ "$LADDER" = 0 ]; then
    [ "$NCU" = 0 ] || { echo "bench.sh: --ncu goes with --ladder" >&2; exit 2; }
    [ "$BUILD_ONLY" = 0 ] || { echo "bench.sh: --build-only goes with --ladder" >&2; exit 2; }
elif [ "$MINE" = 1 ] || [ ${#VARIANTS[@]} -gt 0 ]; then
    echo "bench.sh: --ladder times the solution and its rungs: not with --lesson or --variant" >&2; exit 2
fi
[ "$BUILD_ONLY" = 0 ] || [ "$BUILD" = 1 ] || { echo "bench.sh: --build-only and --no-build contradict" >&2; exit 2; }

tflops() { # B H N d causal ms -> TFLOP/s of a backward pass
    awk -v B="$1" -v H="$2" -v N="$3" -v d="$4" -v c="$5" -v ms="$6" \
        'BEGIN { if (ms + 0 <= 0) { print ""; exit } f = 2.5 * 4 * B * H * N * N * d; if (c == 1) f /= 2; printf "%.1f", f / (ms * 1e-3) / 1e12 }'
}

# ---- the ladder chart: a ladder CSV -> SVG (gnuplot, the look of bench/plot.gp's charts): per
# rung (its label up to " ("), one bar per shape; rows not "pass"/"ok" are left out ----
ladder_chart() { # csv svg
    command -v gnuplot >/dev/null || { echo "bench.sh: gnuplot is not installed (apt-get install gnuplot-nox): no chart" >&2; return 1; }
    local csv=$1 svg=$2 tmp ncol rc
    tmp=$(mktemp -d) || return 1
    python3 - "$csv" "$tmp/bars.dat" "$tmp/title" <<'PY' || { rm -rf "$tmp"; return 1; }
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
need = {"gpu", "date", "label", "dtype", "N", "d", "causal", "status", "tflops"}
if not rows or not need <= set(rows[0]):
    sys.exit("bench.sh: %s is not a ladder CSV with rows (columns %s)" % (sys.argv[1], ", ".join(sorted(need))))
labels, shapes, tf = [], [], {}
for r in rows:
    shape = (int(r["d"]), int(r["N"]), int(r["causal"]))
    if r["label"] not in labels: labels.append(r["label"])
    if shape not in shapes: shapes.append(shape)
    try:
        v = float(r["tflops"])
    except ValueError:
        continue
    if r["status"] in ("pass", "ok") and v > 0: tf[r["label"], shape] = v
shapes.sort()
ds = sorted({s[0] for s in shapes})
name = lambda d, n, c: "N = %d%s%s" % (n, " causal" if c else "", ", d = %d" % d if len(ds) > 1 else "")
with open(sys.argv[2], "w") as f:
    f.write("rung " + " ".join('"%s"' % name(*s) for s in shapes) + "\n")
    for lab in labels:
        f.write('"%s" ' % lab.split(" (")[0].replace('"', "'") + " ".join("%.1f" % tf[lab, s] if (lab, s) in tf else "NaN" for s in shapes) + "\n")
r0 = rows[0]
open(sys.argv[3], "w").write("Lesson 13, the ladder from lesson 11: %s, %s\n%s, d = %s, H d = 2048, B N = 16384"
                             % (r0["gpu"], r0["date"][:10], r0["dtype"], "/".join(map(str, ds))))
PY
    ncol=$(head -n1 "$tmp/bars.dat" | python3 -c 'import shlex, sys; print(len(shlex.split(sys.stdin.read())))')
    gnuplot -e "dat='$tmp/bars.dat'; out='$svg'; ncol=$ncol; heading='$(head -n1 "$tmp/title" | tr "'" ' ')'; shape='$(tail -n1 "$tmp/title")'" - <<'GP'
set terminal svg size 1000,720 dynamic font "sans,13" background rgb "white"
set output out
set title heading . "\n" . shape noenhanced
set key below noenhanced
set grid ytics lc rgb "#dddddd"
set border lc rgb "#555555"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set xtics rotate by -30 left nomirror noenhanced
set ylabel "backward TFLOP/s (2.5 x 4 B H N^2 d / time; causal: half)" noenhanced
set yrange [0:*]
set bmargin 12
set rmargin 12
array palette[8] = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"]
plot for [i = 2:ncol] dat using i:xtic(1) title columnheader(i) lc rgb palette[(i - 2) % 8 + 1]
GP
    rc=$?
    rm -rf "$tmp"
    [ $rc = 0 ] && echo "  chart: $svg" >&2
    return $rc
}

# ---- a Hopper GPU (compute capability 9.0): refuse clearly without one ----
require_hopper() {
    local name cc
    name=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n1)
    if [ -z "$name" ]; then
        echo "bench.sh: needs an NVIDIA Hopper GPU (H100 or H200, compute capability 9.0); nvidia-smi found none." >&2
        echo "bench.sh: without one, make check-13 and make emu-13 check the kernels$([ "$LADDER" = 1 ] && echo "; --build-only builds the ladder, --plot CSV SVG draws a chart")." >&2
        exit 4
    fi
    cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n1 | tr -d ' ')
    if [[ $cc =~ ^[0-9]+\.[0-9]+$ ]]; then
        [ "$cc" = 9.0 ] || { echo "bench.sh: needs an NVIDIA Hopper GPU (compute capability 9.0); $name is $cc (lesson 13 is built for sm_90a alone)" >&2; exit 4; }
    elif ! [[ $name =~ H100|H200|H800|H20|GH200 ]]; then  # an nvidia-smi without compute_cap: go by the name
        echo "bench.sh: needs an NVIDIA Hopper GPU (compute capability 9.0); $name does not look like one" >&2; exit 4
    fi
}

# ---- PyTorch's SDPA backward (FlashAttention-2 and cuDNN) on the shapes DLIST x NLIST x CLIST ----
# Timed as the harness times: warm-up, then each backward alone between CUDA events, a read of
# max(2 x L2, 64 MiB) before each (no input found in L2), the median of 20. Prints one line per
# backend and shape: name,B,H,N,d,causal,ms (or the exception's name instead of ms).
peers_time() { # errfile
    local shapes="" d N c B
    for d in $DLIST; do for N in $NLIST; do for c in $CLIST; do
        B=$((16384 / N)); [ "$B" -lt 1 ] && B=1
        shapes="$shapes $B,$((2048 / d)),$N,$d,$c"
    done; done; done
    # shellcheck disable=SC2086
    python3 bench/sdpa_backward_time.py "$DTYPE" $shapes 2>"$1"
}

# ---- the ladder (--ladder) ----
# One rung per line: name|make target|label|the main kernel's name|source
ladder_rungs() {
    [ "$L11" = 0 ] || echo "lesson11|solution11|0: lesson 11 (mma.sync, cp.async, dQ by atomics)|fa2_bwd_kernel|$(ls solutions/11-*/*.cu | head -n1)"
    local v label
    for v in $(cd lessons/13-hopper-backward/worklog/variants && ls ladder-*.var | sed 's/\.var$//' | sort -t- -k2,2n); do
        label=$(sed -n 's/^rung: //p' "lessons/13-hopper-backward/worklog/variants/$v.var" | head -n1)
        echo "$v|solution13-$v|${label:-$v}|fa3_backward_kernel|build/variants/solution13-$v.cu"
    done
    echo "lesson13|solution13|5: + causal longest-first order (lesson 13)|fa3_backward_kernel|$(ls solutions/13-*/*.cu | head -n1)"
}
# registers per thread of a kernel in a ptxas -v report, its instantiations for DTYPE and the head
# dimensions DLIST (mangled names: kernel<T, ...d...>): "168", or "245/255" when they differ
regs_of() { # ptxas-report kernel-name
    local t
    t=$([ "$DTYPE" = fp16 ] && echo "I6__half" || echo "I13__nv_bfloat16")
    awk -v k="$2$t" -v ds="$DLIST" '/Compiling entry function/ { on = 0; if (index($0, k)) { n = split(ds, dd, " "); for (i = 1; i <= n; i++) if (index($0, "Li" dd[i] "E")) on = 1 } }
        on && /Used [0-9]+ registers/ { for (i = 1; i <= NF; i++) if ($i == "Used") r[$(i + 1)] = 1; on = 0 }
        END { n = 0; for (x in r) v[++n] = x + 0; for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (v[j] < v[i]) { t = v[i]; v[i] = v[j]; v[j] = t }
              s = ""; for (i = 1; i <= n; i++) s = s (i > 1 ? "/" : "") v[i]; print (s == "" ? "?" : s) }' "$1" 2>/dev/null
}
ladder_build() { # OUT: the binaries, their sources and ptxas reports there
    local out=$1 name target src arch jobs f built="" nvcc
    jobs="$out/jobs.txt"
    nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
    echo "building the ladder (lesson 11's solution, the rungs, the solution) with $JOBS jobs..." >&2
    # the harness objects first (one make), then every binary and its ptxas report in parallel
    make -j"$JOBS" --no-print-directory solution13 GPU_ARCH=90 > "$out/build-solution13.log" 2>&1 ||
        { tail -n 20 "$out/build-solution13.log" >&2; echo "bench.sh: make solution13 failed ($out/build-solution13.log)" >&2; return 1; }
    : > "$jobs"
    while IFS='|' read -r name target _ _ src; do
        arch="-gencode arch=compute_90a,code=sm_90a"
        [ "$name" = lesson11 ] && arch="-gencode arch=compute_90,code=sm_90"
        echo "make --no-print-directory $target GPU_ARCH=90 > $out/build-$name.log 2>&1 && cp $target $out/$name && cp $src $out/$name.cu && $nvcc -O3 -std=c++17 $arch -Ireference/include -Ireference/harness -Ireference/cpu -Ireference/gpu -Xptxas -v -c $out/$name.cu -o /dev/null > $out/$name.ptxas 2>&1 || { echo 'bench.sh: building $name failed (see $out/build-$name.log, $out/$name.ptxas)' >&2; exit 1; }" >> "$jobs"
    done < <(ladder_rungs)
    xargs -d '\n' -P "$JOBS" -I{} bash -c {} < "$jobs" || return 1
    for f in "$out"/*; do [ -x "$f" ] && [ -f "$f" ] && built="$built $(basename "$f")"; done
    echo "built:$built" >&2
}
LADDER_CASES=("-b 2 -H 3 -n 77 -d 64 --dtype fp16" "-b 1 -H 2 -n 1000 -d 128 --dtype bf16 --causal"
              "-b 1 -H 2 -n 1000 -d 64 --dtype fp16 --causal" "-b 3 -H 2 -n 300 -d 128 --dtype fp16"
              "-b 1 -H 1 -n 1 -d 128 --dtype fp16" "-b 2 -H 8 -n 1500 -d 64 --dtype bf16 --causal")
ladder_grade() { # out name -> prints "k/n" and the first failure
    local out=$1 name=$2 c ok=0 first="" rc
    : > "$out/$name.grade"
    for c in "${LADDER_CASES[@]}"; do
        echo "== $out/$name --check-only --timeout 10 $c" >> "$out/$name.grade"
        # shellcheck disable=SC2086
        timeout 300 "$out/$name" --check-only --timeout 10 $c >> "$out/$name.grade" 2>&1
        rc=$?
        if [ $rc = 0 ]; then ok=$((ok + 1)); else
            [ -n "$first" ] || first="exit $rc on '$c'"
            case $rc in 4 | 5 | 6 | 124 | 137) break ;; esac  # no GPU, a crash, a hang: the rest would too
        fi
    done
    echo "$ok/${#LADDER_CASES[@]}${first:+ (first failure: $first)}"
}
ncu_rung() { # out name kernel -> $out/ncu-$name.csv (raw) and one line of figures (CSV) on stdout
    local out=$1 name=$2 kernel=$3 log
    log="$out/ncu-$name.log"
    local base=(ncu --clock-control none --section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats
                --section SchedulerStats --section LaunchStats -k "regex:$kernel" -c 1 --csv --page raw)
    # shellcheck disable=SC2054
    local smem=(--metrics l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum)
    # shellcheck disable=SC2086
    if ! timeout 600 "${base[@]}" "${smem[@]}" "$out/$name" --bench-only $NCU_SHAPE --dtype "$DTYPE" --reps 1 --warmup 0 > "$log" 2>&1; then
        echo "  ncu $name: failed with the shared-memory metrics; again without them (see $log.first)" >&2
        mv "$log" "$log.first"
        # shellcheck disable=SC2086
        timeout 600 "${base[@]}" "$out/$name" --bench-only $NCU_SHAPE --dtype "$DTYPE" --reps 1 --warmup 0 > "$log" 2>&1 ||
            { echo "  ncu $name: failed (see $log)" >&2; return 1; }
    fi
    grep '^"' "$log" > "$out/ncu-$name.csv"
    python3 - "$out/ncu-$name.csv" <<'PY'
import csv, re, sys
rows = list(csv.reader(open(sys.argv[1])))
if len(rows) < 3:
    sys.exit("no metrics")
m = {n: (v, u) for n, u, v in zip(rows[0], rows[1], rows[2])}
def num(n):
    try:
        return float(m[n][0].replace(",", ""))
    except (KeyError, ValueError):
        return None
def fmt(x, f="%.1f"):
    return "" if x is None else f % x
dur, unit = num("gpu__time_duration.sum"), m.get("gpu__time_duration.sum", ("", ""))[1]
scale = {"nsecond": 1e-3, "usecond": 1.0, "msecond": 1e3, "second": 1e6, "ns": 1e-3, "us": 1.0, "ms": 1e3,
         "s": 1e6}.get(unit, None)
dur_us = dur * scale if dur is not None and scale else None
stalls = {}
for n, (v, u) in m.items():
    g = re.search(r"issue_stalled_(.*)_per_issue_active\.ratio$", n)
    if g:
        try:
            stalls[g.group(1)] = max(stalls.get(g.group(1), 0.0), float(v.replace(",", "")))
        except ValueError:
            pass
top = sorted(stalls.items(), key=lambda kv: -kv[1])[:3]
top += [("", None)] * (3 - len(top))
out = [fmt(dur_us), fmt(num("sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active")),
       fmt(num("smsp__issue_active.avg.pct_of_peak_sustained_active"))]
for r, v in top:
    out += [r, fmt(v, "%.2f")]
for n in ("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum", "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum",
          "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum", "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum"):
    out.append(fmt(num(n), "%.0f"))
print(",".join(out))
PY
}
ladder_main() {
    local out=build/ladder13 T0 name target label kernel src d N c B H row status ms tf fails=0
    T0=$(date +%s)
    mkdir -p "$out"
    elapsed() { echo "$(($(date +%s) - T0)) s"; }
    if [ "$BUILD" = 1 ]; then ladder_build "$out" || return 1; echo "built ($(elapsed))" >&2; fi
    [ "$BUILD_ONLY" = 0 ] || { echo "bench.sh: --build-only: the ladder is in $out/ (run on a Hopper GPU with --ladder --no-build)" >&2; return 0; }
    local RUNGS=()
    mapfile -t RUNGS < <(ladder_rungs)
    declare -A TF GR REGS SHA
    for r in "${RUNGS[@]}"; do
        IFS='|' read -r name _ _ kernel _ <<< "$r"
        [ -x "$out/$name" ] || { echo "bench.sh: $out/$name is missing (build without --no-build)" >&2; return 1; }
        REGS[$name]=$(regs_of "$out/$name.ptxas" "$kernel")
        SHA[$name]=$(python3 reference/tools/source_hash.py "$out/$name.cu" 2>/dev/null || echo "?")
        GR[$name]="not graded"
        if [ "$GRADE" = 1 ]; then
            GR[$name]=$(ladder_grade "$out" "$name")
            echo "  $name: graded ${GR[$name]} ($out/$name.grade)" >&2
            [[ ${GR[$name]} != *failure* ]] || fails=1
        fi
    done
    echo "graded ($(elapsed))" >&2

    local gpu slug date commit
    gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n1)
    slug=$(echo "$gpu" | tr 'A-Z ' 'a-z-' | tr -cd 'a-z0-9-')
    date=$(date -u +%Y-%m-%dT%H:%M:%SZ)
    commit=${GIT_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
    mkdir -p "$RESULTS"
    local CSV="$RESULTS/ladder-13-$slug.csv" MD="$RESULTS/ladder-13-$slug.md" SVG="$RESULTS/ladder-13-$slug.svg"
    local NCSV="$RESULTS/ladder-13-$slug-ncu.csv"
    echo "gpu,date,commit,rung,label,source_sha256,registers,graded,dtype,B,H,N,d,causal,status,ms,tflops" > "$CSV"
    for d in $DLIST; do
        H=$((2048 / d))
        for N in $NLIST; do
            B=$((16384 / N)); [ "$B" -lt 1 ] && B=1
            for c in $CLIST; do
                for r in "${RUNGS[@]}"; do
                    IFS='|' read -r name _ label _ _ <<< "$r"
                    # shellcheck disable=SC2046
                    row=$("$out/$name" --bench-only --csv --timeout 10 -b "$B" -H "$H" -n "$N" -d "$d" --dtype "$DTYPE" \
                          $([ "$c" = 1 ] && echo --causal) 2>/dev/null | tail -n1)
                    status=$(echo "$row" | cut -d, -f2) ms=$(echo "$row" | cut -d, -f11)
                    tf=$(tflops "$B" "$H" "$N" "$d" "$c" "${ms:-0}")
                    echo "$gpu,$date,$commit,$name,\"$label\",${SHA[$name]},${REGS[$name]},\"${GR[$name]}\",$DTYPE,$B,$H,$N,$d,$c,${status:-error},$ms,$tf" >> "$CSV"
                    TF[$name,$d,$N,$c]=${tf:-${status:-error}}
                    echo "  $name d=$d N=$N causal=$c: ${TF[$name,$d,$N,$c]} TFLOP/s ($ms ms)" >&2
                done
            done
        done
    done
    echo "timed ($(elapsed))" >&2
    if [ "$PEERS" = 1 ] && python3 -c "import torch; assert torch.cuda.is_available()" 2>/dev/null; then
        local pout m
        pout=$(peers_time "$out/peers.err")
        [ -n "$pout" ] || echo "bench.sh: the PyTorch timing failed (see $out/peers.err)" >&2
        while IFS=, read -r m B H N d c ms; do
            [ -n "$m" ] || continue
            [[ $ms =~ ^[0-9.]+$ ]] && status=ok || { status=$ms; ms=""; }
            tf=$(tflops "$B" "$H" "$N" "$d" "$c" "${ms:-0}")
            TF[torch-$m,$d,$N,$c]=${tf:-$status}
            label=$([ "$m" = cudnn ] && echo "PyTorch SDPA backward, cuDNN" || echo "PyTorch SDPA backward, FlashAttention-2")
            echo "$gpu,$date,$commit,torch-$m,\"$label\",,,,$DTYPE,$B,$H,$N,$d,$c,$status,$ms,$tf" >> "$CSV"
        done <<< "$pout"
        echo "PyTorch timed ($(elapsed))" >&2
    fi
    if [ "$NCU" = 1 ]; then
        if ! command -v ncu >/dev/null 2>&1; then
            echo "bench.sh: --ncu: Nsight Compute's ncu is not installed: no profiles" >&2; fails=1
        else
            echo "rung,label,duration_us,tensor_pipe_active_pct,issue_active_pct,stall_1,stall_1_cycles_per_issue,stall_2,stall_2_cycles_per_issue,stall_3,stall_3_cycles_per_issue,smem_st_bank_conflicts,smem_st_wavefronts,smem_ld_bank_conflicts,smem_ld_wavefronts" > "$NCSV"
            local fig
            for r in "${RUNGS[@]}"; do
                IFS='|' read -r name _ label kernel _ <<< "$r"
                echo "  ncu on $name: $out/$name --bench-only $NCU_SHAPE --dtype $DTYPE" >&2
                if fig=$(ncu_rung "$out" "$name" "$kernel"); then echo "$name,\"$label\",$fig" >> "$NCSV"; else fails=1; fi
            done
            echo "profiled ($(elapsed))" >&2
        fi
    fi
    ladder_tables "$CSV" "$NCSV" "$gpu" "$date" "$commit" > "$MD" || fails=1
    ladder_chart "$CSV" "$SVG" || fails=1
    cat "$MD"
    echo
    echo "written: $CSV, $MD, $SVG$([ -f "$NCSV" ] && [ "$NCU" = 1 ] && echo ", $NCSV"); logs in $out/ ($(elapsed) in all)"
    return $fails
}
# The markdown of a ladder run: provenance, TFLOP/s per rung and shape, each rung over the one
# below, the ncu figures.
ladder_tables() { # csv ncu-csv gpu date commit
    local csv=$1 ncsv=$2
    echo "# Lesson 13: the backward ladder from lesson 11, $3"
    echo
    echo "GPU: $3, driver $(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -n1)," \
         "nvcc $(nvcc --version 2>/dev/null | sed -n 's/.*release \([0-9.]*\).*/\1/p'). Date (UTC): $4. Commit: $5."
    echo "Command: \`bash lessons/13-hopper-backward/worklog/bench.sh $(echo "$ARGS" | sed -E 's/ ?--results [^ ]+//')\` ($DTYPE;" \
         "rungs: lessons/13-hopper-backward/worklog/variants/ladder-*.var, worklog/README.md \"The ladder from lesson 11\")."
    echo "Every timing: the harness's \`--bench-only\` (the median of repeated launches, the L2 flushed);"
    echo "TFLOP/s = 2.5 x 4 B H N^2 d / time, halved when causal. Chart: [$(basename "$csv" .csv).svg]($(basename "$csv" .csv).svg)."
    echo
    ladder_tables_body "$csv" "$ncsv" "$NCU"
}
ladder_tables_body() { # csv ncu-csv with-ncu(0/1)
    python3 - "$@" <<'PY'
import csv, os, sys
rows = list(csv.DictReader(open(sys.argv[1])))
rungs, shapes, tf, info = [], [], {}, {}
for r in rows:
    if r["rung"] not in rungs: rungs.append(r["rung"])
    info[r["rung"]] = r
    s = (int(r["d"]), int(r["N"]), int(r["causal"]))
    if s not in shapes: shapes.append(s)
    try:
        tf[r["rung"], s] = float(r["tflops"]) if r["status"] in ("pass", "ok") else None
    except ValueError:
        tf[r["rung"], s] = None
shapes.sort()
head = lambda s: "N=%d%s%s" % (s[1], " causal" if s[2] else "", "" if len({x[0] for x in shapes}) == 1 else " d=%d" % s[0])
print("| rung | registers | graded | source | " + " | ".join(head(s) for s in shapes) + " |")
print("|---|---|---|---|" + "---|" * len(shapes))
for k in rungs:
    r = info[k]
    cells = ["%.1f" % tf[k, s] if tf.get((k, s)) else (next((x["status"] for x in rows if x["rung"] == k and (int(x["d"]), int(x["N"]), int(x["causal"])) == s), "")) for s in shapes]
    print("| %s | %s | %s | %s | %s |" % (r["label"], r["registers"], r.get("graded", ""), r["source_sha256"], " | ".join(cells)))
print()
print("Each rung over the rung below (the step's gain):")
print()
print("| step | " + " | ".join(head(s) for s in shapes) + " |")
print("|---|" + "---|" * len(shapes))
ladder = [k for k in rungs if not k.startswith("torch-")]
for lo, hi in zip(ladder, ladder[1:]):
    cells = ["%.2fx" % (tf[hi, s] / tf[lo, s]) if tf.get((hi, s)) and tf.get((lo, s)) else "" for s in shapes]
    print("| %s | %s |" % (info[hi]["label"], " | ".join(cells)))
if "torch-cudnn" in rungs:
    print()
    print("Each rung over PyTorch's cuDNN backward:")
    print()
    print("| rung | " + " | ".join(head(s) for s in shapes) + " |")
    print("|---|" + "---|" * len(shapes))
    for k in ladder:
        cells = ["%.2f" % (tf[k, s] / tf["torch-cudnn", s]) if tf.get((k, s)) and tf.get(("torch-cudnn", s)) else "" for s in shapes]
        print("| %s | %s |" % (info[k]["label"], " | ".join(cells)))
if sys.argv[3] == "1" and os.path.isfile(sys.argv[2]):
    print()
    print("Nsight Compute, one launch of the main kernel per rung (raw metrics: build/ladder13/ncu-<rung>.csv);")
    print("stalls: cycles per issued instruction, over all the kernel's warps; bank conflicts: ordinary")
    print("shared-memory stores and loads (not wgmma's or TMA's accesses), conflicts / wavefronts:")
    print()
    print("| rung | time (us) | tensor pipe active (%) | issue active (%) | largest stalls | smem store conflicts | smem load conflicts |")
    print("|---|---|---|---|---|---|---|")
    for r in csv.DictReader(open(sys.argv[2])):
        st = ", ".join("%s %s" % (r["stall_%d" % i], r["stall_%d_cycles_per_issue" % i]) for i in (1, 2, 3) if r["stall_%d" % i])
        print("| %s | %s | %s | %s | %s | %s / %s | %s / %s |" % (r["label"], r["duration_us"], r["tensor_pipe_active_pct"],
              r["issue_active_pct"], st, r["smem_st_bank_conflicts"], r["smem_st_wavefronts"], r["smem_ld_bank_conflicts"],
              r["smem_ld_wavefronts"]))
PY
}
if [ -n "$PLOT_CSV" ]; then
    [ -r "$PLOT_CSV" ] || { echo "bench.sh: --plot: cannot read $PLOT_CSV" >&2; exit 2; }
    ladder_chart "$PLOT_CSV" "$PLOT_SVG" || exit 1
    ncsv="$(dirname "$PLOT_CSV")/$(basename "$PLOT_CSV" .csv)-ncu.csv"
    ladder_tables_body "$PLOT_CSV" "$ncsv" "$([ -f "$ncsv" ] && echo 1 || echo 0)" || exit 1
    exit 0
fi
[ "$BUILD_ONLY" = 1 ] || require_hopper

if [ "$LADDER" = 1 ]; then
    ladder_main
    exit $?
fi

OUT=build/bench13
mkdir -p "$OUT"
# name|binary|label
BINS=("l13|$OUT/solution13|lesson 13$([ "$MINE" = 1 ] && echo ", your file")")
for v in "${VARIANTS[@]}"; do BINS+=("l13-$v|$OUT/solution13-$v|lesson 13 + $v"); done
[ "$L11" = 1 ] && BINS+=("l11|$OUT/solution11|lesson 11")

if [ "$BUILD" = 1 ]; then
    what=$([ "$MINE" = 1 ] && echo lesson13 || echo solution13)
    make --no-print-directory "$what" GPU_ARCH=90 >/dev/null || { echo "bench.sh: make $what failed" >&2; exit 1; }
    cp "$what" "$OUT/solution13"
    for v in "${VARIANTS[@]}"; do
        make --no-print-directory "solution13-$v" GPU_ARCH=90 >/dev/null || { echo "bench.sh: make solution13-$v failed" >&2; exit 1; }
        cp "solution13-$v" "$OUT/solution13-$v"
    done
    if [ "$L11" = 1 ]; then
        make --no-print-directory solution11 GPU_ARCH=90 >/dev/null || { echo "bench.sh: make solution11 failed" >&2; exit 1; }
        cp solution11 "$OUT/solution11"
    fi
fi

declare -A GRADED
for b in "${BINS[@]}"; do
    IFS='|' read -r name bin _ <<< "$b"
    GRADED[$name]="not graded"
    [ "$GRADE" = 1 ] || continue
    "$bin" --check-only --dtype "$DTYPE" > "$OUT/$name.grade" 2>&1
    case $? in 0) GRADED[$name]=pass ;; 4) GRADED[$name]="no Hopper GPU" ;; *) GRADED[$name]=FAIL ;; esac
    echo "  $name: grading ${GRADED[$name]} ($OUT/$name.grade)" >&2
done

CSV="$OUT/bench.csv"
echo "method,dtype,B,H,N,d,causal,status,ms,tflops" > "$CSV"
declare -A TF
for d in $DLIST; do
    H=$((2048 / d))
    for N in $NLIST; do
        B=$((16384 / N)); [ "$B" -lt 1 ] && B=1
        for c in $CLIST; do
            for b in "${BINS[@]}"; do
                IFS='|' read -r name bin _ <<< "$b"
                row=$("$bin" --bench-only --csv -b "$B" -H "$H" -n "$N" -d "$d" --dtype "$DTYPE" \
                      $([ "$c" = 1 ] && echo --causal) 2>/dev/null | tail -n1)
                status=$(echo "$row" | cut -d, -f2); ms=$(echo "$row" | cut -d, -f11)
                tf=$(tflops "$B" "$H" "$N" "$d" "$c" "${ms:-0}")
                echo "$name,$DTYPE,$B,$H,$N,$d,$c,${status:-error},$ms,$tf" >> "$CSV"
                TF[$name,$d,$N,$c]="${tf:-${status:-error}}"
                echo "  $name d=$d N=$N causal=$c: ${TF[$name,$d,$N,$c]} TFLOP/s ($ms ms)" >&2
            done
        done
    done
done

# ---- PyTorch's SDPA backward (FlashAttention-2 and cuDNN) on the same shapes ----
# Timed as the harness times: warm-up, then each backward alone between CUDA events, a read of
# max(2 x L2, 64 MiB) before each (no input found in L2), the median of 20.
if [ "$PEERS" = 1 ] && python3 -c "import torch; assert torch.cuda.is_available()" 2>/dev/null; then
    pout=$(peers_time "$OUT/peers.err")
    [ -z "$pout" ] && echo "bench.sh: the PyTorch timing failed (see $OUT/peers.err)" >&2
    while IFS=, read -r m B H N d c ms; do
        [ -z "$m" ] && continue
        tf=$(tflops "$B" "$H" "$N" "$d" "$c" "$(echo "$ms" | grep -E '^[0-9.]+$' || echo 0)")
        TF[$m,$d,$N,$c]="${tf:-$ms}"
        echo "torch-$m,$DTYPE,$B,$H,$N,$d,$c,ok,$ms,$tf" >> "$CSV"
    done <<< "$pout"
fi

# ---- the tables ----
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.2f", a / b; else print "" }'; }
ROWS=("${BINS[@]}" "flash|-|PyTorch SDPA backward, FlashAttention-2" "cudnn|-|PyTorch SDPA backward, cuDNN")
for d in $DLIST; do
    hdr="| method | graded |" sep="|---|---|"
    for N in $NLIST; do for c in $CLIST; do hdr="$hdr N=$N$([ "$c" = 1 ] && echo " causal") |"; sep="$sep---|"; done; done
    echo
    echo "d = $d, $DTYPE, H = $((2048 / d)), B = 16384 / N; backward TFLOP/s"
    echo
    echo "$hdr"; echo "$sep"
    for r in "${ROWS[@]}"; do
        IFS='|' read -r name _ label <<< "$r"
        [ -n "${TF[$name,$d,${NLIST%% *},${CLIST%% *}]:-}" ] || continue
        line="| $label | ${GRADED[$name]:-} |"
        for N in $NLIST; do for c in $CLIST; do line="$line ${TF[$name,$d,$N,$c]:-} |"; done; done
        echo "$line"
    done
    echo
    echo "d = $d: ratio to PyTorch's cuDNN backward (above 1: faster)"
    echo
    echo "$hdr"; echo "$sep"
    for r in "${ROWS[@]}"; do
        IFS='|' read -r name _ label <<< "$r"
        [ "$name" = cudnn ] && continue
        [ -n "${TF[$name,$d,${NLIST%% *},${CLIST%% *}]:-}" ] || continue
        line="| $label | ${GRADED[$name]:-} |"
        for N in $NLIST; do for c in $CLIST; do
            line="$line $(ratio "${TF[$name,$d,$N,$c]:-}" "${TF[cudnn,$d,$N,$c]:-}") |"
        done; done
        echo "$line"
    done
done
echo
echo "raw results: $CSV"

#!/usr/bin/env bash
# bench/bench.sh: standard attention vs every flash solution across sequence lengths, forward
# and backward.
#
#   bash bench/bench.sh            the full grid (make bench); CSV + charts in docs/results/
#   bash bench/bench.sh --quick    a few shapes for a demo (make bench-quick); CSV in build/
# Options: --no-peers (skip PyTorch), --no-build, --no-plots, --out FILE.csv,
#   --d 64|128|64,128 and --causal 0|1|0,1 (parts of the grid; the memory sweep comes with
#   d 64 non-causal), --pass forward|backward|forward,backward (default both),
#   --append (add rows to the CSV instead of starting it afresh). To split the full bench into
#   commands: `--d 64 --no-plots`, then `--d 128 --append`.
# Environment: BENCH_LESSONS (e.g. "6 7 8": only those solutions), BENCH_NO_STANDARD=1 (no standard
# attention runs: rows for new solutions next to an earlier run's, with --append; the grid then
# goes to BENCH_NMAX and their speedup column stays empty), BENCH_NMAX (largest N, default 65536), BENCH_CAP_MS (a series stops once
# one launch is predicted to take longer than this, default 2000; 600 with --quick).
#
# Every run is one process of the course harness: `./standard` or `./solutionN` with
#   --bench-only --csv -b B -H H -n N -d D [--causal] --dtype T --reps R --warmup W
# A solution whose source defines attention_backward (lessons 10, 11) is a backward method: it
# and ./standard_backward run in the backward part, the others and ./standard in the forward
# part. Both take the same command line; a backward run times attention_backward alone (O and L
# come from a float64 forward outside the timing).
# It times R launches with CUDA events after W warm-up launches, overwriting a 2 x L2
# buffer before each timed launch (outside the events), and reports the median; memory is
# the cudaMemGetInfo drop across allocating the inputs/outputs and the first launch, so it
# includes any workspace the method keeps (standard attention's S and P).
#
# The grid (the course's shape family): H*d = 2048, B*N = 16384 (B = 1 from N = 16384 on),
# d in {64, 128}, causal and not, N = 512, 1024, ... doubling past 16384 until standard
# attention is out of memory in every dtype at some N; that N is still run for the flash
# solutions, then the grid stops. A memory sweep adds B = 1, d = 64 rows for N < 16384
# (standard, the first and the last solution), so the memory column shows N^2 vs N at
# fixed B. Each flash solution runs in fp16 when it supports it, else fp32; standard runs
# in fp32 and fp16, and a row's speedup is standard's time (same dtype and shape) / its time.
#
# CSV (docs/results/bench-<gpu>.csv, started afresh by each full run unless --append), a row
# per run: gpu, date (UTC), commit (git describe), method (standard | solution folder |
# torch-*), dtype, B, H, N, d, causal, status (ok = timed, not graded: grading is `make
# grade`; oom; skipped; unsupported; not-implemented; timeout; cuda-error; ...), ms (median),
# tflops (4 B H N^2 d / time, halved when causal), mem_bytes (device memory of the method
# with its inputs and outputs; for standard's oom rows the S + P bytes it asked for),
# speedup_vs_standard, reps, sweep (grid | memory | quick), gpu_mem_bytes, timing, pass (forward |
# backward). Backward rows count 2.5 x 4 B H N^2 d FLOPs (halved when causal), FlashAttention's
# convention, and their speedup is over the standard backward.
set -uo pipefail
cd "$(dirname "$0")/.."

QUICK=0 PEERS=1 BUILD=1 PLOTS=1 OUT="" DLIST="64 128" CLIST="0 1" APPEND=0 PLIST="forward backward"
while [ $# -gt 0 ]; do
    case "$1" in
    --quick) QUICK=1 ;;
    --no-peers) PEERS=0 ;;
    --no-build) BUILD=0 ;;
    --no-plots) PLOTS=0 ;;
    --out) OUT="${2:?--out needs a file}"; shift ;;
    --d) DLIST=$(echo "${2:?--d needs 64, 128 or 64,128}" | tr ',' ' '); shift
         for d in $DLIST; do [ "$d" = 64 ] || [ "$d" = 128 ] || { echo "bench.sh: --d takes 64 and/or 128" >&2; exit 2; }; done ;;
    --causal) CLIST=$(echo "${2:?--causal needs 0, 1 or 0,1}" | tr ',' ' '); shift
         for c in $CLIST; do [ "$c" = 0 ] || [ "$c" = 1 ] || { echo "bench.sh: --causal takes 0 and/or 1" >&2; exit 2; }; done ;;
    --pass) PLIST=$(echo "${2:?--pass needs forward, backward or forward,backward}" | tr ',' ' '); shift
         for x in $PLIST; do [ "$x" = forward ] || [ "$x" = backward ] || { echo "bench.sh: --pass takes forward and/or backward" >&2; exit 2; }; done ;;
    --append) APPEND=1 ;;
    -h | --help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
    esac
    shift
done

# ---- a GPU, or a clear refusal ----
SMI="${BENCH_NVIDIA_SMI:-nvidia-smi}" # overridable so the self-test can check this message
gpu_line=""
if command -v "$SMI" >/dev/null 2>&1; then
    gpu_line=$("$SMI" --query-gpu=name,memory.total --format=csv,noheader,nounits -i 0 2>/dev/null | head -n1)
fi
if [ -z "$gpu_line" ]; then
    cat >&2 <<'EOF'
make bench needs an NVIDIA GPU: `nvidia-smi` is missing or lists no device.
  It builds ./standard and ./solutionN (nvcc, cuBLAS) and times them on the GPU;
  nothing was run. The committed results are in docs/results/ (`make bench-plots`
  redraws their charts without a GPU).
EOF
    exit 4
fi
GPU_NAME=$(echo "${gpu_line%,*}" | sed 's/^ *//; s/ *$//; s/,/ /g')
GPU_MEM_BYTES=$(( $(echo "${gpu_line##*,}" | tr -dc '0-9') * 1048576 ))
SLUG=$(echo "$GPU_NAME" | tr 'A-Z' 'a-z' | sed -E 's/[^a-z0-9]+/-/g; s/^-+//; s/-+$//')
DATE=$(date -u +%Y-%m-%dT%H:%MZ)
COMMIT=${GIT_COMMIT:-$(git describe --always --dirty 2>/dev/null || echo unknown)}
TIMING="cuda-events median of reps after warm-up; 2xL2 read flush between launches"

if [ -z "$OUT" ]; then
    if [ "$QUICK" = 1 ]; then OUT="build/bench-quick-$SLUG.csv"; else OUT="docs/results/bench-$SLUG.csv"; fi
fi
mkdir -p "$(dirname "$OUT")" build
ERR=$(mktemp -d)
trap 'rm -rf "$ERR"' EXIT

# ---- methods: standard + every solution from 02 on ----
SOL_NUMS=()
SOL_NAMES=()
SOL_BWD=()   # 1 when the solution is a backward pass (its descriptor: runner := backward)
for dir in solutions/[0-9][0-9]-*/; do
    [ -d "$dir" ] || continue
    name=$(basename "$dir")
    num=$((10#${name%%-*}))
    [ "$num" -ge 2 ] || continue
    # BENCH_LESSONS="6 7 8": only those solutions (standard and the peers still run)
    [ -z "${BENCH_LESSONS:-}" ] || [[ " $BENCH_LESSONS " == *" $num "* ]] || continue
    ls "$dir"*.cu >/dev/null 2>&1 || continue
    SOL_NUMS+=("$num")
    SOL_NAMES+=("$name")
    if grep -q '^runner := backward' "lessons/$name/lesson.mk" 2>/dev/null; then SOL_BWD+=(1); else SOL_BWD+=(0); fi
done
has_pass() { [[ " $PLIST " == *" $1 "* ]]; }

BROKEN=()
if [ "$BUILD" = 1 ]; then
    targets=()
    has_pass forward && targets+=(standard)
    has_pass backward && targets+=(standard_backward)
    for k in "${!SOL_NUMS[@]}"; do
        if [ "${SOL_BWD[$k]}" = 1 ]; then has_pass backward || continue; else has_pass forward || continue; fi
        targets+=("solution${SOL_NUMS[$k]}")
    done
    echo "== building: ${targets[*]}"
    ${MAKE:-make} --no-print-directory -k -j"$(nproc)" "${targets[@]}" >"$ERR/build.log" 2>&1 || true
    for t in "${targets[@]}"; do
        if ! ${MAKE:-make} --no-print-directory -q "$t" >/dev/null 2>&1; then
            echo "   build of $t failed (its errors are in build/bench-build.log); it is left out"
            cp "$ERR/build.log" build/bench-build.log
            BROKEN+=("$t")
        fi
    done
fi
is_broken() { local t; for t in "${BROKEN[@]}"; do [ "$t" = "$1" ] && return 0; done; return 1; }
for b in standard standard_backward; do
    [ $b = standard ] && ! has_pass forward && continue
    [ $b = standard_backward ] && ! has_pass backward && continue
    is_broken $b && { echo "bench.sh: ./$b did not build (make $b)" >&2; exit 5; }
    [ -x ./$b ] || { echo "bench.sh: ./$b was not built (make $b)" >&2; exit 5; }
done

# Each method as "label|binary|dtype"; a solution gets fp16 when it accepts it (e4m3 for FP8 lessons). METHODS: the
# forward solutions, BMETHODS: the backward ones; FIRST/LAST_SOL and BFIRST/BLAST_SOL for the
# memory sweeps and the quick run.
METHODS=() BMETHODS=()
FIRST_SOL="" LAST_SOL="" BFIRST_SOL="" BLAST_SOL=""
for k in "${!SOL_NUMS[@]}"; do
    n=${SOL_NUMS[$k]} name=${SOL_NAMES[$k]}
    if [ "${SOL_BWD[$k]}" = 1 ]; then has_pass backward || continue; else has_pass forward || continue; fi
    [ -x "./solution$n" ] && ! is_broken "solution$n" || continue
    # fp16 if it takes it, else e4m3 (lesson 14: FP8 inputs, d = 128), else fp32
    dt=fp32
    for try in "fp16 64" "e4m3 128"; do
        "./solution$n" --bench-only --csv -b 1 -H 1 -n 64 -d "${try#* }" --dtype "${try% *}" --reps 1 --warmup 0 \
            >/dev/null 2>"$ERR/probe" </dev/null
        if [ $? = 2 ] && grep -q -- "--dtype" "$ERR/probe"; then continue; fi
        dt=${try% *}; break
    done
    if [ "${SOL_BWD[$k]}" = 1 ]; then
        BMETHODS+=("$name|./solution$n|$dt")
        [ -n "$BFIRST_SOL" ] || BFIRST_SOL="$name|./solution$n|$dt"
        BLAST_SOL="$name|./solution$n|$dt"
    else
        METHODS+=("$name|./solution$n|$dt")
        [ -n "$FIRST_SOL" ] || FIRST_SOL="$name|./solution$n|$dt"
        LAST_SOL="$name|./solution$n|$dt"
    fi
done
[ ${#METHODS[@]} -gt 0 ] || ! has_pass forward || echo "   (no forward solutions built: only standard attention is timed forward)"
[ ${#BMETHODS[@]} -gt 0 ] || ! has_pass backward || echo "   (no backward solutions built: only the standard backward is timed)"

# ---- one run ----
HEADER="gpu,date,commit,method,dtype,B,H,N,d,causal,status,ms,tflops,mem_bytes,speedup_vs_standard,reps,sweep,gpu_mem_bytes,timing,pass"
if [ "$APPEND" = 1 ] && [ -s "$OUT" ]; then
    [ "$(head -n1 "$OUT")" = "$HEADER" ] || { echo "bench.sh: $OUT has another header; not appending" >&2; exit 2; }
else
    echo "$HEADER" >"$OUT"
fi
declare -A STD_MS   # "pass:dtype:B:H:N:d:causal" -> standard's ms (standard_backward's for the backward pass)
declare -A LAST     # "pass:label:dtype:d:causal:sweep" -> "ms flops" of its previous run
declare -A DEAD     # same key -> why the series stopped
STD_FIT=0           # per N: 1 once standard attention, in some dtype, did not run out of memory
PASS=forward        # the part of the bench being run: every row records it

csv_row() { # method dtype B H N d causal status ms tflops mem speedup reps sweep
    echo "$GPU_NAME,$DATE,$COMMIT,$1,$2,$3,$4,$5,$6,$7,$8,$9,${10},${11},${12},${13},${14},$GPU_MEM_BYTES,$TIMING,$PASS" >>"$OUT"
}

printf '%-28s %-4s %5s %3s %6s %4s %3s %10s %8s %10s %8s\n' method dtype B H N d cau ms "TFLOP/s" "mem MiB" speedup
show() { # label dtype B H N d causal status ms tflops mem speedup [note]
    local mib="" ms="$9" tf="${10}" sp="${12}"
    [ -n "${11}" ] && mib=$(( (${11} + 524288) / 1048576 ))
    if [ "$8" = ok ]; then
        printf '%-28s %-4s %5s %3s %6s %4s %3s %10.3f %8.1f %10s %8s\n' "$1" "$2" "$3" "$4" "$5" "$6" "$7" "$ms" "$tf" "$mib" "${sp:+${sp}x}"
    else
        printf '%-28s %-4s %5s %3s %6s %4s %3s %10s %8s %10s   %s\n' "$1" "$2" "$3" "$4" "$5" "$6" "$7" "${8}" "" "$mib" "${13:-}"
    fi
}

# run LABEL BINARY DTYPE B H N D CAUSAL SWEEP
run() {
    local label=$1 bin=$2 dt=$3 B=$4 H=$5 N=$6 d=$7 causal=$8 sweep=$9
    local key="$PASS:$label:$dt:$d:$causal:$sweep" flops ms="" tf="" mem="" status note="" reps warm pred=""
    if [ -n "${DEAD[$key]:-}" ]; then
        [ "$label" = standard ] && STD_FIT=1
        return 0
    fi
    flops=$((B * N * N)) # the rest of 4*B*H*N^2*d is fixed per series
    # One awk for the numbers of this launch (a process costs more than the arithmetic): the
    # predicted time from the series' last row (empty without one), whether it is over the cap,
    # the timed launches (about REP_MS of them in all, between 3 and 30), the warm-up (3, 1 when slow).
    local over
    read -r pred over reps warm < <(awk -v l="${LAST[$key]:-}" -v f="$flops" -v c="$CAP_MS" -v b="$REP_MS" 'BEGIN{
        p = 0; if (l != "") { split(l, a, " "); p = a[1] * f / a[2] }
        r = p > 0 ? int(b / p) : 10; if (r < 3) r = 3; if (r > 30) r = 30
        printf "%s %d %d %d\n", (l != "" ? sprintf("%.3f", p) : "-"), (p > c), r, (p > 100 ? 1 : 3) }')
    [ "$pred" = - ] && pred=""
    if [ -n "$pred" ]; then
        if [ "$over" = 1 ]; then
            DEAD[$key]="skipped"
            [ "$label" = standard ] && STD_FIT=1
            note="skipped: one launch predicted at ${pred} ms > ${CAP_MS} ms (BENCH_CAP_MS); larger N skipped too"
            csv_row "$label" "$dt" "$B" "$H" "$N" "$d" "$causal" skipped "" "" "" "" "" "$sweep"
            show "$label" "$dt" "$B" "$H" "$N" "$d" "$causal" skipped "" "" "" "" "$note"
            return 0
        fi
    fi
    local args=(--bench-only --csv -b "$B" -H "$H" -n "$N" -d "$d" --dtype "$dt" --reps "$reps" --warmup "$warm" --timeout 120)
    [ "$causal" = 1 ] && args+=(--causal)
    local out rc row
    out=$(timeout 900 "$bin" "${args[@]}" 2>"$ERR/stderr" </dev/null)
    rc=$?
    row="" # the last CSV row of the output (14 fields or more, not the header)
    local line f
    while IFS= read -r line; do
        IFS=, read -ra f <<<"$line"
        [ "${#f[@]}" -ge 14 ] && [ "${f[1]}" != status ] && row=$line
    done <<<"$out"
    if [ -n "$row" ] && [ "$rc" = 0 ]; then
        IFS=, read -r _ status _ _ _ _ _ _ _ _ ms tf _ mem _ <<<"$row" # mem: field 14 only (decode columns follow)
        [ "$status" = pass ] && status=ok # bench-only: timed, not graded (grading: make grade)
    else
        case $rc in
        2) status=unsupported; note=$(grep -m1 -E 'not supported|does not support' "$ERR/stderr" | sed 's/^[^:]*: //') ;;
        3) status=not-implemented ;;
        4) status=no-gpu ;;
        5) status=cuda-error ;;
        6 | 124) status=timeout ;;
        7) status=oom
           mem=$(grep -oE '= [0-9]+ bytes' "$ERR/stderr" | tail -n1 | tr -dc '0-9')
           note="out of memory${mem:+: would need $(awk -v b="$mem" 'BEGIN{printf "%.0f", b/1048576}') MiB for S and P}" ;;
        *) status=failed-rc$rc ;;
        esac
        [ -z "$note" ] && note=$(grep -v '^$' "$ERR/stderr" | tail -n1 | cut -c1-140)
        [ "$status" = oom ] || DEAD[$key]="$status" # an error at one N: do not repeat it at larger N
    fi
    # The grid goes on while standard attention, in some dtype, did anything but run out of memory.
    [ "$label" = standard ] && [ "$status" != oom ] && STD_FIT=1
    local sp=""
    if [ "$status" = ok ]; then
        LAST[$key]="$ms $flops"
        if [ "$label" = standard ]; then
            STD_MS["$PASS:$dt:$B:$H:$N:$d:$causal"]=$ms
        elif [ -n "${STD_MS["$PASS:$dt:$B:$H:$N:$d:$causal"]:-}" ]; then
            sp=$(awk -v s="${STD_MS["$PASS:$dt:$B:$H:$N:$d:$causal"]}" -v m="$ms" 'BEGIN{printf "%.2f", s/m}')
        fi
    fi
    csv_row "$label" "$dt" "$B" "$H" "$N" "$d" "$causal" "$status" "$ms" "$tf" "$mem" "$sp" "$reps" "$sweep"
    show "$label" "$dt" "$B" "$H" "$N" "$d" "$causal" "$status" "$ms" "$tf" "$mem" "$sp" "$note"
}

NMAX=${BENCH_NMAX:-65536}
T0=$SECONDS

# bench_pass PASS STD_BINARY FIRST_SOL LAST_SOL METHOD...: one pass (forward or backward) over the
# grid, or over the quick shapes. Writes the shapes it ran to $ERR/shapes-PASS for the PyTorch peers
# ("sweep,B,H,N,d,causal" per line).
bench_pass() {
    PASS=$1
    local std=$2 first=$3 last=$4 N B H d causal m label bin dt
    shift 4
    local methods=("$@") shapes="$ERR/shapes-$PASS"
    : >"$shapes"
    echo "== $PASS pass"
    if [ "$QUICK" = 1 ]; then
        # Demo: B = 1, 16 heads of d = 128; the last (fastest) solution against the standard method
        # in the same dtype, whose N^2 buffers run out of memory at N = 32768 on an 80 GB GPU (the
        # backward's at N = 16384 in fp32).
        CAP_MS=${BENCH_CAP_MS:-600} REP_MS=300
        local QM=("standard|$std|fp16") Ns="1024 4096 16384 32768"
        [ -n "$last" ] && QM=("standard|$std|${last##*|}" "$last")
        [ "$PASS" = backward ] && Ns="1024 4096 16384"
        for N in $Ns; do
            for m in "${QM[@]}"; do
                IFS='|' read -r label bin dt <<<"$m"
                run "$label" "$bin" "$dt" 1 16 "$N" 128 0 quick
            done
            echo "quick,1,16,$N,128,0" >>"$shapes"
        done
        return 0
    fi
    CAP_MS=${BENCH_CAP_MS:-2000} REP_MS=800
    for d in $DLIST; do
        H=$((2048 / d))
        for causal in $CLIST; do
            echo "== $PASS, d=$d H=$H $([ $causal = 1 ] && echo causal || echo non-causal)"
            N=512
            while [ "$N" -le "$NMAX" ]; do
                B=$((16384 / N)); [ "$B" -ge 1 ] || B=1
                STD_FIT=0
                if [ "${BENCH_NO_STANDARD:-0}" = 1 ]; then STD_FIT=1; else
                    run standard "$std" fp32 "$B" "$H" "$N" "$d" "$causal" grid
                    run standard "$std" fp16 "$B" "$H" "$N" "$d" "$causal" grid
                fi
                for m in "${methods[@]}"; do
                    IFS='|' read -r label bin dt <<<"$m"
                    run "$label" "$bin" "$dt" "$B" "$H" "$N" "$d" "$causal" grid
                done
                echo "grid,$B,$H,$N,$d,$causal" >>"$shapes"
                [ "$STD_FIT" = 0 ] && break # flash has had its N beyond standard's reach
                N=$((N * 2))
            done
        done
    done
    # Memory at fixed B = 1 (the grid's rows from N = 16384 on are B = 1 already).
    local MEMN="512 1024 2048 4096 8192"
    [[ " $DLIST " == *" 64 "* && " $CLIST " == *" 0 "* ]] || MEMN=""
    [ -n "$MEMN" ] && echo "== $PASS memory sweep: B=1 H=32 d=64 non-causal, N < 16384"
    local MM=("standard|$std|fp32" "standard|$std|fp16")
    [ "${BENCH_NO_STANDARD:-0}" = 1 ] && MM=()
    [ -n "$first" ] && MM+=("$first")
    [ -n "$last" ] && [ "$last" != "$first" ] && MM+=("$last")
    for N in $MEMN; do
        for m in "${MM[@]}"; do
            IFS='|' read -r label bin dt <<<"$m"
            run "$label" "$bin" "$dt" 1 32 "$N" 64 0 memory
        done
        echo "memory,1,32,$N,64,0" >>"$shapes"
    done
}

has_pass forward && bench_pass forward ./standard "$FIRST_SOL" "$LAST_SOL" "${METHODS[@]}"
has_pass backward && bench_pass backward ./standard_backward "$BFIRST_SOL" "$BLAST_SOL" "${BMETHODS[@]}"
echo "== harness runs done in $((SECONDS - T0)) s"

# ---- PyTorch peers on the same shapes ----
if [ "$PEERS" = 1 ]; then
    if python3 -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" >/dev/null 2>&1; then
        for PASS in $PLIST; do
            echo "== PyTorch peers, $PASS (scaled_dot_product_attention backends, matmul-softmax-matmul)"
            python3 bench/peers.py --csv "$OUT" --shapes "$ERR/shapes-$PASS" --pass "$PASS" --gpu "$GPU_NAME" \
                --gpu-mem "$GPU_MEM_BYTES" --date "$DATE" --commit "$COMMIT" --cap-ms "$CAP_MS" --rep-ms "$REP_MS" \
                $([ "$QUICK" = 1 ] && echo --quick) ||
                echo "   peers.py failed (rc $?): the harness rows above are kept"
        done
    else
        echo "== PyTorch peers skipped: python3 with a CUDA-enabled torch is not importable"
    fi
fi

# The backward targets: each backward solution against PyTorch's FlashAttention-2 and
# cuDNN backward, same shape and dtype, from the rows above (time of the peer / time of the lesson).
if has_pass backward && [ ${#BMETHODS[@]} -gt 0 ]; then
    awk -F, '{ sub(/\r$/, "") } $20 == "backward" && $11 == "ok" && $12 > 0 {
            key = $5 "," $6 "," $7 "," $8 "," $9 "," $10 "," $17
            if ($4 == "torch-flash") fl[key] = $12; else if ($4 == "torch-cudnn") cu[key] = $12
            else if ($4 ~ /^[0-9][0-9]-/) { sol[NR] = $4; sk[NR] = key; ms[NR] = $12 } }
        END { n = 0
            for (r in sol) if ((sk[r] in fl) || (sk[r] in cu)) {
                if (!n++) printf "== backward against PyTorch (ratio > 1: the lesson is faster)\n%-26s %-32s %9s %9s\n", "solution", "dtype,B,H,N,d,causal,sweep", "vs flash", "vs cuDNN"
                printf "%-26s %-32s %9s %9s\n", sol[r], sk[r], (sk[r] in fl) ? sprintf("%.2fx", fl[sk[r]] / ms[r]) : "-", (sk[r] in cu) ? sprintf("%.2fx", cu[sk[r]] / ms[r]) : "-" } }' "$OUT" |
        { IFS= read -r h && { echo "$h"; IFS= read -r h2; echo "$h2"; sort; }; }
fi

echo "== results: $OUT ($(($(wc -l <"$OUT") - 1)) rows, $((SECONDS - T0)) s)"
if [ "$PLOTS" = 1 ] && [ "$QUICK" = 0 ]; then
    bash bench/plot.sh "$OUT" docs/results
fi

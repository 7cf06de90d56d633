#!/usr/bin/env bash
# bench/decode.sh: lesson 12 on decoding steps, against the copy roofline and PyTorch SDPA.
#
#   bash bench/decode.sh            the sweep (make bench-decode): CSV, chart and summary in docs/results/
#   bash bench/decode.sh --quick    6 shapes in under a minute (make bench-decode-quick); CSV in build/
#   bash bench/decode.sh --plots-only [FILE.csv]   redraw the chart and summary from a CSV (make decode-plots)
# Options: --no-peers (no PyTorch), --no-build, --no-plots, --out FILE.csv, --dtypes fp16,bf16,
#   --d 128,64 (d = 64 runs fp16 only), --kv "4096 16384" (KV lengths).
# Environment: DECODE_REPS (timed launches per shape, default 20; 10 with --quick).
#
# Every shape is a decoding step: N = 1 new query per sequence, H = 32 query heads, H_kv = 8
# K/V heads (GQA, groups of 4: B H_kv = 8, 32, 128, 512) or 32 (multi-head: B H_kv = 32, 512),
# KV lengths 4k to 128k, d = 128 in fp16 and bf16, d = 64 in fp16. Per shape, in one run:
#   12-flash-decoding          ./solution12 --bench-only --csv (the split count of its rule)
#   12-flash-decoding-splits1  the same kernel built with -DFD_SPLITS=1 (make variant N=12
#                              VARIANTS=splits1 OUT=build/decode-variants/splits1): one block per group,
#                              the schedule of lessons 03-08
#   torch-flash, torch-cudnn, torch-efficient  PyTorch's SDPA backends (bench/peers_decode.py)
#   read-same                  a plain streaming read of as many bytes as the shape's K and V
#                              (build/copy_bandwidth --op read --bytes): the roofline of a kernel
#                              that only reads, at that size, with the same fixed costs (launch,
#                              ramp-up). (Not a copy: after the read flush a small copy's writes
#                              stay in L2, and the copy looks faster than HBM.)
# and, once at the start, `copy`: a device-to-device copy of 1 GiB (build/copy_bandwidth),
# (bytes read + written) / time: the roofline the lesson aims at. All are timed the same way (CUDA
# events, warm-up, median, L2 flushed before each launch). Bandwidth = bytes of K and V
# (2 B H_kv N_kv d x 2 bytes) / time; a copy's = (bytes read + written) / time; pct_of_copy =
# that / the 1 GiB copy's (the summary also divides by the same-size read's).
#
# CSV (docs/results/decode-<gpu>.csv, or build/decode-quick-<gpu>.csv), a row per run:
#   gpu,date,commit,method,dtype,B,H,H_kv,N,N_kv,d,status,ms,kv_gbps,pct_of_copy,copy_gbps,reps,timing
# status: ok, oom, unsupported (a PyTorch backend without a kernel for the shape), timeout,
# cuda-error, failed-rcN. Then bench/decode_summary.py writes the summary table
# (docs/results/decode-<gpu>.md: per shape the % of the 1 GiB copy and of the same-size read,
# and the ratio to the fastest SDPA backend) and the data of the chart, which
# bench/plot_decode.gp draws (docs/results/decode-<gpu>-bandwidth.svg: GB/s against KV length,
# the 1 GiB copy as a line, the same-size reads as points).
set -uo pipefail
cd "$(dirname "$0")/.."

QUICK=0 PEERS=1 BUILD=1 PLOTS=1 OUT="" DTYPES="fp16 bf16" DLIST="128 64" KVLIST="4096 16384 32768 65536 131072"
PLOTS_ONLY=""
while [ $# -gt 0 ]; do
    case "$1" in
    --quick) QUICK=1 ;;
    --no-peers) PEERS=0 ;;
    --no-build) BUILD=0 ;;
    --no-plots) PLOTS=0 ;;
    --out) OUT="${2:?--out needs a file}"; shift ;;
    --dtypes) DTYPES=$(echo "${2:?--dtypes needs fp16 and/or bf16}" | tr ',' ' '); shift
        for t in $DTYPES; do [ "$t" = fp16 ] || [ "$t" = bf16 ] || { echo "decode.sh: --dtypes takes fp16 and/or bf16" >&2; exit 2; }; done ;;
    --d) DLIST=$(echo "${2:?--d needs 64 and/or 128}" | tr ',' ' '); shift
        for d in $DLIST; do [ "$d" = 64 ] || [ "$d" = 128 ] || { echo "decode.sh: --d takes 64 and/or 128" >&2; exit 2; }; done ;;
    --kv) KVLIST=$(echo "${2:?--kv needs KV lengths}" | tr ',' ' '); shift
        for n in $KVLIST; do [[ "$n" =~ ^[0-9]+$ ]] && [ "$n" -ge 1 ] && [ "$n" -le 1048576 ] || { echo "decode.sh: --kv takes lengths in 1..1048576" >&2; exit 2; }; done ;;
    --plots-only) PLOTS_ONLY=${2:-}; [ $# -ge 2 ] && shift; [ -n "$PLOTS_ONLY" ] || PLOTS_ONLY=auto ;;
    -h | --help) sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "decode.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
    esac
    shift
done

# ---- redraw only: no GPU needed ----
draw() { # CSV
    local csv=$1 base=${1%.csv}
    python3 bench/decode_summary.py --csv "$csv" --md "$base.md" --plot-dir "build/decode-plot/$(basename "$base")" || return 1
    if command -v gnuplot >/dev/null 2>&1; then
        gnuplot -e "dir='build/decode-plot/$(basename "$base")'; out='$base-bandwidth.svg'" bench/plot_decode.gp &&
            echo "   chart: $base-bandwidth.svg"
    else
        echo "   gnuplot not found: no chart (apt-get install gnuplot-nox)"
    fi
    echo "   summary: $base.md"
}
if [ -n "$PLOTS_ONLY" ]; then
    if [ "$PLOTS_ONLY" = auto ]; then PLOTS_ONLY=$(ls docs/results/decode-*.csv 2>/dev/null | head -n1); fi
    [ -f "$PLOTS_ONLY" ] || { echo "decode.sh: no CSV to redraw (run make bench-decode on a GPU first)" >&2; exit 2; }
    draw "$PLOTS_ONLY"
    exit $?
fi

# ---- a GPU, or a clear refusal ----
SMI="${BENCH_NVIDIA_SMI:-nvidia-smi}"
gpu_line=""
command -v "$SMI" >/dev/null 2>&1 && gpu_line=$("$SMI" --query-gpu=name --format=csv,noheader -i 0 2>/dev/null | head -n1)
if [ -z "$gpu_line" ]; then
    cat >&2 <<'EOF'
make bench-decode needs an NVIDIA GPU: `nvidia-smi` is missing or lists no device.
  It times ./solution12 and PyTorch's SDPA on decoding steps against a device-to-device copy;
  nothing was run. `make decode-plots` redraws the chart from a committed CSV without a GPU.
EOF
    exit 4
fi
GPU_NAME=$(echo "$gpu_line" | sed 's/^ *//; s/ *$//; s/,/ /g')
SLUG=$(echo "$GPU_NAME" | tr 'A-Z' 'a-z' | sed -E 's/[^a-z0-9]+/-/g; s/^-+//; s/-+$//')
DATE=$(date -u +%Y-%m-%dT%H:%MZ)
COMMIT=${GIT_COMMIT:-$(git describe --always --dirty 2>/dev/null || echo unknown)}
REPS=${DECODE_REPS:-$([ "$QUICK" = 1 ] && echo 10 || echo 20)}
TIMING="cuda-events median of $REPS after warm-up; 2xL2 read flush between launches"
if [ -z "$OUT" ]; then
    if [ "$QUICK" = 1 ]; then OUT="build/decode-quick-$SLUG.csv"; else OUT="docs/results/decode-$SLUG.csv"; fi
fi
mkdir -p "$(dirname "$OUT")" build
ERR=$(mktemp -d)
trap 'rm -rf "$ERR"' EXIT

if [ "$BUILD" = 1 ]; then
    echo "== building: solution12, build/copy_bandwidth, its -DFD_SPLITS=1 variant"
    { ${MAKE:-make} --no-print-directory solution12 build/copy_bandwidth &&
        ${MAKE:-make} --no-print-directory variant N=12 VARIANTS=splits1 OUT=build/decode-variants/splits1; } >"$ERR/build.log" 2>&1 ||
        { cat "$ERR/build.log"; echo "decode.sh: the build failed" >&2; exit 5; }
fi
SPLITS1=build/decode-variants/splits1
[ -x ./solution12 ] && [ -x build/copy_bandwidth ] && [ -x $SPLITS1 ] ||
    { echo "decode.sh: ./solution12, build/copy_bandwidth or $SPLITS1 missing (make solution12 build/copy_bandwidth; make variant N=12 VARIANTS=splits1 OUT=build/decode-variants/splits1)" >&2; exit 5; }

HEADER="gpu,date,commit,method,dtype,B,H,H_kv,N,N_kv,d,status,ms,kv_gbps,pct_of_copy,copy_gbps,reps,timing"
echo "$HEADER" >"$OUT"

# ---- the roofline ----
COPY=$(build/copy_bandwidth 1024 "$REPS" 2>"$ERR/copy") || { cat "$ERR/copy" >&2; exit 5; }
COPY_MS=$(cut -d, -f3 <<<"$COPY") COPY_GBPS=$(cut -d, -f4 <<<"$COPY")
echo "$GPU_NAME,$DATE,$COMMIT,copy,,,,,,,,ok,$COPY_MS,$COPY_GBPS,100.0,$COPY_GBPS,$REPS,$TIMING" >>"$OUT"
echo "== device-to-device copy of 1 GiB: $COPY_GBPS GB/s (read + write): the roofline"

printf '%-28s %-4s %4s %3s %4s %3s %7s %4s %10s %9s %7s\n' method dtype B H H_kv N N_kv d ms "GB/s" "% copy"
# run LABEL BINARY DTYPE B H HKV N NKV D
run() {
    local label=$1 bin=$2 dt=$3 B=$4 H=$5 hkv=$6 N=$7 nkv=$8 d=$9 out rc row status ms="" gbps="" pct="" note=""
    out=$(timeout 600 "$bin" --bench-only --csv -b "$B" -H "$H" --kv-heads "$hkv" -n "$N" \
        --kv-seq "$nkv" -d "$d" --dtype "$dt" --reps "$REPS" --warmup 3 --timeout 120 2>"$ERR/stderr" </dev/null)
    rc=$?
    row=$(printf '%s\n' "$out" | awk -F, 'NF >= 18 && $2 != "status"' | tail -n1)
    if [ -n "$row" ] && [ $rc = 0 ]; then
        status=ok
        ms=$(cut -d, -f11 <<<"$row"); gbps=$(cut -d, -f18 <<<"$row")
        pct=$(awk -v g="$gbps" -v c="$COPY_GBPS" 'BEGIN{printf "%.1f", 100*g/c}')
    else
        case $rc in
        2) status=unsupported ;; 3) status=not-implemented ;; 5) status=cuda-error ;;
        6 | 124) status=timeout ;; 7) status=oom ;; *) status=failed-rc$rc ;;
        esac
        note=$(grep -v '^$' "$ERR/stderr" | tail -n1 | cut -c1-140)
    fi
    echo "$GPU_NAME,$DATE,$COMMIT,$label,$dt,$B,$H,$hkv,$N,$nkv,$d,$status,$ms,$gbps,$pct,$COPY_GBPS,$REPS,$TIMING" >>"$OUT"
    if [ "$status" = ok ]; then
        printf '%-28s %-4s %4s %3s %4s %3s %7s %4s %10.4f %9.1f %6.1f%%\n' "$label" "$dt" "$B" "$H" "$hkv" "$N" "$nkv" "$d" "$ms" "$gbps" "$pct"
    else
        printf '%-28s %-4s %4s %3s %4s %3s %7s %4s %10s   %s\n' "$label" "$dt" "$B" "$H" "$hkv" "$N" "$nkv" "$d" "$status" "$note"
    fi
}

# read_same DTYPE B H HKV N NKV D: a read of the shape's K and V bytes, once per byte count
declare -A SAME_MS SAME_GBPS SAME_ST
read_same() {
    local dt=$1 B=$2 H=$3 hkv=$4 N=$5 nkv=$6 d=$7 bytes out rc pct="" st=ok
    bytes=$((2 * B * hkv * nkv * d * 2))
    if [ -z "${SAME_ST[$bytes]:-}" ]; then
        out=$(build/copy_bandwidth --bytes "$bytes" --op read --reps "$REPS" 2>"$ERR/read-same")
        rc=$?
        case $rc in 0) ;; 7) st=oom ;; 5) st=cuda-error ;; *) st=failed-rc$rc ;; esac
        SAME_ST[$bytes]=$st
        SAME_MS[$bytes]=$([ $st = ok ] && cut -d, -f3 <<<"$out")
        SAME_GBPS[$bytes]=$([ $st = ok ] && cut -d, -f4 <<<"$out")
    fi
    st=${SAME_ST[$bytes]}
    [ "$st" = ok ] && pct=$(awk -v g="${SAME_GBPS[$bytes]}" -v c="$COPY_GBPS" 'BEGIN{printf "%.1f", 100*g/c}')
    echo "$GPU_NAME,$DATE,$COMMIT,read-same,$dt,$B,$H,$hkv,$N,$nkv,$d,$st,${SAME_MS[$bytes]},${SAME_GBPS[$bytes]},$pct,$COPY_GBPS,$REPS,$TIMING; read of $bytes bytes" >>"$OUT"
    if [ "$st" = ok ]; then
        printf '%-28s %-4s %4s %3s %4s %3s %7s %4s %10.4f %9.1f %6.1f%%\n' "read-same ($((bytes >> 20)) MiB)" "$dt" "$B" "$H" "$hkv" "$N" "$nkv" "$d" "${SAME_MS[$bytes]}" "${SAME_GBPS[$bytes]}" "$pct"
    else
        printf '%-28s %-4s %4s %3s %4s %3s %7s %4s %10s   %s\n' "read-same" "$dt" "$B" "$H" "$hkv" "$N" "$nkv" "$d" "$st" "$(tail -n1 "$ERR/read-same" | cut -c1-140)"
    fi
}

SHAPES="$ERR/shapes"
: >"$SHAPES"
T0=$SECONDS
# "B H_kv" pairs: H = 32 query heads; groups of 4 (H_kv = 8) and multi-head (H_kv = 32)
if [ "$QUICK" = 1 ]; then
    CONFIGS=("1 8" "64 8") KVS="4096 32768 131072" DTS="fp16" DS="128"
else
    CONFIGS=("1 8" "4 8" "16 8" "64 8" "1 32" "16 32") KVS=$KVLIST DTS=$DTYPES DS=$DLIST
fi
for d in $DS; do
    for dt in $DTS; do
        [ "$d" = 64 ] && [ "$dt" != fp16 ] && continue # d = 64: fp16 only
        echo "== d=$d $dt"
        for cfg in "${CONFIGS[@]}"; do
            read -r B hkv <<<"$cfg"
            for nkv in $KVS; do
                run 12-flash-decoding ./solution12 "$dt" "$B" 32 "$hkv" 1 "$nkv" "$d"
                run 12-flash-decoding-splits1 $SPLITS1 "$dt" "$B" 32 "$hkv" 1 "$nkv" "$d"
                read_same "$dt" "$B" 32 "$hkv" 1 "$nkv" "$d"
                echo "$dt,$B,32,$hkv,1,$nkv,$d" >>"$SHAPES"
            done
        done
    done
done
echo "== harness runs done in $((SECONDS - T0)) s"

if [ "$PEERS" = 1 ]; then
    if python3 -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" >/dev/null 2>&1; then
        echo "== PyTorch SDPA backends on the same shapes"
        python3 bench/peers_decode.py --csv "$OUT" --shapes "$SHAPES" --gpu "$GPU_NAME" --date "$DATE" \
            --commit "$COMMIT" --copy-gbps "$COPY_GBPS" --reps "$REPS" ||
            echo "   peers_decode.py failed (rc $?): the harness rows above are kept"
    else
        echo "== PyTorch peers skipped: python3 with a CUDA-enabled torch is not importable"
    fi
fi
# the copy again at the end: how much the roofline moved during the run
COPY2=$(build/copy_bandwidth 1024 "$REPS" 2>/dev/null | cut -d, -f4)
[ -n "$COPY2" ] && echo "$GPU_NAME,$DATE,$COMMIT,copy-end,,,,,,,,ok,,$COPY2,$(awk -v a="$COPY2" -v c="$COPY_GBPS" 'BEGIN{printf "%.1f", 100*a/c}'),$COPY_GBPS,$REPS,$TIMING" >>"$OUT"
echo "== results: $OUT ($(($(wc -l <"$OUT") - 1)) rows, $((SECONDS - T0)) s); copy at the end: ${COPY2:-?} GB/s"
if [ "$PLOTS" = 1 ]; then draw "$OUT"; else python3 bench/decode_summary.py --csv "$OUT"; fi

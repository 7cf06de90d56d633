#!/usr/bin/env bash
# lessons/13-hopper-backward/bench.sh: lesson 13's backward on a Hopper GPU, on the shapes of the
# lesson's text (H d = 2048, B N = 16384), next to lesson 11's and PyTorch's SDPA backward
# (FlashAttention-2 and cuDNN) timed the same way in the same run; prints per head dimension a
# table of TFLOP/s and one of ratios to cuDNN.
#
#   bash lessons/13-hopper-backward/bench.sh        (from the repository root; or make bench-13)
# Options:
#   --d 64|128|64,128     head dimensions (default both)
#   --n "1024 4096 16384" sequence lengths (B = 16384 / N, at least 1; H = 2048 / d)
#   --causal 0|1|0,1      (default both)
#   --dtype fp16|bf16     (default fp16)
#   --variant NAME        also the solution with variants/NAME.var (make solution13-NAME); repeatable
#   --lesson              time your lessons/13-hopper-backward/hopper_backward.cu (./lesson13), not the solution
#   --no-build --no-grade --no-peers --no-lesson11
# Every binary is graded first (--check-only: the full case matrix) unless --no-grade; a build
# that fails grading is timed all the same and flagged. TFLOP/s as the harness counts them: 2.5 x
# 4 B H N^2 d / time, halved when causal. Every timing: build/bench13/bench.csv; each grading log
# in build/bench13/<name>.grade.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1

DLIST="64 128" NLIST="1024 4096 16384" CLIST="0 1" DTYPE=fp16 MINE=0
BUILD=1 GRADE=1 PEERS=1 L11=1 VARIANTS=()
while [ $# -gt 0 ]; do
    case "$1" in
    --d) DLIST=$(echo "${2:?}" | tr ',' ' '); shift ;;
    --n) NLIST="${2:?}"; shift ;;
    --causal) CLIST=$(echo "${2:?}" | tr ',' ' '); shift ;;
    --dtype) DTYPE="${2:?}"; shift ;;
    --variant)
        [ -f "lessons/13-hopper-backward/variants/${2:?}.var" ] ||
            { echo "bench.sh: no variant file lessons/13-hopper-backward/variants/$2.var" >&2; exit 2; }
        VARIANTS+=("$2"); shift ;;
    --lesson) MINE=1 ;;
    --no-build) BUILD=0 ;;
    --no-grade) GRADE=0 ;;
    --no-peers) PEERS=0 ;;
    --no-lesson11) L11=0 ;;
    -h | --help) sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
    esac
    shift
done
case "$DTYPE" in fp16 | bf16) ;; *) echo "bench.sh: --dtype must be fp16 or bf16" >&2; exit 2 ;; esac
for d in $DLIST; do case "$d" in 64 | 128) ;; *) echo "bench.sh: --d takes 64 and 128" >&2; exit 2 ;; esac; done

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

tflops() { # B H N d causal ms -> TFLOP/s of a backward pass
    awk -v B="$1" -v H="$2" -v N="$3" -v d="$4" -v c="$5" -v ms="$6" \
        'BEGIN { if (ms + 0 <= 0) { print ""; exit } f = 2.5 * 4 * B * H * N * N * d; if (c == 1) f /= 2; printf "%.1f", f / (ms * 1e-3) / 1e12 }'
}

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
    shapes=""
    for d in $DLIST; do for N in $NLIST; do for c in $CLIST; do
        B=$((16384 / N)); [ "$B" -lt 1 ] && B=1
        shapes="$shapes $B,$((2048 / d)),$N,$d,$c"
    done; done; done
    pout=$(python3 - "$DTYPE" $shapes <<'PY' 2>"$OUT/peers.err"
import statistics, sys
import torch
import torch.nn.functional as F
from torch.nn.attention import sdpa_kernel, SDPBackend
dt = {"fp16": torch.float16, "bf16": torch.bfloat16}[sys.argv[1]]
l2 = torch.cuda.get_device_properties(0).L2_cache_size
flush = torch.empty(max(2 * l2, 64 << 20) // 4, dtype=torch.float32, device="cuda")
for shape in sys.argv[2:]:
    B, H, N, d, c = (int(x) for x in shape.split(","))
    for name, backend in (("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION)):
        try:
            q, k, v = (torch.randn(B, H, N, d, device="cuda", dtype=dt, requires_grad=True) for _ in range(3))
            with sdpa_kernel(backend):
                o = F.scaled_dot_product_attention(q, k, v, is_causal=bool(c))
            do = torch.randn_like(o)
            bwd = lambda: torch.autograd.grad(o, (q, k, v), do, retain_graph=True)
            for _ in range(3):
                bwd()
            ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(20)]
            for s, e in ev:
                flush.max()  # a read: a write would leave dirty lines for the timed kernel to write back
                s.record(); bwd(); e.record()
            torch.cuda.synchronize()
            ms = statistics.median(s.elapsed_time(e) for s, e in ev)
            print("%s,%d,%d,%d,%d,%d,%.5f" % (name, B, H, N, d, c, ms))
            del q, k, v, o, do
        except Exception as ex:  # no kernel for this backend/shape, out of memory...
            print("%s,%d,%d,%d,%d,%d,%s" % (name, B, H, N, d, c, type(ex).__name__), flush=True)
        torch.cuda.empty_cache()
PY
)
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

#!/usr/bin/env bash
# lessons/09-hopper-wgmma/ladder.sh: lesson 09's ladder on a Hopper GPU. Builds the solution at
# every step (FA9_STEP=1..6, see hopper.cu), grades each step on a few cases, times each on the
# course's shapes next to PyTorch's SDPA (flash and cuDNN backends, same timing method), and
# prints one Markdown table per head dimension.
#
#   bash lessons/09-hopper-wgmma/ladder.sh        (from the repository root; or make ladder-09)
# Options:
#   --steps "1 2 3 4 5 6" steps to build (default all)
#   --configs "128:176,2 64:192,2"   extra builds of step 6 with another B_c and stage count for
#                         one head dimension (d:Bc,stages -> -DFA<d>_BC=Bc -DFA<d>_STAGES=stages)
#   --d 64,128            head dimensions (default both)
#   --n "2048 8192"       sequence lengths (B = 16384 / N, H = 2048 / d)
#   --causal 0,1          (default both)
#   --dtype fp16|bf16     (default fp16)
#   --src FILE            kernel source (default the solution; your lesson file once done)
#   --jobs J              parallel builds (default: number of CPUs)
#   --no-build --no-grade --no-peers
# Output: the tables on stdout; every number in build/ladder09/ladder.csv; each build's
# ptxas -v report in build/ladder09/<name>.ptxas; each grading log in build/ladder09/<name>.grade.
set -uo pipefail
cd "$(dirname "$0")/../.."

STEPS="1 2 3 4 5 6" CONFIGS="" DLIST="64 128" NLIST="2048 8192" CLIST="0 1" DTYPE=fp16 SRC=""
JOBS=$(nproc 2>/dev/null || echo 4) BUILD=1 GRADE=1 PEERS=1
while [ $# -gt 0 ]; do
    case "$1" in
    --steps) STEPS="${2:?}"; shift ;;
    --configs) CONFIGS="${2:?}"; shift ;;
    --d) DLIST=$(echo "${2:?}" | tr ',' ' '); shift ;;
    --n) NLIST="${2:?}"; shift ;;
    --causal) CLIST=$(echo "${2:?}" | tr ',' ' '); shift ;;
    --dtype) DTYPE="${2:?}"; shift ;;
    --src) SRC="${2:?}"; shift ;;
    --jobs) JOBS="${2:?}"; shift ;;
    --no-build) BUILD=0 ;;
    --no-grade) GRADE=0 ;;
    --no-peers) PEERS=0 ;;
    -h | --help) sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "ladder.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
    esac
    shift
done
for s in $STEPS; do
    case $s in 1 | 2 | 3 | 4 | 5 | 6) ;; *) echo "ladder.sh: --steps takes numbers 1..6, got '$s'" >&2; exit 2 ;; esac
done
for cfg in $CONFIGS; do
    [[ $cfg =~ ^(64|128):[0-9]+,[0-9]+$ ]] || { echo "ladder.sh: --configs entries are d:Bc,stages (d 64 or 128), got '$cfg'" >&2; exit 2; }
done
if ! nvidia-smi -L >/dev/null 2>&1; then
    echo "ladder.sh: needs an NVIDIA Hopper GPU (nvidia-smi found none); make check-09 and make emu-09 run without one" >&2
    exit 4
fi

OUT=build/ladder09
mkdir -p "$OUT"
# variants: "name|defines|label"
VARIANTS=()
for s in $STEPS; do VARIANTS+=("step$s|-DFA9_STEP=$s|step $s"); done
for cfg in $CONFIGS; do
    d=${cfg%%:*} rest=${cfg#*:} bc=${rest%,*} st=${rest#*,}
    VARIANTS+=("step6_d${d}_bc${bc}_s${st}|-DFA9_STEP=6 -DFA${d}_BC=$bc -DFA${d}_STAGES=$st|step 6, d=$d: B_c=$bc, $st stages")
done

# ---- build (the harness objects once, then every variant in parallel); lesson 08 as the baseline ----
if [ "$BUILD" = 1 ]; then
    make --no-print-directory solution9 solution8 >/dev/null || { echo "ladder.sh: make solution9 solution8 failed" >&2; exit 1; }
    jobs_file="$OUT/jobs.txt"
    : > "$jobs_file"
    for v in "${VARIANTS[@]}"; do
        IFS='|' read -r name defs _ <<< "$v"
        echo "make --no-print-directory hopper-variant ${SRC:+HOPPER_SRC=$SRC} HOPPER_OUT=$OUT/$name HOPPER_DEFS=\"$defs\" >/dev/null || echo \"build failed: $name\" >&2" >> "$jobs_file"
    done
    echo "building ${#VARIANTS[@]} variants with $JOBS jobs..." >&2
    xargs -d '\n' -P "$JOBS" -I{} bash -c {} < "$jobs_file"
fi
regs_of() { # ptxas file, d -> registers of the fp16 kernel for that d
    awk -v pat="fa3_forward_kernelI6__halfLi$2E" '
        /Compiling entry function/ { on = index($0, pat) > 0 }
        on && /Used [0-9]+ registers/ { for (i = 1; i <= NF; i++) if ($i == "Used") r = $(i + 1); on = 0 }
        END { print (r == "" ? "?" : r) }' "$1" 2>/dev/null
}

# ---- grade: a few cases per variant (ragged N, causal, both dtypes, both d) ----
CASES=("-b 2 -H 3 -n 77 -d 64 --dtype fp16" "-b 1 -H 2 -n 1000 -d 128 --dtype bf16 --causal"
       "-b 1 -H 2 -n 1000 -d 64 --dtype fp16 --causal" "-b 3 -H 2 -n 300 -d 128 --dtype fp16"
       "-b 1 -H 1 -n 1 -d 128 --dtype fp16")
declare -A GR
if [ "$GRADE" = 1 ]; then
    for v in "${VARIANTS[@]}"; do
        IFS='|' read -r name _ label <<< "$v"
        log="$OUT/$name.grade"; : > "$log"
        ok=0 total=0 first=""
        for c in "${CASES[@]}"; do
            total=$((total + 1))
            [ -x "$OUT/$name" ] || { first="not built"; break; }
            # shellcheck disable=SC2086
            timeout 120 "$OUT/$name" --check-only --timeout 10 $c >> "$log" 2>&1
            rc=$?
            if [ $rc = 0 ]; then ok=$((ok + 1)); else
                [ -n "$first" ] || first="exit $rc on '$c': $(grep -m1 -E 'diagnosis:|race suspected|future keys|TIMEOUT|CUDA error|returned|FAIL|no NVIDIA|needs a' "$log" | sed 's/^ *//' | cut -c1-150)"
                case $rc in 4 | 5 | 6 | 124 | 137) break ;; esac  # no GPU, a crash, a hang: the other cases would too
            fi
        done
        GR[$name]="$ok/$total"
        echo "  $label: graded $ok/$total${first:+; first failure: $first}" >&2
        [ -n "$first" ] && GR[$name,why]="$first"
    done
fi

# ---- time (lesson 08's solution first, as the baseline) ----
CSV="$OUT/ladder.csv"
echo "variant,label,d,dtype,B,H,N,causal,status,ms,tflops,peak_pct,registers" > "$CSV"
declare -A TF
[ -x ./solution8 ] && ln -sf ../../solution8 "$OUT/lesson08"
TIMED=("lesson08||lesson 08 (solution)" "${VARIANTS[@]}")
for v in "${TIMED[@]}"; do
    IFS='|' read -r name _ label <<< "$v"
    for d in $DLIST; do
        H=$((2048 / d)) regs=$(regs_of "$OUT/$name.ptxas" "$d")
        TF[$name,$d,regs]=$regs
        for N in $NLIST; do
            B=$((16384 / N)); [ "$B" -lt 1 ] && B=1
            for c in $CLIST; do
                [ -x "$OUT/$name" ] || { TF[$name,$d,$N,$c]="build?"; continue; }
                [ -z "${GR[$name,why]:-}" ] || { TF[$name,$d,$N,$c]="(failed)"; continue; }  # not worth timing
                row=$("$OUT/$name" --bench-only --csv --timeout 10 -b "$B" -H "$H" -n "$N" -d "$d" --dtype "$DTYPE" \
                      $([ "$c" = 1 ] && echo --causal) 2>/dev/null | tail -n1)
                status=$(echo "$row" | cut -d, -f2) ms=$(echo "$row" | cut -d, -f11)
                tf=$(echo "$row" | cut -d, -f12) pct=$(echo "$row" | cut -d, -f13)
                echo "$name,\"$label\",$d,$DTYPE,$B,$H,$N,$c,$status,$ms,$tf,$pct,$regs" >> "$CSV"
                TF[$name,$d,$N,$c]=${tf:-${status:-error}}
                TF[$name,$d,$N,$c,pct]=$pct
                echo "  $label d=$d N=$N causal=$c: ${TF[$name,$d,$N,$c]} TFLOP/s${pct:+ ($pct% of peak)}" >&2
            done
        done
    done
done

# ---- PyTorch SDPA, flash (FlashAttention-2) and cuDNN backends, same shapes and timing ----
if [ "$PEERS" = 1 ] && python3 -c "import torch; assert torch.cuda.is_available()" 2>/dev/null; then
    shapes="$OUT/peer-shapes.txt" pcsv="$OUT/peers.csv"
    : > "$shapes"; : > "$pcsv"
    for d in $DLIST; do for N in $NLIST; do for c in $CLIST; do
        B=$((16384 / N)); [ "$B" -lt 1 ] && B=1
        echo "ladder,$B,$((2048 / d)),$N,$d,$c" >> "$shapes"
    done; done; done
    python3 bench/peers.py --csv "$pcsv" --shapes "$shapes" --dtypes "$DTYPE" --methods torch-flash,torch-cudnn >/dev/null 2>&1 \
        || echo "ladder.sh: bench/peers.py failed; no PyTorch rows" >&2
    # gpu,date,commit,method,dtype,B,H,N,d,causal,status,ms,tflops,...
    while IFS=, read -r _ _ _ m _ B H N d c st _ tf _; do
        [ "$st" = ok ] && TF[$m,$d,$N,$c]="$tf"
    done < "$pcsv"
    cat "$pcsv" >> "$OUT/peers-all.csv"
fi

# ---- the tables ----
for d in $DLIST; do
    echo
    echo "d = $d, $DTYPE, H = $((2048 / d)), B = 16384 / N; TFLOP/s (4 B H N^2 d / time, halved when causal);"
    echo "GPU: $(nvidia-smi --query-gpu=name --format=csv,noheader | head -n1)"
    echo
    hdr="| kernel | registers | graded |" sep="|---|---|---|"
    for N in $NLIST; do for c in $CLIST; do hdr="$hdr N=$N$([ "$c" = 1 ] && echo " causal") |"; sep="$sep---|"; done; done
    echo "$hdr"; echo "$sep"
    for v in "${TIMED[@]}"; do
        IFS='|' read -r name _ label <<< "$v"
        line="| $label | ${TF[$name,$d,regs]:-?} | ${GR[$name]:-} |"
        for N in $NLIST; do for c in $CLIST; do line="$line ${TF[$name,$d,$N,$c]:-} |"; done; done
        echo "$line"
    done
    for m in torch-flash torch-cudnn; do
        line="| PyTorch SDPA ${m#torch-} | | |" any=0
        for N in $NLIST; do for c in $CLIST; do
            line="$line ${TF[$m,$d,$N,$c]:-} |"; [ -n "${TF[$m,$d,$N,$c]:-}" ] && any=1
        done; done
        [ $any = 1 ] && echo "$line"
    done
    # step 6, the default (or the last variant built), against cuDNN, where both are known
    last=${VARIANTS[${#VARIANTS[@]}-1]%%|*}
    for v in "${VARIANTS[@]}"; do [ "${v%%|*}" = step6 ] && last=step6; done
    line="| ${last} / cuDNN | | |" any=0
    for N in $NLIST; do for c in $CLIST; do
        a=${TF[$last,$d,$N,$c]:-} b=${TF[torch-cudnn,$d,$N,$c]:-}
        if [[ $a =~ ^[0-9.]+$ && $b =~ ^[0-9.]+$ ]]; then line="$line $(awk -v a="$a" -v b="$b" 'BEGIN{printf "%.2fx", a/b}') |"; any=1
        else line="$line |"; fi
    done; done
    [ $any = 1 ] && echo "$line"
done
fails=0
for v in "${VARIANTS[@]}"; do
    IFS='|' read -r name _ label <<< "$v"
    if [ -n "${GR[$name,why]:-}" ]; then echo "GRADE FAILED: $label: ${GR[$name,why]}"; fails=1; fi
done
echo
echo "raw results: $CSV; grading logs: $OUT/*.grade"
exit $fails

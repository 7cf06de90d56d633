#!/usr/bin/env bash
# lessons/09-hopper-wgmma/worklog/ladder.sh: lesson 09's ladder on a Hopper GPU. Builds the solution at
# every step (FA9_STEP=1..7, see hopper.cu; steps 1-4 through variants/steps-1-4.var) and any
# variant asked for, grades each on a few cases, times each on the course's shapes next to
# PyTorch's SDPA (flash and cuDNN backends, same timing method), and prints per head dimension
# a table of TFLOP/s and one of ratios to cuDNN.
#
#   bash lessons/09-hopper-wgmma/worklog/ladder.sh        (from the repository root; or make ladder-09)
# Options:
#   --steps "1 2 3 4 5 6 7"  steps to build (default all; "" for none)
#   --variant 'NAME:DEFS'    one more build with these -D flags and +VARIANT files
#                            (lessons/09-hopper-wgmma/worklog/variants/VARIANT.var, worklog/README.md), e.g.
#                            --variant 's7wg3@64:-DFA9_STEP=7 -DFA64_WG=3' or
#                            --variant 's7noL2:+no-l2-sections'; NAME@64 (or @128) times it at
#                            that head dimension only; repeatable. Without -DFA9_STEP in DEFS
#                            the variant is built at the source's default step
#   --configs "128:176,2 64:192,2"   shorthand: step 7 with another B_c and stage count for one
#                            head dimension (d:Bc,stages -> -DFA<d>_BC=Bc -DFA<d>_STAGES=stages)
#   --d 64,128            head dimensions (default both)
#   --n "2048 8192"       sequence lengths (B = 16384 / N, H = 2048 / d)
#   --causal 0,1          (default both)
#   --dtype fp16|bf16     (default fp16)
#   --src FILE            kernel source (default the solution; your lesson file once done)
#   --jobs J              parallel builds (default: number of CPUs)
#   --reps R              timed launches per shape (the harness's --reps; default its 30)
#   --no-build --no-grade --no-peers --no-lesson08
# Output: the tables on stdout; every number in build/ladder09/ladder.csv; each build's
# ptxas -v report in build/ladder09/<name>.ptxas; each grading log in build/ladder09/<name>.grade.
set -uo pipefail
cd "$(dirname "$0")/../../.." || exit 1

STEPS="1 2 3 4 5 6 7" CONFIGS="" DLIST="64 128" NLIST="2048 8192" CLIST="0 1" DTYPE=fp16 SRC=""
JOBS=$(nproc 2>/dev/null || echo 4) BUILD=1 GRADE=1 PEERS=1 BASE=1 REPS=""
VARIANTS=()  # "name|defines|label|d (empty: every d)"
add_variant() { # NAME[@d]:DEFS
    local spec=$1 head=${1%%:*} defs=${1#*:} name d=""
    [[ $spec == *:* && $head =~ ^[A-Za-z0-9_.-]+(@(64|128))?$ && -n $defs ]] ||
        { echo "ladder.sh: --variant takes NAME:DEFS or NAME@d:DEFS (d 64 or 128; NAME letters, digits, _ . -), got '$spec'" >&2; exit 2; }
    name=${head%@*}
    [[ $head == *@* ]] && d=${head#*@}
    for w in $defs; do
        if [[ $w == +* ]]; then
            [ -f "lessons/09-hopper-wgmma/worklog/variants/${w#+}.var" ] ||
                { echo "ladder.sh: --variant $name: no variant file lessons/09-hopper-wgmma/worklog/variants/${w#+}.var" >&2; exit 2; }
            continue
        fi
        [[ $w =~ ^-D[A-Za-z_][A-Za-z0-9_]*(=[A-Za-z0-9_.-]+)?$ ]] ||
            { echo "ladder.sh: --variant $name: '$w' is neither -DNAME[=VALUE] nor +VARIANT" >&2; exit 2; }
    done
    for v in "${VARIANTS[@]}"; do
        [ "${v%%|*}" != "$name" ] || { echo "ladder.sh: two variants are named '$name'" >&2; exit 2; }
    done
    VARIANTS+=("$name|$defs|$name: $defs${d:+ (d=$d)}|$d")
}
USER_VARIANTS=()
while [ $# -gt 0 ]; do
    case "$1" in
    --steps) STEPS="${2?}"; shift ;;
    --variant) USER_VARIANTS+=("${2:?}"); shift ;;
    --configs) CONFIGS="${2:?}"; shift ;;
    --d) DLIST=$(echo "${2:?}" | tr ',' ' '); shift ;;
    --n) NLIST="${2:?}"; shift ;;
    --causal) CLIST=$(echo "${2:?}" | tr ',' ' '); shift ;;
    --dtype) DTYPE="${2:?}"; shift ;;
    --src) SRC="${2:?}"; shift ;;
    --jobs) JOBS="${2:?}"; shift ;;
    --reps) REPS="${2:?}"; shift ;;
    --no-build) BUILD=0 ;;
    --no-grade) GRADE=0 ;;
    --no-peers) PEERS=0 ;;
    --no-lesson08) BASE=0 ;;
    -h | --help) sed -n '2,28p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "ladder.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
    esac
    shift
done
for s in $STEPS; do
    case $s in 1 | 2 | 3 | 4 | 5 | 6 | 7) ;; *) echo "ladder.sh: --steps takes numbers 1..7, got '$s'" >&2; exit 2 ;; esac
done
for cfg in $CONFIGS; do
    [[ $cfg =~ ^(64|128):[0-9]+,[0-9]+$ ]] || { echo "ladder.sh: --configs entries are d:Bc,stages (d 64 or 128), got '$cfg'" >&2; exit 2; }
done
for d in $DLIST; do [[ $d =~ ^(64|128)$ ]] || { echo "ladder.sh: --d takes 64 and/or 128, got '$d'" >&2; exit 2; }; done
for N in $NLIST; do
    [[ $N =~ ^[0-9]+$ && $N -ge 1 && $N -le 16384 ]] || { echo "ladder.sh: --n takes lengths 1..16384, got '$N'" >&2; exit 2; }
done
for c in $CLIST; do [[ $c =~ ^[01]$ ]] || { echo "ladder.sh: --causal takes 0 and/or 1, got '$c'" >&2; exit 2; }; done
case $DTYPE in fp16 | bf16) ;; *) echo "ladder.sh: --dtype is fp16 or bf16, got '$DTYPE'" >&2; exit 2 ;; esac
[[ -z $REPS || ($REPS =~ ^[0-9]+$ && $REPS -ge 1) ]] || { echo "ladder.sh: --reps takes a positive count, got '$REPS'" >&2; exit 2; }
[[ $JOBS =~ ^[0-9]+$ && $JOBS -ge 1 ]] || { echo "ladder.sh: --jobs takes a positive count, got '$JOBS'" >&2; exit 2; }

# The steps with two consumer warpgroups everywhere; then the source's default build, which
# is step 7 with three consumer warpgroups at d = 64 (B_r = 192; d = 128 keeps two), two for
# causal attention on short sequences (FA64_WG=0 in hopper.cu)
for s in $STEPS; do VARIANTS+=("step$s|-DFA9_STEP=$s -DFA64_WG=2|step $s|"); done
[[ " $STEPS " == *" 7 "* ]] && VARIANTS+=("default|-DFA9_STEP=7|step 7 + 3 consumer warpgroups, 2 if causal and short (the default)|64")
for cfg in $CONFIGS; do
    d=${cfg%%:*} rest=${cfg#*:} bc=${rest%,*} st=${rest#*,}
    VARIANTS+=("step7_d${d}_bc${bc}_s${st}|-DFA9_STEP=7 -DFA${d}_BC=$bc -DFA${d}_STAGES=$st|step 7, d=$d: B_c=$bc, $st stages|$d")
done
for v in ${USER_VARIANTS[@]+"${USER_VARIANTS[@]}"}; do add_variant "$v"; done
[ ${#VARIANTS[@]} -gt 0 ] || { echo "ladder.sh: nothing to build (--steps \"\" and no --variant)" >&2; exit 2; }
if ! nvidia-smi -L >/dev/null 2>&1; then
    echo "ladder.sh: needs an NVIDIA Hopper GPU (nvidia-smi found none); make check-09 and make emu-09 run without one" >&2
    exit 4
fi

T0=$(date +%s)
elapsed() { echo "$(($(date +%s) - T0)) s"; }
OUT=build/ladder09
mkdir -p "$OUT"

# ---- build (the harness objects once, then every variant in parallel); lesson 08 as the baseline ----
if [ "$BUILD" = 1 ]; then
    make --no-print-directory solution9 solution8 >/dev/null || { echo "ladder.sh: make solution9 solution8 failed" >&2; exit 1; }
    jobs_file="$OUT/jobs.txt"
    : > "$jobs_file"
    for v in "${VARIANTS[@]}"; do
        IFS='|' read -r name defs _ _ <<< "$v"
        rm -f "$OUT/$name"
        dflags="" vfiles=""
        for w in $defs; do if [[ $w == +* ]]; then vfiles="$vfiles ${w#+}"; else dflags="$dflags $w"; fi; done
        # steps 1-4 are written in variants/steps-1-4.var
        case " $dflags " in *" -DFA9_STEP="[1-4]" "*) vfiles="steps-1-4 $vfiles" ;; esac
        echo "make --no-print-directory variant N=9 ${SRC:+SRC=$SRC} OUT=$OUT/$name DEFS=\"${dflags# }\" VARIANTS=\"${vfiles# }\" >/dev/null || echo \"build failed: $name (see $OUT/$name.ptxas)\" >&2" >> "$jobs_file"
    done
    echo "building ${#VARIANTS[@]} variants with $JOBS jobs..." >&2
    xargs -d '\n' -P "$JOBS" -I{} bash -c {} < "$jobs_file"
    echo "built ($(elapsed))" >&2
fi
regs_of() { # ptxas file, d -> registers of the fp16 kernels for that d (distinct, sorted)
    awk -v pat="fa3_forward_kernelI6__halfLi$2E" '
        /Compiling entry function/ { on = index($0, pat) > 0 }
        on && /Used [0-9]+ registers/ { for (i = 1; i <= NF; i++) if ($i == "Used") r[$(i + 1)] = 1; on = 0 }
        END { s = ""; for (k in r) s = s (s == "" ? "" : "/") k; print (s == "" ? "?" : s) }' "$1" 2>/dev/null
}

# ---- grade: a few cases per variant (ragged N, causal, both dtypes, both d, N = 1, and one
# with more work items than an H100 has SMs, so that persistent blocks take several) ----
CASES=("-b 2 -H 3 -n 77 -d 64 --dtype fp16" "-b 1 -H 2 -n 1000 -d 128 --dtype bf16 --causal"
       "-b 1 -H 2 -n 1000 -d 64 --dtype fp16 --causal" "-b 3 -H 2 -n 300 -d 128 --dtype fp16"
       "-b 1 -H 1 -n 1 -d 128 --dtype fp16" "-b 2 -H 8 -n 1500 -d 64 --dtype bf16 --causal")
declare -A GR
if [ "$GRADE" = 1 ]; then
    grade_one() { # name: grades into $OUT/name.grade, summary line into $OUT/name.gsum
        local name=$1 log="$OUT/$1.grade" ok=0 total=0 first="" rc
        : > "$log"
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
        echo "$ok/$total|$first" > "$OUT/$name.gsum"
    }
    export -f grade_one
    export OUT
    export CASES_STR
    CASES_STR=$(printf '%s\n' "${CASES[@]}")
    # the grader's own checks do not depend on timing: up to 4 variants at once
    for v in "${VARIANTS[@]}"; do echo "${v%%|*}"; done |
        xargs -P 4 -I{} bash -c 'mapfile -t CASES <<< "$CASES_STR"; grade_one "$1"' _ {}
    for v in "${VARIANTS[@]}"; do
        IFS='|' read -r name _ label _ <<< "$v"
        IFS='|' read -r frac first < "$OUT/$name.gsum"
        GR[$name]=$frac
        echo "  $label: graded $frac${first:+; first failure: $first}" >&2
        [ -n "$first" ] && GR[$name,why]="$first"
    done
    echo "graded ($(elapsed))" >&2
fi

# ---- time (lesson 08's solution first, as the baseline) ----
CSV="$OUT/ladder.csv"
echo "variant,label,d,dtype,B,H,N,causal,status,ms,tflops,peak_pct,registers,defines" > "$CSV"
declare -A TF
TIMED=()
if [ "$BASE" = 1 ] && [ -x ./solution8 ]; then
    ln -sf ../../solution8 "$OUT/lesson08"
    TIMED=("lesson08||lesson 08 (solution)|")
fi
TIMED+=("${VARIANTS[@]}")
for v in "${TIMED[@]}"; do
    IFS='|' read -r name defs label only_d <<< "$v"
    for d in $DLIST; do
        [ -z "$only_d" ] || [ "$only_d" = "$d" ] || continue
        H=$((2048 / d)) regs=$(regs_of "$OUT/$name.ptxas" "$d")
        TF[$name,$d,regs]=$regs
        for N in $NLIST; do
            B=$((16384 / N)); [ "$B" -lt 1 ] && B=1
            for c in $CLIST; do
                [ -x "$OUT/$name" ] || { TF[$name,$d,$N,$c]="build?"; continue; }
                [ -z "${GR[$name,why]:-}" ] || { TF[$name,$d,$N,$c]="(failed)"; continue; }  # not worth timing
                extra=()
                [ "$c" = 1 ] && extra+=(--causal)
                [ -n "$REPS" ] && extra+=(--reps "$REPS")
                row=$("$OUT/$name" --bench-only --csv --timeout 10 -b "$B" -H "$H" -n "$N" -d "$d" --dtype "$DTYPE" \
                      "${extra[@]}" 2>/dev/null | tail -n1)
                status=$(echo "$row" | cut -d, -f2) ms=$(echo "$row" | cut -d, -f11)
                tf=$(echo "$row" | cut -d, -f12) pct=$(echo "$row" | cut -d, -f13)
                echo "$name,\"$label\",$d,$DTYPE,$B,$H,$N,$c,$status,$ms,$tf,$pct,$regs,\"$defs\"" >> "$CSV"
                TF[$name,$d,$N,$c]=${tf:-${status:-error}}
                TF[$name,$d,$N,$c,pct]=$pct
                echo "  $label d=$d N=$N causal=$c: ${TF[$name,$d,$N,$c]} TFLOP/s${pct:+ ($pct% of peak)}" >&2
            done
        done
    done
done
echo "timed ($(elapsed))" >&2

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
    echo "PyTorch timed ($(elapsed))" >&2
fi

# ---- the tables: TFLOP/s, then each kernel over SDPA's cuDNN backend ----
for d in $DLIST; do
    echo
    echo "d = $d, $DTYPE, H = $((2048 / d)), B = 16384 / N; TFLOP/s (4 B H N^2 d / time, halved when causal);"
    echo "GPU: $(nvidia-smi --query-gpu=name --format=csv,noheader | head -n1)"
    echo
    hdr="| kernel | registers | graded |" sep="|---|---|---|"
    for N in $NLIST; do for c in $CLIST; do hdr="$hdr N=$N$([ "$c" = 1 ] && echo " causal") |"; sep="$sep---|"; done; done
    echo "$hdr"; echo "$sep"
    for v in "${TIMED[@]}"; do
        IFS='|' read -r name _ label only_d <<< "$v"
        [ -z "$only_d" ] || [ "$only_d" = "$d" ] || continue
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
    ratios=""
    for v in "${TIMED[@]}"; do
        IFS='|' read -r name _ label only_d <<< "$v"
        [ -z "$only_d" ] || [ "$only_d" = "$d" ] || continue
        line="| $label |" any=0
        for N in $NLIST; do for c in $CLIST; do
            a=${TF[$name,$d,$N,$c]:-} b=${TF[torch-cudnn,$d,$N,$c]:-}
            if [[ $a =~ ^[0-9.]+$ && $b =~ ^[0-9.]+$ ]]; then
                line="$line $(awk -v a="$a" -v b="$b" 'BEGIN{printf "%.2fx", a/b}') |"; any=1
            else line="$line |"; fi
        done; done
        [ $any = 1 ] && ratios="$ratios$line"$'\n'
    done
    if [ -n "$ratios" ]; then
        echo
        echo "d = $d, each kernel / PyTorch SDPA cuDNN (targets: >= 1.00x at d = 128, N >= 2048, non-causal; >= 0.90x elsewhere)"
        echo
        hdr="| kernel |" sep="|---|"
        for N in $NLIST; do for c in $CLIST; do hdr="$hdr N=$N$([ "$c" = 1 ] && echo " causal") |"; sep="$sep---|"; done; done
        echo "$hdr"; echo "$sep"
        printf '%s' "$ratios"
    fi
done
fails=0
for v in "${VARIANTS[@]}"; do
    IFS='|' read -r name _ label _ <<< "$v"
    if [ -n "${GR[$name,why]:-}" ]; then echo "GRADE FAILED: $label: ${GR[$name,why]}"; fails=1; fi
done
echo
echo "raw results: $CSV; grading logs: $OUT/*.grade; $(elapsed) in all"
exit $fails

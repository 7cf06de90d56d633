#!/usr/bin/env bash
# lessons/08-async-pipeline/worklog/sweep.sh: build lesson 08's solution with several tile
# configurations and time each on the course's shapes; prints a Markdown table.
#
#   bash lessons/08-async-pipeline/worklog/sweep.sh              (from the repository root; GPU)
# Options:
#   --d 64|128|64,128    head dimensions (default both)
#   --n "1024 4096 16384" sequence lengths (B = 16384 / N, at least 1; H = 2048 / d)
#   --causal 0|1|0,1     (default both)
#   --dtype fp16|bf16    (default fp16)
#   --src FILE           kernel source to sweep (default the solution; your lesson file works
#                        too once it is done)
#   --configs "Br,Bc,W,S,Q ..."  override the list for every --d given
#   --jobs J             parallel builds (default: number of CPUs)
#   --no-build           reuse build/sweep8/* from the last run
#   --no-peers           skip PyTorch's FlashAttention-2 (SDPA flash backend) reference row
#   --quick              N = 4096 only
# A configuration is Br,Bc,W,S,Q: query rows per block, keys per K/V tile, warps per
# block, cp.async stages, Q_i in registers (1) or re-read from shared memory (0); it is
# passed as -DFA64_BR=... (or FA128_*) to the solution, which uses it for that d.
# Output: the table on stdout; every timing in build/sweep8/sweep.csv; each variant's
# ptxas -v report in build/sweep8/<variant>.ptxas.
set -uo pipefail
cd "$(dirname "$0")/../../.."

DLIST="64 128" NLIST="1024 4096 16384" CLIST="0 1" DTYPE=fp16 JOBS=$(nproc 2>/dev/null || echo 4)
BUILD=1 PEERS=1 CONFIGS="" SRC=""
while [ $# -gt 0 ]; do
    case "$1" in
    --d) DLIST=$(echo "${2:?}" | tr ',' ' '); shift ;;
    --n) NLIST="${2:?}"; shift ;;
    --causal) CLIST=$(echo "${2:?}" | tr ',' ' '); shift ;;
    --dtype) DTYPE="${2:?}"; shift ;;
    --src) SRC="${2:?}"; shift ;;
    --configs) CONFIGS="${2:?}"; shift ;;
    --jobs) JOBS="${2:?}"; shift ;;
    --no-build) BUILD=0 ;;
    --no-peers) PEERS=0 ;;
    --quick) NLIST="4096" ;;
    -h | --help) sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "sweep.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
    esac
    shift
done

# Candidates (see the lesson text for why each is here). Variants that spill registers
# (ptxas -v) are still timed, and flagged in the table.
D64_CONFIGS="64,64,4,2,1 64,128,4,2,1 128,64,8,2,1 128,64,8,3,1 128,128,8,2,1 128,64,4,2,1 128,64,4,3,1 128,64,4,2,0 128,64,4,1,0 128,128,4,1,0 128,128,4,2,0"
D128_CONFIGS="64,64,4,1,1 64,64,4,2,1 64,128,4,1,1 128,64,8,1,1 128,64,8,2,1 128,64,8,3,1 128,128,8,2,1 128,32,4,2,0 128,64,4,1,0 128,64,4,2,0"

OUTDIR=build/sweep8
mkdir -p "$OUTDIR"
GPU_ARCH="${GPU_ARCH:-$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n1 | tr -d '. ')}"
GPU_ARCH="${GPU_ARCH:-90}"

name_of() { # d cfg -> variant name
    local d=$1 br bc w s q
    IFS=, read -r br bc w s q <<< "$2"
    echo "d${d}_${br}x${bc}_w${w}_s${s}_q${q}"
}
defs_of() { # d cfg -> -D flags
    local d=$1 br bc w s q
    IFS=, read -r br bc w s q <<< "$2"
    echo "-DFA${d}_BR=$br -DFA${d}_BC=$bc -DFA${d}_WARPS=$w -DFA${d}_STAGES=$s -DFA${d}_QREG=$q"
}
configs_for() { if [ -n "$CONFIGS" ]; then echo "$CONFIGS"; elif [ "$1" = 64 ]; then echo "$D64_CONFIGS"; else echo "$D128_CONFIGS"; fi; }

# ---- build every variant (the harness objects first, once, so parallel builds share them) ----
if [ "$BUILD" = 1 ]; then
    make --no-print-directory solution8 GPU_ARCH="$GPU_ARCH" >/dev/null || { echo "sweep.sh: make solution8 failed" >&2; exit 1; }
    jobs_file="$OUTDIR/jobs.txt"
    : > "$jobs_file"
    for d in $DLIST; do
        for cfg in $(configs_for "$d"); do
            n=$(name_of "$d" "$cfg")
            echo "make --no-print-directory variant N=8 GPU_ARCH=$GPU_ARCH ${SRC:+SRC=$SRC} OUT=$OUTDIR/$n DEFS=\"$(defs_of "$d" "$cfg")\" >/dev/null || echo \"build failed: $n\" >&2" >> "$jobs_file"
        done
    done
    echo "building $(wc -l < "$jobs_file") variants with $JOBS jobs..." >&2
    xargs -d '\n' -P "$JOBS" -I{} bash -c {} < "$jobs_file"
fi

# ---- registers / spills of the variant's kernel for this d (fp16 instantiation) ----
regs_of() { # ptxas-file d -> "R regs" or "R regs, S B spill"
    awk -v pat="fa2_pipeline_kernelI6__halfLi$2E" '
        /Compiling entry function/ { on = index($0, pat) > 0 && index($0, "sm_'"$GPU_ARCH"'") > 0 }
        on && /spill stores/ { s = $0; sub(/ bytes spill stores.*/, "", s); k = split(s, a, " "); sp = a[k] }
        on && /Used [0-9]+ registers/ { for (i = 1; i <= NF; i++) if ($i == "Used") r = $(i+1); on = 0 }
        END { if (r == "") print "?"; else if (sp + 0 > 0) print r " regs, " sp " B SPILL"; else print r " regs" }' "$1"
}

# ---- time ----
CSV="$OUTDIR/sweep.csv"
echo "variant,d,Br,Bc,warps,stages,qreg,smem_bytes,regs,dtype,B,H,N,causal,status,ms,tflops" > "$CSV"
declare -A TF
for d in $DLIST; do
    H=$((2048 / d))
    for cfg in $(configs_for "$d"); do
        n=$(name_of "$d" "$cfg")
        IFS=, read -r br bc w s q <<< "$cfg"
        smem=$(( (br + 2 * s * bc) * d * 2 ))
        regs=$(regs_of "$OUTDIR/$n.ptxas" "$d" 2>/dev/null || echo "?")
        for N in $NLIST; do
            B=$((16384 / N)); [ "$B" -lt 1 ] && B=1
            for c in $CLIST; do
                if [ ! -x "$OUTDIR/$n" ]; then TF[$n,$N,$c]="build?"; continue; fi
                row=$("$OUTDIR/$n" --bench-only --csv -b "$B" -H "$H" -n "$N" -d "$d" --dtype "$DTYPE" \
                      $([ "$c" = 1 ] && echo --causal) 2>/dev/null | tail -n1)
                rc=$?
                status=$(echo "$row" | cut -d, -f2); ms=$(echo "$row" | cut -d, -f11); tf=$(echo "$row" | cut -d, -f12)
                [ -z "$status" ] && status="exit-$rc"
                echo "$n,$d,$br,$bc,$w,$s,$q,$smem,\"$regs\",$DTYPE,$B,$H,$N,$c,$status,$ms,$tf" >> "$CSV"
                if [ "$status" = pass ] || [ "$status" = ok ] || [ -n "$tf" ]; then TF[$n,$N,$c]="$tf"; else TF[$n,$N,$c]="$status"; fi
                echo "  $n N=$N causal=$c: ${TF[$n,$N,$c]} TFLOP/s" >&2
            done
        done
        TF[$n,regs]="$regs"; TF[$n,smem]="$smem"
    done
done

# ---- PyTorch's FlashAttention-2 (SDPA flash backend) on the same shapes, same timing ----
if [ "$PEERS" = 1 ] && python3 -c "import torch; assert torch.cuda.is_available()" 2>/dev/null; then
    shapes="$OUTDIR/peer-shapes.txt" pcsv="$OUTDIR/peers.csv"
    : > "$shapes"; : > "$pcsv"
    for d in $DLIST; do for N in $NLIST; do for c in $CLIST; do
        B=$((16384 / N)); [ "$B" -lt 1 ] && B=1
        echo "sweep,$B,$((2048 / d)),$N,$d,$c" >> "$shapes"
    done; done; done
    python3 bench/peers.py --csv "$pcsv" --shapes "$shapes" --dtypes "$DTYPE" --methods torch-flash >/dev/null 2>&1 \
        || echo "sweep.sh: bench/peers.py failed; no PyTorch row" >&2
    # gpu,date,commit,method,dtype,B,H,N,d,causal,status,ms,tflops,...
    while IFS=, read -r _ _ _ m _ B H N d c st _ tf _; do
        [ "$m" = torch-flash ] && TF[torch,$d,$N,$c]="$tf"
    done < "$pcsv"
fi

# ---- the table ----
for d in $DLIST; do
    echo
    echo "d = $d, $DTYPE, H = $((2048 / d)), B = 16384 / N; TFLOP/s (4 B H N^2 d / time, halved when causal)"
    echo
    hdr="| Br x Bc | warps | stages | Q in | smem | registers |"
    sep="|---|---|---|---|---|---|"
    for N in $NLIST; do for c in $CLIST; do
        hdr="$hdr N=$N$([ "$c" = 1 ] && echo " causal") |"; sep="$sep---|"
    done; done
    echo "$hdr"; echo "$sep"
    for cfg in $(configs_for "$d"); do
        n=$(name_of "$d" "$cfg")
        IFS=, read -r br bc w s q <<< "$cfg"
        line="| $br x $bc | $w | $s | $([ "$q" = 1 ] && echo registers || echo smem) | $(( ${TF[$n,smem]:-0} / 1024 )) KiB | ${TF[$n,regs]:-?} |"
        for N in $NLIST; do for c in $CLIST; do line="$line ${TF[$n,$N,$c]:-} |"; done; done
        echo "$line"
    done
    if [ -n "${TF[torch,$d,${NLIST%% *},${CLIST%% *}]:-}" ]; then
        line="| PyTorch SDPA flash (FlashAttention-2) | | | | | |"
        for N in $NLIST; do for c in $CLIST; do line="$line ${TF[torch,$d,$N,$c]:-} |"; done; done
        echo "$line"
    fi
done
echo
echo "raw results: $CSV"

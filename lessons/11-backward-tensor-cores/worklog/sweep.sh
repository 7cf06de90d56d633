#!/usr/bin/env bash
# lessons/11-backward-tensor-cores/worklog/sweep.sh: build lesson 11's options variant (the solution
# with variants/options.patch, make solution11-options) with several tile configurations and time each on
# the course's shapes, with PyTorch's SDPA backward (FlashAttention-2 and cuDNN) timed the same
# way in the same run; prints a Markdown table. The variant's defaults are the solution's kernels.
#
#   bash lessons/11-backward-tensor-cores/worklog/sweep.sh        (from the repository root; GPU)
#   make sweep-11 ARGS="--quick"                   (the same)
# Options:
#   --d 64|128|64,128    head dimensions (default both)
#   --n "1024 4096 16384" sequence lengths (B = 16384 / N, at least 1; H = 2048 / d)
#   --causal 0|1|0,1     (default both)
#   --dtype fp16|bf16    (default fp16)
#   --configs "Br,Bc,W,S,KV,PS[,PF,ST,DQ,DH,QA] ..."  override the list for every --d given
#   --jobs J             parallel builds (default: number of CPUs)
#   --no-build           reuse build/sweep11/* from the last run
#   --no-peers           skip PyTorch
#   --quick              N = 4096 only
# A configuration is Br,Bc,W,S,KV,PS: query rows per step, keys per block, warps, Q_i/dO_i
# buffers, K/V fragments in registers, P^T through shared memory; then, optional (0 when
# left out), PF,ST,DQ,DH,QA: P^T before dP^T (1) or interleaved with it (2), stmatrix stores,
# dQ before dV/dK (1) or between dV and dK (2), dS from the 16-bit P^T, the dQ accumulator in
# fragment order (the FB64_* / FB128_* macros of the variant, region config). Variants that
# spill registers (ptxas -v) are still timed and flagged. TFLOP/s are counted as the lesson
# counts them: 2.5 x the forward's 4 B H N^2 d, halved when causal. Every timing:
# build/sweep11/sweep.csv. worklog/README.md has the runs these lists made.
set -uo pipefail
cd "$(dirname "$0")/../../.."

DLIST="64 128" NLIST="1024 4096 16384" CLIST="0 1" DTYPE=fp16 JOBS=$(nproc 2>/dev/null || echo 4)
BUILD=1 PEERS=1 CONFIGS=""
while [ $# -gt 0 ]; do
    case "$1" in
    --d) DLIST=$(echo "${2:?}" | tr ',' ' '); shift ;;
    --n) NLIST="${2:?}"; shift ;;
    --causal) CLIST=$(echo "${2:?}" | tr ',' ' '); shift ;;
    --dtype) DTYPE="${2:?}"; shift ;;
    --configs) CONFIGS="${2:?}"; shift ;;
    --jobs) JOBS="${2:?}"; shift ;;
    --no-build) BUILD=0 ;;
    --no-peers) PEERS=0 ;;
    --quick) NLIST="4096" ;;
    -h | --help) sed -n '2,26p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "sweep.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
    esac
    shift
done
case "$DTYPE" in fp16 | bf16) ;; *) echo "sweep.sh: --dtype must be fp16 or bf16" >&2; exit 2 ;; esac

# Candidates (worklog/README.md says why each is here); the first of each list is the default
# (the fastest on an H100, N 1k-16k, among the options that keep the plain backward's
# roundings, DSH = 0): at d = 64 P^T interleaved, stmatrix, dQ first; at d = 128 dQ between
# dV and dK (FlashAttention-2's order), the rest plain; at both, the dQ accumulator in fragment
# order (the second of each list is the same without it).
# The tile shapes were compared first (worklog/README.md); these lists compare the step's options on
# the two winners.
D64_CONFIGS="128,128,8,2,0,1,2,1,1,0,1 128,128,8,2,0,1,2,1,1,0 128,128,8,2,0,1,2,1,0,0,1 128,128,8,2,0,1,2,1,2,0,1 128,128,8,2,0,1,2,1,0,0 128,128,8,2,0,1,2,1,2,0 128,128,8,2,0,1,0,1,1,0 128,128,8,2,0,1,2,0,1,0 128,128,8,2,0,1 128,128,8,2,0,1,2,1,1,1 64,128,8,2,1,1,2,1,1,1"
D128_CONFIGS="64,128,8,2,0,1,0,0,2,0,1 64,128,8,2,0,1,0,0,2,0 64,128,8,2,0,1,0,0,1,0,1 64,128,8,2,0,1,0,0,0,0,1 64,128,8,2,0,1 64,128,8,2,0,1,0,0,1,0 64,128,8,2,0,1,1,0,2,0 64,128,8,2,0,1,2,1,2,0 64,128,8,2,0,1,0,1,2,0 64,128,8,2,0,1,0,0,2,1"

OUTDIR=build/sweep11
mkdir -p "$OUTDIR"
GPU_ARCH="${GPU_ARCH:-$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n1 | tr -d '. ')}"
GPU_ARCH="${GPU_ARCH:-90}"

name_of() { echo "d$1_$(echo "$2" | tr ',' '_')"; }
defs_of() { # d cfg -> -D flags
    local d=$1 br bc w s kv ps pf st dq dh qa
    IFS=, read -r br bc w s kv ps pf st dq dh qa <<< "$2"
    echo "-DFB${d}_BR=$br -DFB${d}_BC=$bc -DFB${d}_WARPS=$w -DFB${d}_STAGES=$s -DFB${d}_KVREG=$kv -DFB${d}_PSMEM=$ps" \
         "-DFB${d}_PFIRST=${pf:-0} -DFB${d}_STSM=${st:-0} -DFB${d}_DQFIRST=${dq:-0} -DFB${d}_DSH=${dh:-0}" \
         "-DFB${d}_DQACC=${qa:-0}"
}
opts_of() { # cfg -> the optional knobs in words ("-" when none)
    local br bc w s kv ps pf st dq dh qa o=""
    IFS=, read -r br bc w s kv ps pf st dq dh qa <<< "$1"
    [ "${pf:-0}" = 1 ] && o="$o P-first"
    [ "${pf:-0}" = 2 ] && o="$o P-interleaved"
    [ "${st:-0}" = 1 ] && o="$o stmatrix"
    [ "${dq:-0}" = 1 ] && o="$o dQ-first"
    [ "${dq:-0}" = 2 ] && o="$o dQ-between"
    [ "${dh:-0}" = 1 ] && o="$o dS-16bit"
    [ "${qa:-0}" = 1 ] && o="$o dQacc-fragment-order"
    echo "${o# }" | sed 's/^$/-/'
}
configs_for() { if [ -n "$CONFIGS" ]; then echo "$CONFIGS"; elif [ "$1" = 64 ]; then echo "$D64_CONFIGS"; else echo "$D128_CONFIGS"; fi; }

# ---- build every variant (the harness objects first, once, so parallel builds share them) ----
if [ "$BUILD" = 1 ]; then
    make --no-print-directory solution11 GPU_ARCH="$GPU_ARCH" >/dev/null || { echo "sweep.sh: make solution11 failed" >&2; exit 1; }
    jobs_file="$OUTDIR/jobs.txt"
    : > "$jobs_file"
    for d in $DLIST; do
        for cfg in $(configs_for "$d"); do
            n=$(name_of "$d" "$cfg")
            echo "make --no-print-directory variant N=11 VARIANTS=options GPU_ARCH=$GPU_ARCH OUT=$OUTDIR/$n DEFS=\"$(defs_of "$d" "$cfg")\" >/dev/null 2>&1 || echo \"build failed (static_assert: a configuration the template refuses?): $n\" >&2" >> "$jobs_file"
        done
    done
    echo "building $(wc -l < "$jobs_file") variants with $JOBS jobs..." >&2
    xargs -d '\n' -P "$JOBS" -I{} bash -c {} < "$jobs_file"
fi

# ---- registers / spills of the variant's main kernel for this d (fp16 instantiation) ----
regs_of() { # ptxas-file d -> "R regs" or "R regs, S B spill"
    awk -v pat="fa2_bwd_kernelI6__half9BwdConfigILi$2E" '
        /Compiling entry function/ { on = index($0, pat) > 0 && index($0, "sm_'"$GPU_ARCH"'") > 0 }
        on && /spill stores/ { s = $0; sub(/ bytes spill stores.*/, "", s); k = split(s, a, " "); sp = a[k] }
        on && /Used [0-9]+ registers/ { for (i = 1; i <= NF; i++) if ($i == "Used") r = $(i+1); on = 0 }
        END { if (r == "") print "?"; else if (sp + 0 > 0) print r " regs, " sp " B SPILL"; else print r " regs" }' "$1"
}
smem_of() { # d cfg -> bytes (BwdTiles::SMEM)
    local d=$1 br bc w s kv ps _
    IFS=, read -r br bc w s kv ps _ <<< "$2"
    echo $(( 4 * bc * d + 4 * s * br * d + (1 + ps) * 2 * bc * br + 8 * s * br ))
}
tflops() { # B H N d causal ms -> TFLOP/s of a backward pass
    awk -v B="$1" -v H="$2" -v N="$3" -v d="$4" -v c="$5" -v ms="$6" \
        'BEGIN { if (ms + 0 <= 0) { print ""; exit } f = 2.5 * 4 * B * H * N * N * d; if (c == 1) f /= 2; printf "%.1f", f / (ms * 1e-3) / 1e12 }'
}

# ---- time ----
CSV="$OUTDIR/sweep.csv"
echo "variant,d,Br,Bc,warps,stages,kvreg,psmem,options,smem_bytes,regs,dtype,B,H,N,causal,status,ms,tflops" > "$CSV"
declare -A TF
for d in $DLIST; do
    H=$((2048 / d))
    for cfg in $(configs_for "$d"); do
        n=$(name_of "$d" "$cfg")
        IFS=, read -r br bc w s kv ps _ <<< "$cfg"
        smem=$(smem_of "$d" "$cfg")
        regs=$(regs_of "$OUTDIR/$n.ptxas" "$d" 2>/dev/null || echo "?")
        for N in $NLIST; do
            B=$((16384 / N)); [ "$B" -lt 1 ] && B=1
            for c in $CLIST; do
                if [ ! -x "$OUTDIR/$n" ]; then TF[$n,$N,$c]="build?"; continue; fi
                row=$("$OUTDIR/$n" --bench-only --csv -b "$B" -H "$H" -n "$N" -d "$d" --dtype "$DTYPE" \
                      $([ "$c" = 1 ] && echo --causal) 2>/dev/null | tail -n1)
                rc=$?
                status=$(echo "$row" | cut -d, -f2); ms=$(echo "$row" | cut -d, -f11)
                [ -z "$status" ] && status="exit-$rc"
                tf=$(tflops "$B" "$H" "$N" "$d" "$c" "${ms:-0}")
                echo "$n,$d,$br,$bc,$w,$s,$kv,$ps,$(opts_of "$cfg"),$smem,\"$regs\",$DTYPE,$B,$H,$N,$c,$status,$ms,$tf" >> "$CSV"
                if [ -n "$tf" ]; then TF[$n,$N,$c]="$tf"; else TF[$n,$N,$c]="$status"; fi
                echo "  $n N=$N causal=$c: ${TF[$n,$N,$c]} TFLOP/s ($ms ms)" >&2
            done
        done
        TF[$n,regs]="$regs"
    done
done

# ---- PyTorch's SDPA backward (FlashAttention-2 and cuDNN) on the same shapes ----
# Timed as the harness times: warm-up, then each backward alone between CUDA events, a buffer
# of max(2 x L2, 64 MiB) overwritten before each (no input found in L2), the median.
if [ "$PEERS" = 1 ] && python3 -c "import torch; assert torch.cuda.is_available()" 2>/dev/null; then
    shapes=""
    for d in $DLIST; do for N in $NLIST; do for c in $CLIST; do
        B=$((16384 / N)); [ "$B" -lt 1 ] && B=1
        shapes="$shapes $B,$((2048 / d)),$N,$d,$c"
    done; done; done
    pout=$(python3 bench/sdpa_backward_time.py "$DTYPE" $shapes 2>"$OUTDIR/peers.err")
    [ -z "$pout" ] && echo "sweep.sh: the PyTorch timing failed (see $OUTDIR/peers.err)" >&2
    while IFS=, read -r m B H N d c ms; do
        [ -z "$m" ] && continue
        tf=$(tflops "$B" "$H" "$N" "$d" "$c" "$(echo "$ms" | grep -E '^[0-9.]+$' || echo 0)")
        TF[$m,$d,$N,$c]="${tf:-$ms}"
        echo "torch-$m-bwd,$d,,,,,,,,,,$DTYPE,$B,$H,$N,$c,ok,$ms,$tf" >> "$CSV"
    done <<< "$pout"
fi

# ---- the table ----
for d in $DLIST; do
    echo
    echo "d = $d, $DTYPE, H = $((2048 / d)), B = 16384 / N; backward TFLOP/s (2.5 x 4 B H N^2 d / time, halved when causal)"
    echo
    hdr="| Br x Bc | warps | stages | K/V in | P^T via | options | smem | registers |"
    sep="|---|---|---|---|---|---|---|---|"
    for N in $NLIST; do for c in $CLIST; do
        hdr="$hdr N=$N$([ "$c" = 1 ] && echo " causal") |"; sep="$sep---|"
    done; done
    echo "$hdr"; echo "$sep"
    for cfg in $(configs_for "$d"); do
        n=$(name_of "$d" "$cfg")
        IFS=, read -r br bc w s kv ps _ <<< "$cfg"
        line="| $br x $bc | $w | $s | $([ "$kv" = 1 ] && echo registers || echo smem) | $([ "$ps" = 1 ] && echo smem || echo registers) | $(opts_of "$cfg") | $(( $(smem_of "$d" "$cfg") / 1024 )) KiB | ${TF[$n,regs]:-?} |"
        for N in $NLIST; do for c in $CLIST; do line="$line ${TF[$n,$N,$c]:-} |"; done; done
        echo "$line"
    done
    for m in flash cudnn; do
        [ -n "${TF[$m,$d,${NLIST%% *},${CLIST%% *}]:-}" ] || continue
        line="| PyTorch SDPA backward, $([ $m = flash ] && echo "FlashAttention-2" || echo cuDNN) | | | | | | | |"
        for N in $NLIST; do for c in $CLIST; do line="$line ${TF[$m,$d,$N,$c]:-} |"; done; done
        echo "$line"
    done
done
echo
echo "raw results: $CSV"

#!/usr/bin/env bash
# bench/decode_sweep.sh: lesson 12 on small and mid decoding steps, variant by variant, with the
# rooflines that fit them (make decode-sweep; a GPU; 18 builds, then about 4 minutes on an H100).
#
#   bash bench/decode_sweep.sh [--no-build] [--reps R] [--shapes "A4k A32k ..."]
#
# Shapes (N = 1, H = 32, fp16, d = 128 unless said):
#   A4k A16k A32k A128k   B = 1, H_kv = 8 (B H_kv = 8) at N_kv 4096, 16384, 32768, 131072
#   B4k C4k               B H_kv = 32 (B = 4) and 512 (B = 64) at 4096
#   Abf16 Ad64            B H_kv = 8 at 32768, bf16 / fp16 with d = 64
# On every shape, each variant of the solution (make variant N=12 VARIANTS=..., the worklog variants of lesson 12: the
# solution with patches from lessons/12-flash-decoding/worklog/variants/ and macros; every one carries
# plan.patch, whose fd-plan line gives the split count) run as bench/decode.sh runs it
# (--bench-only, CUDA events, median of R launches, L2 flushed by the harness before each):
#   base          the solution's kernel (the wave rule over one slot per SM; last-block merge,
#                 FD_STAGES=3, BC 64/128): V=base
#   rule=resident the wave rule over every resident block (SMs x blocks per SM): V=rule-resident
#   rule=tiles    the same over the split counts whole tiles can make: V=rule-tiles
#   rule=fill     one wave of resident blocks, as full as it goes: V=rule-fill
#   merge=kernel  a second kernel merges instead of the last block of a group: V=merge-kernel
#   merge=pdl     the same, launched with programmatic dependent launch: V=merge-pdl
#   stages=2      -DFD_STAGES=2 (3 blocks per SM; 1 tile in flight per block): V=stages2
#   stages=4      -DFD_STAGES=4 (1 block per SM at d = 128; 3 tiles in flight): V=stages4
#   bc=alt        -DFD128_BC=128 -DFD64_BC=64: the other tile size (at d = 128 1 block per SM): V=bc-alt
#   evict=first   K/V copies with an L2 evict_first policy: V=evict-first
#   trace         the base kernel stamping %globaltimer in every block: V=trace; its fd-trace
#                 line says when the blocks of the last timed launch started, how long their K/V
#                 loop and their partial took, and the merge
# On the B H_kv = 8 shapes also -DFD_SPLITS = 1 8 16 33 66 132 264 (at most one tile per split).
# Per shape, build/copy_bandwidth on as many bytes as its K and V: a copy and a plain read, each
# with an L2 flush that writes a 2 x L2 buffer (the harness's way until it changed because of
# this sweep) and with one that reads it (the harness's way now: it leaves no dirty line in L2
# for the timed operation to write back); and the 1 GiB copy once (read flush).
# Writes build/decode-sweep/sweep-<gpu>.csv (a row per timing) and prints the tables
# (bench/decode_sweep_table.py), also saved as build/decode-sweep/sweep-<gpu>.md.
set -uo pipefail
cd "$(dirname "$0")/.."

BUILD=1 REPS=${DECODE_REPS:-20}
ALL_SHAPES="A4k A16k A32k A128k B4k C4k Abf16 Ad64"
SHAPE_LIST=$ALL_SHAPES
while [ $# -gt 0 ]; do
    case "$1" in
    --no-build) BUILD=0 ;;
    --reps) REPS="${2:?--reps needs a count}"; shift
        [[ "$REPS" =~ ^[0-9]+$ ]] && [ "$REPS" -ge 1 ] && [ "$REPS" -le 1000 ] || { echo "decode_sweep.sh: --reps takes 1..1000" >&2; exit 2; } ;;
    --shapes) SHAPE_LIST="${2:?--shapes needs names}"; shift
        for s in $SHAPE_LIST; do [[ " $ALL_SHAPES " == *" $s "* ]] || { echo "decode_sweep.sh: unknown shape '$s' (one of: $ALL_SHAPES)" >&2; exit 2; }; done ;;
    -h | --help) sed -n '2,35p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "decode_sweep.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
    esac
    shift
done

# "dtype B H_kv N_kv d" of each shape (H = 32, N = 1)
shape_args() {
    case "$1" in
    A4k) echo "fp16 1 8 4096 128" ;; A16k) echo "fp16 1 8 16384 128" ;; A32k) echo "fp16 1 8 32768 128" ;;
    A128k) echo "fp16 1 8 131072 128" ;; B4k) echo "fp16 4 8 4096 128" ;; C4k) echo "fp16 64 8 4096 128" ;;
    Abf16) echo "bf16 1 8 32768 128" ;; Ad64) echo "fp16 1 8 32768 64" ;;
    esac
}

SMI="${BENCH_NVIDIA_SMI:-nvidia-smi}"
gpu_line=""
command -v "$SMI" >/dev/null 2>&1 && gpu_line=$("$SMI" --query-gpu=name --format=csv,noheader -i 0 2>/dev/null | head -n1)
if [ -z "$gpu_line" ]; then
    echo "make decode-sweep needs an NVIDIA GPU: \`nvidia-smi\` is missing or lists no device; nothing was run." >&2
    exit 4
fi
GPU_NAME=$(echo "$gpu_line" | sed 's/^ *//; s/ *$//; s/,/ /g')
SLUG=$(echo "$GPU_NAME" | tr 'A-Z' 'a-z' | sed -E 's/[^a-z0-9]+/-/g; s/^-+//; s/-+$//')
COMMIT=${GIT_COMMIT:-$(git describe --always --dirty 2>/dev/null || echo unknown)}
OUTDIR=build/decode-sweep
CSV=$OUTDIR/sweep-$SLUG.csv
mkdir -p "$OUTDIR"
ERR=$(mktemp -d)
trap 'rm -rf "$ERR"' EXIT
MAKE=${MAKE:-make}
T0=$SECONDS

# ---- builds: the harness and the copy tool, then the variants in parallel ----
# "label:V": the sweep's label, the variant's name (lessons/12-flash-decoding/worklog/variants/); then the forced split counts
# (plan.patch and -DFD_SPLITS=S)
VARIANTS="base:base rule=resident:rule-resident rule=tiles:rule-tiles rule=fill:rule-fill merge=kernel:merge-kernel
merge=pdl:merge-pdl stages=2:stages2 stages=4:stages4 bc=alt:bc-alt evict=first:evict-first trace:trace"
SPLIT_COUNTS="1 8 16 33 66 132 264"
bin_of() { echo "$OUTDIR/bin-${1//=/-}"; } # LABEL: the variant's binary
if [ "$BUILD" = 1 ]; then
    echo "== building ./solution12 (the harness), build/copy_bandwidth, then $(($(wc -w <<<"$VARIANTS") + $(wc -w <<<"$SPLIT_COUNTS"))) variants in parallel"
    $MAKE --no-print-directory solution12 build/copy_bandwidth >"$ERR/build.log" 2>&1 ||
        { cat "$ERR/build.log"; echo "decode_sweep.sh: the build failed" >&2; exit 5; }
    pids=()
    for v in $VARIANTS; do
        label=${v%%:*}
        $MAKE --no-print-directory variant N=12 VARIANTS="${v#*:}" OUT="$(bin_of "$label")" >"$ERR/build-$label.log" 2>&1 &
        pids+=("$!:$label")
    done
    for S in $SPLIT_COUNTS; do
        $MAKE --no-print-directory variant N=12 VARIANTS=plan DEFS="-DFD_SPLITS=$S" OUT="$(bin_of "S=$S")" \
            >"$ERR/build-S=$S.log" 2>&1 &
        pids+=("$!:S=$S")
    done
    for pn in "${pids[@]}"; do
        wait "${pn%%:*}" || { cat "$ERR/build-${pn#*:}.log"; echo "decode_sweep.sh: building variant ${pn#*:} failed" >&2; exit 5; }
    done
    echo "   built in $((SECONDS - T0)) s; spills (ptxas -v): $(cat $OUTDIR/*.ptxas 2>/dev/null | grep -c '[1-9][0-9]* bytes spill stores') kernels"
fi
for b in build/copy_bandwidth $(for v in $VARIANTS; do bin_of "${v%%:*}"; done) $(for S in $SPLIT_COUNTS; do bin_of "S=$S"; done); do
    [ -x "$b" ] || { echo "decode_sweep.sh: $b is missing (run without --no-build)" >&2; exit 5; }
done

echo "gpu,commit,kind,variant,dtype,B,H,H_kv,N,N_kv,d,status,ms,gbps,note" >"$CSV"
# row KIND VARIANT DTYPE B HKV NKV D STATUS MS GBPS NOTE
row() {
    local note=${11//,/;}
    echo "$GPU_NAME,$COMMIT,$1,$2,$3,$4,32,$5,1,$6,$7,$8,$9,${10},${note//$'\n'/ }" >>"$CSV"
}

# lesson KIND VARIANT SHAPE: one harness run of the variant's binary; the fd-plan / fd-trace lines go to the note
lesson() {
    local kind=$1 variant=$2 bin dt B hkv nkv d out rc r ms="" gbps="" st note
    bin=$(bin_of "$variant")
    read -r dt B hkv nkv d <<<"$(shape_args "$3")"
    out=$(timeout 300 "$bin" --bench-only --csv -b "$B" -H 32 --kv-heads "$hkv" -n 1 \
        --kv-seq "$nkv" -d "$d" --dtype "$dt" --reps "$REPS" --warmup 3 --timeout 60 2>"$ERR/stderr" </dev/null)
    rc=$?
    r=$(printf '%s\n' "$out" | awk -F, 'NF >= 18 && $2 != "status"' | tail -n1)
    if [ -n "$r" ] && [ $rc = 0 ]; then
        st=ok ms=$(cut -d, -f11 <<<"$r") gbps=$(cut -d, -f18 <<<"$r")
    else
        st=failed-rc$rc
    fi
    note=$(grep -E '^fd-(plan|trace):' "$ERR/stderr" | sed 's/^fd-[a-z]*: //' | paste -sd'|' -)
    [ "$st" = ok ] || note="$note $(grep -v '^fd-' "$ERR/stderr" | grep -v '^$' | tail -n1 | cut -c1-160)"
    row "$kind" "$variant" "$dt" "$B" "$hkv" "$nkv" "$d" "$st" "$ms" "$gbps" "$note"
    printf '  %-6s %-14s %8s ms %8s GB/s  %s\n' "$3" "$variant" "${ms:--}" "${gbps:--}" "$st"
}

# roofline OP FLUSH SHAPE: build/copy_bandwidth on the shape's K and V bytes
roofline() {
    local op=$1 flush=$2 dt B hkv nkv d bytes out rc
    read -r dt B hkv nkv d <<<"$(shape_args "$3")"
    bytes=$((2 * B * hkv * nkv * d * 2))
    out=$(build/copy_bandwidth --bytes "$bytes" --reps "$REPS" --op "$op" --flush "$flush" 2>"$ERR/copy")
    rc=$?
    if [ $rc = 0 ]; then
        row "$op" "$flush-flush" "$dt" "$B" "$hkv" "$nkv" "$d" ok "$(cut -d, -f3 <<<"$out")" "$(cut -d, -f4 <<<"$out")" "$bytes bytes"
    else
        row "$op" "$flush-flush" "$dt" "$B" "$hkv" "$nkv" "$d" "failed-rc$rc" "" "" "$(tail -n1 "$ERR/copy")"
    fi
}

echo "== rooflines: the 1 GiB copy; per shape a copy and a read of its K/V bytes, L2 flushed by writing and by reading"
out=$(build/copy_bandwidth 1024 "$REPS" 2>"$ERR/copy") || { cat "$ERR/copy" >&2; exit 5; }
echo "$GPU_NAME,$COMMIT,copy1g,read-flush,,,,,,,,ok,$(cut -d, -f3 <<<"$out"),$(cut -d, -f4 <<<"$out"),1 GiB" >>"$CSV"
echo "   1 GiB copy: $(cut -d, -f4 <<<"$out") GB/s"
for s in $SHAPE_LIST; do
    for op in copy read; do for fl in write read; do roofline $op $fl "$s"; done; done
done

echo "== lesson 12 variants (the plan of each goes to the CSV's note)"
for s in $SHAPE_LIST; do
    for v in $VARIANTS; do
        label=${v%%:*}
        if [ "$label" = trace ]; then lesson trace trace "$s"; else lesson lesson "$label" "$s"; fi
    done
done

echo "== -DFD_SPLITS on the B H_kv = 8 shapes"
for s in $SHAPE_LIST; do
    case $s in A4k | A16k | A32k | A128k) ;; *) continue ;; esac
    for S in $SPLIT_COUNTS; do lesson splits "S=$S" "$s"; done
done
echo "== done in $((SECONDS - T0)) s: $CSV"
python3 bench/decode_sweep_table.py --csv "$CSV" --md "$OUTDIR/sweep-$SLUG.md"

#!/usr/bin/env bash
# lessons/15-ring-attention/worklog/bench.sh OUTDIR: lesson 15's measurements on a machine with 2 (or more)
# Hopper GPUs, in one go (about 5 minutes): writes OUTDIR/summary.md (the tables the lesson page
# quotes), OUTDIR/ring.csv (one row per run), OUTDIR/steps.md (the per-step timelines),
# OUTDIR/checks.log (the graders' output), OUTDIR/runs.log (each timed run's messages and exit
# status) and OUTDIR/torch.csv (PyTorch's ring).
#   1. builds build/ring15/ (make variant N=15 and nvcc: the solution and the timeline tool with NCCL,
#      NCCL with the naive causal layout, the same three with RING_SMS_LEFT = 4 or 16 (SMs
#      lesson 09's grid leaves to NCCL's kernels: ring_block.h), and the virtual ring (run on
#      2 ranks on one GPU, --ranks 2)
#   2. grades the solution builds (--check-only: the case matrix, and shapes of 4096 rows)
#   3. times, fp16, B = 1, H = 16, d = 128: lesson 09's kernel (step 6, as the ring runs it) on
#      one GPU at N = 32768; the ring over P GPUs at N = P x 32768 by NCCL (--transport nccl),
#      non-causal, causal balanced, causal naive (and the RING_SMS_LEFT builds), and by the copy
#      engines (--transport ce: cudaMemcpyPeerAsync), non-causal and causal balanced; the virtual
#      ring (2 ranks on GPU 0) at N = 2 x 32768; with the per-step timeline of each ring
#   4. PyTorch's context_parallel ring attention (torch.distributed.tensor.experimental) on the
#      same GPUs and shapes (lessons/15-ring-attention/worklog/torch_ring.py, torchrun over P GPUs)
# P is the number of GPUs this process can see, as CUDA counts them (at most 8): CUDA_VISIBLE_DEVICES=0,1
# on a machine of four runs everything, the ring, its N = P x NPER, the tables and PyTorch, on two.
# Environment: B, H, D, NPER (rows per GPU, 32768), REPS (10), SKIP_TORCH=1, SKIP_CHECKS=1, CUDA_VISIBLE_DEVICES.
set -uo pipefail
out=${1:?usage: bash lessons/15-ring-attention/worklog/bench.sh OUTDIR}
cd "$(dirname "$0")/../../.."
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0  # the ring only sends and receives: no NVLink multicast objects
B=${B:-1}; H=${H:-16}; D=${D:-128}; NPER=${NPER:-32768}; REPS=${REPS:-10}
# visible_gpus: "COUNT NAME", the GPUs this process can see (the ring and PyTorch see the same ones)
# and the name of the first. Asked of the CUDA driver itself (cuDeviceGetCount through python3's
# ctypes: no build, no PyTorch), so CUDA_VISIBLE_DEVICES counts as CUDA reads it: indices or UUIDs,
# the list cut at its first entry that names no GPU. Where the driver library cannot be loaded,
# nvidia-smi's list, filtered by CUDA_VISIBLE_DEVICES by the same rules.
visible_gpus() {
    python3 - <<'PY' 2>/dev/null && return
import ctypes, sys
cuda = ctypes.CDLL("libcuda.so.1")
n, name = ctypes.c_int(0), ctypes.create_string_buffer(256)
rc = cuda.cuInit(0)
if rc == 100:  # CUDA_ERROR_NO_DEVICE: none visible (CUDA_VISIBLE_DEVICES empty, or naming none)
    print("0 -"); sys.exit(0)
dev = ctypes.c_int(0)
if rc or cuda.cuDeviceGetCount(ctypes.byref(n)) or n.value < 1 or cuda.cuDeviceGet(ctypes.byref(dev), 0) or \
        cuda.cuDeviceGetName(name, 256, dev):
    sys.exit(1)
print(n.value, name.value.decode())
PY
    local all first="" n=0 e
    mapfile -t all < <(nvidia-smi --query-gpu=index,uuid --format=csv,noheader 2>/dev/null | tr -d ' ')
    if [ -z "${CUDA_VISIBLE_DEVICES+x}" ]; then n=${#all[@]}; first=0
    else
        IFS=',' read -ra want <<<"$CUDA_VISIBLE_DEVICES"
        for e in "${want[@]}"; do  # each an index of the list or the start of a UUID; the first that is neither ends it
            local hit=""
            for g in "${all[@]}"; do
                if [ "$e" = "${g%%,*}" ] || [[ $e == GPU-* && ${g#*,} == "$e"* ]]; then hit=${g%%,*}; fi
            done
            [ -n "$hit" ] || break
            n=$((n + 1)); [ -n "$first" ] || first=$hit
        done
    fi
    echo "$n $( [ -n "$first" ] && nvidia-smi -i "$first" --query-gpu=name --format=csv,noheader 2>/dev/null || echo -)"
}
read -r gpus gpu <<<"$(visible_gpus)"
[ "${gpus:-0}" -ge 2 ] || { echo "bench.sh: needs 2 or more GPUs visible, found ${gpus:-0}${CUDA_VISIBLE_DEVICES+ (CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES)}"; exit 4; }
P=$gpus; [ "$P" -gt 8 ] && P=8  # the ring's most ranks (RING_MAX_RANKS): the NCCL ring runs on the first 8
N=$((P * NPER))
echo "bench.sh: $P x $gpu, B=$B H=$H d=$D, $NPER rows per GPU (N = $N), fp16, $REPS repetitions" | tee "$out/summary.md"

t0=$SECONDS
# build NAME RING NAIVE [SMS_LEFT]: build/ring15/solution-NAME (make variant) and, from the same
# object, build/ring15/timeline-NAME (the timeline tool, tools/ring_timeline.cu)
build() {
    local name=$1 ring=$2 naive=$3 o=build/ring15/solution-$1 mk=(make -s --no-print-directory GPU_ARCH=90)
    local knobs=(RING="$ring" RING_NAIVE="$naive") defs=${4:+-DRING_SMS_LEFT=$4}
    "${mk[@]}" variant N=15 OUT="$o" DEFS="$defs" "${knobs[@]}" || return 1
    local nvcc flags libs lib
    nvcc=$("${mk[@]}" print-NVCC) flags=$("${mk[@]}" print-RING_FLAGS "${knobs[@]}") libs=$("${mk[@]}" print-RING_LIBS "${knobs[@]}")
    lib=$("${mk[@]}" link-objects-15 "${knobs[@]}" | tail -n1)
    # shellcheck disable=SC2086
    "$nvcc" -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a $flags $defs -Ireference/include -Ireference/harness \
        -Ireference/cpu -Ireference/gpu -c "$o.cu" -o "$o.o" &&
    "$nvcc" -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a $flags $defs -Ireference/include -Ireference/harness \
        -Ireference/cpu -Ireference/gpu lessons/15-ring-attention/worklog/tools/ring_timeline.cu "$o.o" $lib \
        -o build/ring15/timeline-$name $libs
}
mkdir -p build/ring15
{ make -s GPU_ARCH=90 -j"$(nproc)" solution15 link-objects-15 RING=virtual &&
  build virtual virtual 0
  if [ -n "$(make -s print-NCCL_ROOT)" ]; then
      for b in "nccl nccl 0" "nccl-naive nccl 1" "nccl-left4 nccl 0 4" "nccl-left16 nccl 0 16" "nccl-naive-left4 nccl 1 4"; do
          # shellcheck disable=SC2086
          build $b &
      done
      wait
  fi; } 2>&1 | tee "$out/build.log" | tail -n 5
[ -x build/ring15/timeline-virtual ] || { echo "bench.sh: the build failed (see $out/build.log)"; exit 1; }
nccl=1; [ -x build/ring15/timeline-nccl ] || { nccl=0; echo "bench.sh: NCCL not found (see build.log): the virtual ring only" | tee -a "$out/summary.md"; }
echo "built in $((SECONDS - t0)) s"

: > "$out/checks.log"
if [ "${SKIP_CHECKS:-0}" != 1 ]; then
  big="--check-only --seed 1 -b 1 -H 4 -n 4096 -d 128"  # chunks of 1024 or 2048 rows
  for run in "nccl|--check-only --seed 1 --transport nccl" "nccl|--check-only --seed 1 --transport ce" \
             "nccl|$big --transport nccl" "nccl|$big --causal --transport nccl" "nccl|$big --causal --transport ce" \
             "nccl-naive|$big --causal --transport nccl" \
             "virtual|--check-only --seed 1 --dtype fp16" "virtual|$big --causal"; do
    b=${run%%|*}; args=${run#*|}
    [ -x build/ring15/solution-$b ] || continue
    echo "+ build/ring15/solution-$b $args" >> "$out/checks.log"
    timeout 300 build/ring15/solution-$b $args >> "$out/checks.log" 2>&1
    echo "exit $? (solution-$b $args)" | tee -a "$out/checks.log"
  done
fi

csv="$out/ring.csv"
: > "$out/steps.md"
echo "label,P,B,H,N,d,causal,dtype,whole_ms,ring_ms,ring_tflops,whole_tflops" > "$csv"
run() {  # run LABEL BINARY ARGS...: one CSV row
  local label=$1 bin=$2; shift 2
  echo "+ $bin $* --label $label"
  timeout 120 "build/ring15/$bin" -b "$B" -H "$H" -d "$D" --reps "$REPS" --label "$label" --steps "$out/steps.md" "$@" \
    2>>"$out/runs.log" | tail -n 1 | tee -a "$csv"
  echo "exit ${PIPESTATUS[0]}: $bin $* --label $label" >> "$out/runs.log"
}
run one-gpu timeline-virtual -n "$NPER" --one-gpu
run one-gpu-causal timeline-virtual -n "$NPER" --one-gpu --causal
if [ $nccl = 1 ]; then
run nccl timeline-nccl -n "$N" --transport nccl
run nccl-causal-balanced timeline-nccl -n "$N" --causal --transport nccl
run nccl-causal-naive timeline-nccl-naive -n "$N" --causal --transport nccl
# the copy engines (cudaMemcpyPeerAsync on a copy stream per rank; needs peer access between neighbours)
run ce timeline-nccl -n "$N" --transport ce
run ce-causal-balanced timeline-nccl -n "$N" --causal --transport ce
# The same with lesson 09's grid leaving SMs free for NCCL's kernels (RING_SMS_LEFT, ring_block.h)
for left in 4 16; do
  [ -x build/ring15/timeline-nccl-left$left ] || continue
  run nccl-left$left timeline-nccl-left$left -n "$N" --transport nccl
  run nccl-causal-balanced-left$left timeline-nccl-left$left -n "$N" --causal --transport nccl
done
[ -x build/ring15/timeline-nccl-naive-left4 ] && run nccl-causal-naive-left4 timeline-nccl-naive-left4 -n "$N" --causal --transport nccl
fi
run virtual2 timeline-virtual -n $((2 * NPER)) --ranks 2
run virtual2-causal timeline-virtual -n $((2 * NPER)) --causal --ranks 2

if [ "${SKIP_TORCH:-0}" != 1 ]; then
  timeout 240 python3 -m torch.distributed.run --standalone --nproc-per-node "$P" lessons/15-ring-attention/worklog/torch_ring.py \
    --batch "$B" --heads "$H" --seqlen "$N" --head-dim "$D" --reps "$REPS" --csv "$out/torch.csv" 2>&1 | tail -n 20 | tee "$out/torch.log"
fi

python3 - "$out" "$P" <<'EOF'
import csv, os, sys
out, P = sys.argv[1], int(sys.argv[2])
rows = {r["label"]: r for r in csv.DictReader(open(os.path.join(out, "ring.csv")))}
def tf(label, key="ring_tflops"):
    return float(rows[label][key]) if label in rows and rows[label].get(key) else None
lines = ["", "| run | P | N | ring ms | ring TFLOP/s | / (P x one GPU) | whole call ms | whole TFLOP/s |",
         "|---|---|---|---|---|---|---|---|"]
for label, base in [("one-gpu", "one-gpu"), ("one-gpu-causal", "one-gpu-causal"), ("nccl", "one-gpu"),
                    ("nccl-causal-balanced", "one-gpu-causal"), ("nccl-causal-naive", "one-gpu-causal"),
                    ("nccl-left4", "one-gpu"), ("nccl-left16", "one-gpu"),
                    ("nccl-causal-balanced-left4", "one-gpu-causal"), ("nccl-causal-balanced-left16", "one-gpu-causal"),
                    ("nccl-causal-naive-left4", "one-gpu-causal"),
                    ("ce", "one-gpu"), ("ce-causal-balanced", "one-gpu-causal"),
                    ("virtual2", "one-gpu"), ("virtual2-causal", "one-gpu-causal")]:
    if label not in rows:
        lines.append("| %s | | | | (no result) | | | |" % label)
        continue
    r = rows[label]
    p = int(r["P"])
    gpus = 1 if label.startswith("virtual") or label.startswith("one-gpu") else p
    ratio = tf(label) / (gpus * tf(base)) if tf(base) else float("nan")
    lines.append("| %s | %s | %s | %s | %s | %.3f | %s | %s |" % (label, p, r["N"], r["ring_ms"], r["ring_tflops"], ratio,
                                                                r["whole_ms"], r["whole_tflops"]))
tpath = os.path.join(out, "torch.csv")
if os.path.exists(tpath):
    lines += ["", "PyTorch context_parallel (same GPUs, shapes; TFLOP/s of the SDPA call inside the context):", "",
              "| run | backend | rotate | N | causal | ms | TFLOP/s | course ring / PyTorch |", "|---|---|---|---|---|---|---|---|"]
    for r in csv.DictReader(open(tpath)):
        mine = tf("nccl-causal-balanced" if r["causal"] == "1" else "nccl")
        t = float(r["tflops"]) if r["tflops"] else None
        lines.append("| torch | %s | %s | %s | %s | %s | %s | %s |" % (r["backend"], r["rotate"], r["N"], r["causal"], r["ms"],
                     r["tflops"] or r.get("error", ""), "%.2f" % (mine / t) if mine and t else ""))
open(os.path.join(out, "summary.md"), "a").write("\n".join(lines) + "\n")
print("\n".join(lines))
EOF
echo "bench.sh: done in $((SECONDS - t0)) s; $out/summary.md, $out/steps.md"

#!/usr/bin/env bash
# The course grid for the tensor-core lessons against PyTorch's SDPA backends,
# in one table: fp16/bf16, H*d = 2048, B*N = 16384, N = 512..16384, d = 64/128,
# causal and not. Used by tools/gpu_session.sh grid; rows go to $OUT/grid.csv.
# GRID_LESSONS (default "6 7 8"), GRID_DTYPES (default "fp16 bf16").
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
csv=$OUT/grid.csv
lessons=${GRID_LESSONS:-6 7 8}
dtypes=${GRID_DTYPES:-fp16 bf16}
for n in $lessons; do make -s solution$n >/dev/null; done
echo "gpu,date,commit,method,dtype,B,H,N,d,causal,status,ms,tflops,mem_bytes,speedup_vs_standard,reps,sweep,gpu_mem_bytes,timing" >"$csv"
shapes=$(mktemp)
for d in 64 128; do for causal in 0 1; do for N in 512 1024 2048 4096 8192 16384; do
    echo "grid,$((16384 / N)),$((2048 / d)),$N,$d,$causal" >>"$shapes"
done; done; done
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n1)
while IFS=, read -r _ B H N d causal; do
    for n in $lessons; do for dt in $dtypes; do
        row=$(./solution$n --bench-only --csv -b $B -H $H -n $N -d $d --dtype $dt --reps 20 $([ $causal = 1 ] && echo --causal) 2>/dev/null | tail -n1)
        IFS=, read -r name status _ _ _ _ _ _ _ _ ms tflops _ mem <<<"$row"
        echo "$gpu,,,$name,$dt,$B,$H,$N,$d,$causal,$status,$ms,$tflops,$mem,,20,grid,," >>"$csv"
    done; done
done <"$shapes"
python3 bench/peers.py --csv "$csv" --shapes "$shapes" --dtypes "${dtypes// /,}" --methods torch-flash,torch-cudnn --rep-ms 300 >"$OUT/peers.log" 2>&1 || tail -5 "$OUT/peers.log"
python3 - "$csv" <<'PY'
import csv, sys, collections
rows = list(csv.DictReader(open(sys.argv[1])))
t = collections.defaultdict(dict)
for r in rows:
    key = (r["dtype"], r["d"], r["causal"], int(r["N"]))
    try: t[key][r["method"]] = float(r["tflops"])
    except ValueError: t[key][r["method"]] = float("nan")
methods = sorted({r["method"] for r in rows})
print("TFLOP/s; ratio = lesson / torch-flash")
print(f"{'dtype':5} {'d':>4} {'c':>2} {'N':>6} " + " ".join(f"{m[:12]:>12}" for m in methods) + "  08/flash")
for key in sorted(t):
    v = t[key]
    fl = v.get("torch-flash", float("nan"))
    r8 = v.get("08-async-pipeline", float("nan")) / fl if fl == fl and fl else float("nan")
    print(f"{key[0]:5} {key[1]:>4} {key[2]:>2} {key[3]:>6} " + " ".join(f"{v.get(m, float('nan')):12.1f}" for m in methods) + f"  {r8:6.2f}")
PY

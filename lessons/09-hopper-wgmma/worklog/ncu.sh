#!/usr/bin/env bash
# lessons/09-hopper-wgmma/worklog/ncu.sh: Nsight Compute on every step of lesson 09's ladder, one shape,
# to explain the ladder's numbers: how busy the tensor pipe is, how often a scheduler issues,
# and what the warps wait for.
#
#   bash lessons/09-hopper-wgmma/worklog/ncu.sh        (after make ladder-09, which builds the steps;
#                                               or make ncu-09; a missing step is built with
#                                               make variant N=9 VARIANTS=stepK, steps 1-4 through
#                                               variants/steps-1-4.var)
# Options:
#   --steps "1 2 3 4 5 6 7"  --shape "-b 2 -H 16 -n 4096 -d 128 --dtype fp16" (harness options)
#   --causal             add --causal to the shape
# Per step it prints the kernel's duration, SM throughput, every tensor-pipe metric the
# sections collect (wgmma runs on the tensor pipe: names with "tensor" or "gmma"), the issue
# activity and eligible warps per scheduler, and the six largest stall reasons (cycles per
# issued instruction). The raw metrics: build/ncu09/stepN.csv.
set -uo pipefail
cd "$(dirname "$0")/../../.."
STEPS="1 2 3 4 5 6 7" SHAPE="-b 2 -H 16 -n 4096 -d 128 --dtype fp16" CAUSAL=""
while [ $# -gt 0 ]; do
    case "$1" in
    --steps) STEPS="${2:?}"; shift ;;
    --shape) SHAPE="${2:?}"; shift ;;
    --causal) CAUSAL=--causal ;;
    -h | --help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "ncu.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
    esac
    shift
done
command -v ncu >/dev/null 2>&1 || { echo "ncu.sh: Nsight Compute's ncu is not installed" >&2; exit 4; }
nvidia-smi -L >/dev/null 2>&1 || { echo "ncu.sh: needs an NVIDIA Hopper GPU (nvidia-smi found none)" >&2; exit 4; }
OUT=build/ncu09
mkdir -p "$OUT"
fail=0
for s in $STEPS; do
    bin=build/ladder09/step$s
    if [ ! -x "$bin" ]; then
        make --no-print-directory variant N=9 OUT="$bin" VARIANTS="step$s" >/dev/null || { fail=1; continue; }
    fi
    echo "== step $s: ncu on ./$bin --bench-only $SHAPE $CAUSAL"
    # shellcheck disable=SC2086
    timeout 600 ncu --clock-control none --section SpeedOfLight --section ComputeWorkloadAnalysis \
        --section WarpStateStats --section SchedulerStats --section LaunchStats -k regex:fa3_forward_kernel -c 1 \
        --csv --page raw "$bin" --bench-only $SHAPE $CAUSAL --reps 1 --warmup 0 > "$OUT/step$s.log" 2>&1 || { fail=1; tail -n 5 "$OUT/step$s.log"; continue; }
    grep '^"' "$OUT/step$s.log" > "$OUT/step$s.csv"
    python3 - "$OUT/step$s.csv" <<'EOF'
import csv, re, sys
rows = list(csv.reader(open(sys.argv[1])))
if len(rows) < 3:
    print("   no metrics (see the .log next to this .csv)"); sys.exit(0)
names, units, vals = rows[0], rows[1], rows[2]
m = {n: (v, u) for n, u, v in zip(names, units, vals)}
def show(n, label=None):
    if n in m:
        v, u = m[n]
        print("   %-62s %14s %s" % (label or n, v, u))
show("gpu__time_duration.sum", "duration")
show("sm__throughput.avg.pct_of_peak_sustained_elapsed", "SM throughput (% of peak)")
show("launch__registers_per_thread", "registers per thread at launch")
for n in sorted(m):
    if re.search(r"tensor|gmma", n):
        show(n)
for n in sorted(m):
    if re.search(r"issue_active|warps_eligible|warps_active\.avg\.per_cycle|inst_executed\.avg\.per_cycle", n):
        show(n)
stalls = []
for n, (v, u) in m.items():
    if re.search(r"issue_stalled_.*_per_issue_active\.ratio$", n):
        try:
            stalls.append((float(v.replace(",", "")), n))
        except ValueError:
            pass
stalls.sort(reverse=True)
print("   largest stall reasons (cycles per issued instruction):")
for v, n in stalls[:6]:
    r = re.sub(r".*issue_stalled_(.*)_per_issue_active\.ratio", r"\1", n)
    print("     %-30s %.2f" % (r, v))
EOF
done
exit $fail

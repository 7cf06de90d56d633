#!/usr/bin/env bash
# lessons/17-varlen-prefill/worklog/bench.sh: lesson 17's varlen prefill against lesson 09 on a rectangular batch
# of the same tokens, lesson 09 on the batch padded to its longest sequence, and PyTorch's FlexAttention and
# SDPA over nested jagged tensors on the same packed batch, in one run; writes a Markdown table.
#
#   bash lessons/17-varlen-prefill/worklog/bench.sh [options]     (from the repository root; or make bench-17 ARGS='...')
# Options:
#   --tokens T      tokens of the packed batch (default 65536 = 16 x 4096)
#   --lengths A:B   lengths drawn log-uniform in A..B (default 128:16384) until they hold T tokens, the last
#                   one cut to fit; --seed S draws them (default 17)
#   --seqlens L     the lengths themselves (LEN,LEN,...), instead of drawing them
#   --heads H --d D (default 16, 128), --reps R (default 20), --no-build, --no-peers
#   --out FILE.md   default docs/results/lessons/varlen-17-<gpu>.md (and its timings, FILE.csv)
# Every time: the harness's --bench-only (CUDA events, warm-up, median of R launches, L2 flushed before
# each), fp16, causal and not; PyTorch timed the same way (peer_varlen.py). Every timing goes to
# build/bench17/bench.csv. TFLOP/s: the packed batch's real work (4 H d per query-key pair, causal pairs
# only) over the time, for every row on the packed batch, the padded one included; the rectangular batch's
# own work for its rows. The targets: lesson 17's TFLOP/s >= 0.90 x lesson 09's on the rectangular batch
# of the same tokens, lesson 17 >= 1.5 x as fast as the faster PyTorch peer.
# Exit status: 0, 4 without a GPU, 5 when a build fails.
set -uo pipefail
cd "$(dirname "$0")/../../.."

TOKENS=65536 LENGTHS=128:16384 SEED=17 SEQLENS="" H=16 D=128 REPS=20 BUILD=1 PEERS=1 OUT=""
while [ $# -gt 0 ]; do
    case "$1" in
    --tokens) TOKENS=${2:?--tokens needs a count}; shift ;;
    --lengths) LENGTHS=${2:?--lengths needs MIN:MAX}; shift ;;
    --seed) SEED=${2:?--seed needs a number}; shift ;;
    --seqlens) SEQLENS=${2:?--seqlens needs LEN,LEN,...}; shift ;;
    --heads) H=${2:?--heads needs a count}; shift ;;
    --d) D=${2:?--d needs 64 or 128}; shift ;;
    --reps) REPS=${2:?--reps needs a count}; shift ;;
    --no-build) BUILD=0 ;;
    --no-peers) PEERS=0 ;;
    --out) OUT=${2:?--out needs a file}; shift ;;
    -h | --help) sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
    esac
    shift
done
[[ "$LENGTHS" =~ ^[0-9]+:[0-9]+$ ]] || { echo "bench.sh: --lengths '$LENGTHS' is not MIN:MAX" >&2; exit 2; }
[[ "$D" =~ ^(64|128)$ ]] || { echo "bench.sh: --d $D: 64 or 128" >&2; exit 2; }
if [ -z "$SEQLENS" ]; then  # log-uniform lengths until TOKENS, the last cut to fit
    SEQLENS=$(python3 -c "
import math, random, sys
lo, hi = map(int, sys.argv[1].split(':')); left = int(sys.argv[2]); r = random.Random(int(sys.argv[3])); out = []
while left > 0:
    n = min(left, int(round(math.exp(r.uniform(math.log(lo), math.log(hi))))))
    out.append(n); left -= n
print(','.join(map(str, out)))" "$LENGTHS" "$TOKENS" "$SEED")
fi
read -r NSEQ TOTAL LONGEST < <(python3 -c "import sys; l = list(map(int, sys.argv[1].split(','))); print(len(l), sum(l), max(l))" "$SEQLENS")
RB=$((TOTAL / 4096)) RN=4096  # the rectangular batch of the same tokens (when TOTAL is a multiple of 4096)
[ $((RB * RN)) = "$TOTAL" ] || { RB=1; RN=$TOTAL; }

gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader -i 0 2>/dev/null | head -n1 | sed 's/^ *//; s/ *$//')
[ -n "$gpu" ] || { echo "bench.sh: needs an NVIDIA GPU (nvidia-smi lists none)" >&2; exit 4; }
slug=$(echo "$gpu" | tr 'A-Z' 'a-z' | sed -E 's/[^a-z0-9]+/-/g; s/^-+//; s/-+$//')
OUT=${OUT:-docs/results/lessons/varlen-17-$slug.md}
DIR=build/bench17
CSV=$DIR/bench.csv
mkdir -p "$DIR" "$(dirname "$OUT")"
COMMIT=${GIT_COMMIT:-$(git describe --always --dirty 2>/dev/null || echo unknown)}
DATE=$(date -u +%Y-%m-%dT%H:%MZ)
if [ "$BUILD" = 1 ]; then
    echo "== building ./solution9 ./solution17"
    ${MAKE:-make} --no-print-directory solution9 solution17 >"$DIR/build.log" 2>&1 || { tail -n 30 "$DIR/build.log"; exit 5; }
fi
echo "method,causal,ms,note" >"$CSV"

# run METHOD CAUSAL BINARY ARGS...: one --bench-only run, its time in the CSV
run() {
    local method=$1 causal=$2 bin=$3 out rc row c=()
    shift 3
    [ "$causal" = 1 ] && c=(--causal)
    out=$(timeout 600 "$bin" --bench-only --csv -H "$H" -d "$D" --dtype fp16 --reps "$REPS" --warmup 3 --timeout 120 \
        "${c[@]}" "$@" 2>"$DIR/stderr" </dev/null)
    rc=$?
    row=$(printf '%s\n' "$out" | awk -F, 'NF >= 12 && $2 != "status"' | tail -n1)
    if [ $rc = 0 ] && [ -n "$row" ]; then echo "$method,$causal,$(cut -d, -f11 <<<"$row")," >>"$CSV"
    else echo "$method,$causal,,failed-rc$rc: $(tail -n1 "$DIR/stderr" | tr ',' ';' | cut -c1-150)" >>"$CSV"; fi
    tail -n1 "$CSV"
}
for causal in 1 0; do
    run 17-varlen $causal ./solution17 --seqlens "$SEQLENS"
    run 09-rect $causal ./solution9 -b "$RB" -n "$RN"
    run 17-rect $causal ./solution17 -b "$RB" -n "$RN"
    run 09-padded $causal ./solution9 -b "$NSEQ" -n "$LONGEST"
    if [ "$PEERS" = 1 ]; then
        c=(); [ "$causal" = 1 ] && c=(--causal)
        python3 lessons/17-varlen-prefill/worklog/peer_varlen.py --seqlens "$SEQLENS" --heads "$H" --d "$D" "${c[@]}" \
            --reps "$REPS" --csv "$DIR/peers.csv" >"$DIR/peers.log" 2>&1 || echo "   peer_varlen.py failed (rc $?)"
        [ -f "$DIR/peers.csv" ] && sed "s/^\([^,]*\),/\1,$causal,/" "$DIR/peers.csv" | cut -d, -f1-3,5 >>"$CSV"
        rm -f "$DIR/peers.csv"; tail -n2 "$CSV"
    fi
done
TORCH=$(python3 -c "import torch; print(torch.__version__)" 2>/dev/null || echo "not run")

python3 - "$CSV" "$OUT" "$gpu" "$DATE" "$COMMIT" "$REPS" "$TORCH" "$SEQLENS" "$H" "$D" "$RB" "$RN" <<'PY'
import csv, sys
path, out, gpu, date, commit, reps, torch_v, seqlens, H, d, rb, rn = sys.argv[1:]
lens, H, d = [int(x) for x in seqlens.split(",")], int(H), int(d)
rows = list(csv.DictReader(open(path)))
def flops(causal):
    return sum(4.0 * H * d * (n * n - (n * n / 2 if causal else 0)) for n in lens)
def ms(method, causal):
    r = [r for r in rows if r["method"] == method and r["causal"] == str(causal) and r["ms"]]
    return float(r[0]["ms"]) if r else None
names = [("17-varlen", "lesson 17, packed"), ("09-rect", "lesson 09, %s x %s rectangular" % (rb, rn)),
         ("17-rect", "lesson 17, the same rectangular batch"), ("09-padded", "lesson 09, padded to %d x %d" % (len(lens), max(lens))),
         ("flex", "FlexAttention, document mask"), ("sdpa-nested", "SDPA, nested jagged tensors")]
L = ["# Lesson 17 on the %s: varlen prefill against lesson 09 and PyTorch" % gpu, "",
     "Measured by `bash lessons/17-varlen-prefill/worklog/bench.sh` (`make bench-17`) on %s, commit %s; torch %s. "
     "A packed batch of %d sequences, %d tokens (lengths below), H = %d, d = %d, fp16. Every time: CUDA events, warm-up, "
     "the median of %s launches with L2 flushed before each (the harness's `--bench-only`; PyTorch timed the same "
     "way, `peer_varlen.py`); every timing in `build/bench17/bench.csv` of that run. TFLOP/s: the packed batch's "
     "real work (4 H d per query-key pair that attends; causal: the pairs on and below each sequence's diagonal) "
     "over the row's time, for every row on the packed batch (the padded batch's extra work counts for nothing); "
     "the rectangular batch of the same tokens, %s x %s, does less work (causal: B N^2 / 2 pairs), and its rows "
     "give TFLOP/s of that work: the speed the target compares." % (date, commit, torch_v, len(lens), sum(lens), H,
                                                                  d, reps, rb, rn), ""]
for causal in (1, 0):
    f = flops(causal)
    rf = 4.0 * H * d * int(rb) * int(rn) ** 2 * (0.5 if causal else 1)  # the rectangular batch's own work
    L += ["## %s" % ("Causal" if causal else "Not causal"), "", "| method | ms | TFLOP/s (real work) | lesson 17 is |",
          "|---|---|---|---|"]
    mine = ms("17-varlen", causal)
    for key, label in names:
        t = ms(key, causal)
        fail = [r["note"] for r in rows if r["method"] == key and r["causal"] == str(causal) and not r["ms"]]
        if t is None:
            L.append("| %s | %s | | |" % (label, (fail[0] if fail else "not run")))
            continue
        own = key.endswith("-rect")
        L.append("| %s | %.3f | %.0f%s | %s |" % (label, t, (rf if own else f) / (t * 1e-3) / 1e12, " (its own work)" if own else "",
                                                  "" if own or key == "17-varlen" or not mine else "%.2fx as fast" % (t / mine)))
    rect, peers = ms("09-rect", causal), [x for x in (ms("flex", causal), ms("sdpa-nested", causal)) if x]
    if mine and rect:
        L += ["", "Targets: lesson 17's TFLOP/s on the packed batch over lesson 09's on the rectangular batch of the "
              "same tokens (its own work): **%.2f** (>= 0.90); over the faster PyTorch peer: **%s** (>= 1.5)."
              % ((f / mine) / (rf / rect), "%.2f" % (min(peers) / mine) if peers else "not run")]
    L.append("")
L += ["Lengths (%d): %s" % (len(lens), seqlens.replace(",", ", ")), ""]
open(out, "w").write("\n".join(L))
print("\n".join(L))
PY
cp "$CSV" "${OUT%.md}.csv"  # the run's timings beside its table

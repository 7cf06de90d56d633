#!/usr/bin/env bash
# bench/plot.sh [CSV [OUTDIR]]: draws the benchmark charts from a bench CSV with gnuplot.
# With no arguments, every docs/results/bench-*.csv (make bench-plots). For bench-X.csv it
# writes into OUTDIR (default: the CSV's folder):
#   bench-X-time-d64.svg, -time-d128.svg    time vs N per method, non-causal (log-log)
#   bench-X-time-d64-causal.svg, ...        the same, causal
#   bench-X-memory.svg                      memory vs N at B = 1: standard O(N^2) vs flash O(N)
#   bench-X-ladder.svg                      TFLOP/s per lesson at N = LADDER_N, d = LADDER_D
#                                           (default 4096, 128; non-causal)
#   bench-X-backward-time-d64.svg, ...      the backward pass: time vs N per method (4 charts)
#   bench-X-backward-memory.svg             the backward's memory vs N at B = 1: the standard
#                                           backward's S and P, O(N^2), vs flash's O(N)
# (Rows without the 20th column, pass, are forward rows: CSVs written before the backward bench.)
# Time and ladder charts show fp32, fp16 and e4m3 (lesson 14's FP8) rows (the PyTorch peers' bf16 rows stay in the CSV).
# Only rows with status "ok" are drawn, except standard's "oom" rows on the memory chart
# (the bytes it would have needed).
set -uo pipefail
cd "$(dirname "$0")/.."
command -v gnuplot >/dev/null || { echo "plot.sh: gnuplot is not installed (apt-get install gnuplot-nox)" >&2; exit 2; }

if [ $# -eq 0 ]; then
    shopt -s nullglob
    csvs=(docs/results/bench-*.csv)
    [ ${#csvs[@]} -gt 0 ] || { echo "plot.sh: no docs/results/bench-*.csv yet (make bench on a GPU)" >&2; exit 1; }
    rc=0
    for c in "${csvs[@]}"; do bash "$0" "$c" || rc=1; done
    exit $rc
fi
CSV=$1
OUTDIR=${2:-$(dirname "$CSV")}
[ -r "$CSV" ] || { echo "plot.sh: cannot read $CSV" >&2; exit 1; }
mkdir -p "$OUTDIR"
BASE=$OUTDIR/$(basename "$CSV" .csv)
LADDER_N=${LADDER_N:-4096} LADDER_D=${LADDER_D:-128}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
# Rows read without carriage returns: PyTorch rows written by bench/peers.py before it set
# lineterminator ended in "\r\n", which left "\r" in the last field (pass) and kept them
# out of every filter below.
tr -d '\r' <"$CSV" >"$TMP/rows.csv"
ROWS=$TMP/rows.csv

# Columns: 1 gpu 2 date 3 commit 4 method 5 dtype 6 B 7 H 8 N 9 d 10 causal 11 status 12 ms
#          13 tflops 14 mem_bytes 15 speedup 16 reps 17 sweep 18 gpu_mem_bytes 19 timing 20 pass
GPU=$(awk -F, 'NR == 2 {print $1; exit}' "$ROWS")
CAPMIB=$(awk -F, 'NR == 2 {printf "%.0f", $18 / 1048576; exit}' "$ROWS")
DATE=$(awk -F, 'NR == 2 {print substr($2, 1, 10); exit}' "$ROWS")

# Series file name: its drawing order (0 standard, 1 lessons, 2 PyTorch), method, dtype.
group_of='function group(m) { return m == "standard" ? 0 : m ~ /^torch-/ ? 2 : 1 }'

# split DIR FILTER: one file per method+dtype of the rows matching the awk FILTER, x = N.
split_series() { # dir awk-condition value-expression
    mkdir -p "$1"
    awk -F, -v dir="$1" "$group_of"'
        NR > 1 && ('"$2"') {
            f = dir "/" group($4) "-" $4 "-" $5 ".dat"
            if (!(f in seen)) { seen[f] = 1; printf "N \"%s %s\"\n", $4, $5 > f }
            print $8, '"$3"' >> f
        }' "$ROWS"
    local f
    for f in "$1"/*.dat; do # sort each series by N, keeping its title line
        [ -e "$f" ] || continue
        { head -n1 "$f"; tail -n +2 "$f" | sort -n -k1,1; } >"$f.tmp" && mv "$f.tmp" "$f"
    done
}

draw() { # kind datadir out heading [y-axis label]
    if ! ls "$2"/*.dat >/dev/null 2>&1; then echo "   (no rows for $(basename "$3"), not drawn)"; return 0; fi
    gnuplot -e "kind='$1'; datadir='$2'; out='$3'; heading='$4'; capmib=${CAPMIB:-0}; ylab='${5:-}'" bench/plot.gp &&
        echo "   $3"
}

echo "== charts from $CSV"
for pass in forward backward; do
    prow=$([ $pass = forward ] && echo '($20 == "" || $20 == "forward")' || echo '$20 == "backward"')
    pfx=$([ $pass = forward ] && echo "" || echo "-backward")
    if ! awk -F, "NR > 1 && $prow {n++} END {exit !n}" "$ROWS"; then
        [ $pass = backward ] && echo "   (no backward rows: no backward charts)"
        continue
    fi
    for d in 64 128; do
        for causal in 0 1; do
            sfx=$([ $causal = 1 ] && echo -causal)
            split_series "$TMP/$pass-time-$d-$causal" "$prow && \$17 == \"grid\" && \$9 == $d && \$10 == $causal && \$5 != \"bf16\" && \$11 == \"ok\" && \$12 > 0" '$12'
            draw time "$TMP/$pass-time-$d-$causal" "$BASE$pfx-time-d$d$sfx.svg" \
                "attention $pass, d = $d, $([ $causal = 1 ] && echo causal || echo non-causal): $GPU ($DATE)" \
                "$([ $pass = forward ] && echo "time per forward pass (ms, median)" || echo "time per backward pass (ms, median; O and L given)")"
        done
    done

    # Memory: the B = 1, H = 32, d = 64 non-causal rows (memory sweep + the grid's B = 1 rows)
    # of the methods in the memory sweep, fp32/fp16 only.
    MEM_METHODS=$(awk -F, "NR > 1 && $prow"' && $17 == "memory" {print $4 ":" $5}' "$ROWS" | sort -u | tr '\n' ' ')
    memrow="$prow && (\$17 == \"memory\" || (\$17 == \"grid\" && \$6 == 1)) && \$7 == 32 && \$9 == 64 && \$10 == 0 && (\$5 == \"fp32\" || \$5 == \"fp16\") && index(\" $MEM_METHODS\", \" \" \$4 \":\" \$5 \" \") > 0"
    split_series "$TMP/$pass-memory" "$memrow && \$11 == \"ok\" && \$14 > 0" '$14 / 1048576'
    mkdir -p "$TMP/$pass-memory"
    awk -F, -v dir="$TMP/$pass-memory" 'NR > 1 && ('"$memrow"') && $11 == "oom" && $14 > 0 {
            f = dir "/0-oom-" $4 "-" $5 ".dat"
            if (!(f in seen)) { seen[f] = 1; printf "N \"%s %s: out of memory (would need)\"\n", $4, $5 > f }
            print $8, $14 / 1048576 >> f
        }' "$ROWS"
    draw memory "$TMP/$pass-memory" "$BASE$pfx-memory.svg" \
        "device memory vs N$([ $pass = backward ] && echo ", backward (S and P kept)"): standard attention O(N^2), flash O(N): $GPU ($DATE)"
done

# Ladder: one bar per method+dtype at the ladder shape; standard, lessons in order, PyTorch.
mkdir -p "$TMP/ladder"
awk -F, "$group_of"' NR > 1 && ($20 == "" || $20 == "forward") && $17 == "grid" && $8 == '"$LADDER_N"' && $9 == '"$LADDER_D"' && $10 == 0 && $5 != "bf16" && $11 == "ok" && $13 > 0 {
        printf "%d\t%s\t\"%s %s\"\t%s\t%d\n", group($4), $4, $4, $5, $13, group($4) + 1
    }' "$ROWS" | sort -s -t$'\t' -k1,1n -k2,2 | cut -f3- >"$TMP/ladder/bars.dat.tmp"
[ -s "$TMP/ladder/bars.dat.tmp" ] && tr '\t' ' ' <"$TMP/ladder/bars.dat.tmp" >"$TMP/ladder/bars.dat"
rm -f "$TMP/ladder/bars.dat.tmp"
draw ladder "$TMP/ladder" "$BASE-ladder.svg" \
    "TFLOP/s per method, N = $LADDER_N, d = $LADDER_D, H = $((2048 / LADDER_D)), non-causal: $GPU ($DATE)"

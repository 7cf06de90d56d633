#!/usr/bin/env bash
# docs/results-chart.sh RESULTS.csv OUT.svg: horizontal bar chart of TFLOP/s, one bar per
# passing row of a `make results` CSV. Lines starting with "#" are skipped; columns are
# found by header name: solution (or lesson, or method), status, dtype, N, d, causal,
# tflops. Drawn by gnuplot when the site is built. Exits 1 when there is nothing to draw.
set -euo pipefail
csv=$1 svg=$2
data=$(mktemp); trap 'rm -f "$data"' EXIT
awk -F, '/^#/ { next }
  !hdr { hdr = $0; for (i = 1; i <= NF; i++) col[$i] = i
         name = col["solution"] ? col["solution"] : col["lesson"] ? col["lesson"] : col["method"]
         if (!name || !col["tflops"] || !col["status"]) exit; next }
  $0 == hdr { next }
  $col["status"] == "pass" && $col["tflops"] ~ /^[0-9.eE+-]+$/ {
    label = $name
    if (col["dtype"]) label = label " " $col["dtype"]
    if (col["N"]) label = label " N=" $col["N"]
    if (col["d"]) label = label " d=" $col["d"]
    if (col["causal"] && $col["causal"] == "1") label = label " causal"
    printf "%s\t%s\n", label, $col["tflops"]
  }' "$csv" > "$data"
n=$(wc -l < "$data")
if [[ $n -eq 0 ]]; then echo "results-chart: no passing rows with a tflops column in $csv" >&2; exit 1; fi
height=$(( 120 + 34 * n ))
gnuplot <<GP
set terminal svg size 960,$height dynamic font "DejaVu Sans,14" background rgb "white"
set output "$svg"
set datafile separator "\t"
set title "$(basename "$csv" .csv): TFLOP/s (higher is better)"
set xlabel "TFLOP/s"
set xrange [0:*]
set yrange [-0.6:$n-0.4] reverse
set ytics nomirror scale 0
set xtics nomirror
set grid xtics
set border 3
set style fill solid 0.85 noborder
unset key
plot "$data" using (\$2/2):0:(\$2/2):(0.35):yticlabels(1) with boxxyerror lc rgb "#1f5fa8", \
     "" using 2:0:(sprintf(" %.1f", \$2)) with labels left font "DejaVu Sans,12"
GP

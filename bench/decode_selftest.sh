#!/usr/bin/env bash
# bench/decode_selftest.sh: CPU-only checks of the decode benchmark (make decode-selftest, in
# `make test`): without a GPU bench/decode.sh refuses with a message and exit 4; the summary
# and the chart are drawn from a made-up CSV in /tmp (the chart only when gnuplot is there);
# peers_decode.py compiles. The made-up numbers never leave /tmp.
set -uo pipefail
cd "$(dirname "$0")/.."
fail() { echo "decode-selftest: FAIL: $*" >&2; exit 1; }
TMP=$(mktemp -d /tmp/decode-selftest.XXXXXX)
trap '[ -n "${KEEP:-}" ] || rm -rf "$TMP"' EXIT

out=$(BENCH_NVIDIA_SMI=/nonexistent/nvidia-smi bash bench/decode.sh --no-build 2>&1); rc=$?
[ $rc -eq 4 ] || fail "decode.sh without a GPU exited $rc, not 4"
grep -q "needs an NVIDIA GPU" <<<"$out" || fail "decode.sh without a GPU did not say what it needs: $out"
out=$(bash bench/decode.sh --d 96 2>&1); rc=$?
[ $rc -eq 2 ] && grep -q "takes 64 and/or 128" <<<"$out" || fail "decode.sh --d 96: exit $rc: $out"

csv=$TMP/decode-fake-gpu.csv
{
    echo "gpu,date,commit,method,dtype,B,H,H_kv,N,N_kv,d,status,ms,kv_gbps,pct_of_copy,copy_gbps,reps,timing"
    echo "FAKE,2000-01-01T00:00Z,abc,copy,,,,,,,,ok,0.7,3000.0,100.0,3000.0,20,fake"
    for B in 1 4 16 64; do
        for n in 4096 16384 32768 65536 131072; do
            for m in 12-flash-decoding 12-flash-decoding-splits1 torch-flash torch-cudnn torch-efficient; do
                g=$(awk -v b=$B -v n=$n -v m=$m 'BEGIN{x = 2900 * (1 - 1/(1 + b*n/20000)); if (m ~ /splits1/) x = x*b/64; if (m ~ /torch/) x = x*0.9; printf "%.1f", x}')
                st=ok; [ $m = torch-efficient ] && [ $n = 131072 ] && { st=unsupported; g=""; }
                echo "FAKE,2000-01-01T00:00Z,abc,$m,fp16,$B,32,8,1,$n,128,$st,1.0,$g,,3000.0,20,fake"
            done
        done
    done
} >"$csv"
python3 bench/decode_summary.py --csv "$csv" --md "$TMP/s.md" --plot-dir "$TMP/plot" >/dev/null || fail "decode_summary.py"
grep -q "Target 1, >= 90% of the copy bandwidth" "$TMP/s.md" || fail "no target line in the summary"
grep -q "^| fp16 | 128 | 64 | 32 | 8 | 1 | 131072 |" "$TMP/s.md" || fail "no row for the largest shape"
if command -v gnuplot >/dev/null 2>&1; then
    gnuplot -e "dir='$TMP/plot'; out='$TMP/chart.svg'" bench/plot_decode.gp 2>"$TMP/gp.log" || fail "gnuplot: $(cat "$TMP/gp.log")"
    grep -q "<svg" "$TMP/chart.svg" || fail "no SVG"
    ! grep -qi "warning\|error" "$TMP/gp.log" || fail "gnuplot said: $(cat "$TMP/gp.log")"
else
    echo "decode-selftest: chart SKIP (no gnuplot)"
fi
python3 -m py_compile bench/peers_decode.py bench/decode_summary.py || fail "a python script does not compile"
echo "decode-selftest: ok (no-GPU refusal, summary table, chart$(command -v gnuplot >/dev/null || echo ' skipped'))"

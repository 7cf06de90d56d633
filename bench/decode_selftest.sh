#!/usr/bin/env bash
# bench/decode_selftest.sh: CPU-only checks of the decode benchmark (make decode-selftest, in
# `make test`): without a GPU bench/decode.sh and bench/decode_sweep.sh refuse with a message and
# exit 4; the summary, the chart and the sweep's tables are drawn from made-up CSVs in /tmp (the
# chart only when gnuplot is there); the Python scripts compile. The made-up numbers never leave
# /tmp.
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
            for m in 12-flash-decoding 12-flash-decoding-splits1 torch-flash torch-cudnn torch-efficient read-same; do
                g=$(awk -v b=$B -v n=$n -v m=$m 'BEGIN{x = 2900 * (1 - 1/(1 + b*n/20000)); if (m ~ /splits1/) x = x*b/64; if (m ~ /torch/) x = x*0.9; if (m ~ /copy/) x = x*1.1; printf "%.1f", x}')
                st=ok; [ $m = torch-efficient ] && [ $n = 131072 ] && { st=unsupported; g=""; }
                echo "FAKE,2000-01-01T00:00Z,abc,$m,fp16,$B,32,8,1,$n,128,$st,1.0,$g,,3000.0,20,fake"
            done
        done
    done
} >"$csv"
python3 bench/decode_summary.py --csv "$csv" --md "$TMP/s.md" --plot-dir "$TMP/plot" >/dev/null || fail "decode_summary.py"
grep -q "Target 1, >= 90% of the copy bandwidth" "$TMP/s.md" || fail "no target line in the summary"
grep -q "Target 1 against the same-size read instead" "$TMP/s.md" || fail "no same-size target line in the summary"
grep -q "The same-size read itself reaches" "$TMP/s.md" || fail "no line on the same-size copy in the summary"
grep -q "| lesson 12 | % of copy | same-size read | % of same |" "$TMP/s.md" || fail "no same-size columns"
[ -s "$TMP/plot/p0-read-same.dat" ] || fail "no chart data for the same-size reads"
grep -q "^| fp16 | 128 | 64 | 32 | 8 | 1 | 131072 |" "$TMP/s.md" || fail "no row for the largest shape"
if command -v gnuplot >/dev/null 2>&1; then
    gnuplot -e "dir='$TMP/plot'; out='$TMP/chart.svg'" bench/plot_decode.gp 2>"$TMP/gp.log" || fail "gnuplot: $(cat "$TMP/gp.log")"
    grep -q "<svg" "$TMP/chart.svg" || fail "no SVG"
    ! grep -qi "warning\|error" "$TMP/gp.log" || fail "gnuplot said: $(cat "$TMP/gp.log")"
else
    echo "decode-selftest: chart SKIP (no gnuplot)"
fi
# the sweep (make decode-sweep): refusal without a GPU, its tables from a made-up CSV
out=$(BENCH_NVIDIA_SMI=/nonexistent/nvidia-smi bash bench/decode_sweep.sh --no-build 2>&1); rc=$?
[ $rc -eq 4 ] && grep -q "needs an NVIDIA GPU" <<<"$out" || fail "decode_sweep.sh without a GPU: exit $rc: $out"
out=$(bash bench/decode_sweep.sh --shapes X1 2>&1); rc=$?
[ $rc -eq 2 ] && grep -q "unknown shape 'X1'" <<<"$out" || fail "decode_sweep.sh --shapes X1: exit $rc: $out"
sw=$TMP/sweep.csv
{
    echo "gpu,commit,kind,variant,dtype,B,H,H_kv,N,N_kv,d,status,ms,gbps,note"
    echo "FAKE,abc,copy1g,write-flush,,,,,,,,ok,0.7,3000.0,1 GiB"
    for n in 4096 131072; do
        for op in copy read; do for fl in write read; do
            echo "FAKE,abc,$op,$fl-flush,fp16,1,32,8,1,$n,128,ok,0.02,1500.0,x bytes"
        done; done
        for v in base rule=resident rule=tiles rule=fill merge=kernel merge=pdl stages=2 stages=4 evict=first; do
            echo "FAKE,abc,lesson,$v,fp16,1,32,8,1,$n,128,ok,0.021,800.0,22 split(s) of 192 keys; 176 blocks"
        done
        echo "FAKE,abc,lesson,bc=alt,fp16,1,32,8,1,$n,128,failed-rc5,,,boom"
        echo "FAKE,abc,trace,trace,fp16,1,32,8,1,$n,128,ok,0.022,790.0,22 split(s)|176 blocks on 132 SMs"
        for S in 1 8 16 33 66 132 264; do echo "FAKE,abc,splits,S=$S,fp16,1,32,8,1,$n,128,ok,0.03,600.0,$S split(s) of 64 keys"; done
    done
} >"$sw"
python3 bench/decode_sweep_table.py --csv "$sw" --md "$TMP/sweep.md" >/dev/null || fail "decode_sweep_table.py"
for want in "## 1. Rooflines of the same size" "| fp16 d=128 B=1 H_kv=8 N_kv=4k | 16 |" "failed-rc5" "## 3. -DFD_SPLITS" \
    "21.0 \[22\], +0%" "## 4. Where a launch"; do
    grep -q "$want" "$TMP/sweep.md" || fail "the sweep's tables lack '$want'"
done
python3 -m py_compile bench/peers_decode.py bench/decode_summary.py bench/decode_sweep_table.py || fail "a python script does not compile"
echo "decode-selftest: ok (no-GPU refusals, summary table, chart$(command -v gnuplot >/dev/null || echo ' skipped'), sweep tables)"

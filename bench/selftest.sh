#!/usr/bin/env bash
# bench/selftest.sh: CPU-only checks of the benchmark scripts (part of `make test`).
#   1. without a GPU, bench.sh refuses with a message and a non-zero status;
#   2. bench.sh's grid logic (skips, OOM, the N beyond standard's reach, speedups), forward and
#      backward, run against fake binaries in a scratch copy under /tmp, which print made-up CSV
#      rows (a forward naive and tensor-core solution, a backward solution, both standards);
#   3. plot.sh draws every chart from that CSV (skipped when gnuplot is missing);
#   4. peers.py at least compiles.
# The fake numbers never leave /tmp.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
fail() { echo "bench-selftest: FAIL: $*" >&2; exit 1; }
TMP=$(mktemp -d /tmp/bench-selftest.XXXXXX)
trap '[ -n "${KEEP:-}" ] || rm -rf "$TMP"' EXIT

# 1. no GPU
out=$(BENCH_NVIDIA_SMI=/nonexistent/nvidia-smi bash bench/bench.sh --no-build 2>&1)
rc=$?
[ $rc -ne 0 ] || fail "bench.sh without a GPU exited 0"
grep -q "needs an NVIDIA GPU" <<<"$out" || fail "bench.sh without a GPU did not say what it needs: $out"

# 2. a scratch repo with fake binaries
mkdir -p "$TMP/repo/solutions/02-naive" "$TMP/repo/solutions/07-tensor-cores" "$TMP/repo/solutions/10-backward" \
    "$TMP/repo/docs/results"
cp -r bench "$TMP/repo/"
touch "$TMP/repo/solutions/02-naive/naive.cu" "$TMP/repo/solutions/07-tensor-cores/tc.cu"
echo "int attention_backward(const attn_bwd_args *a);" >"$TMP/repo/solutions/10-backward/bwd.cu"
mkdir -p "$TMP/repo/lessons/10-backward" && echo "runner := backward" >"$TMP/repo/lessons/10-backward/lesson.mk"
cat >"$TMP/nvidia-smi" <<'EOF'
#!/usr/bin/env bash
echo "FAKE GPU 8GB, 8192"
EOF
# fake harness: KIND=standard|naive|tc|stdbwd|bwd; made-up rates; standard's S and P against 8 GB
# (a small GPU, so that standard runs out of memory at N = 2048 to 4096 and the grid stays short)
cat >"$TMP/fake" <<'EOF'
#!/usr/bin/env bash
kind=$1; shift
B=8 H=12 N=1024 d=64 c=0 dt=fp32
while [ $# -gt 0 ]; do case $1 in
  -b) B=$2; shift;; -H) H=$2; shift;; -n) N=$2; shift;; -d) d=$2; shift;; --dtype) dt=$2; shift;;
  --causal) c=1;; --reps|--warmup|--timeout) shift;; esac; shift; done
if [ $kind = naive ] && [ $c = 1 ]; then echo "x: lesson 02 does not support --causal" >&2; exit 2; fi
if [ $kind = naive ] && [ $dt != fp32 ]; then echo "x: --dtype $dt is not supported by lesson 02" >&2; exit 2; fi
if [ $kind = bwd ] && [ $dt != fp32 ]; then echo "x: --dtype $dt is not supported by lesson 10" >&2; exit 2; fi
es=$([ $dt = fp32 ] && echo 4 || echo 2)
awk -v k=$kind -v B=$B -v H=$H -v N=$N -v d=$d -v c=$c -v es=$es -v dt=$dt 'BEGIN {
  bw = k == "stdbwd" || k == "bwd"
  f = (bw ? 2.5 : 1) * 4*B*H*N*N*d*(c ? 0.5 : 1); io = (bw ? 8 : 4)*B*H*N*d*es + 4*B*H*N
  if (k == "standard" || k == "stdbwd") { ws = B*H*N*N*(4+es); if (io + ws > 8e9) {
      printf "out of memory: standard attention needs %.0f MiB for S and P (... = %.0f bytes)\n", ws/1048576, ws > "/dev/stderr"; exit 7 }
    t = (bw ? 2.5 : 1) * 4*B*H*N*N*d / ((es == 4 ? 30 : 200) * 1e9) + B*H*N*N*(8+es) / 3e9; mem = io + ws }
  else { t = f / ((k == "naive" ? 0.9 : k == "bwd" ? 20 : 300) * 1e9); mem = io }
  print "HEADER"
  printf "%s,pass,0,0,%s,%d,%d,%d,%d,%d,%.4f,%.2f,1.0,%.0f,%d,%d,0,\n", k, dt, B, H, N, d, c, t, f/(t*1e-3)/1e12, mem, N, H }'
EOF
# the harness's own header (reference/harness/cli.h), decode columns after mem_bytes included, so that a
# change of the CSV row is seen here (bench.sh once read mem_bytes as the rest of the row)
HEADER=$(sed -n '/#define CSV_HEADER/,/^$/p' "$ROOT/reference/harness/cli.h" | grep -o '"[^"]*"' | tr -d '"\n')
case "$HEADER" in lesson,status,*,mem_bytes,N_kv,H_kv,ragged,kv_gbps) ;; *) fail "reference/harness/cli.h's CSV_HEADER changed ('$HEADER'): update the fake harness's row";; esac
sed -i "s/\"HEADER\"/\"$HEADER\"/" "$TMP/fake"
chmod +x "$TMP/nvidia-smi" "$TMP/fake"
printf '#!/usr/bin/env bash\nexec %s standard "$@"\n' "$TMP/fake" >"$TMP/repo/standard"
printf '#!/usr/bin/env bash\nexec %s naive "$@"\n' "$TMP/fake" >"$TMP/repo/solution2"
printf '#!/usr/bin/env bash\nexec %s tc "$@"\n' "$TMP/fake" >"$TMP/repo/solution7"
printf '#!/usr/bin/env bash\nexec %s stdbwd "$@"\n' "$TMP/fake" >"$TMP/repo/standard_backward"
printf '#!/usr/bin/env bash\nexec %s bwd "$@"\n' "$TMP/fake" >"$TMP/repo/solution10"
chmod +x "$TMP/repo/standard" "$TMP/repo/solution2" "$TMP/repo/solution7" "$TMP/repo/standard_backward" "$TMP/repo/solution10"
CSV="$TMP/repo/docs/results/bench-fake.csv"
# in three parts, as on a machine with a per-command time limit; d = 128 only up to N = 4096
# (BENCH_NMAX): the grid's logic beyond that is d = 64's, which has run it all. A cap of 400 ms
# (BENCH_CAP_MS) stops the naive series (76 ms at N = 512, x2 per step) inside the short grid.
export BENCH_CAP_MS=400
BENCH_NVIDIA_SMI="$TMP/nvidia-smi" bash "$TMP/repo/bench/bench.sh" --no-build --no-peers --no-plots \
    --d 64 --out "$CSV" >"$TMP/bench.log" 2>&1 || { cat "$TMP/bench.log"; fail "bench.sh on fake binaries failed"; }
for c in 0 1; do
    BENCH_NVIDIA_SMI="$TMP/nvidia-smi" BENCH_NMAX=4096 bash "$TMP/repo/bench/bench.sh" --no-build --no-peers --no-plots \
        --d 128 --causal $c --append --out "$CSV" >>"$TMP/bench.log" 2>&1 ||
        { cat "$TMP/bench.log"; fail "bench.sh --append failed"; }
done
[ "$(grep -c '^gpu,' "$CSV")" = 1 ] || fail "--append wrote a second header"
if grep -E "bench\.sh: line [0-9]+:|command not found|No such file" "$TMP/bench.log"; then fail "bash errors in bench.sh's output (above)"; fi
check() { awk -F, "NR > 1 && ($1) {n++} END {exit !n}" "$CSV" || { cat "$TMP/bench.log"; fail "$2"; }; }
check '$9 == 64' "no d = 64 rows"
check '$9 == 128 && $10 == 0' "no d = 128 non-causal rows after --append"
check '$9 == 128 && $10 == 1' "no d = 128 causal rows after --append"
for p in forward backward; do
    check '$20 == "'$p'" && $4 == "standard" && $11 == "oom" && $14 > 0' "no $p OOM row with the bytes standard needed"
    check '$20 == "'$p'" && $17 == "memory" && $6 == 1 && $8 == 512' "no $p memory sweep rows"
done
# the largest N at which the standard of PASS ran
std_nmax() { awk -F, -v p="$1" -v s="$2" 'NR > 1 && $20 == p && $4 == s && $11 == "ok" && $8 > n {n = $8} END {print n + 0}' "$CSV"; }
[ "$(std_nmax forward standard)" -gt 0 ] || fail "standard ran at no N"
check '$20 == "forward" && $4 == "07-tensor-cores" && $11 == "ok" && $8 > '"$(std_nmax forward standard)" "the flash solution did not run beyond standard's N"
check '$20 == "forward" && $4 == "07-tensor-cores" && $15 > 0' "no speedup over standard"
check '$4 == "02-naive" && $11 == "skipped"' "the slow solution was not skipped at large N"
check '$4 == "02-naive" && $10 == 1 && $11 == "unsupported"' "causal on a non-causal solution not recorded as unsupported"
check '$20 == "backward" && $4 == "10-backward" && $5 == "fp32" && $11 == "ok" && $8 > '"$(std_nmax backward standard)" "the backward solution did not run beyond the standard backward's N"
check '$20 == "backward" && $4 == "10-backward" && $15 > 0' "no backward speedup over the standard backward"
none() { awk -F, "NR > 1 && ($1) {n++} END {exit n > 0}" "$CSV" || { cat "$TMP/bench.log"; fail "$2"; }; }
none '$4 == "10-backward" && $20 != "backward"' "a backward solution was timed in the forward pass"
none '$4 == "07-tensor-cores" && $20 != "forward"' "a forward solution was timed in the backward pass"
n=$(awk -F, 'NR == 1 {print NF}' "$CSV")
awk -F, -v n="$n" 'NF != n {exit 1}' "$CSV" || fail "rows with a different number of fields than the header"

# PyTorch rows as bench/peers.py wrote them before it set lineterminator: "\r\n" (the charts
# left them out, since the pass column then read "forward\r")
for p in forward backward; do
    for n in 1024 2048; do
        printf 'Fake GPU,2026-01-01T00:00Z,x,torch-flash,fp16,%d,32,%d,64,0,ok,%s,100.0,1000,,10,grid,85520809984,fake; torch 0,%s\r\n' \
            $((16384 / n)) $n "$([ $n = 1024 ] && echo 0.5 || echo 1.5)" $p >>"$CSV"
    done
done

# 3. charts
if command -v gnuplot >/dev/null; then
    bash bench/plot.sh "$CSV" "$TMP/out" >"$TMP/plot.log" 2>&1 || { cat "$TMP/plot.log"; fail "plot.sh failed"; }
    for s in time-d64 backward-time-d64; do
        grep -q "<title>torch-flash fp16</title>" "$TMP/out/bench-fake-$s.svg" ||
            fail "bench-fake-$s.svg has no torch-flash series: rows ending in \\r\\n were left out"
    done
    for s in time-d64 time-d128 time-d64-causal time-d128-causal memory ladder backward-time-d64 \
        backward-time-d128 backward-time-d64-causal backward-time-d128-causal backward-memory; do
        f="$TMP/out/bench-fake-$s.svg"
        [ -s "$f" ] && grep -q "<svg" "$f" || { cat "$TMP/plot.log"; fail "$f was not drawn"; }
    done
    if grep -qi "warning\|error" "$TMP/plot.log"; then cat "$TMP/plot.log"; fail "gnuplot complained"; fi
else
    echo "bench-selftest: gnuplot not installed, charts not checked"
fi

# 4. peers.py parses
PYTHONPYCACHEPREFIX="$TMP/pycache" python3 -m py_compile "$ROOT/bench/peers.py" 2>&1 ||
    fail "bench/peers.py does not compile"
echo "bench-selftest: ok ($(($(wc -l <"$CSV") - 1)) fake rows, charts drawn)"

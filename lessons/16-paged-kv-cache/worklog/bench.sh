#!/usr/bin/env bash
# lessons/16-paged-kv-cache/worklog/bench.sh: lesson 16's paged decode at page sizes 16, 64 and 256 against
# lesson 12 on the same cache stored contiguously and PyTorch's paged FlexAttention, in one run; writes a
# Markdown table.
#
#   bash lessons/16-paged-kv-cache/worklog/bench.sh [options]      (from the repository root; or make bench-16 ARGS='...')
# Options:
#   --pages "16 64 256"      page sizes (keys per page)
#   --shapes "B:H_kv:N_kv:d ..."  decoding steps, H = 32 query heads, N = 1 query per sequence, fp16; default
#                            lesson 12's shapes whose K and V hold at least 256 MiB:
#                            "1:8:131072:128 4:8:32768:128 16:8:16384:128 64:8:4096:128 16:8:32768:64"
#   --reps R                 timed launches per run (default 20)
#   --peer-shapes "..."      the shapes PyTorch is timed on (default: all; each shape and page size is
#                            one torch.compile, some seconds each)
#   --contiguous             also lesson 16 with its cache contiguous (the paged kernel's other path)
#   --variants "A B+C ..."   also the solution with worklog variants (worklog/variants/*.var), each built with
#                            make variant and timed at every shape and page size (a variant whose name has
#                            "scatter" only at B = 1 with at least 8192 pages: see its what: line), in a second table
#   --no-build --no-peers
#   --out FILE.md            default docs/results/lessons/serving-16-<gpu>.md
# Per shape, in one run: ./solution12 (contiguous [B, H_kv, N_kv, d]), ./solution16 --paged P for each P
# (the same K and V in a pool of pages of P keys that the harness shuffles, in the order of a block
# table), both `--bench-only --csv` (CUDA events, warm-up, median of R launches, L2 flushed before each:
# reference/harness/runner_device.cu), and peer_flex.py (PyTorch's PagedAttention over FlexAttention, timed
# the same way). Every timing goes to build/bench16/bench.csv; the table gives per shape and page size the
# times, K and V's bandwidth, paged / contiguous (lesson 12's time over lesson 16's: the lesson's targets,
# >= 0.95 at P = 64 and 256, >= 0.85 at P = 16) and lesson 16 against FlexAttention (its time over lesson
# 16's: >= 1.2). Exit status: 0, 4 without a GPU, 5 when a build fails.
set -uo pipefail
cd "$(dirname "$0")/../../.."

PAGES="16 64 256" SHAPES="1:8:131072:128 4:8:32768:128 16:8:16384:128 64:8:4096:128 16:8:32768:64"
REPS=20 BUILD=1 PEERS=1 CONTIG=0 OUT="" PEER_SHAPES="" VARIANTS=""
while [ $# -gt 0 ]; do
    case "$1" in
    --pages) PAGES=${2:?--pages needs page sizes}; shift ;;
    --shapes) SHAPES=${2:?--shapes needs B:H_kv:N_kv:d items}; shift ;;
    --peer-shapes) PEER_SHAPES=${2:?--peer-shapes needs B:H_kv:N_kv:d items}; shift ;;
    --reps) REPS=${2:?--reps needs a count}; shift ;;
    --contiguous) CONTIG=1 ;;
    --variants) VARIANTS=${2:?--variants needs variant names}; shift ;;
    --no-build) BUILD=0 ;;
    --no-peers) PEERS=0 ;;
    --out) OUT=${2:?--out needs a file}; shift ;;
    -h | --help) sed -n '2,30p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
    esac
    shift
done
for s in $SHAPES ${PEER_SHAPES}; do
    [[ "$s" =~ ^[0-9]+:[0-9]+:[0-9]+:(64|128)$ ]] || { echo "bench.sh: shape '$s' is not B:H_kv:N_kv:d with d 64 or 128" >&2; exit 2; }
done
PEER_SHAPES=${PEER_SHAPES:-$SHAPES}

gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader -i 0 2>/dev/null | head -n1 | sed 's/^ *//; s/ *$//')
[ -n "$gpu" ] || { echo "bench.sh: needs an NVIDIA GPU (nvidia-smi lists none)" >&2; exit 4; }
slug=$(echo "$gpu" | tr 'A-Z' 'a-z' | sed -E 's/[^a-z0-9]+/-/g; s/^-+//; s/-+$//')
OUT=${OUT:-docs/results/lessons/serving-16-$slug.md}
DIR=build/bench16
CSV=$DIR/bench.csv
mkdir -p "$DIR" "$(dirname "$OUT")"
COMMIT=${GIT_COMMIT:-$(git describe --always --dirty 2>/dev/null || echo unknown)}
DATE=$(date -u +%Y-%m-%dT%H:%MZ)

if [ "$BUILD" = 1 ]; then
    echo "== building ./solution12 ./solution16"
    ${MAKE:-make} --no-print-directory solution12 solution16 >"$DIR/build.log" 2>&1 || { tail -n 30 "$DIR/build.log"; exit 5; }
fi
for v in $VARIANTS; do
    echo "== building the solution + $v"
    ${MAKE:-make} --no-print-directory variant N=16 OUT="$DIR/v-$v" VARIANTS="$v" >>"$DIR/build.log" 2>&1 ||
        { tail -n 30 "$DIR/build.log"; exit 5; }
done
echo "method,page,B,H,H_kv,N_kv,d,status,ms,kv_gbps,note" >"$CSV"

# run METHOD BINARY PAGE B HKV NKV D: one --bench-only run, its row in the CSV
run() {
    local method=$1 bin=$2 page=$3 B=$4 hkv=$5 nkv=$6 d=$7 out rc row paged=()
    [ "$page" = 0 ] || paged=(--paged "$page")
    out=$(timeout 600 "$bin" --bench-only --csv -b "$B" -H 32 --kv-heads "$hkv" -n 1 --kv-seq "$nkv" -d "$d" --dtype fp16 \
        --reps "$REPS" --warmup 3 --timeout 120 "${paged[@]}" 2>"$DIR/stderr" </dev/null)
    rc=$?
    row=$(printf '%s\n' "$out" | awk -F, 'NF >= 18 && $2 != "status"' | tail -n1)
    if [ $rc = 0 ] && [ -n "$row" ]; then
        echo "$method,$page,$B,32,$hkv,$nkv,$d,ok,$(cut -d, -f11 <<<"$row"),$(cut -d, -f18 <<<"$row")," >>"$CSV"
    else
        echo "$method,$page,$B,32,$hkv,$nkv,$d,failed-rc$rc,,,$(tail -n1 "$DIR/stderr" | tr ',' ';' | cut -c1-150)" >>"$CSV"
    fi
    tail -n1 "$CSV"
}

T0=$SECONDS
for s in $SHAPES; do
    IFS=: read -r B hkv nkv d <<<"$s"
    run 12-contiguous ./solution12 0 "$B" "$hkv" "$nkv" "$d"
    [ "$CONTIG" = 1 ] && run 16-contiguous ./solution16 0 "$B" "$hkv" "$nkv" "$d"
    for p in $PAGES; do
        run 16-paged ./solution16 "$p" "$B" "$hkv" "$nkv" "$d"
        for v in $VARIANTS; do
            [[ "$v" == *scatter* ]] && { [ "$B" != 1 ] || [ $((nkv / p)) -lt 8192 ]; } && continue
            run "16-paged+$v" "$DIR/v-$v" "$p" "$B" "$hkv" "$nkv" "$d"
        done
    done
done
echo "== harness runs: $((SECONDS - T0)) s"
if [ "$PEERS" = 1 ]; then
    if python3 -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" >/dev/null 2>&1; then
        spec=$(for s in $PEER_SHAPES; do IFS=: read -r B hkv nkv d <<<"$s"; printf '%s,32,%s,%s,%s;' "$B" "$hkv" "$nkv" "$d"; done)
        python3 lessons/16-paged-kv-cache/worklog/peer_flex.py --shapes "$spec" --pages "$(echo $PAGES | tr ' ' ',')" \
            --csv "$CSV" --reps "$REPS" || echo "   peer_flex.py failed (rc $?): the harness rows are kept"
    else
        echo "== PyTorch skipped: python3 with a CUDA-enabled torch is not importable"
    fi
fi
TORCH=$(python3 -c "import torch; print(torch.__version__)" 2>/dev/null || echo "not run")

python3 - "$CSV" "$OUT" "$gpu" "$DATE" "$COMMIT" "$REPS" "$TORCH" "$PAGES" "$SHAPES" "$VARIANTS" <<'EOF'
import csv, sys
path, out, gpu, date, commit, reps, torch_v, pages, shapes, variants = sys.argv[1:]
rows = list(csv.DictReader(open(path)))
def get(method, page, B, hkv, nkv, d):
    for r in rows:
        if (r["method"], r["page"], r["B"], r["H_kv"], r["N_kv"], r["d"]) == (method, str(page), B, hkv, nkv, d):
            return r
def cell(r):
    if not r: return "not run"
    if r["status"] != "ok": return r["status"] + (": " + r["note"] if r["note"] else "")
    return "%.1f us (%.0f GB/s)" % (1000 * float(r["ms"]), float(r["kv_gbps"]))
def ratio(a, b):  # a's time over b's: how many times faster b is
    if not a or not b or a["status"] != "ok" or b["status"] != "ok": return ""
    return "%.2f" % (float(a["ms"]) / float(b["ms"]))
L = ["# Lesson 16 on the %s: paged decode against lesson 12 and PyTorch's paged FlexAttention" % gpu, "",
     "Measured by `bash lessons/16-paged-kv-cache/worklog/bench.sh` (`make bench-16`) on %s, commit %s; torch %s. "
     "Decoding steps: N = 1 query per sequence, H = 32 query heads, fp16, every sequence N_kv keys. Every time: "
     "CUDA events, warm-up, the median of %s launches with L2 flushed before each (the harness's "
     "`--bench-only`; PyTorch timed the same way, `peer_flex.py`); every timing in `build/bench16/bench.csv` of "
     "that run. Bandwidth: the bytes of K and V over the time." % (date, commit, torch_v, reps), "",
     "- lesson 12: `./solution12 --bench-only -b B -H 32 --kv-heads H_kv -n 1 --kv-seq N_kv -d d --dtype fp16`, "
     "K and V contiguous, [B, H_kv, N_kv, d];",
     "- lesson 16: `./solution16` with the same options and `--paged P`: the same cache in a pool of pages of P "
     "keys, [num_pages, P, H_kv, d], the pages of each sequence shuffled in the pool, read through the block table;",
     "- FlexAttention: `torch.compile(flex_attention)` with a block mask converted by "
     "`torch.nn.attention.experimental._paged_attention.PagedAttention` (its pages shuffled too).", "",
     "paged / contiguous: lesson 12's time over lesson 16's (the targets: at least 0.95 at P = 64 and 256, 0.85 "
     "at P = 16); lesson 16 / Flex: FlexAttention's time over lesson 16's (the target: at least 1.2).", "",
     "| B | H_kv | N_kv | d | K, V | P | lesson 12, contiguous | lesson 16, paged | paged / contiguous | "
     "FlexAttention, paged | lesson 16 / Flex |", "|---|---|---|---|---|---|---|---|---|---|---|"]
for s in shapes.split():
    B, hkv, nkv, d = s.split(":")
    mib = 2 * int(B) * int(hkv) * int(nkv) * int(d) * 2 / 2**20
    l12 = get("12-contiguous", 0, B, hkv, nkv, d)
    c16 = get("16-contiguous", 0, B, hkv, nkv, d)
    if c16:
        L.append("| %s | %s | %s | %s | %.0f MiB | contiguous | %s | %s | %s | | |" % (B, hkv, nkv, d, mib, cell(l12), cell(c16), ratio(l12, c16)))
    for p in pages.split():
        l16 = get("16-paged", p, B, hkv, nkv, d)
        flex = get("torch-flex-paged", p, B, hkv, nkv, d)
        L.append("| %s | %s | %s | %s | %.0f MiB | %s | %s | %s | %s | %s | %s |" % (
            B, hkv, nkv, d, mib, p, cell(l12), cell(l16), ratio(l12, l16), cell(flex), ratio(flex, l16)))
if variants.split():
    L += ["", "Worklog variants (`--variants`, `lessons/16-paged-kv-cache/worklog/variants/`), in the same run: each "
          "cell is the time and lesson 12's time over it (as paged / contiguous above).", "",
          "| B | H_kv | N_kv | d | P | lesson 16 | " + " | ".join("+" + v for v in variants.split()) + " |",
          "|---|---|---|---|---|---|" + "---|" * len(variants.split())]
    for s in shapes.split():
        B, hkv, nkv, d = s.split(":")
        l12 = get("12-contiguous", 0, B, hkv, nkv, d)
        for p in pages.split():
            cells = []
            for r in [get("16-paged", p, B, hkv, nkv, d)] + [get("16-paged+" + v, p, B, hkv, nkv, d) for v in variants.split()]:
                cells.append("%.1f us (%s)" % (1000 * float(r["ms"]), ratio(l12, r)) if r and r["status"] == "ok" else (cell(r) if r else "-"))
            L.append("| %s | %s | %s | %s | %s | %s |" % (B, hkv, nkv, d, p, " | ".join(cells)))
open(out, "w").write("\n".join(L) + "\n")
print("\n".join(L))
print("\n== the table: " + out)
EOF

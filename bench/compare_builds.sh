#!/usr/bin/env bash
# bench/compare_builds.sh: two builds of the solutions timed against each other in one run, so a
# change that should not cost speed (a refactor, a new header) is checked to do so (make compare).
#
#   bash bench/compare_builds.sh --before DIR --after DIR [options]
#   bash bench/compare_builds.sh --build-before REV [options]   (needs git: builds REV first)
#
# DIR holds solutionN binaries (DIR = . for the current tree's). --build-before REV exports that
# revision with `git archive` into build/compare/REV and builds its solutions there with the same
# GPU_ARCH; --after defaults to the current tree (built first with make solutions).
# Options:
#   --lessons "2 8 12"  which solutions (default: every solution binary found in both builds)
#   --grids             also the grids, from each lesson's descriptor: a 16-bit lesson on the
#                       course grid (H d = 2048, B N = 16384, N 1k 4k 16k, each d, causal where
#                       it has it, in its first dtype), other lessons at N = 1024 alone, then the
#                       second dtype at the largest d; a decode lesson on 17 decode shapes
#                       (H = 32, d = 128, fp16; B x H_kv of 1x8, 16x8, 64x8, 16x32; N_kv 4k, 32k,
#                       128k; one query; then 8, 16 and 32 queries, d = 64 and bf16 at 16x8,
#                       32k: every row layout of the kernel)
#   --shape "ARGS"      time these shape options instead (repeatable; "" is the bench shape),
#                       e.g. to finish a grid that an earlier run left part of
#   --rounds R          each (shape, build) is timed R times, alternating before and after
#                       (default 3); a row shows the median of the R medians
#   --reps N            timed launches per run (default 50)
#   --out FILE.md       the table as Markdown (default: build/compare-<gpu>.md)
# Every run is `solutionN --bench-only --csv ... --reps N`: CUDA events, warm-up, L2 flushed
# before each launch (the harness), median reported. The bench shape is the lesson's default
# (no shape options). A row: lesson, shape, before ms, after ms, after / before; rows beyond
# +-2% are marked. Exit status 0 when every pair ran, 1 when a run failed, 2 bad options, 4 no GPU.
set -uo pipefail
cd "$(dirname "$0")/.."

BEFORE="" AFTER="" BUILD_REV="" LESSONS="" GRIDS=0 ROUNDS=3 REPS=50 OUT="" SHAPES=() SHAPES_SET=0
usage() { sed -n '2,26p' "$0" | sed 's/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
    case "$1" in
    --before) BEFORE="${2:?--before needs a directory}"; shift ;;
    --after) AFTER="${2:?--after needs a directory}"; shift ;;
    --build-before) BUILD_REV="${2:?--build-before needs a git revision}"; shift ;;
    --lessons) LESSONS="${2:?--lessons needs lesson numbers}"; shift ;;
    --grids) GRIDS=1 ;;
    --shape) [ $# -ge 2 ] || { echo "compare_builds.sh: --shape needs shape options (\"\" for the bench shape)" >&2; exit 2; }
        SHAPES+=("$2"); SHAPES_SET=1; shift ;;
    --rounds) ROUNDS="${2:?}"; shift
        [[ $ROUNDS =~ ^[0-9]+$ ]] && [ "$ROUNDS" -ge 1 ] && [ "$ROUNDS" -le 50 ] || { echo "compare_builds.sh: --rounds takes 1..50" >&2; exit 2; } ;;
    --reps) REPS="${2:?}"; shift
        [[ $REPS =~ ^[0-9]+$ ]] && [ "$REPS" -ge 1 ] && [ "$REPS" -le 100000 ] || { echo "compare_builds.sh: --reps takes 1..100000" >&2; exit 2; } ;;
    --out) OUT="${2:?--out needs a file}"; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "compare_builds.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
    esac
    shift
done
if [ -n "$BUILD_REV" ]; then
    [ -z "$BEFORE" ] || { echo "compare_builds.sh: --before and --build-before exclude each other" >&2; exit 2; }
    command -v git >/dev/null && git rev-parse --verify -q "$BUILD_REV^{commit}" >/dev/null ||
        { echo "compare_builds.sh: '$BUILD_REV' is no git revision here (--build-before needs git and the repository)" >&2; exit 2; }
    BEFORE="build/compare/$(git rev-parse --short "$BUILD_REV")"
    rm -rf "$BEFORE" && mkdir -p "$BEFORE" && git archive "$BUILD_REV" | tar -x -C "$BEFORE" &&
        make -C "$BEFORE" -s -j"$(nproc)" solutions ${GPU_ARCH:+GPU_ARCH=$GPU_ARCH} >/dev/null ||
        { echo "compare_builds.sh: building $BUILD_REV in $BEFORE failed" >&2; exit 1; }
fi
[ -n "$BEFORE" ] || { echo "compare_builds.sh: give --before DIR or --build-before REV (see --help)" >&2; exit 2; }
if [ -z "$AFTER" ]; then
    AFTER=.
    make -s -j"$(nproc)" solutions >/dev/null || { echo "compare_builds.sh: make solutions failed" >&2; exit 1; }
fi
for dir in "$BEFORE" "$AFTER"; do [ -d "$dir" ] || { echo "compare_builds.sh: no directory $dir" >&2; exit 2; }; done
if ! gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n1) || [ -z "$gpu" ]; then
    echo "compare_builds.sh needs an NVIDIA GPU (nvidia-smi found none): it times both builds." >&2; exit 4
fi
slug=$(echo "$gpu" | tr 'A-Z' 'a-z' | sed -E 's/[^a-z0-9]+/-/g; s/^-|-$//g')
OUT=${OUT:-build/compare-$slug.md}
if [ -z "$LESSONS" ]; then
    for f in "$AFTER"/solution[0-9]*; do
        n=${f##*/solution}; [[ $n =~ ^[0-9]+$ ]] && [ -x "$BEFORE/solution$n" ] && [ "$n" -ge 2 ] && LESSONS="$LESSONS $n"
    done
fi
LESSONS=$(echo $LESSONS | tr ' ' '\n' | sort -n | tr '\n' ' ')

# One timed run: prints the median ms, or a status word when the run did not time.
time_one() { # BIN ARGS...
    local out ms
    out=$(timeout 300 "$@" --bench-only --csv --reps "$REPS" 2>/dev/null | tail -n1)
    ms=$(awk -F, 'NR==1 && $2 == "pass" { print $11 }' <<<"$out")
    if [ -n "$ms" ]; then echo "$ms"; else echo "failed:$(cut -d, -f2 <<<"$out")"; fi
}
median() { tr ' ' '\n' | grep -E '^[0-9.]+$' | sort -g | awk '{ v[NR] = $1 } END { if (NR) print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'; }

# a lesson's facts, from its descriptor (reference/tools/lessons.py KEY: "N name value" lines)
fact() { python3 reference/tools/lessons.py "$2" | awk -v n="$1" '$1 == n { $1 = ""; $2 = ""; sub(/^ +/, ""); print }'; }
shapes_of() { # LESSON: one shape per line ("" = the bench shape)
    if [ "$SHAPES_SET" = 1 ]; then printf '%s\n' "${SHAPES[@]}"; return 0; fi
    echo ""
    [ "$GRIDS" = 1 ] || return 0
    local dims causal dtypes runner
    dims=$(fact "$1" head_dims) causal=$(fact "$1" causal) dtypes=$(fact "$1" dtypes) runner=$(fact "$1" runner)
    if [ "$runner" = decode ]; then
        for cfg in "1 8" "16 8" "64 8" "16 32"; do for nkv in 4096 32768 131072; do
            set -- $cfg; echo "-b $1 -H 32 --kv-heads $2 -n 1 --kv-seq $nkv -d 128 --dtype fp16"
        done; done
        # each row layout of the kernel (G N rows: 1, 2 or 4 row warps, two m-tiles), d = 64, bf16
        for n in 8 16 32; do echo "-b 16 -H 32 --kv-heads 8 -n $n --kv-seq 32768 -d 128 --dtype fp16"; done
        echo "-b 16 -H 32 --kv-heads 8 -n 1 --kv-seq 32768 -d 64 --dtype fp16"
        echo "-b 16 -H 32 --kv-heads 8 -n 1 --kv-seq 32768 -d 128 --dtype bf16"
        return 0
    fi
    # the course grid (N 1k, 4k, 16k) for a 16-bit lesson, N = 1024 for the others; every head
    # dimension, causal where the lesson has it, then its second dtype at the largest d
    local ns=1024 cs=0 d N c
    [ "${dtypes%% *}" = fp16 ] && ns="1024 4096 16384"
    [ "$causal" = yes ] && cs="0 1"
    for d in $dims; do for N in $ns; do for c in $cs; do
        echo "-b $((16384 / N)) -H $((2048 / d)) -n $N -d $d --dtype ${dtypes%% *}$([ $c = 1 ] && echo ' --causal')"
    done; done; done
    [ "${dtypes#* }" != "$dtypes" ] && echo "-b 16 -H $((2048 / ${dims##* })) -n 1024 -d ${dims##* } --dtype $(cut -d' ' -f2 <<<"$dtypes")"
    return 0
}

mkdir -p "$(dirname "$OUT")"
fail=0 rows=()
printf '%-4s %-62s %10s %10s %8s\n' lesson shape "before ms" "after ms" ratio
for n in $LESSONS; do
    while IFS= read -r shape; do
        b=() a=()
        for ((r = 0; r < ROUNDS; r++)); do
            b+=("$(time_one "$BEFORE/solution$n" $shape)")
            a+=("$(time_one "$AFTER/solution$n" $shape)")
        done
        mb=$(echo "${b[*]}" | median) ma=$(echo "${a[*]}" | median)
        if [ -z "$mb" ] || [ -z "$ma" ]; then
            ratio="failed (${b[0]} / ${a[0]})"; fail=1
        else
            ratio=$(awk -v x="$ma" -v y="$mb" 'BEGIN { r = x / y; printf "%.3f%s", r, (r > 1.02 || r < 0.98) ? " *" : "" }')
        fi
        label=${shape:-bench shape}
        printf '%-4s %-62s %10s %10s %8s\n' "$n" "$label" "${mb:--}" "${ma:--}" "$ratio"
        rows+=("| $n | \`$label\` | ${mb:--} | ${ma:--} | $ratio |")
    done < <(shapes_of "$n")
done
{
    echo "# Two builds of the solutions, timed in one run"
    echo
    echo "GPU: $gpu. Date (UTC): $(date -u +%Y-%m-%dT%H:%MZ). Before: \`$BEFORE\`$([ -n "$BUILD_REV" ] && echo " ($BUILD_REV)"); after: \`$AFTER\`."
    echo "Command: \`bash bench/compare_builds.sh ...\` ($ROUNDS rounds alternating before and after, each the median of $REPS launches with the L2 flushed; a row shows the median of the rounds; * marks a ratio beyond +-2%)."
    echo
    echo "| lesson | shape | before ms | after ms | after / before |"
    echo "|---|---|---|---|---|"
    printf '%s\n' "${rows[@]}"
} > "$OUT"
echo "table: $OUT"
exit $fail

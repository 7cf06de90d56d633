#!/usr/bin/env bash
# Fails when a solution's source, or a reference/include header it includes, no longer
# matches the fingerprint (reference/tools/source_hash.py) recorded by the newest `make results`
# file in docs/results/ (or has no row there): kernel changes, the shared PTX wrappers'
# too, must come with a GPU run. CI has no GPU, so this is how it knows.
set -u
newest=""; newest_date=""
for f in docs/results/*.csv; do
    [ -e "$f" ] || continue
    grep -q '^solution,source_sha256' "$f" || continue
    d=$(sed -n 's/^# date: //p' "$f")
    if [[ -z "$newest" || "$d" > "$newest_date" ]]; then newest=$f; newest_date=$d; fi
done
if [ -z "$newest" ]; then
    echo "results freshness: no docs/results/<gpu>.csv yet: run 'make results' on a GPU"; exit 1
fi
fail=0
# every solution's source, then their fingerprints in one start of python (in the same order)
srcs=()
for dir in solutions/[0-9][0-9]-*/; do srcs+=("$(ls "$dir"*.c "$dir"*.cu 2>/dev/null | head -n1)"); done
mapfile -t shas < <(python3 reference/tools/source_hash.py "${srcs[@]}")
[ ${#shas[@]} = ${#srcs[@]} ] || { echo "results freshness: reference/tools/source_hash.py failed"; exit 1; }
i=0
for src in "${srcs[@]}"; do
    name=$(basename "$(dirname "$src")")
    sha=${shas[$i]}; i=$((i + 1))
    row=$(grep -E "^$name," "$newest" | tail -n1)
    if [ -z "$row" ]; then
        echo "results freshness: $name has no row in $newest: run 'make results' on a GPU"; fail=1
    elif [ "$(cut -d, -f2 <<<"$row")" != "$sha" ]; then
        echo "results freshness: $src (or a reference/include header it includes) changed since the GPU run in $newest ($(cut -d, -f2 <<<"$row") != $sha): run 'make results' on a GPU"; fail=1
    elif [ "$(cut -d, -f3 <<<"$row")" != pass ]; then
        echo "results freshness: $name did not pass in $newest"; fail=1
    fi
done
[ $fail = 0 ] && echo "results freshness: every solution matches $newest ($newest_date)"
exit $fail

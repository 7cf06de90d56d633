#!/usr/bin/env bash
# docs/build.sh [OUT]: render the course site (default OUT: docs/site) with pandoc.
#
# Pages, in reading order (previous/next follow it):
#   index.html        from docs/index.md
#   NN-name.html      from lessons/NN-name/README.md, every lesson that exists, by NN
#   NN-name-x.html    from any other lessons/NN-name/X.md (X.md -> -x), and NN-name-worklog.html
#                     from lessons/NN-name/worklog/README.md (the folder of the lesson's
#                     experiments): a page of that lesson, linked from its page, not in the
#                     top navigation
#   results.html      from docs/results.md + docs/results/*.csv (+ charts)
# Filters (docs/filters/): include.lua pulls code from the real files, site.lua
# sets titles, navigation, rewrites links and names code blocks' languages for the
# highlighter (sh as bash, text unhighlighted), results.lua fills the results page.
# Everything is local: math is MathML, CSS is one file, no scripts, no network.
#
# Environment: DOCS_ROOT (repository to build, default: the one holding this
# script), PANDOC (default pandoc), DOCS_ONLY (a regular expression of page ids: render
# only those pages, with the whole site's navigation, and draw no chart; for a test of one
# page, tests/checks/new_lesson_test.sh). Exits non-zero if any page fails to build
# (unresolved include, unreadable file, bad template...). Warnings (a link to a
# missing file, math pandoc could not convert) are printed and also left in
# OUT/build.log for tests/docs/check_site.sh.
set -euo pipefail

ROOT=$(cd "${DOCS_ROOT:-$(dirname "${BASH_SOURCE[0]}")/..}" && pwd)
OUT=${1:-$ROOT/docs/site}
PANDOC=${PANDOC:-pandoc}
DOCS=$ROOT/docs
SITE_TITLE="FlashAttention from scratch"

command -v "$PANDOC" >/dev/null || { echo "docs: pandoc not found (apt-get install pandoc)" >&2; exit 2; }
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
# Start clean so a renamed or removed lesson leaves no stale page behind.
rm -rf "$OUT"/*.html "$OUT/assets" "$OUT/style.css" "$OUT/build.log" "$OUT/screenshot-lesson.png"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

# Title of a markdown file: its first "# " heading outside code fences.
title_of() {
  awk '/^ {0,3}(```|~~~)/ { fence = !fence; next }
       !fence && /^# / { sub(/^# +/, ""); sub(/ +#* *$/, ""); print; exit }' "$1"
}

# Page id of an extra Markdown file of a lesson: <lesson>-<file name, lower case, no .md>.
# tests/docs/check_site.py derives the same id; keep the two in step.
extra_id() { printf '%s-%s' "$1" "$(basename "$2" .md | tr 'A-Z' 'a-z' | sed 's/[^a-z0-9-]/-/g')"; }

# The page list: id <TAB> source <TAB> title <TAB> parent page id (empty for the main pages).
PAGES=$WORK/pages.tsv
printf 'index\tdocs/index.md\t%s\t\n' "$(title_of "$DOCS/index.md")" > "$PAGES"
shopt -s nullglob
for dir in "$ROOT"/lessons/[0-9][0-9]-*/; do
  dir=${dir%/}; name=${dir##*/}
  if [[ ! -f $dir/README.md ]]; then
    echo "[WARNING] lessons/$name has no README.md: no page for it" | tee -a "$WORK/log" >&2
    continue
  fi
  t=$(title_of "$dir/README.md"); [[ -n $t ]] || t=$name
  printf '%s\tlessons/%s/README.md\t%s\t\n' "$name" "$name" "$t" >> "$PAGES"
  # its other pages: any other X.md, and its worklog (the folder of its experiments, worklog/README.md)
  for md in "$dir"/*.md "$dir"/worklog/README.md; do
    [[ $md == "$dir/README.md" || ! -f $md ]] && continue
    f=${md#"$dir"/}; id=$(extra_id "$name" "${f%/README.md}")
    t=$(title_of "$md")
    printf '%s\tlessons/%s/%s\t%s\t%s\n' "$id" "$name" "$f" "${t:-$id}" "$name" >> "$PAGES"
  done
done
printf 'results\tdocs/results.md\t%s\t\n' "$(title_of "$DOCS/results.md")" >> "$PAGES"

# Results: every CSV, every committed chart; a TFLOP/s chart per CSV when gnuplot is here.
csvs=(); svgs=()
for f in "$DOCS"/results/*.csv; do csvs+=("docs/results/${f##*/}"); done
for f in "$DOCS"/results/*.svg; do svgs+=("docs/results/${f##*/}"); done
mkdir -p "$OUT/assets/docs/results" "$OUT/assets/results"
for f in "${svgs[@]}"; do cp "$ROOT/$f" "$OUT/assets/$f"; done
# A CSV with committed charts (docs/results/<name>-*.svg, e.g. make bench's) gets those.
for csv in "${csvs[@]}"; do
  [[ -z ${DOCS_ONLY:-} ]] || break
  name=$(basename "$csv" .csv)
  has_charts=("$DOCS/results/$name"-*.svg)
  [[ ${#has_charts[@]} -eq 0 ]] || continue
  if command -v gnuplot >/dev/null; then
    bash "$DOCS/results-chart.sh" "$ROOT/$csv" "$OUT/assets/results/$name-tflops.svg" \
      || echo "docs: $csv: no chart drawn" >&2
  else
    echo "docs: gnuplot not installed: no chart for $csv" >&2
  fi
done

cp "$DOCS/style.css" "$OUT/style.css"

status=0
while IFS=$'\t' read -r id src title _parent; do
  [[ -z ${DOCS_ONLY:-} || $id =~ ^(${DOCS_ONLY})$ ]] || continue
  if DOCS_ROOT=$ROOT DOCS_OUT=$OUT DOCS_SRC=$src DOCS_PAGES=$PAGES \
     DOCS_RESULTS_CSV=$(printf '%s\n' "${csvs[@]}") DOCS_RESULTS_SVG=$(printf '%s\n' "${svgs[@]}") \
     "$PANDOC" "$ROOT/$src" \
       --from commonmark_x --to html5 --standalone --wrap=none \
       --template "$DOCS/template.html" \
       --mathml --toc --toc-depth=3 \
       --syntax-definition "$DOCS/syntax/cuda.xml" \
       --lua-filter "$DOCS/filters/include.lua" \
       --lua-filter "$DOCS/filters/site.lua" \
       --lua-filter "$DOCS/filters/results.lua" \
       --metadata site-title="$SITE_TITLE" \
       --output "$OUT/$id.html" 2> "$WORK/err"; then
    echo "docs: $src -> ${OUT#$ROOT/}/$id.html"
  else
    echo "docs: FAILED $src" >&2
    status=1
  fi
  if [[ -s $WORK/err ]]; then
    sed "s|^|  $src: |" "$WORK/err" >&2
    { echo "== $src"; cat "$WORK/err"; } >> "$WORK/log"
  fi
done < "$PAGES"

touch "$WORK/log"; cp "$WORK/log" "$OUT/build.log"
if [[ $status -ne 0 ]]; then echo "docs: some pages failed to build (see above)" >&2; exit 1; fi
echo "docs: open $OUT/index.html"

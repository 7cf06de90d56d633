#!/usr/bin/env bash
# tests/docs/selftest.sh: show that docs/build.sh + check_site.py accept a good site
# and catch each kind of breakage, on a throwaway tree made of this checkout's docs
# tooling and the fixture lessons in tests/docs/fixture/ (never the real lessons/).
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT
fails=0 n=0

# A fresh tree: docs tooling (no site, no results) + fixture lessons/solutions.
tree() {
  local t=$TMP/$1
  mkdir -p "$t/docs"
  (cd "$ROOT/docs" && cp -r index.md results.md build.sh results-chart.sh template.html style.css \
     filters syntax diagrams "$t/docs/")
  cp -r "$ROOT/tests/docs/fixture/." "$t/"
  echo "$t"
}
# run NAME EXPECT(pass|fail) PATTERN: build + check the tree NAME; the outcome must be
# EXPECT and the output must match PATTERN (grep -E).
run() {
  local name=$1 expect=$2 pattern=$3 t=$TMP/$1 out rc
  out=$( { DOCS_ROOT=$t bash "$t/docs/build.sh" "$t/docs/site" && python3 "$ROOT/tests/docs/check_site.py" "$t" "$t/docs/site"; } 2>&1 )
  rc=$?
  n=$((n + 1))
  local got=pass; [[ $rc -ne 0 ]] && got=fail
  if [[ $got == "$expect" ]] && grep -qE -- "$pattern" <<<"$out"; then
    echo "ok   $name: $expect, output has /$pattern/"
  else
    echo "FAIL $name: expected $expect with /$pattern/, got $got:"; sed 's/^/     | /' <<<"$out"
    fails=$((fails + 1))
  fi
}
lesson() { printf '%s\n' "$2" >> "$TMP/$1/lessons/01-first/README.md"; }

t=$(tree good)
run good pass 'docs-check: 5 pages \(2 lessons, 1 extra lesson pages\).*OK'
grep -q 'class="sourceCode cuda"' "$t/docs/site/01-first.html" && grep -q 'fmaxf' "$t/docs/site/01-first.html" \
  && ! grep -q 'region update' "$t/docs/site/01-first.html" \
  || { echo "FAIL good: the included region is missing, unhighlighted or has its markers"; fails=$((fails + 1)); }
# The extra page (lessons/02-second/NOTES.md): linked from its lesson, after it in the reading
# order, not in the top navigation nor in the index's lesson list.
notes=$t/docs/site/02-second-notes.html
grep -q 'href="02-second-notes.html"' "$t/docs/site/02-second.html" \
  && grep -q 'Part of <a href="02-second.html">' "$notes" && grep -q 'rel="prev" href="02-second.html"' "$notes" \
  && grep -q 'rel="next" href="results.html"' "$notes" && grep -q 'rel="next" href="results.html"' "$t/docs/site/02-second.html" \
  && ! grep -q '02-second-notes' "$t/docs/site/index.html" \
  || { echo "FAIL good: the extra page NOTES.md is not linked and placed as expected"; fails=$((fails + 1)); }

tree no-region >/dev/null
lesson no-region '```{.cuda include="solutions/02-second/second.cu" region="nope"}
```'
run no-region fail 'lessons/01-first/README.md: include: no region "nope" in solutions/02-second/second.cu'

tree no-file >/dev/null
lesson no-file '```{.cuda include="solutions/02-second/missing.cu"}
```'
run no-file fail 'lessons/01-first/README.md: include: cannot read "solutions/02-second/missing.cu"'

tree no-end >/dev/null
printf '// [region open]\nint x;\n' >> "$TMP/no-end/solutions/02-second/second.cu"
lesson no-end '```{include="solutions/02-second/second.cu" region="open"}
```'
run no-end fail 'region "open" in solutions/02-second/second.cu has no end marker'

tree broken-link >/dev/null
lesson broken-link 'See [a lesson that does not exist](../09-missing/README.md).'
run broken-link fail '01-first.html:[0-9]+: <a href="../09-missing/README.md">: broken link'

tree broken-anchor >/dev/null
lesson broken-anchor 'See [no such section](../02-second/README.md#no-such-section).'
run broken-anchor fail 'broken anchor \(no id "no-such-section" in 02-second.html\)'

tree bad-math >/dev/null
lesson bad-math 'Broken math: $\notacommand{x}$.'
run bad-math fail 'math not converted to MathML'

tree stray-tex >/dev/null
lesson stray-tex 'Unbalanced math: $\frac{a}{$ b.'
run stray-tex fail 'TeX (math|command) left as text'

tree extra-broken-link >/dev/null
printf '%s\n' 'See [nothing](../09-missing/README.md).' >> "$TMP/extra-broken-link/lessons/02-second/NOTES.md"
run extra-broken-link fail '02-second-notes.html:[0-9]+: <a href="../09-missing/README.md">: broken link'

# An extra page the build did not write (a build.sh that forgot extra pages) is caught.
t=$(tree extra-missing)
n=$((n + 1))
out=$( { DOCS_ROOT=$t bash "$t/docs/build.sh" "$t/docs/site" >/dev/null && rm "$t/docs/site/02-second-notes.html" \
         && python3 "$ROOT/tests/docs/check_site.py" "$t" "$t/docs/site"; } 2>&1 )
if [[ $? -ne 0 ]] && grep -q 'lessons/02-second/NOTES.md: no page 02-second-notes.html' <<<"$out"; then
  echo "ok   extra-missing: fail, a missing extra page is reported"
else
  echo "FAIL extra-missing: expected the missing page 02-second-notes.html to be reported:"; sed 's/^/     | /' <<<"$out"
  fails=$((fails + 1))
fi

tree no-readme >/dev/null
mkdir -p "$TMP/no-readme/lessons/03-empty"
run no-readme fail 'lessons/03-empty: no page 03-empty.html in the site \(no README.md\)'

tree remote-image >/dev/null
lesson remote-image '![remote](https://example.com/x.png)'
run remote-image fail 'resource from outside the site'

t=$(tree results)
mkdir -p "$t/docs/results"
cat > "$t/docs/results/test-gpu.csv" <<'CSV'
# gpu: Test GPU
# commit: abc123
solution,source_sha256,status,cases_passed,cases_total,dtype,B,H,N,d,causal,ms,tflops,peak_pct
02-naive,0123456789abcdef,pass,12,12,fp32,8,12,1024,64,0,9.1,2.65,4.0
03-tiled,fedcba9876543210,pass,12,12,fp16,8,12,1024,64,0,0.2,60.4,6.1
CSV
printf 'gpu,method,N,tflops\nTest GPU,standard,512,1.5\n' > "$t/docs/results/bench-test-gpu.csv"
cp "$ROOT/docs/diagrams/causal-blocks.svg" "$t/docs/results/bench-test-gpu-ladder.svg"
run results pass 'OK'
page=$t/docs/site/results.html
grep -q '<td>03-tiled</td>' "$page" && grep -q 'Every row: cases_passed = 12, cases_total = 12, B = 8, H = 12' "$page" && grep -q 'gpu: Test GPU' "$page" \
  && grep -q 'assets/docs/results/bench-test-gpu-ladder.svg' "$page" && ! grep -q 'No results yet' "$page" \
  || { echo "FAIL results: the CSVs and the committed chart are not all on results.html"; fails=$((fails + 1)); }
if command -v gnuplot >/dev/null; then
  grep -q 'assets/results/test-gpu-tflops.svg' "$page" && [[ -s $t/docs/site/assets/results/test-gpu-tflops.svg ]] \
    || { echo "FAIL results: no TFLOP/s chart drawn for test-gpu.csv"; fails=$((fails + 1)); }
fi
grep -q 'No results yet' "$TMP/good/docs/site/results.html" \
  || { echo "FAIL results: without CSVs the page should say 'No results yet'"; fails=$((fails + 1)); }

if [[ $fails -ne 0 ]]; then echo "docs selftest: FAILED ($fails of $n cases)"; exit 1; fi
echo "docs selftest: OK ($n cases)"

#!/usr/bin/env bash
# tests/docs/selftest.sh: show that docs/build.sh + check_site.py accept a good site
# and catch each kind of breakage, and that check_texts.py and fence_bodies.py do their
# part, on throwaway trees made of this checkout's docs tooling and the fixture lessons
# in tests/docs/fixture/ (never the real lessons/).
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
# run NAME EXPECT(pass|fail) PATTERN...: build + check the tree NAME; the outcome must be
# EXPECT and the output must match each PATTERN (grep -E; each one a case). A tree may carry
# several breakages at once, one per page or one per kind of report: a pattern then shows that
# its breakage is caught, whatever else the build reports (one build instead of one each).
run() {
  local name=$1 expect=$2 t=$TMP/$1 out rc pattern
  shift 2
  out=$( { DOCS_ROOT=$t bash "$t/docs/build.sh" "$t/docs/site" && python3 "$ROOT/tests/docs/check_site.py" "$t" "$t/docs/site"; } 2>&1 )
  rc=$?
  local got=pass; [[ $rc -ne 0 ]] && got=fail
  for pattern in "$@"; do
    n=$((n + 1))
    if [[ $got == "$expect" ]] && grep -qE -- "$pattern" <<<"$out"; then
      echo "ok   $name: $expect, output has /$pattern/"
    else
      echo "FAIL $name: expected $expect with /$pattern/, got $got:"; sed 's/^/     | /' <<<"$out"
      fails=$((fails + 1))
    fi
  done
}
lesson() { printf '%s\n' "$2" >> "$TMP/$1/lessons/01-first/README.md"; }

t=$(tree good)
run good pass 'docs-check: 5 pages \(2 lessons, 1 extra lesson pages\).*3 solution excerpts: OK'
page=$t/docs/site/01-first.html
grep -q 'class="sourceCode cuda"' "$page" && grep -q 'fmaxf' "$page" \
  && ! grep -q 'region update' "$page" && ! grep -q '(shown on the course site)' "$page" \
  || { echo "FAIL good: the included region is missing, unhighlighted, has its markers or its GitHub line"; fails=$((fails + 1)); }
# A sh block highlighted as bash; a text block plain, escaped as pandoc escapes code.
grep -qF '<pre class="sourceCode bash"><code class="sourceCode bash">' "$page" \
  && grep -qF '<pre class="text"><code>pass  fp16 &lt;N=77&gt; &amp; &quot;d=64&quot; &#39;ok&#39;</code></pre>' "$page" \
  || { echo "FAIL good: the sh block is not highlighted as bash, or the text block is not a plain escaped <pre>"; fails=$((fails + 1)); }
# Solutions collapsed under "Show the solution's code" with file and region; the starter's
# given code in view; the hint a collapsed details.hint.
grep -qF '<summary>Show the solution'"'"'s code <span class="excerpt-source"><code>solutions/02-second/second.cu</code> · update</span></summary>' "$page" \
  && [[ $(grep -c '^<details class="solution">$' "$page") -eq 3 ]] && ! grep -q '<details class="solution" open' "$page" \
  && grep -qF '<div class="listing" data-file="lessons/02-second/second.cu" data-region="given">' "$page" \
  && grep -qF '<details class="hint"><summary>Hint 1 for TODO(1)</summary>' "$page" \
  || { echo "FAIL good: solution blocks, given code or hint not rendered as expected"; fails=$((fails + 1)); }
# The extra page (lessons/02-second/NOTES.md): linked from its lesson, after it in the reading
# order, not in the top navigation nor in the index's lesson list.
notes=$t/docs/site/02-second-notes.html
grep -q 'href="02-second-notes.html"' "$t/docs/site/02-second.html" \
  && grep -q 'Part of <a href="02-second.html">' "$notes" && grep -q 'rel="prev" href="02-second.html"' "$notes" \
  && grep -q 'rel="next" href="results.html"' "$notes" && grep -q 'rel="next" href="results.html"' "$t/docs/site/02-second.html" \
  && ! grep -q '02-second-notes' "$t/docs/site/index.html" \
  || { echo "FAIL good: the extra page NOTES.md is not linked and placed as expected"; fails=$((fails + 1)); }

# Includes that cannot be resolved stop their page's build: one per page, so one build shows
# that each is caught (the build goes on to the other pages and fails at the end).
t=$(tree bad-includes)
lesson bad-includes '```{.cuda include="solutions/02-second/second.cu" region="nope"}
// solutions/02-second/second.cu, region "nope" (shown on the course site)
```'
printf '%s\n' '```{.cuda include="solutions/02-second/missing.cu"}' \
  '// solutions/02-second/missing.cu (shown on the course site)' '```' >> "$t/lessons/02-second/README.md"
printf '// [region open]\nint x;\n' >> "$t/solutions/02-second/second.cu"
printf '%s\n' '```{include="solutions/02-second/second.cu" region="open"}' \
  '// solutions/02-second/second.cu, region "open" (shown on the course site)' '```' >> "$t/lessons/02-second/NOTES.md"
run bad-includes fail 'lessons/01-first/README.md: include: no region "nope" in solutions/02-second/second.cu' \
  'lessons/02-second/README.md: include: cannot read "solutions/02-second/missing.cu"' \
  'region "open" in solutions/02-second/second.cu has no end marker'

# Pages that build but are wrong (check_site.py reports every problem it finds, so one build):
# a broken link, a broken anchor, math pandoc could not convert, TeX left as text, a broken
# link on an extra page, an image from outside the site.
tree site-breakages >/dev/null
lesson site-breakages 'See [a lesson that does not exist](../09-missing/README.md).'
lesson site-breakages 'See [no such section](../02-second/README.md#no-such-section).'
lesson site-breakages 'Broken math: $\notacommand{x}$.'
lesson site-breakages 'Unbalanced math: $\frac{a}{$ b.'
lesson site-breakages '![remote](https://example.com/x.png)'
printf '%s\n' 'See [nothing](../09-missing/README.md).' >> "$TMP/site-breakages/lessons/02-second/NOTES.md"
run site-breakages fail '01-first.html:[0-9]+: <a href="../09-missing/README.md">: broken link' \
  'broken anchor \(no id "no-such-section" in 02-second.html\)' 'math not converted to MathML' \
  'TeX (math|command) left as text' '02-second-notes.html:[0-9]+: <a href="../09-missing/README.md">: broken link' \
  'resource from outside the site'

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

# Include fence bodies (what GitHub shows): the build stops on an empty, a wrong or a
# multi-line one, naming the page, the line and the fix (one page each, one build).
t=$(tree bad-bodies)
lesson bad-bodies '```{.cuda include="solutions/02-second/second.cu" region="update"}
```'
line=$(grep -c '' "$t/lessons/01-first/README.md"); line=$((line - 1))
printf '%s\n' '```{.cuda include="solutions/02-second/second.cu" region="update"}' \
  '// solutions/02-second/second.cu, region "inner" (shown on the course site)' '```' >> "$t/lessons/02-second/README.md"
printf '%s\n' '```{.cuda include="solutions/02-second/second.cu"}' '// solutions/02-second/second.cu (shown on the course site)' \
  'int stale_copy_of_the_code;' '```' >> "$t/lessons/02-second/NOTES.md"
run bad-bodies fail "lessons/01-first/README.md:$line: include fence for solutions/02-second/second.cu region \"update\": its body is empty.*fence_bodies.py --fix lessons/01-first/README.md"
errs=$(DOCS_ROOT=$t bash "$t/docs/build.sh" "$t/docs/site" 2>&1 >/dev/null)
for want in 'lessons/02-second/README.md:[0-9]+: include fence for solutions/02-second/second.cu region "update": its body does not name the region' \
            'lessons/02-second/NOTES.md:[0-9]+: include fence for solutions/02-second/second.cu: its body has 2 lines'; do
  n=$((n + 1))
  if grep -qE -- "$want" <<<"$errs"; then
    echo "ok   bad-bodies: output has /$want/"
  else
    echo "FAIL bad-bodies: no /$want/ in the build's errors"; fails=$((fails + 1))
  fi
done

# check_site.py on the good site with one thing broken in its HTML (as a broken include.lua
# would write it): a solution excerpt in view, open, unmarked, given code hidden, a wrong summary.
# sitecase NAME PATTERN SED-EXPRESSION [PAGE]: must fail with PATTERN.
sitecase() {
  local name=$1 pattern=$2 t=$TMP/$1 out page=${4:-01-first.html}
  cp -r "$TMP/good" "$t"
  sed -i "$3" "$t/docs/site/$page"
  n=$((n + 1))
  if cmp -s "$t/docs/site/$page" "$TMP/good/docs/site/$page"; then
    echo "FAIL $name: the sed changed nothing"; fails=$((fails + 1)); return
  fi
  if out=$(python3 "$ROOT/tests/docs/check_site.py" "$t" "$t/docs/site" 2>&1); then
    echo "FAIL $name: expected fail with /$pattern/, got pass:"; sed 's/^/     | /' <<<"$out"; fails=$((fails + 1))
  elif grep -qE -- "$pattern" <<<"$out"; then
    echo "ok   $name: fail, output has /$pattern/"
  else
    echo "FAIL $name: expected /$pattern/ in:"; sed 's/^/     | /' <<<"$out"; fails=$((fails + 1))
  fi
}
sitecase in-view 'solution excerpt solutions/02-second/second.cu region update is in view' \
  's/<details class="solution">/<details class="other">/'
sitecase open-block 'solution excerpt solutions/02-second/second.cu region update is in an open details block' \
  's/<details class="solution">/<details class="solution" open>/'
sitecase unmarked 'lessons/01-first/README.md has 3 include fences from solutions/ but the page shows 0 solution excerpts' \
  's/class="listing solution-code"/class="sourceCode"/'
sitecase no-data-file '01-first.html \(from lessons/01-first/README.md\):[0-9]+: a listing without data-file' \
  's/ data-file="solutions[^"]*"//'
sitecase given-hidden 'given code lessons/02-second/second.cu region given is hidden in a solution block' \
  's|<div class="listing" data-file="lessons/|<details class="solution"><summary>Show the solution'"'"'s code</summary>&|'
sitecase summary "a solution block's summary should read \"Show the solution's code\"" \
  "s/Show the solution's code/Solution/"
sitecase extra-not-last '02-second.html: its extra page 02-second-notes.html is not linked at the end' \
  's|<h2 id="more-in-this-lesson">|<p>|' 02-second.html

# fence_bodies.py: reports what the build would stop on; --fix writes every body, then the
# page builds and passes, and a second --fix changes nothing.
t=$(tree fix-bodies)
page=$t/lessons/01-first/README.md
python3 - "$page" <<'PY'
import re, sys
p = sys.argv[1]; s = open(p).read()
s = s.replace('// solutions/02-second/second.cu, region "update" (shown on the course site)\n', '')
s = s.replace('// lessons/02-second/second.cu, region "given" (shown on the course site)',
              '// solutions/02-second/second.cu, region "given"')
s = s.replace('// solutions/02-second/second.cu, region "inner" (shown on the course site)',
              '\n   m[i] = m_new;  // a stale copy')
open(p, 'w').write(s)
PY
n=$((n + 1))
out=$(cd "$t" && python3 "$ROOT/tests/docs/fence_bodies.py" lessons/01-first/README.md 2>&1); rc=$?
if [[ $rc -eq 1 && $(grep -c 'include fence' <<<"$out") -eq 3 ]] && grep -q 'README.md:18: include fence solutions/02-second/second.cu region update: empty body' <<<"$out" \
   && grep -q 'does not name the file lessons/02-second/second.cu' <<<"$out" && grep -q 'body lines' <<<"$out"; then
  echo "ok   fix-bodies: the check reports the empty, the wrong and the stale body"
else
  echo "FAIL fix-bodies: expected 3 reports (empty, wrong file, 3 lines), got rc=$rc:"; sed 's/^/     | /' <<<"$out"; fails=$((fails + 1))
fi
(cd "$t" && python3 "$ROOT/tests/docs/fence_bodies.py" --fix lessons/01-first/README.md >/dev/null)
cmp -s "$page" "$ROOT/tests/docs/fixture/lessons/01-first/README.md" \
  || { echo "FAIL fix-bodies: --fix did not restore the fixture's bodies:"; diff "$ROOT/tests/docs/fixture/lessons/01-first/README.md" "$page" | sed 's/^/     | /'; fails=$((fails + 1)); }
cp "$page" "$TMP/fixed.md"
out=$(cd "$t" && python3 "$ROOT/tests/docs/fence_bodies.py" --fix lessons/01-first/README.md)
[[ -z $out ]] || { echo "FAIL fix-bodies: a second --fix changed something: $out"; fails=$((fails + 1)); }
cmp -s "$page" "$TMP/fixed.md" || { echo "FAIL fix-bodies: a second --fix changed the page"; fails=$((fails + 1)); }
run fix-bodies pass 'solution excerpts: OK'

# check_texts.py: issue and commit references, fence bodies, word counts, the worklog link.
# texts NAME EXPECT PATTERN: check the tree NAME's texts (no build); like run.
texts() {
  local name=$1 expect=$2 pattern=$3 out rc
  out=$(python3 "$ROOT/tests/docs/check_texts.py" "$TMP/$1" 2>&1); rc=$?
  n=$((n + 1))
  local got=pass; [[ $rc -ne 0 ]] && got=fail
  if [[ $got == "$expect" ]] && grep -qE -- "$pattern" <<<"$out"; then
    echo "ok   $name: $expect, output has /$pattern/"
  else
    echo "FAIL $name: expected $expect with /$pattern/, got $got:"; sed 's/^/     | /' <<<"$out"
    fails=$((fails + 1))
  fi
}
texts good pass 'docs-texts: 2 lessons: OK'
# Every kind of reference, one paragraph each: each one's line must be reported.
t=$(tree refs)
refs=('As issue 13 states, it is done.' 'Done (#13).' 'See issues 23 and 24.' 'Merged in PR 7.'
      'Issue #5 asks for it.' 'Measured at a2aa2a5 on an H100.' 'The H100 run at commit
8462332 says so.' 'The summary committed as 691bb6e.' 'Run `git checkout 971ef64` first.')
lines=()
for ref in "${refs[@]}"; do
  printf '\n%s\n' "$ref" >> "$t/lessons/01-first/README.md"
  lines+=("$(grep -c '' "$t/lessons/01-first/README.md")")
done
out=$(python3 "$ROOT/tests/docs/check_texts.py" "$t" 2>&1) && { echo "FAIL refs: the check passed"; fails=$((fails + 1)); }
for i in "${!refs[@]}"; do
  n=$((n + 1))
  if grep -qE "lessons/01-first/README.md:${lines[$i]}: names (an issue|issues|a pull request|a commit hash)" <<<"$out"; then
    echo "ok   refs: reported: ${refs[$i]//$'\n'/ }"
  else
    echo "FAIL refs: not reported (line ${lines[$i]}): ${refs[$i]}"; sed 's/^/     | /' <<<"$out"; fails=$((fails + 1))
  fi
done
tree no-false-refs >/dev/null
lesson no-false-refs 'An SM issues 4 warp instructions per clock; a warp can issue 1 load; warps issue 2
stores. Constants 0xff and 0x1f5fa8c0, the colour #1f5fa8, &#123;, 3.79609231, 1234567 bytes,
deadbeef, TODO #2, a [section](#1-the-idea), GPU-1a2b3c4d-0e1f-2a3b-4c5d-6e7f8a9b0c1d, $x_{1234abc}$,
`#1` and `issue 13` in code are fine; so is <a href="#12">an anchor</a>.

```c
#define MASK 0xffffffff  /* issue 13 here is code */
```'
texts no-false-refs pass 'docs-texts: 2 lessons: OK'
tree ref-extra-page >/dev/null
printf '%s\n' 'Measured at commit 971ef64.' >> "$TMP/ref-extra-page/lessons/02-second/NOTES.md"
texts ref-extra-page fail "lessons/02-second/NOTES.md:[0-9]+: names a commit hash: '971ef64'"
tree text-empty-body >/dev/null
lesson text-empty-body '```{.cuda include="solutions/02-second/second.cu" region="update"}
```'
texts text-empty-body fail 'lessons/01-first/README.md:[0-9]+: include fence solutions/02-second/second.cu region update: empty body.*--fix lessons/01-first/README.md'
tree unknown-language >/dev/null
lesson unknown-language '```console
$ make lesson1
```

```{.plain}
output
```'
texts unknown-language fail "lessons/01-first/README.md:[0-9]+: a code block in 'console', a language the site's highlighter does not know"
texts unknown-language fail "lessons/01-first/README.md:[0-9]+: a code block in 'plain'"

# Word counts: prose over 5,000 words fails; code, math and the worklog do not count.
words() { python3 -c "import sys; print(' '.join(['word'] * int(sys.argv[1])))" "$1"; }
tree too-long >/dev/null
lesson too-long "$(words 4950)"
texts too-long fail 'lessons/01-first: the student path has 50[0-9][0-9] words of prose \(at most 5000'
t=$(tree long-not-prose)
lesson long-not-prose "$(printf '```\n%s\n```\n\n$$\n%s\n$$\n\n' "$(words 6000)" "$(words 6000)")"
words 6000 > "$t/lessons/01-first/WORKLOG.md"
lesson long-not-prose 'The [worklog](WORKLOG.md) has the history.'
texts long-not-prose pass '01-first +(9[0-9]|1[0-9][0-9]) +ok'
t=$(tree worklog-unlinked)
printf '# Worklog\n\nSteps.\n' > "$t/lessons/02-second/WORKLOG.md"
texts worklog-unlinked fail 'lessons/02-second/README.md: no link to its worklog WORKLOG.md'

tree no-readme >/dev/null
mkdir -p "$TMP/no-readme/lessons/03-empty"
run no-readme fail 'lessons/03-empty: no page 03-empty.html in the site \(no README.md\)'

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

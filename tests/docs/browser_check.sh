#!/usr/bin/env bash
# tests/docs/browser_check.sh: build the site and load every page in headless Chromium
# (browser_check.py): no console errors, no uncaught exceptions, no network requests,
# images loaded, MathML laid out, style.css applied; every lesson page and every extra
# page of a lesson (lessons/NN-*/X.md, e.g. lesson 08's WORKLOG.md) must be among them.
# Every solution excerpt hidden as the page loads and shown once opened. Writes a screenshot
# of a lesson page to docs/site/screenshot-lesson.png. First it shows on a deliberately broken
# page that the check catches each of these. Offline and bounded in time. DOCS_SITE_BUILT=1
# loads the docs/site already there instead of building it (make test-docs, after docs-check).
# Without pandoc or Chromium it prints SKIP and succeeds, unless DOCS_REQUIRE=1 (CI).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
CHROMIUM=${CHROMIUM:-$(command -v chromium || command -v chromium-browser || true)}
missing=""
command -v pandoc >/dev/null || missing+=" pandoc"
command -v python3 >/dev/null || missing+=" python3"
[[ -n $CHROMIUM ]] || missing+=" chromium"
if [[ -n $missing ]]; then
  if [[ ${DOCS_REQUIRE:-0} == 1 ]]; then echo "docs-browser-check: FAIL: not installed:$missing (DOCS_REQUIRE=1)"; exit 1; fi
  echo "docs-browser-check: SKIP: not installed:$missing (apt-get install$missing)"; exit 0
fi
export CHROMIUM
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT

echo "== docs-browser-check: self-test on a broken page"
cp "$ROOT/docs/style.css" "$TMP/"
cat > "$TMP/01-broken.html" <<'HTML'
<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>broken</title>
<link rel="stylesheet" href="style.css"></head><body><header class="site"></header><main>
<img src="missing.png" alt="missing"><script>console.error("selftest error"); notDefined();</script>
<div class="listing" data-file="solutions/01-broken/broken.cu"><pre>int answer;</pre></div>
<details class="hint"><p>a hint with no summary</p></details>
</main></body></html>
HTML
if out=$(timeout 120 python3 "$ROOT/tests/docs/browser_check.py" "$TMP" "$TMP/shot.png" 2>&1); then
  echo "$out"; echo "docs-browser-check: FAILED: the broken page passed"; exit 1
fi
for want in 'console.error: selftest error' 'uncaught exception' 'images that did not load' \
            'solution code in view as the page loads' 'collapsed blocks show no summary line'; do
  grep -qF -- "$want" <<<"$out" || { echo "$out"; echo "docs-browser-check: FAILED: not reported: $want"; exit 1; }
done
echo "ok   a console error, an exception, a missing image, solution code in view and a block without summary are reported"

if [[ ${DOCS_SITE_BUILT:-0} == 1 ]]; then
  # make test-docs: docs-check has just built docs/site from this checkout
  echo "== docs-browser-check: load every page of the site docs-check built"
else
  echo "== docs-browser-check: build the site and load every page"
  bash "$ROOT/docs/build.sh" "$ROOT/docs/site" > "$TMP/build.out" 2>&1 || { cat "$TMP/build.out"; exit 1; }
fi
timeout 300 python3 "$ROOT/tests/docs/browser_check.py" "$ROOT/docs/site" "$ROOT/docs/site/screenshot-lesson.png" "$ROOT"

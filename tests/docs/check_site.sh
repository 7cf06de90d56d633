#!/usr/bin/env bash
# tests/docs/check_site.sh: check the lesson texts (check_texts.py: no issue or commit
# named, every include fence's body names its file and region, each lesson's student path
# under 5,000 words of prose, a worklog linked, every code block in a language the
# highlighter knows), build the course site from this checkout
# (docs/build.sh -> docs/site/) and check it (check_site.py: every lesson has a page, no
# broken internal link or anchor, no unresolved include, every solution excerpt collapsed,
# all math is MathML, offline, one stylesheet, previous/next). Then selftest.sh proves on
# fixtures that each of those breakages is caught. Without pandoc it prints SKIP and
# succeeds, unless DOCS_REQUIRE=1 (CI).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
for tool in pandoc python3; do
  if ! command -v "$tool" >/dev/null; then
    if [[ ${DOCS_REQUIRE:-0} == 1 ]]; then echo "docs-check: FAIL: $tool not installed (DOCS_REQUIRE=1)"; exit 1; fi
    echo "docs-check: SKIP: $tool not installed (apt-get install pandoc python3)"; exit 0
  fi
done
echo "== docs-check: diagrams are what docs/diagrams/draw.py draws"
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT
python3 "$ROOT/docs/diagrams/draw.py" "$TMP"
for f in "$TMP"/*.svg; do
  if ! cmp -s "$f" "$ROOT/docs/diagrams/${f##*/}"; then
    echo "docs-check: FAILED: docs/diagrams/${f##*/} differs from draw.py's output (run python3 docs/diagrams/draw.py and commit)"; exit 1
  fi
done
status=0
echo "== docs-check: the lesson texts"
python3 "$ROOT/tests/docs/check_texts.py" "$ROOT" || status=1
echo "== docs-check: build the site from this checkout"
if ! bash "$ROOT/docs/build.sh" "$ROOT/docs/site"; then
  echo "docs-check: FAILED: the site did not build (see the errors above)"; exit 1
fi
python3 "$ROOT/tests/docs/check_site.py" "$ROOT" "$ROOT/docs/site" || status=1
# DOCS_SELFTEST=0: make test runs the self-test as a step of its own (test-docs-selftest)
if [[ ${DOCS_SELFTEST:-1} != 0 ]]; then
  echo "== docs-check: self-test of the build and the check on a fixture"
  bash "$ROOT/tests/docs/selftest.sh" || status=1
fi
exit $status

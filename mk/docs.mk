# mk/docs.mk: the course site (issue 7). Needs pandoc; the checks also python3 and chromium
# (Debian: apt-get install pandoc python3 chromium fonts-dejavu-core fonts-dejavu-extra gnuplot-nox).
#   make docs                 render docs/site/ from docs/*.md and lessons/NN-*/*.md;
#                             open docs/site/index.html (works offline, from file://)
#   make docs-check           build it, then check: a page per lesson, internal links and anchors,
#                             includes resolved, math is MathML; plus a self-test on a fixture
#   make docs-browser-check   load every page in headless Chromium: no console errors; writes
#                             docs/site/screenshot-lesson.png
# Both checks run in `make test`; they SKIP (exit 0) without their tools, unless DOCS_REQUIRE=1.
.PHONY: docs docs-check docs-browser-check

docs:
	@bash docs/build.sh docs/site

docs-check:
	@bash tests/docs/check_site.sh

docs-browser-check:
	@bash tests/docs/browser_check.sh

test:: docs-check docs-browser-check

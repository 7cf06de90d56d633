# mk/docs.mk: the course site. Needs pandoc; the checks also python3 and chromium
# (Debian: apt-get install pandoc python3 chromium fonts-dejavu-core fonts-dejavu-extra gnuplot-nox).
#   make docs                 render docs/site/ from docs/*.md and lessons/NN-*/*.md;
#                             open docs/site/index.html (works offline, from file://)
#   make docs-texts           check the lesson texts alone, no build (tests/docs/check_texts.py):
#                             no issue or commit named, include fence bodies, words per lesson,
#                             code blocks' languages
#   make docs-check           docs-texts, then build the site and check it: a page per lesson,
#                             internal links and anchors, includes resolved, solution excerpts
#                             collapsed, math is MathML; plus a self-test on fixtures
#   make docs-fence-bodies    write the one-line body of every include fence in lessons/*/*.md
#                             (tests/docs/fence_bodies.py --fix; an author's tool, not a check)
#   make docs-browser-check   load every page in headless Chromium: no console errors; writes
#                             docs/site/screenshot-lesson.png
# Both checks run in `make test`; they SKIP (exit 0) without their tools, unless DOCS_REQUIRE=1.
.PHONY: docs docs-texts docs-check docs-browser-check docs-fence-bodies

docs:
	@bash docs/build.sh docs/site

docs-texts:
	@python3 tests/docs/check_texts.py .

docs-check:
	@bash tests/docs/check_site.sh

docs-fence-bodies:
	@python3 tests/docs/fence_bodies.py --fix lessons/*/*.md

docs-browser-check:
	@bash tests/docs/browser_check.sh

# two steps of make test, run side by side: docs-check without its self-test builds docs/site,
# then the browser loads that same build; test-docs-selftest is docs-check's self-test on the
# fixture trees (it builds no docs/site of its own)
.PHONY: test-docs test-docs-selftest
test-docs:
	@DOCS_SELFTEST=0 $(MAKE) --no-print-directory docs-check && DOCS_SITE_BUILT=1 $(MAKE) --no-print-directory docs-browser-check
test-docs-selftest:
	@if ! command -v pandoc >/dev/null || ! command -v python3 >/dev/null; then \
	  if [ "$${DOCS_REQUIRE:-0}" = 1 ]; then echo "test-docs-selftest: FAIL: pandoc or python3 not installed (DOCS_REQUIRE=1)"; exit 1; fi; \
	  echo "test-docs-selftest: SKIP: pandoc or python3 not installed (apt-get install pandoc python3)"; exit 0; fi; \
	bash tests/docs/selftest.sh
TEST_STEPS += test-docs test-docs-selftest

#!/usr/bin/env python3
"""check_site.py ROOT SITE: check a built course site (docs/build.sh) against its sources.

Fails (exit 1, one line per problem) on:
  - a lesson folder lessons/NN-*/ without its page SITE/NN-*.html, or no index/results page;
  - another Markdown file of a lesson (lessons/NN-name/X.md, or its worklog, worklog/README.md) without its page
    SITE/NN-name-x.html, or that page not linked from the lesson's page in its last section
    ("More in this lesson", which site.lua adds at the end), or not linking back;
  - a broken internal link or anchor: a[href], img[src], link[href], ... that points to a
    file missing from SITE, outside SITE, or to an #id the target page does not have;
  - a resource (image, stylesheet, script, ...) loaded from the network: the site is read
    offline, so only links (a[href]) may point outside;
  - math that did not become MathML: pandoc's fallback <span class="math ..."> or TeX
    left in the text ($...$, \\frac, ...) outside code, and the build log's
    "Could not convert TeX math" warnings;
  - an include that did not run (data-include attributes left in the HTML);
  - a solution excerpt in view: every listing from solutions/ (div.listing[data-file]) must
    sit in a collapsed <details class="solution"> (no "open") whose summary reads "Show the
    solution's code", and a page must show as many of them as its source has include fences
    from solutions/ (tests/docs/fence_bodies.py reads the fences); given code (any other
    include) must not be hidden in such a block;
  - a page without exactly one stylesheet (style.css), a title, or its previous/next links.
Only the Python standard library is used.
"""
import html.parser
import os
import re
import sys
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fence_bodies  # noqa: E402

RESOURCE_ATTRS = {("img", "src"), ("link", "href"), ("script", "src"), ("source", "src"),
                  ("iframe", "src"), ("object", "data"), ("embed", "src"), ("video", "src"),
                  ("audio", "src"), ("track", "src"), ("input", "src")}
TEXT_SKIP = {"pre", "code", "math", "script", "style", "annotation", "title"}
VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta",
        "source", "track", "wbr"}
TEX_DOLLARS = re.compile(r"\$\$?[^\s$][^$]*\$")
TEX_COMMAND = re.compile(r"\\[A-Za-z]+")


class Page(html.parser.HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.ids, self.refs, self.problems = set(), [], []
        self.stack = []          # open elements (tag names)
        self.skip = 0            # depth inside elements whose text is not prose
        self.stylesheets, self.styles, self.rels = [], 0, set()
        self.maths, self.title, self.in_title = 0, "", False
        self.math_spans = []     # [text] of pandoc's non-MathML fallbacks
        self.source = ""         # "Built from <code>...</code>" in the footer
        self.in_math_span = 0
        self.details = []        # open <details>: [class list, open?, summary text]
        self.summaries = []      # (line, summary text) of each details.solution
        self.listings = []       # (line, data-file, data-region, enclosing details.solution: None/"closed"/"open")
        self.in_summary = None
        self.h2 = []             # ids of the <h2> headings, in order
        self.after_last_h2 = []  # a[href] after the last <h2>

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        line = self.getpos()[0]
        for key in ("id",) + (("name",) if tag == "a" else ()):
            if a.get(key):
                self.ids.add(a[key])
        for (t, attr) in RESOURCE_ATTRS | {("a", "href"), ("area", "href")}:
            if tag == t and a.get(attr) is not None:
                self.refs.append((line, tag, attr, a[attr]))
        if tag == "link" and "stylesheet" in (a.get("rel") or "").split():
            self.stylesheets.append(a.get("href"))
        if tag == "style":
            self.styles += 1
        if tag in ("a", "link") and a.get("rel"):
            self.rels.update(a["rel"].split())
        if tag == "math":
            self.maths += 1
        if "data-include" in a:
            self.problems.append(f"line {line}: include not processed: {a.get('data-include')!r}")
        classes = (a.get("class") or "").split()
        if tag == "details":
            self.details.append([classes, "open" in a, line])
        if tag == "h2":
            self.h2.append(a.get("id") or "")
            self.after_last_h2 = []
        if tag == "a" and a.get("href") and self.h2:
            self.after_last_h2.append(a["href"])
        if tag == "summary" and self.details and "solution" in self.details[-1][0]:
            self.in_summary = [line, ""]
        if tag == "div" and "listing" in classes:
            sol = [d for d in self.details if "solution" in d[0]]
            state = None if not sol else ("open" if any(d[1] for d in sol) else "closed")
            self.listings.append((line, a.get("data-file"), a.get("data-region"), state))
        if tag == "span" and "math" in classes:
            self.math_spans.append("")
            self.in_math_span += 1
        elif self.in_math_span and tag == "span":
            self.in_math_span += 1
        if tag == "title":
            self.in_title = True
        if tag in VOID:
            return
        self.stack.append(tag)
        if tag in TEXT_SKIP:
            self.skip += 1

    def handle_startendtag(self, tag, attrs):
        self.handle_starttag(tag, attrs)
        if tag not in VOID and self.stack and self.stack[-1] == tag:
            self.handle_endtag(tag)

    def handle_endtag(self, tag):
        if tag == "title":
            self.in_title = False
        if tag == "details" and self.details:
            self.details.pop()
        if tag == "summary" and self.in_summary:
            self.summaries.append(tuple(self.in_summary))
            self.in_summary = None
        if tag == "span" and self.in_math_span:
            self.in_math_span -= 1
        if tag in VOID or tag not in self.stack:
            return
        while self.stack:
            t = self.stack.pop()
            if t in TEXT_SKIP:
                self.skip -= 1
            if t == tag:
                break

    def handle_data(self, data):
        if self.stack[-2:] == ["p", "code"] and data.endswith((".md", "README.md")) and "/" in data:
            self.source = data
        if self.in_title:
            self.title += data
        if self.in_summary:
            self.in_summary[1] += data
        if self.in_math_span:
            self.math_spans[-1] += data
            return
        if self.skip:
            return
        for m in TEX_DOLLARS.finditer(data):
            self.problems.append(f"line {self.getpos()[0]}: TeX math left as text: {m.group(0)[:60]!r}")
        for m in TEX_COMMAND.finditer(data):
            self.problems.append(f"line {self.getpos()[0]}: TeX command left as text: {m.group(0)!r}")


def main(root, site):
    errors = []
    pages = {}
    for dirpath, _, files in os.walk(site):
        for f in files:
            if f.endswith(".html"):
                path = os.path.join(dirpath, f)
                p = Page()
                with open(path, encoding="utf-8") as fh:
                    p.feed(fh.read())
                p.close()
                pages[os.path.relpath(path, site)] = p

    # Every lesson has a page; the fixed pages exist.
    lessons_dir = os.path.join(root, "lessons")
    lessons = sorted(d for d in (os.listdir(lessons_dir) if os.path.isdir(lessons_dir) else [])
                     if re.match(r"^[0-9][0-9]-", d) and os.path.isdir(os.path.join(lessons_dir, d)))
    for d in lessons:
        if d + ".html" not in pages:
            why = "" if os.path.exists(os.path.join(lessons_dir, d, "README.md")) else " (no README.md)"
            errors.append(f"lessons/{d}: no page {d}.html in the site{why}")
    for fixed in ("index.html", "results.html"):
        if fixed not in pages:
            errors.append(f"{fixed}: missing")

    # Extra pages of a lesson (docs/build.sh: id <lesson>-<file name in lower case, no .md>).
    extras = {}
    for d in lessons:
        found = [f for f in sorted(os.listdir(os.path.join(lessons_dir, d))) if f.endswith(".md") and f != "README.md"]
        if os.path.exists(os.path.join(lessons_dir, d, "worklog", "README.md")):
            found.append("worklog/README.md")  # the folder of the lesson's experiments: page <lesson>-worklog
        for f in found:
            if True:
                extra = d + "-" + ("worklog" if f == "worklog/README.md" else re.sub(r"[^a-z0-9-]", "-", f[:-3].lower())) + ".html"
                extras[extra] = d + ".html"
                if extra not in pages:
                    errors.append(f"lessons/{d}/{f}: no page {extra} in the site")
                    continue
                lp = pages.get(d + ".html")
                if lp and extra not in {u for _, t, _, u in lp.refs if t == "a"}:
                    errors.append(f"{d}.html: no link to its extra page {extra} (from lessons/{d}/{f})")
                elif lp and (not lp.h2 or lp.h2[-1] != "more-in-this-lesson" or extra not in lp.after_last_h2):
                    errors.append(f"{d}.html: its extra page {extra} is not linked at the end, in a last "
                                  f"section \"More in this lesson\"")
                if d + ".html" not in {u for _, t, _, u in pages[extra].refs if t == "a"}:
                    errors.append(f"{extra}: no link back to its lesson page {d}.html")

    # Reading order (from the navigation of the index page) for the previous/next check; an
    # extra page has its lesson before it and the page after its lesson after it.
    order = ["index.html"] + [d + ".html" for d in lessons if d + ".html" in pages] + ["results.html"]

    nlinks = nmath = 0
    site_abs = os.path.realpath(site)
    for name, p in sorted(pages.items()):
        here = os.path.dirname(os.path.join(site_abs, name))
        label = f"{name} (from {p.source})" if p.source else name
        for msg in p.problems:
            errors.append(f"{label}: {msg}")
        for text in p.math_spans:
            errors.append(f"{label}: math not converted to MathML: {text.strip()[:60]!r}")
        nmath += p.maths
        if p.stylesheets != ["style.css"] or p.styles:
            errors.append(f"{name}: expected exactly one stylesheet, style.css (found {p.stylesheets}, "
                          f"{p.styles} <style>)")
        if not p.title.strip():
            errors.append(f"{name}: no <title>")
        if name in extras:
            if "prev" not in p.rels or "next" not in p.rels:
                errors.append(f"{name}: no link to the previous or the next page")
        elif name in order:
            i = order.index(name)
            if i > 0 and "prev" not in p.rels:
                errors.append(f"{name}: no link to the previous page")
            if i < len(order) - 1 and "next" not in p.rels:
                errors.append(f"{name}: no link to the next page")
        for line, tag, attr, url in p.refs:
            nlinks += 1
            where = f"{name}:{line}: <{tag} {attr}=\"{url}\">"
            parts = urllib.parse.urlsplit(url)
            if parts.scheme or url.startswith("//"):
                if parts.scheme == "data" and (tag, attr) in RESOURCE_ATTRS:
                    continue
                if (tag, attr) in RESOURCE_ATTRS:
                    errors.append(f"{where}: resource from outside the site (the site must work offline)")
                elif parts.scheme not in ("http", "https", "mailto"):
                    errors.append(f"{where}: unsupported link scheme")
                continue
            if url.startswith("/"):
                errors.append(f"{where}: absolute path (links must be relative)")
                continue
            path = urllib.parse.unquote(parts.path)
            frag = urllib.parse.unquote(parts.fragment)
            target = os.path.realpath(os.path.join(here, path)) if path else os.path.join(site_abs, name)
            rel = os.path.relpath(target, site_abs)
            if rel.startswith(".."):
                errors.append(f"{where}: broken link (points outside the site)")
                continue
            if path and not os.path.exists(target):
                errors.append(f"{where}: broken link (no {rel} in the site)")
                continue
            if frag and rel.endswith(".html"):
                if rel not in pages:
                    errors.append(f"{where}: target page not parsed")
                elif frag not in pages[rel].ids:
                    errors.append(f"{where}: broken anchor (no id \"{frag}\" in {rel})")

    # Solution excerpts: collapsed, every one of them; given code in view.
    nsol = 0
    for name, p in sorted(pages.items()):
        label = f"{name} (from {p.source})" if p.source else name
        for line, path, region, state in p.listings:
            what = f"{path}" + (f" region {region}" if region else "")
            if path is None:
                errors.append(f"{label}:{line}: a listing without data-file (was it made by include.lua?)")
            elif path.startswith("solutions/"):
                nsol += 1
                if state is None:
                    errors.append(f"{label}:{line}: solution excerpt {what} is in view: it must sit in a "
                                  f"collapsed <details class=\"solution\"> block")
                elif state == "open":
                    errors.append(f"{label}:{line}: solution excerpt {what} is in an open details block "
                                  f"(collapsed by default: no \"open\")")
            elif state is not None:
                errors.append(f"{label}:{line}: given code {what} is hidden in a solution block (only "
                              f"solutions/ excerpts are collapsed)")
        for line, text in p.summaries:
            if not " ".join(text.split()).startswith(("Show the solution's code", "Show the solution's report")):
                errors.append(f"{label}:{line}: a solution block's summary should read \"Show the "
                              f"solution's code\" (or \"report\", for an emulator report), not "
                              f"{' '.join(text.split())[:60]!r}")
        src = os.path.join(root, p.source) if p.source else None
        if src and os.path.isfile(src):
            with open(src, encoding="utf-8") as fh:
                want = sum(1 for f in fence_bodies.include_fences(fh.read())
                           if f["include"].startswith("solutions/"))
            got = sum(1 for _, path, _, _ in p.listings if path and path.startswith("solutions/"))
            if got != want:
                errors.append(f"{label}: {p.source} has {want} include fences from solutions/ but the page "
                              f"shows {got} solution excerpts (each must become a collapsed solution block)")

    log = os.path.join(site, "build.log")
    if os.path.exists(log):
        with open(log, encoding="utf-8", errors="replace") as fh:
            page = "?"
            for line in fh:
                if line.startswith("== "):
                    page = line[3:].strip()
                if "Could not convert TeX math" in line:
                    errors.append(f"{page}: pandoc: {line.strip()}")

    for e in errors:
        print("docs-check: " + e)
    print(f"docs-check: {len(pages)} pages ({len(lessons)} lessons, {len(extras)} extra lesson pages), {nlinks} links, "
          f"{nmath} MathML elements, {nsol} solution excerpts: {'FAILED, ' + str(len(errors)) + ' problems' if errors else 'OK'}")
    return 1 if errors else 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1], sys.argv[2]))

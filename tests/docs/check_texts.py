#!/usr/bin/env python3
"""check_texts.py ROOT: check the lesson texts themselves (lessons/NN-*/*.md), before any build.

Fails (exit 1, one line per problem, FILE:LINE first) on:
  (a) a lesson page (every .md of a lesson folder, worklogs included) that names an issue or
      a pull request ("issue 13", "issues 23 and 24", "#13", "PR 7") or a commit hash (a word
      of 7 to 40 lowercase hex digits with both letters and digits, or digits alone right
      after "commit"/"hash"/"revision"). Texts speak to students; hashes live in docs/results.
      Not flagged: hex constants (0xff), CSS colours (#1f5fa8), "&#123;", UUIDs, decimals
      (3.79609231), a link target (#1-the-idea), the verb ("an SM issues 4 instructions",
      "a warp can issue 1 load"). Issue words and "#N" are looked for in prose (code spans,
      code blocks and math left out); hashes also in code blocks (command output), not in math.
  (c) an include fence whose body is not the one line naming its file and region
      (tests/docs/fence_bodies.py has the rule and the fix).
  (d) a lesson whose student path (README.md and any other page of the folder but the
      worklog, worklog/README.md or WORKLOG*.md) has more than MAX_WORDS words of prose: words of text, headings,
      lists, tables, link texts and hints; code blocks, math and raw HTML not counted; a
      `code span` counts as one word. Counted on pandoc's reading of the page (pandoc -t
      json); every lesson's count is printed. Without pandoc this part is skipped.
  (e) a lesson with a worklog (worklog/README.md, or a WORKLOG.md) whose README.md does not link to it.
  (f) a code block whose language the site's highlighter does not know (pandoc
      --list-highlight-languages, plus cuda, docs/syntax/cuda.xml, and the names
      docs/filters/site.lua handles itself: sh, shell, text): pandoc would look such a name
      up by file extension, which loads every syntax it has (about 0.5 s per page), and
      leave the block unhighlighted. Without pandoc this part is skipped.
  (g) the top-level README's lesson table is not the lessons of the descriptors
      (lessons/NN-*/lesson.mk): a row per lesson, in order, linking its page, "(sm_90a)"
      exactly where the descriptor says arch := sm_90a.
  (h) a grader message quoted in a lesson's table (the "the grader says" tables) that the
      sources print nowhere: a text that kept an old wording (tests/docs/quoted_messages.py).
ROOT may also be a fixture tree (tests/docs/selftest.sh). Standard library only (+ pandoc).
"""
import glob
import json
import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fence_bodies  # noqa: E402
import quoted_messages  # noqa: E402

MAX_WORDS = 5000

# (a) issue references. The verb "issue" is told apart by the word before it.
ISSUE_HASH = re.compile(r"\b(?:issues?|PRs?|pull requests?)\s*#\s*\d+", re.I)
ISSUE_WORD = re.compile(r"\b(issue|pull request)\s+(\d+)\b", re.I)
ISSUE_LIST = re.compile(r"\b(issues|pull requests|PRs)\s+\d+\s*(?:,|and|or|&)\s*#?\d+", re.I)
PR_WORD = re.compile(r"\bPRs?\s+\d+\b")       # upper case only: "pr" is no word of ours
HASH_NUMBER = re.compile(r"(?<![\w&#/])#(\d+)(?![\w-])")
VERB_BEFORE = {"can", "cannot", "could", "will", "would", "may", "might", "must", "should",
               "shall", "to", "not", "and", "or", "then", "also", "only", "we", "they", "you",
               "warps", "threads", "schedulers", "sms", "units", "pipes", "cores", "lanes",
               "blocks", "ctas", "both", "all", "never", "still", "does", "do", "did"}
NOT_ISSUE_BEFORE = {"todo", "step", "item", "case", "row", "column", "line", "lane", "warp",
                    "thread", "block", "no", "number", "rank", "tile", "stage", "slot", "buffer"}
# (a) commit hashes.
HEX_WORD = re.compile(r"(?<![\w.#&-])[0-9a-f]{7,40}(?![\w-])")
DIGITS_AFTER = re.compile(r"\b(?:commit|commits|committed(?:\s+as)?|hash|sha|revision|rev)\s+(\d{7,40})\b", re.I)
UUID = re.compile(r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b")


def blank(text, start, end):
    """text with [start, end) replaced by spaces, newlines kept (line numbers stay true)."""
    return text[:start] + re.sub(r"[^\n]", " ", text[start:end]) + text[end:]


def mask(text, spans):
    for s, e in sorted(spans, reverse=True):
        text = blank(text, s, e)
    return text


def code_block_spans(text):
    """Character spans of every fenced code block's body (fence lines kept)."""
    offsets = [0]
    for line in text.split("\n"):
        offsets.append(offsets[-1] + len(line) + 1)
    spans = []
    for f in fence_bodies.fences(text):
        first = f["start"]                      # 0-based index of the first body line
        last = (f["end"] - 1) if f["end"] else len(offsets) - 1
        if last > first:
            spans.append((offsets[first], offsets[last] - 1))
    return spans


def math_spans(text):
    spans = [m.span() for m in re.finditer(r"\$\$.+?\$\$", text, re.S)]
    rest = mask(text, spans)
    spans += [m.span() for m in re.finditer(r"(?<![\\$])\$(?=\S)[^$\n]+?(?<=\S)\$(?!\d)", rest)]
    return spans


def line_of(text, pos):
    return text.count("\n", 0, pos) + 1


def word_before(text, pos):
    m = re.search(r"([A-Za-z']+)\W*$", text[max(0, pos - 40):pos])
    return m.group(1).lower() if m else ""


def references(text):
    """[(line, what)] for each issue, pull request or commit hash a lesson text names."""
    found = []
    code = code_block_spans(text)
    no_code = mask(text, code)
    inline = [m.span() for m in re.finditer(r"(`+)(?!`).+?(?<!`)\1(?!`)", no_code, re.S)]
    no_math = mask(text, math_spans(mask(text, code + inline)))   # math found outside code only
    prose = mask(no_math, code + inline)
    prose = re.sub(r"\]\([^)\s]*\)", lambda m: "]" + " " * (len(m.group(0)) - 1), prose)  # link targets
    prose = re.sub(r"""\b(?:href|id|src)=("[^"]*"|'[^']*')""", lambda m: " " * len(m.group(0)), prose)
    for m in ISSUE_HASH.finditer(prose):
        found.append((m.start(), f"names an issue or pull request: {m.group(0)!r}"))
    for m in ISSUE_LIST.finditer(prose):
        found.append((m.start(), f"names issues or pull requests: {m.group(0)!r}"))
    for m in ISSUE_WORD.finditer(prose):
        if word_before(prose, m.start()) not in VERB_BEFORE:
            found.append((m.start(), f"names an issue or pull request: {m.group(0)!r}"))
    for m in PR_WORD.finditer(prose):
        found.append((m.start(), f"names a pull request: {m.group(0)!r}"))
    for m in HASH_NUMBER.finditer(prose):
        before = prose[max(0, m.start() - 12):m.start()]
        if re.search(r"(?:issues?|PRs?|requests?)\s*$", before, re.I):
            continue                                  # already reported by ISSUE_HASH
        if word_before(prose, m.start()) in NOT_ISSUE_BEFORE:
            continue
        found.append((m.start(), f"names an issue or pull request: {m.group(0)!r}"))
    hashes = no_math
    hashes = mask(hashes, [u.span() for u in UUID.finditer(hashes)])
    for m in HEX_WORD.finditer(hashes):
        w = m.group(0)
        if re.search(r"[a-f]", w) and re.search(r"\d", w) and not hashes[max(0, m.start() - 2):m.start()].lower().endswith("0x"):
            found.append((m.start(), f"names a commit hash: {w!r} (hashes belong in docs/results)"))
    for m in DIGITS_AFTER.finditer(hashes):
        found.append((m.start(1), f"names a commit hash: {m.group(1)!r} (hashes belong in docs/results)"))
    seen, out = set(), []
    for pos, what in sorted(found):
        key = (line_of(text, pos), what)
        if key not in seen:
            seen.add(key)
            out.append(key)
    return out


def count_words(node):
    """Words of prose in pandoc's JSON AST: Str with a letter or digit, a code span as one."""
    if isinstance(node, list):
        return sum(count_words(n) for n in node)
    if not isinstance(node, dict):
        return 0
    t = node.get("t")
    if t in ("CodeBlock", "RawBlock", "RawInline", "Math"):
        return 0
    if t == "Str":
        return 1 if re.search(r"\w", node["c"]) else 0
    if t == "Code":
        return 1
    if t == "Link" or t == "Image":
        return count_words(node["c"][1])          # the text, not the target
    return count_words(node.get("c", []))


def words_of(paths, pandoc):
    """Words of prose of some pages together (pandoc reads them as one document)."""
    if not paths:
        return 0
    out = subprocess.run([pandoc, "--from", "commonmark_x", "--to", "json", *paths],
                         capture_output=True, text=True, check=True).stdout
    return count_words(json.loads(out)["blocks"])


# (f) the languages a code block may name: pandoc's own, ours (docs/syntax/cuda.xml), and those
# docs/filters/site.lua renames or writes plain before the highlighter sees them
SITE_LANGUAGES = {"cuda", "sh", "shell", "text"}


def fence_languages(text):
    """[(line, language)] of the code blocks of a page that name one (first word, or first .class)."""
    out = []
    for f in fence_bodies.fences(text):
        info = f["info"]
        if info.startswith("{"):
            cls = re.search(r"(?:^|[\s{])\.([\w+-]+)", info)
            lang = cls.group(1) if cls else ""
        else:
            lang = info.split()[0] if info else ""
        if lang:
            out.append((f["start"], lang))
    return out


def known_languages(pandoc):
    out = subprocess.run([pandoc, "--list-highlight-languages"], capture_output=True, text=True, check=True).stdout
    return {l.strip().lower() for l in out.splitlines() if l.strip()} | SITE_LANGUAGES


def is_worklog(md):
    """A lesson's worklog: worklog/README.md (the folder of its experiments), or a WORKLOG*.md."""
    return os.path.basename(md).upper().startswith("WORKLOG") or \
        os.path.basename(os.path.dirname(md)) == "worklog"


def lesson_table_problems(root):
    """The README's lesson table against the descriptors (lessons/NN-*/lesson.mk): a row per
    lesson, in order, linking its page, marked "(sm_90a)" exactly where the descriptor says
    arch := sm_90a. Nothing to check in a tree without a README table or descriptors."""
    readme = os.path.join(root, "README.md")
    if not os.path.exists(readme) or not os.path.exists(os.path.join(root, "mk", "lessons.mk")):
        return []
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "reference", "tools"))
    from lessons import lessons
    descs = lessons(root)
    rows = re.findall(r"^\| (\d\d) \| \[[^\]]*\]\(lessons/([^/)]+)/README\.md\) \|(.*)\|\s*$",
                      open(readme, encoding="utf-8").read(), re.M)
    errors = []
    if [int(n) for n, _, _ in rows] != list(descs):
        errors.append("README.md: the lesson table's rows (%s) are not the lessons (%s)" % (
            " ".join(n for n, _, _ in rows), " ".join("%02d" % n for n in descs)))
    for n, folder, idea in rows:
        d = descs.get(int(n))
        if not d:
            continue
        if folder != d["name"]:
            errors.append("README.md: lesson %s's row links lessons/%s, not lessons/%s" % (n, folder, d["name"]))
        if ("(sm_90a)" in idea) != (d["arch"] == "sm_90a"):
            errors.append("README.md: lesson %s's row %s \"(sm_90a)\" but its descriptor says arch := %s" % (
                n, "says" if "(sm_90a)" in idea else "does not say", d["arch"]))
    return errors


def main(root):
    errors = []
    lessons = sorted(d for d in glob.glob(os.path.join(root, "lessons", "[0-9][0-9]-*")) if os.path.isdir(d))
    pandoc = shutil.which(os.environ.get("PANDOC", "pandoc"))
    counts = []
    languages = known_languages(pandoc) if pandoc else None
    for d in lessons:
        name = os.path.basename(d)
        pages = sorted(glob.glob(os.path.join(d, "*.md")) + glob.glob(os.path.join(d, "worklog", "README.md")))
        for md in pages:
            rel = os.path.relpath(md, root)
            with open(md, encoding="utf-8") as fh:
                text = fh.read()
            for line, what in references(text):                                   # (a)
                errors.append(f"{rel}:{line}: {what}")
            for f in fence_bodies.include_fences(text):                           # (c)
                problem = fence_bodies.body_problem(f)
                if problem:
                    errors.append(f"{rel}:{f['start']}: include fence {f['include']}"
                                  f"{' region ' + f['region'] if f['region'] else ''}: {problem}"
                                  f" (fix: python3 tests/docs/fence_bodies.py --fix {rel})")
            for line, lang in fence_languages(text) if languages else []:                # (f)
                if lang.lower() not in languages:
                    errors.append(f"{rel}:{line}: a code block in '{lang}', a language the site's "
                                  f"highlighter does not know (name one of pandoc --list-highlight-languages, "
                                  f"or cuda, sh, text)")
        if pandoc:                                                                 # (d)
            words = words_of([p for p in pages if not is_worklog(p)], pandoc)
            counts.append((name, words, [os.path.basename(p) for p in pages if not is_worklog(p)]))
            if words > MAX_WORDS:
                errors.append(f"lessons/{name}: the student path has {words} words of prose "
                              f"(at most {MAX_WORDS}; move history and sweeps to the worklog, worklog/README.md)")
        readme = os.path.join(d, "README.md")                                      # (e)
        for wl in (p for p in pages if is_worklog(p)):
            if os.path.exists(readme):
                target = os.path.relpath(wl, d)  # worklog/README.md, or WORKLOG.md
                with open(readme, encoding="utf-8") as fh:
                    if not re.search(r"\]\(\s*(?:\./)?" + re.escape(target) + r"(?:#[^)]*)?\s*\)", fh.read()):
                        errors.append(f"lessons/{name}/README.md: no link to its worklog "
                                      f"{target} (end the page with one)")
    errors += lesson_table_problems(root)                                          # (g)
    errors += quoted_messages.problems(root)                                       # (h)
    if counts:
        print("docs-texts: words of prose on each lesson's student path (code and math not counted):")
        for name, words, pages in counts:
            print(f"  {name:32s} {words:6d}  {'OVER ' + str(MAX_WORDS) if words > MAX_WORDS else 'ok'}"
                  f"  ({', '.join(pages)})")
    else:
        print("docs-texts: SKIP word counts: pandoc not installed" if not pandoc else "docs-texts: no lessons")
    for e in errors:
        print("docs-texts: " + e)
    print(f"docs-texts: {len(lessons)} lessons: " + (f"FAILED, {len(errors)} problems" if errors else "OK"))
    return 1 if errors else 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1]))

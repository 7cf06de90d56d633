#!/usr/bin/env python3
"""reference/tools/new_lesson.py: `make new-lesson NUM=16 NAME=paged-decode [TITLE="..."]`.

Writes a lesson that builds, grades on the GPU and on the CPU emulator, appears in `make grade`
and on the site, with no other file edited: from reference/tools/lesson_template/,
    solutions/NN-NAME/FILE     the solution, its TODO(1) marked (FILE: NAME with _ for -, .cu)
    lessons/NN-NAME/lesson.mk  its descriptor (fp32, d 64 and 128, the fp32 emulator)
    lessons/NN-NAME/README.md  the text's outline
    lessons/NN-NAME/FILE       the starter, made from the solution (reference/tools/starters.py)
and the lesson's row in README.md's lesson table, in order (make docs-texts holds the table to
the descriptors)
Then replace the template's kernel with the lesson's, mark its TODOs, edit the descriptor and
run `make starters` (CONTRIBUTING.md, "Adding a lesson").
Errors (exit 2, nothing written): NUM not in 1..99, NAME not lower-case words joined by '-', a
lesson NN that exists, a TITLE with a double quote or a backslash."""
import glob
import os
import re
import sys
import starters

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
TEMPLATE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "lesson_template")


def fail(msg):
    print("new-lesson: " + msg)
    sys.exit(2)


def add_table_row(nn, folder, title):
    """README.md's lesson table gets the lesson's row, before the first row of a later lesson (or
    after the last row); a README without the table is left alone."""
    path = os.path.join(ROOT, "README.md")
    lines = (starters.read(path) or "").split("\n")
    rows = [i for i, l in enumerate(lines) if re.match(r"^\| \d\d \| \[", l)]
    if not rows:
        return
    at = next((i for i in rows if lines[i][2:4] > nn), rows[-1] + 1)
    lines.insert(at, "| %s | [%s](lessons/%s/README.md) | %s |" % (nn, title, folder, "what the lesson adds, in a line"))
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines))
    print("new-lesson: README.md: a row in the lesson table (write its idea there)")


def main(argv):
    if len(argv) < 2:
        fail("usage: make new-lesson NUM=16 NAME=paged-decode [TITLE=\"one line\"]")
    num, name = argv[0], argv[1]
    title = argv[2] if len(argv) > 2 and argv[2] else name.replace("-", " ")
    if not re.fullmatch(r"[0-9]{1,2}", num) or not 1 <= int(num) <= 99:
        fail("NUM=%r: a lesson number from 1 to 99" % num)
    if not re.fullmatch(r"[a-z][a-z0-9]*(-[a-z0-9]+)*", name):
        fail("NAME=%r: lower-case words joined by '-' (e.g. paged-decode)" % name)
    if '"' in title or "\\" in title:
        fail("TITLE: no double quote or backslash (it becomes a C string)")
    n = int(num)
    nn = "%02d" % n
    taken = [p for kind in ("lessons", "solutions") for p in sorted(glob.glob(os.path.join(ROOT, kind, nn + "-*")))]
    if taken:
        fail("lesson %s exists: %s" % (nn, os.path.relpath(taken[0], ROOT)))
    fname = name.replace("-", "_") + ".cu"
    subst = {"@NN@": nn, "@N@": str(n), "@NAME@": name, "@TITLE@": title, "@FILE@": fname}

    def fill(template):
        text = open(os.path.join(TEMPLATE, template), encoding="utf-8").read()
        for k, v in subst.items():
            text = text.replace(k, v)
        return text

    folder = nn + "-" + name
    files = {os.path.join("solutions", folder, fname): fill("kernel.cu"),
             os.path.join("lessons", folder, "lesson.mk"): fill("lesson.mk"),
             os.path.join("lessons", folder, "README.md"): fill("README.md")}
    for path, text in files.items():
        os.makedirs(os.path.join(ROOT, os.path.dirname(path)), exist_ok=True)
        with open(os.path.join(ROOT, path), "w", encoding="utf-8") as f:
            f.write(text)
        print("new-lesson: wrote %s" % path)
    add_table_row(nn, folder, title)
    if starters.write([os.path.join("solutions", folder)], force=False):
        return 1
    print("new-lesson: lesson %s is %s: make lesson%d && ./lesson%d, make emu-lesson%d, make docs" % (nn, folder, n, n, n))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

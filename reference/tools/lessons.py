#!/usr/bin/env python3
"""reference/tools/lessons.py: the lessons' descriptors, lessons/NN-name/lesson.mk, read without
Make (the format is Make's `KEY := value` lines, '#' comments; CONTRIBUTING.md, "The lesson
descriptor"). The tests (emulator grader, structure, compile and text checks, mutants) read them here.

    from lessons import lessons
    lessons()        # {9: {"dir": "lessons/09-hopper-wgmma", "name": "09-hopper-wgmma",
                     #      "source": "hopper.cu", "arch": "sm_90a", ...}, ...} in lesson order
    python3 reference/tools/lessons.py [KEY]   one line per lesson: its number, name and KEY's value
Errors: a line that is neither a comment nor `KEY := value`, or a key Make does not read
(mk/lessons.mk's LESSON_KEYS), raises ValueError naming the file and line."""
import glob
import os
import re
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
LINE = re.compile(r"^([a-z_]+)\s*:=\s*(.*)$")


def keys():
    """The keys Make reads (mk/lessons.mk, LESSON_KEYS): the one list of them."""
    text = open(os.path.join(ROOT, "mk", "lessons.mk")).read()
    m = re.search(r"^LESSON_KEYS\s*:=\s*((?:.*\\\n)*.*)$", text, re.M)
    return m.group(1).replace("\\\n", " ").split()


def read(path, known):
    out = dict.fromkeys(known, "")
    for i, line in enumerate(open(path, encoding="utf-8"), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        m = LINE.match(line)
        if not m:
            raise ValueError("%s:%d: not a `KEY := value` line" % (os.path.relpath(path, ROOT), i))
        if m.group(1) not in known:
            raise ValueError("%s:%d: unknown key %r (the keys: %s)" % (os.path.relpath(path, ROOT), i, m.group(1),
                                                                     " ".join(known)))
        out[m.group(1)] = " ".join(m.group(2).split())
    return out


def lessons(root=ROOT):
    known = keys()
    out = {}
    for path in sorted(glob.glob(os.path.join(root, "lessons", "[0-9][0-9]-*", "lesson.mk"))):
        d = os.path.dirname(path)
        name = os.path.basename(d)
        desc = read(path, known)
        desc.update(dir=os.path.relpath(d, root), name=name)
        out[int(name[:2])] = desc
    return out


def split(value, sep="|"):
    """A list value (emu_cases, emu_builds): its items, stripped."""
    return [v.strip() for v in value.split(sep) if v.strip()]


if __name__ == "__main__":
    key = sys.argv[1] if len(sys.argv) > 1 else None
    for n, d in lessons().items():
        print("%d %s%s" % (n, d["name"], " " + d[key] if key else ""))

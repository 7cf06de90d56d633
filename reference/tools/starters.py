#!/usr/bin/env python3
"""reference/tools/starters.py: every starter is made from its solution.

A solution marks what the student writes, and carries what the starter shows in its place,
with comment lines only (so the solution compiles and its results fingerprint,
reference/tools/source_hash.py, does not change):

    // TODO(3) begin                 the answer to TODO(3) starts here ...
    //| /* TODO(3): the new running max, from m and the block's max. */
    //| (void)m;                     ... a line only the starter has: "//| " is taken out, the
    float m_new = fmaxf(m, m_blk);       indentation before it kept ("//|" alone: an empty line)
    // TODO(3) end                   ... and ends here

Between `// NAME begin` and `// NAME end` (NAME is TODO(k) or `solution`, for a part of the
solution that is no TODO's answer, such as its own header line) every line is the solution's
alone: the starter drops it and the two marker lines, and keeps the block's `//|` lines, in
their order. A `//|` line may also stand outside a block. Every other line is in both files.
So a solution reads as a textbook page: each TODO's instructions, then its answer.

    python3 reference/tools/starters.py --check [DIR...]  exit 1 when a committed starter is
                                                          not what its solution makes (a diff)
    python3 reference/tools/starters.py --write [DIR...]  write the starters; a starter edited
                                                          by hand since it was last made is
                                                          kept, and named (exit 1), unless
                                                          --force
    python3 reference/tools/starters.py --show FILE       print the starter FILE makes
    python3 reference/tools/starters.py --upto N FILE     print it with TODO(1)..TODO(N) written (the
                                                          solution's answers): a student's file at
                                                          that point, for the step ladders' tests

The same commands keep the shared headers made from the solutions: a header in reference/include/
or tests/ (an emulator's) holds, between

    // [generated from solutions/09-hopper-wgmma/hopper.cu, regions ptx-wrappers descriptor]
    // [end generated]

those regions of that solution, in that order, as the solution has them ("// [region NAME]" ...
"// [end NAME]"), without the starter markup and without the markers of regions nested in
them. So a PTX wrapper is written once, in the lesson that teaches it; a later lesson includes
the header, and the teaching lesson's starter, which has TODOs in their place, is not handed
the answers through a header it includes.

DIR is a lesson folder (lessons/NN-name or solutions/NN-name); none: every lesson. The pair
is solutions/NN-name/F and lessons/NN-name/F, for each F of the solution's folder that has
markers (a lesson's folder may hold other files, which this leaves alone). "Last made" is the
copy kept in build/starters/ at each --write, or, before the first, the starter as committed
(git HEAD): make test fails when a committed starter is not what its solution makes, so the
committed one is always the generator's.
Errors: a marker without its end, a nested or misnamed block, a `//|` line that ends in a
backslash (in the solution it would continue the comment onto the next line): exit 2 with
file and line."""
import difflib
import glob
import os
import re
import subprocess
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
BEGIN = re.compile(r"^\s*//\s*(TODO\(\w+\)|solution) begin\b")
END = re.compile(r"^\s*//\s*(TODO\(\w+\)|solution) end\b")
STARTER_LINE = re.compile(r"^(\s*)//\|(?: (.*)|)$")
KEEP = os.path.join("build", "starters")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from source_hash import code_of  # noqa: E402  (the code a compiler sees: comments dropped)


class MarkError(Exception):
    pass


def has_markers(text):
    return any(BEGIN.match(l) or STARTER_LINE.match(l) for l in text.splitlines())


def starter_of(text, path="solution", answered=()):
    """The starter that the marked solution `text` makes (see the module's docstring); with the
    TODO numbers `answered`, the starter with those TODOs written: their blocks keep the
    solution's lines and drop their //| lines (a student's file part of the way through)."""
    out, block = [], None  # block: (name, line of its begin)
    for i, line in enumerate(text.split("\n"), 1):
        b, e, s = BEGIN.match(line), END.match(line), STARTER_LINE.match(line)
        if b:
            if block:
                raise MarkError("%s:%d: '%s begin' inside the block '%s' opened at line %d (blocks do "
                                "not nest)" % (path, i, b.group(1), block[0], block[1]))
            block = (b.group(1), i)
        elif e:
            if not block or block[0] != e.group(1):
                raise MarkError("%s:%d: '%s end' closes no block%s" % (path, i, e.group(1),
                                "" if not block else " (the open one is '%s', line %d)" % block))
            block = None
        elif s:
            if line.endswith("\\"):
                raise MarkError("%s:%d: a //| line ends in a backslash: in the solution it continues the "
                                "comment onto the next line" % (path, i))
            if not (block and block[0] in answered):
                out.append(s.group(1) + s.group(2) if s.group(2) is not None else "")
        elif not block or block[0] in answered:
            out.append(line)
    if block:
        raise MarkError("%s:%d: '%s begin' has no '%s end'" % (path, block[1], block[0], block[0]))
    markup_only_in_comments(text, path)
    return "\n".join(out)


def markup_only_in_comments(text, path):
    """The markup must be invisible to the compiler: the solution's code (reference/tools/source_hash.py)
    is the same with every marker and //| line taken out. It is not when a //| line inside a
    /* */ comment holds a */ (the comment ends there) or a marker sits in a string."""
    lines = text.split("\n")
    markup = [i for i, l in enumerate(lines) if BEGIN.match(l) or END.match(l) or STARTER_LINE.match(l)]
    bare = "\n".join(l for i, l in enumerate(lines) if i not in set(markup))
    if code_of(bare) != code_of(text):
        for i in markup:  # the first markup line whose removal alone changes the code
            if code_of("\n".join(lines[:i] + lines[i + 1:])) != code_of(text):
                raise MarkError("%s:%d: this marker line changes the code the compiler sees (inside a /* */ "
                                "comment a //| line must not hold */): move it out of the comment" % (path, i + 1))
        raise MarkError("%s: the markers change the code the compiler sees" % path)


GEN_BEGIN = re.compile(r"^// \[generated from (\S+), regions? ([\w\- ]+)\]\s*$")
GEN_END = re.compile(r"^// \[end generated\]\s*$")
REGION = re.compile(r"^\s*// \[(region|end) ([\w.\-]+)\]\s*$")


def region_of(text, name, path):
    """Region NAME of a marked solution, as its solution compiles it (no markup, no nested markers)."""
    lines = text.split("\n")
    start = [i for i, l in enumerate(lines) if re.match(r"^\s*// \[region %s\]\s*$" % re.escape(name), l)]
    end = [i for i, l in enumerate(lines) if re.match(r"^\s*// \[end %s\]\s*$" % re.escape(name), l)]
    if len(start) != 1 or len(end) != 1 or end[0] < start[0]:
        raise MarkError("%s: no single region '%s' (a line '// [region %s]', then '// [end %s]')" % (path, name, name, name))
    return [l for l in lines[start[0] + 1:end[0]]
            if not (BEGIN.match(l) or END.match(l) or STARTER_LINE.match(l) or REGION.match(l))]


def header_of(text, path):
    """The header `text` with every generated span made anew from its solution's regions."""
    out, lines, i = [], text.split("\n"), 0
    while i < len(lines):
        out.append(lines[i])
        m = GEN_BEGIN.match(lines[i])
        i += 1
        if not m:
            continue
        src = os.path.join(ROOT, m.group(1))
        body = read(src)
        if body is None:
            raise MarkError("%s:%d: cannot read %s" % (path, i, m.group(1)))
        for name in m.group(2).split():
            out.extend(region_of(body, name, m.group(1)))
        while i < len(lines) and not GEN_END.match(lines[i]):
            i += 1
        if i == len(lines):
            raise MarkError("%s:%d: '[generated from' without '// [end generated]'" % (path, i))
    return "\n".join(out)


def headers():
    """Every header with a generated span: reference/include/*.h and the emulators' in tests/."""
    paths = glob.glob(os.path.join(ROOT, "reference", "include", "*.h")) + \
        glob.glob(os.path.join(ROOT, "tests", "*", "*.h"))
    return sorted(p for p in paths if any(GEN_BEGIN.match(l) for l in read(p).split("\n")))


def pairs(dirs):
    """(solution path, starter path) for every marked file of the given lesson folders."""
    names = sorted({os.path.basename(os.path.normpath(d)) for d in dirs}) if dirs else \
        sorted(os.path.basename(p) for p in glob.glob(os.path.join(ROOT, "solutions", "[0-9][0-9]-*")))
    out = []
    for name in names:
        for sol in sorted(glob.glob(os.path.join(ROOT, "solutions", name, "*"))):
            if os.path.isfile(sol) and has_markers(open(sol, encoding="utf-8").read()):
                out.append((sol, os.path.join(ROOT, "lessons", name, os.path.basename(sol))))
    return out


def rel(p):
    return os.path.relpath(p, ROOT)


def read(p):
    try:
        with open(p, encoding="utf-8") as f:
            return f.read()
    except OSError:
        return None


def last_made(starter):
    kept = read(os.path.join(ROOT, KEEP, rel(starter)))
    if kept is not None:
        return kept
    r = subprocess.run(["git", "-C", ROOT, "show", "HEAD:" + rel(starter)], capture_output=True, text=True)
    return r.stdout if r.returncode == 0 else None


def stale(path, have, want, source):
    """Names a committed file that is not what `source` makes, with the head of the diff."""
    print("starters: %s is not what %s makes (make starters writes it):" % (rel(path), source))
    diff = list(difflib.unified_diff((have or "").splitlines(), want.splitlines(), rel(path) + " (committed)",
                                     "made from " + source, lineterm=""))
    print("\n".join(diff[:40]) + ("\n  ... (%d more diff lines)" % (len(diff) - 40) if len(diff) > 40 else ""))


def check(dirs):
    bad = 0
    todo = pairs(dirs)
    if not todo:
        print("starters: no marked solution found")
        return 1
    for sol, starter in todo:
        want, have = starter_of(read(sol), rel(sol)), read(starter)
        if have != want:
            bad += 1
            stale(starter, have, want, rel(sol))
    hs = [] if dirs else headers()
    for h in hs:
        have = read(h)
        want = header_of(have, rel(h))
        if want != have:
            bad += 1
            stale(h, have, want, "its solution's regions")
    if not bad:
        print("starters: each of the %d starters is what its solution makes%s" % (
            len(todo), ", and so are the %d shared headers' generated parts" % len(hs) if hs else ""))
    return 1 if bad else 0


def write(dirs, force):
    refused = 0
    for sol, starter in pairs(dirs):
        want, have = starter_of(read(sol), rel(sol)), read(starter)
        if have == want:
            continue
        if have is not None and not force and have != last_made(starter):
            refused += 1
            print("starters: %s was edited since it was last made: kept (edit %s instead, then make "
                  "starters; FORCE=1 overwrites)" % (rel(starter), rel(sol)))
            continue
        with open(starter, "w", encoding="utf-8") as f:
            f.write(want)
        keep = os.path.join(ROOT, KEEP, rel(starter))
        os.makedirs(os.path.dirname(keep), exist_ok=True)
        with open(keep, "w", encoding="utf-8") as f:
            f.write(want)
        print("starters: wrote %s" % rel(starter))
    for h in [] if dirs else headers():
        have = read(h)
        want = header_of(have, rel(h))
        if want != have:
            with open(h, "w", encoding="utf-8") as f:
                f.write(want)
            print("starters: wrote %s (its generated part)" % rel(h))
    return 1 if refused else 0


def main(argv):
    if len(argv) >= 2 and argv[0] == "--show":
        sys.stdout.write(starter_of(read(argv[1]), argv[1]))
        return 0
    if len(argv) >= 3 and argv[0] == "--upto" and argv[1].isdigit():
        sys.stdout.write(starter_of(read(argv[2]), argv[2], {"TODO(%d)" % k for k in range(1, int(argv[1]) + 1)}))
        return 0
    force = "--force" in argv
    args = [a for a in argv if a != "--force"]
    if not args or args[0] not in ("--check", "--write"):
        print(__doc__)
        return 2
    return check(args[1:]) if args[0] == "--check" else write(args[1:], force)


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except MarkError as e:
        print("starters: " + str(e))
        sys.exit(2)

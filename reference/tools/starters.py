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

    starters.py --check [DIR...]  exit 1, with the diff, when a committed starter is not what its
                                  solution makes
    starters.py --write [DIR...]  write the starters; one edited by hand since it was last made is
                                  kept and named (exit 1), unless --force
    starters.py --show FILE       print the starter FILE makes
    starters.py --upto N FILE     print it with TODO(1)..TODO(N) written (the solution's answers):
                                  a student's file at that point, for the step ladders' tests

The same commands keep the shared headers made from the solutions: a header in reference/include/
or tests/ (an emulator's) holds, between `// [generated from solutions/09-hopper-wgmma/hopper.cu,
regions ptx-wrappers descriptor]` and `// [end generated]`, those regions of that solution in that
order ("// [region NAME]" ... "// [end NAME]"), without the starter markup or nested region markers.
So a PTX wrapper is written once, in the lesson that teaches it; a later lesson includes the header,
and the teaching lesson's starter, which has TODOs in their place, is not handed the answers.

DIR is a lesson folder (lessons/NN-name or solutions/NN-name; none: every lesson): each file of
solutions/NN-name/ with markers makes lessons/NN-name/ its name (other files of a lesson's folder
are left alone). "Last made" is the copy kept in build/starters/ at each --write, or before the
first the starter as committed (git HEAD), which make test holds to the generator's output.
Errors (exit 2, with file and line): a marker without its end, a nested or misnamed block, a `//|`
line that ends in a backslash (in the solution it would continue the comment onto the next line)."""
import difflib
import glob
import os
import re
import subprocess
import sys
from source_hash import code_of  # the code a compiler sees: comments dropped

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
BEGIN = re.compile(r"^\s*//\s*(TODO\(\w+\)|solution) begin\b")
END = re.compile(r"^\s*//\s*(TODO\(\w+\)|solution) end\b")
STARTER_LINE = re.compile(r"^(\s*)//\|(?: (.*)|)$")
KEEP = os.path.join("build", "starters")


class MarkError(Exception):
    pass


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


GENERATED = r"// \[generated from (\S+), regions? ([\w\- ]+)\]"
GEN_BEGIN = re.compile("^" + GENERATED + r"\s*$", re.M)
GEN_SPAN = re.compile("^(" + GENERATED + r"[ \t]*\n)(?:.*\n)*?(// \[end generated\][ \t]*)$", re.M)
REGION = re.compile(r"^\s*// \[(region|end) ([\w.\-]+)\]\s*$")


def region_of(text, name, path):
    """Region NAME of a marked solution, as its solution compiles it (no markup, no nested markers)."""
    lines = text.split("\n")
    marks = [(m.group(1), i) for i, m in enumerate(map(REGION.match, lines)) if m and m.group(2) == name]
    if [kind for kind, _ in marks] != ["region", "end"]:
        raise MarkError("%s: no single region '%s' (a line '// [region %s]', then '// [end %s]')" % (path, name, name, name))
    return [l for l in lines[marks[0][1] + 1:marks[1][1]]
            if not (BEGIN.match(l) or END.match(l) or STARTER_LINE.match(l) or REGION.match(l))]


def header_of(text, path):
    """The header `text` with every generated span made anew from its solution's regions."""
    def span(m):
        body = read(os.path.join(ROOT, m.group(2)))
        if body is None:
            raise MarkError("%s: cannot read %s" % (path, m.group(2)))
        regions = [l for name in m.group(3).split() for l in region_of(body, name, m.group(2))]
        return m.group(1) + "".join(l + "\n" for l in regions) + m.group(4)
    if len(GEN_SPAN.findall(text)) != len(GEN_BEGIN.findall(text)):
        raise MarkError("%s: a '[generated from' line without its '// [end generated]'" % path)
    return GEN_SPAN.sub(span, text)


def headers():
    """Every header with a generated span: reference/include/*.h and the emulators' in tests/."""
    paths = glob.glob(os.path.join(ROOT, "reference", "include", "*.h"))
    return sorted(p for p in paths + glob.glob(os.path.join(ROOT, "tests", "*", "*.h")) if GEN_BEGIN.search(read(p)))


def pairs(dirs):
    """(solution path, starter path) for every marked file of the given lesson folders (none: all)."""
    names = {os.path.basename(os.path.normpath(d)) for d in dirs} or {"[0-9][0-9]-*"}
    sols = sorted(p for name in names for p in glob.glob(os.path.join(ROOT, "solutions", name, "*")))
    return [(sol, os.path.join(ROOT, "lessons", *sol.split(os.sep)[-2:])) for sol in sols
            if os.path.isfile(sol) and any(BEGIN.match(l) or STARTER_LINE.match(l) for l in read(sol).splitlines())]


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


def made(dirs):
    """(file, as it is, as the generator makes it, its solution or None for a shared header): the
    starters of the given folders and, when none is given, every shared header."""
    for sol, starter in pairs(dirs):
        yield starter, read(starter), starter_of(read(sol), rel(sol)), rel(sol)
    for h in [] if dirs else headers():
        have = read(h)
        yield h, have, header_of(have, rel(h)), None


def check(dirs):
    files = list(made(dirs))
    starters = sum(1 for f in files if f[3])
    if not starters:
        print("starters: no marked solution found")
        return 1
    bad = [f for f in files if f[1] != f[2]]
    for path, have, want, source in bad:
        source = source or "its solution's regions"
        print("starters: %s is not what %s makes (make starters writes it):" % (rel(path), source))
        diff = list(difflib.unified_diff((have or "").splitlines(), want.splitlines(), rel(path) + " (committed)",
                                         "made from " + source, lineterm=""))
        print("\n".join(diff[:40]) + ("\n  ... (%d more diff lines)" % (len(diff) - 40) if len(diff) > 40 else ""))
    if not bad:
        headers_made = len(files) - starters
        print("starters: each of the %d starters is what its solution makes%s" % (
            starters, ", and so are the %d shared headers' generated parts" % headers_made if headers_made else ""))
    return 1 if bad else 0


def write(dirs, force):
    """Writes what differs; a starter is also kept in build/starters/, to tell a hand edit later."""
    refused = 0
    for path, have, want, source in made(dirs):
        if have == want:
            continue
        if source and have is not None and not force and have != last_made(path):
            refused += 1
            print("starters: %s was edited since it was last made: kept (edit %s instead, then make "
                  "starters; FORCE=1 overwrites)" % (rel(path), source))
            continue
        for f in [path] + ([os.path.join(ROOT, KEEP, rel(path))] if source else []):
            os.makedirs(os.path.dirname(f), exist_ok=True)
            with open(f, "w", encoding="utf-8") as out:
                out.write(want)
        print("starters: wrote %s%s" % (rel(path), "" if source else " (its generated part)"))
    return 1 if refused else 0


def main(argv):
    if argv[:1] == ["--show"] and len(argv) >= 2 or argv[:1] == ["--upto"] and len(argv) >= 3 and argv[1].isdigit():
        upto, path = (int(argv[1]), argv[2]) if argv[0] == "--upto" else (0, argv[1])
        sys.stdout.write(starter_of(read(path), path, {"TODO(%d)" % k for k in range(1, upto + 1)}))
        return 0
    args = [a for a in argv if a != "--force"]
    if args[:1] in (["--check"], ["--write"]):
        return check(args[1:]) if args[0] == "--check" else write(args[1:], force="--force" in argv)
    print(__doc__)
    return 2


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except MarkError as e:
        print("starters: " + str(e))
        sys.exit(2)

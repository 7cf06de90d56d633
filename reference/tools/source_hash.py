#!/usr/bin/env python3
"""The fingerprint of a solution that `make results` records and `make test` checks
(reference/tools/results.sh, tests/checks/check_results_fresh.sh): the first 16 hex digits of the sha256
of the source file followed by every file it includes with #include "...", directly or through
another such file, in the order first included: headers of reference/include, and files of the
course found by their path from the including file; a header that names its implementation,
`[implemented in PATH]` (PATH from the repository's root), brings that source in too, as if
included (reference/include/hopper_attention.h: lesson 09's solution, which lesson 15 links).
The PTX wrappers live in those headers, so a change to one of them makes the GPU results of
every solution that uses it stale, like a change to the solution itself. What is hashed is the
code: comments are dropped and each run of white space counts as one space, so a reworded
comment or a re-indented line (which cannot change what the compiler builds) does not ask for a
new GPU run; any change to a token, a string or a preprocessor line does.

    python3 reference/tools/source_hash.py FILE [FILE ...]   prints one fingerprint per line
Errors: a FILE that cannot be read exits 2 with its name."""
import hashlib
import os
import re
import sys

INCLUDE = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "include"))
ROOT = os.path.dirname(os.path.dirname(INCLUDE))
INCLUDE_RE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
IMPLEMENTED_RE = re.compile(r"\[implemented in ([\w./-]+)\]")


def headers_of(path, seen):
    """Files that `path` includes, depth first, each once (seen: those already taken): a name
    found next to the including file (lesson 15's "../../lessons/15-ring-attention/ring_block.h"),
    else the reference/include header of that name; then the sources it names as its
    implementation ([implemented in PATH])."""
    text = open(path, encoding="utf-8", errors="replace").read()
    near = [os.path.normpath(os.path.join(os.path.dirname(path), name)) for name in INCLUDE_RE.findall(text)]
    found = [h if os.path.isfile(h) else os.path.join(INCLUDE, os.path.basename(h)) for h in near]
    found += [os.path.join(ROOT, p) for p in IMPLEMENTED_RE.findall(text)]
    for f in found:
        if os.path.isfile(f) and os.path.realpath(f) not in [os.path.realpath(s) for s in seen]:
            seen.append(f)
            headers_of(f, seen)
    return seen


CODE_RE = re.compile(r'''
    (?P<comment> //[^\n]* | /\*.*?\*/ )                      # dropped
  | (?P<literal> "(?:\\.|[^"\\\n])*" | '(?:\\.|[^'\\\n])*' )   # kept as written
  | (?P<space> \s+ )                                        # one space; a newline stays one
  | (?P<other> [^"'/\s]+ | / )
''', re.S | re.X)


def code_of(text):
    """text without its comments, each run of white space one space; a preprocessor line (its
    continuations joined) stays a line of its own, since a newline ends it."""
    out = []
    for m in CODE_RE.finditer(text):
        if m.group("comment"):
            out.append(" ")
        elif m.group("space"):
            out.append("\n" if "\n" in m.group("space") else " ")
        else:
            out.append(m.group(0))
    lines = "".join(out).replace("\\\n", " ").split("\n")
    code = []
    for line in lines:
        line = " ".join(line.split())
        if line.startswith("#"):
            code.append("\n" + line + "\n")
        elif line:
            code.append(line + " ")
    return "".join(code)


def fingerprint(path):
    h = hashlib.sha256()
    for f in headers_of(path, [path]):
        with open(f, encoding="utf-8", errors="replace") as fh:
            h.update(code_of(fh.read()).encode())
    return h.hexdigest()[:16]


if __name__ == "__main__":
    try:
        for p in sys.argv[1:]:
            print(fingerprint(p))
    except OSError as e:
        print("source_hash.py: cannot read %s" % e.filename, file=sys.stderr)
        sys.exit(2)

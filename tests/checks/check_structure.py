#!/usr/bin/env python3
"""tests/checks/check_structure.py: the shape a lesson file must keep so that it reads like a textbook
(make check-structure, part of make test). Fails, naming file and line, when

  - a solution calls getenv: a solution holds one design, its experiments are variant builds
    (each lesson's worklog says how to rerun them);
  - a __global__ function (starter or solution) is longer than 200 lines: a kernel body hands
    out phases, each a device function of its own;
  - a solution file is longer than 850 lines (the markup for the starters and the site aside);
  - a PTX wrapper is defined outside its header in reference/include/ and the lesson that teaches
    it (its descriptor's `teaches`), or the teaching lesson's solution defines it differently from the header
    (compared token by token, comments and spacing aside): one definition, no drifting copies;
  - inline PTX (asm) appears in a lesson file outside the teaching lessons' wrappers: every other
    lesson calls the headers.

    python3 tests/checks/check_structure.py [ROOT]        check the tree (default: this repository)
    python3 tests/checks/check_structure.py --selftest    each rule fails on a planted violation
"""
import glob
import os
import re
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "reference", "tools"))

MAX_KERNEL_LINES = 200
MAX_SOLUTION_LINES = 850
STARTER_MARKUP = re.compile(r"^\s*//(\||\s*(TODO\(\w+\)|solution) (begin|end)\b)")
SITE_MARKUP = re.compile(r"^\s*// \[(region|end) [\w.\-]+\]\s*$")


def teaching_lessons(root):
    """header in reference/include/ptx_*.h -> the lesson (folder number) that teaches its wrappers,
    from the descriptors' `teaches` (lessons/NN-*/lesson.mk), or None when no lesson writes them
    (they are given wherever they are used)."""
    from lessons import lessons
    out = {os.path.basename(h): None for h in glob.glob(os.path.join(root, "reference", "include", "ptx_*.h"))}
    for n, d in lessons(root).items():
        for h in d["teaches"].split():
            out[h] = "%02d" % n
    return out


def strip_comments(text):
    """Comments and string contents blanked out, line structure kept (so line numbers hold)."""
    def blank(m):
        return re.sub(r"[^\n]", " ", m.group(0))
    return re.sub(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"', blank, text, flags=re.S)


def block_end(code, open_pos):
    """Index just past the brace that closes the one at open_pos."""
    depth = 0
    for i in range(open_pos, len(code)):
        if code[i] == "{":
            depth += 1
        elif code[i] == "}":
            depth -= 1
            if depth == 0:
                return i + 1
    return len(code)


def functions(code, lo=0, hi=None):
    """(name, start, end, is_global, head_start) of every function definition in code[lo:hi]
    that is not inside another function (members of structs included): a brace block whose
    head, the text since the previous ';', '}' or '{', holds a parameter list."""
    hi = len(code) if hi is None else hi
    out = []
    i, head_start = lo, lo
    while i < hi:
        c = code[i]
        if c in ";}":
            head_start = i + 1
        elif c == "#":  # a preprocessor line is no part of a declaration
            i = code.find("\n", i)
            i = hi if i < 0 else i
            head_start = i + 1
        elif c == "{":
            end = block_end(code, i)
            head = code[head_start:i]
            plain = re.sub(r"\b(__launch_bounds__|__align__|alignas|__attribute__)\s*\((?:[^()]|\([^()]*\))*\)", "", head)
            m = re.search(r"(\w+)\s*(?:<[^;{}()<>]*(?:<[^;{}()<>]*>[^;{}()<>]*)*>)?\s*\(", plain)
            if m and "=" not in plain[:m.start()] and m.group(1) not in ("if", "for", "while", "switch", "return"):
                line_start = code.rfind("\n", 0, head_start + len(head) - len(head.lstrip())) + 1
                out.append((m.group(1), head_start + len(head) - len(head.lstrip()), end, "__global__" in head,
                            max(line_start, head_start)))
            elif re.search(r"\b(struct|class|union|namespace)\b", plain):
                out.extend(functions(code, i + 1, end - 1))
            i = end
            head_start = end
            continue
        i += 1
    return out


def line_of(code, offset):
    return code.count("\n", 0, offset) + 1


def norm(text):
    return re.sub(r"\s+", "", text)


def descriptor_errors(root):
    """Each lesson folder has a descriptor (lessons/NN-*/lesson.mk) whose source exists in lessons/
    and solutions/, and the solution's LESSON struct (which the runner reads) says what the
    descriptor says: dtypes in order, causal, head dims, Hopper-only (needs_cc 90) for sm_90a, and
    LESSON_DECODE exactly where runner := decode."""
    from lessons import lessons
    errors = []
    descs = lessons(root)
    for d in sorted(glob.glob(os.path.join(root, "lessons", "[0-9][0-9]-*"))):
        if int(os.path.basename(d)[:2]) not in descs:
            errors.append("%s: no lesson.mk (make new-lesson writes one; CONTRIBUTING.md, \"The lesson "
                          "descriptor\")" % os.path.relpath(d, root))
    for n, desc in descs.items():
        where = "%s/lesson.mk" % desc["dir"]
        sol = os.path.join(root, "solutions", desc["name"], desc["source"])
        for f in (os.path.join(root, desc["dir"], desc["source"]), sol):
            if not os.path.isfile(f):
                errors.append("%s: source := %s, but %s does not exist" % (where, desc["source"], os.path.relpath(f, root)))
        if not os.path.isfile(sol):
            continue
        m = re.search(r"lesson_info LESSON = \{(.*?)\};", strip_comments(open(sol).read()), re.S)
        if not m:
            continue
        body = m.group(1)
        dims = re.search(r"\{([\d,\s]*)\}", body)
        tail = body[dims.end():] if dims else ""
        said = {"dtypes": " ".join(x.lower() for x in re.findall(r"DTYPE_BIT\(DTYPE_(\w+)\)", body)),
                "head_dims": " ".join(x for x in re.findall(r"\d+", dims.group(1)) if x != "0") if dims else "",
                "causal": "yes" if re.search(r"\)\s*,\s*1\s*,\s*\{", body) else "no",
                "arch": "sm_90a" if re.search(r",\s*90\s*$", tail.strip()) else desc["arch"] if desc["arch"] != "sm_90a" else "?",
                "runner": ("decode" if "LESSON_DECODE" in tail else "forward") if desc["runner"] in ("forward", "decode")
                else desc["runner"]}
        for k, v in said.items():
            if v != desc[k]:
                errors.append("%s: %s := %s, but the LESSON struct of %s says %s" % (
                    where, k, desc[k], os.path.relpath(sol, root), "flags %s LESSON_DECODE" % ("with" if v == "decode" else "without")
                if k == "runner" else v if k != "arch" else "needs_cc 90 (Hopper only)" if v == "sm_90a" else "needs_cc is not 90"))
    return errors


def check(root):
    errors = descriptor_errors(root) if os.path.isfile(os.path.join(root, "mk", "lessons.mk")) else []
    HEADERS = teaching_lessons(root)
    rel = lambda p: os.path.relpath(p, root)
    sources = sorted(glob.glob(os.path.join(root, "lessons", "[0-9][0-9]-*", "*.cu")) +
                     glob.glob(os.path.join(root, "solutions", "[0-9][0-9]-*", "*.cu")) +
                     glob.glob(os.path.join(root, "solutions", "[0-9][0-9]-*", "*.c")))
    header_defs = {}  # wrapper name -> (its header, the normalized definitions there: overloads too)
    for h in HEADERS:
        path = os.path.join(root, "reference", "include", h)
        if not os.path.exists(path):
            continue
        code = strip_comments(open(path).read())
        for name, s, e, _, ls in functions(code):
            header_defs.setdefault(name, (h, set()))[1].add(norm(code[ls:e]))
    for path in sources:
        text = open(path).read()
        code = strip_comments(text)
        is_solution = "/solutions/" in path.replace(os.sep, "/")
        lesson = os.path.basename(os.path.dirname(path))[:2]
        # the markup of the starter generator (reference/tools/starters.py) and of the site's
        # excerpts is not the solution's text
        nlines = sum(1 for l in text.split("\n") if not STARTER_MARKUP.match(l) and not SITE_MARKUP.match(l)) - \
            (1 if text.endswith("\n") else 0)
        if is_solution and nlines > MAX_SOLUTION_LINES:
            errors.append("%s: %d lines; a solution holds one design in at most %d (experiments go to the "
                          "lesson's worklog as variant builds)" % (rel(path), nlines, MAX_SOLUTION_LINES))
        if is_solution:
            for m in re.finditer(r"\bgetenv\s*\(", code):
                errors.append("%s:%d: getenv in a solution: an experiment's switch belongs in a variant build "
                              "(see the lesson's worklog), not in the design the lesson teaches"
                              % (rel(path), line_of(code, m.start())))
        markup = {k for k, l in enumerate(text.split("\n"), 1) if STARTER_MARKUP.match(l)}
        taught_here = {h for h, t in HEADERS.items() if t == lesson}
        for name, s, e, is_global, ls in functions(code):
            first, last = line_of(code, s), line_of(code, e)
            n = last - first + 1 - sum(1 for k in markup if first <= k <= last)
            if is_global and n > MAX_KERNEL_LINES:
                errors.append("%s:%d: __global__ %s is %d lines (at most %d: its body hands out phases, each a "
                              "device function)" % (rel(path), line_of(code, s), name, n, MAX_KERNEL_LINES))
            if name in header_defs:
                h, definitions = header_defs[name]
                if h not in taught_here:
                    errors.append("%s:%d: %s is defined here and in reference/include/%s: include the header "
                                  "instead (a wrapper is written in the lesson that teaches it and in the "
                                  "header, nowhere else)" % (rel(path), line_of(code, s), name, h))
                elif is_solution and norm(code[ls:e]) not in definitions:
                    errors.append("%s:%d: %s differs from its definition in reference/include/%s: the two copies "
                                  "must stay the same" % (rel(path), line_of(code, s), name, h))
        if not taught_here:
            for m in re.finditer(r"\basm\b", code):
                errors.append("%s:%d: inline PTX in a lesson that teaches no PTX wrapper: call a header of "
                              "reference/include (or add the wrapper there)" % (rel(path), line_of(code, m.start())))
    return errors


def selftest():
    bad = {
        "getenv": ("solutions/12-x/a.cu", '#include <stdlib.h>\nint f() { return getenv("X") != 0; }\n'),
        "kernel": ("lessons/05-x/a.cu", "__global__ void k(int *p) {\n" + "  p[0] = 1;\n" * 201 + "}\n"),
        "file": ("solutions/05-x/a.cu", "int x;\n" * 851),
        "wrapper-copy": ("solutions/11-x/a.cu", "__device__ __forceinline__ float ex2(float x) { return x; }\n"),
        "wrapper-drift": ("solutions/07-x/a.cu", "__device__ __forceinline__ float ex2(float x) { return x + 1; }\n"),
        "asm": ("solutions/12-x/a.cu", '__device__ void f() { asm volatile("membar.gl;"); }\n'),
    }
    header = "__device__ __forceinline__ float ex2(float x) { return x; }\n"
    failures = 0

    def fixture(d):  # the header, and lesson 07's descriptor: it teaches the header's wrappers
        os.makedirs(os.path.join(d, "reference", "include"))
        open(os.path.join(d, "reference", "include", "ptx_mma.h"), "w").write(header)
        os.makedirs(os.path.join(d, "lessons", "07-x"))
        open(os.path.join(d, "lessons", "07-x", "lesson.mk"), "w").write("teaches := ptx_mma.h\n")
    for what, (path, text) in sorted(bad.items()):
        with tempfile.TemporaryDirectory() as d:
            fixture(d)
            os.makedirs(os.path.join(d, os.path.dirname(path)), exist_ok=True)
            open(os.path.join(d, path), "w").write(text)
            errs = check(d)
            ok = len(errs) >= 1
            print("check-structure selftest: %-13s %s" % (what, "caught" if ok else "MISSED"))
            failures += not ok
    with tempfile.TemporaryDirectory() as d:  # the teaching lesson's identical copy passes
        fixture(d)
        os.makedirs(os.path.join(d, "solutions", "07-x"))
        open(os.path.join(d, "solutions", "07-x", "a.cu"), "w").write("/* mine */\n" + header)
        errs = check(d)
        print("check-structure selftest: %-13s %s" % ("clean", "passes" if not errs else "FAILS: " + errs[0]))
        failures += bool(errs)
    return failures


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--selftest":
        sys.exit(1 if selftest() else 0)
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    errors = check(root)
    for e in errors:
        print("check-structure: " + e)
    if errors:
        print("check-structure: %d problem(s)" % len(errors))
        sys.exit(1)
    print("check-structure: no getenv in solutions, every kernel <= %d lines, every solution <= %d lines, "
          "every PTX wrapper in its header and its teaching lesson only" % (MAX_KERNEL_LINES, MAX_SOLUTION_LINES))


if __name__ == "__main__":
    main()

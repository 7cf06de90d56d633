#!/usr/bin/env python3
"""tests/checks/starters_selftest.py: reference/tools/starters.py on planted cases (make check-starters).
Each marking error is refused with its line; a good marking makes the expected starter; --write
keeps a starter edited by hand and overwrites it with --force; --check fails on a stale starter."""
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
TOOL = os.path.join(HERE, "..", "..", "reference", "tools", "starters.py")
sys.path.insert(0, os.path.dirname(TOOL))
import starters  # noqa: E402

GOOD = """/* Lesson 99 solution: x. */
int f(int a) {
    // TODO(1) begin
    //| // TODO(1): return twice a.
    //| (void)a;
    //| return 0;
    return 2 * a;
    // TODO(1) end
}
//| #define STARTER_NOT_DONE 1
"""
GOOD_STARTER = """/* Lesson 99 solution: x. */
int f(int a) {
    // TODO(1): return twice a.
    (void)a;
    return 0;
}
#define STARTER_NOT_DONE 1
"""
BAD = {
    "no end": ("int x;\n// TODO(1) begin\nint y;\n", ":2: 'TODO(1) begin' has no"),
    "nested": ("// TODO(1) begin\n// TODO(2) begin\n// TODO(2) end\n// TODO(1) end\n", ":2: 'TODO(2) begin' inside"),
    "misnamed end": ("// TODO(1) begin\n// TODO(2) end\n", ":2: 'TODO(2) end' closes no block"),
    "backslash": ("//| #define A \\\nint x;\n", ":1: a //| line ends in a backslash"),
    "closes a comment": ("/* a comment\n//| b */\n */\nint x;\n", ":2: this marker line changes the code"),
}


def main():
    fails = 0
    got = starters.starter_of(GOOD, "good.cu")
    if got != GOOD_STARTER:
        print("starters selftest: the good case makes\n%s" % got)
        fails += 1
    for name, (text, want) in BAD.items():
        try:
            starters.starter_of(text, "bad.cu")
            print("starters selftest: %s: accepted" % name)
            fails += 1
        except starters.MarkError as e:
            if want not in str(e):
                print("starters selftest: %s: wrong message: %s" % (name, e))
                fails += 1
    # --check and --write in a copy of the layout (no git there: "last made" is build/starters/)
    root = tempfile.mkdtemp()
    try:
        for d in ("reference/tools", "solutions/99-x", "lessons/99-x"):
            os.makedirs(os.path.join(root, d))
        shutil.copy(TOOL, os.path.join(root, "reference/tools"))
        shutil.copy(os.path.join(HERE, "..", "..", "reference", "tools", "source_hash.py"), os.path.join(root, "reference", "tools"))
        open(os.path.join(root, "solutions/99-x/x.cu"), "w").write(GOOD)
        tool = os.path.join(root, "reference/tools/starters.py")
        run = lambda *a: subprocess.run([sys.executable, tool] + list(a), capture_output=True, text=True)
        starter = os.path.join(root, "lessons/99-x/x.cu")
        steps = [("check, no starter yet", run("--check"), 1),
                 ("write", run("--write"), 0),
                 ("check after write", run("--check"), 0)]
        open(starter, "a").write("// a student's edit\n")
        steps += [("write over a hand edit", run("--write"), 1)]
        steps += [("the hand edit kept", None, open(starter).read().endswith("// a student's edit\n"))]
        steps += [("write --force", run("--write", "--force"), 0),
                  ("check after --force", run("--check"), 0)]
        # a shared header made from the solution's region: the answer, without the markup
        header = os.path.join(root, "reference/include/x.h")
        os.makedirs(os.path.dirname(header))
        open(header, "w").write("#pragma once\n// [generated from solutions/99-x/x.cu, regions r]\nstale\n"
                                "// [end generated]\n")
        open(os.path.join(root, "solutions/99-x/x.cu"), "w").write(
            GOOD.replace("int f(int a) {", "// [region r]\nint f(int a) {").replace("}\n", "}\n// [end r]\n", 1))
        run("--write", "--force")
        steps += [("check of a header made fresh", run("--check"), 0),
                  ("the header holds the answer, no markup", None,
                   open(header).read() == "#pragma once\n// [generated from solutions/99-x/x.cu, regions r]\n"
                                          "int f(int a) {\n    return 2 * a;\n}\n// [end generated]\n")]
        stale = open(header).read().replace("2 * a", "3 * a")
        open(header, "w").write(stale)
        steps += [("check of a stale header", run("--check"), 1)]
        for name, r, want in steps:
            ok = (r is None and want is True) or (r is not None and r.returncode == want)
            if not ok:
                print("starters selftest: %s: %s" % (name, r.stdout if r else "no"))
                fails += 1
    finally:
        shutil.rmtree(root)
    print("starters selftest: %s" % ("every case as expected" if not fails else "%d case(s) wrong" % fails))
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())

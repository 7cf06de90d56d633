#!/usr/bin/env python3
"""reference/tools/variant.py N SRC OUT [NAME...]: lesson N's source SRC (its solution, or a student's
file) with the worklog's variants NAME applied in order, written to OUT; prints the nvcc flags the
variants ask for (their `defines:`) on stdout. A variant is an experiment of the lesson's worklog,
lessons/NN-*/worklog/variants/NAME.var or NAME.patch:

  .var    header lines `key: value` (what, measured, rerun, and those read here), then blocks of
          exact text "@@ from" ... "@@ to" ... "@@ end"; each "from" must occur exactly once in the
          text so far (the mutants' format, tests/mutants/README.md). A .var may have no block.
  .patch  a unified diff, applied with no fuzz; `key: value` lines before its first "---" are its
          header.
  Header keys read here: `apply: A B` applies variants A, B first (each once); `defines: -DX=1`
  adds nvcc flags; `registers:` is what make check-NN expects of the build (tests/checks/
  compile_check.py); `starter: yes` says the variant applies to the starter too.

NAME may join several with '+'. `variant.py N --list` lists the lesson's variants. Exit status: 0;
1 a variant does not apply (which block, and why); 2 a bad command line or an unknown NAME. Make's
lessonN-NAME / solutionN-NAME and `make variant` call it; so do the worklogs' scripts."""
import glob
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
HEADER = re.compile(r"^([a-z]+):\s*(.*)$")


class VariantError(Exception):
    def __init__(self, msg, status=1):
        super().__init__(msg)
        self.status = status


def files(n):
    """Lesson n's variants, {NAME: path}; NAME.var wins over a NAME.patch (it comes later in order)."""
    paths = glob.glob(os.path.join(ROOT, "lessons", "%02d-*" % int(n), "worklog", "variants", "*"))
    return {os.path.splitext(os.path.basename(p))[0]: p for p in sorted(paths) if p.endswith((".var", ".patch"))}


def names(n):
    return sorted(files(n))


def load(n, name):
    """(path, headers) of variant NAME of lesson n: its `key: value` lines before the first block."""
    path = files(n).get(name)
    if path:
        head = re.split(r"^(?:@@|---)", open(path, encoding="utf-8").read(), maxsplit=1, flags=re.M)[0]
        return path, {m.group(1): m.group(2).strip() for m in map(HEADER.match, head.split("\n")) if m}
    raise VariantError("no variant '%s' of lesson %s; there are: %s" % (name, n, " ".join(names(n)) or "none"), 2)


def chain(n, wanted):
    """The variants to apply for `wanted`, each after what it applies (its `apply:`), each once."""
    out = []
    def visit(name, seen):
        if name in seen:
            raise VariantError("variant '%s' applies itself (through %s)" % (name, " -> ".join(seen)), 2)
        for first in load(n, name)[1].get("apply", "").split():
            visit(first, seen + [name])
        if name not in out:
            out.append(name)
    for name in filter(None, "+".join(wanted).split("+")):
        visit(name, [])
    return out


def apply_var(text, path, src):
    blocks, part = [], None  # blocks: (from lines, to lines); part: where the open block's lines go
    for ln in open(path, encoding="utf-8").read().split("\n"):
        if ln == "@@ from":
            blocks.append(([], []))
            part = blocks[-1][0]
        elif part is not None and ln in ("@@ to", "@@ end"):
            part = blocks[-1][1] if ln == "@@ to" else None
        elif part is not None:
            part.append(ln)
    if part is not None:
        raise VariantError("%s: a block without \"@@ end\"" % path)
    for k, (old, new) in enumerate(blocks, 1):
        count = text.count("\n".join(old) + "\n")
        if count != 1:
            raise VariantError("%s, block %d: its \"from\" text occurs %d times in %s (once needed); it begins:\n  %s"
                               % (os.path.relpath(path, ROOT), k, count, src, old[0] if old else "(empty)"))
        text = text.replace("\n".join(old) + "\n", "\n".join(new) + "\n" if new else "")
    return text


def apply_patch(text, path, src):
    with tempfile.TemporaryDirectory() as tmp:
        f = os.path.join(tmp, "src.cu")
        open(f, "w").write(text)
        p = subprocess.run(["patch", "--quiet", "--force", "--fuzz=0", "--reject-file=-", "--no-backup-if-mismatch", f, path],
                           capture_output=True, text=True)
        if p.returncode != 0:
            raise VariantError("%s does not apply to %s (the variants before it applied):\n%s"
                               % (os.path.relpath(path, ROOT), src, (p.stdout + p.stderr).strip()))
        return open(f).read()


def make(n, src, wanted):
    """(text, defines, [(name, headers)...]): SRC with the variants applied."""
    text = open(src, encoding="utf-8").read()
    defines, applied = [], []
    for name in chain(n, wanted):
        path, headers = load(n, name)
        text = (apply_var if path.endswith(".var") else apply_patch)(text, path, src)
        defines += headers.get("defines", "").split()
        applied.append((name, headers))
    return text, defines, applied


def main(argv):
    if len(argv) == 2 and argv[1] == "--list":
        print(" ".join(names(argv[0])))
        return 0
    if len(argv) < 3 or not argv[0].isdigit():
        print("usage: variant.py N SRC OUT [NAME[+NAME]...] | variant.py N --list", file=sys.stderr)
        return 2
    n, src, out, wanted = argv[0], argv[1], argv[2], argv[3:]
    try:
        text, defines, _ = make(n, src, wanted)
    except OSError as e:
        print("variant.py: %s: %s" % (e.filename, e.strerror), file=sys.stderr)
        return 2
    except VariantError as e:
        print("variant.py: %s" % e, file=sys.stderr)
        return e.status
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    open(out, "w").write(text)
    print(" ".join(defines))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

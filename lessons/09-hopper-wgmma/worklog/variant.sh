#!/usr/bin/env bash
# lessons/09-hopper-wgmma/worklog/variant.sh SRC OUT [NAME...]: lesson 09's source SRC (the solution, or
# your lessons/09-hopper-wgmma/hopper.cu) with the variants NAME applied in order, written to OUT.
# Variant NAME is lessons/09-hopper-wgmma/worklog/variants/NAME.var: the ladder's steps 1-4 (steps-1-4)
# and the experiments that lost (see worklog/README.md). Its format is the mutants' (tests/mutants/
# README.md): header lines ("what:", "measured:"), then blocks "@@ from", "@@ to", "@@ end" of
# exact text; each "from" must occur exactly once in the text so far. `make hopper-variant`,
# ladder.sh, ncu.sh and `make emu-09` call it. Exit status: 0; 1 a variant does not apply (which
# block, and why); 2 a bad command line. VARIANT_DIR=DIR reads the variants of DIR instead (lesson
# 13's variant.sh runs this program on its own variants).
set -uo pipefail
vdir=${VARIANT_DIR:-$(cd "$(dirname "$0")" && pwd)/variants}
[ $# -ge 2 ] || { echo "usage: $0 SRC OUT [NAME...]  (names: $(cd "$vdir" && ls *.var | sed 's/\.var$//' | tr '\n' ' '))" >&2; exit 2; }
exec python3 - "$vdir" "$@" <<'PY'
import os, sys
vdir, src, out, names = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
try:
    text = open(src).read()
except OSError as e:
    print("variant.sh: cannot read %s: %s" % (src, e.strerror), file=sys.stderr)
    sys.exit(2)
for name in names:
    path = os.path.join(vdir, name + ".var")
    if not os.path.isfile(path):
        print("variant.sh: no variant '%s' (%s); there are: %s" % (name, path, " ".join(
            sorted(f[:-4] for f in os.listdir(vdir) if f.endswith(".var")))), file=sys.stderr)
        sys.exit(2)
    blocks, mode, cur = [], None, None
    for ln in open(path).read().split("\n"):
        if ln == "@@ from": cur = {"from": [], "to": []}; mode = "from"
        elif ln == "@@ to" and cur is not None: mode = "to"
        elif ln == "@@ end" and cur is not None: blocks.append(cur); cur, mode = None, None
        elif mode: cur[mode].append(ln)
    if cur is not None or not blocks:
        print("variant.sh: %s: a block without \"@@ end\", or no block at all" % path, file=sys.stderr); sys.exit(1)
    for k, b in enumerate(blocks, 1):
        old, new = "\n".join(b["from"]) + "\n", "\n".join(b["to"]) + "\n" if b["to"] else ""
        n = text.count(old)
        if n != 1:
            print("variant.sh: %s, block %d: its \"from\" text occurs %d times in %s (once needed); it begins:\n  %s"
                  % (name, k, n, src, b["from"][0] if b["from"] else "(empty)"), file=sys.stderr)
            sys.exit(1)
        text = text.replace(old, new)
open(out, "w").write(text)
PY

#!/usr/bin/env bash
# lessons/13-hopper-backward/variant.sh SRC OUT [NAME...]: lesson 13's source SRC (the solution, or
# your lessons/13-hopper-backward/hopper_backward.cu) with the variants NAME applied in order,
# written to OUT. Variant NAME is lessons/13-hopper-backward/variants/NAME.var: a measured
# alternative (see WORKLOG.md), e.g. the deterministic dQ. Its format is the mutants'
# (tests/mutants/README.md): header lines ("what:", "measured:", "rerun:"), then blocks
# "@@ from", "@@ to", "@@ end" of exact text; each "from" must occur exactly once in the text so
# far. `make solution13-NAME`, `make emu-13 EMU13_VARIANTS=NAME`, check-13 and bench.sh call it.
# (The same program as lessons/09-hopper-wgmma/variant.sh, which reads its own variants.)
# Exit status: 0; 1 a variant does not apply (which block, and why); 2 a bad command line.
set -uo pipefail
[ $# -ge 2 ] || { echo "usage: $0 SRC OUT [NAME...]  (names: $(cd "$(dirname "$0")/variants" && ls *.var | sed 's/\.var$//' | tr '\n' ' '))" >&2; exit 2; }
exec python3 - "$(cd "$(dirname "$0")" && pwd)/variants" "$@" <<'PY'
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

#!/usr/bin/env bash
# ptx_hopper_same.sh LESSON.cu HEADER: do reference/include/ptx_hopper.h (HEADER) and lesson 09
# (LESSON.cu) define the Hopper wrappers alike? The lesson's are its `#ifndef FA_EMULATOR` block
# and its regions "mbar-wait" and "descriptor"; the header's, everything after its sm_90a guard.
# Region markers and blank lines aside, the two texts must be equal (make check-09). Exit 0 or 1
# (with a diff).
set -uo pipefail
python3 - "$1" "$2" <<'PY'
import difflib, re, sys
lesson, header = open(sys.argv[1]).read(), open(sys.argv[2]).read()
def region(s, name):
    m = re.search(r"// \[region %s\]\n(.*?)// \[end %s\]\n" % (name, name), s, re.S)
    return m.group(1) if m else ""
m = re.search(r"#ifndef FA_EMULATOR\n(.*?)#endif  // FA_EMULATOR\n", lesson, re.S)
ours = (m.group(1) if m else "") + region(lesson, "mbar-wait") + region(lesson, "descriptor")
guard = header.find("#endif\n", header.find("#error"))
theirs = header[guard + len("#endif\n"):header.rstrip().rfind("#endif")]
norm = lambda s: [l for l in s.split("\n") if l.strip() and not re.match(r"\s*// \[(region|end) [a-z0-9-]+\]$", l)
        and not re.match(r"\s*//(\||\s*(TODO\(\w+\)|solution) (begin|end)\b)", l)]  # the starters' markup
a, b = norm(ours), norm(theirs)
if not a or a != b:
    print("ptx_hopper_same: %s and %s define the Hopper wrappers differently (keep them equal):" % (sys.argv[1], sys.argv[2]))
    sys.stdout.writelines(l + "\n" for l in list(difflib.unified_diff(a, b, sys.argv[1], sys.argv[2], lineterm="", n=1))[:40])
    sys.exit(1)
print("check-09: %s defines the %d lines of Hopper wrappers as %s does" % (sys.argv[2], len(a), sys.argv[1]))
PY

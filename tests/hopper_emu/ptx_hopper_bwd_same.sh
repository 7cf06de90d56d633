#!/usr/bin/env bash
# ptx_hopper_bwd_same.sh LESSON13.cu: are the wrappers written twice still the same text?
#  1. reference/include/ptx_hopper_bwd.h (after its #include "ptx_hopper.h") and lesson 13's own
#     (its `#ifndef FA_EMULATOR` block): the wrappers lesson 13 teaches;
#  2. reference/include/ptx_hopper.h's plain C++ part (mbar_wait, the descriptors) and the copy in
#     tests/hopper_emu/ptx_hopper.h (region "plain"), which the emulator compiles for lesson 13.
# Region markers and blank lines aside, each pair must be equal (make check-13). Exit 0 or 1.
set -uo pipefail
python3 - "$1" <<'PY'
import difflib, re, sys
def norm(s):
    return [l for l in s.split("\n") if l.strip() and not re.match(r"\s*// \[(region|end) [a-z0-9-]+\]$", l)
        and not re.match(r"\s*//(\||\s*(TODO\(\w+\)|solution) (begin|end)\b)", l)]  # the starters' markup
def same(a, b, na, nb, what):
    a, b = norm(a), norm(b)
    if a and a == b:
        print("check-13: %s: %s and %s agree (%d lines)" % (what, na, nb, len(a)))
        return True
    print("check-13: %s: %s and %s differ (keep them equal):" % (what, na, nb))
    sys.stdout.writelines(l + "\n" for l in list(difflib.unified_diff(a, b, na, nb, lineterm="", n=1))[:40])
    return False
lesson = open(sys.argv[1]).read()
m = re.search(r"#ifndef FA_EMULATOR\n(.*?)#endif  // FA_EMULATOR\n", lesson, re.S)
hdr = open("reference/include/ptx_hopper_bwd.h").read()
h = hdr[hdr.index('#include "ptx_hopper.h"\n') + len('#include "ptx_hopper.h"\n'):hdr.rstrip().rfind("#endif")]
ok = same(m.group(1) if m else "", h, sys.argv[1], "reference/include/ptx_hopper_bwd.h", "the lesson's wrappers")
real = open("reference/include/ptx_hopper.h").read()
plain = real[real.index("__device__ __forceinline__ void mbar_wait"):real.rstrip().rfind("#endif")]
emu = open("tests/hopper_emu/ptx_hopper.h").read()
e = re.search(r"// \[region plain\]\n(.*?)// \[end plain\]\n", emu, re.S)
ok = same(plain, e.group(1) if e else "", "reference/include/ptx_hopper.h", "tests/hopper_emu/ptx_hopper.h",
          "the plain C++ part of ptx_hopper.h") and ok
sys.exit(0 if ok else 1)
PY

#!/usr/bin/env bash
# ptx_hopper_fp8_same.sh LESSON14.cu: are the e4m3 wrappers written twice still the same code?
# reference/include/ptx_hopper_fp8.h (after its #include "ptx_hopper.h") against lesson 14's own: its
# `#ifndef FA_EMULATOR` block (wgmma_ss_e4m3, wgmma_rs_e4m3, cvt_e4m3x2) followed by its region
# "descriptor" (desc_kmajor_e4m3). Comments, region markers and blank lines aside, they must be
# equal (make check-14). Exit 0 or 1.
set -uo pipefail
python3 - "$1" <<'PY'
import difflib, re, sys
def code(s):
    s = re.sub(r"/\*.*?\*/", "", s, flags=re.S)
    s = re.sub(r"//[^\n]*", "", s)
    return [l.rstrip() for l in s.split("\n") if l.strip()]
lesson = open(sys.argv[1]).read()
m = re.search(r"#ifndef FA_EMULATOR\n(.*?)#endif  // FA_EMULATOR\n", lesson, re.S)
d = re.search(r"// \[region descriptor\]\n(.*?)// \[end descriptor\]\n", lesson, re.S)
mine = code((m.group(1) if m else "") + (d.group(1) if d else ""))
hdr = open("reference/include/ptx_hopper_fp8.h").read()
h = code(hdr[hdr.index('#include "ptx_hopper.h"\n') + len('#include "ptx_hopper.h"\n'):hdr.rstrip().rfind("#endif")])
if mine and mine == h:
    print("check-14: the e4m3 wrappers of %s and reference/include/ptx_hopper_fp8.h agree (%d lines of code)" % (sys.argv[1], len(h)))
    sys.exit(0)
print("check-14: the e4m3 wrappers of %s and reference/include/ptx_hopper_fp8.h differ (keep them equal):" % sys.argv[1])
sys.stdout.writelines(l + "\n" for l in list(difflib.unified_diff(mine, h, sys.argv[1], "ptx_hopper_fp8.h", lineterm="", n=1))[:40])
sys.exit(1)
PY

#!/usr/bin/env python3
"""tests/fp32_emu/prep.py IN.cu [OUT.cpp]: rewrite an fp32 lesson source (02-05, 10) so that g++ can
compile it against tests/fp32_emu/cuda_runtime.h: kernel<<<cfg>>>(args) becomes
emu_launch(cfg, kernel, args), and the extern __shared__ declaration, if any, a pointer to the
emulated block's shared memory."""
import re
import sys

src = open(sys.argv[1]).read()
out, n = re.subn(r"extern __shared__ float4 (\w+)\[\];", r"float4 *\1 = (float4 *)emu_smem();", src)
if n > 1:
    sys.exit("prep.py: expected at most one 'extern __shared__ float4 name[];' in %s, found %d" % (sys.argv[1], n))
out, n = re.subn(r"([\w:]+<\w+>)<<<(.*?)>>>\(", r"emu_launch(\2, \1, ", out, flags=re.S)
if n < 1:
    sys.exit("prep.py: no kernel<D><<<...>>>( launch in %s" % sys.argv[1])
(open(sys.argv[2], "w") if len(sys.argv) > 2 else sys.stdout).write('#line 1 "%s"\n' % sys.argv[1] + out)

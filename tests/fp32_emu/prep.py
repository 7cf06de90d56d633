#!/usr/bin/env python3
"""tests/fp32_emu/prep.py IN.cu OUT.cpp: rewrite a lesson 03-05 source so that g++ can
compile it against tests/fp32_emu/cuda_runtime.h: the extern __shared__ declaration
becomes a pointer to the emulated block's shared memory, and kernel<<<cfg>>>(args)
becomes emu_launch(cfg, kernel, args)."""
import re
import sys

src = open(sys.argv[1]).read()
out, n = re.subn(r"extern __shared__ float4 (\w+)\[\];", r"float4 *\1 = (float4 *)emu_smem();", src)
if n != 1:
    sys.exit("prep.py: expected one 'extern __shared__ float4 name[];' in %s, found %d" % (sys.argv[1], n))
out, n = re.subn(r"([\w:]+<\w+>)<<<(.*?)>>>\(", r"emu_launch(\2, \1, ", out, flags=re.S)
if n < 1:
    sys.exit("prep.py: no kernel<D><<<...>>>( launch in %s" % sys.argv[1])
open(sys.argv[2], "w").write('#line 1 "%s"\n' % sys.argv[1] + out)

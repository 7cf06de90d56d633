#!/usr/bin/env python3
"""tests/emu/prep.py SRC: print a lesson source as g++ compiles it over a CPU emulator (warp_emu,
hopper_emu): nothing is cut out; only each CUDA launch, kernel<<<grid, block, smem[, stream]>>>(args);
(CUDA syntax, which g++ does not know), becomes { emu_smem_check(emu_fn_addr(kernel), smem, "kernel"); emu_launch(dim3(grid),
block, smem, [&] { kernel(args); }); } (the check: tests/emu/smem_optin.h, the 48 KiB rule).
Used by make emu-07/08/11/12 (the emulator drivers), tests/emu/grade.py (make emu-lessonN) and
tests/warp_emu/hostsim11.py. Exit 1 when the file has no launch."""
import re
import sys


def launch_rewrite(src):
    """The text of src with its launches rewritten; raises ValueError."""
    out = open(src).read()

    def launch(m):
        cfg = [c.strip() for c in re.split(r",(?![^(<]*[)>])", m.group(2))]
        if len(cfg) < 3:
            raise ValueError("launch <<<%s>>>: expected grid, block, smem[, stream]" % m.group(2))
        kernel = m.group(1)
        return "{ emu_smem_check(emu_fn_addr(%s), (size_t)(%s), \"%s\"); " \
               "emu_launch(dim3(%s), %s, %s, [&] { %s(%s); }); }" % (
                   kernel, cfg[2], kernel.replace('"', ''), cfg[0], cfg[1], cfg[2], kernel, m.group(3))

    out, n = re.subn(r"([\w:]+(?:<[^;{}()]*?>)?)<<<(.*?)>>>\((.*?)\);", launch, out, flags=re.S)
    if n < 1:
        raise ValueError("no kernel<<<...>>>(...) launch in %s" % src)
    return '#line 1 "%s"\n' % src + out


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    try:
        sys.stdout.write(launch_rewrite(sys.argv[1]))
    except (ValueError, OSError) as e:
        print("tests/emu/prep.py: %s" % e, file=sys.stderr)
        sys.exit(1)

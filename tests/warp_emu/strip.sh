#!/usr/bin/env bash
# strip.sh FILE.cu: print FILE.cu without its "ptx" region (replaced by emu.h)
# and without its "host" region (the emulator launches the kernel itself).
awk '/\/\/ \[region (ptx|cp-async|host)\]/{skip=1} !skip{print} /\/\/ \[end (ptx|cp-async|host)\]/{skip=0}' "$1"

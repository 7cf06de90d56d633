#!/usr/bin/env bash
# strip.sh FILE.cu: print lesson 09's FILE.cu without its PTX wrapper regions ("ptx-*",
# replaced by hemu.h) and its "host" region (the emulator builds the tensor maps and
# launches the kernel itself).
awk '/\/\/ \[region (ptx-[a-z]+|host)\]/{skip=1} !skip{print} /\/\/ \[end (ptx-[a-z]+|host)\]/{skip=0}' "$1"

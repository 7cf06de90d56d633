#!/usr/bin/env bash
# strip.sh FILE.cu: print lesson 09's FILE.cu without its "host" region (the emulator builds
# the tensor maps and launches the kernel itself). Its PTX wrappers stay: the emulator build
# defines FA_EMULATOR, and the file leaves them out for the stand-ins in this directory.
awk '/\/\/ \[region host\]/{skip=1} !skip{print} /\/\/ \[end host\]/{skip=0}' "$1"

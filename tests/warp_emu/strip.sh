#!/usr/bin/env bash
# strip.sh FILE.cu [REGIONS]: print FILE.cu without the regions named in REGIONS, an awk
# alternation (default "ptx|cp-async|host"): the PTX wrappers (emu.h has the emulator's) and
# the host code (the emulator launches the kernel itself). Lessons 07 and 08 need only "host":
# their wrappers sit under #ifndef FA_EMULATOR, and the emulator's come from its own
# ptx_mma.h / ptx_cp_async.h (tests/warp_emu, first on the include path).
regions=${2:-ptx|cp-async|host}
awk -v re="$regions" '
    $0 ~ "// \\[region (" re ")\\]" { skip = 1 }
    !skip { print }
    $0 ~ "// \\[end (" re ")\\]" { skip = 0 }' "$1"

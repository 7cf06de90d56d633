# lessons/14-fp8-attention/lesson.mk: lesson 14's facts, written here and nowhere else. Make reads
# it (mk/lessons.mk), and so do the emulator grader, the structure check and the site:
# KEY := value lines (CONTRIBUTING.md, "The lesson descriptor").
source := fp8_attention.cu
arch := sm_90a
runner := forward
dtypes := e4m3
head_dims := 128
causal := yes
teaches := ptx_hopper_fp8.h
emulator := own
racecheck := advisory
ptxas := 90a
registers := 168
register_kernel := fp8_forward_kernel
header_check := tests/checks/headers/ptx_hopper_fp8.cu
check_builds_full := wide-first | persistent | persistent-q2 | chain-uniform | transpose-in-kernel | transpose-producer | transpose-ring | no-pdl | exp2-fma | rescale-lazy | epilogue-registers | pack-then-rescale | wide224 | chain-tma | chain-setup | -DFA14_BC=128
emu_grader := tests/hopper_emu/grade_host.py
# ragged N, one tile and several, causal (the diagonal inside a warpgroup's rows, tiles skipped; several
# heads and query tiles, where the causal order maps a block to its head and tile differently), block and
# per-tensor scales, the Hadamard rotation, the outlier inputs, B > 1; the first two also late in make test
# (every emulator mutant of lesson 14 is still rejected: make mutants-emu LESSONS=14)
emu_cases := -b 1 -H 2 -n 200 -d 128 --outliers | -b 1 -H 2 -n 200 -d 128 --causal --hadamard | -b 2 -H 1 -n 77 -d 128 --quant tensor | -b 1 -H 1 -n 1 -d 128 --causal | -b 1 -H 1 -n 200 -d 128 --peaked
emu_cases_full := -b 1 -H 1 -n 257 -d 128 --causal --quant tensor --hadamard --outliers | -b 1 -H 2 -n 384 -d 128 --outliers --hadamard | -b 2 -H 1 -n 129 -d 128 --causal --outliers
emu_late_cases := 2

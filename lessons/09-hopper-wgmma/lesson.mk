# lessons/09-hopper-wgmma/lesson.mk: lesson 09's facts, written here and nowhere else. Make reads
# it (mk/lessons.mk), and so do the emulator grader, the structure check and the site:
# KEY := value lines (CONTRIBUTING.md, "The lesson descriptor").
source := hopper.cu
arch := sm_90a
runner := forward
dtypes := fp16 bf16
head_dims := 64 128
causal := yes
teaches := ptx_hopper.h
emulator := driver
emu_driver := emu-09
racecheck := advisory
steps := 1:3 2:6 3:7 4:8 7:9
speed_todos := 7 8
ptxas := 90a
registers := 128 168
header_check := tests/checks/headers/ptx_hopper.cu
check_builds_full := step1 -> any | step2 -> any | step3 -> 168 | step4 -> 168 | step5 -> 168 | step6 -> 168 | step7 -> 168 | -DFA9_STEP=7 -DFA64_WG=3 | -DFA9_STEP=5 -DFA64_WG=3 | step7+stride-items+o-from-registers+no-causal-lpt+no-l2-sections -> 168 | step7+exp2-fma -> 168 | step7 -DFA128_BC=176 -DFA128_STAGES=2 -> 168 | mbar-suspend | desc-per-slice | epilogue-stsm | wide-first
emu_main := tests/hopper_emu/emu9.cpp
emu_flags := -Itests/hopper_emu
emu_variants := steps-1-4
emu_late := EMU_WGMMA=late EMU_TMA=late EMU_SCHED=reverse

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
check_builds_full := persistent | persistent-q2 | transpose-in-kernel | -DFA14_BC=128
emu_grader := tests/hopper_emu/grade14.py

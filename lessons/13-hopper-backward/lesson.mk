# lessons/13-hopper-backward/lesson.mk: lesson 13's facts, written here and nowhere else. Make reads
# it (mk/lessons.mk), and so do the emulator grader, the structure check and the site:
# KEY := value lines (CONTRIBUTING.md, "The lesson descriptor").
source := hopper_backward.cu
arch := sm_90a
runner := backward
dtypes := fp16 bf16
head_dims := 64 128
causal := yes
teaches := ptx_hopper_bwd.h
emulator := driver
emu_driver := emu-13
racecheck := advisory
steps := 1:3 2:4 3:5 4:7
speed_todos := 8
emu_step_variant := step
ptxas := 90a
registers := 168
register_kernel := fa3_backward_kernel
header_check := tests/checks/headers/ptx_hopper_bwd.cu
check_builds := deterministic
check_builds_full := step1 -> 168 | step2 -> 168 | step3 -> 168 | ladder-4-head-order | ladder-3-one-consumer | ladder-2-dq-atomics | ladder-1-consumer-loads
emu_main := tests/hopper_emu/emu13.cpp
emu_flags := -Itests/hopper_emu
emu_link := cpu_reference cpu_reference_bwd
emu_late := EMU_WGMMA=late EMU_TMA=late EMU_SCHED=reverse

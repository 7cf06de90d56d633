# lessons/08-async-pipeline/lesson.mk: lesson 08's facts, written here and nowhere else. Make reads
# it (mk/lessons.mk), and so do the emulator grader, the structure check and the site:
# KEY := value lines (CONTRIBUTING.md, "The lesson descriptor").
source := pipeline.cu
arch := portable
runner := forward
dtypes := fp16 bf16
head_dims := 64 128
causal := yes
teaches := ptx_cp_async.h
emulator := warp
emu_cases := -b 1 -H 2 -n 100 -d 64 | -b 1 -H 1 -n 250 -d 128 --causal | -b 1 -H 1 -n 1 -d 64 --causal
emu_driver := emu-08
ptxas := 75 90
spill_budget := 16
check_builds_full := no-lpt
emu_main := tests/warp_emu/emu8.cpp
emu_flags := -DFA_EMULATOR -Itests/warp_emu
emu_late := EMU_CPASYNC=late EMU_SCHED=reverse

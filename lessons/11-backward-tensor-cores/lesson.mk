# lessons/11-backward-tensor-cores/lesson.mk: lesson 11's facts, written here and nowhere else. Make reads
# it (mk/lessons.mk), and so do the emulator grader, the structure check and the site:
# KEY := value lines (CONTRIBUTING.md, "The lesson descriptor").
source := backward.cu
arch := portable
runner := backward
dtypes := fp16 bf16
head_dims := 64 128
causal := yes
emulator := warp
emu_cases := -b 2 -H 1 -n 77 -d 64 | -b 1 -H 2 -n 130 -d 64 --causal | -b 1 -H 1 -n 77 -d 128 --causal | -b 1 -H 2 -n 150 -d 128
emu_driver := emu-11
ptxas := 75 80 90
spill_budget := 24
check_builds_full := options
emu_main := tests/warp_emu/emu11.cpp
emu_flags := -Itests/warp_emu
emu_link := cpu_reference cpu_reference_bwd
emu_env := EMU11_DEFAULTS_ONLY=1
emu_late := EMU_CPASYNC=late EMU_SCHED=reverse
emu_full := options EMU11_OTHERS_ONLY=1
hostsim := tests/warp_emu/hostsim11.py

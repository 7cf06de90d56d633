# lessons/10-backward-fp32/lesson.mk: lesson 10's facts, written here and nowhere else. Make reads
# it (mk/lessons.mk), and so do the emulator grader, the structure check and the site:
# KEY := value lines (CONTRIBUTING.md, "The lesson descriptor").
source := backward_fp32.cu
arch := portable
runner := backward
dtypes := fp32
head_dims := 64 128
causal := yes
emulator := fp32
emu_cases := -b 2 -H 3 -n 77 -d 64 | -b 1 -H 2 -n 77 -d 64 --causal | -b 1 -H 1 -n 130 -d 128 --causal
emu_builds := dQ by atomics: -DDQ_ATOMIC=1 | dQ in a separate pass: -DDQ_ATOMIC=0
ptxas := 80 90
check_builds := dq-pass
emu_prep := tests/fp32_emu/prep.py
emu_kernel := unit
emu_main := tests/fp32_emu/emu10.cpp
emu_flags := -O2 -Itests/fp32_emu -include emu_bwd_runtime.h
emu_link := cpu_reference cpu_reference_bwd diagnose_bwd grade
hostsim := tests/hostsim/run.py

# lessons/04-register-outputs/lesson.mk: lesson 04's facts, written here and nowhere else. Make reads
# it (mk/lessons.mk), and so do the emulator grader, the structure check and the site:
# KEY := value lines (CONTRIBUTING.md, "The lesson descriptor").
source := registers.cu
arch := portable
runner := forward
dtypes := fp32
head_dims := 64 128
causal := no
emulator := fp32
emu_cases := -b 2 -H 1 -n 77 -d 64 | -b 1 -H 2 -n 1 -d 128 | -b 1 -H 1 -n 130 -d 128 | -b 1 -H 2 -n 300 -d 64 --logit-scale 30
ptxas := 75 90
check_builds := runtime-index
emu_prep := tests/fp32_emu/prep.py
emu_kernel := unit
emu_main := tests/fp32_emu/emu_fp32.cpp
emu_flags := -O2 -Itests/fp32_emu
emu_link := cpu_reference
starter_spills := yes

# lessons/06-tensor-cores-wmma/lesson.mk: lesson 06's facts, written here and nowhere else. Make reads
# it (mk/lessons.mk), and so do the emulator grader, the structure check and the site:
# KEY := value lines (CONTRIBUTING.md, "The lesson descriptor").
source := wmma.cu
arch := portable
runner := forward
dtypes := fp16 bf16
head_dims := 64 128
causal := yes
emulator := wmma
emu_cases := -b 1 -H 2 -n 77 -d 64 | -b 1 -H 1 -n 130 -d 128 --causal | -b 1 -H 1 -n 1 -d 64 --causal
ptxas := 75 90
emu_main := tests/wmma_emu/emu06.cpp
emu_flags := -O2 -Itests/wmma_emu -include emu_host.h
emu_link := cpu_reference
starter_spills := yes

# lessons/02-naive-kernel/lesson.mk: lesson 02's facts, written here and nowhere else. Make reads
# it (mk/lessons.mk), and so do the emulator grader, the structure check and the site:
# KEY := value lines (CONTRIBUTING.md, "The lesson descriptor").
source := naive.cu
arch := portable
runner := forward
dtypes := fp32
head_dims := 64 128
causal := no
emulator := fp32
emu_cases := -b 2 -H 1 -n 77 -d 64 | -b 1 -H 2 -n 1 -d 128 | -b 1 -H 1 -n 130 -d 128 | -b 1 -H 1 -n 150 -d 64 --logit-scale 30
ptxas := 75 90
# d = 128 spills 104 bytes (the text's "255-register limit"); more is a regression
spill_budget := 104

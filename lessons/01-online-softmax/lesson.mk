# lessons/01-online-softmax/lesson.mk: lesson 01's facts, written here and nowhere else. Make reads
# it (mk/lessons.mk), and so do the emulator grader, the structure check and the site:
# KEY := value lines (CONTRIBUTING.md, "The lesson descriptor").
source := online_softmax.c
arch := cpu
runner := cpu
dtypes := fp32
head_dims :=
causal := no
emulator := none

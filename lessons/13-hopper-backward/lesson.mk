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

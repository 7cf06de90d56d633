# lessons/09-hopper-wgmma/lesson.mk: lesson 09's facts, written here and nowhere else. Make reads
# it (mk/lessons.mk), and so do the emulator grader, the structure check and the site:
# KEY := value lines (CONTRIBUTING.md, "The lesson descriptor").
source := hopper.cu
arch := sm_90a
runner := forward
dtypes := fp16 bf16
head_dims := 64 128
causal := yes
teaches := ptx_hopper.h
emulator := driver
emu_driver := emu-09
racecheck := advisory
steps := 1:3 2:6 3:7 4:8 7:9
speed_todos := 7 8

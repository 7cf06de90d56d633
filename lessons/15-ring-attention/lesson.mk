# lessons/15-ring-attention/lesson.mk: lesson 15's facts, written here and nowhere else. Make reads
# it (mk/lessons.mk), and so do the emulator grader, the structure check and the site:
# KEY := value lines (CONTRIBUTING.md, "The lesson descriptor").
source := ring_attention.cu
arch := sm_90a
runner := forward
dtypes := fp16 bf16
head_dims := 64 128
causal := yes
emulator := own
emu_starter := no
racecheck := advisory
# lesson 09's kernel does every block: its solution, compiled once as a library (step 6: work items
# by stride, no step-7 counter; LIB_FLAGS=-DFA9_STEP=7 builds the other)
library := 9 -DFA9_STEP=6
transport := nccl
ptxas := 90a
emu_grader := tests/ring/hostrun.sh

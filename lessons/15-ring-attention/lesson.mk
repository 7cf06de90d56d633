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
# mk/ring.mk's build: NCCL linked where found (RING=nccl), one rank per GPU; how the blocks move is
# chosen when it runs (--transport ce|nccl: the copy engines where every neighbouring pair of GPUs
# has peer access, and always on the virtual ring; NCCL otherwise), and the grader's fault mode
# (--ring-delay-us) is on in every graded case
transport := nccl
# the sanitizers on rings of 3 ranks (the default grid's 77 rows run on one rank: no transfer)
sanitize_cases := -b 1 -H 2 -n 96 -d 64 --ranks 3 | -b 1 -H 2 -n 96 -d 128 --causal --ranks 3
ptxas := 90a
emu_grader := tests/ring/hostrun.sh

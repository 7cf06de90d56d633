# lessons/17-varlen-prefill/lesson.mk: lesson 17's facts, written here and nowhere else. Make reads
# it (mk/lessons.mk), and so do the emulator grader, the structure check and the site:
# KEY := value lines (CONTRIBUTING.md, "The lesson descriptor").
source := varlen_prefill.cu
arch := sm_90a
runner := forward
dtypes := fp16 bf16
head_dims := 64 128
causal := yes
ptxas := 90a
registers := 168
register_kernel := varlen_forward_kernel
racecheck := advisory
emulator := own
emu_grader := tests/hopper_emu/grade_host.py
# packed batches: two sequences of equal length (the plan's ties) beside one of two query tiles (the first
# case, also run late in make test: its K/V ring turns over), chunked prefill (more keys than queries,
# causal aligned bottom-right), GQA (G = 2, two K/V heads) with a one-token sequence and causal tiles of
# equal counts (those two in one dtype each: the first runs both); make test-full adds a rectangular batch
# and larger ones
emu_cases := --seqlens 200,5,5 -H 1 -d 128 | --seqlens 16:200,64:70,3 -H 1 -d 128 --causal --dtype fp16 | --seqlens 60,1,40 -H 4 --kv-heads 2 -d 64 --causal --dtype bf16
emu_cases_full := -b 2 -H 1 -n 77 -d 128 --causal | --seqlens 300,129,1,2:150 -H 4 --kv-heads 2 -d 128 --causal | --seqlens 257:300,64 -H 2 -d 128 | -b 1 -H 3 -n 200 -d 64
emu_late_cases := 1
sanitize_cases := --seqlens 100,300:500,17,129 -H 4 --kv-heads 2 -d 128 --causal | --seqlens 77,1,130 -H 2 -d 64 | -b 1 -H 2 -n 77 -d 64 --causal

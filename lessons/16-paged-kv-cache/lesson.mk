# lessons/16-paged-kv-cache/lesson.mk: lesson 16's facts, written here and nowhere else. Make reads
# it (mk/lessons.mk), and so do the emulator grader, the structure check and the site:
# KEY := value lines (CONTRIBUTING.md, "The lesson descriptor").
source := paged_kv_cache.cu
arch := portable
runner := decode
dtypes := fp16 bf16
head_dims := 64 128
causal := yes
emulator := warp
emu_cases := -b 3 -H 8 --kv-heads 2 -n 1 --kv-seq 300 -d 64 --paged 16 --ragged | -b 2 -H 4 --kv-heads 1 -n 16 --kv-seq 200 -d 128 --paged 8 --causal --ragged | -b 3 -H 4 --kv-heads 2 -n 1 --kv-seq 1000 -d 128 --paged 256 | -b 2 -H 8 --kv-heads 2 -n 1 --kv-seq 700 -d 64 --ragged
ptxas := 90
sanitize_cases := -b 3 -H 8 --kv-heads 2 -n 1 --kv-seq 3000 -d 128 --paged 16 --ragged | -b 2 -H 4 --kv-heads 1 -n 16 --kv-seq 1000 -d 64 --paged 64 --causal --ragged | -b 2 -H 8 --kv-heads 2 -n 1 --kv-seq 5000 -d 64 --paged 256 | -b 1 -H 4 --kv-heads 1 -n 16 --kv-seq 1000 -d 64 --causal
hostsim := tests/warp_emu/hostsim16.py

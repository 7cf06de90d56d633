# lessons/12-flash-decoding/lesson.mk: lesson 12's facts, written here and nowhere else. Make reads
# it (mk/lessons.mk), and so do the emulator grader, the structure check and the site:
# KEY := value lines (CONTRIBUTING.md, "The lesson descriptor").
source := flash_decoding.cu
arch := portable
runner := decode
dtypes := fp16 bf16
head_dims := 64 128
causal := yes
emulator := warp
emu_cases := -b 2 -H 8 --kv-heads 2 -n 1 --kv-seq 700 -d 64 --ragged | -b 2 -H 4 --kv-heads 1 -n 16 --kv-seq 300 -d 128 --causal --ragged | -b 1 -H 2 --kv-heads 2 -n 5 --kv-seq 5 -d 64 --causal | -b 1 -H 2 -n 77 -d 64
emu_driver := emu-12
ptxas := 75 90
emu_main := tests/warp_emu/emu12.cpp
emu_flags := -Itests/warp_emu
emu_link := cpu_reference
emu_late := EMU_CPASYNC=late
unit_test := tests/unit/test_decode.c fd_plan.h config plan
sanitize_cases := -b 1 -H 2 -n 77 -d 64 | -b 2 -H 8 --kv-heads 2 -n 1 --kv-seq 3000 -d 128 --ragged | -b 1 -H 4 --kv-heads 1 -n 16 --kv-seq 1000 -d 64 --causal

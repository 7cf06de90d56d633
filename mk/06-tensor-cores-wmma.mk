# mk/06-tensor-cores-wmma.mk: lesson 06 checks that need no GPU (both run in `make test`).
#   make check-06   the starter and the solution compile for sm_75 and sm_90 with no
#                   register spills (ptxas -v); SKIPs without nvcc
#   make emu-06     the solution's kernel, run on the CPU with an emulated wmma whose
#                   fragment layout is scrambled (tests/wmma_emu), graded against the
#                   harness's references with its 16-bit rule (N = 1, 77, 130; EMU_QUICK=0, in
#                   make test-full: also 7 and 64); SKIPs without nvcc headers.
#                   EMU06_SRC=lessons/06-tensor-cores-wmma/wmma.cu runs your kernel instead
#                   (it ignores STARTER_NOT_DONE: it calls the kernel directly; make emu-lesson6
#                   grades your file through the runner). The file is compiled whole, its launch
#                   rewritten (tests/emu/prep.py), <mma.h> the emulator's (tests/wmma_emu/mma.h)
.PHONY: check-06 emu-06
EMU06_SRC ?= solutions/06-tensor-cores-wmma/wmma.cu

CUDA_INC_06 := $(CUDA_INC)
CXX_06 ?= g++

check-06:
	@if ! command -v $(NVCC) >/dev/null 2>&1; then echo "check-06: SKIP (no nvcc)"; exit 0; fi; \
	for f in lessons/06-tensor-cores-wmma/wmma.cu solutions/06-tensor-cores-wmma/wmma.cu; do \
	  out=$$($(PTXAS_REPORT) $$f 75 90) || { echo "$$out"; exit 1; }; \
	  if echo "$$out" | grep -qE '[1-9][0-9]* bytes spill'; then \
	    echo "check-06: $$f spills:"; echo "$$out" | grep -E 'entry function|spill|registers'; exit 1; fi; \
	done; echo "check-06: starter and solution build for sm_75 and sm_90, no spills"

emu-06: build/host/cpu_reference.o
	@if [ ! -f $(CUDA_INC_06)/cuda_fp16.h ]; then echo "emu-06: SKIP (no CUDA headers)"; exit 0; fi; \
	mkdir -p build/emu06 && \
	python3 tests/emu/prep.py $(EMU06_SRC) > build/emu06/kernel.inc && \
	$(CXX_06) -O2 -std=c++20 -w -Itests/wmma_emu -I$(CUDA_INC_06) $(REF_INC) -include emu_host.h \
	  -DEMU_KERNEL='"$(CURDIR)/build/emu06/kernel.inc"' tests/wmma_emu/emu06.cpp build/host/cpu_reference.o \
	  -o build/emu06/emu06 -lpthread -lm && \
	echo "emu-06: $(EMU06_SRC) on the CPU (wmma emulated, scrambled fragment layout)" && \
	timeout 600 ./build/emu06/emu06 $(EMU_ARG)

TEST_STEPS += check-06 emu-06
TEST_FULL_STEPS += emu-full-06

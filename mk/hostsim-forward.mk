# mk/hostsim-forward.mk: the forward runner on the CPU, without a GPU. In `make test`:
#   make hostsim-forward   the forward runner (reference/harness/runner_main.cu + runner_attention.cu) compiled
#                          with g++ over tests/hostsim's fake CUDA runtime (as make hostsim-10 does
#                          for the backward runner), graded
#                          lessons: a stand-in computing the plain attention on the CPU
#                          (tests/hostsim/forward_lesson.cpp), as an ordinary and as a decode lesson,
#                          with bugs planted by HOSTSIM_BUG, and solutions 03 and 05 through the fp32
#                          emulator. Passes, refusals, CSV rows and each bug's diagnosis are checked
#                          (tests/hostsim/forward.py; --dump DIR keeps every output, to diff two
#                          versions of the runner). SKIP without the CUDA headers.
# The objects and their rules (build/hostsim/%.o, HOSTSIM_CXX) are mk/backward.mk's.
.PHONY: hostsim-forward
HOSTSIM_FWD_OBJ = build/hostsim/runner_attention.o build/hostsim/runner_main.o build/hostsim/runner_grade.o \
                  build/hostsim/runner_common.o build/hostsim/runner_buffers.o build/hostsim/fake_device.o $(HARNESS_C_OBJ)
hostsim-forward: $(if $(HOSTSIM_HAVE_CUDA),$(HOSTSIM_FWD_OBJ))
	@if [ ! -f $(CUDA_INC)/cuda_runtime_api.h ]; then echo "hostsim-forward: SKIP (no CUDA headers)"; exit 0; fi; \
	HOSTSIM_FWD_OBJ='$(HOSTSIM_FWD_OBJ)' CXX_BWD='$(CXX_BWD)' \
	  CUDA_INC='$(CUDA_INC)' python3 tests/hostsim/forward.py $(HOSTSIM_FWD_ARGS)

TEST_STEPS += hostsim-forward

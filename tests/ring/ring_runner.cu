/* tests/ring/ring_runner.cu: lesson 15's ring graded by the real grader on the CPU, as a GPU grades it
 * (tests/ring/hostrun.sh, the last stage of make emu-lesson15). The ring's host code (the solution,
 * or RING_LOGIC_SRC: a student's file) with the stand-ins of standins.h for the GPU's kernels,
 * linked with the forward runner compiled by g++ over the fake CUDA runtime (tests/hostsim's
 * HOSTSIM_FWD_OBJ, which brings main): so the grader's own case lines, its P = 2, 3 and 4 by
 * default (attention_ranks.h), re-runs, causal checks and diagnoses run on the ring as written.
 * One fake GPU: the virtual ring. RING_FAKE_SCHEDULE=copies-last or copies-first runs it under
 * that schedule of the fake (tests/fake_cuda/fake_cuda.h: stream order and event waits for real),
 * where the grader's fault mode (every graded case) shows a missing wait; without it, every call
 * runs at once. What it cannot see is what the fake cannot (standins.h, ring_hostrun.cu):
 * merge_partial's body, speed. */
#ifndef RING_LOGIC_SRC
#define RING_LOGIC_SRC "../../solutions/15-ring-attention/ring_attention.cu"
#endif
#include RING_LOGIC_SRC
#include "standins.h"

#include <string.h>

/* Before main, and so before any launch: the stand-ins, and the schedule. */
static bool ring_runner_setup() {
    ring_standins(1);
    const char *s = getenv("RING_FAKE_SCHEDULE");
    fake_set_schedule(!s ? FAKE_SYNC : !strcmp(s, "copies-last") ? FAKE_COPIES_LAST
                                     : !strcmp(s, "copies-first") ? FAKE_COPIES_FIRST : FAKE_SYNC);
    return true;
}
[[maybe_unused]] static const bool registered = ring_runner_setup();

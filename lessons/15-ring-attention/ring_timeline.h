/* ring_timeline.h: what lesson 15's ring offers the timeline tool (given code):
 * worklog/tools/ring_timeline.cu links ring_attention.cu, which defines the two functions below,
 * and times its steps (worklog/bench.sh builds it). */
#ifndef RING_TIMELINE_H
#define RING_TIMELINE_H
#include <cuda_runtime.h>
#include "attention.h"
#include "attention_ranks.h"

enum { RING_MAX_RANKS = ATTN_MAX_RANKS };  // the most ranks a ring has (--ranks takes 1..RING_MAX_RANKS)

/* Events, indexed [step][rank], each made by the caller on that rank's device: ring_forward
 * records compute_begin and compute_end around the rank's compute of the step (its pairs and
 * merges, on its compute stream), comm_begin and comm_end around the transfer of the next block
 * (on its comm stream; none at the last step). */
struct RingTimeline {
    cudaEvent_t compute_begin[RING_MAX_RANKS][RING_MAX_RANKS], compute_end[RING_MAX_RANKS][RING_MAX_RANKS];
    cudaEvent_t comm_begin[RING_MAX_RANKS][RING_MAX_RANKS], comm_end[RING_MAX_RANKS][RING_MAX_RANKS];
};

/* The whole forward pass, as attention_forward (reference/include/attention.h) runs it: scatter,
 * the P steps, gather; tl: NULL, or the events above to record. Returns its code. */
int ring_forward(const attn_args *a, RingTimeline *tl);
/* The ranks of the last call of ring_forward: their number P (0 before any call), each one's
 * device in devs[0 .. P - 1], the rows of a chunk in *chunk_rows. */
int ring_ranks(int devs[RING_MAX_RANKS], int *chunk_rows);
#endif

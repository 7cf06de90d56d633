/* attention_ranks.h: the one optional entry point beside attention.h's, for a lesson whose forward
 * pass runs over P ranks and can also stand them all on one GPU (lesson 15: the ring, P virtual
 * ranks on one GPU, or one rank per GPU over NCCL).
 *
 * A lesson that defines attention_set_ranks takes the harness's --ranks P, and without it is
 * graded at each P of ATTN_RANKS_GRADED in turn, every case at every P, then timed at the first
 * (reference/harness/runner_main.cu). The harness refuses --ranks for every other lesson, which
 * leaves the function undefined. */
#ifndef ATTENTION_RANKS_H
#define ATTENTION_RANKS_H

/* The most ranks a lesson's ring has: --ranks takes 1..ATTN_MAX_RANKS. */
#define ATTN_MAX_RANKS 8

/* The rings the harness grades when --ranks is not given. Two ranks alone would let through
 * every ring that mixes up which rank's block it holds: with two, the rank before and the rank
 * after are the same one (r - s = r + s mod 2), so many wrong orders coincide with the right one.
 * Three (an odd ring) and four do not. */
#define ATTN_RANKS_GRADED {2, 3, 4}

#ifdef __cplusplus
extern "C" {
#endif

/* Asks for P ranks, 1 <= P <= ATTN_MAX_RANKS, in the calls of attention_forward that follow, and
 * returns the number of ranks they run on: P where the ranks are virtual (all on the current
 * GPU); the transport's own number where each rank is a GPU of its own, whatever P asks; 0 when
 * P is out of range or the lesson cannot run at all (no GPU). A sequence that P ranks cannot
 * cut into equal chunks may still run on fewer (the lesson says how). Called after the harness
 * has made its GPU current, never while a call of attention_forward is in flight. */
int attention_set_ranks(int P);

#ifdef __cplusplus
}
#endif
#endif

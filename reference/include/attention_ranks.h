/* attention_ranks.h: the optional entry points beside attention.h's, for a lesson whose forward
 * pass runs over P ranks and can also stand them all on one GPU (lesson 15: the ring, P virtual
 * ranks on one GPU, or one rank per GPU, its blocks moved by the copy engines or NCCL).
 *
 * A lesson that defines attention_set_ranks takes the harness's --ranks P, and without it is
 * graded at each P of ATTN_RANKS_GRADED in turn, every case at every P, then timed at the first
 * (reference/harness/runner_main.cu). One that also defines attention_set_transport takes
 * --transport, and attention_set_ring_delay --ring-delay-us (its fault mode, on in every graded
 * case). The harness refuses these options for every other lesson, which leaves the functions
 * undefined. */
#ifndef ATTENTION_RANKS_H
#define ATTENTION_RANKS_H

/* The most ranks a lesson's ring has: --ranks takes 1..ATTN_MAX_RANKS. */
#define ATTN_MAX_RANKS 8

/* The rings the harness grades when --ranks is not given. Two ranks alone would let through
 * every ring that mixes up which rank's block it holds: with two, the rank before and the rank
 * after are the same one (r - s = r + s mod 2), so many wrong orders coincide with the right one.
 * Three (an odd ring) and four do not. */
#define ATTN_RANKS_GRADED {2, 3, 4}

/* How a ring moves its blocks (--transport): the lesson's choice, the copy engines (device or peer
 * copies on a copy stream per rank) or NCCL's send and receive. */
enum { ATTN_TRANSPORT_AUTO = 0, ATTN_TRANSPORT_CE = 1, ATTN_TRANSPORT_NCCL = 2 };

/* The fault mode (--ring-delay-us U): every receive buffer poisoned before its transfer, every
 * transfer delayed U microseconds, so that a block read before its transfer completed is read
 * wrong on every run, not only when the race is lost. The graded cases run with
 * ATTN_RING_DELAY_GRADED unless --ring-delay-us says otherwise (0: off); timing runs without. A
 * delay longer than every graded step's compute is what makes the missing wait show. */
#define ATTN_RING_DELAY_GRADED 1000
#define ATTN_RING_DELAY_MAX_US 1000000

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

/* Asks for a transport (ATTN_TRANSPORT_*) in the calls that follow; returns the one they use
 * (ATTN_TRANSPORT_CE or ATTN_TRANSPORT_NCCL), or -1 when the one asked for cannot run here (the
 * lesson printed why). Called once, before attention_set_ranks, after the harness has made its
 * GPU current. */
int attention_set_transport(int transport);

/* The fault mode of the calls that follow: transfers delayed delay_us microseconds
 * (0..ATTN_RING_DELAY_MAX_US; 0: off), receive buffers poisoned first. Returns 0, -1 when out of
 * range. A call in the fault mode may wait for its own work before it returns. */
int attention_set_ring_delay(int delay_us);

#ifdef __cplusplus
}
#endif
#endif

/* rng.h: small seeded random numbers for the harness inputs (SplitMix64,
 * Steele et al. 2014). Deterministic across platforms so `--seed S` reruns a case exactly. */
#ifndef RNG_H
#define RNG_H
#include <stdint.h>
typedef struct { uint64_t s; } rng_t;
void rng_seed(rng_t *r, uint64_t seed);
uint64_t rng_next(rng_t *r);
double rng_uniform(rng_t *r);          /* [0, 1) */
double rng_normal(rng_t *r);           /* N(0, 1), Box-Muller */
uint64_t rng_mix(uint64_t a, uint64_t b); /* derive a per-case seed from the run's seed */
#endif

/* ws_rand.h - xorshift64, the one small random sequence the tracker's peer
 * selection and p2pd's picker (and, through them, the simulator) use for
 * tie-breaks and scan starts. Not for anything secret.
 */
#ifndef WS_RAND_H
#define WS_RAND_H

#include <stdint.h>

/* The next number of *state's sequence; a state != 0 stays != 0. */
static inline uint64_t ws_xorshift64(uint64_t *state) {
  uint64_t x = *state;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  *state = x;
  return x;
}

#endif

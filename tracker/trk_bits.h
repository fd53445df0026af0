/* trk_bits.h - word bitsets for the tracker's per-chunk state (internal).
 *
 * Bit i lives in word i / 64 at position i % 64. This is the tracker's
 * in-memory layout only; the wire bitfield (MSB-first bytes, the order
 * BitTorrent uses) is converted on the way in by trk_bits_load_msb(). Kept
 * here rather than in proto/ because the tracker needs word-wide scans
 * (popcount, first-set, and-not) that a byte-level wire helper does not
 * give. Pure functions, any thread.
 */
#ifndef TRK_BITS_H
#define TRK_BITS_H

#include <stddef.h>
#include <stdint.h>

#define TRK_BITS_WORDS(n) (((size_t)(n) + 63u) / 64u)

static inline int trk_bits_get(const uint64_t *w, uint32_t i) {
  return (int)((w[i >> 6] >> (i & 63u)) & 1u);
}

static inline void trk_bits_set(uint64_t *w, uint32_t i) {
  w[i >> 6] |= (uint64_t)1 << (i & 63u);
}

static inline void trk_bits_clear(uint64_t *w, uint32_t i) {
  w[i >> 6] &= ~((uint64_t)1 << (i & 63u));
}

/* Index of the first set bit at or after `from`, or `nbits` if none. */
static inline uint32_t trk_bits_next(const uint64_t *w, uint32_t nbits,
                                     uint32_t from) {
  if (from >= nbits)
    return nbits;
  size_t nw = TRK_BITS_WORDS(nbits);
  size_t wi = from >> 6;
  uint64_t cur = w[wi] & (~(uint64_t)0 << (from & 63u));
  for (;;) {
    if (cur != 0) {
      uint32_t i = (uint32_t)(wi * 64u + (size_t)__builtin_ctzll(cur));
      return i < nbits ? i : nbits;
    }
    if (++wi >= nw)
      return nbits;
    cur = w[wi];
  }
}

/* Loads an MSB-first wire bitfield (bit i = byte i/8, mask 0x80 >> i%8)
 * of nbits bits into w (TRK_BITS_WORDS(nbits) words). Bits past nbits in
 * the last byte are ignored. Returns the number of bits set. */
static inline uint32_t trk_bits_load_msb(uint64_t *w, uint32_t nbits,
                                         const uint8_t *bytes) {
  uint32_t count = 0;
  size_t nw = TRK_BITS_WORDS(nbits);
  size_t nbytes = ((size_t)nbits + 7u) / 8u;
  for (size_t i = 0; i < nw; i++)
    w[i] = 0;
  for (size_t i = 0; i < nbytes; i++) {
    unsigned b = bytes[i];
    if (b == 0)
      continue;
    /* Reverse the byte: wire bit 0 is its MSB, ours is the LSB. */
    b = ((b & 0xF0u) >> 4) | ((b & 0x0Fu) << 4);
    b = ((b & 0xCCu) >> 2) | ((b & 0x33u) << 2);
    b = ((b & 0xAAu) >> 1) | ((b & 0x55u) << 1);
    if (i == nbytes - 1 && (nbits & 7u) != 0)
      b &= (1u << (nbits & 7u)) - 1u; /* drop padding bits */
    w[i / 8u] |= (uint64_t)b << ((i % 8u) * 8u);
    count += (uint32_t)__builtin_popcount(b);
  }
  return count;
}

#endif

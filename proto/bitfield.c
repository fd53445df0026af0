/* bitfield.c - chunk bitmaps shared by peers and the tracker. Bit i lives in
 * byte i/8 under mask 0x80 >> (i % 8), the order BITFIELD and ANNOUNCE carry
 * on the wire. Pure; a bitfield belongs to one thread at a time.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "proto.h"

size_t ws_bitfield_nbytes(uint32_t nbits) {
  return ((size_t)nbits + 7) / 8;
}

int ws_bitfield_init(ws_bitfield_t *bf, uint32_t nbits) {
  uint8_t *bits;

  if (nbits == 0 || nbits > WS_MAX_TOTAL_CHUNKS)
    return WS_ELIMIT;
  bits = calloc(1, ws_bitfield_nbytes(nbits));
  if (bits == NULL)
    return -ENOMEM;
  bf->bits = bits;
  bf->nbits = nbits;
  return 0;
}

void ws_bitfield_free(ws_bitfield_t *bf) {
  if (bf == NULL)
    return;
  free(bf->bits);
  bf->bits = NULL;
  bf->nbits = 0;
}

int ws_bitfield_from_bytes(ws_bitfield_t *bf, uint32_t nbits,
                           const uint8_t *bytes, size_t len) {
  ws_bitfield_t tmp;
  int rc;

  if (nbits == 0 || nbits > WS_MAX_TOTAL_CHUNKS)
    return WS_ELIMIT;
  if (len != ws_bitfield_nbytes(nbits))
    return WS_EBADMSG;
  /* Spare bits past nbits must be zero so counts cannot be inflated. */
  if (nbits % 8 != 0 && (bytes[len - 1] & (0xffu >> (nbits % 8))) != 0)
    return WS_EBADMSG;
  rc = ws_bitfield_init(&tmp, nbits);
  if (rc < 0)
    return rc;
  memcpy(tmp.bits, bytes, len);
  *bf = tmp;
  return 0;
}

void ws_bitfield_set(ws_bitfield_t *bf, uint32_t i) {
  if (i < bf->nbits)
    bf->bits[i / 8] |= (uint8_t)(0x80u >> (i % 8));
}

void ws_bitfield_clear(ws_bitfield_t *bf, uint32_t i) {
  if (i < bf->nbits)
    bf->bits[i / 8] &= (uint8_t) ~(0x80u >> (i % 8));
}

bool ws_bitfield_test(const ws_bitfield_t *bf, uint32_t i) {
  if (i >= bf->nbits)
    return false;
  return (bf->bits[i / 8] & (0x80u >> (i % 8))) != 0;
}

uint32_t ws_bitfield_count(const ws_bitfield_t *bf) {
  uint32_t n = 0;
  size_t nb = ws_bitfield_nbytes(bf->nbits);

  for (size_t i = 0; i < nb; i++)
    n += (uint32_t)__builtin_popcount(bf->bits[i]);
  return n;
}

bool ws_bitfield_full(const ws_bitfield_t *bf) {
  return bf->nbits > 0 && ws_bitfield_count(bf) == bf->nbits;
}

/* Scans a byte at a time, skipping bytes that cannot match (0x00 when
 * looking for a set bit, 0xff for a clear one). */
static uint32_t bitfield_next(const ws_bitfield_t *bf, uint32_t from,
                              bool want) {
  uint8_t skip = want ? 0x00 : 0xff;
  uint32_t i = from;

  while (i < bf->nbits) {
    if (i % 8 == 0 && bf->bits[i / 8] == skip) {
      i += 8;
      continue;
    }
    if (ws_bitfield_test(bf, i) == want)
      return i;
    i++;
  }
  return bf->nbits;
}

uint32_t ws_bitfield_next_set(const ws_bitfield_t *bf, uint32_t from) {
  return bitfield_next(bf, from, true);
}

uint32_t ws_bitfield_next_clear(const ws_bitfield_t *bf, uint32_t from) {
  return bitfield_next(bf, from, false);
}

/* proto-int.h - what only the proto/ sources share: msgpack packing into a
 * ws_pbuf_t, typed lookups in a decoded (already pre-scanned) msgpack map, and
 * the per-family encode/decode entry points that msg.c dispatches to. Pure
 * functions, any thread.
 */
#ifndef WS_PROTO_INT_H
#define WS_PROTO_INT_H

#include <msgpack.h>

#include "proto.h"

/* Packer that appends to a ws_pbuf_t (borrowed for the packer's life). */
void ws_pk_init(msgpack_packer *pk, ws_pbuf_t *b);
/* Each returns 0 or -1 (msgpack-c convention); callers OR results. */
int ws_pk_key(msgpack_packer *pk, const char *key);
int ws_pk_kv_uint(msgpack_packer *pk, const char *key, uint64_t v);
int ws_pk_kv_int(msgpack_packer *pk, const char *key, int64_t v);
int ws_pk_kv_bool(msgpack_packer *pk, const char *key, bool v);
int ws_pk_kv_str(msgpack_packer *pk, const char *key, const char *s);
int ws_pk_kv_bin(msgpack_packer *pk, const char *key, const void *p, size_t n);
int ws_pk_kv_u32list(msgpack_packer *pk, const char *key, const uint32_t *v,
                     uint32_t n);
int ws_pk_str(msgpack_packer *pk, const char *s);

/* Lookups in a map object. Absent optional keys leave *out untouched and
 * return 0; absent required keys, wrong types and out-of-range values are
 * WS_EBADMSG; arrays longer than max are WS_ELIMIT. */
const msgpack_object *ws_mp_find(const msgpack_object *map, const char *key);
int ws_mp_u32(const msgpack_object *map, const char *key, bool required,
              uint32_t max, uint32_t *out) WS_MUST_USE;
int ws_mp_i32(const msgpack_object *map, const char *key, bool required,
              int32_t *out) WS_MUST_USE;
int ws_mp_u64(const msgpack_object *map, const char *key, bool required,
              uint64_t *out) WS_MUST_USE;
int ws_mp_bool(const msgpack_object *map, const char *key, bool required,
               bool *out) WS_MUST_USE;
/* bin of exactly n bytes copied to out. */
int ws_mp_binfix(const msgpack_object *map, const char *key, bool required,
                 uint8_t *out, size_t n) WS_MUST_USE;
/* bin of any length: *p borrowed from the frame body. */
int ws_mp_bin(const msgpack_object *map, const char *key, bool required,
              const uint8_t **p, size_t *n) WS_MUST_USE;
/* str of 0..max bytes without NUL bytes into out[max + 1]. */
int ws_mp_strbuf(const msgpack_object *map, const char *key, bool required,
                 char *out, size_t max) WS_MUST_USE;
/* Same, returns-new in *out (free()). */
int ws_mp_strdup(const msgpack_object *map, const char *key, bool required,
                 size_t max, char **out) WS_MUST_USE;
/* Array of unsigned ints each < bound; returns-new array (NULL when n = 0). */
int ws_mp_u32list(const msgpack_object *map, const char *key, bool required,
                  uint32_t max, uint32_t bound, uint32_t **out,
                  uint32_t *n) WS_MUST_USE;
/* Object (map element) helpers for nested maps in arrays. */
int ws_mp_obj_u32list(const msgpack_object *arr, uint32_t max, uint32_t bound,
                      uint32_t **out, uint32_t *n) WS_MUST_USE;

/* Bounded string checks for encoders: 0 if s is non-NULL, NUL-terminated
 * within max + 1 bytes. */
bool ws_str_ok(const char *s, size_t max);

/* Family codecs: encode writes one map to pk (WS_EUSAGE on invalid fields,
 * -1 -> caller maps to WS_ELIMIT); decode fills m from a root map. */
int ws_ctl_encode(const ws_msg_t *m, msgpack_packer *pk);
int ws_ctl_decode(uint8_t type, const msgpack_object *map, ws_msg_t *m);
int ws_trk_encode(const ws_msg_t *m, msgpack_packer *pk);
int ws_trk_decode(uint8_t type, const msgpack_object *map, ws_msg_t *m);
int ws_peer_encode(const ws_msg_t *m, msgpack_packer *pk);
int ws_peer_decode(uint8_t type, const msgpack_object *map,
                   uint32_t payload_len, ws_msg_t *m);
void ws_trk_free(ws_msg_t *m);
void ws_peer_free(ws_msg_t *m);

/* Big-endian helpers. */
static inline void ws_be32_put(uint8_t *p, uint32_t v) {
  p[0] = (uint8_t)(v >> 24);
  p[1] = (uint8_t)(v >> 16);
  p[2] = (uint8_t)(v >> 8);
  p[3] = (uint8_t)v;
}
static inline uint32_t ws_be32_get(const uint8_t *p) {
  return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) |
         ((uint32_t)p[2] << 8) | (uint32_t)p[3];
}

#endif

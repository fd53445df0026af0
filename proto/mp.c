/* mp.c - thin helpers over msgpack-c shared by the message codecs: a packer
 * that appends into a bounded ws_pbuf_t, and typed, bounds-checked lookups in
 * a decoded map. Decoded objects come only from bodies that passed
 * ws_msgpack_scan. Pure, any thread.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "proto-int.h"

static int pk_write(void *data, const char *buf, size_t len) {
  return ws_pbuf_append(data, buf, len) == 0 ? 0 : -1;
}

void ws_pk_init(msgpack_packer *pk, ws_pbuf_t *b) {
  msgpack_packer_init(pk, b, pk_write);
}

int ws_pk_str(msgpack_packer *pk, const char *s) {
  size_t n = strlen(s);
  return msgpack_pack_str(pk, n) | msgpack_pack_str_body(pk, s, n);
}

int ws_pk_key(msgpack_packer *pk, const char *key) {
  return ws_pk_str(pk, key);
}

int ws_pk_kv_uint(msgpack_packer *pk, const char *key, uint64_t v) {
  return ws_pk_key(pk, key) | msgpack_pack_uint64(pk, v);
}

int ws_pk_kv_int(msgpack_packer *pk, const char *key, int64_t v) {
  return ws_pk_key(pk, key) | msgpack_pack_int64(pk, v);
}

int ws_pk_kv_bool(msgpack_packer *pk, const char *key, bool v) {
  return ws_pk_key(pk, key) |
         (v ? msgpack_pack_true(pk) : msgpack_pack_false(pk));
}

int ws_pk_kv_str(msgpack_packer *pk, const char *key, const char *s) {
  return ws_pk_key(pk, key) | ws_pk_str(pk, s);
}

int ws_pk_kv_bin(msgpack_packer *pk, const char *key, const void *p, size_t n) {
  return ws_pk_key(pk, key) | msgpack_pack_bin(pk, n) |
         msgpack_pack_bin_body(pk, p, n);
}

int ws_pk_kv_u32list(msgpack_packer *pk, const char *key, const uint32_t *v,
                     uint32_t n) {
  int rc = ws_pk_key(pk, key) | msgpack_pack_array(pk, n);
  for (uint32_t i = 0; i < n; i++)
    rc |= msgpack_pack_uint32(pk, v[i]);
  return rc;
}

bool ws_str_ok(const char *s, size_t max) {
  return s != NULL && strnlen(s, max + 1) <= max;
}

const msgpack_object *ws_mp_find(const msgpack_object *map, const char *key) {
  size_t klen = strlen(key);

  if (map->type != MSGPACK_OBJECT_MAP)
    return NULL;
  for (uint32_t i = 0; i < map->via.map.size; i++) {
    const msgpack_object *k = &map->via.map.ptr[i].key;
    if (k->type == MSGPACK_OBJECT_STR && k->via.str.size == klen &&
        memcmp(k->via.str.ptr, key, klen) == 0)
      return &map->via.map.ptr[i].val;
  }
  return NULL;
}

/* Looks key up; returns 1 found, 0 absent-and-optional, <0 error. */
static int mp_lookup(const msgpack_object *map, const char *key, bool required,
                     msgpack_object_type type, const msgpack_object **out) {
  const msgpack_object *o = ws_mp_find(map, key);

  if (o == NULL)
    return required ? WS_EBADMSG : 0;
  if (o->type != type)
    return WS_EBADMSG;
  *out = o;
  return 1;
}

int ws_mp_u32(const msgpack_object *map, const char *key, bool required,
              uint32_t max, uint32_t *out) {
  const msgpack_object *o = NULL;
  int rc = mp_lookup(map, key, required, MSGPACK_OBJECT_POSITIVE_INTEGER, &o);

  if (rc <= 0)
    return rc;
  if (o->via.u64 > max)
    return WS_EBADMSG;
  *out = (uint32_t)o->via.u64;
  return 0;
}

int ws_mp_u64(const msgpack_object *map, const char *key, bool required,
              uint64_t *out) {
  const msgpack_object *o = NULL;
  int rc = mp_lookup(map, key, required, MSGPACK_OBJECT_POSITIVE_INTEGER, &o);

  if (rc <= 0)
    return rc;
  *out = o->via.u64;
  return 0;
}

int ws_mp_i32(const msgpack_object *map, const char *key, bool required,
              int32_t *out) {
  const msgpack_object *o = ws_mp_find(map, key);

  if (o == NULL)
    return required ? WS_EBADMSG : 0;
  if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER && o->via.u64 <= INT32_MAX) {
    *out = (int32_t)o->via.u64;
    return 0;
  }
  if (o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER && o->via.i64 >= INT32_MIN) {
    *out = (int32_t)o->via.i64;
    return 0;
  }
  return WS_EBADMSG;
}

int ws_mp_bool(const msgpack_object *map, const char *key, bool required,
               bool *out) {
  const msgpack_object *o = NULL;
  int rc = mp_lookup(map, key, required, MSGPACK_OBJECT_BOOLEAN, &o);

  if (rc <= 0)
    return rc;
  *out = o->via.boolean;
  return 0;
}

int ws_mp_bin(const msgpack_object *map, const char *key, bool required,
              const uint8_t **p, size_t *n) {
  const msgpack_object *o = NULL;
  int rc = mp_lookup(map, key, required, MSGPACK_OBJECT_BIN, &o);

  if (rc <= 0)
    return rc;
  *p = (const uint8_t *)o->via.bin.ptr;
  *n = o->via.bin.size;
  return 0;
}

int ws_mp_binfix(const msgpack_object *map, const char *key, bool required,
                 uint8_t *out, size_t n) {
  const uint8_t *p = NULL;
  size_t len = 0;
  int rc = ws_mp_bin(map, key, required, &p, &len);

  if (rc < 0 || p == NULL)
    return rc;
  if (len != n)
    return WS_EBADMSG;
  memcpy(out, p, n);
  return 0;
}

static int mp_str(const msgpack_object *map, const char *key, bool required,
                  size_t max, const char **p, size_t *n) {
  const msgpack_object *o = NULL;
  int rc = mp_lookup(map, key, required, MSGPACK_OBJECT_STR, &o);

  if (rc <= 0)
    return rc;
  if (o->via.str.size > max ||
      memchr(o->via.str.ptr, '\0', o->via.str.size) != NULL)
    return WS_EBADMSG;
  *p = o->via.str.ptr;
  *n = o->via.str.size;
  return 1;
}

int ws_mp_strbuf(const msgpack_object *map, const char *key, bool required,
                 char *out, size_t max) {
  const char *p = NULL;
  size_t n = 0;
  int rc = mp_str(map, key, required, max, &p, &n);

  if (rc <= 0)
    return rc;
  memcpy(out, p, n);
  out[n] = '\0';
  return 0;
}

int ws_mp_strdup(const msgpack_object *map, const char *key, bool required,
                 size_t max, char **out) {
  const char *p = NULL;
  size_t n = 0;
  char *s;
  int rc = mp_str(map, key, required, max, &p, &n);

  if (rc <= 0)
    return rc;
  s = malloc(n + 1);
  if (s == NULL)
    return -ENOMEM;
  memcpy(s, p, n);
  s[n] = '\0';
  *out = s;
  return 0;
}

int ws_mp_obj_u32list(const msgpack_object *arr, uint32_t max, uint32_t bound,
                      uint32_t **out, uint32_t *n) {
  uint32_t cnt, *v = NULL;

  if (arr->type != MSGPACK_OBJECT_ARRAY)
    return WS_EBADMSG;
  cnt = arr->via.array.size;
  if (cnt > max)
    return WS_ELIMIT;
  if (cnt > 0) {
    v = malloc((size_t)cnt * sizeof(*v));
    if (v == NULL)
      return -ENOMEM;
  }
  for (uint32_t i = 0; i < cnt; i++) {
    const msgpack_object *e = &arr->via.array.ptr[i];
    if (e->type != MSGPACK_OBJECT_POSITIVE_INTEGER ||
        (bound != 0 && e->via.u64 >= bound) || e->via.u64 > UINT32_MAX) {
      free(v);
      return WS_EBADMSG;
    }
    v[i] = (uint32_t)e->via.u64;
  }
  *out = v;
  *n = cnt;
  return 0;
}

int ws_mp_u32list(const msgpack_object *map, const char *key, bool required,
                  uint32_t max, uint32_t bound, uint32_t **out, uint32_t *n) {
  const msgpack_object *o = ws_mp_find(map, key);

  if (o == NULL)
    return required ? WS_EBADMSG : 0;
  return ws_mp_obj_u32list(o, max, bound, out, n);
}

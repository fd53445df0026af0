/* manifest_serialize.c - ws_manifest_t -> manifest.json bytes (cJSON).
 *
 * Output is deterministic: fixed key order (format, model, version,
 * created_at, chunk_size, files[{name, size, sha256, chunks}]), cJSON's
 * formatted printer, one trailing newline. Integers are written as raw
 * decimal text, not through cJSON's double printer, which may round values
 * with more than 15 digits. Thread: any.
 */
#include "manifest.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int add_u64(cJSON *obj, const char *key, uint64_t v) {
  char num[24];
  snprintf(num, sizeof(num), "%" PRIu64, v);
  return cJSON_AddRawToObject(obj, key, num) != NULL ? 0 : -ENOMEM;
}

static int add_text(cJSON *obj, const char *key, const char *v) {
  if (v == NULL)
    return 0;
  return cJSON_AddStringToObject(obj, key, v) != NULL ? 0 : -ENOMEM;
}

static int add_hash(cJSON *arr_or_obj, const char *key, const ws_hash_t *h) {
  char hex[WS_SHA256_HEX_LEN + 1];
  cJSON *s;
  ws_hash_to_hex(h, hex);
  if (key != NULL)
    return cJSON_AddStringToObject(arr_or_obj, key, hex) != NULL ? 0 : -ENOMEM;
  if ((s = cJSON_CreateString(hex)) == NULL)
    return -ENOMEM;
  return cJSON_AddItemToArray(arr_or_obj, s) ? 0 : -ENOMEM;
}

static int add_file(cJSON *files, const ws_manifest_t *m, const ws_mfile_t *f) {
  cJSON *fo = cJSON_CreateObject(), *chunks;
  if (fo == NULL)
    return -ENOMEM;
  if (!cJSON_AddItemToArray(files, fo)) {
    cJSON_Delete(fo);
    return -ENOMEM;
  }
  if (add_text(fo, "name", f->name) != 0 || add_u64(fo, "size", f->size) != 0 ||
      add_hash(fo, "sha256", &f->sha256) != 0)
    return -ENOMEM;
  if (m->whole_file)
    return 0;
  if ((chunks = cJSON_AddArrayToObject(fo, "chunks")) == NULL)
    return -ENOMEM;
  for (uint32_t j = 0; j < f->nchunks; j++)
    if (add_hash(chunks, NULL, &f->chunks[j]) != 0)
      return -ENOMEM;
  return 0;
}

int ws_manifest_serialize(const ws_manifest_t *m, char **out, size_t *outlen) {
  cJSON *root, *files;
  char *text = NULL, *buf;
  size_t len;
  int err = -ENOMEM;

  for (uint32_t i = 0; i < m->nfiles; i++)
    if (m->files[i].name == NULL ||
        (!m->whole_file && m->files[i].nchunks > 0 &&
         m->files[i].chunks == NULL))
      return WS_EMANIFEST;
  if ((root = cJSON_CreateObject()) == NULL)
    return -ENOMEM;
  if (add_text(root, "format", m->format) != 0 ||
      add_text(root, "model", m->model) != 0 ||
      add_text(root, "version", m->version) != 0 ||
      add_text(root, "created_at", m->created_at) != 0)
    goto cleanup;
  /* A legacy whole-file manifest with the legacy chunk size re-parses to the
   * same chunk_size without the key, so it stays absent there. */
  if ((m->format != NULL || !m->whole_file ||
       m->chunk_size != WS_CHUNK_SIZE_LEGACY) &&
      add_u64(root, "chunk_size", m->chunk_size) != 0)
    goto cleanup;
  if ((files = cJSON_AddArrayToObject(root, "files")) == NULL)
    goto cleanup;
  for (uint32_t i = 0; i < m->nfiles; i++)
    if (add_file(files, m, &m->files[i]) != 0)
      goto cleanup;
  if ((text = cJSON_Print(root)) == NULL)
    goto cleanup;
  len = strlen(text);
  if ((buf = malloc(len + 2)) == NULL)
    goto cleanup;
  memcpy(buf, text, len);
  buf[len] = '\n';
  buf[len + 1] = '\0';
  *out = buf;
  *outlen = len + 1;
  err = 0;
cleanup:
  cJSON_free(text);
  cJSON_Delete(root);
  return err;
}

/* tag.h - release tags: a name (prod, v2, latest) for a release digest,
 * kept as one small S3 object under the model's prefix,
 *
 *   s3://BUCKET/PREFIX/MODEL/tags/<tag>   holding "sha256-<hex>\n",
 *
 * and named in URIs as s3://BUCKET/PREFIX/MODEL/:<tag>. This file is the
 * pure part (names, URIs, the object's bytes); reading a tag from S3 is
 * s3_tag.h, moving one is p2pctl tag. Thread: any (no I/O).
 */
#ifndef WS_TAG_H
#define WS_TAG_H

#include <stddef.h>

#include "digest.h"
#include "ws_err.h"

#define WS_TAG_MAX 128      /* bytes of a tag name */
#define WS_TAG_DIR "tags/"  /* under the model prefix */
#define WS_TAG_BODY_MAX 256 /* a tag object larger than this is refused */

/* 1 when tag is a valid tag name: 1..WS_TAG_MAX bytes of [A-Za-z0-9._-],
 * starting with a letter or digit, and not of the form sha256-<...> (which
 * would read as a digest). */
int ws_tag_name_ok(const char *tag);

/* Splits a tagged URI "s3://BUCKET/PREFIX/MODEL/:TAG" (the model prefix
 * ends in "/" right before ":") into the model's URI (with its trailing
 * "/") and the tag. Returns 1 with *model_uri and *tag new strings, 0 when
 * uri is not a tagged URI (nothing written), WS_EUSAGE when it is one with
 * an invalid tag or no model prefix, -ENOMEM. */
int ws_tag_uri_split(const char *uri, char **model_uri, char **tag) WS_MUST_USE;

/* The key of tag's object under prefix (a model prefix ending in "/", or "").
 * New string, NULL on -ENOMEM. */
char *ws_tag_key(const char *prefix, const char *tag);

/* Parses a tag object's bytes: exactly "sha256-<64 hex>" with one optional
 * trailing "\n". 0 with *digest, or WS_EBADMSG. */
int ws_tag_body_parse(const char *buf, size_t len,
                      ws_hash_t *digest) WS_MUST_USE;

/* The bytes of a tag object naming digest: out must hold
 * WS_DIGEST_STR_LEN + 2 bytes; "sha256-<hex>\n" + NUL, returns the length
 * without the NUL. */
size_t ws_tag_body_format(const ws_hash_t *digest, char *out);

#endif

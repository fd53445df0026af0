/* ws_token.h - the API token file: what p2p-tracker and p2pd check on their
 * TCP APIs (ws_httpd_set_auth) and what p2pctl sends (docs/security.md,
 * "Control plane").
 *
 * Main thread, start-up only: the file is read with blocking I/O before any
 * loop runs.
 */
#ifndef WS_TOKEN_H
#define WS_TOKEN_H

#include <stddef.h>

#include "ws_err.h"

#define WS_TOKEN_MIN 16  /* bytes: shorter is guessable */
#define WS_TOKEN_MAX 256 /* bytes: fits one header line comfortably */

/* Reads the token from path: the whole file minus one trailing newline
 * ("\n" or "\r\n"); WS_TOKEN_MIN..WS_TOKEN_MAX bytes, each a visible ASCII
 * character (no spaces, no control bytes). out must hold WS_TOKEN_MAX + 1
 * bytes (cap). Returns 0 and the NUL-terminated token in out; WS_EKEY with
 * *why (static text) for a bad file; or -errno when it cannot be read. */
WS_MUST_USE int ws_token_load(const char *path, char *out, size_t cap,
                              const char **why);

#endif

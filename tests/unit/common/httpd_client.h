/* httpd_client.h - a blocking raw-socket HTTP client for the ws_httpd
 * tests. Runs on the test's client thread, never on the loop thread. Every
 * read waits at most HC_TIMEOUT_MS so a broken server fails the test
 * instead of hanging it.
 */
#ifndef HTTPD_CLIENT_H
#define HTTPD_CLIENT_H

#include <stddef.h>

#define HC_TIMEOUT_MS 5000
#define HC_BUF_BYTES (64 * 1024)

typedef struct {
  int fd;
  size_t len; /* bytes buffered in buf, not yet consumed */
  char buf[HC_BUF_BYTES];
} hc_t;

typedef struct {
  int status;         /* 0 if no complete response */
  char headers[4096]; /* raw header block, NUL terminated */
  char body[HC_BUF_BYTES];
  size_t body_len;
  int chunked; /* body was chunk-encoded (body holds the decoded bytes) */
} hc_resp_t;

/* Connect; return 0 or -errno. */
int hc_connect_unix(hc_t *c, const char *path);
int hc_connect_tcp(hc_t *c, int port);
/* From source address src (a loopback alias such as "127.0.0.2"). */
int hc_connect_tcp_from(hc_t *c, int port, const char *src);
void hc_close(hc_t *c);
/* Send all bytes; return 0 or -errno. */
int hc_send(hc_t *c, const void *p, size_t n);
int hc_send_str(hc_t *c, const char *s);
/* Send one byte at a time with a short pause in between. */
int hc_send_slowly(hc_t *c, const char *s);
/* Read one response (Content-Length, chunked, or to EOF). Returns 0, or
 * -1 on timeout/EOF before a complete response. */
int hc_read_response(hc_t *c, hc_resp_t *r);
/* Read one header block only (e.g. an interim 100 Continue). 0 or -1. */
int hc_read_head(hc_t *c, hc_resp_t *r);
/* Wait for EOF from the server; returns 0 on EOF (data before it is
 * discarded), -1 on timeout, -errno on error (ECONNRESET counts as EOF). */
int hc_wait_eof(hc_t *c, int timeout_ms);
/* Case-insensitive header lookup in r->headers; copies the value. */
int hc_header(const hc_resp_t *r, const char *name, char *out, size_t cap);
void hc_sleep_ms(int ms);

#endif

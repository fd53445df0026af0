/* httpd_client.c - blocking raw-socket HTTP client for the ws_httpd tests
 * (see httpd_client.h). Client thread only. */
#include "httpd_client.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

void hc_sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
    ;
}

int hc_connect_unix(hc_t *c, const char *path) {
  struct sockaddr_un sa;

  memset(&sa, 0, sizeof(sa));
  sa.sun_family = AF_UNIX;
  if (strlen(path) >= sizeof(sa.sun_path))
    return -ENAMETOOLONG;
  memcpy(sa.sun_path, path, strlen(path) + 1);
  c->len = 0;
  c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (c->fd < 0)
    return -errno;
  if (connect(c->fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
    int e = errno;
    close(c->fd);
    c->fd = -1;
    return -e;
  }
  return 0;
}

int hc_connect_tcp(hc_t *c, int port) {
  return hc_connect_tcp_from(c, port, NULL);
}

int hc_connect_tcp_from(hc_t *c, int port, const char *src) {
  struct sockaddr_in sa, from;

  memset(&sa, 0, sizeof(sa));
  sa.sin_family = AF_INET;
  sa.sin_port = htons((unsigned short)port);
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  c->len = 0;
  c->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (c->fd < 0)
    return -errno;
  memset(&from, 0, sizeof(from));
  from.sin_family = AF_INET;
  errno = 0;
  if (src != NULL &&
      (inet_pton(AF_INET, src, &from.sin_addr) != 1 ||
       bind(c->fd, (struct sockaddr *)&from, sizeof(from)) != 0)) {
    int e = errno ? errno : EINVAL;
    close(c->fd);
    c->fd = -1;
    return -e;
  }
  if (connect(c->fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
    int e = errno;
    close(c->fd);
    c->fd = -1;
    return -e;
  }
  return 0;
}

void hc_close(hc_t *c) {
  if (c->fd >= 0)
    close(c->fd);
  c->fd = -1;
}

int hc_send(hc_t *c, const void *p, size_t n) {
  const char *s = p;

  while (n > 0) {
    ssize_t w = send(c->fd, s, n, MSG_NOSIGNAL);
    if (w < 0) {
      if (errno == EINTR)
        continue;
      return -errno;
    }
    s += w;
    n -= (size_t)w;
  }
  return 0;
}

int hc_send_str(hc_t *c, const char *s) {
  return hc_send(c, s, strlen(s));
}

int hc_send_slowly(hc_t *c, const char *s) {
  for (; *s != '\0'; s++) {
    int rc = hc_send(c, s, 1);
    if (rc < 0)
      return rc;
    hc_sleep_ms(1);
  }
  return 0;
}

/* Reads more into c->buf; returns bytes read, 0 on EOF, -1 on timeout or
 * a full buffer, -errno on error. */
static int hc_fill(hc_t *c, int timeout_ms) {
  struct pollfd pfd = {.fd = c->fd, .events = POLLIN};
  ssize_t n;
  int rc;

  if (c->len >= sizeof(c->buf))
    return -1;
  rc = poll(&pfd, 1, timeout_ms);
  if (rc <= 0)
    return -1;
  n = recv(c->fd, c->buf + c->len, sizeof(c->buf) - c->len, 0);
  if (n < 0)
    return errno == ECONNRESET ? 0 : -errno;
  c->len += (size_t)n;
  return (int)n;
}

static void hc_consume(hc_t *c, size_t n) {
  memmove(c->buf, c->buf + n, c->len - n);
  c->len -= n;
}

/* Makes sure at least want bytes are buffered; 0 or -1. */
static int hc_need(hc_t *c, size_t want) {
  while (c->len < want) {
    if (hc_fill(c, HC_TIMEOUT_MS) <= 0)
      return -1;
  }
  return 0;
}

static char *hc_find(hc_t *c, const char *needle) {
  return memmem(c->buf, c->len, needle, strlen(needle));
}

int hc_header(const hc_resp_t *r, const char *name, char *out, size_t cap) {
  size_t nlen = strlen(name);
  const char *line = strstr(r->headers, "\r\n");

  while (line != NULL && line[2] != '\0') {
    const char *start = line + 2;
    const char *end = strstr(start, "\r\n");
    if (end == NULL)
      end = start + strlen(start);
    if ((size_t)(end - start) > nlen && start[nlen] == ':' &&
        strncasecmp(start, name, nlen) == 0) {
      const char *v = start + nlen + 1;
      size_t vlen;
      while (*v == ' ')
        v++;
      vlen = (size_t)(end - v);
      if (vlen >= cap)
        return -1;
      memcpy(out, v, vlen);
      out[vlen] = '\0';
      return 0;
    }
    line = end[0] != '\0' ? end : NULL;
  }
  return -1;
}

static int hc_read_chunked(hc_t *c, hc_resp_t *r) {
  for (;;) {
    char *eol;
    unsigned long sz;
    char *end;

    while ((eol = hc_find(c, "\r\n")) == NULL) {
      if (hc_fill(c, HC_TIMEOUT_MS) <= 0)
        return -1;
    }
    sz = strtoul(c->buf, &end, 16);
    if (end == c->buf)
      return -1;
    hc_consume(c, (size_t)(eol - c->buf) + 2);
    if (hc_need(c, sz + 2) < 0)
      return -1;
    if (r->body_len + sz >= sizeof(r->body))
      return -1;
    memcpy(r->body + r->body_len, c->buf, sz);
    r->body_len += sz;
    r->body[r->body_len] = '\0';
    hc_consume(c, sz + 2);
    if (sz == 0)
      return 0;
  }
}

int hc_read_head(hc_t *c, hc_resp_t *r) {
  char *end;
  size_t hlen;

  memset(r, 0, sizeof(*r));
  while ((end = hc_find(c, "\r\n\r\n")) == NULL) {
    if (hc_fill(c, HC_TIMEOUT_MS) <= 0)
      return -1;
  }
  hlen = (size_t)(end - c->buf) + 4;
  if (hlen >= sizeof(r->headers))
    return -1;
  memcpy(r->headers, c->buf, hlen);
  r->headers[hlen] = '\0';
  hc_consume(c, hlen);
  if (sscanf(r->headers, "HTTP/1.%*d %d", &r->status) != 1)
    return -1;
  return 0;
}

int hc_read_response(hc_t *c, hc_resp_t *r) {
  char val[64];

  do {
    if (hc_read_head(c, r) < 0)
      return -1;
  } while (r->status == 100); /* an interim answer precedes the real one */
  if (r->status == 204 || r->status == 304)
    return 0; /* never a body */
  if (hc_header(r, "Transfer-Encoding", val, sizeof(val)) == 0 &&
      strcasecmp(val, "chunked") == 0) {
    r->chunked = 1;
    return hc_read_chunked(c, r);
  }
  if (hc_header(r, "Content-Length", val, sizeof(val)) == 0) {
    size_t n = strtoul(val, NULL, 10);
    if (n >= sizeof(r->body) || hc_need(c, n) < 0)
      return -1;
    memcpy(r->body, c->buf, n);
    r->body[n] = '\0';
    r->body_len = n;
    hc_consume(c, n);
    return 0;
  }
  /* No length: body runs to EOF. */
  for (;;) {
    int n = hc_fill(c, HC_TIMEOUT_MS);
    if (n == 0)
      break;
    if (n < 0)
      return -1;
  }
  if (c->len >= sizeof(r->body))
    return -1;
  memcpy(r->body, c->buf, c->len);
  r->body_len = c->len;
  r->body[r->body_len] = '\0';
  c->len = 0;
  return 0;
}

int hc_wait_eof(hc_t *c, int timeout_ms) {
  for (;;) {
    int n;
    c->len = 0;
    n = hc_fill(c, timeout_ms);
    if (n == 0)
      return 0;
    if (n < 0)
      return n;
  }
}

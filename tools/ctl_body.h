/* ctl_body.h - a reply body collected by libcurl into one bounded,
 * NUL-terminated buffer (for the p2pctl commands that read a JSON reply
 * from a server other than p2pd's API: the Kubernetes API, a tracker).
 *
 * Thread: the calling thread (libcurl easy interface).
 */
#ifndef WS_CTL_BODY_H
#define WS_CTL_BODY_H

#include <stddef.h>

typedef struct {
  char *p;    /* NUL-terminated; NULL until the first byte */
  size_t len; /* bytes before the NUL */
  size_t max; /* the most bytes kept; more fails the transfer */
  int over;   /* the reply was longer than max */
} ctl_body_t;

/* CURLOPT_WRITEFUNCTION with CURLOPT_WRITEDATA = a ctl_body_t (max set).
 * Returns 0 (curl fails with CURLE_WRITE_ERROR) past max or on ENOMEM. */
size_t ctl_body_write(char *data, size_t size, size_t n, void *body);

#endif

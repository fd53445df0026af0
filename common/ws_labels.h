/* ws_labels.h - node labels ("pool=a100,gpu=h100"): the canonical text form
 * p2pd sends in HELLO (docs/protocol.md, key "lb") and the tracker matches a
 * prefetch selector against (docs/tracker.md). Pure, any thread.
 *
 * Canonical form: "k=v" pairs joined by ',', at most WS_LABELS_COUNT_MAX
 * pairs and WS_LABELS_MAX bytes, keys unique. A key is 1..WS_LABEL_KEY_MAX
 * bytes of [A-Za-z0-9._/-] starting with a letter or digit; a value is
 * 0..WS_LABEL_VALUE_MAX bytes of [A-Za-z0-9._-] (Kubernetes label rules,
 * loosened for prefixed keys).
 */
#ifndef WS_LABELS_H
#define WS_LABELS_H

#include <stdbool.h>
#include <stddef.h>

#define WS_LABELS_MAX 512
#define WS_LABELS_COUNT_MAX 16
#define WS_LABEL_KEY_MAX 63
#define WS_LABEL_VALUE_MAX 63

/* true when s (NUL-terminated) is a canonical label list; "" is one. */
bool ws_labels_valid(const char *s);

/* Appends the pairs of list ("k=v" or "k=v,k2=v2"; empty items are
 * skipped) to the canonical list buf (cap bytes, NUL-terminated). A key
 * already in buf takes the new value. 0, or WS_EUSAGE for a malformed pair
 * or when the result would exceed cap, WS_LABELS_MAX or
 * WS_LABELS_COUNT_MAX (buf is then unchanged). */
int ws_labels_add(char *buf, size_t cap, const char *list);

/* The value of key in the canonical list labels: *val points into labels
 * and *vlen is its length. true when key is present. */
bool ws_labels_get(const char *labels, const char *key, const char **val,
                   size_t *vlen);

/* true when key=value is among labels (value "" matches an empty value). */
bool ws_labels_has(const char *labels, const char *key, const char *value);

/* Validity of one key / value (NUL-terminated), as above. */
bool ws_label_key_ok(const char *k, size_t n);
bool ws_label_value_ok(const char *v, size_t n);

#endif

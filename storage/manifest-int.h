/* manifest-int.h - shared only by storage/manifest*.c (parse, serialize,
 * build). Not part of the public manifest interface. */
#ifndef WS_MANIFEST_INT_H
#define WS_MANIFEST_INT_H

#include <stddef.h>
#include <stdint.h>

#include "manifest.h"

/* Writes a formatted reason into errbuf (if any) and returns err. */
int ws_manifest_fail(char *errbuf, size_t errlen, int err, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Reason why name breaks a manifest name rule, or NULL if it is valid. */
const char *ws_manifest_name_problem(const char *name, size_t len);

/* Rejects duplicate names and a name that is a directory of another.
 * 0, WS_EDUPNAME, WS_EPATH or -ENOMEM. */
int ws_manifest_check_names(const ws_mfile_t *files, uint32_t n, char *errbuf,
                            size_t errlen);

#endif

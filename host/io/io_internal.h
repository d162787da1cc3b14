/* wbcl — private helpers shared by the host/io sources. Not installed, not part of the API. */
#ifndef WBCL_IO_INTERNAL_H
#define WBCL_IO_INTERNAL_H

#include <stdio.h>

#include "wbcl/io.h"

/* Name used in messages for an unnamed memory buffer. */
#define WBCL_IO_NAME(n) ((n) ? (n) : "<memory>")

/* printf-style message into err (NULL/0-safe); newlines become spaces so it stays one line. */
#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
void wbcl_io_errf(char *err, size_t errlen, const char *fmt, ...);

/* Writes a printable, length-limited rendering of the len bytes at s into buf (bufsize >= 8):
 * control bytes become '?', long strings end in "...". Returns buf. */
const char *wbcl_io_quote(char *buf, size_t bufsize, const char *s, size_t len);

/* 1 on a little-endian host. */
int wbcl_io_host_le(void);

/* Reverses the byte order of n elements of esize bytes in place. */
void wbcl_io_swap(void *data, size_t n, size_t esize);

/* Writes n elements of esize bytes little-endian; returns 0 on success, -1 on error. */
int wbcl_io_write_le(FILE *f, const void *data, size_t n, size_t esize);

/* a*b into *r; returns 0 on overflow. */
int wbcl_io_mul(size_t a, size_t b, size_t *r);

/* Checks an array given to a writer/converter: non-NULL, valid elem, ndim 0..8,
 * nbytes == numel * elem size (no overflow), data non-NULL when nbytes > 0.
 * who/what name the call and the object in the message. */
wbcl_status wbcl_io_check_array(const wbcl_array *a, const char *who, const char *what,
                                char *err, size_t errlen);

/* Writes path atomically: creates a unique temporary file next to path, calls
 * fn(f, ctx) (returns 0 on success), closes, renames over path. On any failure the temporary
 * file is removed and path is untouched. */
typedef int (*wbcl_io_writer_fn)(FILE *f, void *ctx);
wbcl_status wbcl_io_atomic_write(const char *path, wbcl_io_writer_fn fn, void *ctx, char *err,
                                 size_t errlen);

#endif

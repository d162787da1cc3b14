/* Raw device buffers in op implementations: temporaries released right after use, fills, blocking
 * reads and writes, copies, the wait for the queue, and the reusable work tensors of the layers.
 * (The grow-only scratch slots a context owns are wbcl__scratch, host/core/context.c.) Every failure
 * sets the context's message naming `what` and returns the status to propagate. Not installed, not
 * public API. */
#ifndef WBCL_BUFFERS_H
#define WBCL_BUFFERS_H

#include "internal.h"

/* A temporary device buffer of `floats` floats; released right after use (OpenCL keeps it alive
 * until the enqueued kernels that use it have run). */
wbcl_status wbcl__tmp(wbcl_context *ctx, size_t floats, const char *what, cl_mem *out);
/* Releases *m if set and clears it. */
void wbcl__tmp_release(cl_mem *m);
/* Zero-fills `floats` floats of a buffer. */
wbcl_status wbcl__zero(wbcl_context *ctx, cl_mem m, size_t floats);
/* Fills `count` ints of a buffer with value. */
wbcl_status wbcl__fill_int(wbcl_context *ctx, cl_mem mem, int value, size_t count, const char *what);

/* Blocking read of `bytes` bytes from byte offset off into dst. */
wbcl_status wbcl__read_buf(wbcl_context *ctx, cl_mem mem, size_t off, size_t bytes, void *dst, const char *what);
/* Blocking write of `bytes` bytes from src at offset 0. */
wbcl_status wbcl__write_buf(wbcl_context *ctx, cl_mem mem, size_t bytes, const void *src, const char *what);
/* Enqueues a copy of `bytes` bytes from src to dst (both from offset 0). */
wbcl_status wbcl__copy_buf(wbcl_context *ctx, cl_mem src, cl_mem dst, size_t bytes, const char *what);
/* Waits until the queue has run everything enqueued; a failure names the op. */
wbcl_status wbcl__finish(wbcl_context *ctx, const char *op);

/* (Re)creates *t with x's leading dimensions and last dimension `cols`, unless it already
 * has that shape. */
wbcl_status wbcl__work(wbcl_context *ctx, wbcl_tensor **t, const wbcl_tensor *x, size_t cols);

#endif

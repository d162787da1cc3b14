/* wbcl — clFFT wrapper (host/core/fft.c). Not public API.
 *
 * Batched real <-> Hermitian transforms over the last one or two axes with
 * the unitary scaling N^-1/2 in both directions (N = H W; 1-D is H = 1):
 *     forward: real (batch, H, W) -> complex (batch, H, W/2+1) interleaved (re, im) floats
 *     inverse: complex (batch, H, W/2+1) -> real (batch, H, W) (the Hermitian
 *              half spectrum; the input buffer may be overwritten by clFFT).
 * Signals of at most WBCL_DFT_DIRECT_MAX values (H W) take a direct DFT (cl/dft.cl): one
 * program serves every such shape, batch and direction, where clFFT builds a program for each
 * (H, W, batch, direction) it meets; its sums are as short as the signal (error ~ H W eps, as
 * an FFT's). Longer signals take clFFT.
 * clFFT plans are baked once per (H, W, batch, direction) and cached in the context
 * (destroyed with it). clFFT's process-wide clfftSetup/clfftTeardown are
 * reference-counted under a mutex, so contexts may come and go in any order
 * and from several threads. Lengths with a prime factor above 13 are refused
 * (WBCL_ERROR_UNSUPPORTED naming the length): clFFT has no such radices. */
#ifndef WBCL_FFT_H
#define WBCL_FFT_H

#include "internal.h"

/* Signals up to this many values (H W) take the direct DFT of cl/dft.cl. */
#define WBCL_DFT_DIRECT_MAX 64

/* 0 if every prime factor of n is <= 13 (n >= 1), else the offending prime. */
size_t wbcl__fft_bad_factor(size_t n);
/* Checks H and W (message names `op`). */
wbcl_status wbcl__fft_check(wbcl_context *ctx, const char *op, size_t H, size_t W);
wbcl_status wbcl__fft_forward(wbcl_context *ctx, size_t batch, size_t H, size_t W, cl_mem in, cl_mem out);
wbcl_status wbcl__fft_inverse(wbcl_context *ctx, size_t batch, size_t H, size_t W, cl_mem in, cl_mem out);
/* Destroys the context's plans and releases its clFFT reference (context destroy). */
void wbcl__fft_release(wbcl_context *ctx);

#endif

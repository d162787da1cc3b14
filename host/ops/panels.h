/* Rows of a per-head view packed into panels of 16, the layout the CPU-shaped register-tiled kernels of
 * energy attention and of AoT's thresholded step read (cl/energy.cl wbcl_energy_pack; host/ops/energy.c).
 * Not installed. */
#ifndef WBCL_PANELS_H
#define WBCL_PANELS_H

#include "internal.h"
#include "views.h"

#define WBCL_PANEL_ROWS 16 /* cl/energy.cl EC_KP, cl/aot.cl AT_KP */

/* Panels of N rows: ceil(N / 16) (the kernels' npan argument) */
static inline size_t wbcl__panel_count(size_t N)
{
    return (N + WBCL_PANEL_ROWS - 1) / WBCL_PANEL_ROWS;
}

/* Enqueues the packing of the (B, K, N, p) view y into a new temporary *out of B K ceil(N/16) 16 p floats:
 * out[bh][panel][c][j] = y(b, h, 16 panel + j, c), 0 for rows past N. The caller releases *out (OpenCL
 * keeps it until the kernels enqueued on it have run); on failure *out is NULL and the message names
 * `what`. */
wbcl_status wbcl__pack_panels(wbcl_context *ctx, const char *what, const wbcl__hview *y, const wbcl__hdims *dm,
                              cl_mem *out);

#endif

/* Launch geometry of the CPU-shaped kernels that loop inside each work-item (one item per row or per
 * block of rows): their local size, their 1-D launch, and the row blocks of the row-block reductions.
 * The launch itself is wbcl__launch (host/core/program.c, internal.h). Not installed, not public API. */
#ifndef WBCL_LAUNCH_H
#define WBCL_LAUNCH_H

#include "internal.h"

/* Local size for kernels that loop inside each work-item: PoCL does not vectorize across such
 * items, so the local size only sets how many work-groups the cores share. Enough groups for
 * every core, few distinct sizes (each new one costs a compile). */
size_t wbcl__loop_local(const wbcl_context *ctx, size_t items);
/* 1-D launch of `items` work-items with the local size above. */
wbcl_status wbcl__launch_items(wbcl_context *ctx, wbcl_kern *k, size_t items);

/* Token blocks of the row-block reductions: rb rows per block, nblk <= 64 blocks
 * (rb >= 16 unless N is smaller). */
void wbcl__row_blocks(size_t N, size_t *rb, size_t *nblk);

#endif

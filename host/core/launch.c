/* Launch geometry of the CPU-shaped loop kernels (host/core/launch.h). */
#include "launch.h"

size_t wbcl__loop_local(const wbcl_context *ctx, size_t items)
{
    size_t cu = ctx->info.compute_units ? ctx->info.compute_units : 1;
    size_t lw = items >= 256 * cu ? 64 : items >= 16 * cu ? 8 : 1;
    while (lw > 1 && lw > ctx->info.max_work_group_size) lw /= 2;
    return lw;
}

wbcl_status wbcl__launch_items(wbcl_context *ctx, wbcl_kern *k, size_t items)
{
    size_t g[1] = {items}, l[1] = {wbcl__loop_local(ctx, items)};
    return wbcl__launch(ctx, k, 1, g, l);
}

void wbcl__row_blocks(size_t N, size_t *rb, size_t *nblk)
{
    size_t r = (N + 63) / 64;
    if (r < 16) r = 16;
    *rb = r;
    *nblk = (N + r - 1) / r;
    if (*nblk == 0) *nblk = 1;
}

/* Packed copies of constant weights (the GEMM's B panels), kept between calls.
 *
 * The models and modules own weight tensors that nothing writes after they are made (CRATE's U,
 * the ISTA dictionary, ToST's projections). They mark them constant
 * (wbcl__tensor_constant). On the packed GEMM backend such a tensor used as B is packed into NR-column
 * panels once, and the panels are reused by every later call with the same view of it (transpose,
 * offset, leading dimension, n, k, NR): host/ops/gemm.c. Packing for a new NR (a parameter change)
 * frees the tensor's panels of the other width. Before this, each linear layer packed its
 * weight again on every call: 24 % of ToST-T's device time at batch 1 on PoCL (perf/RESULTS.md).
 *
 * Memory: the panels hold NR-padded float copies, about the weight's size again (twice a float16
 * weight's). They count against a per-context limit, wbcl_context_set_weight_cache (default: a
 * quarter of the device's global memory); lowering the limit frees kept panels, the newest first,
 * until it holds. A weight whose panels do not fit is packed per call as before, and so is any weight
 * when the buffer cannot be allocated: the cache only ever saves work.
 *
 * Lifetime: the panels belong to the tensor and go with it (wbcl_tensor_destroy), and with any write
 * through the tensor API (wbcl_tensor_write, fill, copy into it). The byte count lives in a small
 * shared block that the context and every entry hold a reference to, so a tensor destroyed after its
 * context (allowed: OpenCL keeps the context alive for its buffers) touches no freed memory. */
#include "internal.h"

#include <stdint.h>
#include <stdlib.h>

/* entries per tensor: the views one weight is used with (the ISTA dictionary: two) */
#define MAX_ENTRIES 4

struct wbcl__pack_pool {
    size_t bytes, limit;
    unsigned refs;              /* the context and each entry */
    struct wbcl__packed *first; /* every entry, the newest first (to free them when the limit drops) */
};

struct wbcl__packed {
    struct wbcl__packed *next;                  /* the owner's entries */
    struct wbcl__packed *pool_prev, *pool_next; /* the pool's */
    wbcl_tensor *owner;
    wbcl__packed_key key;
    cl_mem mem;
    size_t bytes;
    int ready; /* the pack launch into mem was enqueued */
    struct wbcl__pack_pool *pool;
};

static void pool_release(struct wbcl__pack_pool *p)
{
    if (p && --p->refs == 0) free(p);
}

/* Frees an entry already unlinked from its owner's list. */
static void entry_free(struct wbcl__packed *e)
{
    struct wbcl__pack_pool *p = e->pool;
    if (e->pool_prev) e->pool_prev->pool_next = e->pool_next;
    else p->first = e->pool_next;
    if (e->pool_next) e->pool_next->pool_prev = e->pool_prev;
    if (e->mem) clReleaseMemObject(e->mem); /* the runtime keeps it until queued work is done */
    p->bytes -= e->bytes;
    pool_release(p);
    free(e);
}

/* Unlinks e from its owner's list and frees it. */
static void entry_drop(struct wbcl__packed *e)
{
    for (struct wbcl__packed **pe = &e->owner->packed; *pe; pe = &(*pe)->next)
        if (*pe == e) {
            *pe = e->next;
            break;
        }
    entry_free(e);
}

wbcl_status wbcl__pack_pool_create(wbcl_context *ctx)
{
    ctx->pack_pool = calloc(1, sizeof *ctx->pack_pool);
    if (!ctx->pack_pool) return WBCL_ERROR_OUT_OF_MEMORY;
    ctx->pack_pool->refs = 1;
    const uint64_t quarter = ctx->info.global_mem_size / 4;
    ctx->pack_pool->limit = quarter < (uint64_t)SIZE_MAX ? (size_t)quarter : SIZE_MAX;
    return WBCL_SUCCESS;
}

void wbcl__pack_pool_release(wbcl_context *ctx)
{
    pool_release(ctx->pack_pool);
    ctx->pack_pool = NULL;
}

wbcl_status wbcl_context_set_weight_cache(wbcl_context *ctx, size_t max_bytes)
{
    if (!ctx) return WBCL_ERROR_INVALID_ARGUMENT;
    struct wbcl__pack_pool *p = ctx->pack_pool;
    p->limit = max_bytes;
    while (p->bytes > p->limit && p->first) entry_drop(p->first); /* the newest first */
    return WBCL_SUCCESS;
}

size_t wbcl_context_weight_cache_bytes(const wbcl_context *ctx) { return ctx ? ctx->pack_pool->bytes : 0; }

void wbcl__tensor_constant(wbcl_tensor *t)
{
    if (t) t->constant = 1;
}

void wbcl__tensor_transient(wbcl_tensor *t)
{
    if (!t) return;
    t->constant = 0;
    wbcl__tensor_drop_packed(t);
}

void wbcl__tensor_drop_packed(wbcl_tensor *t)
{
    if (!t) return;
    while (t->packed) {
        struct wbcl__packed *e = t->packed;
        t->packed = e->next;
        entry_free(e);
    }
}

static int same_key(const wbcl__packed_key *a, const wbcl__packed_key *b)
{
    return a->tb == b->tb && a->off == b->off && a->ld == b->ld && a->n == b->n && a->k == b->k && a->nr == b->nr;
}

int wbcl__packed_get(wbcl_context *ctx, wbcl_tensor *t, const wbcl__packed_key *key, size_t bytes, cl_mem *mem)
{
    *mem = NULL;
    if (!t->constant) return 0;
    size_t count = 0;
    for (struct wbcl__packed *e = t->packed; e; e = e->next, count++)
        if (same_key(&e->key, key)) {
            *mem = e->mem;
            return e->ready ? 1 : 0;
        }
    /* panels of another width are of no use while this one is in force (a parameter change) */
    for (struct wbcl__packed **pe = &t->packed; *pe;) {
        struct wbcl__packed *e = *pe;
        if (e->key.nr == key->nr) {
            pe = &e->next;
            continue;
        }
        *pe = e->next;
        entry_free(e);
        count--;
    }
    struct wbcl__pack_pool *pool = ctx->pack_pool;
    if (count >= MAX_ENTRIES || bytes == 0 || bytes > pool->limit || pool->bytes > pool->limit - bytes) return 0;
    struct wbcl__packed *e = calloc(1, sizeof *e);
    if (!e) return 0;
    cl_int err;
    e->mem = clCreateBuffer(ctx->cl, CL_MEM_READ_WRITE, bytes, NULL, &err);
    if (err != CL_SUCCESS || !e->mem) { /* no room: pack per call, as without the cache */
        free(e);
        return 0;
    }
    e->key = *key;
    e->bytes = bytes;
    e->pool = pool;
    e->owner = t;
    pool->refs++;
    pool->bytes += bytes;
    e->next = t->packed;
    t->packed = e;
    e->pool_next = pool->first;
    if (pool->first) pool->first->pool_prev = e;
    pool->first = e;
    *mem = e->mem;
    return 0;
}

void wbcl__packed_done(wbcl_tensor *t, const wbcl__packed_key *key, int ok)
{
    for (struct wbcl__packed *e = t->packed; e; e = e->next)
        if (same_key(&e->key, key)) {
            if (ok) e->ready = 1;
            else entry_drop(e); /* the pack launch failed: the panels hold nothing */
            return;
        }
}

/* libFuzzer target: the CRATE and ToST model loaders (host/model/crate.c, tost.c) on arbitrary
 * safetensors bytes. Each input is parsed (wbcl_safetensors_open_mem) and handed to both loaders
 * with fixed small configurations matching the seeds (tests/fuzz/make_model_seeds.py):
 *   CRATE: d 8, depth 1, 2 heads of 4, patch 2, 1 channel;
 *   ToST:  d 8, depth 1, 2 heads, patch 8 (3 convs), 1 class-attention block.
 * On success the model runs one forward pass on a small image (CRATE 1x1x4x4, ToST 1x3x8x8), so
 * that whatever a loader accepted is also safe to run. Invariants checked (abort on violation):
 * a failed load returns NULL and leaves a non-empty message; a successful one gives a config
 * with the classes > 0. The OpenCL context is opened once (PoCL CPU device).
 * No work is left in flight: each input ends with wbcl_context_finish, and the context is destroyed
 * by an atexit handler. (Before both, a kernel still being compiled by a PoCL worker thread when
 * libFuzzer exit()ed after -max_total_time crashed in LLVM during the exit handlers; ASan's report of
 * that SEGV and LeakSanitizer's exit-time check then waited on each other's locks for ever: a CI run
 * hung there, 2026-11-28.)
 * Build and run: tests/fuzz/README.md, tools/fuzz-smoke.sh. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wbcl/wbcl.h"

static wbcl_context *ctx;

static void close_context(void)
{
    wbcl_context_destroy(ctx); /* finishes the queue first */
    ctx = NULL;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    char err[512];
    if (wbcl_context_create(NULL, &ctx, err, sizeof err)) {
        fprintf(stderr, "fuzz_models: no OpenCL device: %s\n", err);
        abort();
    }
    /* registered after the sanitizers' own exit-time leak check, so it runs before it */
    atexit(close_context);
    return 0;
}

static void run_crate(const wbcl_safetensors *st)
{
    wbcl_crate_config c;
    memset(&c, 0, sizeof c);
    c.dim = 8;
    c.depth = 1;
    c.heads = 2;
    c.dim_head = 4;
    c.patch = 2;
    c.channels = 1;
    c.eta = 0.1f;
    c.lambd = 0.1f;
    c.ln_eps = 1e-5f;
    wbcl_crate *m = (wbcl_crate *)&c; /* must be overwritten */
    if (wbcl_crate_load(ctx, st, "fuzz", &c, &m)) {
        if (m || !wbcl_context_last_error(ctx)[0]) abort();
        return;
    }
    const wbcl_crate_config *mc = wbcl_crate_get_config(m);
    if (!mc || mc->num_classes == 0) abort();
    size_t si[4] = {1, 1, 4, 4}, so[2] = {1, mc->num_classes};
    wbcl_tensor *x = NULL, *y = NULL;
    if (!wbcl_tensor_create(ctx, 4, si, WBCL_F32, NULL, &x) && !wbcl_tensor_create(ctx, 2, so, WBCL_F32, NULL, &y))
        (void)wbcl_crate_forward(ctx, m, x, WBCL_MODEL_LOGITS, y, NULL);
    wbcl_tensor_destroy(x);
    wbcl_tensor_destroy(y);
    wbcl_crate_destroy(m);
}

static void run_tost(const wbcl_safetensors *st)
{
    wbcl_tost_config c;
    memset(&c, 0, sizeof c);
    c.dim = 8;
    c.depth = 1;
    c.heads = 2;
    c.patch = 8;
    c.cls_layers = 1;
    c.ln_eps = 1e-6f;
    c.bn_eps = 1e-5f;
    wbcl_tost *m = (wbcl_tost *)&c;
    if (wbcl_tost_load(ctx, st, "fuzz", &c, &m)) {
        if (m || !wbcl_context_last_error(ctx)[0]) abort();
        return;
    }
    const wbcl_tost_config *mc = wbcl_tost_get_config(m);
    if (!mc || mc->num_classes == 0 || mc->mlp_hidden == 0) abort();
    size_t si[4] = {1, 3, 8, 8}, so[2] = {1, mc->num_classes};
    wbcl_tensor *x = NULL, *y = NULL;
    if (!wbcl_tensor_create(ctx, 4, si, WBCL_F32, NULL, &x) && !wbcl_tensor_create(ctx, 2, so, WBCL_F32, NULL, &y))
        (void)wbcl_tost_forward(ctx, m, x, WBCL_MODEL_LOGITS, y, NULL);
    wbcl_tensor_destroy(x);
    wbcl_tensor_destroy(y);
    wbcl_tost_destroy(m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    wbcl_safetensors *st = NULL;
    char err[256];
    if (wbcl_safetensors_open_mem(data, size, "fuzz.safetensors", &st, err, sizeof err)) {
        if (st) abort();
        return 0;
    }
    run_crate(st);
    run_tost(st);
    wbcl_safetensors_close(st);
    /* whatever a failed forward pass left enqueued finishes within this input (and its -timeout) */
    if (wbcl_context_finish(ctx)) abort();
    return 0;
}

/* Generation with the causal language models (include/wbcl/lm.h): prefill, then one decode step
 * per new token; greedy or temperature / top-k sampling with wbcl's own SplitMix64 generator. */
#include "model_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "wbcl/lm.h"

static uint64_t splitmix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static int64_t argmax(const float *x, size_t n)
{
    size_t best = 0;
    for (size_t i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return (int64_t)best;
}

static int cmp_desc(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x < y) - (x > y);
}

int64_t wbcl_lm_pick(const float *logits, size_t V, const wbcl_lm_sampling *sp, uint64_t *rng)
{
    if (!V || !logits) return -1;
    if (!sp || !(sp->temperature > 0.0) || !rng) return argmax(logits, V);
    /* the k-th largest logit is the threshold (ties kept) */
    float thr = -INFINITY;
    if (sp->top_k && sp->top_k < V) {
        float *c = malloc(V * sizeof *c);
        if (!c) return argmax(logits, V);
        memcpy(c, logits, V * sizeof *c);
        qsort(c, V, sizeof *c, cmp_desc);
        thr = c[sp->top_k - 1];
        free(c);
    }
    const double mx = (double)logits[argmax(logits, V)], inv = 1.0 / sp->temperature;
    double total = 0.0;
    for (size_t i = 0; i < V; i++)
        if (logits[i] >= thr) total += exp(((double)logits[i] - mx) * inv);
    const double u = (double)(splitmix64(rng) >> 11) * 0x1.0p-53 * total;
    double acc = 0.0;
    int64_t last = -1;
    for (size_t i = 0; i < V; i++)
        if (logits[i] >= thr) {
            acc += exp(((double)logits[i] - mx) * inv);
            last = (int64_t)i;
            if (acc > u) return last;
        }
    return last; /* rounding: u at the very top */
}

wbcl_status wbcl_lm_generate(wbcl_context *ctx, wbcl_lm *m, const wbcl_array *prompt, size_t n_new,
                             const wbcl_lm_sampling *sampling, wbcl_lm_token_fn on_token, void *user, int64_t *out)
{
    static const char *op = "wbcl_lm_generate";
    if (!ctx) return WBCL_ERROR_INVALID_ARGUMENT;
    if (!m || !prompt || !out) return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: NULL argument", op);
    if (sampling && (!isfinite(sampling->temperature) || sampling->temperature < 0.0))
        return wbcl__fail(ctx, WBCL_ERROR_INVALID_ARGUMENT, "%s: temperature %g (need a finite value >= 0)", op,
                          sampling->temperature);
    size_t B, T0;
    wbcl_status r = wbcl_lm_check_ids(ctx, m, prompt, &B, &T0);
    if (r) return r;
    const wbcl_lm_info *in = wbcl_lm_get_info(m);
    const size_t V = in->vocab, Tn = T0 + n_new;
    if (Tn > in->block_size || Tn < T0)
        return wbcl__fail(ctx, WBCL_ERROR_SHAPE, "%s: %zu prompt tokens + %zu new exceed the model's block_size %zu", op,
                          T0, n_new, in->block_size);
    for (size_t b = 0; b < B; b++)
        for (size_t t = 0; t < T0; t++) {
            size_t i = b * T0 + t;
            out[b * Tn + t] = prompt->elem == WBCL_ELEM_I32 ? ((const int32_t *)prompt->data)[i]
                                                             : ((const int64_t *)prompt->data)[i];
        }
    if (!n_new) return WBCL_SUCCESS;
    wbcl_lm_state *s = NULL;
    wbcl_tensor *lg = NULL;
    float *host = malloc(B * V * sizeof *host);
    int64_t *next = malloc(B * sizeof *next);
    if (!host || !next) {
        free(host);
        free(next);
        return wbcl__fail(ctx, WBCL_ERROR_OUT_OF_MEMORY, "%s: out of memory", op);
    }
    size_t sl[2] = {B, V};
    uint64_t rng = sampling ? sampling->seed : 0;
    r = wbcl_lm_state_create(ctx, m, B, &s);
    if (!r) r = wbcl_tensor_create(ctx, 2, sl, WBCL_F32, NULL, &lg);
    if (!r) r = wbcl_lm_prefill(ctx, s, prompt, lg);
    for (size_t k = 0; k < n_new && !r; k++) {
        if (k && (r = wbcl_lm_step(ctx, s, next, lg))) break;
        if ((r = wbcl_tensor_read(ctx, lg, host, B * V))) break;
        for (size_t b = 0; b < B; b++) {
            next[b] = wbcl_lm_pick(host + b * V, V, sampling, &rng);
            out[b * Tn + T0 + k] = next[b];
        }
        if (on_token) r = on_token(user, k, next, B);
    }
    wbcl_tensor_destroy(lg);
    wbcl_lm_state_destroy(s);
    free(host);
    free(next);
    return r;
}

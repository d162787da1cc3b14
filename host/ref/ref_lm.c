/* Double-precision reference of the causal language models (SPEC §6.4; include/wbcl/ref.h):
 * gpt2 and tost_lm (nanoGPT's GPT with softmax or causal TSSA attention) and crate_lm (CRATE's
 * crate_gpt.py), straight from the equations: every token's attention written as its sum over
 * the earlier tokens, no caches, no blocking. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "wbcl/ref.h"

/* o (N, ow) = causal softmax attention of one sequence: head h reads q, k, v at columns
 * h p + c of rows with widths (qw) and offsets (qo, ko, vo); scores scale q.k over keys s <= t. */
static void causal_attention(size_t N, size_t K, size_t p, const double *qkv, size_t qw, size_t qo, size_t ko,
                             size_t vo, double scale, double *o, size_t ow, double *sc)
{
    for (size_t h = 0; h < K; h++)
        for (size_t t = 0; t < N; t++) {
            const double *q = qkv + t * qw + qo + h * p;
            double mx = -HUGE_VAL;
            for (size_t s = 0; s <= t; s++) {
                const double *k = qkv + s * qw + ko + h * p;
                double a = 0.0;
                for (size_t c = 0; c < p; c++) a += q[c] * k[c];
                sc[s] = a * scale;
                if (sc[s] > mx) mx = sc[s];
            }
            double den = 0.0;
            for (size_t s = 0; s <= t; s++) {
                sc[s] = exp(sc[s] - mx);
                den += sc[s];
            }
            double *y = o + t * ow + h * p;
            for (size_t c = 0; c < p; c++) {
                double acc = 0.0;
                for (size_t s = 0; s <= t; s++) acc += sc[s] * qkv[s * qw + vo + h * p + c];
                y[c] = acc / den;
            }
        }
}

void wbcl_ref_lm_forward(const wbcl_ref_lm *m, size_t B, size_t T, const long long *ids, double *logits)
{
    const size_t d = m->d, K = m->heads, p = m->dim_head, N = T;
    const size_t inner = m->kind == 0 ? 3 * d : m->kind == 2 ? K * p : d;
    const size_t hid = m->hidden ? m->hidden : 1;
    double *x = calloc(N * d, sizeof *x), *h = calloc(N * d, sizeof *h), *a = calloc(N * d, sizeof *a);
    double *qkv = calloc(N * inner, sizeof *qkv), *o = calloc(N * (inner > d ? inner : d), sizeof *o);
    double *f = calloc(N * hid, sizeof *f), *sc = calloc(N, sizeof *sc);
    if (!x || !h || !a || !qkv || !o || !f || !sc) goto done;
    for (size_t b = 0; b < B; b++) {
        for (size_t t = 0; t < N; t++)
            for (size_t j = 0; j < d; j++)
                x[t * d + j] = m->wte[(size_t)ids[b * T + t] * d + j] + m->wpe[t * d + j];
        for (size_t l = 0; l < m->depth; l++) {
            const wbcl_ref_lm_block *k = &m->blocks[l];
            wbcl_ref_layernorm(N, d, x, k->ln1_g, k->ln1_b, 1e-5, h);
            if (m->kind == 1) {
                wbcl_ref_tssa_causal_layer(1, N, d, K, h, k->Wa, k->ba, k->temp, k->bias, m->block_size, k->Wo,
                                           k->bo, a);
            } else if (m->kind == 0) {
                wbcl_ref_linear(N, d, 3 * d, h, k->Wa, k->ba, qkv);
                causal_attention(N, K, p, qkv, 3 * d, 0, d, 2 * d, 1.0 / sqrt((double)p), o, d, sc);
                wbcl_ref_linear(N, d, d, o, k->Wo, k->bo, a);
            } else { /* MSSA: q = k = v = w = h Uᵀ */
                wbcl_ref_linear(N, d, inner, h, k->Wa, NULL, qkv);
                causal_attention(N, K, p, qkv, inner, 0, 0, 0, 1.0 / sqrt((double)p), o, inner, sc);
                wbcl_ref_linear(N, inner, d, o, k->Wo, k->bo, a);
            }
            for (size_t i = 0; i < N * d; i++) x[i] += (k->gamma1 ? k->gamma1[i % d] : 1.0) * a[i];
            wbcl_ref_layernorm(N, d, x, k->ln2_g, k->ln2_b, 1e-5, h);
            if (m->kind == 2) {
                wbcl_ref_crate_ista(N, d, h, k->ista, 0.1, 0.1, x); /* no residual */
            } else {
                wbcl_ref_linear(N, d, m->hidden, h, k->Wfc, k->bfc, f);
                wbcl_ref_gelu(N * m->hidden, f, f);
                wbcl_ref_linear(N, m->hidden, d, f, k->Wpr, k->bpr, a);
                for (size_t i = 0; i < N * d; i++) x[i] += (k->gamma2 ? k->gamma2[i % d] : 1.0) * a[i];
            }
        }
        if (m->kind != 2) {
            wbcl_ref_layernorm(N, d, x, m->lnf_g, m->lnf_b, 1e-5, h);
            memcpy(x, h, N * d * sizeof *x);
        }
        wbcl_ref_linear(N, d, m->V, x, m->head ? m->head : m->wte, NULL, logits + b * T * m->V);
    }
done:
    free(x);
    free(h);
    free(a);
    free(qkv);
    free(o);
    free(f);
    free(sc);
}

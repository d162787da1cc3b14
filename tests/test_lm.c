/* Causal language models (include/wbcl/lm.h): gpt2, tost_lm, crate_lm.
 *
 * (a) forward on random weights made here vs the double reference wbcl_ref_lm_forward (ref_lm.c,
 *     written from SPEC §6.4 / §1.5 / §2);
 * (b) forward vs the golden files of tests/golden/make_lm.py (PyTorch reference modules in float64);
 * (c) decoding equals recomputation: every decode step's logits equal the last row of a full
 *     forward over the sequence so far, and greedy generation gives the ids of the argmax of those
 *     full forwards (golden `gen` case; random weights with batch 2 and 64 new tokens, which also
 *     grows the gpt2 / crate_lm caches past their first capacity of 64 tokens);
 * (d) bad inputs, each an error whose message names the problem.
 *
 * Tolerance 2e-5 max-abs on logits (the bound) for (a), (b) and (c). Why it holds: the
 * logits here are O(1) (|logit| <= ~6); each is a float32 chain of dot products of length <= 4d =
 * 192 (k-sums with ~sqrt(k) u relative error, u = 6e-8), LayerNorms renormalizing to O(1), softmax
 * / TSSA / ISTA steps that are well conditioned on these inputs, over 2 blocks: the observed worst
 * deviations are a few 1e-6. A wrong scale (p^-1/2 vs d^-1/2), a missing bias, the wrong LayerNorm
 * eps (1e-5 vs 1e-6 shifts these unit-variance rows by ~1e-5 relative, amplified by the head),
 * non-causal attention or a misplaced position row move logits by 1e-3 .. 1. In (c) decode and
 * full forward run the same kernels on different shapes (one query vs all), so they differ only
 * by rounding; the 2e-5 bound is the same one. Greedy ids are compared exactly: the random
 * models' top-2 logit gaps are checked to exceed 1e-4 at every step so a rounding tie cannot flip
 * them (asserted, so a degenerate draw fails loudly rather than flakily).
 *
 * Cost: all three models share one head size p = 16 (K = 3, d = 48, as the golden models), so
 * the attention / TSSA programs are compiled once for the suite. */
#define _XOPEN_SOURCE 700
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"
#include "wbcl/lm.h"

#define TOL 2e-5
#define D 48
#define K 3
#define P 16
#define DEPTH 2

/* ============================================================================ random models */
#define MAXT 64
typedef struct tensor {
    char name[96];
    int ndim;
    size_t shape[4];
    float *f;
    double *d;
} tensor;

typedef struct rmodel {
    int kind;
    size_t V, block, hidden;
    int bias, untied;
    tensor t[MAXT];
    int n;
    wbcl_ref_lm_block blocks[DEPTH];
    wbcl_ref_lm ref;
} rmodel;

static const double *add(rmodel *m, tu_rng *rng, const char *name, size_t r0, size_t r1, size_t r2, double lo,
                         double hi)
{
    ck_assert(m->n < MAXT);
    tensor *t = &m->t[m->n++];
    snprintf(t->name, sizeof t->name, "%s", name);
    t->ndim = r2 ? 3 : r1 ? 2 : 1;
    t->shape[0] = r0;
    t->shape[1] = r1;
    t->shape[2] = r2;
    size_t n = r0 * (r1 ? r1 : 1) * (r2 ? r2 : 1);
    t->f = tu_random_f32(rng, n, lo, hi);
    t->d = tu_to_f64(t->f, n);
    return t->d;
}

static void rmodel_free(rmodel *m)
{
    for (int i = 0; i < m->n; i++) {
        free(m->t[i].f);
        free(m->t[i].d);
    }
}

/* kind 0 gpt2 (biases, untied head), 1 tost_lm (no biases, tied), 2 crate_lm (tied) */
static void rmodel_make(rmodel *m, int kind, size_t V, size_t block, uint64_t seed)
{
    memset(m, 0, sizeof *m);
    m->kind = kind;
    m->V = V;
    m->block = block;
    m->bias = kind != 1;
    m->untied = kind == 0;
    m->hidden = kind == 2 ? 0 : 4 * D;
    tu_rng rng;
    tu_rng_seed(&rng, seed);
    const double wd = 1.0 / sqrt((double)D), wh = 1.0 / sqrt(4.0 * D);
    wbcl_ref_lm *r = &m->ref;
    r->kind = kind;
    r->V = V;
    r->block_size = block;
    r->d = D;
    r->depth = DEPTH;
    r->heads = K;
    r->dim_head = P;
    r->hidden = m->hidden;
    r->wte = add(m, &rng, "transformer.wte.weight", V, D, 0, -1, 1);
    r->wpe = add(m, &rng, "transformer.wpe.weight", block, D, 0, -0.5, 0.5);
    char n[96];
    const char *ln1 = kind == 2 ? "prenorm_1" : "ln_1", *ln2 = kind == 2 ? "prenorm_2" : "ln_2";
    for (int l = 0; l < DEPTH; l++) {
        wbcl_ref_lm_block *b = &m->blocks[l];
#define NAME(...) (snprintf(n, sizeof n, "transformer.h.%d." __VA_ARGS__), n)
        b->ln1_g = add(m, &rng, NAME("%s.weight", l, ln1), D, 0, 0, 0.7, 1.3);
        if (m->bias) b->ln1_b = add(m, &rng, NAME("%s.bias", l, ln1), D, 0, 0, -0.2, 0.2);
        b->ln2_g = add(m, &rng, NAME("%s.weight", l, ln2), D, 0, 0, 0.7, 1.3);
        if (m->bias) b->ln2_b = add(m, &rng, NAME("%s.bias", l, ln2), D, 0, 0, -0.2, 0.2);
        const size_t wa = kind == 0 ? 3 * D : D;
        b->Wa = add(m, &rng, NAME("attn.c_attn.weight", l), wa, D, 0, -wd, wd);
        if (m->bias && kind == 0) b->ba = add(m, &rng, NAME("attn.c_attn.bias", l), wa, 0, 0, -0.1, 0.1);
        b->Wo = add(m, &rng, NAME("attn.c_proj.weight", l), D, D, 0, -wd, wd);
        if (m->bias) b->bo = add(m, &rng, NAME("attn.c_proj.bias", l), D, 0, 0, -0.1, 0.1);
        if (kind == 1) {
            b->temp = add(m, &rng, NAME("attn.temp", l), K, 1, 0, 0.5, 1.5);
            b->bias = add(m, &rng, NAME("attn.denom_bias", l), K, block, 1, -0.2, 0.2);
            /* ToST's layer scales, on the first layer only: both paths (with and without) run */
            if (l == 0) {
                b->gamma1 = add(m, &rng, NAME("gamma1", l), D, 0, 0, 0.3, 1.7);
                b->gamma2 = add(m, &rng, NAME("gamma2", l), D, 0, 0, 0.3, 1.7);
            }
        }
        if (kind == 2) {
            b->ista = add(m, &rng, NAME("ista.weight", l), D, D, 0, -wd, wd);
        } else {
            b->Wfc = add(m, &rng, NAME("mlp.c_fc.weight", l), 4 * D, D, 0, -wd, wd);
            if (m->bias) b->bfc = add(m, &rng, NAME("mlp.c_fc.bias", l), 4 * D, 0, 0, -0.1, 0.1);
            b->Wpr = add(m, &rng, NAME("mlp.c_proj.weight", l), D, 4 * D, 0, -wh, wh);
            if (m->bias) b->bpr = add(m, &rng, NAME("mlp.c_proj.bias", l), D, 0, 0, -0.1, 0.1);
        }
        if (kind != 2) { /* the causal-mask buffer the references save: accepted and ignored */
            tu_rng z;
            tu_rng_seed(&z, 1);
            add(m, &z, NAME("attn.bias", l), 1, 1, block * block, 0, 1);
        }
#undef NAME
    }
    if (kind != 2) {
        r->lnf_g = add(m, &rng, "transformer.ln_f.weight", D, 0, 0, 0.7, 1.3);
        if (m->bias) r->lnf_b = add(m, &rng, "transformer.ln_f.bias", D, 0, 0, -0.2, 0.2);
    }
    if (m->untied) r->head = add(m, &rng, "lm_head.weight", V, D, 0, -1, 1);
    r->blocks = m->blocks;
}

/* Writes the model; skip (may be NULL) names a tensor left out; reshape names one written with its
 * first extent + 1; nan names one whose element 3 becomes NaN. Tensor names get a "module." /
 * "_orig_mod." prefix on alternate entries (stripped by the reader). */
static const char *rmodel_write(const rmodel *m, const char *file, const char *skip, const char *reshape,
                                const char *nan)
{
    const char *path = tu_tmp_path(file);
    const char *names[MAXT];
    static char pname[MAXT][128];
    wbcl_array arr[MAXT];
    const wbcl_array *ap[MAXT];
    size_t n = 0;
    char err[512];
    for (int i = 0; i < m->n; i++) {
        const tensor *t = &m->t[i];
        if (skip && !strcmp(skip, t->name)) continue;
        size_t shp[4] = {t->shape[0], t->shape[1], t->shape[2], 0};
        if (t->ndim == 3 && !strcmp(t->name + strlen(t->name) - 9, "attn.bias")) { /* (1, 1, T, T) */
            shp[2] = m->block;
            shp[3] = m->block;
        }
        int nd = t->ndim == 3 && shp[3] ? 4 : t->ndim;
        size_t numel = 1;
        for (int j = 0; j < nd; j++) numel *= shp[j];
        if (reshape && !strcmp(reshape, t->name)) shp[0]++;
        size_t numel2 = 1;
        for (int j = 0; j < nd; j++) numel2 *= shp[j];
        ck_assert(wbcl_array_alloc(&arr[n], WBCL_ELEM_F32, nd, shp, err, sizeof err) == WBCL_SUCCESS);
        memcpy(arr[n].data, t->f, (numel < numel2 ? numel : numel2) * sizeof(float));
        if (nan && !strcmp(nan, t->name)) ((float *)arr[n].data)[3] = NAN;
        snprintf(pname[n], sizeof pname[n], "%s%s", i % 3 == 1 ? "module." : i % 3 == 2 ? "_orig_mod." : "",
                 t->name);
        names[n] = pname[n];
        ap[n] = &arr[n];
        n++;
    }
    wbcl_status s = wbcl_safetensors_write(path, n, names, ap, 0, NULL, NULL, err, sizeof err);
    ck_assert_msg(s == WBCL_SUCCESS, "write %s: %s", path, err);
    for (size_t i = 0; i < n; i++) wbcl_array_free(&arr[i]);
    return path;
}

static wbcl_array ids_array(size_t B, size_t T, const long long *v)
{
    wbcl_array a;
    char err[256];
    size_t shp[2] = {B, T};
    ck_assert(wbcl_array_alloc(&a, WBCL_ELEM_I64, 2, shp, err, sizeof err) == WBCL_SUCCESS);
    for (size_t i = 0; i < B * T; i++) ((int64_t *)a.data)[i] = v[i];
    return a;
}

static float *forward_host(wbcl_context *ctx, wbcl_lm *m, const wbcl_array *ids, size_t n)
{
    size_t sl[1] = {n};
    wbcl_tensor *lg = NULL;
    ck_assert(wbcl_tensor_create(ctx, 1, sl, WBCL_F32, NULL, &lg) == WBCL_SUCCESS);
    wbcl_status s = wbcl_lm_forward(ctx, m, ids, lg);
    ck_assert_msg(s == WBCL_SUCCESS, "forward: %s", wbcl_context_last_error(ctx));
    float *h = malloc(n * sizeof *h);
    ck_assert(wbcl_tensor_read(ctx, lg, h, n) == WBCL_SUCCESS);
    wbcl_tensor_destroy(lg);
    return h;
}

static double max_abs(const float *a, const float *b, size_t n)
{
    double e = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        if (!(d <= e)) e = d;
    }
    return e;
}

static int64_t argmax_gap(const float *x, size_t n, double *gap)
{
    size_t b = 0;
    for (size_t i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    double g = HUGE_VAL;
    for (size_t i = 0; i < n; i++)
        if (i != b && x[b] - x[i] < g) g = x[b] - x[i];
    *gap = g;
    return (int64_t)b;
}

/* (c): B sequences from prompt (B, T0): prefill, then n_new greedy steps; each step's logits
 * against the full forward's last row, the ids against the argmax of those full forwards, and
 * wbcl_lm_generate against the same ids. min_gap: the top-2 gap asserted at every step (0: none). */
static void check_decode(wbcl_context *ctx, wbcl_lm *m, size_t B, size_t T0, const long long *prompt, size_t n_new,
                         double min_gap, const long long *expect, const char *what)
{
    const size_t V = wbcl_lm_get_info(m)->vocab, Tn = T0 + n_new;
    long long *seq = calloc(B * Tn, sizeof *seq);
    for (size_t b = 0; b < B; b++)
        for (size_t t = 0; t < T0; t++) seq[b * Tn + t] = prompt[b * T0 + t];
    wbcl_lm_state *s = NULL;
    ck_assert(wbcl_lm_state_create(ctx, m, B, &s) == WBCL_SUCCESS);
    size_t sl[2] = {B, V};
    wbcl_tensor *lg = NULL;
    ck_assert(wbcl_tensor_create(ctx, 2, sl, WBCL_F32, NULL, &lg) == WBCL_SUCCESS);
    float *step = malloc(B * V * sizeof *step), *last = malloc(B * V * sizeof *last);
    wbcl_array pa = ids_array(B, T0, prompt);
    ck_assert_msg(wbcl_lm_prefill(ctx, s, &pa, lg) == WBCL_SUCCESS, "%s", wbcl_context_last_error(ctx));
    wbcl_array_free(&pa);
    int64_t next[8];
    double worst = 0;
    for (size_t k = 0; k <= n_new; k++) {
        const size_t T = T0 + k;
        if (k) ck_assert_msg(wbcl_lm_step(ctx, s, next, lg) == WBCL_SUCCESS, "%s", wbcl_context_last_error(ctx));
        ck_assert_uint_eq(wbcl_lm_state_position(s), T);
        ck_assert(wbcl_tensor_read(ctx, lg, step, B * V) == WBCL_SUCCESS);
        /* the full forward over the sequence so far */
        long long *cur = malloc(B * T * sizeof *cur);
        for (size_t b = 0; b < B; b++) memcpy(cur + b * T, seq + b * Tn, T * sizeof *cur);
        wbcl_array ca = ids_array(B, T, cur);
        float *full = forward_host(ctx, m, &ca, B * T * V);
        for (size_t b = 0; b < B; b++) memcpy(last + b * V, full + (b * T + T - 1) * V, V * sizeof *last);
        double e = max_abs(step, last, B * V);
        if (e > worst) worst = e;
        ck_assert_msg(e <= TOL, "%s: step %zu logits differ from the full forward's last row by %.3g", what, k, e);
        if (k < n_new)
            for (size_t b = 0; b < B; b++) {
                double gap;
                next[b] = argmax_gap(last + b * V, V, &gap);
                ck_assert_msg(gap >= min_gap, "%s: step %zu sequence %zu: top-2 gap %.3g below %.3g", what, k, b, gap,
                              min_gap);
                seq[b * Tn + T] = next[b];
            }
        free(full);
        free(cur);
        wbcl_array_free(&ca);
    }
    if (expect)
        for (size_t i = 0; i < B * Tn; i++)
            ck_assert_msg(seq[i] == expect[i], "%s: id %zu is %lld, golden %lld", what, i, seq[i], expect[i]);
    /* wbcl_lm_generate (greedy) gives the same ids */
    int64_t *gen = calloc(B * Tn, sizeof *gen);
    wbcl_array pb = ids_array(B, T0, prompt);
    ck_assert_msg(wbcl_lm_generate(ctx, m, &pb, n_new, NULL, NULL, NULL, gen) == WBCL_SUCCESS, "%s",
                  wbcl_context_last_error(ctx));
    for (size_t i = 0; i < B * Tn; i++)
        ck_assert_msg(gen[i] == seq[i], "%s: generate id %zu is %lld, recomputation %lld", what, i, (long long)gen[i],
                      seq[i]);
    /* reset: the prompt again gives the prefill logits again */
    ck_assert(wbcl_lm_state_reset(ctx, s) == WBCL_SUCCESS);
    ck_assert_uint_eq(wbcl_lm_state_position(s), 0);
    fprintf(stderr, "%s: decode vs full forward max-abs %.3g over %zu steps\n", what, worst, n_new + 1);
    wbcl_array_free(&pb);
    free(gen);
    free(step);
    free(last);
    free(seq);
    wbcl_tensor_destroy(lg);
    wbcl_lm_state_destroy(s);
}

/* ============================================================================ (a) + (c) random */
static const char *const kinds[] = {"gpt2", "tost_lm", "crate_lm"};

START_TEST(random_vs_reference_and_decode)
{
    const int kind = _i;
    wbcl_context *ctx = tu_context();
    rmodel rm;
    const size_t V = 41, block = 70, B = 2, T = 9;
    rmodel_make(&rm, kind, V, block, 1000 + kind);
    char file[64];
    snprintf(file, sizeof file, "rand_%s.safetensors", kinds[kind]);
    const char *path = rmodel_write(&rm, file, NULL, NULL, NULL);
    wbcl_lm *m = NULL;
    wbcl_status s = wbcl_lm_load_file(ctx, path, (wbcl_lm_kind)kind, K, &m);
    ck_assert_msg(s == WBCL_SUCCESS, "load: %s", wbcl_context_last_error(ctx));
    const wbcl_lm_info *in = wbcl_lm_get_info(m);
    ck_assert_uint_eq(in->vocab, V);
    ck_assert_uint_eq(in->block_size, block);
    ck_assert_uint_eq(in->dim, D);
    ck_assert_uint_eq(in->depth, DEPTH);
    ck_assert_uint_eq(in->dim_head, P);
    ck_assert_uint_eq(in->mlp_hidden, rm.hidden);
    ck_assert_int_eq(in->bias, rm.bias);
    ck_assert_int_eq(in->tied, !rm.untied);
    /* (a) forward vs the double reference */
    long long ids[2 * 9];
    tu_rng rng;
    tu_rng_seed(&rng, 7 + kind);
    for (size_t i = 0; i < B * T; i++) ids[i] = (long long)tu_uniform(&rng, 0, (double)V);
    ids[0] = 0;
    ids[1] = (long long)V - 1;
    wbcl_array a = ids_array(B, T, ids);
    float *got = forward_host(ctx, m, &a, B * T * V);
    double *want = calloc(B * T * V, sizeof *want);
    wbcl_ref_lm_forward(&rm.ref, B, T, ids, want);
    double e = 0, mag = 0;
    for (size_t i = 0; i < B * T * V; i++) {
        if (fabs(got[i] - want[i]) > e) e = fabs(got[i] - want[i]);
        if (fabs(want[i]) > mag) mag = fabs(want[i]);
    }
    fprintf(stderr, "%s random: forward vs double reference max-abs %.3g (max |logit| %.3g)\n", kinds[kind], e, mag);
    ck_assert_msg(e <= TOL, "%s: forward differs from the double reference by %.3g", kinds[kind], e);
    /* the same ids as int32 and one sequence (T) give the same rows */
    wbcl_array a32;
    char err[128];
    size_t s1[1] = {T};
    ck_assert(wbcl_array_alloc(&a32, WBCL_ELEM_I32, 1, s1, err, sizeof err) == WBCL_SUCCESS);
    for (size_t t = 0; t < T; t++) ((int32_t *)a32.data)[t] = (int32_t)ids[T + t];
    float *one = forward_host(ctx, m, &a32, T * V);
    ck_assert_msg(max_abs(one, got + T * V, T * V) <= TOL, "int32 (T) ids differ from row 1 of the batch");
    free(one);
    wbcl_array_free(&a32);
    /* (c) decoding == recomputation: batch 2, prompt 3, 64 new tokens (caches grow past 64) */
    long long prompt[6] = {ids[0], ids[1], ids[2], ids[9], ids[10], ids[11]};
    check_decode(ctx, m, 2, 3, prompt, 64, 1e-4, NULL, kinds[kind]);
    wbcl_array_free(&a);
    free(got);
    free(want);
    wbcl_lm_destroy(m);
    rmodel_free(&rm);
    wbcl_context_destroy(ctx);
}
END_TEST

/* ============================================================================ (b) golden */
static char *golden_path(const char *name)
{
    static char buf[2][1024];
    static int i;
    i ^= 1;
    snprintf(buf[i], sizeof buf[i], "%s/%s", WBCL_GOLDEN_DIR, name);
    return buf[i];
}

static size_t meta_int(const char *json, const char *key)
{
    char k[64];
    snprintf(k, sizeof k, "\"%s\"", key);
    const char *p = json ? strstr(json, k) : NULL;
    ck_assert_msg(p != NULL, "config lacks %s", key);
    p = strchr(p + strlen(k), ':');
    ck_assert(p != NULL);
    return (size_t)strtoul(p + 1, NULL, 10);
}

START_TEST(golden)
{
    const int kind = _i;
    char name[64];
    snprintf(name, sizeof name, "lm_%s.safetensors", kinds[kind]);
    const char *wpath = golden_path(name);
    ck_assert_msg(access(wpath, R_OK) == 0, "golden file %s is missing (tests/golden/make_lm.py makes it)", wpath);
    snprintf(name, sizeof name, "lm_%s_golden.safetensors", kinds[kind]);
    const char *gpath = golden_path(name);
    wbcl_context *ctx = tu_context();
    char err[512];
    wbcl_safetensors *wst = NULL, *gst = NULL;
    ck_assert_msg(wbcl_safetensors_open(wpath, &wst, err, sizeof err) == WBCL_SUCCESS, "%s", err);
    ck_assert_msg(wbcl_safetensors_open(gpath, &gst, err, sizeof err) == WBCL_SUCCESS, "%s", err);
    const char *cfg = wbcl_safetensors_metadata(wst, "config");
    const size_t heads = meta_int(cfg, "heads"), V = meta_int(cfg, "vocab");
    wbcl_lm *m = NULL;
    ck_assert_msg(wbcl_lm_load(ctx, wst, wpath, (wbcl_lm_kind)kind, heads, &m) == WBCL_SUCCESS, "%s",
                  wbcl_context_last_error(ctx));
    const wbcl_lm_info *in = wbcl_lm_get_info(m);
    ck_assert_uint_eq(in->vocab, V);
    ck_assert_uint_eq(in->block_size, meta_int(cfg, "block_size"));
    ck_assert_uint_eq(in->dim, meta_int(cfg, "dim"));
    ck_assert_uint_eq(in->depth, meta_int(cfg, "depth"));
    ck_assert_int_eq(in->tied, kind == 0 ? 1 : !wbcl_safetensors_has(wst, "lm_head.weight"));
    for (int c = 0; c < 3; c++) {
        char key[32];
        wbcl_array ids, want;
        snprintf(key, sizeof key, "c%d.ids", c);
        ck_assert_msg(wbcl_safetensors_get(gst, key, &ids, err, sizeof err) == WBCL_SUCCESS, "%s", err);
        snprintf(key, sizeof key, "c%d.logits", c);
        ck_assert_msg(wbcl_safetensors_get(gst, key, &want, err, sizeof err) == WBCL_SUCCESS, "%s", err);
        const size_t n = wbcl_array_numel(&want);
        ck_assert_uint_eq(n, wbcl_array_numel(&ids) * V);
        float *got = forward_host(ctx, m, &ids, n);
        double e = max_abs(got, (const float *)want.data, n);
        fprintf(stderr, "%s golden c%d: max-abs %.3g\n", kinds[kind], c, e);
        ck_assert_msg(e <= TOL, "%s golden case c%d: logits differ by %.3g (bound %g)", kinds[kind], c, e, TOL);
        free(got);
        wbcl_array_free(&ids);
        wbcl_array_free(&want);
    }
    /* generation: the golden greedy ids, and each decode step against the full forward */
    wbcl_array prompt, gids;
    ck_assert_msg(wbcl_safetensors_get(gst, "gen.prompt", &prompt, err, sizeof err) == WBCL_SUCCESS, "%s", err);
    ck_assert_msg(wbcl_safetensors_get(gst, "gen.ids", &gids, err, sizeof err) == WBCL_SUCCESS, "%s", err);
    const size_t B = prompt.shape[0], T0 = prompt.shape[1], Tn = gids.shape[1];
    long long *pv = malloc(B * T0 * sizeof *pv), *gv = malloc(B * Tn * sizeof *gv);
    for (size_t i = 0; i < B * T0; i++) pv[i] = ((const int64_t *)prompt.data)[i];
    for (size_t i = 0; i < B * Tn; i++) gv[i] = ((const int64_t *)gids.data)[i];
    check_decode(ctx, m, B, T0, pv, Tn - T0, 0.0, gv, kinds[kind]);
    /* an LM keeps no packed panels of its weights (wbcl/context.h): c0's 32 rows ran the packed GEMM */
    ck_assert_msg(wbcl_context_weight_cache_bytes(ctx) == 0, "%s keeps %zu bytes of panels", kinds[kind],
                  wbcl_context_weight_cache_bytes(ctx));
    free(pv);
    free(gv);
    wbcl_array_free(&prompt);
    wbcl_array_free(&gids);
    wbcl_lm_destroy(m);
    wbcl_safetensors_close(wst);
    wbcl_safetensors_close(gst);
    wbcl_context_destroy(ctx);
}
END_TEST

/* A real, if tiny, model: the character-level ToST-LM that tools/train_char_lm.py trained with PyTorch on
 * the King James Bible (tests/data/lm/, float16 weights, d 128, 4 layers, 4 heads, context 256). wbcl's
 * greedy continuation of the golden prompt equals PyTorch's, id for id, over 200 characters. Exact ids
 * are a fair test: PyTorch recorded the smallest gap between the two largest logits over the 200 steps
 * (min_margin, 0.62 for the shipped file), far above the float32 differences of two implementations
 * (about 1e-5 here: the golden cases above agree to 4e-6). */
START_TEST(trained_char_model)
{
    char wpath[1024], gpath[1024], err[512];
    snprintf(wpath, sizeof wpath, "%s/lm/kjv_tost_lm.safetensors", WBCL_TEST_DATA_DIR);
    snprintf(gpath, sizeof gpath, "%s/lm/kjv_tost_lm_golden.safetensors", WBCL_TEST_DATA_DIR);
    wbcl_context *ctx = tu_context();
    wbcl_safetensors *wst = NULL, *gst = NULL;
    ck_assert_msg(wbcl_safetensors_open(wpath, &wst, err, sizeof err) == WBCL_SUCCESS, "%s", err);
    ck_assert_msg(wbcl_safetensors_open(gpath, &gst, err, sizeof err) == WBCL_SUCCESS, "%s", err);
    const char *cfg = wbcl_safetensors_metadata(wst, "config");
    const char *margin = wbcl_safetensors_metadata(gst, "min_margin");
    ck_assert_msg(margin && strtod(margin, NULL) > 1e-3, "golden min_margin %s too small for an exact-id test",
                  margin ? margin : "(absent)");
    wbcl_lm *m = NULL;
    ck_assert_msg(wbcl_lm_load(ctx, wst, wpath, WBCL_LM_TOST, meta_int(cfg, "heads"), &m) == WBCL_SUCCESS, "%s",
                  wbcl_context_last_error(ctx));
    wbcl_array prompt, want;
    ck_assert_msg(wbcl_safetensors_get(gst, "prompt", &prompt, err, sizeof err) == WBCL_SUCCESS, "%s", err);
    ck_assert_msg(wbcl_safetensors_get(gst, "ids", &want, err, sizeof err) == WBCL_SUCCESS, "%s", err);
    ck_assert_uint_eq(prompt.ndim, 2);
    ck_assert_uint_eq(want.ndim, 2);
    const size_t B = prompt.shape[0], T0 = prompt.shape[1], Tn = want.shape[1];
    ck_assert_uint_eq(want.shape[0], B);
    ck_assert_uint_gt(Tn, T0);
    int64_t *got = malloc(B * Tn * sizeof *got);
    ck_assert_ptr_nonnull(got);
    ck_assert_msg(wbcl_lm_generate(ctx, m, &prompt, Tn - T0, NULL, NULL, NULL, got) == WBCL_SUCCESS, "%s",
                  wbcl_context_last_error(ctx));
    const int64_t *w = (const int64_t *)want.data;
    for (size_t i = 0; i < B * Tn; i++)
        ck_assert_msg(got[i] == w[i], "trained ToST-LM: id %zu of the greedy text is %lld, PyTorch's %lld", i,
                      (long long)got[i], (long long)w[i]);
    free(got);
    wbcl_array_free(&prompt);
    wbcl_array_free(&want);
    wbcl_lm_destroy(m);
    wbcl_safetensors_close(wst);
    wbcl_safetensors_close(gst);
    wbcl_context_destroy(ctx);
}
END_TEST

/* ============================================================================ (d) bad inputs */
static void expect_load_error(wbcl_context *ctx, const char *path, int kind, size_t heads, wbcl_status want,
                              const char *needle)
{
    wbcl_lm *m = NULL;
    tu_assert_status(ctx, wbcl_lm_load_file(ctx, path, (wbcl_lm_kind)kind, heads, &m), want, needle);
    ck_assert_ptr_null(m);
}

START_TEST(bad_inputs)
{
    wbcl_context *ctx = tu_context();
    rmodel g, t, c;
    rmodel_make(&g, 0, 13, 5, 1);
    rmodel_make(&t, 1, 13, 5, 2);
    rmodel_make(&c, 2, 13, 5, 3);
    /* missing keys, wrong shapes, non-finite values: each names the key */
    expect_load_error(ctx, rmodel_write(&g, "g1.safetensors", "transformer.h.1.mlp.c_fc.weight", NULL, NULL), 0, K,
                      WBCL_ERROR_FORMAT, "missing tensor 'transformer.h.1.mlp.c_fc.weight'");
    expect_load_error(ctx, rmodel_write(&g, "g2.safetensors", "transformer.wpe.weight", NULL, NULL), 0, K,
                      WBCL_ERROR_FORMAT, "'transformer.wpe.weight'");
    expect_load_error(ctx, rmodel_write(&t, "t1.safetensors", "transformer.h.0.attn.temp", NULL, NULL), 1, K,
                      WBCL_ERROR_FORMAT, "transformer.h.0.attn.temp");
    expect_load_error(ctx, rmodel_write(&c, "c1.safetensors", "transformer.h.1.ista.weight", NULL, NULL), 2, K,
                      WBCL_ERROR_FORMAT, "missing tensor 'transformer.h.1.ista.weight'");
    expect_load_error(ctx, rmodel_write(&g, "g3.safetensors", NULL, "transformer.h.1.attn.c_proj.weight", NULL), 0, K,
                      WBCL_ERROR_SHAPE, "'transformer.h.1.attn.c_proj.weight' has shape (49, 48), expected (48, 48)");
    expect_load_error(ctx, rmodel_write(&t, "t2.safetensors", NULL, "transformer.h.0.attn.denom_bias", NULL), 1, K,
                      WBCL_ERROR_SHAPE, "'transformer.h.0.attn.denom_bias' has shape (4, 5, 1)");
    expect_load_error(ctx, rmodel_write(&c, "c2.safetensors", NULL, "transformer.h.0.attn.c_proj.bias", NULL), 2, K,
                      WBCL_ERROR_SHAPE, "'transformer.h.0.attn.c_proj.bias' has shape (49)");
    expect_load_error(ctx, rmodel_write(&g, "g4.safetensors", NULL, NULL, "transformer.h.0.ln_2.bias"), 0, K,
                      WBCL_ERROR_NUMERIC, "'transformer.h.0.ln_2.bias' has a non-finite value");
    expect_load_error(ctx, rmodel_write(&t, "t3.safetensors", NULL, NULL, "transformer.h.1.attn.denom_bias"), 1, K,
                      WBCL_ERROR_NUMERIC, "'transformer.h.1.attn.denom_bias' has a non-finite value");
    expect_load_error(ctx, rmodel_write(&c, "c3.safetensors", NULL, NULL, "transformer.wte.weight"), 2, K,
                      WBCL_ERROR_NUMERIC, "'transformer.wte.weight' has a non-finite value");
    /* heads not dividing d */
    const char *gp = rmodel_write(&g, "g.safetensors", NULL, NULL, NULL);
    expect_load_error(ctx, gp, 0, 5, WBCL_ERROR_SHAPE, "heads = 5 does not divide");
    expect_load_error(ctx, rmodel_write(&c, "c.safetensors", NULL, NULL, NULL), 2, 7, WBCL_ERROR_SHAPE,
                      "heads = 7 does not divide");
    /* ids: out of range, too long, wrong type */
    wbcl_lm *m = NULL;
    ck_assert_msg(wbcl_lm_load_file(ctx, gp, WBCL_LM_GPT2, K, &m) == WBCL_SUCCESS, "%s", wbcl_context_last_error(ctx));
    size_t sl[1] = {6 * 13};
    wbcl_tensor *lg = NULL;
    ck_assert(wbcl_tensor_create(ctx, 1, sl, WBCL_F32, NULL, &lg) == WBCL_SUCCESS);
    long long bad[3] = {1, 13, 2}, neg[3] = {1, -4, 2}, six[6] = {1, 2, 3, 4, 5, 6};
    wbcl_array a = ids_array(1, 3, bad);
    tu_assert_status(ctx, wbcl_lm_forward(ctx, m, &a, lg), WBCL_ERROR_INVALID_ARGUMENT,
                     "token id 13 (sequence 0, position 1) is out of range: the vocabulary has V = 13");
    wbcl_array_free(&a);
    a = ids_array(1, 3, neg);
    tu_assert_status(ctx, wbcl_lm_forward(ctx, m, &a, lg), WBCL_ERROR_INVALID_ARGUMENT, "token id -4");
    wbcl_array_free(&a);
    a = ids_array(1, 6, six);
    tu_assert_status(ctx, wbcl_lm_forward(ctx, m, &a, lg), WBCL_ERROR_SHAPE, "T = 6 tokens exceed the model's block_size 5");
    wbcl_array_free(&a);
    a = ids_array(1, 3, six);
    tu_assert_status(ctx, wbcl_lm_forward(ctx, m, &a, lg), WBCL_ERROR_SHAPE, "'logits' has shape (78)");
    /* decode: out-of-range step id, past block_size */
    wbcl_lm_state *s = NULL;
    ck_assert(wbcl_lm_state_create(ctx, m, 1, &s) == WBCL_SUCCESS);
    size_t sv[2] = {1, 13};
    wbcl_tensor *l1 = NULL;
    ck_assert(wbcl_tensor_create(ctx, 2, sv, WBCL_F32, NULL, &l1) == WBCL_SUCCESS);
    ck_assert(wbcl_lm_prefill(ctx, s, &a, l1) == WBCL_SUCCESS);
    int64_t tok = 99;
    tu_assert_status(ctx, wbcl_lm_step(ctx, s, &tok, l1), WBCL_ERROR_INVALID_ARGUMENT, "token id 99 (sequence 0)");
    tok = 4;
    ck_assert(wbcl_lm_step(ctx, s, &tok, l1) == WBCL_SUCCESS);
    ck_assert(wbcl_lm_step(ctx, s, &tok, l1) == WBCL_SUCCESS);
    tu_assert_status(ctx, wbcl_lm_step(ctx, s, &tok, l1), WBCL_ERROR_SHAPE, "exceed the model's block_size 5");
    ck_assert_uint_eq(wbcl_lm_state_position(s), 5);
    int64_t out[8];
    tu_assert_status(ctx, wbcl_lm_generate(ctx, m, &a, 3, NULL, NULL, NULL, out), WBCL_ERROR_SHAPE,
                     "3 prompt tokens + 3 new exceed the model's block_size 5");
    wbcl_array_free(&a);
    wbcl_tensor_destroy(l1);
    wbcl_tensor_destroy(lg);
    wbcl_lm_state_destroy(s);
    wbcl_lm_destroy(m);
    rmodel_free(&g);
    rmodel_free(&t);
    rmodel_free(&c);
    wbcl_context_destroy(ctx);
}
END_TEST

/* sampling: greedy is argmax; top_k = 1 is greedy whatever the temperature; a seed repeats */
START_TEST(sampling)
{
    float lg[6] = {0.1f, 2.0f, -1.0f, 2.0f, 1.9f, 0.0f};
    wbcl_lm_sampling g = {0.0, 0, 1}, k1 = {5.0, 1, 3}, t = {1.0, 0, 42}, k2 = {10.0, 2, 9};
    uint64_t r = 1;
    ck_assert_int_eq(wbcl_lm_pick(lg, 6, &g, &r), 1); /* lowest id on ties */
    ck_assert_int_eq(wbcl_lm_pick(lg, 6, NULL, &r), 1);
    int seen[6] = {0};
    r = k1.seed;
    for (int i = 0; i < 50; i++) seen[wbcl_lm_pick(lg, 6, &k1, &r)]++;
    ck_assert_int_eq(seen[1] + seen[3], 50); /* ties at the k-th value are kept */
    memset(seen, 0, sizeof seen);
    r = k2.seed;
    for (int i = 0; i < 200; i++) seen[wbcl_lm_pick(lg, 6, &k2, &r)]++;
    ck_assert_int_eq(seen[0] + seen[2] + seen[4] + seen[5], 0);
    ck_assert(seen[1] > 50 && seen[3] > 50);
    uint64_t r1 = t.seed, r2 = t.seed;
    int64_t a[20], b[20];
    memset(seen, 0, sizeof seen);
    for (int i = 0; i < 20; i++) {
        a[i] = wbcl_lm_pick(lg, 6, &t, &r1);
        seen[a[i]]++;
    }
    for (int i = 0; i < 20; i++) b[i] = wbcl_lm_pick(lg, 6, &t, &r2);
    ck_assert_mem_eq(a, b, sizeof a);
    ck_assert(seen[4] > 0); /* temperature 1 samples more than the maxima */
}
END_TEST

/* ============================================================================ wbcl-run modules */
static int run_tool(const char *args, const char *errfile)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "%s/wbcl-run %s >%s 2>&1", WBCL_TOOLS_DIR, args, errfile);
    int rc = system(cmd);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

static char *slurp(const char *path)
{
    static char buf[8192];
    buf[0] = 0;
    FILE *f = fopen(path, "rb");
    if (f) {
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        buf[n] = 0;
        fclose(f);
    }
    return buf;
}

START_TEST(run_modules)
{
    wbcl_context *ctx = tu_context();
    rmodel rm;
    rmodel_make(&rm, 1, 23, 12, 77); /* tost_lm: the cheapest to add (its programs are built above) */
    const char *wp = rmodel_write(&rm, "cli.safetensors", NULL, NULL, NULL);
    char w[512], ids[512], lg[512], gen[512], log[512], args[3072];
    snprintf(w, sizeof w, "%s", wp);
    snprintf(ids, sizeof ids, "%s", tu_tmp_path("ids.npy"));
    snprintf(lg, sizeof lg, "%s", tu_tmp_path("logits.npy"));
    snprintf(gen, sizeof gen, "%s", tu_tmp_path("gen.npy"));
    snprintf(log, sizeof log, "%s", tu_tmp_path("log.txt"));
    const long long v[8] = {3, 0, 22, 7, 9, 1, 5, 11};
    wbcl_array a32;
    char err[256];
    size_t s2[2] = {2, 4};
    ck_assert(wbcl_array_alloc(&a32, WBCL_ELEM_I32, 2, s2, err, sizeof err) == WBCL_SUCCESS);
    for (int i = 0; i < 8; i++) ((int32_t *)a32.data)[i] = (int32_t)v[i];
    ck_assert(wbcl_npy_write(ids, &a32, err, sizeof err) == WBCL_SUCCESS);
    /* logits with --verify, equal to the library's forward */
    snprintf(args, sizeof args, "tost_lm --weights %s --input %s --output %s --param heads=3 --verify", w, ids, lg);
    ck_assert_msg(run_tool(args, log) == 0, "tost_lm failed: %s", slurp(log));
    ck_assert_msg(strstr(slurp(log), "): ok"), "no verify line: %s", slurp(log));
    wbcl_array got;
    ck_assert_msg(wbcl_npy_read(lg, &got, err, sizeof err) == WBCL_SUCCESS, "%s", err);
    ck_assert_int_eq(got.ndim, 3);
    ck_assert_uint_eq(got.shape[2], 23);
    wbcl_lm *m = NULL;
    ck_assert(wbcl_lm_load_file(ctx, w, WBCL_LM_TOST, 3, &m) == WBCL_SUCCESS);
    float *want = forward_host(ctx, m, &a32, 8 * 23);
    ck_assert(max_abs(want, (const float *)got.data, 8 * 23) == 0.0);
    wbcl_array_free(&got);
    free(want);
    /* greedy generation: prompt then 6 ids, the library's generate */
    snprintf(args, sizeof args, "tost_lm.generate --weights %s --input %s --output %s --param heads=3 --param tokens=6 --param stream=1",
             w, ids, gen);
    ck_assert_msg(run_tool(args, log) == 0, "tost_lm.generate failed: %s", slurp(log));
    ck_assert(wbcl_npy_read(gen, &got, err, sizeof err) == WBCL_SUCCESS);
    ck_assert(got.elem == WBCL_ELEM_I64 && got.ndim == 2 && got.shape[0] == 2 && got.shape[1] == 10);
    int64_t ref[20];
    ck_assert(wbcl_lm_generate(ctx, m, &a32, 6, NULL, NULL, NULL, ref) == WBCL_SUCCESS);
    ck_assert_mem_eq(ref, got.data, sizeof ref);
    char line[64];
    snprintf(line, sizeof line, "%lld %lld\n", (long long)ref[4], (long long)ref[14]); /* the first streamed step */
    ck_assert_msg(strstr(slurp(log), line), "stream=1 did not print '%s': %s", line, slurp(log));
    wbcl_array_free(&got);
    /* errors: an id out of range, too many tokens, missing heads */
    ((int32_t *)a32.data)[5] = 23;
    ck_assert(wbcl_npy_write(ids, &a32, err, sizeof err) == WBCL_SUCCESS);
    snprintf(args, sizeof args, "tost_lm --weights %s --input %s --param heads=3", w, ids);
    ck_assert(run_tool(args, log) != 0);
    ck_assert_msg(strstr(slurp(log), "token id 23 (sequence 1, position 1)"), "%s", slurp(log));
    snprintf(args, sizeof args, "tost_lm.generate --weights %s --input %s --param heads=3 tokens=9", w, ids);
    ((int32_t *)a32.data)[5] = 2;
    ck_assert(wbcl_npy_write(ids, &a32, err, sizeof err) == WBCL_SUCCESS);
    ck_assert(run_tool(args, log) != 0);
    ck_assert_msg(strstr(slurp(log), "exceed the model's block_size 12"), "%s", slurp(log));
    snprintf(args, sizeof args, "tost_lm --weights %s --input %s", w, ids);
    ck_assert(run_tool(args, log) != 0);
    ck_assert_msg(strstr(slurp(log), "--param heads=K"), "%s", slurp(log));
    wbcl_array_free(&a32);
    wbcl_lm_destroy(m);
    rmodel_free(&rm);
    wbcl_context_destroy(ctx);
}
END_TEST

static Suite *lm_suite(void)
{
    Suite *s = suite_create("lm");
    TCase *tc = tcase_create("lm");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, sampling);
    tcase_add_test(tc, bad_inputs);
    tcase_add_loop_test(tc, random_vs_reference_and_decode, 0, 3);
    tcase_add_loop_test(tc, golden, 0, 3);
    tcase_add_test(tc, run_modules);
    tcase_add_test(tc, trained_char_model);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tu_run(lm_suite()); }

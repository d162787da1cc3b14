/* wbcl-run — causal language models (include/wbcl/lm.h, issue 18): gpt2, tost_lm, crate_lm
 * (logits of token ids) and gpt2.generate, tost_lm.generate, crate_lm.generate (prefill, then one
 * decode step per new token). Weights: the reference state_dict keys (nanoGPT / crate_gpt.py);
 * every size comes from the weights, only --param heads=K is needed.
 *
 * Token ids: int32 or int64 .npy, (B, T) or (T), read as integers (wbcl_npy_read, as mod_redunet
 * reads its labels), never through float.
 *
 * --verify (forward modules): against the double reference wbcl_ref_lm_forward (ref_lm.c),
 * relative to max |logit|, tolerance 32 · depth · sqrt(max(4d, d)) · 2^-24: each block adds
 * the rounding of dot products of length <= 4d (random-walk sqrt(k) u, with a margin of 32 for
 * the attention / TSSA / ISTA steps and the LayerNorms), and the logits inherit it through the
 * head; on the test models the observed error is ~1/10 of this (tests/test_lm.c). */
#define _POSIX_C_SOURCE 200809L
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "registry.h"
#include "wbcl/lm.h"

/* ---- shared ------------------------------------------------------------------------------- */
static int read_ids(wbcl_run *r, const char *path, wbcl_array *a)
{
    char err[512];
    if (wbcl_npy_read(path, a, err, sizeof err)) return wbcl_run_fail(r, "%s", err);
    if (a->elem != WBCL_ELEM_I32 && a->elem != WBCL_ELEM_I64) {
        int rc = wbcl_run_fail(r, "%s: token ids must be int32 or int64, got %s", path, wbcl_elem_name(a->elem));
        wbcl_array_free(a);
        return rc;
    }
    if (a->ndim != 1 && a->ndim != 2) {
        char s[96];
        int rc = wbcl_run_fail(r, "%s: token ids must be (B, T) or (T), got %s", path,
                               wbcl_run_shape_str(s, sizeof s, a->ndim, a->shape));
        wbcl_array_free(a);
        return rc;
    }
    return 0;
}

static int load_model(wbcl_run *r, wbcl_lm_kind kind, wbcl_lm **m)
{
    long heads;
    if (wbcl_run_param_int(r, "heads", 0, 0, 65536, &heads)) return 1;
    if (!heads) return wbcl_run_fail(r, "%s needs --param heads=K (the number of attention heads)", r->mod->name);
    return wbcl_run_check(r, wbcl_lm_load_file(r->ctx, r->weights_path, kind, (size_t)heads, m));
}

/* ---- the double reference's weights ------------------------------------------------------- */
#define REF_MAX 512
typedef struct ref_weights {
    wbcl_ref_lm ref;
    wbcl_ref_lm_block *blocks;
    double *bufs[REF_MAX];
    int n;
} ref_weights;

static void ref_free(ref_weights *w)
{
    for (int i = 0; i < w->n; i++) free(w->bufs[i]);
    free(w->blocks);
}

/* key as doubles (NULL if absent and optional) */
static int ref_get(wbcl_run *r, ref_weights *w, const char *key, int required, const double **out)
{
    *out = NULL;
    wbcl_run_array h = {0};
    if (wbcl_run_weight(r, key, required, 0, NULL, &h, NULL)) return 1;
    if (!h.data) return 0;
    if (w->n == REF_MAX) {
        wbcl_run_array_free(&h);
        return wbcl_run_fail(r, "too many tensors for the reference");
    }
    double *d = wbcl_run_to_f64(r, h.data, h.numel);
    wbcl_run_array_free(&h);
    if (!d) return 1;
    w->bufs[w->n++] = d;
    *out = d;
    return 0;
}

static int ref_load(wbcl_run *r, const wbcl_lm_info *in, ref_weights *w)
{
    memset(w, 0, sizeof *w);
    wbcl_ref_lm *m = &w->ref;
    m->kind = (int)in->kind;
    m->V = in->vocab;
    m->block_size = in->block_size;
    m->d = in->dim;
    m->depth = in->depth;
    m->heads = in->heads;
    m->dim_head = in->dim_head;
    m->hidden = in->mlp_hidden;
    w->blocks = calloc(in->depth, sizeof *w->blocks);
    if (!w->blocks) return wbcl_run_fail(r, "out of memory");
    m->blocks = w->blocks;
    const int crate = in->kind == WBCL_LM_CRATE;
    if (ref_get(r, w, "transformer.wte.weight", 1, &m->wte) || ref_get(r, w, "transformer.wpe.weight", 1, &m->wpe) ||
        ref_get(r, w, "lm_head.weight", 0, &m->head))
        return 1;
    if (!crate && (ref_get(r, w, "transformer.ln_f.weight", 1, &m->lnf_g) ||
                   ref_get(r, w, "transformer.ln_f.bias", 0, &m->lnf_b)))
        return 1;
    char k[160];
#define GET(field, req, ...) (snprintf(k, sizeof k, __VA_ARGS__), ref_get(r, w, k, req, &b->field))
    for (size_t l = 0; l < in->depth; l++) {
        wbcl_ref_lm_block *b = &w->blocks[l];
        const char *n1 = crate ? "prenorm_1" : "ln_1", *n2 = crate ? "prenorm_2" : "ln_2";
        if (GET(ln1_g, 1, "transformer.h.%zu.%s.weight", l, n1) || GET(ln1_b, 0, "transformer.h.%zu.%s.bias", l, n1) ||
            GET(ln2_g, 1, "transformer.h.%zu.%s.weight", l, n2) || GET(ln2_b, 0, "transformer.h.%zu.%s.bias", l, n2) ||
            GET(Wa, 1, "transformer.h.%zu.attn.c_attn.weight", l) ||
            (!crate && GET(ba, 0, "transformer.h.%zu.attn.c_attn.bias", l)) ||
            GET(Wo, 1, "transformer.h.%zu.attn.c_proj.weight", l) || GET(bo, 0, "transformer.h.%zu.attn.c_proj.bias", l))
            return 1;
        if (in->kind == WBCL_LM_TOST &&
            (GET(temp, 1, "transformer.h.%zu.attn.temp", l) || GET(bias, 1, "transformer.h.%zu.attn.denom_bias", l) ||
             GET(gamma1, 0, "transformer.h.%zu.gamma1", l) || GET(gamma2, 0, "transformer.h.%zu.gamma2", l)))
            return 1;
        if (crate) {
            if (GET(ista, 1, "transformer.h.%zu.ista.weight", l)) return 1;
        } else if (GET(Wfc, 1, "transformer.h.%zu.mlp.c_fc.weight", l) || GET(bfc, 0, "transformer.h.%zu.mlp.c_fc.bias", l) ||
                   GET(Wpr, 1, "transformer.h.%zu.mlp.c_proj.weight", l) ||
                   GET(bpr, 0, "transformer.h.%zu.mlp.c_proj.bias", l)) {
            return 1;
        }
    }
#undef GET
    return 0;
}

/* ---- gpt2 / tost_lm / crate_lm ------------------------------------------------------------- */
static int run_forward(wbcl_run *r, wbcl_lm_kind kind)
{
    wbcl_array ids = {0};
    wbcl_lm *m = NULL;
    wbcl_tensor *lg = NULL;
    wbcl_run_array out = {0};
    double *want = NULL;
    long long *iv = NULL;
    ref_weights rw;
    memset(&rw, 0, sizeof rw);
    int rc = 1;
    if (load_model(r, kind, &m) || read_ids(r, r->inputs[0], &ids)) goto done;
    size_t B, T;
    if (wbcl_run_check(r, wbcl_lm_check_ids(r->ctx, m, &ids, &B, &T))) goto done;
    const wbcl_lm_info *in = wbcl_lm_get_info(m);
    size_t so[3] = {B, T, in->vocab};
    const int nd = ids.ndim == 2 ? 3 : 2;
    const size_t *sp = ids.ndim == 2 ? so : so + 1;
    if (wbcl_run_check(r, wbcl_tensor_create(r->ctx, nd, sp, WBCL_F32, NULL, &lg)) ||
        wbcl_run_check(r, wbcl_lm_forward(r->ctx, m, &ids, lg)) || wbcl_run_download(r, lg, &out))
        goto done;
    if (r->verify) {
        const size_t n = B * T;
        iv = malloc(n * sizeof *iv);
        want = malloc(n * in->vocab * sizeof *want);
        if (!iv || !want) {
            wbcl_run_fail(r, "out of memory");
            goto done;
        }
        for (size_t i = 0; i < n; i++)
            iv[i] = ids.elem == WBCL_ELEM_I32 ? ((const int32_t *)ids.data)[i] : (long long)((const int64_t *)ids.data)[i];
        if (ref_load(r, in, &rw)) goto done;
        wbcl_ref_lm_forward(&rw.ref, B, T, iv, want);
        const double k = in->mlp_hidden > in->dim ? (double)in->mlp_hidden : (double)in->dim;
        const double tol = 32.0 * (double)in->depth * sqrt(k) * WBCL_RUN_U32;
        if (wbcl_run_verify(r, out.data, want, out.numel, 0.0, tol)) goto done;
    }
    rc = wbcl_run_write_output(r, &out);
done:
    ref_free(&rw);
    free(iv);
    free(want);
    wbcl_run_array_free(&out);
    wbcl_tensor_destroy(lg);
    wbcl_array_free(&ids);
    wbcl_lm_destroy(m);
    return rc;
}

static int run_gpt2(wbcl_run *r) { return run_forward(r, WBCL_LM_GPT2); }
static int run_tost_lm(wbcl_run *r) { return run_forward(r, WBCL_LM_TOST); }
static int run_crate_lm(wbcl_run *r) { return run_forward(r, WBCL_LM_CRATE); }

static const char *const fwd_params[] = {"heads", NULL};

#define FWD_USAGE(weights_note)                                                                       \
    "  --input ids.npy          token ids, int32 or int64, (B, T) or (T); T <= block_size, ids < V\n" \
    "  --weights W.safetensors  " weights_note "\n"                                                  \
    "  --param heads=K          the number of attention heads (every other size comes from W)\n"     \
    "  --output logits.npy      float32 (B, T, V) or (T, V)\n"                                        \
    "  --verify                 against the double reference (relative to max |logit|)"

const wbcl_run_module wbcl_mod_gpt2 = {
    "gpt2",
    "GPT-2 (nanoGPT) causal language model on token ids: logits",
    FWD_USAGE("nanoGPT state_dict keys (transformer.wte / wpe / h.{i}.ln_1 attn.c_attn ... / ln_f, lm_head)"),
    fwd_params, NULL, 1, 1, WBCL_RUN_REQUIRED, WBCL_RUN_OPTIONAL, 1, run_gpt2};

const wbcl_run_module wbcl_mod_tost_lm = {
    "tost_lm",
    "ToST-LM (nanoGPT with causal TSSA attention) on token ids: logits",
    FWD_USAGE("nanoGPT keys with attn.c_attn (d, d), attn.temp, attn.denom_bias, attn.c_proj"),
    fwd_params, NULL, 1, 1, WBCL_RUN_REQUIRED, WBCL_RUN_OPTIONAL, 1, run_tost_lm};

const wbcl_run_module wbcl_mod_crate_lm = {
    "crate_lm",
    "Causal-CRATE language model (crate_gpt.py: causal MSSA + ISTA) on token ids: logits",
    FWD_USAGE("crate_gpt.py keys (transformer.h.{i}.prenorm_1, attn.c_attn, attn.c_proj, prenorm_2, ista)"),
    fwd_params, NULL, 1, 1, WBCL_RUN_REQUIRED, WBCL_RUN_OPTIONAL, 1, run_crate_lm};

/* ---- *.generate ----------------------------------------------------------------------------- */
typedef struct gen_progress {
    wbcl_run *r;
    int stream, tty;
    size_t total;
    struct timespec t0;
} gen_progress;

static double seconds_since(const struct timespec *t0)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)(t.tv_sec - t0->tv_sec) + 1e-9 * (double)(t.tv_nsec - t0->tv_nsec);
}

static wbcl_status on_token(void *user, size_t step, const int64_t *ids, size_t batch)
{
    gen_progress *g = user;
    if (g->stream) {
        for (size_t b = 0; b < batch; b++) printf(b ? " %lld" : "%lld", (long long)ids[b]);
        printf("\n");
        fflush(stdout);
    }
    if (g->tty && (step + 1 == g->total || (step + 1) % 16 == 0)) {
        double s = seconds_since(&g->t0);
        wbcl_run_info(g->r, "%zu / %zu tokens, %.1f tokens/s per sequence\n", step + 1, g->total,
                      s > 0 ? (double)(step + 1) / s : 0.0);
        fflush(stdout);
    }
    return WBCL_SUCCESS;
}

static int run_generate(wbcl_run *r, wbcl_lm_kind kind)
{
    long tokens, top_k, seed;
    float temperature;
    int stream;
    if (wbcl_run_param_int(r, "tokens", 0, 0, 1L << 30, &tokens) ||
        wbcl_run_param_float(r, "temperature", 0.0, 0.0, HUGE_VAL, &temperature) ||
        wbcl_run_param_int(r, "top_k", 0, 0, 1L << 30, &top_k) || wbcl_run_param_int(r, "seed", 1, 0, LONG_MAX, &seed) ||
        wbcl_run_param_bool(r, "stream", 0, &stream))
        return 1;
    wbcl_array prompt = {0}, out = {0};
    wbcl_lm *m = NULL;
    int rc = 1;
    if (load_model(r, kind, &m) || read_ids(r, r->inputs[0], &prompt)) goto done;
    size_t B, T0;
    if (wbcl_run_check(r, wbcl_lm_check_ids(r->ctx, m, &prompt, &B, &T0))) goto done;
    size_t so[2] = {B, T0 + (size_t)tokens};
    char err[512];
    if (wbcl_array_alloc(&out, WBCL_ELEM_I64, prompt.ndim, prompt.ndim == 2 ? so : so + 1, err, sizeof err)) {
        wbcl_run_fail(r, "%s", err);
        goto done;
    }
    wbcl_lm_sampling sp = {(double)temperature, (size_t)top_k, (uint64_t)seed};
    gen_progress g = {r, stream, isatty(fileno(stderr)) && !r->quiet, (size_t)tokens, {0, 0}};
    clock_gettime(CLOCK_MONOTONIC, &g.t0);
    if (wbcl_run_check(r, wbcl_lm_generate(r->ctx, m, &prompt, (size_t)tokens, &sp, on_token, &g, out.data)))
        goto done;
    if (!r->output_path) {
        wbcl_run_info(r, "%s: %zu x %zu ids not saved (no --output)\n", r->mod->name, B, so[1]);
        rc = 0;
        goto done;
    }
    if (wbcl_npy_write(r->output_path, &out, err, sizeof err)) {
        wbcl_run_fail(r, "%s: %s", r->output_path, err);
        goto done;
    }
    wbcl_run_info(r, "wrote %s (%zu x %zu ids)\n", r->output_path, B, so[1]);
    rc = 0;
done:
    wbcl_array_free(&prompt);
    wbcl_array_free(&out);
    wbcl_lm_destroy(m);
    return rc;
}

static int run_gpt2_generate(wbcl_run *r) { return run_generate(r, WBCL_LM_GPT2); }
static int run_tost_lm_generate(wbcl_run *r) { return run_generate(r, WBCL_LM_TOST); }
static int run_crate_lm_generate(wbcl_run *r) { return run_generate(r, WBCL_LM_CRATE); }

static const char *const gen_params[] = {"heads", "tokens", "temperature", "top_k", "seed", "stream", NULL};

#define GEN_USAGE                                                                                          \
    "  --input prompt.npy       int32 or int64 ids, (B, T0) or (T0)\n"                                     \
    "  --weights W.safetensors  as the forward module\n"                                                   \
    "  --param heads=K tokens=N  N new tokens per sequence (T0 + N <= block_size)\n"                      \
    "  --param temperature=0    0: greedy (argmax); > 0: softmax(logits / temperature) sampling\n"         \
    "  --param top_k=0          sample among the k largest logits (0: all)\n"                             \
    "  --param seed=1           seed of wbcl's SplitMix64 generator (include/wbcl/lm.h)\n"                \
    "  --param stream=1         print each step's new ids (one line, one id per sequence) as they come\n"  \
    "  --output ids.npy         int64, the prompt followed by the new ids: (B, T0 + N) or (T0 + N)\n"     \
    "  On a terminal, tokens per second are printed as the generation goes."

const wbcl_run_module wbcl_mod_gpt2_generate = {
    "gpt2.generate", "GPT-2: generate tokens after a prompt (prefill, then decode steps on a KV cache)", GEN_USAGE,
    gen_params, NULL, 1, 1, WBCL_RUN_REQUIRED, WBCL_RUN_OPTIONAL, 0, run_gpt2_generate};

const wbcl_run_module wbcl_mod_tost_lm_generate = {
    "tost_lm.generate",
    "ToST-LM: generate tokens after a prompt (causal TSSA recurrent state: constant memory per token)", GEN_USAGE,
    gen_params, NULL, 1, 1, WBCL_RUN_REQUIRED, WBCL_RUN_OPTIONAL, 0, run_tost_lm_generate};

const wbcl_run_module wbcl_mod_crate_lm_generate = {
    "crate_lm.generate", "Causal-CRATE: generate tokens after a prompt (MSSA token cache)", GEN_USAGE, gen_params,
    NULL, 1, 1, WBCL_RUN_REQUIRED, WBCL_RUN_OPTIONAL, 0, run_crate_lm_generate};

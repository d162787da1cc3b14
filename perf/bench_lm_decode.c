/* Decode cost against context length (ToST paper Fig. 8; issue 18): time per generated token and
 * memory against the number of tokens already in the sequence, for gpt2 (softmax attention over a
 * key/value cache: time and memory grow with the context) and tost_lm (causal TSSA recurrent state:
 * constant time and memory per token), at a GPT-2 shape with random weights.
 *
 *   bench_lm_decode [--device SEL] [--models gpt2,tost_lm] [--dim 768] [--heads 12] [--layers 12]
 *                   [--vocab 50257] [--lengths 128,512,1024,2048,4096,8192] [--steps 8] [--batch 1]
 *                   [--rounds 3] [--chunk 512] [--csv FILE] [--profile 1]
 *
 * Per model: random weights (written to a temporary safetensors file, loaded with wbcl_lm_load, file
 * removed), one decode state; for each length L (increasing) the sequence is prefilled up to L
 * tokens (in chunks of --chunk, continuing the same state), then --rounds rounds of --steps decode
 * steps are timed one by one, each step including the read-back of its (B, V) logits and the host
 * argmax as generation does; the lowest of the rounds' median step times is reported (the quietest
 * round, as perf/peers/lm_decode_torch.py does: the machine is shared). Memory: the state's device
 * bytes (wbcl_lm_state_bytes: caches or recurrent sums) and the process's resident set (on a CPU
 * device the device buffers are host memory). block_size is max(lengths) + rounds * steps + 1 (wpe
 * rows; gpt2's cache capacity grows by doubling up to it; with --profile, --steps more).
 * CSV columns: model,dim,heads,layers,vocab,batch,tokens,ms_per_token,tokens_per_s,state_bytes,
 * rss_bytes. --profile 1: after each point, --steps more steps with kernel timing on, and the device
 * time per step of each kernel on stderr (perf/kernel_profile.h). */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench_util.h"
#include "wbcl/wbcl.h"
#include "wbcl/lm.h"
#include "kernel_profile.h"

#define MAXL 32

static size_t rss_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f) return 0;
    unsigned long size = 0, res = 0;
    if (fscanf(f, "%lu %lu", &size, &res) != 2) res = 0;
    fclose(f);
    return (size_t)res * (size_t)sysconf(_SC_PAGESIZE);
}

static uint64_t rng_state = 12345;
static float urand(float lo, float hi)
{
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return lo + (hi - lo) * (float)((double)(z >> 11) * 0x1.0p-53);
}

typedef struct wfile {
    size_t n;
    char *names[1024];
    wbcl_array arr[1024];
} wfile;

static int addw(wfile *w, const char *name, int nd, size_t a, size_t b, size_t c, float lo, float hi)
{
    if (w->n == 1024) return 1;
    size_t shp[3] = {a, b, c};
    char err[256];
    if (wbcl_array_alloc(&w->arr[w->n], WBCL_ELEM_F32, nd, shp, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    float *f = w->arr[w->n].data;
    size_t n = wbcl_array_numel(&w->arr[w->n]);
    for (size_t i = 0; i < n; i++) f[i] = urand(lo, hi);
    w->names[w->n++] = strdup(name);
    return 0;
}

static int write_model(const char *path, wbcl_lm_kind kind, size_t d, size_t K, size_t L, size_t V, size_t T)
{
    wfile *w = calloc(1, sizeof *w);
    if (!w) return 1;
    const float sd = 1.0f / sqrtf((float)d), sh = 1.0f / sqrtf(4.0f * (float)d);
    int e = addw(w, "transformer.wte.weight", 2, V, d, 0, -1, 1) || addw(w, "transformer.wpe.weight", 2, T, d, 0, -.5f, .5f);
    char n[128];
    for (size_t l = 0; l < L && !e; l++) {
#define N(s) (snprintf(n, sizeof n, "transformer.h.%zu.%s", l, s), n)
        e = addw(w, N("ln_1.weight"), 1, d, 0, 0, .8f, 1.2f) || addw(w, N("ln_1.bias"), 1, d, 0, 0, -.1f, .1f) ||
            addw(w, N("ln_2.weight"), 1, d, 0, 0, .8f, 1.2f) || addw(w, N("ln_2.bias"), 1, d, 0, 0, -.1f, .1f) ||
            addw(w, N("attn.c_attn.weight"), 2, kind == WBCL_LM_GPT2 ? 3 * d : d, d, 0, -sd, sd) ||
            addw(w, N("attn.c_proj.weight"), 2, d, d, 0, -sd, sd) || addw(w, N("attn.c_proj.bias"), 1, d, 0, 0, -.1f, .1f) ||
            addw(w, N("mlp.c_fc.weight"), 2, 4 * d, d, 0, -sd, sd) || addw(w, N("mlp.c_fc.bias"), 1, 4 * d, 0, 0, -.1f, .1f) ||
            addw(w, N("mlp.c_proj.weight"), 2, d, 4 * d, 0, -sh, sh) || addw(w, N("mlp.c_proj.bias"), 1, d, 0, 0, -.1f, .1f);
        if (!e && kind == WBCL_LM_GPT2) e = addw(w, N("attn.c_attn.bias"), 1, 3 * d, 0, 0, -.1f, .1f);
        if (!e && kind == WBCL_LM_TOST)
            e = addw(w, N("attn.temp"), 2, K, 1, 0, .5f, 1.5f) || addw(w, N("attn.denom_bias"), 3, K, T, 1, -.1f, .1f);
#undef N
    }
    if (!e) e = addw(w, "transformer.ln_f.weight", 1, d, 0, 0, .8f, 1.2f) || addw(w, "transformer.ln_f.bias", 1, d, 0, 0, -.1f, .1f);
    if (!e) {
        const wbcl_array *ap[1024];
        for (size_t i = 0; i < w->n; i++) ap[i] = &w->arr[i];
        char err[512];
        if (wbcl_safetensors_write(path, w->n, (const char *const *)w->names, ap, 0, NULL, NULL, err, sizeof err)) {
            fprintf(stderr, "%s\n", err);
            e = 1;
        }
    }
    for (size_t i = 0; i < w->n; i++) {
        wbcl_array_free(&w->arr[i]);
        free(w->names[i]);
    }
    free(w);
    return e;
}

static int parse_list(const char *s, size_t *v, int max)
{
    int n = 0;
    while (s && *s && n < max) {
        char *end;
        v[n++] = strtoul(s, &end, 10);
        s = *end == ',' ? end + 1 : NULL;
    }
    return n;
}

int main(int argc, char **argv)
{
    const char *device = NULL, *models = "gpt2,tost_lm", *csv = NULL;
    size_t d = 768, K = 12, L = 12, V = 50257, steps = 8, B = 1, chunk = 512;
    size_t lens[MAXL] = {128, 512, 1024, 2048, 4096, 8192};
    int nl = 6, profile = 0;
    size_t rounds = 3;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) {
            fprintf(stderr, "option %s needs a value (see the header of perf/bench_lm_decode.c)\n", a);
            return 2;
        }
        i++;
        if (!strcmp(a, "--device")) device = v;
        else if (!strcmp(a, "--models")) models = v;
        else if (!strcmp(a, "--csv")) csv = v;
        else if (!strcmp(a, "--dim")) d = strtoul(v, NULL, 10);
        else if (!strcmp(a, "--heads")) K = strtoul(v, NULL, 10);
        else if (!strcmp(a, "--layers")) L = strtoul(v, NULL, 10);
        else if (!strcmp(a, "--vocab")) V = strtoul(v, NULL, 10);
        else if (!strcmp(a, "--steps")) steps = strtoul(v, NULL, 10);
        else if (!strcmp(a, "--batch")) B = strtoul(v, NULL, 10);
        else if (!strcmp(a, "--chunk")) chunk = strtoul(v, NULL, 10);
        else if (!strcmp(a, "--profile")) profile = atoi(v);
        else if (!strcmp(a, "--rounds")) rounds = strtoul(v, NULL, 10);
        else if (!strcmp(a, "--lengths")) nl = parse_list(v, lens, MAXL);
        else {
            fprintf(stderr, "unknown option %s\n", a);
            return 2;
        }
    }
    if (!d || !K || !L || !V || !steps || !rounds || !B || !chunk || nl < 1) {
        fprintf(stderr, "sizes must be positive\n");
        return 2;
    }
    size_t Tmax = 0;
    for (int i = 0; i < nl; i++) Tmax = lens[i] > Tmax ? lens[i] : Tmax;
    const size_t T = Tmax + (rounds + (profile ? 1 : 0)) * steps + 1; /* the profiled steps go on from the timed ones */
    wbcl_context *ctx = NULL;
    char cerr[512];
    if (wbcl_context_create(device, &ctx, cerr, sizeof cerr)) {
        fprintf(stderr, "%s\n", cerr);
        return 1;
    }
    FILE *out = csv ? fopen(csv, "w") : stdout;
    if (!out) {
        fprintf(stderr, "cannot write %s\n", csv);
        return 1;
    }
    fprintf(out, "model,dim,heads,layers,vocab,batch,tokens,ms_per_token,tokens_per_s,state_bytes,rss_bytes\n");
    int rc = 0;
    const char *kinds[2] = {"gpt2", "tost_lm"};
    for (int k = 0; k < 2 && !rc; k++) {
        if (!strstr(models, kinds[k])) continue;
        wbcl_lm_kind kind = k ? WBCL_LM_TOST : WBCL_LM_GPT2;
        char path[] = "/tmp/wbcl_bench_lm_XXXXXX";
        int fd = mkstemp(path);
        if (fd < 0) return 1;
        close(fd);
        double t0 = now_s();
        if (write_model(path, kind, d, K, L, V, T)) {
            unlink(path);
            return 1;
        }
        wbcl_lm *m = NULL;
        wbcl_status st = wbcl_lm_load_file(ctx, path, kind, K, &m);
        unlink(path);
        if (st) {
            fprintf(stderr, "load: %s\n", wbcl_context_last_error(ctx));
            return 1;
        }
        fprintf(stderr, "%s: weights made and loaded in %.1f s\n", kinds[k], now_s() - t0);
        wbcl_lm_state *s = NULL;
        wbcl_tensor *lg = NULL;
        size_t sl[2] = {B, V};
        float *host = malloc(B * V * sizeof *host);
        int64_t *tok = calloc(B, sizeof *tok);
        double *times = calloc(steps, sizeof *times);
        wbcl_array ids = {0};
        char err[256];
        size_t sc[2] = {B, chunk};
        if (!host || !tok || !times || wbcl_array_alloc(&ids, WBCL_ELEM_I64, 2, sc, err, sizeof err) ||
            wbcl_lm_state_create(ctx, m, B, &s) || wbcl_tensor_create(ctx, 2, sl, WBCL_F32, NULL, &lg)) {
            fprintf(stderr, "setup: %s\n", wbcl_context_last_error(ctx));
            return 1;
        }
        for (int li = 0; li < nl && !rc; li++) {
            /* prefill up to lens[li] tokens (continuing the state) */
            while (wbcl_lm_state_position(s) < lens[li] && !rc) {
                size_t n = lens[li] - wbcl_lm_state_position(s);
                if (n > chunk) n = chunk;
                ids.shape[1] = n;
                for (size_t i = 0; i < B * n; i++) ((int64_t *)ids.data)[i] = (int64_t)(urand(0, 1) * (float)(V - 1));
                double tp = now_s();
                if (wbcl_lm_prefill(ctx, s, &ids, NULL)) {
                    fprintf(stderr, "prefill: %s\n", wbcl_context_last_error(ctx));
                    rc = 1;
                }
                wbcl_context_finish(ctx);
                fprintf(stderr, "  %s: prefill %zu tokens to position %zu: %.2f s\n", kinds[k], n,
                        wbcl_lm_state_position(s), now_s() - tp);
            }
            const size_t at = wbcl_lm_state_position(s);
            double med = INFINITY; /* the lowest of the rounds' medians: the quietest round */
            for (size_t rd = 0; rd < rounds && !rc; rd++) {
                for (size_t j = 0; j < steps && !rc; j++) {
                    double ts = now_s();
                    if (wbcl_lm_step(ctx, s, tok, lg) || wbcl_tensor_read(ctx, lg, host, B * V)) {
                        fprintf(stderr, "step: %s\n", wbcl_context_last_error(ctx));
                        rc = 1;
                        break;
                    }
                    for (size_t b = 0; b < B; b++) tok[b] = wbcl_lm_pick(host + b * V, V, NULL, NULL);
                    times[j] = now_s() - ts;
                }
                if (!rc) med = fmin(med, median(times, (int)steps));
            }
            if (rc) break;
            fprintf(out, "%s,%zu,%zu,%zu,%zu,%zu,%zu,%.4f,%.2f,%zu,%zu\n", kinds[k], d, K, L, V, B, at, 1e3 * med,
                    (double)B / med, wbcl_lm_state_bytes(s), rss_bytes());
            fflush(out);
            if (profile) {
                wbcl_context_reset_kernel_ns(ctx); /* this point's steps only (the counters accumulate) */
                wbcl_context_set_timing(ctx, 1);
                for (size_t j = 0; j < steps && !rc; j++)
                    if (wbcl_lm_step(ctx, s, tok, lg) || wbcl_tensor_read(ctx, lg, host, B * V)) {
                        fprintf(stderr, "step: %s\n", wbcl_context_last_error(ctx));
                        rc = 1;
                    }
                fprintf(stderr, "%s at %zu tokens, device time per step:\n", kinds[k], at);
                print_kernel_profile(ctx, stderr, (double)steps);
                wbcl_context_set_timing(ctx, 0);
            }
        }
        wbcl_array_free(&ids);
        free(host);
        free(tok);
        free(times);
        wbcl_tensor_destroy(lg);
        wbcl_lm_state_destroy(s);
        wbcl_lm_destroy(m);
    }
    if (csv) fclose(out);
    wbcl_context_destroy(ctx);
    return rc;
}

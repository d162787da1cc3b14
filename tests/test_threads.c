/* Two contexts in two threads: each thread opens its own context on the test
 * device and runs the same pipeline of ops (GEMM on both backends, basic ops,
 * the fused attention kernels, TSSA, ISTA, Cholesky, a small ReduNet fit and
 * apply) several times. Every thread must produce bit-identical results to
 * the others and to a run on the main thread (the ops are deterministic for
 * a given device and input), and the results must match the double
 * reference — so a data race on shared state (program caches, scratch
 * buffers, error messages) shows up as a difference or a failure. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "wbcl/ref.h"

enum { M = 37, K = 29, N = 23 };               /* GEMM: odd sizes, not tile multiples */
enum { AB = 2, AH = 3, AN = 41, AP = 16 };     /* attention (B, K, N, p)              */
enum { RM = 60, RD = 5, RK = 3, RL = 4 };      /* ReduNet: m, d, K, layers            */
enum { REPS = 3 };

#define OUT_GEMM_P 0
#define OUT_GEMM_C (OUT_GEMM_P + M * N)
#define OUT_LN (OUT_GEMM_C + M * N)
#define OUT_SM (OUT_LN + M * N)
#define OUT_ATT (OUT_SM + M * N)
#define OUT_MSSA (OUT_ATT + AB * AH * AN * AP)
#define OUT_TSSA (OUT_MSSA + AB * AH * AN * AP)
#define OUT_ISTA (OUT_TSSA + AB * AH * AN * AP)
#define OUT_CHOL (OUT_ISTA + M * K)
#define OUT_RDN (OUT_CHOL + K * K)
#define OUT_TOTAL (OUT_RDN + RM * RD)

typedef struct {
    const float *A, *B, *q, *kk, *v, *spd, *X;
    const int *labels;
    float *out;          /* OUT_TOTAL floats */
    wbcl_status st;
    char msg[1024];
} job;

#define T(call)                                                                                  \
    do {                                                                                         \
        if (!j->st && (j->st = (call)) != WBCL_SUCCESS)                                          \
            snprintf(j->msg, sizeof j->msg, "%s: %s", #call, wbcl_context_last_error(ctx));      \
    } while (0)

static void pipeline(wbcl_context *ctx, job *j)
{
    size_t sa[2] = {M, K}, sb[2] = {K, N}, sc[2] = {M, N}, sh[4] = {AB, AH, AN, AP}, sk[2] = {K, K};
    size_t sx[2] = {RM, RD}, st[1] = {AH};
    wbcl_tensor *A = NULL, *B = NULL, *C = NULL, *Y = NULL, *q = NULL, *k = NULL, *v = NULL, *o = NULL;
    wbcl_tensor *S = NULL, *L = NULL, *W = NULL, *Z = NULL, *X = NULL, *temp = NULL;
    wbcl_redunet *net = NULL;
    float tv[AH] = {1.0f, 0.5f, 2.0f};
    T(wbcl_tensor_create(ctx, 2, sa, WBCL_F32, j->A, &A));
    T(wbcl_tensor_create(ctx, 2, sb, WBCL_F32, j->B, &B));
    T(wbcl_tensor_create(ctx, 2, sc, WBCL_F32, NULL, &C));
    T(wbcl_tensor_create(ctx, 2, sc, WBCL_F32, NULL, &Y));
    /* GEMM, packed kernel then CLBlast */
    T(wbcl_context_set_gemm_backend(ctx, WBCL_GEMM_PACKED));
    T(wbcl_gemm(ctx, WBCL_NO_TRANS, WBCL_NO_TRANS, 1.0f, A, B, 0.0f, C));
    T(wbcl_tensor_read(ctx, C, j->out + OUT_GEMM_P, M * N));
    T(wbcl_context_set_gemm_backend(ctx, WBCL_GEMM_CLBLAST));
    T(wbcl_gemm(ctx, WBCL_NO_TRANS, WBCL_NO_TRANS, 1.0f, A, B, 0.0f, C));
    T(wbcl_tensor_read(ctx, C, j->out + OUT_GEMM_C, M * N));
    T(wbcl_context_set_gemm_backend(ctx, WBCL_GEMM_AUTO));
    /* basic ops */
    T(wbcl_layernorm(ctx, C, NULL, NULL, 1e-5f, Y));
    T(wbcl_tensor_read(ctx, Y, j->out + OUT_LN, M * N));
    T(wbcl_softmax(ctx, C, Y));
    T(wbcl_gelu(ctx, Y, Y));
    T(wbcl_tensor_read(ctx, Y, j->out + OUT_SM, M * N));
    /* attention: softmax heads, MSSA, TSSA */
    T(wbcl_tensor_create(ctx, 4, sh, WBCL_F32, j->q, &q));
    T(wbcl_tensor_create(ctx, 4, sh, WBCL_F32, j->kk, &k));
    T(wbcl_tensor_create(ctx, 4, sh, WBCL_F32, j->v, &v));
    T(wbcl_tensor_create(ctx, 4, sh, WBCL_F32, NULL, &o));
    T(wbcl_attention_softmax_heads(ctx, q, k, v, 0.25f, 1, o));
    T(wbcl_tensor_read(ctx, o, j->out + OUT_ATT, AB * AH * AN * AP));
    T(wbcl_attention_mssa_heads(ctx, q, 0.25f, 0, o));
    T(wbcl_tensor_read(ctx, o, j->out + OUT_MSSA, AB * AH * AN * AP));
    T(wbcl_tensor_create(ctx, 1, st, WBCL_F32, tv, &temp));
    T(wbcl_tssa_heads(ctx, q, temp, o, NULL));
    T(wbcl_tensor_read(ctx, o, j->out + OUT_TSSA, AB * AH * AN * AP));
    /* ISTA: y = relu(x - eta (x W^T - x) W ...) with W (K, K) from the SPD data scaled */
    T(wbcl_tensor_create(ctx, 2, sk, WBCL_F32, j->spd, &S));
    T(wbcl_tensor_create(ctx, 2, sk, WBCL_F32, NULL, &L));
    T(wbcl_tensor_create(ctx, 2, sa, WBCL_F32, NULL, &W));
    T(wbcl_ista(ctx, A, NULL, S, 0.01f, 0.1f, WBCL_THRESHOLD_SOFT, W));
    T(wbcl_tensor_read(ctx, W, j->out + OUT_ISTA, M * K));
    T(wbcl_cholesky(ctx, S, L));
    T(wbcl_tensor_read(ctx, L, j->out + OUT_CHOL, K * K));
    /* ReduNet: fit a few layers, apply to the training rows */
    wbcl_redunet_params rp = wbcl_redunet_default_params();
    rp.layers = RL;
    T(wbcl_tensor_create(ctx, 2, sx, WBCL_F32, j->X, &X));
    T(wbcl_tensor_create(ctx, 2, sx, WBCL_F32, NULL, &Z));
    T(wbcl_redunet_fit(ctx, X, j->labels, RK, &rp, NULL, NULL, NULL, &net));
    T(wbcl_redunet_apply(ctx, net, X, Z));
    T(wbcl_tensor_read(ctx, Z, j->out + OUT_RDN, RM * RD));
    wbcl_redunet_destroy(net);
    wbcl_tensor *all[] = {A, B, C, Y, q, k, v, o, S, L, W, Z, X, temp};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) wbcl_tensor_destroy(all[i]);
}

static void *thread_main(void *arg)
{
    job *j = arg;
    float *first = malloc(OUT_TOTAL * sizeof *first);
    wbcl_context *ctx = NULL;
    j->st = first ? wbcl_context_create(getenv("WBCL_TEST_DEVICE"), &ctx, j->msg, sizeof j->msg)
                  : WBCL_ERROR_OUT_OF_MEMORY;
    /* repeat inside the thread: every repetition must equal the first */
    for (int r = 0; r < REPS && !j->st; r++) {
        pipeline(ctx, j);
        if (j->st) break;
        if (r == 0) memcpy(first, j->out, OUT_TOTAL * sizeof *first);
        else if (memcmp(first, j->out, OUT_TOTAL * sizeof *first) != 0) {
            j->st = WBCL_ERROR_NUMERIC;
            snprintf(j->msg, sizeof j->msg, "repetition %d differs from the first in the same thread", r);
        }
    }
    wbcl_context_destroy(ctx);
    free(first);
    return NULL;
}

static size_t first_diff(const float *a, const float *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (memcmp(&a[i], &b[i], sizeof a[i]) != 0) return i;
    return n;
}

START_TEST(two_contexts_two_threads_identical)
{
    tu_rng rng;
    tu_rng_seed(&rng, 77);
    float *A = tu_random_f32(&rng, M * K, -1, 1), *B = tu_random_f32(&rng, K * N, -1, 1);
    size_t nh = AB * AH * AN * AP;
    float *q = tu_random_f32(&rng, nh, -1, 1), *kk = tu_random_f32(&rng, nh, -1, 1), *v = tu_random_f32(&rng, nh, -1, 1);
    /* SPD: I * K + G G^T / K, G random */
    float *G = tu_random_f32(&rng, K * K, -1, 1), *spd = malloc(K * K * sizeof *spd);
    ck_assert_ptr_nonnull(spd);
    for (int i = 0; i < K; i++)
        for (int c = 0; c < K; c++) {
            double s = i == c ? 1.0 : 0.0;
            for (int l = 0; l < K; l++) s += (double)G[i * K + l] * G[c * K + l] / K;
            spd[i * K + c] = (float)(s * 0.1);
        }
    float *X = malloc(RM * RD * sizeof *X);
    int *labels = malloc(RM * sizeof *labels);
    ck_assert_ptr_nonnull(X);
    ck_assert_ptr_nonnull(labels);
    ck_assert_int_eq(wbcl_redunet_gaussians(RD, RK, RM / RK, 0.2, NULL, 5, X, labels), WBCL_SUCCESS);

    job jobs[3];
    for (int t = 0; t < 3; t++) {
        memset(&jobs[t], 0, sizeof jobs[t]);
        jobs[t] = (job){A, B, q, kk, v, spd, X, labels, malloc(OUT_TOTAL * sizeof(float)), WBCL_SUCCESS, ""};
        ck_assert_ptr_nonnull(jobs[t].out);
        for (size_t i = 0; i < OUT_TOTAL; i++) jobs[t].out[i] = NAN;
    }
    /* job 0 on the main thread (alone), jobs 1 and 2 concurrently */
    thread_main(&jobs[0]);
    ck_assert_msg(jobs[0].st == WBCL_SUCCESS, "main thread: %s", jobs[0].msg);
    pthread_t th[2];
    for (int t = 0; t < 2; t++) ck_assert_int_eq(pthread_create(&th[t], NULL, thread_main, &jobs[t + 1]), 0);
    for (int t = 0; t < 2; t++) pthread_join(th[t], NULL);
    for (int t = 1; t < 3; t++) {
        ck_assert_msg(jobs[t].st == WBCL_SUCCESS, "thread %d: %s: %s", t, wbcl_status_name(jobs[t].st), jobs[t].msg);
        size_t d = first_diff(jobs[0].out, jobs[t].out, OUT_TOTAL);
        ck_assert_msg(d == OUT_TOTAL, "thread %d differs from the single-threaded run at output %zu: %.9g vs %.9g", t,
                      d, (double)jobs[t].out[d], (double)jobs[0].out[d]);
    }

    /* the common result is also right: GEMM (both backends), softmax attention, Cholesky */
    double *Ad = tu_to_f64(A, M * K), *Bd = tu_to_f64(B, K * N);
    double *Cd = calloc(M * N, sizeof *Cd);
    ck_assert_ptr_nonnull(Cd);
    wbcl_ref_gemm(0, 0, M, N, K, 1.0, Ad, K, Bd, N, 0.0, Cd, N);
    tu_assert_close(jobs[0].out + OUT_GEMM_P, Cd, M * N, 1e-5, 1e-4, "packed GEMM");
    tu_assert_close(jobs[0].out + OUT_GEMM_C, Cd, M * N, 1e-5, 1e-4, "CLBlast GEMM");
    double *qd = tu_to_f64(q, nh), *kd = tu_to_f64(kk, nh), *vd = tu_to_f64(v, nh), *od = malloc(nh * sizeof *od);
    ck_assert_ptr_nonnull(od);
    wbcl_ref_attention_heads(AB, AH, AN, AN, AP, qd, kd, vd, 0.25, 1, od);
    tu_assert_close(jobs[0].out + OUT_ATT, od, nh, 1e-5, 1e-4, "causal softmax attention");
    double *Sd = tu_to_f64(spd, K * K), *Ld = malloc(K * K * sizeof *Ld);
    ck_assert_ptr_nonnull(Ld);
    ck_assert_int_eq(wbcl_ref_cholesky(K, Sd, Ld), 0);
    tu_assert_close(jobs[0].out + OUT_CHOL, Ld, K * K, 1e-5, 1e-4, "Cholesky");

    free(Ad); free(Bd); free(Cd); free(qd); free(kd); free(vd); free(od); free(Sd); free(Ld);
    for (int t = 0; t < 3; t++) free(jobs[t].out);
    free(A); free(B); free(q); free(kk); free(v); free(G); free(spd); free(X); free(labels);
}
END_TEST

/* Errors are per context: a failure in one thread's context leaves the
 * other's message alone while both keep working. */
static void *bad_calls(void *arg)
{
    job *j = arg;
    wbcl_context *ctx = NULL;
    j->st = wbcl_context_create(getenv("WBCL_TEST_DEVICE"), &ctx, j->msg, sizeof j->msg);
    if (j->st) return NULL;
    size_t s[1] = {8};
    wbcl_tensor *x = NULL;
    for (int r = 0; r < 50; r++) {
        wbcl_status st = wbcl_layernorm(ctx, NULL, NULL, NULL, 1e-5f, NULL);
        if (st != WBCL_ERROR_INVALID_ARGUMENT || !strstr(wbcl_context_last_error(ctx), "layernorm")) {
            j->st = WBCL_ERROR_NUMERIC;
            snprintf(j->msg, sizeof j->msg, "rep %d: unexpected %s '%s'", r, wbcl_status_name(st),
                     wbcl_context_last_error(ctx));
            break;
        }
        if ((j->st = wbcl_tensor_create(ctx, 1, s, WBCL_F32, NULL, &x)) ||
            (j->st = wbcl_tensor_fill(ctx, x, (float)r)) || (j->st = wbcl_softmax(ctx, x, x))) {
            snprintf(j->msg, sizeof j->msg, "rep %d: %s", r, wbcl_context_last_error(ctx));
            break;
        }
        float y[8];
        if ((j->st = wbcl_tensor_read(ctx, x, y, 8))) break;
        for (int i = 0; i < 8; i++)
            if (y[i] != 0.125f) { j->st = WBCL_ERROR_NUMERIC; snprintf(j->msg, sizeof j->msg, "softmax %g", y[i]); }
        wbcl_tensor_destroy(x);
        x = NULL;
        if (j->st) break;
    }
    wbcl_tensor_destroy(x);
    wbcl_context_destroy(ctx);
    return NULL;
}

START_TEST(errors_stay_in_their_context)
{
    job a, b;
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    pthread_t ta, tb;
    ck_assert_int_eq(pthread_create(&ta, NULL, bad_calls, &a), 0);
    ck_assert_int_eq(pthread_create(&tb, NULL, bad_calls, &b), 0);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    ck_assert_msg(a.st == WBCL_SUCCESS, "%s", a.msg);
    ck_assert_msg(b.st == WBCL_SUCCESS, "%s", b.msg);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("threads");
    TCase *tc = tcase_create("threads");
    tcase_set_timeout(tc, 900);
    tcase_add_test(tc, two_contexts_two_threads_identical);
    tcase_add_test(tc, errors_stay_in_their_context);
    suite_add_tcase(s, tc);
    return tu_run(s);
}

/* Split/merge heads against an index-by-index reference; bad shapes. */
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

START_TEST(split_merge_roundtrip)
{
    wbcl_context *ctx = tu_context();
    /* (B, N, chunks*K*p) with odd sizes */
    const size_t B = 2, N = 7, K = 3, p = 5, chunks = 3, D = chunks * K * p;
    size_t sx[3] = {B, N, D}, sy[4] = {B, K, N, p};
    size_t nx = B * N * D, ny = B * K * N * p;
    float *x = malloc(nx * sizeof *x);
    for (size_t i = 0; i < nx; i++) x[i] = (float)i;
    wbcl_tensor *tx, *ty, *tm;
    ck_assert_int_eq(wbcl_tensor_create(ctx, 3, sx, WBCL_F32, x, &tx), WBCL_SUCCESS);
    ck_assert_int_eq(wbcl_tensor_create(ctx, 4, sy, WBCL_F32, NULL, &ty), WBCL_SUCCESS);
    size_t sm[3] = {B, N, K * p};
    ck_assert_int_eq(wbcl_tensor_create(ctx, 3, sm, WBCL_F32, NULL, &tm), WBCL_SUCCESS);
    float *y = tu_guarded_alloc(ny), *m = tu_guarded_alloc(B * N * K * p);
    for (size_t chunk = 0; chunk < chunks; chunk++) {
        ck_assert_int_eq(wbcl_split_heads(ctx, tx, K, chunk, chunks, ty), WBCL_SUCCESS);
        ck_assert_int_eq(wbcl_tensor_read(ctx, ty, y, ny), WBCL_SUCCESS);
        for (size_t b = 0; b < B; b++)
            for (size_t h = 0; h < K; h++)
                for (size_t n = 0; n < N; n++)
                    for (size_t c = 0; c < p; c++)
                        ck_assert(y[((b * K + h) * N + n) * p + c] == x[(b * N + n) * D + chunk * K * p + h * p + c]);
        ck_assert_int_eq(wbcl_merge_heads(ctx, ty, tm), WBCL_SUCCESS);
        ck_assert_int_eq(wbcl_tensor_read(ctx, tm, m, B * N * K * p), WBCL_SUCCESS);
        for (size_t b = 0; b < B; b++)
            for (size_t n = 0; n < N; n++)
                for (size_t j = 0; j < K * p; j++)
                    ck_assert(m[(b * N + n) * K * p + j] == x[(b * N + n) * D + chunk * K * p + j]);
    }
    ck_assert(tu_canary_ok(y, ny) && tu_canary_ok(m, B * N * K * p));
    /* bad input */
    tu_assert_status(ctx, wbcl_split_heads(ctx, tx, 4, 0, 3, ty), WBCL_ERROR_SHAPE, "4 head");
    tu_assert_status(ctx, wbcl_split_heads(ctx, tx, K, 3, 3, ty), WBCL_ERROR_SHAPE, "chunk 3");
    tu_assert_status(ctx, wbcl_split_heads(ctx, tx, K, 0, 1, ty), WBCL_ERROR_SHAPE, "expected (2, 3, 7, 15)");
    tu_assert_status(ctx, wbcl_split_heads(ctx, tx, K, 0, 3, tx), WBCL_ERROR_INVALID_ARGUMENT, "must not");
    tu_assert_status(ctx, wbcl_merge_heads(ctx, ty, tx), WBCL_ERROR_SHAPE, "(2, 7, 45)");
    tu_assert_status(ctx, wbcl_merge_heads(ctx, tx, tm), WBCL_ERROR_SHAPE, "(B, K, N, p)");
    tu_assert_status(ctx, wbcl_merge_heads(ctx, NULL, tm), WBCL_ERROR_INVALID_ARGUMENT, "NULL");
    wbcl_tensor_destroy(tx);
    wbcl_tensor_destroy(ty);
    wbcl_tensor_destroy(tm);
    wbcl_context_destroy(ctx);
    free(x);
    tu_guarded_free(y);
    tu_guarded_free(m);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("heads");
    TCase *tc = tcase_create("heads");
    tcase_add_test(tc, split_merge_roundtrip);
    suite_add_tcase(s, tc);
    return tu_run(s);
}

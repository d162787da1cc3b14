/* Double-precision references for the basic ops (include/wbcl/ref.h),
 * written straight from the equations: no blocking, no tricks, except the
 * max subtraction in softmax (without it exp overflows double too). */
#include "wbcl/ref.h"

#include <math.h>

void wbcl_ref_layernorm(size_t rows, size_t d, const double *x, const double *gamma, const double *beta, double eps,
                        double *y)
{
    for (size_t r = 0; r < rows; r++) {
        const double *p = x + r * d;
        double mean = 0.0, var = 0.0;
        for (size_t i = 0; i < d; i++) mean += p[i];
        mean /= (double)d;
        for (size_t i = 0; i < d; i++) var += (p[i] - mean) * (p[i] - mean);
        var /= (double)d; /* biased, as PyTorch's LayerNorm */
        double rstd = 1.0 / sqrt(var + eps);
        for (size_t i = 0; i < d; i++)
            y[r * d + i] = (p[i] - mean) * rstd * (gamma ? gamma[i] : 1.0) + (beta ? beta[i] : 0.0);
    }
}

/* 0.5 x (1 + erf(x / sqrt 2)) = 0.5 x erfc(-x / sqrt 2): the erfc form keeps
 * full relative accuracy for x << 0, where 1 + erf cancels even in double. */
void wbcl_ref_gelu(size_t n, const double *x, double *y)
{
    for (size_t i = 0; i < n; i++) y[i] = 0.5 * x[i] * erfc(-x[i] / sqrt(2.0));
}

void wbcl_ref_softmax(size_t rows, size_t d, const double *x, double *y)
{
    for (size_t r = 0; r < rows; r++) {
        const double *p = x + r * d;
        double m = -INFINITY, s = 0.0;
        for (size_t i = 0; i < d; i++) m = p[i] > m ? p[i] : m;
        for (size_t i = 0; i < d; i++) s += exp(p[i] - m);
        for (size_t i = 0; i < d; i++) y[r * d + i] = exp(p[i] - m) / s;
    }
}

static double reduce(int op, size_t n, const double *p, size_t stride)
{
    double a = op == 2 ? -INFINITY : 0.0;
    for (size_t i = 0; i < n; i++) {
        double v = p[i * stride];
        if (op == 2) a = v > a ? v : a;
        else a += op == 3 ? v * v : v;
    }
    return op == 1 ? a / (double)n : a;
}

void wbcl_ref_reduce_rows(int op, size_t rows, size_t cols, const double *x, double *y)
{
    for (size_t r = 0; r < rows; r++) y[r] = reduce(op, cols, x + r * cols, 1);
}

void wbcl_ref_reduce_cols(int op, size_t rows, size_t cols, const double *x, double *y)
{
    for (size_t c = 0; c < cols; c++) y[c] = reduce(op, rows, x + c, cols);
}

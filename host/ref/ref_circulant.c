/* Reference shift-invariant ReduNet in double precision, straight from
 * SPEC.md §4.2 (book §5.1.2, Prop. 5.1-5.2, Remark 5.2): lifting by circular
 * cross-correlation + ReLU, a naive unitary DFT (no FFT), the whole spectrum
 * p = 0..N-1 (no half-spectrum shortcut), one C x C Hermitian problem per
 * frequency solved by a textbook complex Cholesky; and, as an independent
 * oracle, the dense block-circulant operators built from the time-domain
 * definition (all shifts of every sample), O((N C)^3). 1-D is H = 1.
 * Self-contained: its own complex and real Cholesky. */
#include <complex.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "wbcl/ref.h"

typedef double complex cplx;

#define CIRC_PI 3.14159265358979323846

/* ---- lifting --------------------------------------------------------------------------------- */

void wbcl_ref_circ_lift(size_t m, size_t Cin, size_t Cout, size_t H, size_t W, size_t kh, size_t kw,
                        const double *X, const double *Wt, double *Lf)
{
    for (size_t b = 0; b < m; b++)
        for (size_t o = 0; o < Cout; o++)
            for (size_t h = 0; h < H; h++)
                for (size_t w = 0; w < W; w++) {
                    double s = 0.0;
                    for (size_t i = 0; i < Cin; i++)
                        for (size_t u = 0; u < kh; u++)
                            for (size_t v = 0; v < kw; v++)
                                s += Wt[((o * Cin + i) * kh + u) * kw + v] *
                                     X[((b * Cin + i) * H + (h + u) % H) * W + (w + v) % W];
                    Lf[((b * Cout + o) * H + h) * W + w] = s > 0.0 ? s : 0.0;
                }
}

/* ---- unitary DFT, naive -------------------------------------------------------------------------- */

void wbcl_ref_circ_dft(size_t rows, size_t H, size_t W, int inverse, const double *in, double *out)
{
    const cplx *x = (const cplx *)in;
    cplx *y = (cplx *)out;
    size_t N = H * W;
    double sgn = inverse ? 1.0 : -1.0, sc = 1.0 / sqrt((double)N);
    for (size_t r = 0; r < rows; r++)
        for (size_t ph = 0; ph < H; ph++)
            for (size_t pw = 0; pw < W; pw++) {
                cplx s = 0.0;
                for (size_t h = 0; h < H; h++)
                    for (size_t w = 0; w < W; w++) {
                        /* angles reduced mod the length first: exact for integer arguments */
                        double a = 2.0 * CIRC_PI *
                                   ((double)((ph * h) % H) / (double)H + (double)((pw * w) % W) / (double)W);
                        s += x[r * N + h * W + w] * (cos(a) + sgn * I * sin(a));
                    }
                y[r * N + ph * W + pw] = s * sc;
            }
}

/* ---- complex Hermitian positive definite helpers -------------------------------------------------- */

/* A = L L^H (n x n, lower triangle of A read). 0 or -1 (pivot not positive / not finite). */
static int zchol(size_t n, const cplx *A, cplx *L)
{
    for (size_t i = 0; i < n * n; i++) L[i] = 0.0;
    for (size_t j = 0; j < n; j++) {
        double s = creal(A[j * n + j]);
        for (size_t k = 0; k < j; k++) s -= creal(L[j * n + k] * conj(L[j * n + k]));
        if (!(s > 0.0) || !isfinite(s)) return -1;
        double ljj = sqrt(s);
        L[j * n + j] = ljj;
        for (size_t i = j + 1; i < n; i++) {
            cplx t = A[i * n + j];
            for (size_t k = 0; k < j; k++) t -= L[i * n + k] * conj(L[j * n + k]);
            L[i * n + j] = t / ljj;
        }
    }
    return 0;
}

/* M = scale (I + alpha S)^-1 (M may be NULL) and logdet(I + alpha S) (may be NULL). */
static int zshifted_inverse(size_t n, const cplx *S, double alpha, double scale, cplx *M, double *logdet)
{
    cplx *A = malloc(n * n * sizeof *A), *L = malloc(n * n * sizeof *L), *col = malloc(n * sizeof *col);
    int rc = -1;
    if (!A || !L || !col) goto done;
    for (size_t i = 0; i < n * n; i++) A[i] = alpha * S[i];
    for (size_t i = 0; i < n; i++) A[i * n + i] += 1.0;
    if (zchol(n, A, L)) goto done;
    if (logdet) {
        double s = 0.0;
        for (size_t i = 0; i < n; i++) s += log(creal(L[i * n + i]));
        *logdet = 2.0 * s;
    }
    if (M) {
        for (size_t c = 0; c < n; c++) { /* L w = e_c, then L^H x = w */
            for (size_t i = 0; i < n; i++) {
                cplx t = i == c ? 1.0 : 0.0;
                for (size_t k = 0; k < i; k++) t -= L[i * n + k] * col[k];
                col[i] = t / L[i * n + i];
            }
            for (size_t i = n; i-- > 0;) {
                cplx t = col[i];
                for (size_t k = i + 1; k < n; k++) t -= conj(L[k * n + i]) * col[k];
                col[i] = t / L[i * n + i];
            }
            for (size_t i = 0; i < n; i++) M[i * n + c] = scale * col[i];
        }
    }
    rc = 0;
done:
    free(A);
    free(L);
    free(col);
    return rc;
}

/* S = sum over samples b (labels NULL or labels[b] == group) of v_b(p) v_b(p)^H at frequency p. */
static size_t zgram(size_t m, size_t C, size_t N, size_t p, const cplx *V, const int *labels, int group, cplx *S)
{
    size_t count = 0;
    for (size_t i = 0; i < C * C; i++) S[i] = 0.0;
    for (size_t b = 0; b < m; b++) {
        if (labels && labels[b] != group) continue;
        count++;
        for (size_t c = 0; c < C; c++)
            for (size_t d = 0; d < C; d++) S[c * C + d] += V[(b * C + c) * N + p] * conj(V[(b * C + d) * N + p]);
    }
    return count;
}

static size_t count_label(size_t m, const int *labels, int j)
{
    size_t n = 0;
    for (size_t b = 0; b < m; b++) n += labels[b] == j;
    return n;
}

/* ---- construction, application, objective (frequency domain) ----------------------------------- */

int wbcl_ref_circ_construct(size_t m, size_t C, size_t N, size_t K, const double *Vd, const int *y, double eps2,
                            double *opsd, double *gamma)
{
    const cplx *V = (const cplx *)Vd;
    cplx *ops = (cplx *)opsd, *S = malloc(C * C * sizeof *S);
    if (!S) return -1;
    int rc = 0;
    for (size_t j = 0; j < K; j++)
        if (count_label(m, y, (int)j) == 0) {
            free(S);
            return 1 + (int)j;
        }
    double a = (double)C / ((double)m * eps2);
    for (size_t p = 0; p < N && rc == 0; p++) {
        zgram(m, C, N, p, V, NULL, 0, S);
        if (zshifted_inverse(C, S, a, a, ops + (K * N + p) * C * C, NULL)) rc = -1;
        for (size_t j = 0; j < K && rc == 0; j++) {
            size_t mj = zgram(m, C, N, p, V, y, (int)j, S);
            double aj = (double)C / ((double)mj * eps2);
            if (gamma) gamma[j] = (double)mj / (double)m;
            if (zshifted_inverse(C, S, aj, aj, ops + (j * N + p) * C * C, NULL)) rc = -1;
        }
    }
    free(S);
    return rc;
}

/* out[r] = M^H v for a C x C matrix M and C vector v (strided by N). */
static void zmatvec_h(size_t C, const cplx *M, const cplx *v, size_t stride, cplx *out)
{
    for (size_t r = 0; r < C; r++) {
        cplx s = 0.0;
        for (size_t k = 0; k < C; k++) s += conj(M[k * C + r]) * v[k * stride];
        out[r] = s;
    }
}

void wbcl_ref_circ_apply(size_t m, size_t C, size_t N, size_t K, const double *opsd, const double *gamma, double eta,
                         double lambda, double *Vd, int *yhat, double *pi_out)
{
    const cplx *ops = (const cplx *)opsd;
    cplx *V = (cplx *)Vd;
    cplx *c = malloc(K * C * N * sizeof *c), *e = malloc(C * N * sizeof *e), *tmp = malloc(C * sizeof *tmp);
    double *u = malloc(K * sizeof *u);
    if (!c || !e || !tmp || !u) goto done;
    for (size_t b = 0; b < m; b++) {
        cplx *v = V + b * C * N;
        for (size_t p = 0; p < N; p++) {
            zmatvec_h(C, ops + (K * N + p) * C * C, v + p, N, tmp);
            for (size_t r = 0; r < C; r++) e[r * N + p] = tmp[r];
        }
        for (size_t j = 0; j < K; j++) {
            double nn = 0.0;
            for (size_t p = 0; p < N; p++) {
                zmatvec_h(C, ops + (j * N + p) * C * C, v + p, N, tmp);
                for (size_t r = 0; r < C; r++) {
                    c[(j * C + r) * N + p] = tmp[r];
                    nn += creal(tmp[r] * conj(tmp[r]));
                }
            }
            double nj = sqrt(nn);
            if (nj < 1e-8) nj = 1e-8;
            u[j] = -lambda * nj;
        }
        double mx = u[0];
        for (size_t j = 1; j < K; j++)
            if (u[j] > mx) mx = u[j];
        double den = 0.0;
        for (size_t j = 0; j < K; j++) {
            u[j] = exp(u[j] - mx);
            den += u[j];
        }
        size_t best = 0;
        for (size_t j = 0; j < K; j++) {
            u[j] /= den;
            if (u[j] > u[best]) best = j;
            if (pi_out) pi_out[b * K + j] = u[j];
        }
        if (yhat) yhat[b] = (int)best;
        double s2 = 0.0;
        for (size_t i = 0; i < C * N; i++) {
            cplx g = e[i];
            for (size_t j = 0; j < K; j++) g -= gamma[j] * u[j] * c[j * C * N + i];
            v[i] += eta * g;
            s2 += creal(v[i] * conj(v[i]));
        }
        double nrm = sqrt(s2);
        if (nrm < 1e-8) nrm = 1e-8;
        for (size_t i = 0; i < C * N; i++) v[i] /= nrm;
    }
done:
    free(c);
    free(e);
    free(tmp);
    free(u);
}

int wbcl_ref_circ_objective(size_t m, size_t C, size_t N, size_t K, const double *Vd, const int *labels, double eps2,
                            double out[3])
{
    const cplx *V = (const cplx *)Vd;
    cplx *S = malloc(C * C * sizeof *S);
    if (!S) return -1;
    int rc = 0;
    double R = 0.0, Rc = 0.0, ld;
    for (size_t p = 0; p < N && rc == 0; p++) {
        zgram(m, C, N, p, V, NULL, 0, S);
        if (zshifted_inverse(C, S, (double)C / ((double)m * eps2), 1.0, NULL, &ld)) rc = -1;
        R += ld;
        for (size_t j = 0; j < K && rc == 0; j++) {
            size_t mj = zgram(m, C, N, p, V, labels, (int)j, S);
            if (mj == 0) continue; /* empty groups skipped */
            if (zshifted_inverse(C, S, (double)C / ((double)mj * eps2), 1.0, NULL, &ld)) rc = -1;
            Rc += ((double)mj / (double)m) * ld;
        }
    }
    free(S);
    R /= 2.0 * (double)N;
    Rc /= 2.0 * (double)N;
    out[0] = R - Rc;
    out[1] = R;
    out[2] = Rc;
    return rc;
}

/* Z (m, C, N) real -> V complex: normalize per sample, unitary DFT. */
static int enter(size_t m, size_t C, size_t H, size_t W, double *Z, cplx *V)
{
    size_t N = H * W;
    cplx *tmp = malloc(m * C * N * sizeof *tmp);
    if (!tmp) return -1;
    wbcl_ref_redunet_normalize(m, C * N, Z);
    for (size_t i = 0; i < m * C * N; i++) tmp[i] = Z[i];
    wbcl_ref_circ_dft(m * C, H, W, 0, (const double *)tmp, (double *)V);
    free(tmp);
    return 0;
}

/* V -> Z = real(normalize(IDFT(V))); *max_imag gets max |imag| / max |real| of the normalized IDFT. */
static int leave(size_t m, size_t C, size_t H, size_t W, const cplx *V, double *Z, double *max_imag)
{
    size_t N = H * W;
    cplx *z = malloc(m * C * N * sizeof *z);
    if (!z) return -1;
    wbcl_ref_circ_dft(m * C, H, W, 1, (const double *)V, (double *)z);
    double mi = 0.0, mr = 0.0;
    for (size_t b = 0; b < m; b++) {
        double s = 0.0;
        for (size_t i = 0; i < C * N; i++) s += creal(z[b * C * N + i] * conj(z[b * C * N + i]));
        double nrm = sqrt(s);
        if (nrm < 1e-8) nrm = 1e-8;
        for (size_t i = 0; i < C * N; i++) {
            cplx t = z[b * C * N + i] / nrm;
            Z[b * C * N + i] = creal(t);
            mi = fmax(mi, fabs(cimag(t)));
            mr = fmax(mr, fabs(creal(t)));
        }
    }
    if (max_imag) *max_imag = mr > 0.0 ? mi / mr : mi;
    free(z);
    return 0;
}

int wbcl_ref_circ_fit(size_t m, size_t C, size_t H, size_t W, size_t K, size_t L, const int *y, double eta,
                      double eps2, double lambda, double *Z, double *ops_all, double *gamma_all, double *hist,
                      int *yhat, double *max_imag)
{
    size_t N = H * W, nops = (K + 1) * N * C * C;
    cplx *V = malloc(m * C * N * sizeof *V), *ops = malloc(nops * sizeof *ops);
    double *g = malloc(K * sizeof *g);
    int *yh = malloc((m ? m : 1) * sizeof *yh);
    int rc = -1;
    if (!V || !ops || !g || !yh || enter(m, C, H, W, Z, V)) goto done;
    for (size_t l = 0; l < L; l++) {
        rc = wbcl_ref_circ_construct(m, C, N, K, (const double *)V, y, eps2, (double *)ops, g);
        if (rc) goto done;
        rc = -1;
        wbcl_ref_circ_apply(m, C, N, K, (const double *)ops, g, eta, lambda, (double *)V, yh, NULL);
        if (ops_all) memcpy(ops_all + 2 * l * nops, ops, nops * sizeof *ops);
        if (gamma_all) memcpy(gamma_all + l * K, g, K * sizeof *g);
        if (hist && wbcl_ref_circ_objective(m, C, N, K, (const double *)V, yh, eps2, hist + 3 * l)) goto done;
    }
    if (yhat) memcpy(yhat, yh, m * sizeof *yh);
    if (leave(m, C, H, W, V, Z, max_imag)) goto done;
    rc = 0;
done:
    free(V);
    free(ops);
    free(g);
    free(yh);
    return rc;
}

int wbcl_ref_circ_forward(size_t m, size_t C, size_t H, size_t W, size_t K, size_t L, const double *ops_all,
                          const double *gamma_all, double eta, double lambda, double *Z, int *yhat, double *pi)
{
    size_t N = H * W, nops = (K + 1) * N * C * C;
    cplx *V = malloc(m * C * N * sizeof *V);
    int rc = -1;
    if (!V || enter(m, C, H, W, Z, V)) goto done;
    for (size_t l = 0; l < L; l++)
        wbcl_ref_circ_apply(m, C, N, K, ops_all + 2 * l * nops, gamma_all + l * K, eta, lambda, (double *)V, yhat,
                            pi);
    if (leave(m, C, H, W, V, Z, NULL)) goto done;
    rc = 0;
done:
    free(V);
    return rc;
}

/* ---- dense block-circulant oracle (time domain) ------------------------------------------------- */

/* Real SPD: M = scale (I + alpha G)^-1 through the textbook Cholesky of host/ref (wbcl_ref_spd_inverse). */
static int dense_shifted_inverse(size_t n, const double *G, double alpha, double scale, double *M)
{
    double *A = malloc(n * n * sizeof *A);
    if (!A) return -1;
    for (size_t i = 0; i < n * n; i++) A[i] = alpha * G[i];
    for (size_t i = 0; i < n; i++) A[i * n + i] += 1.0;
    int rc = wbcl_ref_spd_inverse(n, A, M) ? -1 : 0;
    if (!rc)
        for (size_t i = 0; i < n * n; i++) M[i] *= scale;
    free(A);
    return rc;
}

/* G = circ(Z_group) circ(Z_group)^T = sum over samples in the group and over all 2-D shifts
 * (sh, sw) of the shifted sample's (C N) vector times its transpose. Returns the sample count. */
static size_t dense_gram(size_t m, size_t C, size_t H, size_t W, const double *Z, const int *labels, int group,
                         double *G)
{
    size_t N = H * W, n = C * N, count = 0;
    double *s = malloc(n * sizeof *s);
    memset(G, 0, n * n * sizeof *G);
    if (!s) return 0;
    for (size_t b = 0; b < m; b++) {
        if (labels && labels[b] != group) continue;
        count++;
        for (size_t sh = 0; sh < H; sh++)
            for (size_t sw = 0; sw < W; sw++) {
                for (size_t c = 0; c < C; c++)
                    for (size_t h = 0; h < H; h++)
                        for (size_t w = 0; w < W; w++)
                            s[(c * H + h) * W + w] = Z[((b * C + c) * H + (h + sh) % H) * W + (w + sw) % W];
                for (size_t i = 0; i < n; i++)
                    for (size_t k = 0; k < n; k++) G[i * n + k] += s[i] * s[k];
            }
    }
    free(s);
    return count;
}

int wbcl_ref_circ_dense_operator(size_t m, size_t C, size_t H, size_t W, const double *Z, const int *labels,
                                 int group, double eps2, double *M)
{
    size_t N = H * W, n = C * N;
    double *G = malloc(n * n * sizeof *G);
    if (!G) return -1;
    size_t mj = dense_gram(m, C, H, W, Z, labels, group, G);
    int rc = mj == 0 ? -1 : 0;
    if (!rc) {
        double a = (double)C / ((double)mj * eps2);
        rc = dense_shifted_inverse(n, G, a / (double)N, a, M);
    }
    free(G);
    return rc;
}

int wbcl_ref_circ_dense_layer(size_t m, size_t C, size_t H, size_t W, size_t K, const int *y, double eta, double eps2,
                              double lambda, double *Z, int *yhat)
{
    size_t n = C * H * W;
    double *E = malloc(n * n * sizeof *E), *Cj = malloc(K * n * n * sizeof *Cj), *g = malloc(K * sizeof *g);
    int rc = -1;
    if (!E || !Cj || !g) goto done;
    if (wbcl_ref_circ_dense_operator(m, C, H, W, Z, NULL, 0, eps2, E)) goto done;
    for (size_t j = 0; j < K; j++) {
        size_t mj = count_label(m, y, (int)j);
        if (mj == 0) {
            rc = 1 + (int)j;
            goto done;
        }
        g[j] = (double)mj / (double)m;
        if (wbcl_ref_circ_dense_operator(m, C, H, W, Z, y, (int)j, eps2, Cj + j * n * n)) goto done;
    }
    /* the dense operators are real symmetric: the vector ReduNet's application is this layer's */
    wbcl_ref_redunet_apply(m, n, K, E, Cj, g, eta, lambda, Z, yhat);
    rc = 0;
done:
    free(E);
    free(Cj);
    free(g);
    return rc;
}

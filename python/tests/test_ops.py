"""The typed operators against NumPy double-precision references written from SPEC.md.

Tolerances: float32 sums of k products carry a relative error of about k·2^-24 of the sum of the
absolute terms; with k <= 64 and O(1) data that is < 1e-5, so 2e-5 (GEMM: 1e-5 · k of the
magnitudes) separates rounding from a wrong index, scale or mask (errors of O(0.1) or more)."""
import numpy as np
import pytest

import wbcl


@pytest.mark.parametrize("ta,tb", [(False, False), (True, False), (False, True), (True, True)])
def test_gemm(ctx, rng, ta, tb):
    m, n, k = 13, 7, 29
    A = rng.standard_normal((k, m) if ta else (m, k))
    B = rng.standard_normal((n, k) if tb else (k, n))
    C = rng.standard_normal((m, n))
    want = 0.5 * (A.T if ta else A) @ (B.T if tb else B) - 2.0 * C
    got = ctx.gemm(A, B, alpha=0.5, beta=-2.0, C=C, trans_a=ta, trans_b=tb)
    tol = 2e-5 * (np.abs(A).max() * np.abs(B).max() * k + 2 * np.abs(C).max())
    assert got.shape == (m, n) and np.abs(got - want).max() < tol


def _softmax_attention(q, k, v, scale, causal):
    s = np.einsum("bhic,bhjc->bhij", q, k) * scale
    if causal:
        nq, nk = q.shape[2], k.shape[2]
        mask = np.arange(nk)[None, :] > np.arange(nq)[:, None] + (nk - nq)
        s = np.where(mask, -np.inf, s)
    s = np.exp(s - s.max(-1, keepdims=True))
    return np.einsum("bhij,bhjc->bhic", s / s.sum(-1, keepdims=True), v)


@pytest.mark.parametrize("causal", [False, True])
def test_attention_and_mssa(ctx, rng, causal):
    q, k, v = (rng.standard_normal((2, 3, 11, 16)) for _ in range(3))
    got = ctx.attention(q, k, v, causal=causal)
    assert np.abs(got - _softmax_attention(q, k, v, 0.25, causal)).max() < 2e-5
    got = ctx.attention(q[:, :, :1], k, v, causal=causal)  # one query: the decode path
    assert np.abs(got - _softmax_attention(q[:, :, :1], k, v, 0.25, causal)).max() < 2e-5
    got = ctx.mssa(q, causal=causal)
    assert np.abs(got - _softmax_attention(q, q, q, 0.25, causal)).max() < 2e-5 * np.abs(q).max()


def _tssa(w, temp):
    nrm = np.maximum(np.sqrt((w ** 2).sum(2, keepdims=True)), 1e-12)          # (B, K, 1, p)
    logit = temp[None, :, None] * ((w / nrm) ** 2).sum(-1)                   # (B, K, N)
    e = np.exp(logit - logit.max(1, keepdims=True))
    pi = e / e.sum(1, keepdims=True)
    s = pi.sum(-1, keepdims=True) + 1e-8
    dots = np.einsum("bhn,bhnc->bhc", pi / s, w ** 2)
    return -w * pi[..., None] / (1 + dots[:, :, None, :])


def _tssa_causal(w, temp, db):
    S = np.cumsum(w ** 2, axis=2)
    wn = w ** 2 / np.maximum(S, 1e-12) + db[None, :, :w.shape[2], None]
    logit = temp[None, :, None] * wn.sum(-1)
    e = np.exp(logit - logit.max(1, keepdims=True))
    pi = e / e.sum(1, keepdims=True)
    Q = np.cumsum(pi[..., None] * w ** 2, axis=2)
    P = np.cumsum(pi, axis=2)
    return -w * pi[..., None] / (1 + Q / (P[..., None] + 1e-8))


def test_tssa(ctx, rng):
    w = rng.standard_normal((2, 4, 37, 8))
    temp = rng.uniform(0.5, 2.0, 4)
    assert np.abs(ctx.tssa(w, temp) - _tssa(w, temp)).max() < 2e-5


def test_tssa_causal_and_state(ctx, rng):
    B, K, N, p = 2, 3, 20, 8
    w = rng.standard_normal((B, K, N, p))
    temp = rng.uniform(0.5, 2.0, K)
    db = rng.uniform(-0.1, 0.1, (K, 32))
    want = _tssa_causal(w, temp, db)
    assert np.abs(ctx.tssa_causal(w, temp, db) - want).max() < 2e-5
    st = ctx.tssa_state(B, K, p)  # a prefill of 12 tokens, then one token at a time
    parts = [ctx.tssa_causal(w[:, :, :12], temp, db, state=st)]
    for t in range(12, N):
        parts.append(ctx.tssa_causal(w[:, :, t:t + 1], temp, db, state=st))
    assert np.abs(np.concatenate(parts, axis=2) - want).max() < 2e-5
    st.reset()
    assert np.abs(ctx.tssa_causal(w[:, :, :5], temp, db, state=st) - want[:, :, :5]).max() < 2e-5
    with pytest.raises(wbcl.Error) as e:
        ctx.tssa_causal(w[:1], temp, db, state=st)  # a state for batch 2
    assert e.value.status == "WBCL_ERROR_SHAPE"
    with pytest.raises(TypeError):
        ctx.tssa_causal(w, temp, db, state="state")


def test_device_tensors_stay_on_device(ctx, rng):
    A = rng.standard_normal((6, 5))
    t = ctx.gemm(A, A.T, keep=True)
    assert isinstance(t, wbcl.Tensor)
    assert np.abs(ctx.gemm(t, A) - (A @ A.T) @ A).max() < 1e-4


def test_xca(ctx, rng):
    q, k, v = (rng.standard_normal((2, 3, 17, 8)) for _ in range(3))
    temp = rng.uniform(0.5, 2.0, 3)
    qh = q / np.maximum(np.linalg.norm(q, axis=2, keepdims=True), 1e-12)
    kh = k / np.maximum(np.linalg.norm(k, axis=2, keepdims=True), 1e-12)
    A = np.einsum("bhnc,bhne->bhce", qh, kh) * temp[None, :, None, None]       # (B, K, p, p)
    A = np.exp(A - A.max(-1, keepdims=True))
    A /= A.sum(-1, keepdims=True)
    want = np.einsum("bhce,bhne->bhnc", A, v)                                    # o = A v per token
    assert np.abs(ctx.xca(q, k, v, temp) - want).max() < 2e-5


@pytest.mark.parametrize("threshold", ["relu", "soft"])
def test_ista(ctx, rng, threshold):
    x = rng.standard_normal((5, 12))
    W = 0.3 * rng.standard_normal((12, 12))
    v = x - 0.1 * (x @ W.T - x) @ W
    t = 0.1 * 0.1
    want = np.maximum(v - t, 0) if threshold == "relu" else np.sign(v) * np.maximum(np.abs(v) - t, 0)
    assert np.abs(ctx.ista(x, W, threshold=threshold) - want).max() < 2e-5
    with pytest.raises(wbcl.Error):
        ctx.ista(x, W, threshold="hard")


def test_measures(ctx, rng):
    B, N, d, K, p, eps2 = 2, 30, 8, 2, 4, 0.1
    Z = rng.standard_normal((B, N, d))
    U = np.linalg.qr(rng.standard_normal((d, K * p)))[0]
    def logdet(M):
        return np.linalg.slogdet(M)[1]
    R = np.array([0.5 * logdet(np.eye(d) + d / (N * eps2) * z.T @ z) for z in Z])
    Rc = np.array([sum(0.5 * logdet(np.eye(p) + p / (N * eps2) * (z @ U[:, j * p:(j + 1) * p]).T
                                    @ (z @ U[:, j * p:(j + 1) * p])) for j in range(K)) for z in Z])
    assert np.allclose(ctx.coding_rate(Z, eps2), R, rtol=1e-5)
    dR, R2, Rc2 = ctx.rate_reduction(Z, U, K, eps2)
    assert np.allclose(R2, R, rtol=1e-5) and np.allclose(Rc2, Rc, rtol=1e-5) and np.allclose(dR, R - Rc, atol=1e-4)
    dRt, _, _ = ctx.rate_reduction(Z, U.T, K, eps2, transposed=True)
    assert np.allclose(dRt, dR, atol=1e-5)
    assert ctx.sparsity(Z[0], 0.5) == pytest.approx((np.abs(Z[0]) > 0.5).mean())


@pytest.mark.parametrize("tau", [None, 0.6])
def test_aot(ctx, rng, tau):
    w = rng.standard_normal((2, 2, 9, 4))
    s = np.einsum("bhic,bhjc->bhij", w, w)
    a = np.exp(s - s.max(-1, keepdims=True))
    a /= a.sum(-1, keepdims=True)  # row softmax (tokens as rows)
    if tau is not None:
        a = np.where(a > tau, tau, 0.0)
    assert np.abs(ctx.aot(w, tau=tau) - np.einsum("bhij,bhjc->bhic", a, w)).max() < 2e-5 * np.abs(w).max() * 9


@pytest.mark.parametrize("rho", ["exp", "log"])
def test_energy(ctx, rng, rho):
    y = 0.5 * rng.standard_normal((1, 2, 10, 4))
    v = rng.standard_normal((1, 2, 10, 3))
    d2 = 0.5 * ((y[:, :, :, None, :] - y[:, :, None, :, :]) ** 2).sum(-1)    # ½‖y_u − y_v‖²
    g = np.exp(-d2) if rho == "exp" else 1.0 / (d2 + 0.7)
    want = 0.4 * v + 0.6 * np.einsum("bhuv,bhvc->bhuc", g, v) / g.sum(-1)[..., None]
    assert np.abs(ctx.energy(y, v, rho=rho, c=0.7, alpha=0.6) - want).max() < 2e-5

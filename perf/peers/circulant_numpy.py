#!/usr/bin/env python3
"""NumPy peer of wbcl's shift-invariant ReduNet, written from SPEC.md §4.2: per sample normalization,
unitary real FFT over the last axis (1-D) or the last two axes (2-D), keeping only the half spectrum
(rfft / rfftn, bin weights 1 or 2), per-frequency Gram matrices by einsum, E_p and C_{j,p} by batched
np.linalg.inv of (K+1) x P complex C x C matrices (as the reference code inverts), the application by
batched matmul, the objective by batched slogdet. Vectorized the way one writes it in NumPy.

Usage (perf/run_circulant.sh calls it, interleaved with bench_circulant):
  circulant_numpy.py --x X.npy --y y.npy --layers L [--reps R] [--eta .5 --eps2 .1 --lambda 500]
                     [--dtype float32|float64]
Prints one line per repetition: "numpy <seconds per layer> <final dR>" (after one untimed 1-layer warm-up).
"""
import argparse
import time

import numpy as np


def weights(shape):
    """Full-spectrum weight of each stored rfft bin: 1 for the zero and Nyquist columns, else 2."""
    W = shape[-1]
    q = np.arange(W // 2 + 1)
    w = np.where((q == 0) | (2 * q == W), 1.0, 2.0)
    return np.broadcast_to(w, (shape[0], W // 2 + 1) if len(shape) == 2 else (W // 2 + 1,)).reshape(-1)


def enter(Z, two_d):
    m, C = Z.shape[:2]
    N = int(np.prod(Z.shape[2:]))
    Z = Z / np.maximum(np.linalg.norm(Z.reshape(m, -1), axis=1), 1e-8)[:, None, None] if not two_d else \
        Z / np.maximum(np.linalg.norm(Z.reshape(m, -1), axis=1), 1e-8)[:, None, None, None]
    V = np.fft.rfftn(Z, axes=(2, 3), norm="ortho") if two_d else np.fft.rfft(Z, axis=2, norm="ortho")
    return V.reshape(m, C, -1), N          # (m, C, P)


def grams(V, groups):
    """S (G, P, C, C): per group, sum_b v_b(p) v_b(p)^H."""
    return np.stack([np.einsum("bcp,bdp->pcd", V[idx], V[idx].conj()) for idx in groups])


def construct(V, y, K, eps2):
    m, C, P = V.shape
    groups = [np.flatnonzero(y == j) for j in range(K)] + [np.arange(m)]
    rt = V.real.dtype
    alpha = np.array([C / (len(g) * eps2) for g in groups], dtype=rt)
    S = grams(V, groups)
    I = np.eye(C, dtype=rt)
    ops = alpha[:, None, None, None] * np.linalg.inv(I + alpha[:, None, None, None] * S)   # (K+1, P, C, C)
    gamma = np.array([len(g) / m for g in groups[:K]], dtype=rt)
    return ops, gamma


def apply(V, ops, gamma, w, eta, lam):
    K = len(gamma)
    Vp = V.transpose(2, 1, 0)                         # (P, C, m)
    # M^H v for every operator and frequency: (K+1, P, C, m)
    out = np.matmul(ops.conj().transpose(0, 1, 3, 2), Vp[None])
    c, e = out[:K], out[K]
    n = np.sqrt(np.einsum("p,jpcb->jb", w, np.abs(c) ** 2))
    n = np.maximum(n, 1e-8)
    u = -np.asarray(lam, dtype=n.dtype) * n
    u = u - u.max(axis=0)
    pi = np.exp(u)
    pi /= pi.sum(axis=0)                              # (K, m)
    g = e - np.einsum("j,jb,jpcb->pcb", gamma, pi, c)
    Vp = Vp + eta * g
    nrm = np.sqrt(np.einsum("p,pcb->b", w, np.abs(Vp) ** 2))
    Vp = Vp / np.maximum(nrm, 1e-8)
    return Vp.transpose(2, 1, 0).copy(), pi.argmax(axis=0)


def objective(V, labels, K, eps2, w, N):
    m, C, P = V.shape
    groups = [np.flatnonzero(labels == j) for j in range(K)]
    I = np.eye(C, dtype=V.real.dtype)
    S = grams(V, [np.arange(m)])[0]
    R = (w * np.linalg.slogdet(I + C / (m * eps2) * S)[1]).sum() / (2 * N)
    Rc = 0.0
    for g in groups:
        if len(g) == 0:
            continue
        Sj = grams(V, [g])[0]
        Rc += len(g) / m * (w * np.linalg.slogdet(I + C / (len(g) * eps2) * Sj)[1]).sum() / (2 * N)
    return R - Rc, R, Rc


def fit(X, y, layers, eta, eps2, lam, dtype=np.float32):
    two_d = X.ndim == 4
    K = int(y.max()) + 1
    V, N = enter(X.astype(dtype), two_d)
    w = weights(X.shape[2:]).astype(dtype)
    hist = []
    for _ in range(layers):
        ops, gamma = construct(V, y, K, eps2)
        V, yhat = apply(V, ops, gamma, w, eta, lam)
        hist.append(objective(V, yhat, K, eps2, w, N))
    return hist


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--x", required=True)
    ap.add_argument("--y", required=True)
    ap.add_argument("--layers", type=int, default=5)
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--eta", type=float, default=0.5)
    ap.add_argument("--eps2", type=float, default=0.1)
    ap.add_argument("--lambda", dest="lam", type=float, default=500.0)
    ap.add_argument("--dtype", choices=["float32", "float64"], default="float32",
                    help="float32 (complex64, the engine's precision; default) or float64")
    a = ap.parse_args()
    dt = np.float32 if a.dtype == "float32" else np.float64
    X = np.load(a.x)
    y = np.load(a.y).astype(np.int64)
    fit(X, y, 1, a.eta, a.eps2, a.lam, dt)
    for _ in range(a.reps):
        t0 = time.perf_counter()
        h = fit(X, y, a.layers, a.eta, a.eps2, a.lam, dt)
        t = time.perf_counter() - t0
        print(f"numpy {t / a.layers:.6f} {h[-1][0]:.6f}", flush=True)


if __name__ == "__main__":
    main()

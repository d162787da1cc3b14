#!/usr/bin/env python3
"""NumPy peer of wbcl's vector ReduNet, written from SPEC.md §4.1 (the
conventions of the Ma-Lab-Berkeley/ReduNet reference code), vectorized over
the rows the way one would write it in NumPy: Gram matrices and the
application as matrix products (OpenBLAS), np.linalg.inv for E and C_j as
the reference code does, log-determinants through Cholesky.

Usage (perf/run_redunet.sh calls it, interleaved with bench_redunet):
  redunet_numpy.py --x X.npy --y y.npy --layers L [--reps R] [--dtype float32|float64]
                   [--eta .5 --eps2 .1 --lambda 500]
Prints one line per repetition: "numpy <seconds for L layers> <final dR>"
(after one untimed warm-up of min(L, 2) layers).
"""
import argparse
import sys
import time

import numpy as np


def construct(Z, groups, eps2):
    """E = a (I + a Z^T Z)^-1, C_j = a_j (I + a_j Z_j^T Z_j)^-1, gamma_j = m_j / m."""
    m, d = Z.shape
    I = np.eye(d, dtype=Z.dtype)
    a = d / (m * eps2)
    E = a * np.linalg.inv(I + a * (Z.T @ Z))
    C = np.empty((len(groups), d, d), dtype=Z.dtype)
    gamma = np.empty(len(groups), dtype=Z.dtype)
    for j, idx in enumerate(groups):
        Zj = Z[idx]
        aj = d / (len(idx) * eps2)
        C[j] = aj * np.linalg.inv(I + aj * (Zj.T @ Zj))
        gamma[j] = len(idx) / m
    return E, C, gamma


def apply(Z, E, C, gamma, eta, lam):
    """z <- normalize(z + eta (E z - sum_j gamma_j pi_j C_j z)), pi = softmax(-lam |C_j z|)."""
    e = Z @ E.T                                   # (m, d): rows E z
    c = np.matmul(Z[None, :, :], C.transpose(0, 2, 1))  # (K, m, d): rows C_j z
    n = np.maximum(np.sqrt(np.einsum("kmd,kmd->km", c, c)), 1e-8)
    u = -lam * n
    u -= u.max(axis=0, keepdims=True)
    p = np.exp(u)
    p /= p.sum(axis=0, keepdims=True)
    yhat = p.argmax(axis=0)
    g = e - np.einsum("km,kmd->md", gamma[:, None] * p, c)
    Z = Z + eta * g
    Z /= np.maximum(np.linalg.norm(Z, axis=1, keepdims=True), 1e-8)
    return Z, yhat


def logdet_shifted(G, alpha):
    d = G.shape[0]
    L = np.linalg.cholesky(np.eye(d, dtype=G.dtype) + alpha * G)
    return 2.0 * np.log(np.diagonal(L)).sum()


def objective(Z, yhat, K, eps2):
    m, d = Z.shape
    R = 0.5 * logdet_shifted(Z.T @ Z, d / (m * eps2))
    Rc = 0.0
    for j in range(K):
        Zj = Z[yhat == j]
        if len(Zj) == 0:
            continue
        Rc += len(Zj) / m * 0.5 * logdet_shifted(Zj.T @ Zj, d / (len(Zj) * eps2))
    return R - Rc, R, Rc


def fit(X, y, K, layers, eta, eps2, lam):
    Z = X / np.maximum(np.linalg.norm(X, axis=1, keepdims=True), 1e-8)
    groups = [np.flatnonzero(y == j) for j in range(K)]
    hist = []
    for _ in range(layers):
        E, C, gamma = construct(Z, groups, eps2)
        Z, yhat = apply(Z, E, C, gamma, eta, lam)
        hist.append(objective(Z, yhat, K, eps2))
    return Z, hist


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--x", required=True)
    ap.add_argument("--y", required=True)
    ap.add_argument("--layers", type=int, required=True)
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    ap.add_argument("--eta", type=float, default=0.5)
    ap.add_argument("--eps2", type=float, default=0.1)
    ap.add_argument("--lambda", dest="lam", type=float, default=500.0)
    a = ap.parse_args()
    X = np.load(a.x).astype(a.dtype)
    y = np.load(a.y).astype(np.int64)
    K = int(y.max()) + 1
    fit(X, y, K, min(a.layers, 2), a.eta, a.eps2, a.lam)  # warm-up
    for _ in range(a.reps):
        t0 = time.perf_counter()
        _, hist = fit(X, y, K, a.layers, a.eta, a.eps2, a.lam)
        t = time.perf_counter() - t0
        print(f"numpy {t:.6f} {hist[-1][0]:.7f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

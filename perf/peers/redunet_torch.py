#!/usr/bin/env python3
"""PyTorch peer of wbcl's vector ReduNet (issue 16), the same algorithm as redunet_numpy.py (SPEC.md §4.1,
the conventions of the Ma-Lab-Berkeley/ReduNet reference code), written the way one writes it in PyTorch
for a GPU: the features stay on the device; the per-class Gram matrices from one sort of the rows by label
and torch.split (one host read of the class counts per grouping); E and all C_j as one batched
torch.linalg.inv of the (K+1) d x d matrices (as the NumPy peer and the reference code invert;
--inverse cholesky uses torch.linalg.cholesky + torch.cholesky_inverse instead); the application as one
batched matmul against all K+1 operators, softmax over the classes, einsum; the objective's
log-determinants by one batched Cholesky.

float32 by default with TF32 off (torch.backends.cuda.matmul.allow_tf32 = False, cudnn too), so the
products are true float32 as wbcl's. The clock is read after torch.cuda.synchronize().

Usage (perf/run_redunet.sh calls it when TORCH_PEER is set, interleaved with bench_redunet):
  redunet_torch.py --x X.npy --y y.npy --layers L [--reps R] [--dtype float32|float64]
                   [--device cpu|cuda] [--threads N] [--inverse inv|cholesky]
                   [--eta .5 --eps2 .1 --lambda 500]
Prints one line per repetition: "torch <seconds for L layers> <final dR>" (the format of the NumPy
peer's "numpy ..." line), after one untimed warm-up of min(L, 2) layers.
"""
import argparse
import sys
import time

import numpy as np
import torch


def sync(dev):
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def group_rows(Z, labels, K):
    """The rows of Z per class, by one stable sort and a split (one host read: the counts)."""
    counts = torch.bincount(labels, minlength=K)
    order = torch.argsort(labels, stable=True)
    return torch.split(Z[order], counts.tolist()), counts


def grams(Z, labels, K):
    """(K+1, d, d): Z_j^T Z_j for j < K, then Z^T Z; and the class counts (K,) on the device."""
    parts, counts = group_rows(Z, labels, K)
    return torch.stack([Zj.T @ Zj for Zj in parts] + [Z.T @ Z]), counts


def spd_inverse(A, how):
    if how == "cholesky":
        return torch.cholesky_inverse(torch.linalg.cholesky(A))
    return torch.linalg.inv(A)


def construct(Z, y, K, eps2, how):
    """ops (K+1, d, d) = [C_0 .. C_{K-1}, E], gamma (K,)."""
    m, d = Z.shape
    S, counts = grams(Z, y, K)
    cnt = torch.cat([counts, counts.new_tensor([m])]).to(Z.dtype)
    alpha = d / (cnt * eps2)                                   # an empty class is an error (inf)
    I = torch.eye(d, dtype=Z.dtype, device=Z.device)
    ops = alpha[:, None, None] * spd_inverse(I + alpha[:, None, None] * S, how)
    return ops, counts.to(Z.dtype) / m


def apply(Z, ops, gamma, eta, lam):
    """z <- normalize(z + eta (E z - sum_j gamma_j pi_j C_j z)), pi = softmax(-lam |C_j z|)."""
    K = gamma.shape[0]
    out = torch.matmul(Z, ops.transpose(1, 2))                 # (K+1, m, d): rows C_j z, then E z
    c, e = out[:K], out[K]
    n = torch.linalg.vector_norm(c, dim=2).clamp_min(1e-8)     # (K, m)
    p = torch.softmax(-lam * n, dim=0)
    yhat = torch.argmax(p, dim=0)                              # first maximum: ties -> lowest j
    g = e - torch.einsum("k,km,kmd->md", gamma, p, c)
    Z = Z + eta * g
    return Z / torch.linalg.vector_norm(Z, dim=1, keepdim=True).clamp_min(1e-8), yhat


def objective(Z, yhat, K, eps2):
    """(dR, R, Rc) on the layer's output grouped by its predictions; empty groups count zero."""
    m, d = Z.shape
    S, counts = grams(Z, yhat, K)
    cnt = torch.cat([counts, counts.new_tensor([m])]).to(Z.dtype)
    alpha = d / (cnt.clamp_min(1) * eps2)
    I = torch.eye(d, dtype=Z.dtype, device=Z.device)
    L = torch.linalg.cholesky(I + alpha[:, None, None] * S)
    half_logdet = torch.log(torch.diagonal(L, dim1=1, dim2=2)).sum(dim=1)   # = 1/2 logdet
    R = half_logdet[K]
    Rc = (cnt[:K] / m * half_logdet[:K]).sum()
    return torch.stack([R - Rc, R, Rc])


def fit(X, y, K, layers, eta, eps2, lam, how):
    Z = X / torch.linalg.vector_norm(X, dim=1, keepdim=True).clamp_min(1e-8)
    hist = []
    for _ in range(layers):
        ops, gamma = construct(Z, y, K, eps2, how)
        Z, yhat = apply(Z, ops, gamma, eta, lam)
        hist.append(objective(Z, yhat, K, eps2))
    return Z, torch.stack(hist)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--x", required=True)
    ap.add_argument("--y", required=True)
    ap.add_argument("--layers", type=int, required=True)
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (0: torch's default)")
    ap.add_argument("--inverse", default="inv", choices=["inv", "cholesky"],
                    help="inv: torch.linalg.inv as the NumPy peer (default); cholesky: cholesky_inverse")
    ap.add_argument("--eta", type=float, default=0.5)
    ap.add_argument("--eps2", type=float, default=0.1)
    ap.add_argument("--lambda", dest="lam", type=float, default=500.0)
    a = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    dev = torch.device(a.device)
    dt = getattr(torch, a.dtype)
    X = torch.from_numpy(np.load(a.x).astype(a.dtype)).to(dev)
    y = torch.from_numpy(np.load(a.y).astype(np.int64)).to(dev)
    K = int(y.max()) + 1
    assert X.dtype == dt
    with torch.inference_mode():
        fit(X, y, K, min(a.layers, 2), a.eta, a.eps2, a.lam, a.inverse)  # warm-up
        sync(dev)
        for _ in range(a.reps):
            sync(dev)
            t0 = time.perf_counter()
            _, hist = fit(X, y, K, a.layers, a.eta, a.eps2, a.lam, a.inverse)
            sync(dev)
            t = time.perf_counter() - t0
            print(f"torch {t:.6f} {hist[-1, 0].item():.7f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

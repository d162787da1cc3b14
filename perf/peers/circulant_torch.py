#!/usr/bin/env python3
"""PyTorch peer of wbcl's shift-invariant ReduNet (issue 16), the same algorithm as circulant_numpy.py
(SPEC.md §4.2), written the way one writes it in PyTorch for a GPU: per sample normalization, unitary real
FFT over the last axis (1-D, torch.fft.rfft) or the last two axes (2-D, torch.fft.rfftn), keeping only the
half spectrum (bin weights 1 or 2); per-frequency Gram matrices by einsum over the rows of each class (one
sort of the rows by label and torch.split: one host read of the class counts per grouping); E_p and
C_{j,p} by one batched torch.linalg.inv of the (K+1) x P complex C x C matrices (as the NumPy peer and the
reference code invert; --inverse cholesky: torch.linalg.cholesky + torch.cholesky_inverse); the
application by one batched matmul against all K+1 operators; the objective by one batched
torch.linalg.slogdet.

complex64 (float32) by default with TF32 off (torch.backends.cuda.matmul.allow_tf32 = False, cudnn too).
The clock is read after torch.cuda.synchronize().

Usage (perf/run_circulant.sh calls it when TORCH_PEER is set, interleaved with bench_circulant):
  circulant_torch.py --x X.npy --y y.npy --layers L [--reps R] [--dtype float32|float64]
                     [--device cpu|cuda] [--threads N] [--inverse inv|cholesky]
                     [--eta .5 --eps2 .1 --lambda 500]
Prints one line per repetition: "torch <seconds per layer> <final dR>" (the format of the NumPy peer's
"numpy ..." line), after one untimed 1-layer warm-up.
"""
import argparse
import time

import numpy as np
import torch


def sync(dev):
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def weights(shape, dtype, device):
    """Full-spectrum weight of each stored rfft bin: 1 for the zero and Nyquist columns, else 2."""
    W = shape[-1]
    q = torch.arange(W // 2 + 1, device=device)
    w = torch.where((q == 0) | (2 * q == W), 1.0, 2.0).to(dtype)
    return w.expand(shape[0], W // 2 + 1).reshape(-1) if len(shape) == 2 else w


def enter(Z, two_d):
    m, C = Z.shape[:2]
    N = int(np.prod(Z.shape[2:]))
    nrm = torch.linalg.vector_norm(Z.reshape(m, -1), dim=1).clamp_min(1e-8)
    Z = Z / nrm.reshape((m,) + (1,) * (Z.ndim - 1))
    V = torch.fft.rfftn(Z, dim=(2, 3), norm="ortho") if two_d else torch.fft.rfft(Z, dim=2, norm="ortho")
    return V.reshape(m, C, -1), N                                  # (m, C, P)


def grams(V, labels, K):
    """S (K+1, P, C, C): per class sum_b v_b(p) v_b(p)^H, then over all rows; and the counts (K,)."""
    counts = torch.bincount(labels, minlength=K)
    order = torch.argsort(labels, stable=True)
    parts = torch.split(V[order], counts.tolist())
    S = [torch.einsum("bcp,bdp->pcd", Vj, Vj.conj()) for Vj in parts]
    S.append(torch.einsum("bcp,bdp->pcd", V, V.conj()))
    return torch.stack(S), counts


def spd_inverse(A, how):
    if how == "cholesky":
        return torch.cholesky_inverse(torch.linalg.cholesky(A))
    return torch.linalg.inv(A)


def construct(V, y, K, eps2, how):
    """ops (K+1, P, C, C) = [C_0p .. C_{K-1}p, E_p], gamma (K,)."""
    m, C, P = V.shape
    rt = V.real.dtype
    S, counts = grams(V, y, K)
    cnt = torch.cat([counts, counts.new_tensor([m])]).to(rt)
    alpha = (C / (cnt * eps2))[:, None, None, None]                # an empty class is an error (inf)
    I = torch.eye(C, dtype=V.dtype, device=V.device)
    ops = alpha * spd_inverse(I + alpha * S, how)
    return ops, counts.to(rt) / m


def apply(V, ops, gamma, w, eta, lam):
    K = gamma.shape[0]
    Vp = V.permute(2, 1, 0)                                        # (P, C, m)
    out = torch.matmul(ops.conj().transpose(-2, -1), Vp)           # M^H v: (K+1, P, C, m)
    c, e = out[:K], out[K]
    n = torch.sqrt(torch.einsum("p,jpcb->jb", w, c.real.square() + c.imag.square())).clamp_min(1e-8)
    pi = torch.softmax(-lam * n, dim=0)                            # (K, m)
    coef = (gamma[:, None] * pi).to(c.dtype)
    g = e - torch.einsum("jb,jpcb->pcb", coef, c)
    Vp = Vp + eta * g
    nrm = torch.sqrt(torch.einsum("p,pcb->b", w, Vp.real.square() + Vp.imag.square())).clamp_min(1e-8)
    Vp = Vp / nrm
    return Vp.permute(2, 1, 0).contiguous(), torch.argmax(pi, dim=0)


def objective(V, labels, K, eps2, w, N):
    """(dR, R, Rc) grouped by the predictions; empty groups count zero."""
    m, C, P = V.shape
    S, counts = grams(V, labels, K)
    cnt = torch.cat([counts, counts.new_tensor([m])]).to(V.real.dtype)
    alpha = (C / (cnt.clamp_min(1) * eps2))[:, None, None, None]
    I = torch.eye(C, dtype=V.dtype, device=V.device)
    ld = (torch.linalg.slogdet(I + alpha * S)[1] * w).sum(dim=1) / (2 * N)   # (K+1,)
    R = ld[K]
    Rc = (cnt[:K] / m * ld[:K]).sum()
    return torch.stack([R - Rc, R, Rc])


def fit(X, y, layers, eta, eps2, lam, how):
    two_d = X.ndim == 4
    K = int(y.max()) + 1
    V, N = enter(X, two_d)
    w = weights(X.shape[2:], X.dtype, X.device)
    hist = []
    for _ in range(layers):
        ops, gamma = construct(V, y, K, eps2, how)
        V, yhat = apply(V, ops, gamma, w, eta, lam)
        hist.append(objective(V, yhat, K, eps2, w, N))
    return torch.stack(hist)


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
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (0: torch's default)")
    ap.add_argument("--inverse", default="inv", choices=["inv", "cholesky"],
                    help="inv: torch.linalg.inv as the NumPy peer (default); cholesky: cholesky_inverse")
    a = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    dev = torch.device(a.device)
    X = torch.from_numpy(np.load(a.x).astype(a.dtype)).to(dev)
    y = torch.from_numpy(np.load(a.y).astype(np.int64)).to(dev)
    with torch.inference_mode():
        fit(X, y, 1, a.eta, a.eps2, a.lam, a.inverse)             # warm-up
        for _ in range(a.reps):
            sync(dev)
            t0 = time.perf_counter()
            h = fit(X, y, a.layers, a.eta, a.eps2, a.lam, a.inverse)
            sync(dev)
            t = time.perf_counter() - t0
            print(f"torch {t / a.layers:.6f} {h[-1, 0].item():.6f}", flush=True)


if __name__ == "__main__":
    main()

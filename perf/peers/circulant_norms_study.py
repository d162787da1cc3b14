#!/usr/bin/env python3
"""Numerical study (issue 6): the class norms n_j = ||C_{j,p} v(p)|| summed over the spectrum, computed
(a) as float32 matrix-vector products with the float32 operators (wbcl's circ_norms before the quadratic
forms), and (b) as float32 quadratic forms v^H M v with M = C^H C formed in float32 (wbcl's circ_op_square +
circ_norms_q: a third of the multiply-adds), against (c) the same quantity in float64 from the same float32
operators (layer 1 of the NumPy peer's construction). NumPy's summation orders are not the device's, so
this shows the size of the effects, not the device's exact errors (tests/test_circulant.c
device_norms_cancellation checks the device). Reports max |dn| and max
lambda |dn| (the softmax exponent error) over samples and classes, and the same for the own class
(the smallest n, where the cancellation of (b) is largest).
Usage: circulant_norms_study.py X.npy y.npy [lambda [eps2]]
  (the bench data: bench_circulant --write-data DIR; defaults lambda 500, eps2 0.1)"""
import sys
import numpy as np
import os
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from circulant_numpy import enter, construct, weights  # noqa: E402

X = np.load(sys.argv[1]); y = np.load(sys.argv[2]).astype(np.int64)
lam = float(sys.argv[3]) if len(sys.argv) > 3 else 500.0
two_d = X.ndim == 4
K = int(y.max()) + 1
V, N = enter(X.astype(np.float32), two_d)            # (m, C, P) complex64
w = weights(X.shape[2:]).astype(np.float64)
ops, gamma = construct(V, y, K, float(sys.argv[4]) if len(sys.argv) > 4 else 0.1)                  # complex64 (K+1, P, C, C)
C32 = ops[:K]
Vp = V.transpose(2, 1, 0)                              # (P, C, m)
# (c) reference: float64 products with the float32 operators
c64 = np.matmul(C32.astype(np.complex128).conj().transpose(0, 1, 3, 2), Vp.astype(np.complex128)[None])
n_ref = np.sqrt(np.einsum("p,jpcb->jb", w, np.abs(c64) ** 2))
# (a) direct float32
c32 = np.matmul(C32.conj().transpose(0, 1, 3, 2), Vp[None])
n_a = np.sqrt(np.einsum("p,jpcb->jb", w.astype(np.float32), (np.abs(c32) ** 2).astype(np.float32)))
# (b) float32 quadratic form, M = C^H C in float32 (C Hermitian: M = C^2)
M = np.matmul(C32.conj().transpose(0, 1, 3, 2), C32)                      # complex64
q = np.einsum("jpcd,pdb,pcb->jpb", M, Vp, Vp.conj()).real.astype(np.float32)  # v^H M v per bin
n_b = np.sqrt(np.maximum(np.einsum("p,jpb->jb", w.astype(np.float32), q), 0.0))
own = (np.arange(K)[:, None] == y[None, :])
for name, n in (("direct fp32", n_a), ("quadratic fp32", n_b)):
    d = np.abs(n.astype(np.float64) - n_ref)
    print(f"{name:15s} max|dn| {d.max():.3e}  max lambda|dn| {lam * d.max():.3e}  own class: max|dn| {d[own].max():.3e} "
          f"(n {n_ref[own].min():.3g}..{n_ref[own].max():.3g})  other classes: max|dn| {d[~own].max():.3e} "
          f"(n {n_ref[~own].min():.3g}..{n_ref[~own].max():.3g})")

#!/usr/bin/env python3
"""PyTorch CUDA peer of wbcl_cholesky and wbcl_spd_inverse (perf/bench_linalg.c): torch.linalg.cholesky
(cuSOLVER potrf; batched potrf for batches of small matrices) in float32 on the shapes bench_linalg
takes on a GPU machine: one 4096 x 4096 matrix, 1024 matrices of 64 x 64, ReduNet's d = 784 (one
matrix, and the layer's 11 of them), and for --inverse the SPD inverse of ReduNet's layer
(torch.cholesky_inverse(torch.linalg.cholesky(A)), potrf + potri, n^3 flops per matrix, as
bench_linalg's (3) counts it). TF32 off (it does not touch these calls; set for the record).
Matrices: A = G G^T / n + I, G standard normal (as bench_linalg's make_spd, well conditioned).
For each shape: R calls queued back to back between CUDA events, the median of 5 such batches
after a warm-up; GFLOP/s counts batch n^3 / 3 (Cholesky) or batch n^3 (inverse).

  python3 perf/peers/linalg_torch_cuda.py --shapes "1,4096;1024,64;1,784;11,784" --inverse "11,784" --reps 20
"""
import argparse
import statistics

import torch


def timed(fn, reps, batches=5):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    out = []
    for _ in range(batches):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(reps):
            fn()
        b.record()
        torch.cuda.synchronize()
        out.append(a.elapsed_time(b) / reps)
    return statistics.median(out)


def spd(batch, n, dev, g):
    G = torch.randn(batch, n, n, device=dev, generator=g)
    return G @ G.transpose(-1, -2) / n + torch.eye(n, device=dev)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shapes", default="1,4096;1024,64;1,784;11,784", help="batch,n;... for the Cholesky")
    ap.add_argument("--inverse", default="11,784", help="batch,n;... for the SPD inverse ('' for none)")
    ap.add_argument("--reps", type=int, default=20)
    a = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dev = torch.device("cuda")
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name(0)}, float32, TF32 off")
    print(f"{'op':10s} {'shape':14s} {'ms':>9s} {'GFLOP/s':>9s} {'max |LL^T-A|/|A|':>18s}")
    g = torch.Generator(device=dev).manual_seed(1)
    for s in a.shapes.split(";"):
        batch, n = (int(v) for v in s.split(","))
        A = spd(batch, n, dev, g)
        with torch.no_grad():
            t = timed(lambda: torch.linalg.cholesky(A), a.reps)
            L = torch.linalg.cholesky(A)
            res = ((L @ L.transpose(-1, -2) - A).flatten(1).norm(dim=1) / A.flatten(1).norm(dim=1)).max().item()
        fl = batch * n ** 3 / 3.0
        print(f"{'cholesky':10s} {'%dx%d^2' % (batch, n):14s} {t:9.4f} {fl / t * 1e-6:9.1f} {res:18.2e}", flush=True)
    for s in [x for x in a.inverse.split(";") if x]:
        batch, n = (int(v) for v in s.split(","))
        A = spd(batch, n, dev, g)
        with torch.no_grad():
            t = timed(lambda: torch.cholesky_inverse(torch.linalg.cholesky(A)), a.reps)
        fl = float(batch) * n ** 3
        print(f"{'spd_inv':10s} {'%dx%d^2' % (batch, n):14s} {t:9.4f} {fl / t * 1e-6:9.1f} {'':>18s}", flush=True)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""SGEMM C = A B (square n^3, or M x K times K x N written MxKxN), wbcl against PyTorch's matmul in the same process (issue 17's targets: this
machine's CPU >= 0.95x MKL at 1024^3 and 2048^3; H100/H200 >= 0.9x cuBLAS at 4096^3, >= 0.8x at 1024^3).
Calls alternate (wbcl, torch, wbcl, ...) so both see the same load; median of --reps per side;
float32 (TF32 off on CUDA); wbcl through its Python package with A, B and C already on the device
(C overwritten, beta = 0), so both sides time the multiplication alone (each call waits for its
device). wbcl's device: $WBCL_DEVICE (default device if unset); its parameter table: $WBCL_TUNING
or the device's own. --backends lists wbcl GEMM backends to measure (auto: the device's default;
packed, clblast, tiled); --param KEY=VALUE sets a kernel parameter first (repeatable):

    PYTHONPATH=python WBCL_BUILD_DIR=build /tmp/torchenv/bin/python perf/peers/gemm_matmul_paired.py \\
        [--sizes 1024,2048,12608x384x1536] [--reps 11] [--threads 2] [--torch-device cpu|cuda] [--backends auto,packed,tiled]
        [--param gemm.tiled.tk=16]
"""
import argparse
import os
import statistics
import time

# Both libraries run in this process, calls alternating. PyTorch's OpenMP (libgomp) threads keep spinning
# after a call (OMP_WAIT_POLICY unset: spin a while, then sleep) and take the cores from the wbcl call that
# follows: on the 2-core machine wbcl's 1024^3 GEMM ran 189 GFLOP/s beside ACTIVE, 218 beside the default
# and 281 beside PASSIVE, while torch's own matmul and SDPA times did not move (perf/RESULTS.md, sixth
# session). So idle threads sleep unless the caller sets the policy (before torch is imported). Not in
# models_torch.py: a forward is many short torch calls, and PASSIVE made those slower (ToST-T batch 1 at 2
# threads 20 -> 50 ms), which would flatter wbcl.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import numpy as np
import torch

import wbcl


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="1024,2048")
    ap.add_argument("--reps", type=int, default=11)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--torch-device", default="cpu")
    ap.add_argument("--backends", default="auto")
    ap.add_argument("--param", action="append", default=[],
                    help="KEY=VALUE, a kernel parameter set on the wbcl context (gemm.tiled.tk=16, ...)")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    dev = torch.device(a.torch_device)
    cuda = dev.type == "cuda"
    if cuda:
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    rng = np.random.default_rng(0)
    with wbcl.Context() as ctx, torch.inference_mode():
        for kv in a.param:
            key, _, value = kv.partition("=")
            ctx.set_param(key, int(value))
        print("wbcl device: %s (%s variant); torch %s on %s%s" % (
            ctx.device["name"], ctx.device["variant"], torch.__version__,
            torch.cuda.get_device_name(dev) if cuda else "cpu",
            "" if cuda else ", %d threads, OMP_WAIT_POLICY=%s" % (a.threads, os.environ["OMP_WAIT_POLICY"])))
        for size in a.sizes.split(","):
            dims = [int(x) for x in size.split("x")]
            if len(dims) == 1:
                dims *= 3
            if len(dims) != 3 or min(dims) < 1:
                ap.error("--sizes: %r is neither n nor MxKxN" % size)
            m, kk, n = dims
            label = "%5d^3" % m if m == kk == n else "%dx%dx%d" % (m, kk, n)
            A = rng.standard_normal((m, kk)).astype(np.float32)
            B = rng.standard_normal((kk, n)).astype(np.float32)
            tA, tB = torch.from_numpy(A).to(dev), torch.from_numpy(B).to(dev)
            tC = torch.empty((m, n), device=dev)
            dA, dB, dC = ctx.tensor(A), ctx.tensor(B), ctx.tensor(np.zeros((m, n), np.float32))
            ref = A.astype(np.float64) @ B.astype(np.float64)
            scale = np.abs(ref).max()

            def ft():
                torch.matmul(tA, tB, out=tC)
                sync()

            for backend in a.backends.split(","):
                ctx.gemm_backend = backend
                used = ctx.gemm_backend

                def fw():
                    ctx.gemm(dA, dB, C=dC, keep=True)
                    ctx.finish()

                fw()
                ft()
                ew = float(np.abs(dC.numpy() - ref).max() / scale)
                et = float(np.abs(tC.cpu().numpy() - ref).max() / scale)
                tw, tt = [], []
                for _ in range(a.reps):
                    t = time.perf_counter()
                    fw()
                    tw.append(time.perf_counter() - t)
                    t = time.perf_counter()
                    ft()
                    tt.append(time.perf_counter() - t)
                mw, mt = statistics.median(tw), statistics.median(tt)
                fl = 2.0 * m * kk * n
                print("%s  wbcl %-7s %9.3f ms (%8.1f GFLOP/s)  torch %9.3f ms (%8.1f GFLOP/s)  ratio %.2f  "
                      "rel err vs float64: wbcl %.1e torch %.1e" % (label, used, 1e3 * mw, fl / mw / 1e9, 1e3 * mt,
                                                                   fl / mt / 1e9, mt / mw, ew, et))
            ctx.gemm_backend = "auto"


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Energy-descent attention (wbcl_energy_heads, SPEC 1.7), wbcl against PyTorch in the same process, calls
alternating, on the CPU (or --torch-device cuda). PyTorch runs the GEMM form of
perf/peers/aot_energy_torch_cuda.py (z = 1/2 (|y_u|^2 + |y_v|^2) - y_u . y_v clamped at 0, the weights
materialized in chunks of --chunk rows); wbcl keeps the sum of squared differences. w : (B, K, N, p)
uniform in [-1, 1), float32, v = y = w, alpha 0.5, c 1 for rho = log. Median of --reps calls per side.

    PYTHONPATH=python WBCL_BUILD_DIR=build python3 perf/peers/energy_torch_paired.py \\
        [--shape "1,8,1024,64;1,8,4096,64"] [--reps 7] [--threads 2] [--chunk 1024]
"""
import argparse
import os
import sys

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # as attention_sdpa_paired.py: idle torch threads sleep

import numpy as np
import torch

import wbcl

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from aot_energy_torch_cuda import energy  # noqa: E402  (the same PyTorch form as the CUDA peer)
from paired import alternate  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", default="1,8,1024,64;1,8,4096,64")
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--chunk", type=int, default=1024)
    ap.add_argument("--torch-device", default="cpu")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    dev = torch.device(a.torch_device)
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    for shape in a.shape.split(";"):
        B, K, N, p = (int(x) for x in shape.split(","))
        w = np.random.default_rng(0).uniform(-1, 1, (B, K, N, p)).astype(np.float32)
        tw = torch.from_numpy(w).to(dev)
        with wbcl.Context() as ctx, torch.inference_mode():
            dw = ctx.tensor(w)
            for name, log in (("energy", False), ("energy_log", True)):
                def fw():
                    return ctx.energy(dw, rho="log" if log else "exp", c=1.0, alpha=0.5, keep=True)

                def ft():
                    r = energy(tw, a.chunk, log=log)
                    sync()
                    return r

                o = fw()
                ctx.finish()
                err = float(np.abs(o.numpy() - ft().cpu().numpy()).max())
                o.close()
                mw, mt = alternate(ctx, fw, ft, a.reps)
                print("%-10s B%d K%d N%d p%d  wbcl %9.2f ms  torch %9.2f ms  ratio %.2f  max|diff| %.1e  (%s)"
                      % (name, B, K, N, p, 1e3 * mw, 1e3 * mt, mt / mw, err, ctx.device["name"]))


if __name__ == "__main__":
    main()

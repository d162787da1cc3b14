#!/usr/bin/env python3
"""PyTorch CUDA peer of wbcl_aot_heads and wbcl_energy_heads (perf/bench_aot_energy.c, issue 16): the
per-head cores on w : (B, K, N, p) in float32, uniform in [-1, 1), TF32 off, the same ops and shapes.

  aot         AoT's softmax step (SPEC 1.3, book 5.3.2): softmax(w w^T) w, i.e. SDPA on q = k = v = w
              with scale=1.0 (torch.nn.functional.scaled_dot_product_attention picks its own kernel)
  aot_th      Theorem 5.1's thresholded softmax, tau 0.75: the N x N weights materialized in chunks of
              --chunk query rows (softmax, then tau where > tau, 0 elsewhere, then the product with w)
  energy      energy-descent step (SPEC 1.7), rho = -exp(-z), alpha 0.5, v = y = w: gamma = exp(-z) with
              z = 1/2 |y_u - y_w|^2 = 1/2 (|y_u|^2 + |y_w|^2 - 2 y_u . y_w) clamped at 0 (the GEMM form a
              PyTorch user writes; wbcl keeps the sum of squared differences), in chunks of --chunk rows;
              out = (1 - alpha) v + alpha (gamma v) / sum gamma
  energy_log  the same with rho = log(z + 1): gamma = 1 / (z + 1)

Per op and shape: the time per call (R calls queued back to back between CUDA events, median of 5 such
batches, after a warm-up), GFLOP/s counting 4 B K N^2 p (6 for aot_th), as bench_aot_energy does, and
"% peak" against --peak (GFLOP/s, e.g. 66900 for an H200 SXM's FP32 FMA peak).

  python3 perf/peers/aot_energy_torch_cuda.py --shapes "4,12,4096,64;1,8,1024,64" --reps 20 --peak 66900
"""
import argparse
import statistics

import torch
import torch.nn.functional as F

TAU, ALPHA, CC = 0.75, 0.5, 1.0


def aot(w, chunk):
    return F.scaled_dot_product_attention(w, w, w, scale=1.0)


def aot_th(w, chunk):
    out = torch.empty_like(w)
    N = w.shape[-2]
    for i in range(0, N, chunk):
        a = torch.softmax(w[..., i:i + chunk, :] @ w.transpose(-1, -2), dim=-1)
        a = torch.where(a > TAU, torch.full_like(a, TAU), torch.zeros_like(a))
        out[..., i:i + chunk, :] = a @ w
    return out


def energy(w, chunk, log=False):
    out = torch.empty_like(w)
    N = w.shape[-2]
    sq = (w * w).sum(-1)  # B, K, N
    for i in range(0, N, chunk):
        q = w[..., i:i + chunk, :]
        z = (0.5 * (sq[..., i:i + chunk, None] + sq[..., None, :]) - q @ w.transpose(-1, -2)).clamp_min_(0)
        g = 1.0 / (z + CC) if log else torch.exp(-z)
        out[..., i:i + chunk, :] = (1 - ALPHA) * q + ALPHA * (g @ w) / g.sum(-1, keepdim=True)
    return out


OPS = {"aot": aot, "aot_th": aot_th, "energy": energy, "energy_log": lambda w, c: energy(w, c, log=True)}


def timed(fn, reps, batches=5):
    for _ in range(2):
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


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shapes", default="4,12,4096,64;1,8,1024,64", help="B,K,N,p;...")
    ap.add_argument("--ops", default="aot,aot_th,energy,energy_log")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--chunk", type=int, default=1024, help="query rows per materialized chunk")
    ap.add_argument("--peak", type=float, default=0.0, help="FP32 FMA peak in GFLOP/s (for %% peak)")
    a = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dev = torch.device("cuda")
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name(0)}, TF32 off")
    print(f"{'shape':22s} {'op':10s} {'ms':>9s} {'GFLOP/s':>10s} {'% peak' if a.peak > 0 else '':>8s}")
    for s in a.shapes.split(";"):
        B, K, N, p = (int(v) for v in s.split(","))
        g = torch.Generator(device=dev).manual_seed(7)
        w = torch.rand(B, K, N, p, device=dev, generator=g) * 2 - 1
        for name in a.ops.split(","):
            fn = OPS[name]
            with torch.no_grad():
                t = timed(lambda: fn(w, a.chunk), a.reps)
            flops = (6.0 if name == "aot_th" else 4.0) * B * K * N * N * p
            gf = flops / t * 1e-6
            pk = f"{100 * gf / a.peak:7.1f}%" if a.peak > 0 else ""
            print(f"{'B%d K%d N%d p%d' % (B, K, N, p):22s} {name:10s} {t:9.3f} {gf:10.1f} {pk:>8s}", flush=True)
        del w
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()

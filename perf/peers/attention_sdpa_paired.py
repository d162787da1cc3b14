#!/usr/bin/env python3
"""Per-head fused attention, wbcl against PyTorch's SDPA in the same process (issue 17's targets:
softmax, causal and MSSA >= 1.0x SDPA at B1 K8 N4096 p64 on this machine's CPU; at B4 K12 N4096 p64
and B8 K6 N1024 p64, p = 32...128, on H100/H200 against CUDA SDPA in float32). Calls alternate
(wbcl, torch, wbcl, ...) so both see the same load; median of --reps per side; float32 (TF32 off
on CUDA); wbcl through its Python package (python/wbcl, in-process; device $WBCL_DEVICE), inputs
already on the device (Tensor, keep=True), so both sides time the attention alone (each call waits
for its device). Run with a Python that has torch, numpy and the wbcl package:

    PYTHONPATH=python WBCL_BUILD_DIR=build /tmp/torchenv/bin/python perf/peers/attention_sdpa_paired.py \\
        [--shape 1,8,4096,64[;B,K,N,p...]] [--reps 9] [--threads 2] [--torch-device cpu|cuda]
        [--param KEY=VALUE ...]

--param sets a kernel parameter on wbcl's context (e.g. attention.tiled=1: the register-tiled GPU
kernel for p = 32 and 64; include/wbcl/tuning.h lists the keys). --cases picks among softmax, causal,
mssa (the default: those three) and aot: AoT's softmax step (wbcl_aot_heads; SPEC 1.3) against SDPA on
q = k = v = w with scale 1.
"""
import argparse
import os

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
import torch.nn.functional as F

import wbcl
from paired import alternate


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", default="1,8,4096,64")
    ap.add_argument("--reps", type=int, default=9)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--torch-device", default="cpu")
    ap.add_argument("--param", action="append", default=[], help="KEY=VALUE, a wbcl kernel parameter")
    ap.add_argument("--cases", default="softmax,causal,mssa", help="comma-separated: softmax, causal, mssa, aot")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    dev = torch.device(a.torch_device)
    if dev.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    for shape in a.shape.split(";"):
        run_shape(a, dev, *(int(s) for s in shape.split(",")))


def run_shape(a, dev, B, K, N, p):
    cuda = dev.type == "cuda"
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((B, K, N, p)).astype(np.float32) for _ in range(3))
    tq, tk, tv = (torch.from_numpy(x).to(dev) for x in (q, k, v))

    def sdpa(*args, **kw):
        r = F.scaled_dot_product_attention(*args, **kw)
        sync()
        return r

    flops = 4.0 * B * K * N * N * p
    with wbcl.Context() as ctx, torch.inference_mode():
        for kv in a.param:
            key, _, value = kv.partition("=")
            ctx.set_param(key, int(value))
        dq, dk, dv = ctx.tensor(q), ctx.tensor(k), ctx.tensor(v)
        cases = {
            "softmax": (lambda: ctx.attention(dq, dk, dv, keep=True), lambda: sdpa(tq, tk, tv), 1.0),
            "causal": (lambda: ctx.attention(dq, dk, dv, causal=True, keep=True),
                       lambda: sdpa(tq, tk, tv, is_causal=True), 0.5),
            "mssa": (lambda: ctx.mssa(dq, keep=True), lambda: sdpa(tq, tq, tq), 1.0),
            "aot": (lambda: ctx.aot(dq, keep=True), lambda: sdpa(tq, tq, tq, scale=1.0), 1.0),
        }
        wanted = a.cases.split(",")
        unknown = [c for c in wanted if c not in cases]
        if unknown:
            raise SystemExit("--cases: unknown %s (softmax, causal, mssa, aot)" % ", ".join(unknown))
        cases = {c: cases[c] for c in wanted}
        print("wbcl device: %s%s; shape B%d K%d N%d p%d; torch %s on %s" % (
            ctx.device["name"], "".join(" " + kv for kv in a.param), B, K, N, p, torch.__version__,
            torch.cuda.get_device_name(dev) if cuda else
            "cpu, %d threads, OMP_WAIT_POLICY=%s" % (a.threads, os.environ["OMP_WAIT_POLICY"])))
        for name, (fw, ft, frac) in cases.items():
            ow = fw()
            ctx.finish()
            ref = ft()
            err = float(np.abs(ow.numpy() - ref.cpu().numpy()).max())
            mw, mt = alternate(ctx, fw, ft, a.reps)
            print("%-8s wbcl %9.3f ms (%8.1f GFLOP/s)  torch %9.3f ms (%8.1f GFLOP/s)  ratio %.2f  max|diff| %.1e"
                  % (name, 1e3 * mw, frac * flops / mw / 1e9, 1e3 * mt, frac * flops / mt / 1e9, mt / mw, err))


if __name__ == "__main__":
    main()

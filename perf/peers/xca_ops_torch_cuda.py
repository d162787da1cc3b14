#!/usr/bin/env python3
"""PyTorch CUDA peer of perf/bench_xca_ops.c (issue 16): XCiT's cross-covariance attention after
the projection, written as XCiT's XCA.forward writes it (SPEC.md 1.6), on q, k, v : (B, K, N, p),
and the basic ops as torch calls on x : (R, C), float32, TF32 off. For each case: the eager time
per call (R calls queued back to back between CUDA events, median of 5 such batches, after a
warm-up), GB/s counting the same bytes as bench_xca_ops (XCA: q, k, v read and o written; ops:
each operand read once, the result written once), and a device-to-device copy of the same bytes
(y.copy_(x), timed the same way), "% copy" = op GB/s over copy GB/s.

  python3 perf/peers/xca_ops_torch_cuda.py --xca "8,12,4096,64;1,8,1024,64" --ops "4096,1024;16384,4096" --reps 50
"""
import argparse
import statistics

import torch


def xca(q, k, v, temperature):
    # XCiT XCA.forward after `qkv = self.qkv(x).reshape(B, N, 3, H, C // H).permute(2, 0, 3, 1, 4)`:
    # q, k, v arrive here as (B, H, N, p); XCiT transposes them to (B, H, p, N)
    q = q.transpose(-2, -1)
    k = k.transpose(-2, -1)
    v = v.transpose(-2, -1)
    q = torch.nn.functional.normalize(q, dim=-1)
    k = torch.nn.functional.normalize(k, dim=-1)
    attn = (q @ k.transpose(-2, -1)) * temperature
    attn = attn.softmax(dim=-1)
    return (attn @ v).permute(0, 3, 1, 2)  # (B, N, H, p): XCiT then reshapes to (B, N, C)


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


def row(name, ms, nbytes, copy_ms, copy_bytes):
    gbs = nbytes / ms / 1e6
    cgbs = copy_bytes / copy_ms / 1e6
    print(f"{name:34s} {ms:9.4f} {gbs:9.1f} {cgbs:10.1f} {100 * gbs / cgbs:6.1f}%", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--xca", default="8,12,4096,64;1,8,1024,64", help="B,K,N,p;... ('' skips)")
    ap.add_argument("--ops", default="4096,1024;16384,4096", help="R,C;... ('' skips)")
    ap.add_argument("--reps", type=int, default=50)
    a = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dev = torch.device("cuda")
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name(0)}, TF32 off")
    print(f"{'case':34s} {'eager ms':>9s} {'GB/s':>9s} {'copy GB/s':>10s} {'% copy':>7s}")
    with torch.no_grad():
        for s in filter(None, a.xca.split(";")):
            B, K, N, p = (int(v) for v in s.split(","))
            g = torch.Generator(device=dev).manual_seed(1)
            q, k, v = (torch.rand(B, K, N, p, device=dev, generator=g) * 2 - 1 for _ in range(3))
            temp = torch.rand(K, 1, 1, device=dev, generator=g) + 0.5
            o = torch.empty_like(q)
            n = B * K * N * p
            t = timed(lambda: xca(q, k, v, temp), a.reps)
            tc = timed(lambda: o.copy_(q), a.reps)
            row(f"xca B{B} K{K} N{N} p{p}", t, 16 * n, tc, 8 * n)
        for s in filter(None, a.ops.split(";")):
            R, C = (int(v) for v in s.split(","))
            g = torch.Generator(device=dev).manual_seed(2)
            x = torch.rand(R, C, device=dev, generator=g) * 6 - 3
            x2 = torch.rand(R, C, device=dev, generator=g) * 6 - 3
            bias = torch.rand(C, device=dev, generator=g) * 2 - 1
            y = torch.empty_like(x)
            rr = torch.empty(R, device=dev)
            rc = torch.empty(C, device=dev)
            n = R * C
            tc = timed(lambda: y.copy_(x), a.reps)
            cases = [
                ("relu", lambda: torch.clamp_min(x, 0.0, out=y), 8 * n),
                ("scale", lambda: torch.mul(x, 0.5, out=y), 8 * n),
                ("axpby", lambda: y.mul_(0.25).add_(x, alpha=0.5), 12 * n),
                ("add", lambda: torch.add(x, x2, out=y), 12 * n),
                ("add.bias", lambda: torch.add(x, bias, out=y), 8 * n + 4 * C),
                ("gelu", lambda: torch.nn.functional.gelu(x), 8 * n),
                ("layernorm", lambda: torch.nn.functional.layer_norm(x, (C,), eps=1e-5), 8 * n),
                ("softmax", lambda: torch.softmax(x, dim=-1), 8 * n),
                ("reduce_rows.sum", lambda: torch.sum(x, dim=1, out=rr), 4 * (n + R)),
                ("reduce_cols.sum", lambda: torch.sum(x, dim=0, out=rc), 4 * (n + C)),
            ]
            for name, fn, nbytes in cases:
                row(f"({R}, {C}) {name}", timed(fn, a.reps), nbytes, tc, 8 * n)


if __name__ == "__main__":
    main()

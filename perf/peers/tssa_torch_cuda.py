#!/usr/bin/env python3
"""PyTorch CUDA peer of wbcl_tssa_heads and wbcl_tssa_causal_heads (perf/bench_tssa.c --heads-core):
ToST's AttentionTSSA core after the projection, on w : (B, K, N, p) in float32, written as the ToST repository's forward pass
(SPEC.md 1.4), TF32 off. For each shape: the eager time per call (R calls queued back to back
between CUDA events, median of 5 such batches, after a warm-up), and a device-to-device copy of w
(y.copy_(w)) timed the same way. GB/s counts one read of w and one write of y (2 B K N p 4 bytes),
as bench_tssa does.

  python3 perf/peers/tssa_torch_cuda.py --shapes "8,12,4096,64;1,8,1024,64" --reps 50

--causal: causal TSSA instead (perf/bench_tssa.c --heads-core ... --causal), SPEC.md 1.5 in PyTorch's
cumsum form (S, Q, P by torch.cumsum over tokens; denom_bias (K, N, 1)), then the decode step: the
recurrent form on one token (B, K, 1, p) with the state S, Q (B, K, 1, p), P (B, K, 1, 1) updated in
place, R steps queued back to back ("step ms" per step).
"""
import argparse
import statistics

import torch


def tssa(w, temp):
    # ToST AttentionTSSA.forward after `w = rearrange(self.qkv(x), 'b n (h d) -> b h n d')`
    w_normed = torch.nn.functional.normalize(w, dim=-2)
    w_sq = w_normed ** 2
    Pi = torch.softmax(w_sq.sum(dim=-1) * temp, dim=1)  # b, h, n
    dots = torch.matmul((Pi / (Pi.sum(dim=-1, keepdim=True) + 1e-8)).unsqueeze(-2), w ** 2)
    attn = 1.0 / (1 + dots)
    return -torch.mul(w.mul(Pi.unsqueeze(-1)), attn)


def tssa_causal(w, temp, denom_bias):
    # SPEC 1.5: w (B, K, N, p), temp (K, 1), denom_bias (K, Tmax, 1)
    N = w.shape[2]
    w2 = w ** 2
    S = torch.cumsum(w2, dim=2)
    wn = w2 / S.clamp_min(1e-12) + denom_bias[:, :N].unsqueeze(0)
    Pi = torch.softmax(wn.sum(dim=-1) * temp, dim=1)  # b, h, n
    Q = torch.cumsum(Pi.unsqueeze(-1) * w2, dim=2)
    P = torch.cumsum(Pi, dim=2).unsqueeze(-1)
    return -w * Pi.unsqueeze(-1) / (1 + Q / (P + 1e-8))


def tssa_step(w1, temp, bias_t, S, Q, P):
    # one token w1 (B, K, 1, p) at position t (bias_t = denom_bias[:, t] : (K, 1)); state updated in place
    w2 = w1 ** 2
    S.add_(w2)
    wn = w2 / S.clamp_min(1e-12) + bias_t.unsqueeze(0).unsqueeze(-1)
    Pi = torch.softmax(wn.sum(dim=-1) * temp, dim=1).unsqueeze(-1)  # b, h, 1, 1
    Q.add_(Pi * w2)
    P.add_(Pi)
    return -w1 * Pi / (1 + Q / (P + 1e-8))


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


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shapes", default="8,12,4096,64;1,8,1024,64", help="B,K,N,p;...")
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--causal", action="store_true", help="causal TSSA (prefill) and its decode step")
    a = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dev = torch.device("cuda")
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name(0)}, TF32 off")
    print(f"{'shape':22s} {'eager ms':>9s} {'GB/s':>9s} {'copy ms':>9s} {'copy GB/s':>10s} {'% copy':>7s}")
    for s in a.shapes.split(";"):
        B, K, N, p = (int(v) for v in s.split(","))
        g = torch.Generator(device=dev).manual_seed(1)
        w = torch.rand(B, K, N, p, device=dev, generator=g) * 2 - 1
        temp = torch.rand(K, 1, device=dev, generator=g) + 0.5
        y = torch.empty_like(w)
        bias = (torch.rand(K, N, 1, device=dev, generator=g) - 0.5) * 0.2
        with torch.no_grad():
            if a.causal:
                te = timed(lambda: tssa_causal(w, temp, bias), a.reps)
            else:
                te = timed(lambda: tssa(w, temp), a.reps)
            tc = timed(lambda: y.copy_(w), a.reps)
        gb = 2.0 * w.numel() * 4 / 1e9
        print(f"{'B%d K%d N%d p%d' % (B, K, N, p):22s} {te:9.4f} {gb / te * 1e3:9.1f} {tc:9.4f} "
              f"{gb / tc * 1e3:10.1f} {100 * tc / te:6.1f}%", flush=True)
        if a.causal:
            w1 = w[:, :, :1].contiguous()
            S, Q = torch.zeros_like(w1), torch.zeros_like(w1)
            P = torch.zeros(B, K, 1, 1, device=dev)
            with torch.no_grad():
                ts = timed(lambda: tssa_step(w1, temp, bias[:, 0], S, Q, P), a.reps)
            print(f"    decode step (B{B} K{K} p{p}, 1 token): {ts:.4f} ms per step (eager)", flush=True)


if __name__ == "__main__":
    main()

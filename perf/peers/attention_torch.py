#!/usr/bin/env python3
"""PyTorch-on-CPU peers for perf/bench_attention.c (the ToST paper's App. D.2, Fig. 6 left).

One attention layer including its projections, K heads, width d, batch B, n tokens, for:
  torch.softmax  timm ViT `Attention` (qkv Linear, softmax(q k^T * p^-1/2) v, proj Linear)
  torch.sdpa     the same layer with F.scaled_dot_product_attention (PyTorch's fused CPU kernel)
  torch.mssa     CRATE `Attention` (one bias-free projection, Q = K = V = w, to_out)
  torch.xca      XCiT `XCA` (cross-covariance attention, temperature per head)
  torch.tssa     ToST `AttentionTSSA` (SPEC.md 1.4)
The modules are written here from the reference repositories' forward passes (timm, CRATE,
XCiT, ToST), so nothing but torch is needed. Rows are appended to a CSV in the format of
bench_attention: impl,variant,n,d,heads,batch,median_ms,min_ms,gflops,peak_mib,reps,device.

Memory: the rise of the resident set during one forward of a freshly built layer (weights,
input, output and every temporary), measured exactly as bench_attention measures wbcl and
OpenBLAS: VmHWM after writing "5" to /proc/self/clear_refs, minus VmRSS before. The script
re-executes itself with MALLOC_MMAP_THRESHOLD_=65536 so that freed tensors leave the resident
set. Quadratic variants (torch.softmax, torch.mssa materialize K n x n scores) are skipped when
their scores would exceed --max-quadratic-mb.

Not part of CI. Needs torch; `--install` runs `python -m pip install torch` (add
`--torch-index https://download.pytorch.org/whl/cpu` for the CPU-only wheel where reachable).

  python3 perf/peers/attention_torch.py --n 256,1024,4096 --reps 5 --csv out.csv
"""
import argparse
import gc
import math
import os
import subprocess
import sys
import time


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", default="256,512,1024,2048,4096,8192,16384", help="comma-separated token counts")
    ap.add_argument("--d", type=int, default=384)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--only", default="torch.softmax,torch.sdpa,torch.mssa,torch.xca,torch.tssa")
    ap.add_argument("--csv", help="append rows to this CSV (header written if the file is new)")
    ap.add_argument("--no-memory", action="store_true")
    ap.add_argument("--max-quadratic-mb", type=float, default=4096.0)
    ap.add_argument("--install", action="store_true", help="pip install torch first if it is missing")
    ap.add_argument("--torch-index", help="pip --index-url for --install (e.g. the CPU wheel index)")
    ap.add_argument("--wbcl-lib", help="path to libwbcl.so: also time wbcl's softmax and MSSA layers in this "
                    "process, with the same weights, interleaved call by call with torch (rows impl 'wbcl@torch')")
    return ap.parse_args()


def ensure_torch(args):
    try:
        import torch  # noqa: F401
        return True
    except ImportError:
        if not args.install:
            print("attention_torch.py: torch is not installed (run with --install)", file=sys.stderr)
            return False
    cmd = [sys.executable, "-m", "pip", "install", "torch"]
    if args.torch_index:
        cmd += ["--index-url", args.torch_index]
    print("installing:", " ".join(cmd), file=sys.stderr)
    if subprocess.call(cmd) != 0:
        print("attention_torch.py: pip install torch failed", file=sys.stderr)
        return False
    return True


def proc_kb(key):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return -1


def reset_hwm():
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def build_modules():
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    class ViTAttention(nn.Module):  # timm VisionTransformer Attention
        def __init__(self, dim, num_heads, sdpa=False):
            super().__init__()
            self.num_heads = num_heads
            self.head_dim = dim // num_heads
            self.scale = self.head_dim ** -0.5
            self.qkv = nn.Linear(dim, dim * 3, bias=True)
            self.proj = nn.Linear(dim, dim)
            self.sdpa = sdpa

        def forward(self, x):
            B, N, C = x.shape
            qkv = self.qkv(x).reshape(B, N, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
            q, k, v = qkv.unbind(0)
            if self.sdpa:
                x = F.scaled_dot_product_attention(q, k, v)
            else:
                attn = (q * self.scale) @ k.transpose(-2, -1)
                attn = attn.softmax(dim=-1)
                x = attn @ v
            x = x.transpose(1, 2).reshape(B, N, C)
            return self.proj(x)

    class CrateAttention(nn.Module):  # CRATE Attention (MSSA)
        def __init__(self, dim, heads, dim_head):
            super().__init__()
            inner = dim_head * heads
            self.heads = heads
            self.scale = dim_head ** -0.5
            self.qkv = nn.Linear(dim, inner, bias=False)
            self.to_out = nn.Sequential(nn.Linear(inner, dim))

        def forward(self, x):
            B, N, _ = x.shape
            w = self.qkv(x).reshape(B, N, self.heads, -1).permute(0, 2, 1, 3)
            dots = torch.matmul(w, w.transpose(-1, -2)) * self.scale
            attn = dots.softmax(dim=-1)
            out = torch.matmul(attn, w)
            out = out.permute(0, 2, 1, 3).reshape(B, N, -1)
            return self.to_out(out)

    class XCA(nn.Module):  # XCiT XCA
        def __init__(self, dim, num_heads):
            super().__init__()
            self.num_heads = num_heads
            self.temperature = nn.Parameter(torch.ones(num_heads, 1, 1))
            self.qkv = nn.Linear(dim, dim * 3, bias=True)
            self.proj = nn.Linear(dim, dim)

        def forward(self, x):
            B, N, C = x.shape
            qkv = self.qkv(x).reshape(B, N, 3, self.num_heads, C // self.num_heads).permute(2, 0, 3, 1, 4)
            q, k, v = qkv[0], qkv[1], qkv[2]
            q = q.transpose(-2, -1)
            k = k.transpose(-2, -1)
            v = v.transpose(-2, -1)
            q = F.normalize(q, dim=-1)
            k = F.normalize(k, dim=-1)
            attn = (q @ k.transpose(-2, -1)) * self.temperature
            attn = attn.softmax(dim=-1)
            x = (attn @ v).permute(0, 3, 1, 2).reshape(B, N, C)
            return self.proj(x)

    class TSSA(nn.Module):  # ToST AttentionTSSA (SPEC.md 1.4)
        def __init__(self, dim, num_heads):
            super().__init__()
            self.heads = num_heads
            self.qkv = nn.Linear(dim, dim, bias=True)
            self.temp = nn.Parameter(torch.ones(num_heads, 1))
            self.to_out = nn.Sequential(nn.Linear(dim, dim))

        def forward(self, x):
            B, N, C = x.shape
            w = self.qkv(x).reshape(B, N, self.heads, C // self.heads).permute(0, 2, 1, 3)  # b h n p
            w_normed = F.normalize(w, dim=-2)
            w_sq = w_normed ** 2
            Pi = (w_sq.sum(dim=-1) * self.temp).softmax(dim=1)  # b h n
            dots = torch.einsum("bhn,bhnd->bhd", Pi / (Pi.sum(dim=-1, keepdim=True) + 1e-8), w ** 2)
            attn = 1.0 / (1 + dots)
            out = -torch.mul(w.mul(Pi.unsqueeze(-1)), attn.unsqueeze(-2))
            out = out.permute(0, 2, 1, 3).reshape(B, N, C)
            return self.to_out(out)

    return {
        "softmax": lambda d, K: ViTAttention(d, K, sdpa=False),
        "sdpa": lambda d, K: ViTAttention(d, K, sdpa=True),
        "mssa": lambda d, K: CrateAttention(d, K, d // K),
        "xca": lambda d, K: XCA(d, K),
        "tssa": lambda d, K: TSSA(d, K),
    }


class WbclLayers:
    """wbcl's softmax (wbcl_mha) and MSSA (wbcl_mssa) layers through ctypes, with torch's weights."""

    def __init__(self, path):
        import ctypes as C
        self.C = C
        L = C.CDLL(path)
        P = C.c_void_p
        L.wbcl_context_create.argtypes = [C.c_char_p, C.POINTER(P), C.c_char_p, C.c_size_t]
        L.wbcl_context_last_error.restype = C.c_char_p
        L.wbcl_context_last_error.argtypes = [P]
        L.wbcl_tensor_create.argtypes = [P, C.c_int, C.POINTER(C.c_size_t), C.c_int, P, C.POINTER(P)]
        L.wbcl_tensor_read.argtypes = [P, P, P, C.c_size_t]
        L.wbcl_tensor_destroy.argtypes = [P]
        L.wbcl_context_finish.argtypes = [P]
        L.wbcl_mha_create.argtypes = [P, C.c_size_t, C.c_size_t, C.c_int, P, P, P, P, C.POINTER(P)]
        L.wbcl_mha_forward.argtypes = [P, P, P, P]
        L.wbcl_mha_destroy.argtypes = [P]
        L.wbcl_mssa_create.argtypes = [P, C.c_size_t, C.c_size_t, C.c_size_t, C.c_int, P, P, P, C.POINTER(P)]
        L.wbcl_mssa_forward.argtypes = [P, P, P, P]
        L.wbcl_mssa_destroy.argtypes = [P]
        self.L = L
        self.ctx = P()
        err = C.create_string_buffer(1024)
        if L.wbcl_context_create(None, C.byref(self.ctx), err, 1024) != 0:
            raise RuntimeError("wbcl_context_create: " + err.value.decode())
        self.device = "wbcl (in the torch process)"

    def check(self, st, what):
        if st != 0:
            raise RuntimeError("%s: %s" % (what, self.L.wbcl_context_last_error(self.ctx).decode()))

    def ptr(self, t):
        return self.C.c_void_p(t.data_ptr()) if t is not None else None

    def tensor(self, t):
        C = self.C
        t = t.detach().contiguous().float()
        shape = (C.c_size_t * t.dim())(*t.shape)
        out = C.c_void_p()
        self.check(self.L.wbcl_tensor_create(self.ctx, t.dim(), shape, 0, self.ptr(t), C.byref(out)), "tensor")
        return out

    def layer(self, variant, torch_layer, d, K):
        """(forward(x_dev, y_dev), destroy()) for torch_layer's weights."""
        C = self.C
        m = C.c_void_p()
        if variant in ("softmax", "sdpa"):
            ws = [torch_layer.qkv.weight, torch_layer.qkv.bias, torch_layer.proj.weight, torch_layer.proj.bias]
            ws = [w.detach().contiguous() for w in ws]
            self.check(self.L.wbcl_mha_create(self.ctx, d, K, 0, *[self.ptr(w) for w in ws], C.byref(m)), "mha")
            fwd, dst = self.L.wbcl_mha_forward, self.L.wbcl_mha_destroy
        else:
            ws = [torch_layer.qkv.weight, torch_layer.to_out[0].weight, torch_layer.to_out[0].bias]
            ws = [w.detach().contiguous() for w in ws]
            self.check(self.L.wbcl_mssa_create(self.ctx, d, K, d // K, 0, *[self.ptr(w) for w in ws], C.byref(m)),
                       "mssa")
            fwd, dst = self.L.wbcl_mssa_forward, self.L.wbcl_mssa_destroy

        def forward(x, y):
            self.check(fwd(self.ctx, m, x, y), "forward")
            self.check(self.L.wbcl_context_finish(self.ctx), "finish")

        return forward, lambda: dst(m)

    def read(self, t, like):
        import torch
        out = torch.empty_like(like)
        self.check(self.L.wbcl_tensor_read(self.ctx, t, self.ptr(out), out.numel()), "read")
        return out


def flops(variant, n, d, K, B):
    N, p = float(n), d / K
    if variant in ("softmax", "sdpa"):
        return B * (2 * N * d * 4 * d + 4 * N * N * d)
    if variant == "mssa":
        return B * (2 * N * d * 2 * d + 4 * N * N * d)
    if variant == "xca":
        return B * (2 * N * d * 4 * d + 4 * N * p * d)
    return B * (2 * N * d * 2 * d + 10 * N * d)  # tssa


def main():
    args = parse_args()
    if "MALLOC_MMAP_THRESHOLD_" not in os.environ:
        env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="65536")
        os.execve(sys.executable, [sys.executable] + sys.argv, env)
    if not ensure_torch(args):
        return 1
    import torch

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    makers = build_modules()
    wb = WbclLayers(args.wbcl_lib) if args.wbcl_lib else None
    variants = [v.split(".", 1)[1] for v in args.only.split(",") if v.startswith("torch.")]
    ns = [int(v) for v in args.n.split(",")]
    d, K, B = args.d, args.heads, args.batch
    device = "torch %s CPU, %d threads" % (torch.__version__, torch.get_num_threads())
    print("device: %s; layer d = %d, heads = %d, batch = %d; %d reps after a warm-up; medians" %
          (device, d, K, B, args.reps))
    print("| n | layer | median ms | GFLOP/s | peak MiB |\n|---|---|---|---|---|")
    out = None
    if args.csv:
        new = not os.path.exists(args.csv) or os.path.getsize(args.csv) == 0
        out = open(args.csv, "a")
        if new:
            out.write("impl,variant,n,d,heads,batch,median_ms,min_ms,gflops,peak_mib,reps,device\n")
    with torch.no_grad():
        for n in ns:
            for v in variants:
                if v not in makers:
                    print("unknown variant torch.%s" % v, file=sys.stderr)
                    continue
                if v in ("softmax", "mssa") and 2.0 * B * K * n * n * 4 / 1048576.0 > args.max_quadratic_mb:
                    print("| %d | torch.%s | skipped: scores exceed --max-quadratic-mb %.0f |||" %
                          (n, v, args.max_quadratic_mb))
                    continue
                # memory: a fresh layer and input, one forward
                mib = float("nan")
                if not args.no_memory:
                    warm = makers[v](d, K)
                    warm(torch.randn(B, 64, d))  # first-call initialization at a small size
                    del warm
                    gc.collect()
                    if reset_hwm():
                        base = proc_kb("VmRSS")
                        layer = makers[v](d, K)
                        x = torch.randn(B, n, d)
                        y = layer(x)
                        mib = (proc_kb("VmHWM") - base) / 1024.0
                        del layer, x, y
                        gc.collect()
                layer = makers[v](d, K)
                x = torch.randn(B, n, d)
                y_ref = layer(x)  # warm-up
                pair = None
                if wb is not None and v in ("softmax", "sdpa", "mssa"):
                    fwd, destroy = wb.layer(v, layer, d, K)
                    xd, yd = wb.tensor(x), wb.tensor(torch.zeros_like(x))
                    fwd(xd, yd)  # warm-up
                    diff = (wb.read(yd, y_ref) - y_ref).abs().max().item()
                    pair = (fwd, destroy, xd, yd, [], diff)
                ts = []
                for r in range(max(1, args.reps)):
                    if pair is not None and r % 2:
                        t0 = time.perf_counter()
                        pair[0](pair[2], pair[3])
                        pair[4].append(time.perf_counter() - t0)
                    t0 = time.perf_counter()
                    layer(x)
                    ts.append(time.perf_counter() - t0)
                    if pair is not None and not r % 2:
                        t0 = time.perf_counter()
                        pair[0](pair[2], pair[3])
                        pair[4].append(time.perf_counter() - t0)
                if pair is not None:
                    pair[1]()
                    wb.L.wbcl_tensor_destroy(pair[2])
                    wb.L.wbcl_tensor_destroy(pair[3])
                    tw = sorted(pair[4])
                    medw = tw[len(tw) // 2] if len(tw) % 2 else 0.5 * (tw[len(tw) // 2 - 1] + tw[len(tw) // 2])
                    name = "mssa" if v == "mssa" else "softmax"
                    print("| %d | wbcl@torch.%s (vs torch.%s, interleaved; max |diff| %.1e) | %.3f | %.1f | |" %
                          (n, name, v, pair[5], 1e3 * medw, flops(v, n, d, K, B) / medw * 1e-9), flush=True)
                    if out:
                        out.write('wbcl@torch,%s_vs_%s,%d,%d,%d,%d,%.4f,%.4f,%.2f,nan,%d,"%s"\n' %
                                  (name, v, n, d, K, B, 1e3 * medw, 1e3 * tw[0], flops(v, n, d, K, B) / medw * 1e-9,
                                   len(tw), wb.device))
                del layer, x
                gc.collect()
                ts.sort()
                med = ts[len(ts) // 2] if len(ts) % 2 else 0.5 * (ts[len(ts) // 2 - 1] + ts[len(ts) // 2])
                gf = flops(v, n, d, K, B) / med * 1e-9
                print("| %d | torch.%s | %.3f | %.1f | %.1f |" % (n, v, 1e3 * med, gf, mib), flush=True)
                if out:
                    out.write('torch,%s,%d,%d,%d,%d,%.4f,%.4f,%.2f,%.3f,%d,"%s"\n' %
                              (v, n, d, K, B, 1e3 * med, 1e3 * ts[0], gf, mib, len(ts), device))
                    out.flush()
    if out:
        out.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())

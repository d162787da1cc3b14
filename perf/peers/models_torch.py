#!/usr/bin/env python3
"""CRATE-T and ToST-T forward: wbcl (through ctypes, libwbcl.so) against PyTorch CPU running the
same modules, in one process, interleaved call by call (issue 4).

The PyTorch modules are those of tests/golden/make_models.py (written from the reference
repositories; the golden tests check wbcl against them), in float32, eval mode, inference_mode.
Random weights (seeded) are written to a safetensors file that wbcl loads, so both run exactly
the same network on the same images; the max-abs difference of the logits is printed as a check.

  python perf/peers/models_torch.py --lib build/libwbcl.so [--models crate,tost] [--batch 1,8]
         [--reps 7] [--threads 2] [--image 224] [--csv out.csv] [--base-lib OTHER/libwbcl.so]
         [--torch-device cuda] [--param KEY=VALUE ...] [--profile]

--base-lib: a second build of wbcl (e.g. the main branch) loaded into the same process (its own
context) and timed in the same rounds, for A/B comparisons of a change; "base/wbcl" > 1 means
--lib is faster. The two builds take turns at running first in a round (odd rounds: the base
first): the first call after a torch call is slowed by torch's spin-waiting threads, which
favoured the base build by 7-45 % when --lib always went first. Use an even --reps.

Timing: per (model, batch), one warm-up call each, then `reps` rounds of (wbcl call [and base call],
then one torch call per thread count in --threads), each timed with time.perf_counter around the whole forward
(wbcl: the images are already on the device; the call ends with clFinish). For wbcl (and the base
build) the process CPU time of the call (all threads, time.process_time) is printed too: unlike
wall time it does not grow when other jobs take a share of the shared machine. Reported: median and
min in ms for wbcl and for torch at each thread count, and the ratio best-torch-median /
wbcl-median (> 1: wbcl faster), the peer being PyTorch at its faster thread count (on the shared
2-core machine torch with 2 OpenMP threads was often slower than with 1). Needs torch, numpy,
safetensors.
"""
import argparse
import ctypes as C
import os
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "golden"))


class CrateConfig(C.Structure):  # wbcl_crate_config (include/wbcl/models.h): every field, or the preset writes past it
    _fields_ = [("dim", C.c_size_t), ("depth", C.c_size_t), ("heads", C.c_size_t), ("dim_head", C.c_size_t),
                ("patch", C.c_size_t), ("channels", C.c_size_t), ("num_classes", C.c_size_t),
                ("eta", C.c_float), ("lambd", C.c_float), ("ln_eps", C.c_float), ("weight_dtype", C.c_int)]


class TostConfig(C.Structure):  # wbcl_tost_config (include/wbcl/models.h), likewise
    _fields_ = [("dim", C.c_size_t), ("depth", C.c_size_t), ("heads", C.c_size_t), ("mlp_hidden", C.c_size_t),
                ("patch", C.c_size_t), ("cls_layers", C.c_size_t), ("num_classes", C.c_size_t),
                ("ln_eps", C.c_float), ("bn_eps", C.c_float), ("weight_dtype", C.c_int)]


class Wbcl:
    def __init__(self, path):
        L = C.CDLL(path)
        self.L = L
        vp = C.c_void_p
        L.wbcl_context_create.argtypes = [C.c_char_p, C.POINTER(vp), C.c_char_p, C.c_size_t]
        L.wbcl_context_last_error.argtypes = [vp]
        L.wbcl_context_last_error.restype = C.c_char_p
        L.wbcl_crate_config_preset.argtypes = [C.c_char_p, C.POINTER(CrateConfig)]
        L.wbcl_tost_config_preset.argtypes = [C.c_char_p, C.POINTER(TostConfig)]
        L.wbcl_crate_load_file.argtypes = [vp, C.c_char_p, C.POINTER(CrateConfig), C.POINTER(vp)]
        L.wbcl_tost_load_file.argtypes = [vp, C.c_char_p, C.POINTER(TostConfig), C.POINTER(vp)]
        L.wbcl_crate_forward.argtypes = [vp, vp, vp, C.c_int, vp, vp]
        L.wbcl_tost_forward.argtypes = [vp, vp, vp, C.c_int, vp, vp]
        L.wbcl_tensor_create.argtypes = [vp, C.c_int, C.POINTER(C.c_size_t), C.c_int, C.c_void_p, C.POINTER(vp)]
        L.wbcl_tensor_read.argtypes = [vp, vp, C.c_void_p, C.c_size_t]
        L.wbcl_tensor_destroy.argtypes = [vp]
        L.wbcl_context_finish.argtypes = [vp]
        L.wbcl_crate_destroy.argtypes = [vp]
        L.wbcl_tost_destroy.argtypes = [vp]
        L.wbcl_context_destroy.argtypes = [vp]
        L.wbcl_context_device.argtypes = [vp]
        L.wbcl_context_device.restype = vp
        L.wbcl_context_set_param.argtypes = [vp, C.c_char_p, C.c_long]
        L.wbcl_context_set_timing.argtypes = [vp, C.c_int]
        L.wbcl_context_reset_kernel_ns.argtypes = [vp]
        L.wbcl_context_kernel_profile.argtypes = [vp, C.c_size_t, C.POINTER(C.c_char_p), C.POINTER(C.c_uint64),
                                                  C.POINTER(C.c_uint64)]
        L.wbcl_context_kernel_profile.restype = C.c_int
        self.ctx = vp()
        err = C.create_string_buffer(1024)
        if L.wbcl_context_create(None, C.byref(self.ctx), err, 1024):
            raise SystemExit("wbcl: " + err.value.decode())

    def check(self, st, what):
        if st:
            raise SystemExit(f"wbcl {what}: {self.L.wbcl_context_last_error(self.ctx).decode()}")

    def tensor(self, arr):
        import numpy as np
        a = np.ascontiguousarray(arr, dtype=np.float32)
        shape = (C.c_size_t * a.ndim)(*a.shape)
        t = C.c_void_p()
        self.check(self.L.wbcl_tensor_create(self.ctx, a.ndim, shape, 0, a.ctypes.data, C.byref(t)), "tensor")
        return t

    def empty(self, shape):
        s = (C.c_size_t * len(shape))(*shape)
        t = C.c_void_p()
        self.check(self.L.wbcl_tensor_create(self.ctx, len(shape), s, 0, None, C.byref(t)), "tensor")
        return t

    def read(self, t, shape):
        import numpy as np
        out = np.empty(shape, dtype=np.float32)
        self.check(self.L.wbcl_tensor_read(self.ctx, t, out.ctypes.data, out.size), "read")
        return out


def build(model, image):
    import torch
    import make_models as mm
    torch.manual_seed(0)
    if model == "crate":  # CRATE-T: d 384, 12 layers, 6 heads, patch 16
        m = mm.CRATE(image, 16, 1000, 384, 12, 6, 64)
    else:  # ToST-T: d 192, 12 layers, 4 heads, patch 16, MLP ratio 4
        m = mm.ToST(16, 192, 12, 4, 4, 1000)
        gen = torch.Generator().manual_seed(1)
        mm.perturb(m, gen)
    return m.float().eval()


def load(w, model, path):
    """Loads the preset 'tiny' model from a safetensors file; returns (handle, forward function)."""
    if model == "crate":
        cfg = CrateConfig()
        w.L.wbcl_crate_config_preset(b"tiny", C.byref(cfg))
        mh = C.c_void_p()
        w.check(w.L.wbcl_crate_load_file(w.ctx, path.encode(), C.byref(cfg), C.byref(mh)), "load")
        return mh, w.L.wbcl_crate_forward
    cfg = TostConfig()
    w.L.wbcl_tost_config_preset(b"tiny", C.byref(cfg))
    mh = C.c_void_p()
    w.check(w.L.wbcl_tost_load_file(w.ctx, path.encode(), C.byref(cfg), C.byref(mh)), "load")
    return mh, w.L.wbcl_tost_forward


def profile(w, run_wbcl, run_torch, model, B, top=16):
    """One forward of each with device timing: wbcl per kernel (kernel_profile.h's lines), then torch.profiler's."""
    w.check(w.L.wbcl_context_set_timing(w.ctx, 1), "timing")
    w.L.wbcl_context_reset_kernel_ns(w.ctx)
    run_wbcl()
    w.check(w.L.wbcl_context_set_timing(w.ctx, 0), "timing")
    rows, i = [], 0
    name, ns, n = C.c_char_p(), C.c_uint64(), C.c_uint64()
    while w.L.wbcl_context_kernel_profile(w.ctx, i, C.byref(name), C.byref(ns), C.byref(n)):
        if ns.value:
            rows.append((ns.value, name.value.decode(), n.value))
        i += 1
    rows.sort(reverse=True)
    total = sum(r[0] for r in rows)
    print(f"profile {model} B={B}: wbcl device time per kernel (one forward, every launch waited for): {total * 1e-6:.3f} ms")
    for t, nm, k in rows[:top]:
        print(f"profile   {nm:34s} {t * 1e-6:9.3f} ms {100 * t / total:5.1f} % {k:5d} launches")
    import torch
    acts = [torch.profiler.ProfilerActivity.CPU]
    if torch.cuda.is_available():
        acts.append(torch.profiler.ProfilerActivity.CUDA)
    with torch.profiler.profile(activities=acts) as prof:
        run_torch()
    keys = ["device_time_total", "cuda_time_total"] if torch.cuda.is_available() else ["cpu_time_total"]
    for key in keys:  # the column's name moved between torch versions
        try:
            print(prof.key_averages().table(sort_by=key, row_limit=top))
            break
        except Exception as e:
            print(f"profile torch ({key}): {e}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lib", required=True)
    ap.add_argument("--models", default="crate,tost")
    ap.add_argument("--batch", default="1,8")
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--threads", default="1,2", help="torch thread counts to time (the best is the peer)")
    ap.add_argument("--image", type=int, default=224)
    ap.add_argument("--csv")
    ap.add_argument("--torch-device", default="cpu",
                    help="cuda: PyTorch on the GPU (float32, TF32 off; each call waits for it); wbcl's device is $WBCL_DEVICE")
    ap.add_argument("--base-lib", help="a second wbcl build timed in the same rounds (A/B)")
    ap.add_argument("--param", action="append", default=[],
                    help="KEY=VALUE, a kernel parameter set on the wbcl context first (gemm.tiled.tile=64, ...)")
    ap.add_argument("--profile", action="store_true",
                    help="after the timed rounds, one more forward of each (model, batch) with device timing on: "
                         "wbcl's time per kernel (every launch waited for), and the peer's CUDA/CPU kernel times "
                         "from torch.profiler, largest first")
    a = ap.parse_args()
    import numpy as np
    import torch
    import make_models as mm
    from safetensors.torch import save_file
    threads = [int(t) for t in a.threads.split(",")]
    dev = torch.device(a.torch_device)
    if dev.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        threads = threads[:1]  # the thread count does not apply
    w = Wbcl(a.lib)
    for kv in a.param:
        key, value = kv.split("=", 1)
        w.check(w.L.wbcl_context_set_param(w.ctx, key.encode(), int(value)), "--param " + kv)
    wb = Wbcl(a.base_lib) if a.base_lib else None
    rows = []
    tmp = tempfile.mkdtemp(prefix="wbcl_models_bench_")
    for model in a.models.split(","):
        tm = build(model, a.image)
        path = os.path.join(tmp, model + ".safetensors")
        save_file(mm.f32_state(tm), path)
        tm = tm.to(dev)
        mh, fwd = load(w, model, path)
        if wb:
            mhb, fwdb = load(wb, model, path)
        for B in [int(b) for b in a.batch.split(",")]:
            g = torch.Generator().manual_seed(B)
            img = torch.randn(B, 3, a.image, a.image, generator=g)
            x = w.tensor(img.numpy())
            y = w.empty((B, 1000))

            def run_wbcl():
                w.check(fwd(w.ctx, mh, x, 0, y, None), "forward")
                w.check(w.L.wbcl_context_finish(w.ctx), "finish")

            if wb:
                xb = wb.tensor(img.numpy())
                yb = wb.empty((B, 1000))

                def run_base():
                    wb.check(fwdb(wb.ctx, mhb, xb, 0, yb, None), "forward")
                    wb.check(wb.L.wbcl_context_finish(wb.ctx), "finish")
                run_base()

            img_t = img.to(dev)

            def run_torch():
                with torch.inference_mode():
                    r = tm(img_t, {})
                if dev.type == "cuda":
                    torch.cuda.synchronize()
                return r

            run_wbcl()
            for th in threads:
                torch.set_num_threads(th)
                ref = run_torch()
            diff = float(np.max(np.abs(w.read(y, (B, 1000)) - ref.cpu().numpy())))
            tw, tb, tt = [], [], {th: [] for th in threads}
            cw, cb = [], []  # process CPU time (all threads) per call
            timed = [(run_wbcl, tw, cw)] + ([(run_base, tb, cb)] if wb else [])
            for rep in range(a.reps):
                # The call right after a torch call shares the cores with torch's spin-waiting OpenMP
                # threads (7-45 % slower at batch 1, perf/RESULTS.md): the two builds take turns in it.
                for run, t_list, c_list in (timed if rep % 2 == 0 else timed[::-1]):
                    c0, t0 = time.process_time(), time.perf_counter()
                    run()
                    t_list.append(time.perf_counter() - t0)
                    c_list.append(time.process_time() - c0)
                for th in threads:
                    torch.set_num_threads(th)
                    t0 = time.perf_counter()
                    run_torch()
                    tt[th].append(time.perf_counter() - t0)
            mw = statistics.median(tw) * 1e3
            med = {th: statistics.median(v) * 1e3 for th, v in tt.items()}
            best = min(med, key=med.get)
            mt = med[best]
            row = (model, B, mw, min(tw) * 1e3, best, mt, min(tt[best]) * 1e3, mt / mw, diff)
            rows.append(row)
            tstr = "  ".join(f"torch@{th} {med[th]:8.1f} ms (min {min(tt[th]) * 1e3:8.1f})" for th in threads)
            bstr = ""
            if wb:
                mb = statistics.median(tb) * 1e3
                mcb = statistics.median(cb) * 1e3
                bstr = (f"  base {mb:8.1f} ms (min {min(tb) * 1e3:8.1f}, cpu {mcb:8.1f}) base/wbcl {mb / mw:5.2f}x"
                        f" (cpu {mcb / statistics.median(cw) / 1e3:5.2f}x)")
            print(f"{model:5s} B={B:2d}  wbcl {mw:8.1f} ms (min {row[3]:8.1f}, cpu {statistics.median(cw) * 1e3:8.1f})  {tstr}  best-torch/wbcl "
                  f"{mt / mw:5.2f}x  max|logit diff| {diff:.2e}{bstr}", flush=True)
            if a.profile:
                profile(w, run_wbcl, run_torch, model, B)
            w.L.wbcl_tensor_destroy(x)
            w.L.wbcl_tensor_destroy(y)
            if wb:
                wb.L.wbcl_tensor_destroy(xb)
                wb.L.wbcl_tensor_destroy(yb)
        (w.L.wbcl_crate_destroy if model == "crate" else w.L.wbcl_tost_destroy)(mh)
        if wb:
            (wb.L.wbcl_crate_destroy if model == "crate" else wb.L.wbcl_tost_destroy)(mhb)
    if a.csv:
        new = not os.path.exists(a.csv)
        with open(a.csv, "a") as f:
            if new:
                f.write("model,batch,wbcl_median_ms,wbcl_min_ms,torch_threads,torch_median_ms,torch_min_ms,ratio,max_logit_diff\n")
            for r in rows:
                f.write(",".join(str(v) for v in r) + "\n")
    w.L.wbcl_context_destroy(w.ctx)
    if wb:
        wb.L.wbcl_context_destroy(wb.ctx)


if __name__ == "__main__":
    main()

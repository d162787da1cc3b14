#!/usr/bin/env python3
"""Converts a reference PyTorch checkpoint (.pth / .pt) to safetensors for wbcl.

    python tools/convert_pth.py IN.pth OUT.safetensors [--key model] [--dtype f32|keep] [--list]

Needs torch and safetensors (`pip install torch safetensors`); the C library never unpickles.

What it does:
  * loads the checkpoint on the CPU (weights_only=True where torch supports it, so no code from
    the file runs; pass --unsafe for old checkpoints that pickle other objects);
  * finds the state dict: the top-level dict itself, or its entry 'model' / 'state_dict' /
    'model_state_dict' / 'module' / 'net' (or --key NAME); everything else (optimizer state,
    schedulers, epoch counters, args) is dropped;
  * strips the prefixes 'module.' (DataParallel / DDP) and '_orig_mod.' (torch.compile), repeatedly,
    and refuses if two keys collide after stripping;
  * keeps only tensors; floating tensors are written as float32 unless --dtype keep (integer
    buffers such as BatchNorm's num_batches_tracked keep their dtype);
  * writes the file with the safetensors package (contiguous copies, shared storage broken up).
The key names are then exactly the reference state_dict keys that wbcl's loaders expect
(SPEC.md 6.2), e.g. `wbcl-run crate --weights OUT.safetensors --param config=base ...`.
"""
import argparse
import sys

PREFIXES = ("module.", "_orig_mod.")
CANDIDATES = ("model", "state_dict", "model_state_dict", "module", "net", "model_ema")


def strip(name):
    changed = True
    while changed:
        changed = False
        for p in PREFIXES:
            if name.startswith(p):
                name = name[len(p):]
                changed = True
    return name


def find_state_dict(obj, key):
    import torch
    if key is not None:
        if not isinstance(obj, dict) or key not in obj:
            raise SystemExit(f"checkpoint has no entry '{key}' (has: {', '.join(map(str, obj)) if isinstance(obj, dict) else type(obj).__name__})")
        return obj[key]
    if isinstance(obj, dict) and obj and all(isinstance(v, torch.Tensor) for v in obj.values()):
        return obj
    if isinstance(obj, dict):
        for k in CANDIDATES:
            if k in obj and isinstance(obj[k], dict):
                return obj[k]
    if hasattr(obj, "state_dict"):
        return obj.state_dict()
    raise SystemExit("cannot find a state dict in the checkpoint; use --key NAME")


def convert(src, dst, key=None, dtype="f32", unsafe=False, list_only=False):
    import torch
    from safetensors.torch import save_file
    try:
        obj = torch.load(src, map_location="cpu", weights_only=not unsafe)
    except TypeError:  # old torch without weights_only
        obj = torch.load(src, map_location="cpu")
    except Exception as e:  # weights_only refuses pickled objects (e.g. an argparse Namespace under 'args')
        if unsafe:
            raise
        raise SystemExit(f"{src}: torch.load(weights_only=True) refused the file ({type(e).__name__}: "
                         f"{str(e).splitlines()[0] if str(e) else ''}); if you trust it, rerun with --unsafe")
    sd = find_state_dict(obj, key)
    out = {}
    for k, v in sd.items():
        if not isinstance(v, torch.Tensor):
            continue
        n = strip(k)
        if n in out:
            raise SystemExit(f"keys collide after stripping prefixes: '{k}' -> '{n}'")
        t = v.detach().cpu()
        if t.is_floating_point() and dtype == "f32":
            t = t.to(torch.float32)
        out[n] = t.contiguous().clone()
    if not out:
        raise SystemExit("no tensors found")
    if list_only:
        for n, t in out.items():
            print(f"{n}\t{tuple(t.shape)}\t{t.dtype}")
        return out
    save_file(out, dst, metadata={"converted_from": str(src)})
    print(f"wrote {dst}: {len(out)} tensors")
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("src")
    ap.add_argument("dst", nargs="?")
    ap.add_argument("--key", help="entry of the checkpoint dict holding the state dict")
    ap.add_argument("--dtype", choices=("f32", "keep"), default="f32")
    ap.add_argument("--unsafe", action="store_true", help="allow arbitrary pickles (trusted files only)")
    ap.add_argument("--list", action="store_true", help="print the converted keys and shapes, write nothing")
    a = ap.parse_args(argv)
    if not a.list and not a.dst:
        ap.error("OUT.safetensors is required unless --list")
    convert(a.src, a.dst, a.key, a.dtype, a.unsafe, a.list)


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Builds the GPU-shaped programs whose register use decides their occupancy (issue 17) under each
register cap, and prints each build's log: on NVIDIA's OpenCL, with WBCL_BUILD_LOG set, ptxas's
registers, spills and stack per kernel, as the driver itself compiles them (the clang route of
tools/gpu-check.sh is a stand-in). Programs loaded from a cache print nothing, so this script sets
WBCL_BUILD_LOG=1, WBCL_VARIANT=gpu, an empty WBCL_CACHE_DIR of its own and CUDA_CACHE_DISABLE=1 (the
driver's own cache) before loading the library.

    PYTHONPATH=python WBCL_BUILD_DIR=build python3 perf/build_logs.py [--caps 0,128] [--p 64,128]
        [--gemm-tiles 128x8,128x16,64x8]

Per cap: the register-tiled attention program (both forms at p = 32 and 64, one at 96 and 128) at each p,
and the tiled GEMM at each tile x k slice. A cap on a device whose compiler does not take NVIDIA's
options is refused (the line says so); the builds without a cap still print their logs. Nothing is
timed: each call runs once, on a small shape, to make its program build.
"""
import argparse
import os
import shutil
import sys
import tempfile


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--caps", default="0,128", help="register caps to build with (0: none)")
    ap.add_argument("--p", default="64,128", help="head dimensions of the attention programs")
    ap.add_argument("--gemm-tiles", default="128x8,128x16,64x8", help="tiled GEMM tile x k slice")
    a = ap.parse_args()
    os.environ["WBCL_BUILD_LOG"] = "1"
    cache = tempfile.mkdtemp(prefix="wbcl-build-logs-")
    os.environ["WBCL_CACHE_DIR"] = cache
    os.environ["WBCL_VARIANT"] = "gpu"  # the GPU-shaped programs on any device (a GPU's default anyway)
    # NVIDIA's driver keeps compiled kernels in its own cache (~/.nv/ComputeCache) keyed by the PTX; a hit
    # skips ptxas and with it the log, so that cache is off for this process
    os.environ["CUDA_CACHE_DISABLE"] = "1"
    import numpy as np
    import wbcl

    rng = np.random.default_rng(0)
    for cap in (int(c) for c in a.caps.split(",")):
        for p in (int(x) for x in a.p.split(",")):
            q = rng.standard_normal((1, 1, 70, p)).astype(np.float32)
            with wbcl.Context() as ctx:
                try:
                    ctx.set_param("attention.p%d.maxrreg" % p, cap)
                except wbcl.Error as e:
                    print("== attention p %d, cap %d: refused: %s" % (p, cap, e), flush=True)
                    continue
                print("== attention p %d, cap %d (the register-tiled program: both forms at p = 32 / 64, the first at 96 / 128)" % (p, cap), flush=True)
                ctx.set_param("attention.p%d.tiled" % p, 1)
                t = ctx.tensor(q)
                ctx.attention(t, t, t)
                ctx.finish()
        for tile in a.gemm_tiles.split(","):
            tm, tk = (int(x) for x in tile.split("x"))
            x = rng.standard_normal((130, 70)).astype(np.float32)
            with wbcl.Context() as ctx:
                try:
                    ctx.set_param("gemm.tiled.maxrreg", cap)
                except wbcl.Error as e:
                    print("== tiled GEMM %s, cap %d: refused: %s" % (tile, cap, e), flush=True)
                    continue
                print("== tiled GEMM tile %d, k slice %d, cap %d" % (tm, tk, cap), flush=True)
                ctx.set_param("gemm.tiled.tile", tm)
                ctx.set_param("gemm.tiled.tk", tk)
                ctx.gemm_backend = "tiled"
                ctx.gemm(x, x, trans_b=True)
                ctx.finish()
    sys.stderr.flush()
    shutil.rmtree(cache, ignore_errors=True)


if __name__ == "__main__":
    main()

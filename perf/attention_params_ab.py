#!/usr/bin/env python3
"""Fused attention under several kernel-parameter sets (and kernel directories) in one process, calls
interleaved, for A/B measurements of the CPU kernel (issue 17). Each set is one wbcl context; every
round calls each context once, the starting context rotating from round to round, so that all see the
same load. Prints each set's median time, GFLOP/s, the ratio of set 0's median to its own (> 1: faster
than set 0) and the largest difference of its output from set 0's.

    PYTHONPATH=python WBCL_BUILD_DIR=build python3 perf/attention_params_ab.py MODE REPS B,K,N,p SET0 SET1 ...

MODE softmax, causal or mssa; a SET is "KEY=VALUE KEY=VALUE ..." (wbcl_context_set_param keys; scope
attention keys by head dimension, attention.p64.qb, to outrank a shipped table's scoped keys), "-" for
the context's own parameters, and may start with "DIR|" to build that context's kernels from the .cl
files in DIR (WBCL_KERNEL_DIR) instead of the built-in ones. On a shared machine one process can carry a
few per cent of bias between its contexts (perf/RESULTS.md, eleventh session): repeat with the sets in
the other order in another process.
"""
import os
import statistics
import sys
import time

import numpy as np
import wbcl


def main():
    if len(sys.argv) < 5:
        sys.exit(__doc__)
    mode, reps = sys.argv[1], int(sys.argv[2])
    B, K, N, p = (int(x) for x in sys.argv[3].split(","))
    specs = sys.argv[4:]
    if mode not in ("softmax", "causal", "mssa"):
        sys.exit("MODE must be softmax, causal or mssa")
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((B, K, N, p)).astype(np.float32) for _ in range(3))
    ctxs = []
    for s in specs:
        kdir, _, params = s.rpartition("|")
        os.environ.pop("WBCL_KERNEL_DIR", None)
        if kdir:
            os.environ["WBCL_KERNEL_DIR"] = kdir
        c = wbcl.Context()
        for kv in params.split():
            if kv == "-":
                continue
            key, val = kv.split("=")
            c.set_param(key, int(val))
        ctxs.append(c)

    def call(c):
        dq, dk, dv = c.tensor(q), c.tensor(k), c.tensor(v)
        if mode == "mssa":
            return lambda: c.mssa(dq, keep=True)
        return lambda: c.attention(dq, dk, dv, causal=(mode == "causal"), keep=True)

    fs = [call(c) for c in ctxs]
    outs = []
    for c, f in zip(ctxs, fs):  # warm-up: builds the programs
        o = f()
        c.finish()
        outs.append(o.numpy())
        o.close()
    ts = [[] for _ in fs]
    for r in range(reps):
        order = list(range(len(fs)))
        order = order[r % len(fs):] + order[:r % len(fs)]
        for j in order:
            t0 = time.perf_counter()
            o = fs[j]()
            ctxs[j].finish()
            ts[j].append(time.perf_counter() - t0)
            o.close()
    flops = 4 * B * K * N * N * p * (0.5 if mode == "causal" else 1)
    m0 = statistics.median(ts[0])
    for j, s in enumerate(specs):
        m = statistics.median(ts[j])
        print("%-8s B%d K%d N%d p%d  set %d  %8.2f ms  %6.1f GFLOP/s  set0/set%d %.3f  max|diff| %.1e  [%s]"
              % (mode, B, K, N, p, j, 1e3 * m, flops / m / 1e9, j, m0 / m,
                 float(np.abs(outs[j] - outs[0]).max()), s))


if __name__ == "__main__":
    main()

"""One model's time on every device found: the character-level ToST-LM that ships with the tests
(tests/data/lm, d 128, 4 layers, context 256): a full forward of 256 tokens and 64 decoded tokens,
median of 5, per device, the same ids on each (the logits are checked against the first device's).

    python3 python/examples/compare_devices.py
"""
import os
import statistics
import time

import numpy as np

import wbcl

HERE = os.path.dirname(os.path.abspath(__file__))
WEIGHTS = os.path.join(HERE, "..", "..", "tests", "data", "lm", "kjv_tost_lm.safetensors")


def timed(f, reps=5):
    f()  # warm-up: kernels compile on first use
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        f()
        ts.append(time.perf_counter() - t)
    return statistics.median(ts)


def main():
    ids = np.random.default_rng(0).integers(0, 60, (1, 256))
    first = None
    print("%-4s %-40s %-4s %12s %14s %10s" % ("dev", "name", "type", "forward ms", "decode tok/s", "max diff"))
    for d in wbcl.devices():
        try:
            ctx = wbcl.Context(str(d["index"]))
        except wbcl.Error as e:
            print("%-4d %-40s skipped: %s" % (d["index"], d["name"][:40], e))
            continue
        with ctx:
            lm = wbcl.LM(ctx, "tost_lm", WEIGHTS, heads=4)
            logits = lm.forward(ids)
            if first is None:
                first = logits
            t_fwd = timed(lambda: lm.forward(ids))
            t_dec = timed(lambda: list(lm.generate(ids[0, :16], tokens=64)), reps=3)
            print("%-4d %-40s %-4s %12.2f %14.1f %10.2e" % (d["index"], d["name"][:40], d["type"], 1e3 * t_fwd,
                                                           64 / t_dec, np.abs(logits - first).max()))


if __name__ == "__main__":
    main()

"""Shared by the same-process peers (attention_sdpa_paired.py, energy_torch_paired.py): wbcl and the peer
called in turn, so that both see the same load."""
import statistics
import time


def alternate(ctx, fw, ft, reps):
    """Medians (seconds) of reps calls of fw (a wbcl call returning a tensor, waited for with ctx.finish()
    and closed) and of ft (the peer's call, which waits for its device itself), called in turn."""
    tw, tt = [], []
    for _ in range(reps):
        t = time.perf_counter()
        o = fw()
        ctx.finish()
        tw.append(time.perf_counter() - t)
        o.close()
        t = time.perf_counter()
        ft()
        tt.append(time.perf_counter() - t)
    return statistics.median(tw), statistics.median(tt)

#!/bin/sh
# The ToST paper's Fig. 8 on this machine: decode time per generated token and memory against the
# number of tokens in the sequence (128 ... 8192), GPT-2 Base shape (d 768, K 12, 12 layers,
# V 50257, random weights), batch 1, for gpt2 (softmax attention over a growing key/value cache)
# and tost_lm (causal TSSA's constant-size recurrent state) in wbcl (perf/bench_lm_decode) and in
# PyTorch on the CPU (perf/peers/lm_decode_torch.py, 2 threads), the two run back to back per
# model in this script, each reporting the lowest of ROUNDS (5) rounds' medians of 12 steps; the
# whole pair is run PASSES (2) times, alternating, and each point keeps its lowest time over the
# passes (the 2 shared cores see bursts of other jobs lasting seconds: the quietest sample of
# each side is the comparable one).
# Writes perf/lm_decode_fig8.csv (impl,model,tokens,ms_per_token,state_mib) and
# perf/lm_decode_fig8.svg, and prints the issue's checks: tost_lm's time at 8192 over 512 tokens
# (flat: <= 1.2) and wbcl's tokens per second over PyTorch's at every point.
#
#   perf/lm_decode_fig8.sh [BUILD_DIR]     (default ./build; needs perf/bench_lm_decode)
# Environment: LENGTHS (comma list), PYTHON (one that imports torch; default python3),
#   DEVICE (wbcl --device selector), ROUNDS, PASSES. Not part of CI: about 20 minutes on 2 cores.
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$ROOT/build}
LENGTHS=${LENGTHS:-128,512,1024,2048,4096,8192}
PY=${PYTHON:-python3}
BENCH=$BUILD/perf/bench_lm_decode
[ -x "$BENCH" ] || { echo "lm_decode_fig8.sh: $BENCH not found (build the perf targets)" >&2; exit 1; }
$PY -c "import torch" 2>/dev/null || { echo "lm_decode_fig8.sh: $PY cannot import torch (PYTHON=...)" >&2; exit 1; }
export POCL_AFFINITY=${POCL_AFFINITY:-1}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
ROUNDS=${ROUNDS:-5}
PASSES=${PASSES:-2}
pass=1
while [ $pass -le "$PASSES" ]; do
  for model in gpt2 tost_lm; do
    "$BENCH" ${DEVICE:+--device "$DEVICE"} --models $model --lengths "$LENGTHS" --steps 12 --rounds "$ROUNDS" \
      --csv "$TMP/wbcl_${model}_$pass.csv" 2>"$TMP/wbcl.err" || { cat "$TMP/wbcl.err" >&2; exit 1; }
    $PY "$ROOT/perf/peers/lm_decode_torch.py" --models $model --lengths "$LENGTHS" --steps 12 --rounds "$ROUNDS" \
      --csv "$TMP/torch_${model}_$pass.csv" >/dev/null
    echo "lm_decode_fig8.sh: pass $pass: $model done" >&2
  done
  pass=$((pass + 1))
done
python3 - "$TMP" "$ROOT/perf/lm_decode_fig8.csv" "$ROOT/perf/lm_decode_fig8.svg" <<'PYEOF'
import csv, glob, math, sys
tmp, out_csv, out_svg = sys.argv[1:4]
best = {}  # (impl, model, tokens) -> (impl, model, tokens, ms, state_mib): the lowest time over the passes
def add(r):
    k = r[:3]
    if k not in best or r[3] < best[k][3]:
        best[k] = r
for f in sorted(glob.glob(tmp + "/wbcl_*.csv")):
    for r in csv.DictReader(open(f)):
        add(("wbcl", r["model"], int(r["tokens"]), float(r["ms_per_token"]), int(r["state_bytes"]) / 2**20))
for f in sorted(glob.glob(tmp + "/torch_*.csv")):
    for r in csv.DictReader(open(f)):
        add(("torch", r["model"], int(r["tokens"]), float(r["ms_per_token"]), float(r["state_mib"])))
rows = sorted(best.values(), key=lambda r: (r[0], r[1], r[2]))
with open(out_csv, "w") as f:
    f.write("impl,model,tokens,ms_per_token,state_mib\n")
    for r in rows:
        f.write("%s,%s,%d,%.4f,%.3f\n" % r)
pt = {(r[0], r[1], r[2]): r for r in rows}
print("tokens  model    wbcl ms  torch ms  wbcl/torch tok/s")
for (impl, model, t), r in sorted(pt.items(), key=lambda kv: (kv[0][1], kv[0][2])):
    if impl == "wbcl" and ("torch", model, t) in pt:
        tr = pt[("torch", model, t)]
        print("%6d  %-7s %8.2f  %8.2f  %6.2f" % (t, model, r[3], tr[3], tr[3] / r[3]))
for impl in ("wbcl", "torch"):
    a, b = pt.get((impl, "tost_lm", 512)), pt.get((impl, "tost_lm", 8192))
    if a and b:
        print("%s tost_lm time per token at 8192 / 512 tokens: %.3f (flat: <= 1.2)" % (impl, b[3] / a[3]))
# SVG: two panels, log2 x (tokens); left ms per token, right cache/state MiB (log y)
W, H, PW, PH, M = 980, 450, 400, 300, 60
colors = {("wbcl", "gpt2"): "#d62728", ("torch", "gpt2"): "#ff9896", ("wbcl", "tost_lm"): "#1f77b4",
          ("torch", "tost_lm"): "#aec7e8"}
series = {}
for r in rows:
    series.setdefault((r[0], r[1]), []).append(r)
toks = sorted({r[2] for r in rows})
def panel(x0, title, ylab, val, logy):
    vals = [val(r) for r in rows if val(r) > 0]
    lo, hi = (min(vals), max(vals))
    if logy:
        lo, hi = math.log10(lo) - 0.1, math.log10(hi) + 0.1
    else:
        lo, hi = 0.0, hi * 1.1
    fx = lambda t: x0 + PW * (math.log2(t) - math.log2(toks[0])) / max(1e-9, math.log2(toks[-1]) - math.log2(toks[0]))
    fy = lambda v: M + PH - PH * (((math.log10(v) if logy else v) - lo) / (hi - lo))
    s = ['<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#333"/>' % (x0, M, PW, PH),
         '<text x="%d" y="%d" font-size="14" text-anchor="middle">%s</text>' % (x0 + PW / 2, M - 12, title),
         '<text x="%d" y="%d" font-size="12" text-anchor="middle">tokens in the sequence</text>' % (x0 + PW / 2, M + PH + 36),
         '<text x="%d" y="%d" font-size="12" text-anchor="middle" transform="rotate(-90 %d %d)">%s</text>'
         % (x0 - 45, M + PH / 2, x0 - 45, M + PH / 2, ylab)]
    for t in toks:
        s.append('<text x="%.1f" y="%d" font-size="10" text-anchor="middle">%d</text>' % (fx(t), M + PH + 16, t))
    for i in range(5):
        v = lo + (hi - lo) * i / 4
        lab = 10 ** v if logy else v
        s.append('<text x="%d" y="%.1f" font-size="10" text-anchor="end">%.3g</text>' % (x0 - 4, fy(10 ** v if logy else v) + 3, lab))
    for key, rs in sorted(series.items()):
        pts = [(fx(r[2]), fy(val(r))) for r in sorted(rs, key=lambda r: r[2]) if val(r) > 0]
        s.append('<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>'
                 % (colors[key], " ".join("%.1f,%.1f" % p for p in pts)))
        s += ['<circle cx="%.1f" cy="%.1f" r="3" fill="%s"/>' % (p[0], p[1], colors[key]) for p in pts]
    return s
body = panel(M + 20, "time per generated token (batch 1)", "ms per token", lambda r: r[3], False)
body += panel(M + 20 + PW + 110, "cache / recurrent state", "MiB (log)", lambda r: r[4], True)
ly = H - 22
for i, (key, c) in enumerate(sorted(colors.items())):
    body.append('<rect x="%d" y="%d" width="14" height="4" fill="%s"/><text x="%d" y="%d" font-size="11">%s %s</text>'
                % (80 + 200 * i, ly, c, 98 + 200 * i, ly + 5, key[0], key[1]))
open(out_svg, "w").write('<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif">\n'
                         % (W, H) + "\n".join(body) + "\n</svg>\n")
print("wrote", out_csv, "and", out_svg)
PYEOF

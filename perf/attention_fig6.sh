#!/bin/sh
# The ToST paper's App. D.2 comparison (Fig. 6 left) on this machine: one attention layer with
# its projections, K = 8 heads, d = 384, batch 1, n = 256 ... 16384, for softmax (ViT), MSSA
# (CRATE), XCA (XCiT) and TSSA (ToST) in wbcl, with the peers OpenBLAS GEMM + C softmax
# (interleaved in the same process, perf/bench_attention.c) and PyTorch on the CPU
# (perf/peers/attention_torch.py: the reference modules and scaled_dot_product_attention),
# alternating per n. Writes perf/attention_fig6.csv (median time, GFLOP/s and peak memory per
# layer and n), perf/attention_fig6.svg (time and memory against n, log-log) and prints the
# target ratios at n = 4096 and the memory growth exponents.
#
#   perf/attention_fig6.sh [BUILD_DIR]            (default: ./build; needs perf/bench_attention)
# Environment: NS (comma list of n), REPS (5), PYTHON (python3; the one with torch),
#   TORCH=auto|0|install (auto: run the PyTorch peers if torch imports; install: pip install it),
#   MAX_QUADRATIC_MB (2048: n x n score buffers larger than this are skipped).
# Not part of CI: it runs for several minutes and needs an idle machine for stable absolutes
# (the ratios are what the results quote).
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$ROOT/build}
NS=${NS:-256,512,1024,2048,4096,8192,16384}
REPS=${REPS:-5}
PY=${PYTHON:-python3}
TORCH=${TORCH:-auto}
MAXQ=${MAX_QUADRATIC_MB:-2048}
BENCH=$BUILD/perf/bench_attention
OUT_CSV=$ROOT/perf/attention_fig6.csv
OUT_SVG=$ROOT/perf/attention_fig6.svg
[ -x "$BENCH" ] || { echo "attention_fig6.sh: $BENCH not found (build the perf targets)" >&2; exit 1; }
export POCL_AFFINITY=${POCL_AFFINITY:-1} OPENBLAS_THREAD_TIMEOUT=${OPENBLAS_THREAD_TIMEOUT:-1}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

torch_args=""
case $TORCH in
  0) use_torch=0 ;;
  install) use_torch=1; torch_args="--install" ;;
  *) if $PY -c "import torch" 2>/dev/null; then use_torch=1; else use_torch=0
       echo "attention_fig6.sh: torch not importable by $PY: PyTorch peers skipped (TORCH=install)" >&2; fi ;;
esac

for n in $(echo "$NS" | tr ',' ' '); do
  "$BENCH" --n "$n" --reps "$REPS" --max-quadratic-mb "$MAXQ" --csv "$TMP/wbcl_$n.csv"
  if [ "$use_torch" = 1 ]; then
    lib=""
    [ -f "$BUILD/libwbcl.so" ] && lib="--wbcl-lib $BUILD/libwbcl.so"
    $PY "$ROOT/perf/peers/attention_torch.py" $torch_args $lib --n "$n" --reps "$REPS" \
        --max-quadratic-mb "$((2 * MAXQ))" --csv "$TMP/torch.csv"
    torch_args=""
  fi
done

{
  head -n 1 "$(ls "$TMP"/wbcl_*.csv | head -n 1)"
  for f in "$TMP"/wbcl_*.csv; do tail -n +2 "$f"; done
  [ -f "$TMP/torch.csv" ] && tail -n +2 "$TMP/torch.csv"
  true
} > "$OUT_CSV"

python3 - "$OUT_CSV" "$OUT_SVG" <<'EOF'
import csv, math, sys
rows = list(csv.DictReader(open(sys.argv[1])))
def f(x):
    try:
        v = float(x)
        return v if math.isfinite(v) else None
    except ValueError:
        return None
data = {}
for r in rows:
    data.setdefault(r["impl"] + "." + r["variant"], {})[int(r["n"])] = (f(r["median_ms"]), f(r["gflops"]), f(r["peak_mib"]))
def get(name, n, k):
    v = data.get(name, {}).get(n)
    return None if v is None else v[k]

# ---- ratios (speed = time(peer) / time(wbcl)) and memory growth --------------------------------
ns = sorted({int(r["n"]) for r in rows})
print("\n## target ratios (same run)\n")
print("speed ratios wbcl / peer (time(peer) / time(wbcl)); 'interleaved': calls alternate in one process;")
print("'separate': the peer ran in its own process just after (same n); kernel: GFLOP/s over SGEMM GFLOP/s\n")
print("| n | softmax / OpenBLAS+C (interleaved) | MSSA / OpenBLAS+C (interleaved) | softmax / torch SDPA (interleaved) | softmax / torch ref (interleaved) | MSSA / torch ref (interleaved) | softmax / torch SDPA (separate) | kernel / SGEMM FLOP rate (interleaved) |")
print("|---|---|---|---|---|---|---|---|")
def ratio(a, b, n, k=0):
    x, y = get(a, n, k), get(b, n, k)
    if x is None or y is None or x == 0: return "-"
    return "%.2f" % ((y / x) if k == 0 else (x / y))
for n in ns:
    print("| %d | %s | %s | %s | %s | %s | %s | %s |" % (n, ratio("wbcl.softmax", "openblas.softmax", n),
          ratio("wbcl.mssa", "openblas.mssa", n), ratio("wbcl@torch.softmax_vs_sdpa", "torch.sdpa", n),
          ratio("wbcl@torch.softmax_vs_softmax", "torch.softmax", n), ratio("wbcl@torch.mssa_vs_mssa", "torch.mssa", n),
          ratio("wbcl.softmax", "torch.sdpa", n), ratio("wbcl.softmax_kernel", "openblas.sgemm1536", n, 1)))
print("\n## peak memory growth: exponent e of mem ~ n^e between the two largest n measured\n")
print("| layer | n range | MiB | exponent |\n|---|---|---|---|")
for name in sorted(data):
    if name.endswith(("sgemm1536",)) or "@" in name: continue
    pts = [(n, v[2]) for n, v in sorted(data[name].items()) if v[2] and v[2] > 0]
    if len(pts) >= 2:
        (n0, m0), (n1, m1) = pts[-2], pts[-1]
        print("| %s | %d-%d | %.1f-%.1f | %.2f |" % (name, n0, n1, m0, m1, math.log(m1 / m0) / math.log(n1 / n0)))

# ---- SVG: time and memory against n, log-log ------------------------------------------------------
colors = {"softmax": "#d62728", "sdpa": "#ff7f0e", "mssa": "#1f77b4", "xca": "#2ca02c", "tssa": "#9467bd"}
dashes = {"wbcl": "", "openblas": "6,3", "torch": "2,3"}
series = [s for s in sorted(data) if "@" not in s and s.split(".", 1)[1] in colors]
W, H, PW, PH, ML, MT = 980, 420, 380, 300, 70, 40
def panel(x0, k, title, ylabel):
    pts = [(n, v[k]) for s in series for n, v in data[s].items() if v[k] and v[k] > 0]
    if not pts: return ""
    lx0, lx1 = math.log10(min(p[0] for p in pts)), math.log10(max(p[0] for p in pts))
    ly0, ly1 = math.floor(math.log10(min(p[1] for p in pts))), math.ceil(math.log10(max(p[1] for p in pts)))
    if lx1 == lx0: lx1 = lx0 + 1
    if ly1 == ly0: ly1 = ly0 + 1
    X = lambda n: x0 + (math.log10(n) - lx0) / (lx1 - lx0) * PW
    Y = lambda v: MT + PH - (math.log10(v) - ly0) / (ly1 - ly0) * PH
    o = ['<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#444"/>' % (x0, MT, PW, PH),
         '<text x="%d" y="%d" font-size="14" text-anchor="middle">%s</text>' % (x0 + PW / 2, MT - 12, title),
         '<text x="%d" y="%d" font-size="12" text-anchor="middle" transform="rotate(-90 %d %d)">%s</text>' %
         (x0 - 50, MT + PH / 2, x0 - 50, MT + PH / 2, ylabel),
         '<text x="%d" y="%d" font-size="12" text-anchor="middle">tokens n</text>' % (x0 + PW / 2, MT + PH + 34)]
    for e in range(ly0, ly1 + 1):
        y = Y(10 ** e)
        o.append('<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#ddd"/>' % (x0, y, x0 + PW, y))
        o.append('<text x="%d" y="%.1f" font-size="11" text-anchor="end">1e%d</text>' % (x0 - 4, y + 4, e))
    for n in ns:
        x = X(n)
        o.append('<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#eee"/>' % (x, MT, x, MT + PH))
        o.append('<text x="%.1f" y="%d" font-size="10" text-anchor="middle">%d</text>' % (x, MT + PH + 16, n))
    for s in series:
        impl, var = s.split(".", 1)
        p = sorted((n, v[k]) for n, v in data[s].items() if v[k] and v[k] > 0)
        if not p: continue
        path = " ".join("%.1f,%.1f" % (X(n), Y(v)) for n, v in p)
        o.append('<polyline points="%s" fill="none" stroke="%s" stroke-width="2" stroke-dasharray="%s"/>' %
                 (path, colors[var], dashes.get(impl, "")))
        for n, v in p:
            o.append('<circle cx="%.1f" cy="%.1f" r="2.5" fill="%s"/>' % (X(n), Y(v), colors[var]))
    return "\n".join(o)
legend = []
for i, s in enumerate(series):
    impl, var = s.split(".", 1)
    y = MT + 14 + 16 * i
    legend.append('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2" stroke-dasharray="%s"/>' %
                  (2 * (ML + PW) + 30, y, 2 * (ML + PW) + 60, y, colors[var], dashes.get(impl, "")))
    legend.append('<text x="%d" y="%d" font-size="11">%s</text>' % (2 * (ML + PW) + 66, y + 4, s))
dev = rows[0]["device"] if rows else ""
svg = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif">' % (W + 150, H),
       '<rect width="100%" height="100%" fill="white"/>',
       panel(ML, 0, "median time of one layer (ms)", "ms"),
       panel(2 * ML + PW, 2, "peak memory (MiB)", "MiB"),
       "\n".join(legend),
       '<text x="%d" y="%d" font-size="10" fill="#555">K = 8, d = 384, batch 1; %s; solid wbcl, dashed OpenBLAS + C softmax, dotted PyTorch CPU</text>' % (ML, H - 10, dev),
       "</svg>"]
open(sys.argv[2], "w").write("\n".join(svg) + "\n")
print("\nwrote %s and %s" % (sys.argv[1], sys.argv[2]))
EOF

#!/usr/bin/env bash
# Shift-invariant ReduNet benchmark (issue 6): wbcl's per-frequency construction (perf/bench_circulant.c)
# against (1) a NumPy peer written from SPEC.md §4.2 (perf/peers/circulant_numpy.py), interleaved round by
# round on the same data, and (2) the dense block-circulant construction it replaces (OpenBLAS ssyrk +
# spotrf + spotri on the (T C) x (T C) matrices), measured at T C = 200..2000 and extrapolated as
# O((T C)^3) to T C = 4000. Writes a Markdown table to stdout, the scaling data to perf/circulant_scaling.csv
# and a log-log plot to perf/circulant_scaling.svg.
#
# Usage: perf/run_circulant.sh [BUILD_DIR] [ROUNDS]     (defaults: build, 5)
#   PYTHON=/path/to/python-with-numpy (default python3) runs the NumPy peer; WBCL_DEVICE selects the device.
#   CASES="1d 2d" (default) selects the cases; SCALING=0 skips the dense scaling part (and leaves
#   perf/circulant_scaling.csv and .svg alone; it also needs the 1d case).
#   TORCH_PEER=cuda|cpu adds a second peer, PyTorch (perf/peers/circulant_torch.py, complex64, TF32 off, on
#   that torch device): each round then also runs one timed torch fit after the NumPy one, and the table
#   gains the torch median per layer, the ratio torch / wbcl (> 1: wbcl faster) and torch's final dR.
#   TORCH_PY=/path/to/python-with-torch (default python3) runs it; TORCH_ARGS adds arguments to it
#   (e.g. "--threads 1" on a small shared CPU, "--inverse cholesky"). Without TORCH_PEER nothing changes.
# Cases: 1d  m = 100 (10 classes x 10), C = 20, T = 200 | 2d  m = 100, C = 16, 28 x 28; K = 10, L = 5 layers
# per timed fit (construction + application + the logged objective per layer), eta .5, eps2 .1, lambda 500.
# Each round also times wbcl with --every-layer: the objective computed for every layer as the NumPy peer
# does (by default wbcl takes a layer's objective from the next layer's construction when every prediction
# is right: the same matrices) and read back per layer.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
rounds=${2:-5}
py=${PYTHON:-python3}
bench="$build/perf/bench_circulant"
peer=perf/peers/circulant_numpy.py
cases=${CASES:-"1d 2d"}
scaling=${SCALING:-1}
case " $cases " in *" 1d "*) ;; *) scaling=0 ;; esac   # the scaling part uses the 1d rounds
torch_dev=${TORCH_PEER:-}
torch_py=${TORCH_PY:-python3}
tpeer=perf/peers/circulant_torch.py
[ -x "$bench" ] || { echo "run_circulant.sh: $bench not built (cmake --build $build)" >&2; exit 1; }
export POCL_CACHE_DIR=${POCL_CACHE_DIR:-$PWD/$build/cache/pocl}
export WBCL_CACHE_DIR=${WBCL_CACHE_DIR:-$PWD/$build/cache/wbcl}
export OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-2}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$bench" --write-data "$tmp"
L=5

echo "device: $("$bench" --device-info)"
echo "peer:   $("$py" -c 'import numpy, sys; print("NumPy", numpy.__version__, "Python", sys.version.split()[0])')"
echo "host:   $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), load $(cut -d' ' -f1-3 /proc/loadavg)"
if [ -n "$torch_dev" ]; then
  echo "torch:  $("$torch_py" -c 'import sys, torch; d = sys.argv[1]; print("PyTorch", torch.__version__, "on", d, torch.cuda.get_device_name() if d.startswith("cuda") else "(torch default %d threads)" % torch.get_num_threads(), "complex64, TF32 off")' "$torch_dev") ${TORCH_ARGS:-}"
  echo "rounds: $rounds (interleaved wbcl / numpy / torch / wbcl --every-layer), $L layers per fit"
else
  echo "rounds: $rounds (interleaved wbcl / numpy / wbcl --every-layer), $L layers per fit"
fi
for c in $cases; do
  for r in $(seq "$rounds"); do
    "$bench" --case "$c" --layers "$L" --reps 1 2>/dev/null >>"$tmp/$c.wbcl"
    "$py" "$peer" --x "$tmp/${c}_x.npy" --y "$tmp/${c}_y.npy" --layers "$L" --reps 1 >>"$tmp/$c.numpy"
    if [ -n "$torch_dev" ]; then
      # shellcheck disable=SC2086
      "$torch_py" "$tpeer" --x "$tmp/${c}_x.npy" --y "$tmp/${c}_y.npy" --layers "$L" --reps 1 \
        --device "$torch_dev" ${TORCH_ARGS:-} >>"$tmp/$c.torch"
    fi
    "$bench" --case "$c" --layers "$L" --reps 1 --every-layer 2>/dev/null >>"$tmp/$c.every"
  done
done
# scaling: C = 20, T = 10 .. 100 (n = T C = 200 .. 2000), dense and wbcl; T = 200 (n = 4000) wbcl only
if [ "$scaling" != 0 ]; then
  for T in 10 25 50 100; do
    "$bench" --dense 20 "$T" --reps 3 >>"$tmp/dense"
    "$bench" --size 20 "$T" --layers "$L" --reps 3 2>/dev/null | sed "s/^/$T /" >>"$tmp/scale"
  done
  grep -h . "$tmp/1d.wbcl" | sed "s/^/200 /" >>"$tmp/scale"
fi

python3 - "$tmp" "$cases" "$scaling" "$torch_dev" <<'PY'
import math, statistics, sys
tmp, cases, scaling, torch_dev = sys.argv[1], sys.argv[2].split(), sys.argv[3] != "0", sys.argv[4]
def rows(path):
    return [l.split() for l in open(path) if l.strip()]
print()
if torch_dev:
    print(f"| case | wbcl median per layer | NumPy (float32) median per layer | NumPy / wbcl | torch ({torch_dev}, float32) "
          "median per layer | torch / wbcl | final dR wbcl / NumPy / torch | wbcl, objective of every layer "
          "| NumPy / that | torch / that |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
else:
    print("| case | wbcl median per layer | NumPy (float32) median per layer | NumPy / wbcl | final dR wbcl / NumPy "
          "| wbcl, objective of every layer | NumPy / that |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
desc = {"1d": "1-D: m=100, C=20, T=200, K=10", "2d": "2-D: m=100, C=16, 28x28, K=10"}
for c in cases:
    w = [r for r in rows(f"{tmp}/{c}.wbcl") if r[0] == "wbcl"]
    n = rows(f"{tmp}/{c}.numpy")
    tw = [float(r[1]) for r in w]
    tn = [float(r[1]) for r in n]
    te = [float(r[1]) for r in rows(f"{tmp}/{c}.every") if r[0] == "wbcl"]
    mw, mn, me = statistics.median(tw), statistics.median(tn), statistics.median(te)
    if torch_dev:
        t = rows(f"{tmp}/{c}.torch")
        tt = [float(r[1]) for r in t]
        mt = statistics.median(tt)
        print(f"| {desc[c]} | {1e3 * mw:.1f} ms | {1e3 * mn:.1f} ms | **{mn / mw:.1f}x** (min {min(tn) / max(tw):.1f}x, "
              f"max {max(tn) / min(tw):.1f}x) | {1e3 * mt:.2f} ms | **{mt / mw:.1f}x** (min {min(tt) / max(tw):.1f}x, "
              f"max {max(tt) / min(tw):.1f}x) | {w[-1][2]} / {n[-1][2]} / {t[-1][2]} | {1e3 * me:.1f} ms | {mn / me:.1f}x "
              f"| {mt / me:.1f}x |")
    else:
        print(f"| {desc[c]} | {1e3 * mw:.1f} ms | {1e3 * mn:.1f} ms | **{mn / mw:.1f}x** (min {min(tn) / max(tw):.1f}x, "
              f"max {max(tn) / min(tw):.1f}x) | {w[-1][2]} / {n[-1][2]} | {1e3 * me:.1f} ms | {mn / me:.1f}x |")
cons = {c: statistics.median(float(r[1]) for r in rows(f"{tmp}/{c}.wbcl") if r[0] == "construct") for c in cases}
names = {"1d": "1-D", "2d": "2-D"}
print(f"\nwbcl construction alone (per-frequency Gram + Cholesky + E_p, C_jp + objective; best 1-layer fit minus "
      f"1-layer apply, median over the rounds): " + ", ".join(f"{names[c]} {1e3 * cons[c]:.1f} ms" for c in cases))
if not scaling:
    sys.exit(0)
dense = {int(r[1]): float(r[2]) for r in rows(f"{tmp}/dense")}
scale = {}
for r in rows(f"{tmp}/scale"):
    T = int(r[0])
    d = scale.setdefault(T * 20, {"layer": [], "construct": []})
    if r[1] == "wbcl":
        d["layer"].append(float(r[2]))
    elif r[1] == "construct":
        d["construct"].append(float(r[2]))
# O(n^3) fit through the two largest dense sizes (least squares of log t - 3 log n)
big = sorted(dense)[-2:]
a = math.exp(sum(math.log(dense[n]) - 3 * math.log(n) for n in big) / len(big))
ext = a * 4000 ** 3
lay4000 = statistics.median(scale[4000]["layer"])
con4000 = statistics.median(scale[4000]["construct"])
print("\n| T C (C = 20) | dense construction (OpenBLAS) | wbcl construction | wbcl whole layer | dense / wbcl construction | dense / wbcl layer |")
print("| --- | --- | --- | --- | --- | --- |")
with open("perf/circulant_scaling.csv", "w") as f:
    f.write("n,dense_s,dense_extrapolated,wbcl_construct_s,wbcl_layer_s\n")
    for n in sorted(set(dense) | set(scale)):
        dv, extp = (dense[n], 0) if n in dense else (a * n ** 3, 1)
        cv = statistics.median(scale[n]["construct"]) if n in scale and scale[n]["construct"] else float("nan")
        if not cv > 0: cv = float("nan")  # a difference of two noisy times
        lv = statistics.median(scale[n]["layer"]) if n in scale and scale[n]["layer"] else float("nan")
        f.write(f"{n},{dv:.6g},{extp},{cv:.6g},{lv:.6g}\n")
        tag = " (extrapolated)" if extp else ""
        print(f"| {n} | {dv * 1e3:.1f} ms{tag} | {cv * 1e3:.2f} ms | {lv * 1e3:.2f} ms | {dv / cv:.0f}x | {dv / lv:.0f}x |")
# SVG, log-log
W, H, x0, y0, pw, ph = 720, 440, 80, 30, 560, 340
pts = [(n, v) for n, v in dense.items()] + [(4000, ext)]
allv = [v for _, v in pts] + [v for d in scale.values() for v in d["layer"] + d["construct"] if v > 0]
lo, hi = math.log10(min(allv)) - 0.2, math.log10(max(allv)) + 0.2
nlo, nhi = math.log10(150), math.log10(5000)
X = lambda n: x0 + pw * (math.log10(n) - nlo) / (nhi - nlo)
Y = lambda v: y0 + ph - ph * (math.log10(v) - lo) / (hi - lo)
out = [f'<?xml version="1.0" encoding="UTF-8"?>\n<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" '
       f'viewBox="0 0 {W} {H}" font-family="sans-serif" font-size="12">',
       '<rect width="100%" height="100%" fill="white"/>',
       f'<text x="{x0 + pw / 2}" y="18" text-anchor="middle">Shift-invariant ReduNet layer construction, C = 20, m = 100, K = 10</text>',
       f'<rect x="{x0}" y="{y0}" width="{pw}" height="{ph}" fill="none" stroke="black"/>']
for e in range(math.ceil(lo), math.floor(hi) + 1):
    y = Y(10 ** e)
    out.append(f'<line x1="{x0}" y1="{y:.1f}" x2="{x0 + pw}" y2="{y:.1f}" stroke="#ddd"/><text x="{x0 - 6}" y="{y + 4:.1f}" text-anchor="end">1e{e} s</text>')
for n in (200, 500, 1000, 2000, 4000):
    x = X(n)
    out.append(f'<line x1="{x:.1f}" y1="{y0}" x2="{x:.1f}" y2="{y0 + ph}" stroke="#eee"/><text x="{x:.1f}" y="{y0 + ph + 16}" text-anchor="middle">{n}</text>')
out.append(f'<text x="{x0 + pw / 2}" y="{y0 + ph + 34}" text-anchor="middle">T C (size of the dense operator)</text>')
def series(points, color, dash=""):
    d = " ".join(f"{X(n):.1f},{Y(v):.1f}" for n, v in points)
    s = f'<polyline fill="none" stroke="{color}" stroke-width="2" {dash} points="{d}"/>'
    s += "".join(f'<circle cx="{X(n):.1f}" cy="{Y(v):.1f}" r="3" fill="{color}"/>' for n, v in points)
    return s
ds = sorted(dense.items())
out.append(series(ds, "#d62728"))
out.append(series([ds[-1], (4000, ext)], "#d62728", 'stroke-dasharray="6,4"'))
out.append(series(sorted((n, statistics.median(d["construct"])) for n, d in scale.items() if statistics.median(d["construct"]) > 0), "#1f77b4"))
out.append(series(sorted((n, statistics.median(d["layer"])) for n, d in scale.items()), "#2ca02c"))
leg = [("#d62728", "dense block-circulant construction, OpenBLAS (dashed: O((TC)^3) extrapolation)"),
       ("#1f77b4", "wbcl construction per frequency, O(m C^2 T + T C^3)"), ("#2ca02c", "wbcl whole layer (construction, application, objective)")]
for i, (col, txt) in enumerate(leg):
    y = y0 + 16 + 16 * i
    out.append(f'<line x1="{x0 + 10}" y1="{y}" x2="{x0 + 30}" y2="{y}" stroke="{col}" stroke-width="2"/><text x="{x0 + 36}" y="{y + 4}">{txt}</text>')
out.append("</svg>\n")
open("perf/circulant_scaling.svg", "w").write("\n".join(out))
print(f"\nAt T C = 4000: dense {ext:.2f} s (extrapolated from n = {big[0]}, {big[1]}: {dense[big[0]]:.3f} s, {dense[big[1]]:.3f} s), "
      f"wbcl construction {con4000 * 1e3:.1f} ms ({ext / con4000:.0f}x), whole layer {lay4000 * 1e3:.1f} ms ({ext / lay4000:.0f}x)")
print("wrote perf/circulant_scaling.csv, perf/circulant_scaling.svg")
PY

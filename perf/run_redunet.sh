#!/usr/bin/env bash
# ReduNet benchmark: wbcl's vector ReduNet (perf/bench_redunet.c) against a NumPy/OpenBLAS peer written
# from SPEC.md §4.1 (perf/peers/redunet_numpy.py), on the same data, on this machine, interleaved: each
# round runs one timed wbcl fit, then one timed NumPy fit (each process warms up first, untimed).
# Reports medians over the rounds and the ratio NumPy / wbcl (> 1: wbcl faster), as a Markdown table.
#
# Usage: perf/run_redunet.sh [BUILD_DIR] [ROUNDS]     (defaults: build, 5)
#   CASES="small mnist example" selects cases; WBCL_DEVICE selects the device.
# Cases (see perf/bench_redunet.c): small  m=1500 d=3 K=3 L=100 | mnist  m=1000 d=784 K=10 L=3 |
#                                   example  book Example 5.1, m=1500 d=3 K=3 L=2000
# Each fit is construction + application + the logged objective for every layer.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
rounds=${2:-5}
cases=${CASES:-"small mnist example"}
bench="$build/perf/bench_redunet"
peer=perf/peers/redunet_numpy.py
[ -x "$bench" ] || { echo "run_redunet.sh: $bench not built (cmake --build $build)" >&2; exit 1; }
export POCL_CACHE_DIR=${POCL_CACHE_DIR:-$PWD/$build/cache/pocl}
export WBCL_CACHE_DIR=${WBCL_CACHE_DIR:-$PWD/$build/cache/wbcl}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$bench" --write-data "$tmp"

layers_of() { case "$1" in small) echo 100 ;; mnist) echo 3 ;; example) echo 2000 ;; esac; }

echo "device: $("$bench" --device-info)"
echo "peer:   $(python3 -c 'import numpy, sys; print("NumPy", numpy.__version__, "Python", sys.version.split()[0])') ($(python3 -c 'import numpy; c = numpy.show_config(mode="dicts") if hasattr(numpy, "show_config") else None; b = c["Build Dependencies"]["blas"] if c else {}; print(b.get("name", "?"), b.get("version", ""))' 2>/dev/null || echo blas ?))"
echo "host:   $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "rounds: $rounds (interleaved wbcl / numpy)"
for c in $cases; do
  L=$(layers_of "$c")
  for r in $(seq "$rounds"); do
    "$bench" --case "$c" --reps 1 >>"$tmp/$c.wbcl"
    python3 "$peer" --x "$tmp/${c}_x.npy" --y "$tmp/${c}_y.npy" --layers "$L" --reps 1 >>"$tmp/$c.numpy"
  done
done

python3 - "$tmp" "$cases" <<'PY'
import statistics, sys
tmp, cases = sys.argv[1], sys.argv[2].split()
layers = {"small": 100, "mnist": 3, "example": 2000}
desc = {"small": "m=1500, d=3, K=3", "mnist": "m=1000, d=784, K=10 (MNIST-like)",
        "example": "Example 5.1, L=2000 (whole run)"}
def load(path):
    rows = [l.split() for l in open(path) if l.strip()]
    return [float(r[1]) for r in rows], [float(r[2]) for r in rows]
print()
print("| case | layers | wbcl median | NumPy median | NumPy / wbcl | final dR wbcl / NumPy |")
print("| --- | --- | --- | --- | --- | --- |")
for c in cases:
    tw, dw = load(f"{tmp}/{c}.wbcl")
    tn, dn = load(f"{tmp}/{c}.numpy")
    mw, mn = statistics.median(tw), statistics.median(tn)
    L = layers[c]
    if c == "example":
        sw, sn = f"{mw:.3f} s", f"{mn:.3f} s"
    else:
        sw, sn = f"{1e3 * mw / L:.2f} ms/layer", f"{1e3 * mn / L:.2f} ms/layer"
    print(f"| {desc[c]} | {L} | {sw} | {sn} | **{mn / mw:.2f}x** (min {min(tn) / max(tw):.2f}x, max {max(tn) / min(tw):.2f}x) | {dw[-1]:.6f} / {dn[-1]:.6f} |")
PY

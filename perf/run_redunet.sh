#!/usr/bin/env bash
# ReduNet benchmark: wbcl's vector ReduNet (perf/bench_redunet.c) against a NumPy/OpenBLAS peer written
# from SPEC.md §4.1 (perf/peers/redunet_numpy.py), on the same data, on this machine, interleaved: each
# round runs one timed wbcl fit, then one timed NumPy fit (each process warms up first, untimed).
# Reports medians over the rounds and the ratio NumPy / wbcl (> 1: wbcl faster), as a Markdown table.
#
# Usage: perf/run_redunet.sh [BUILD_DIR] [ROUNDS]     (defaults: build, 5)
#   CASES="small mnist example" selects cases; WBCL_DEVICE selects the device.
#   TORCH_PEER=cuda|cpu adds a second peer, PyTorch (perf/peers/redunet_torch.py, float32, TF32 off, on that
#   torch device): each round then also runs one timed torch fit after the NumPy one, and the table gains
#   the torch median per layer, the ratio torch / wbcl (> 1: wbcl faster) and torch's final dR.
#   TORCH_PY=/path/to/python-with-torch (default python3) runs it; TORCH_ARGS adds arguments to it
#   (e.g. "--threads 1" on a small shared CPU, "--inverse cholesky"). Without TORCH_PEER nothing changes.
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
torch_dev=${TORCH_PEER:-}
torch_py=${TORCH_PY:-python3}
tpeer=perf/peers/redunet_torch.py
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
if [ -n "$torch_dev" ]; then
  echo "torch:  $("$torch_py" -c 'import sys, torch; d = sys.argv[1]; print("PyTorch", torch.__version__, "on", d, torch.cuda.get_device_name() if d.startswith("cuda") else "(torch default %d threads)" % torch.get_num_threads(), "float32, TF32 off")' "$torch_dev") ${TORCH_ARGS:-}"
  echo "rounds: $rounds (interleaved wbcl / numpy / torch)"
else
  echo "rounds: $rounds (interleaved wbcl / numpy)"
fi
for c in $cases; do
  L=$(layers_of "$c")
  for r in $(seq "$rounds"); do
    "$bench" --case "$c" --reps 1 >>"$tmp/$c.wbcl"
    python3 "$peer" --x "$tmp/${c}_x.npy" --y "$tmp/${c}_y.npy" --layers "$L" --reps 1 >>"$tmp/$c.numpy"
    if [ -n "$torch_dev" ]; then
      # shellcheck disable=SC2086
      "$torch_py" "$tpeer" --x "$tmp/${c}_x.npy" --y "$tmp/${c}_y.npy" --layers "$L" --reps 1 \
        --device "$torch_dev" ${TORCH_ARGS:-} >>"$tmp/$c.torch"
    fi
  done
done

python3 - "$tmp" "$cases" "$torch_dev" <<'PY'
import statistics, sys
tmp, cases, torch_dev = sys.argv[1], sys.argv[2].split(), sys.argv[3]
layers = {"small": 100, "mnist": 3, "example": 2000}
desc = {"small": "m=1500, d=3, K=3", "mnist": "m=1000, d=784, K=10 (MNIST-like)",
        "example": "Example 5.1, L=2000 (whole run)"}
def load(path):
    rows = [l.split() for l in open(path) if l.strip()]
    return [float(r[1]) for r in rows], [float(r[2]) for r in rows]
print()
if torch_dev:
    print(f"| case | layers | wbcl median | NumPy median | NumPy / wbcl | torch ({torch_dev}) median | torch / wbcl "
          "| final dR wbcl / NumPy / torch |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
else:
    print("| case | layers | wbcl median | NumPy median | NumPy / wbcl | final dR wbcl / NumPy |")
    print("| --- | --- | --- | --- | --- | --- |")
for c in cases:
    tw, dw = load(f"{tmp}/{c}.wbcl")
    tn, dn = load(f"{tmp}/{c}.numpy")
    mw, mn = statistics.median(tw), statistics.median(tn)
    L = layers[c]
    fmt = (lambda t: f"{t:.3f} s") if c == "example" else (lambda t: f"{1e3 * t / L:.2f} ms/layer")
    sw, sn = fmt(mw), fmt(mn)
    if torch_dev:
        tt, dt = load(f"{tmp}/{c}.torch")
        mt = statistics.median(tt)
        print(f"| {desc[c]} | {L} | {sw} | {sn} | **{mn / mw:.2f}x** (min {min(tn) / max(tw):.2f}x, max {max(tn) / min(tw):.2f}x) "
              f"| {fmt(mt)} | **{mt / mw:.2f}x** (min {min(tt) / max(tw):.2f}x, max {max(tt) / min(tw):.2f}x) "
              f"| {dw[-1]:.6f} / {dn[-1]:.6f} / {dt[-1]:.6f} |")
    else:
        print(f"| {desc[c]} | {L} | {sw} | {sn} | **{mn / mw:.2f}x** (min {min(tn) / max(tw):.2f}x, max {max(tn) / min(tw):.2f}x) | {dw[-1]:.6f} / {dn[-1]:.6f} |")
PY

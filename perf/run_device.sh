#!/usr/bin/env bash
# One pass over a device: what runs there, whether every test passes there, and how fast it is.
# Written for a machine lent for a short time (each step has a time cap, and every log lands in OUTDIR as
# it is written, so a run cut short still says how far it got).
#
# Usage: perf/run_device.sh OUTDIR [BUILD_DIR]      (WBCL_DEVICE selects the device; default: gpu)
# Steps (cap): info: device listing (20 s); tests: the ctest suite (STEP_TESTS, 240 s, CTEST_J parallel,
# CTEST_ARGS passed on, e.g. "-R test_linalg"); linalg: bench_linalg with the OpenBLAS peer (60 s); redunet,
# circulant: run_redunet.sh and run_circulant.sh with the NumPy peer (STEP_PEERS, 90 s each); profile:
# bench_circulant's per-kernel device times, 1-D and 2-D (60 s); bench: wbcl-bench on the device, every
# operator verified against the double-precision reference, csv/json/svg (STEP_BENCH, 180 s).
# SKIP="tests circulant ..." skips steps by name. ARCHIVE=FILE.tgz: OUTDIR is packed into FILE after every
# step. A device with no package access needs the build, the runtime libraries and an ICD file brought
# along (perf/RESULTS.md, "NVIDIA H200", says what that run carried).
set -uo pipefail
out=${1:?usage: perf/run_device.sh OUTDIR [BUILD_DIR]}
build=${2:-build}
cd "$(dirname "$0")/.."
mkdir -p "$out"
export WBCL_DEVICE=${WBCL_DEVICE:-gpu}
export WBCL_CACHE_DIR=${WBCL_CACHE_DIR:-$PWD/$build/cache/wbcl}
export POCL_CACHE_DIR=${POCL_CACHE_DIR:-$PWD/$build/cache/pocl}
skip=" ${SKIP:-} "
t0=$(date +%s)
step() {  # step NAME CAP_S LOG CMD...
  local name=$1 cap=$2 log=$3; shift 3
  case "$skip" in *" $name "*) echo "== $name: skipped"; return;; esac
  local s=$(date +%s)
  timeout --kill-after=5 "$cap" "$@" >"$out/$log" 2>&1
  local rc=$?
  [ -n "${ARCHIVE:-}" ] && tar czf "$ARCHIVE" -C "$out" .
  echo "== $name: rc $rc ($( [ $rc = 124 ] && echo "cut at ${cap} s" || echo "$(( $(date +%s) - s )) s")), log $log"
}
step info 20 info.log "$build/tools/wbcl-info"
tail -n +1 "$out/info.log" | head -40
# shellcheck disable=SC2086
step tests "${STEP_TESTS:-240}" tests.log ctest --test-dir "$build" -j "${CTEST_J:-8}" --timeout 200 --output-on-failure ${CTEST_ARGS:-}
grep -E "tests passed|Failed|\*\*\*|Timeout|Test +#" "$out/tests.log" 2>/dev/null | grep -v "Passed" | head -30
grep -E "tests passed" "$out/tests.log" 2>/dev/null
step linalg 60 linalg.log "$build/perf/bench_linalg" --reps 5 --threads "$(nproc)" --redunet --large 256,512,1024,2048
step redunet "${STEP_PEERS:-90}" redunet.log env OPENBLAS_NUM_THREADS="$(nproc)" perf/run_redunet.sh "$build" 3
step circulant "${STEP_PEERS:-90}" circulant.log env OPENBLAS_NUM_THREADS="$(nproc)" perf/run_circulant.sh "$build" 3
step profile 60 profile.log sh -c "'$build/perf/bench_circulant' --case 1d --layers 5 --reps 3 --profile && '$build/perf/bench_circulant' --case 2d --layers 5 --reps 3 --profile"
step bench "${STEP_BENCH:-180}" bench.log "$build/tools/wbcl-bench" --device "$WBCL_DEVICE" --reps 5 --progress \
  --csv "$out/wbcl-bench.csv" --json "$out/wbcl-bench.json" --plot "$out/wbcl-bench.svg"
grep -E "FAIL|unsupported|error" "$out/bench.log" 2>/dev/null | head -20
[ -s "$out/circulant.log" ] && cp perf/circulant_scaling.csv perf/circulant_scaling.svg "$out/" 2>/dev/null
[ -n "${ARCHIVE:-}" ] && tar czf "$ARCHIVE" -C "$out" .
echo "== total $(( $(date +%s) - t0 )) s"

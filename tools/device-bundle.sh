#!/usr/bin/env bash
# Prepares a build tree to travel to a lent GPU machine that has no package access (perf/run_device.sh,
# perf/RESULTS.md "NVIDIA H200"): configures and builds BUILD_DIR (Release, tests, tools and benchmarks),
# then unpacks the Debian runtime libraries wbcl links against (ocl-icd-libopencl1, libclblast1, libclfft2,
# libcjson1, libsubunit0: downloaded with apt-get download, not installed) into BUILD_DIR/devlibs beside an
# ICD file naming the NVIDIA OpenCL driver (ICD_LIB, default /usr/local/nvidia/lib64/libnvidia-opencl.so.1,
# where the lent machines keep it), and drops BUILD_DIR's program caches. Prints the size (the device tool carries at most 64 MiB) and the lines
# to run there.
#
# OpenBLAS (the CPU peer of perf/bench_linalg and the ReduNet benchmarks) is not carried: the lent machines
# have their own (0.3.26 in the runs of 2026-11-27) and libopenblas0-pthread alone is ~30 MB; EXTRA_DEBS="..."
# adds Debian packages to the bundle (e.g. "libopenblas0-pthread libgfortran5") where a machine lacks them.
#
# Usage: tools/device-bundle.sh [BUILD_DIR]        (default build-gpu, relative to the tree's root: it travels
#                                                  with the tree; needs cmake, a compiler, apt-get)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-gpu}
case "$build" in /*|..*) echo "device-bundle: BUILD_DIR must be inside the tree (relative), not $build" >&2; exit 2 ;; esac
icd=${ICD_LIB:-/usr/local/nvidia/lib64/libnvidia-opencl.so.1}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" -j "$(nproc)" >/dev/null
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# shellcheck disable=SC2086
(cd "$tmp" && apt-get download ocl-icd-libopencl1 libclblast1 libclfft2 libcjson1 libsubunit0 ${EXTRA_DEBS:-} >/dev/null 2>&1) ||
  { echo "device-bundle: apt-get download failed (no package index? run apt-get update)" >&2; exit 1; }
for d in "$tmp"/*.deb; do dpkg-deb -x "$d" "$tmp/root"; done
rm -rf "$build/devlibs"
mkdir -p "$build/devlibs"
find "$tmp/root/usr/lib" -name 'lib*.so*' \( -type f -o -type l \) -exec cp -a {} "$build/devlibs/" \;
# program caches of this host's runs (PoCL, the tests'): rebuilt there, and they would crowd the 64 MiB
rm -rf "$build/cache" "$build/Testing"
echo "$icd" > "$build/devlibs/nvidia.icd"
echo "device-bundle: $build ready ($(du -sh "$build" | cut -f1); carry it: run(carry=[\"$build\"]))"
cat <<EOF
on the device, from the tree's root:
  [ -e /work/main ] || { mkdir -p /work && ln -s "\$PWD" /work/main; }
  ldconfig -n $build/devlibs $build
  export LD_LIBRARY_PATH=\$PWD/$build/devlibs:\$PWD/$build WBCL_DEVICE=gpu WBCL_TEST_DEVICE=gpu OCL_ICD_VENDORS=\$PWD/$build/devlibs
  perf/run_device.sh OUTDIR $build
EOF

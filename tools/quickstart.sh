#!/usr/bin/env bash
# The README's first command: installs the dependencies, builds wbcl into
# ./build and runs the main job on the default device (device information,
# then every basic op and both GEMM paths checked against the double-precision
# reference, then book Example 5.1: a 2000-layer ReduNet constructed on three
# Gaussians on the sphere, dR against its optimum, in seconds).
# Usage: tools/quickstart.sh   (from the repository root)
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)"
export POCL_CACHE_DIR="$PWD/build/cache/pocl" WBCL_CACHE_DIR="$PWD/build/cache/wbcl"
echo; echo "== wbcl-info"; build/tools/wbcl-info
echo; echo "== wbcl-run check"; build/tools/wbcl-run check
echo; echo "== wbcl-run redunet.example"; build/tools/wbcl-run redunet.example

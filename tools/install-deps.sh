#!/usr/bin/env bash
# Installs what wbcl needs to build, test and run on the default device
# (PoCL on the CPU), from Debian's packages. Run as root (or with sudo).
set -euo pipefail
if [ "$(id -u)" != 0 ]; then
  exec sudo -E "$0" "$@"
fi
export DEBIAN_FRONTEND=noninteractive
packages=(
  build-essential cmake pkg-config git python3   # toolchain
  python3-numpy                                  # tools/lm_text.py (text <-> token ids); the Python package
  python3-pytest python3-venv python3-setuptools python3-wheel  # python/: its tests; pip install ./python in a venv
  ocl-icd-opencl-dev opencl-headers              # OpenCL ICD loader and headers
  pocl-opencl-icd                                # the default device: PoCL on the CPU
  libclblast-dev libclfft-dev                    # dense linear algebra, FFTs
  libcjson-dev                                   # safetensors headers (JSON)
  check                                          # unit tests
  libopenblas-dev                                # the CPU peer in benchmarks
  clang libclang-rt-dev                          # fuzz targets (libFuzzer, ASan/UBSan runtimes), portability check
  libopenmpi-dev openmpi-bin                     # -DWBCL_MPI=ON: wbcl_mpi, wbcl-run-mpi, test_mpi
  valgrind                                       # tools/ci-hardening.sh (memcheck job)
  clang-14 llvm-14 libclc-14                     # tools/gpu-check.sh (ptxas: the CUDA toolkit, not Debian)
)
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${packages[@]}" >/dev/null
echo "install-deps: installed ${#packages[@]} packages"

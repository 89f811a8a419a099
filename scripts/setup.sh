#!/usr/bin/env bash
# Installs tilegraph and what it needs. Usage: scripts/setup.sh [test|main]
#   test: the package with its test dependencies (pytest, hypothesis, ruff) and the system packages
#   main: additionally the peers used by examples and benchmarks (torch CPU wheel, matplotlib, OpenVINO)
set -euo pipefail
mode="${1:-test}"
if ! command -v gcc >/dev/null 2>&1; then
  apt-get update -qq && apt-get install -y -qq gcc >/dev/null
fi
# OpenCL on the CPU (PoCL) so GPU kernels can be run and checked without a GPU.
if [ ! -e /etc/OpenCL/vendors/pocl.icd ] && command -v apt-get >/dev/null 2>&1; then
  apt-get update -qq && apt-get install -y -qq pocl-opencl-icd ocl-icd-opencl-dev >/dev/null
fi
# aarch64 kernels: cross-compiled, then run under qemu (correctness only) by the test suite.
if ! command -v qemu-aarch64 >/dev/null 2>&1 || [ ! -e /usr/aarch64-linux-gnu/include/stdio.h ]; then
  if command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq && apt-get install -y -qq --no-install-recommends gcc-aarch64-linux-gnu \
      libc6-dev-arm64-cross libgomp1-arm64-cross qemu-user >/dev/null || echo "aarch64 toolchain not installed"
  fi
fi
python -m pip install -q --upgrade pip >/dev/null
if [ "$mode" = "main" ]; then
  python -m pip install -q -e ".[dev,bench]"
else
  python -m pip install -q -e ".[dev]"
fi

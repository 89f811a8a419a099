#!/usr/bin/env bash
# Creates the TVM MetaSchedule venv the tvm peer runs in: benchmarks/peers/install_tvm.sh [VENV_DIR]
# Default VENV_DIR: <repo>/.venv-tvm. Pins follow /work/shared/research/peers_cpu.md §2:
#   apache-tvm-ffi 0.1.15.x segfaults in save_json -> pin 0.1.14.post1;
#   xgboost/psutil/cloudpickle/tornado are MetaSchedule's builder/runner/cost-model extras;
#   torch must NOT be in this venv (tvm_ffi imports it when present: +4 s per process, slower builds).
set -euo pipefail
repo="$(cd "$(dirname "$0")/../.." && pwd)"
venv="${1:-$repo/.venv-tvm}"
python3 -m venv "$venv"
# Keeps the venv out of git whatever the repository's .gitignore says.
echo '*' > "$venv/.gitignore"
"$venv/bin/pip" install -q --upgrade pip
"$venv/bin/pip" install -q 'apache-tvm==0.27.0.post1' 'apache-tvm-ffi==0.1.14.post1' xgboost psutil cloudpickle tornado numpy
if "$venv/bin/python" -c 'import torch' 2>/dev/null; then
  "$venv/bin/pip" uninstall -y -q torch
fi
"$venv/bin/python" -c 'import tvm, tvm.s_tir.meta_schedule; print("tvm", tvm.__version__, "ok")'

#!/usr/bin/env bash
# One GPU session, as run on a lent NVIDIA machine (nvcc, torch with CUDA, onnx, onnxruntime there):
# the environment, the GPU tests, the kernel benchmark and whole models (untuned and tuned). Each
# part has its own time limit, so one that hangs or fails leaves the others' results.
#   bash benchmarks/gpu_session.sh OUT_DIR [MODELS] [TUNING_S_PER_MODEL] [TOP_K]
# Time limits (seconds) of the parts: TESTS_S (default 120), BENCH_S (150), MODELS_S (300); RACE_S:
# timing seconds per contender and round in gpu_models (default 2).
# The lent machines' image has torch, onnx and onnxruntime but (2026-11-28) not platformdirs or
# lightgbm: carry them as wheels (`.whl`, /work/.library/device/README.md) and put them on PYTHONPATH
# first; the script stops at once, naming what is missing, rather than failing every part.
set -u
out="${1:?usage: gpu_session.sh OUT_DIR [MODELS] [TUNING_S] [TOP_K]}"
models="${2:-bert,gpt2,resnet50}"
budget="${3:-45}"
top_k="${4:-24}"
mkdir -p "$out"
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
py="${PYTHON:-python3}"
if ! "$py" -c "import platformdirs, lightgbm, numpy, scipy, rich" 2>"$out/missing.txt"; then
  echo "tilegraph's core dependencies are missing here: $(tail -1 "$out/missing.txt")" | tee "$out/env_tests.txt"
  exit 2
fi
{
  date -u; nvidia-smi --query-gpu=name,compute_cap,driver_version,clocks.max.sm,memory.total --format=csv
  nvcc --version | tail -2; nproc
  "$py" -c "import torch, onnxruntime, transformers; print('torch', torch.__version__, torch.cuda.get_device_name(), \
'ort', onnxruntime.__version__, 'transformers', transformers.__version__)"
  "$py" -c "import tilegraph as tg; print(tg.Target('cuda'))"
  echo "== GPU tests"
  timeout "${TESTS_S:-120}" "$py" -m pytest -v -p no:cacheprovider -n 8 --timeout 240 -m "needs_gpu or needs_nvcc" tests/runtime tests/codegen \
    tests/graph/test_cuda_model.py tests/tune/test_cuda_device.py tests/tune/test_cuda_tuning.py tests/schedule/test_gpu_rows.py tests/lower/gpu --tb=short -rfE 2>&1 | tail -150
  echo "pytest rc=${PIPESTATUS[0]}"
} > "$out/env_tests.txt" 2>&1
timeout "${BENCH_S:-150}" "$py" -m benchmarks.gpu_bench --top-k "$top_k" --no-append > "$out/gpu_bench.txt" 2>&1
echo "gpu_bench rc=$?" >> "$out/gpu_bench.txt"
timeout "${MODELS_S:-300}" "$py" -m benchmarks.gpu_models --models "$models" --budget "$budget" \
  --seconds "${RACE_S:-2}" --db-dir "$out/db" > "$out/gpu_models.txt" 2>&1
echo "gpu_models rc=$?" >> "$out/gpu_models.txt"

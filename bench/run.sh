#!/usr/bin/env bash
# make bench: ptq's FP32 executor against ONNX Runtime, measured in the same run, on
# the PaddleOCR models: 2 threads, one warm-up, median of 10 runs each. Prints a
# markdown table (also written to build/bench/executor.md).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
PTQ=$BUILD/ptq
OUT=$BUILD/bench
mkdir -p "$OUT"
PY=/usr/bin/python3
REPEAT=${REPEAT:-10}
THREADS=${THREADS:-2}
{
  echo "machine: $(nproc) cores, $(lscpu | sed -n 's/^Model name: *//p'), threads $THREADS, median of $REPEAT runs"
  echo
  echo "| model | input | ptq ms | ONNX Runtime ms | ptq / ORT | ptq GFLOP/s |"
  echo "|---|---|---:|---:|---:|---:|"
  for spec in "ch_PP-OCRv4_det_infer:1,3,640,640" "ch_ppocr_mobile_v2.0_cls_infer:8,3,48,192" "ch_PP-OCRv4_rec_infer:1,3,48,320"; do
    m=${spec%%:*}; shape=${spec#*:}
    in=$OUT/$m.in.npy
    $PY -c "import numpy as np; np.save('$in', np.random.default_rng(1).uniform(-1, 1, ($shape)).astype(np.float32))"
    p=$("$PTQ" run "build/models/$m.onnx" --input "$in" --repeat "$REPEAT" --threads "$THREADS")
    o=$(node tests/oracle/ort.js "build/models/$m.onnx" --input x="$in" --repeat "$REPEAT" --threads "$THREADS")
    pm=$(echo "$p" | sed -E 's/.*median ([0-9.]+) ms.*/\1/'); gf=$(echo "$p" | sed -E 's/.*, ([0-9.]+) GFLOP\/s.*/\1/')
    om=$(echo "$o" | sed -E 's/.*median ([0-9.]+) ms.*/\1/')
    ratio=$($PY -c "print(f'{$pm / $om:.2f}')")
    echo "| $m | ${shape//,/x} | $pm | $om | $ratio | $gf |"
  done
} | tee "$OUT/executor.md"

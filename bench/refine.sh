#!/usr/bin/env bash
# make bench: what the refinements cost next to the calibration pass (docs/results.md#refinement-cost).
# PaddleOCR det, rec and cls on 20 images of build/textphotos, bias correction alone, then
# output-mse + AdaRound + bias correction, every refinement kept (--no-refine-check): the
# refinement's time per image over the calibration pass's, AdaRound's and the scale search's
# seconds, and the layer inputs kept between layers. Written to build/bench/refine.md.
#   bench/refine.sh [--threads N] [--limit N]
set -euo pipefail
cd "$(dirname "$0")/.."
PTQ=${PTQ:-build/ptq}
T=2; N=20
while [ $# -gt 0 ]; do
  case $1 in --threads) T=$2; shift 2 ;; --limit) N=$2; shift 2 ;; *) echo "bench/refine.sh: unknown option $1" >&2; exit 2 ;; esac
done
mkdir -p build/bench build/tmp/bench-refine
OUT=build/bench/refine.md
{
  echo "| model | configuration | sweeps | refinement s | x calibration pass | AdaRound s | scale search s | kept in memory / file MB |"
  echo "|---|---|---:|---:|---:|---:|---:|---:|"
  for k in cls rec det; do
    case $k in
      cls) m=ch_ppocr_mobile_v2.0_cls_infer.onnx; p=paddleocr-cls ;;
      rec) m=ch_PP-OCRv4_rec_infer.onnx; p=paddleocr-rec ;;
      det) m=ch_PP-OCRv4_det_infer.onnx; p=paddleocr-det ;;
    esac
    for cfg in "mse + bias correction:--method mse --bias-correction" \
               "output-mse + AdaRound + bias correction:--method output-mse --adaround --bias-correction"; do
      name=${cfg%%:*}
      # shellcheck disable=SC2086
      "$PTQ" quantize build/models/$m --images build/textphotos/$k --limit "$N" --preset $p --threads "$T" ${cfg#*:} \
        --no-refine-check -o build/tmp/bench-refine/$k.onnx 2> build/tmp/bench-refine/$k.log
      sed -nE 's/.*refined on [0-9]+ images in ([0-9]+) sweeps? over the network, ([0-9.]+) s: [0-9]+ activation scales chosen by output error \(([0-9.]+) s\), [0-9]+ of [0-9]+ layers rounded by AdaRound \([0-9]+ codes changed, ([0-9.]+) s\).*at most ([0-9]+) MB in memory, ([0-9]+) MB.*/\1 \2 \3 \4 \5 \6/p' \
        build/tmp/bench-refine/$k.log | while read -r sw sec sc ar mem file; do
        x=$(sed -nE 's/.*refinement cost ([0-9.]+)x.*/\1/p' build/tmp/bench-refine/$k.log)
        echo "| $k | $name | $sw | $sec | ${x}x | $ar | $sc | $mem / $file |"
      done
    done
  done
} > "$OUT"
cat "$OUT"

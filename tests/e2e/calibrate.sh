#!/usr/bin/env bash
# Calibration methods against an independent numpy reference written from the spec
# (tests/oracle/calib_ref.py), on Gaussian, uniform and Laplacian-with-outliers samples fed
# with --input; the spec's reference answers; caches and ranges on a real model from photos.
. "$(dirname "$0")/lib.sh"
$PY - "$TMP" <<'PYEOF'
import sys, numpy as np, onnx
from onnx import helper, TensorProto as T
d = sys.argv[1]
r = np.random.default_rng(11)
n = 1_000_000
np.save(f"{d}/gauss.npy", r.standard_normal((1, n)).astype(np.float32))
np.save(f"{d}/uniform.npy", r.uniform(-3, 3, (1, n)).astype(np.float32))
lap = r.laplace(0, 1, n).astype(np.float32); lap[:5] = [60, -80, 100, 70, -90]
np.save(f"{d}/laplace.npy", lap.reshape(1, n))
x = helper.make_tensor_value_info("x", T.FLOAT, [1, n]); y = helper.make_tensor_value_info("y", T.FLOAT, [1, n])
m = helper.make_model(helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "id", [x], [y]),
                      opset_imports=[helper.make_opsetid("", 13)])
onnx.save(m, f"{d}/identity.onnx")
PYEOF
for s in gauss uniform laplace; do
  check "$s: every method equals the numpy reference (max exactly, percentiles and entropy/mse within a bin)" bash -c "
    '$PTQ' calibrate '$TMP/identity.onnx' --input '$TMP/$s.npy' --batch 1 --method all --tensors x --json '$TMP/$s.json' 2>/dev/null &&
    $PY '$ROOT/tests/oracle/calib_ref.py' '$TMP/$s.npy' > '$TMP/$s.ref.json' && $PY -c \"
import json, numpy as np
ref = json.load(open('$TMP/$s.ref.json')); w = ref['bin']; out = []
for m in ['max', 'percentile-99.9', 'percentile-99.99', 'percentile-99.999', 'entropy', 'mse']:
    got = json.load(open('$TMP/$s.' + m + '.json'))['tensors']['x']['amax']
    if m == 'max':
        assert np.float32(got) == np.float32(ref[m]), (m, got, ref[m])  # the float32 amax, bit for bit
    else:
        tol = 1e-6 * ref[m] if m.startswith('percentile') else w * 1.0001
        assert abs(got - ref[m]) <= tol, (m, got, ref[m], w)
    out.append(f'{m} {got:.4g}')
print(', '.join(out))\""
done
check "spec reference answers: Gaussian max ~4.9, p99.99 ~3.9, entropy and mse in [2.5, 4.5]; Laplacian outliers clipped" $PY -c "
import json
g = {m: json.load(open('$TMP/gauss.' + m + '.json'))['tensors']['x']['amax'] for m in ['max', 'percentile-99.99', 'entropy', 'mse']}
assert 4.5 < g['max'] < 5.5 and 3.7 < g['percentile-99.99'] < 4.1, g
assert 2.5 <= g['entropy'] <= 4.5 and 2.5 <= g['mse'] <= 4.5, g
l = {m: json.load(open('$TMP/laplace.' + m + '.json'))['tensors']['x']['amax'] for m in ['max', 'entropy', 'mse']}
assert l['max'] == 100 and l['entropy'] < 60 and l['mse'] < 60, l  # below the smallest outlier: clipped
print(g, l)"
check "calibrate on PP-OCRv4 det from photos: caches for every method, 1 and 2 threads byte-identical" bash -c "
  '$PTQ' calibrate '$MODELS/ch_PP-OCRv4_det_infer.onnx' --images '$ROOT/build/photos' --preset paddleocr-det --batch 2 --limit 4 \
     --method max,entropy --cache '$TMP/det.cache' --threads 2 2>/dev/null &&
  '$PTQ' calibrate '$MODELS/ch_PP-OCRv4_det_infer.onnx' --images '$ROOT/build/photos' --preset paddleocr-det --batch 2 --limit 4 \
     --method max,entropy --cache '$TMP/det1.cache' --threads 1 2>/dev/null &&
  cmp '$TMP/det.max.cache' '$TMP/det1.max.cache' && cmp '$TMP/det.entropy.cache' '$TMP/det1.entropy.cache' &&
  head -1 '$TMP/det.max.cache' | grep -qx 'TRT-8601-MinMaxCalibration' && head -1 '$TMP/det.entropy.cache' | grep -qx 'TRT-8601-EntropyCalibration2' &&
  grep -q '^x: ' '$TMP/det.entropy.cache' && [ \$(wc -l < '$TMP/det.entropy.cache') -gt 300 ] && echo \$(wc -l < '$TMP/det.entropy.cache') lines"
finish

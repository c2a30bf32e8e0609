#!/usr/bin/env bash
# Calibration methods against the numpy port of pytorch-quantization's functions
# (tests/oracle/calib_ref.py), fed ptq's own analysis histograms (ptq stats show --hist):
# every threshold equal bit for bit (float32 amax) on Gaussian, uniform, Laplacian with
# outliers and ReLU-like samples, and on real activations of PP-OCR det, cls and rec from
# photos; pytorch-quantization's growing histogram agrees when the first batch holds the
# amax; the spec's reference answers; caches and their header on a real model.
. "$(dirname "$0")/lib.sh"
ORACLE=$ROOT/tests/oracle/calib_ref.py
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
np.save(f"{d}/relu.npy", np.maximum(r.standard_normal((1, n)) * 2 - 0.5, 0).astype(np.float32))  # ~60% exact zeros
# three batches, the first holding the overall amax (for pytorch-quantization's growing histogram)
g = r.standard_normal((3, n // 4 + 1)).astype(np.float32)  # 750003 values: no percentile falls on a whole count
g[1:] = np.clip(g[1:], -4, 4); g[0, 7] = 5.5
np.save(f"{d}/grow.npy", g)
for b in range(3): np.save(f"{d}/grow{b}.npy", g[b:b + 1])
for name, shape in (("identity", [1, n]), ("identity4", [1, n // 4 + 1])):
    x = helper.make_tensor_value_info("x", T.FLOAT, shape); y = helper.make_tensor_value_info("y", T.FLOAT, shape)
    m = helper.make_model(helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "id", [x], [y]),
                          opset_imports=[helper.make_opsetid("", 13)])
    onnx.save(m, f"{d}/{name}.onnx")
PYEOF
# exact: ptq's JSON amax of every method == the oracle's on ptq's analysis histograms (prefix: $1.*.json, ref: $2)
cat > "$TMP/exact.py" <<'PYEOF'
import json, sys, numpy as np
prefix, ref = sys.argv[1], json.load(open(sys.argv[2]))
methods = ['max', 'percentile-99.9', 'percentile-99.99', 'percentile-99.999', 'entropy', 'mse']
got = {m: json.load(open(f'{prefix}.{m}.json'))['tensors'] for m in methods}
n = bad = 0
for t, r in ref.items():
    for m in methods:
        g, e = np.float32(got[m][t]['amax']), np.float32(r[m])
        ulp = abs(int(g.view(np.int32)) - int(e.view(np.int32)))
        n += 1
        if ulp:
            bad += 1
            print(f'{t} {m}: ptq {g!r} oracle {e!r} ({ulp} ulp, {(g - e) / r["bin"]:+.2f} bins)')
assert n > 0 and bad == 0, f'{bad} of {n} thresholds differ'
print(f'{len(ref)} tensors, {n} thresholds, all bit-identical (max ulp diff 0)')
PYEOF
for s in gauss uniform laplace relu; do
  check "$s: every method bit-identical to the oracle on ptq's analysis histogram" bash -c "
    '$PTQ' calibrate '$TMP/identity.onnx' --input '$TMP/$s.npy' --batch 1 --method all --tensors x --json '$TMP/$s.json' --stats '$TMP/$s.ptqstats' 2>/dev/null &&
    '$PTQ' stats show '$TMP/$s.ptqstats' --hist '$TMP/$s.hist.npy' > '$TMP/$s.show' &&
    $PY '$ORACLE' hist '$TMP/$s.show' '$TMP/$s.hist.npy' > '$TMP/$s.ref.json' && $PY '$TMP/exact.py' '$TMP/$s' '$TMP/$s.ref.json'"
  check "$s: the oracle's own §2 histogram from the samples gives the same thresholds within a bin" bash -c "
    $PY '$ORACLE' samples '$TMP/$s.npy' > '$TMP/$s.samples.json' && $PY -c \"
import json, numpy as np
ref = json.load(open('$TMP/$s.samples.json')); w = ref['bin']
for m in ['max', 'percentile-99.9', 'percentile-99.99', 'percentile-99.999', 'entropy', 'mse']:
    got = json.load(open('$TMP/$s.' + m + '.json'))['tensors']['x']['amax']
    if m == 'max': assert np.float32(got) == np.float32(ref[m]), (m, got, ref[m])
    else: assert abs(got - ref[m]) <= w * 1.0001, (m, got, ref[m], w)
print('max exact, the others within', w)\""
done
# The spec's range [2.5, 4.5] for entropy predates its correction (no smoothing): without it every
# candidate whose last bin is empty while the tail is not has KL = +inf, and on 10^6 Gaussian
# samples the minimum lands near 4.7 (the oracle agrees bit for bit, above); it still clips.
check "spec reference answers: Gaussian max ~4.9, p99.99 ~3.9, mse in [2.5, 4.5], entropy in [2.5, max); Laplacian outliers clipped" $PY -c "
import json
g = {m: json.load(open('$TMP/gauss.' + m + '.json'))['tensors']['x']['amax'] for m in ['max', 'percentile-99.99', 'entropy', 'mse']}
assert 4.5 < g['max'] < 5.5 and 3.7 < g['percentile-99.99'] < 4.1, g
assert 2.5 <= g['entropy'] < g['max'] and 2.5 <= g['mse'] <= 4.5, g
l = {m: json.load(open('$TMP/laplace.' + m + '.json'))['tensors']['x']['amax'] for m in ['max', 'entropy', 'mse']}
assert l['max'] == 100 and l['entropy'] < 60 and l['mse'] < 60, l  # below the smallest outlier: clipped
r = {m: json.load(open('$TMP/relu.' + m + '.json'))['tensors']['x']['amax'] for m in ['max', 'entropy']}
assert r['entropy'] > r['max'] / 8, r  # H[0] := H[1]: the exact zeros do not pull the threshold down
print(g, l, r)"
# ptq's analysis histogram is resampled from collection bins of width wc = R/4096 (here R = 8, wc < w):
# a count sits at most wc from where direct binning puts it, so the CDFs agree to within a bin at
# every edge, percentiles within w + 2 wc; entropy and mse move a few bins on a flat minimum.
check "pytorch-quantization's growing histogram (first batch holds the amax): same bins and max, CDFs within a bin, thresholds close" bash -c "
  '$PTQ' calibrate '$TMP/identity4.onnx' --input '$TMP/grow.npy' --batch 1 --method all --tensors x --json '$TMP/grow.json' --stats '$TMP/grow.ptqstats' 2>/dev/null &&
  '$PTQ' stats show '$TMP/grow.ptqstats' --hist '$TMP/grow.hist.npy' > /dev/null &&
  $PY '$ORACLE' grow '$TMP/grow0.npy' '$TMP/grow1.npy' '$TMP/grow2.npy' > '$TMP/grow.ref.json' && $PY -c \"
import json, sys, numpy as np
sys.path.insert(0, '$ROOT/tests/oracle'); import calib_ref
hist, edges = calib_ref.grow([np.load('$TMP/grow%d.npy' % b).ravel() for b in range(3)])
H = np.load('$TMP/grow.hist.npy')[0]
assert len(hist) == len(H) == 2048 and hist.sum() == round(H.sum()), (len(hist), hist.sum(), H.sum())
c_pt, c = np.concatenate([[0], np.cumsum(hist)]), np.concatenate([[0], np.cumsum(H)])
assert np.all(c[1:-1] >= c_pt[:-2] - 1e-6) and np.all(c[1:-1] <= c_pt[2:] + 1e-6), 'CDFs more than a bin apart'
ref = json.load(open('$TMP/grow.ref.json')); w = ref['bin']; out = []
for m in ['max', 'percentile-99.9', 'percentile-99.99', 'percentile-99.999', 'entropy', 'mse']:
    got = json.load(open('$TMP/grow.' + m + '.json'))['tensors']['x']['amax']
    if m == 'max': assert np.float32(got) == np.float32(ref[m]), (m, got, ref[m])
    elif m.startswith('percentile'): assert abs(got - ref[m]) <= (w + 2 * 8 / 4096) * 1.0001, (m, got, ref[m], w)
    else: assert abs(got - ref[m]) <= 0.01 * ref['max'], (m, got, ref[m], w)
    out.append(f'{m} {(got - ref[m]) / w:+.0f}')
print('bins from pytorch-quantization:', ', '.join(out))\""
# real activations: 2 photos, every Nth tensor of each model
ls "$ROOT"/build/photos/* | grep -v truncated | sort | head -n 2 > "$TMP/photos2.list"
for spec in det:ch_PP-OCRv4_det_infer:8 cls:ch_ppocr_mobile_v2.0_cls_infer:2 rec:ch_PP-OCRv4_rec_infer:6; do
  IFS=: read -r key file every <<< "$spec"
  check "$key: real activations from 2 photos, every method bit-identical to the oracle" bash -c "
    '$PTQ' calibrate '$MODELS/$file.onnx' --images '$TMP/photos2.list' --preset paddleocr-$key --batch 2 --method all \
       --json '$TMP/$key.json' --stats '$TMP/$key.ptqstats' 2>/dev/null &&
    '$PTQ' stats show '$TMP/$key.ptqstats' --hist '$TMP/$key.hist.npy' > '$TMP/$key.show' &&
    $PY '$ORACLE' hist '$TMP/$key.show' '$TMP/$key.hist.npy' --every $every > '$TMP/$key.ref.json' &&
    $PY '$TMP/exact.py' '$TMP/$key' '$TMP/$key.ref.json'"
done
check "calibrate on PP-OCRv4 det from photos: caches for every method, 1 and 2 threads byte-identical, header EntropyCalibration2 for every method" bash -c "
  '$PTQ' calibrate '$MODELS/ch_PP-OCRv4_det_infer.onnx' --images '$ROOT/build/photos' --preset paddleocr-det --batch 2 --limit 4 \
     --method max,entropy --cache '$TMP/det.cache' --threads 2 2>/dev/null &&
  '$PTQ' calibrate '$MODELS/ch_PP-OCRv4_det_infer.onnx' --images '$ROOT/build/photos' --preset paddleocr-det --batch 2 --limit 4 \
     --method max,entropy --cache '$TMP/det1.cache' --threads 1 2>/dev/null &&
  cmp '$TMP/det.max.cache' '$TMP/det1.max.cache' && cmp '$TMP/det.entropy.cache' '$TMP/det1.entropy.cache' &&
  head -1 '$TMP/det.max.cache' | grep -qx 'TRT-8601-EntropyCalibration2' && head -1 '$TMP/det.entropy.cache' | grep -qx 'TRT-8601-EntropyCalibration2' &&
  grep -q '^x: ' '$TMP/det.entropy.cache' && [ \$(wc -l < '$TMP/det.entropy.cache') = 86 ] && echo \$(wc -l < '$TMP/det.entropy.cache') lines"
# By default calibration observes the tensors quantize gives a Q/DQ pair (85 on det, with no
# exclusions); --tensors '*' every float tensor, as TensorRT's implicit INT8 may want, and the
# tensors both see have the same statistics bit for bit.
check "calibrate --tensors '*': every float tensor of det; the default's 85 tensors identical in both" bash -c "
  '$PTQ' calibrate '$MODELS/ch_PP-OCRv4_det_infer.onnx' --images '$ROOT/build/photos' --preset paddleocr-det --batch 2 --limit 4 \
     --method max --cache '$TMP/all.cache' --tensors '*' 2>/dev/null &&
  [ \$(wc -l < '$TMP/all.cache') -gt 300 ] && [ \$(grep -cxFf '$TMP/det.max.cache' '$TMP/all.cache') = 86 ] &&
  echo \$(wc -l < '$TMP/all.cache') lines, the 86 of the default among them"
check "--trt-version and --trt-algorithm set the header; an unknown algorithm is a usage error" bash -c "
  '$PTQ' calibrate '$MODELS/ch_PP-OCRv4_det_infer.onnx' --from-stats '$TMP/det.ptqstats' --method max --cache '$TMP/v10.cache' \
     --trt-version 101401 --trt-algorithm MinMaxCalibration 2>/dev/null &&
  head -1 '$TMP/v10.cache' | grep -qx 'TRT-101401-MinMaxCalibration' &&
  '$PTQ' calibrate '$MODELS/ch_PP-OCRv4_det_infer.onnx' --from-stats '$TMP/det.ptqstats' --method mse --cache '$TMP/v10b.cache' \
     --trt-version 101401 2>/dev/null && head -1 '$TMP/v10b.cache' | grep -qx 'TRT-101401-EntropyCalibration2' &&
  '$PTQ' calibrate '$MODELS/ch_PP-OCRv4_det_infer.onnx' --from-stats '$TMP/det.ptqstats' --cache '$TMP/bad.cache' --trt-algorithm MinMax 2>'$TMP/bad.err';
  [ \$? = 2 ] && grep -q 'trt-algorithm' '$TMP/bad.err' && [ ! -e '$TMP/bad.cache' ] && cat '$TMP/bad.err'"
# A range that clips more than 1 % of a tensor's values (by more than one int8 step) is named in
# a warning with the method and the share; the share of det's input x equals numpy's count over
# the same preprocessed photos (to the 0.1 % printed, plus one collection bin); percentile,
# mse and max clip no tensor of det beyond that.
check "quantize --method entropy names the tensors it clips, x's share equal to numpy's; percentile, mse and max name none" bash -c "
  '$PTQ' quantize '$MODELS/ch_PP-OCRv4_det_infer.onnx' --images '$TMP/photos2.list' --preset paddleocr-det --method entropy \
     -o '$TMP/clip.qdq.onnx' 2> '$TMP/clip.err' &&
  '$PTQ' preprocess --images '$TMP/photos2.list' --preset paddleocr-det --dump '$TMP/clip.x.npy' > /dev/null &&
  line=\$(grep \"warning: tensor 'x': entropy's amax\" '$TMP/clip.err') && echo \"\$line\" &&
  grep -q ' 1 warnings\\| [2-9][0-9]* warnings' '$TMP/clip.err' &&
  $PY -c \"import sys, re, numpy as np
a, p = re.search(r'amax ([0-9.e+-]+) clips ([0-9.]+) %', sys.argv[1]).groups()
x = np.abs(np.load(sys.argv[2]).astype(np.float64)); a = float(np.float32(a))
share = 100 * np.mean(x > a * (1 + 1 / 127)); binw = 100 * np.mean(np.abs(x - a * (1 + 1 / 127)) < 2 * x.max() / 4096)
assert float(p) > 1 and abs(share - float(p)) <= 0.05 + binw, (share, p, binw); print('numpy', round(share, 2), '%')\" \"\$line\" '$TMP/clip.x.npy' &&
  for m in percentile:99.99 mse max; do
    '$PTQ' quantize '$MODELS/ch_PP-OCRv4_det_infer.onnx' --images '$TMP/photos2.list' --preset paddleocr-det --method \$m \
       -o '$TMP/clip.qdq.onnx' 2> '$TMP/clip.\$m.err' && ! grep -q ' clips ' '$TMP/clip.\$m.err' || exit 1
  done"
finish

#!/usr/bin/env bash
# ptq compare on real models with the photos split into a calibration and an evaluation
# half: the numbers it prints for a method are those of the model `ptq quantize` writes with
# that method; layer-wise table and reports; auto-exclusion reaches its target and
# `quantize --auto-exclude` writes a model that meets it in ptq's run (in ONNX Runtime it
# only has to run and stay near FP32, cosine > 0.5; its figure is printed).
#
# Asserted: compare's figures for a method (cosine, SQNR, max-abs, and the task metrics that
# apply: top-1 agreement for cls, seq-top1 (argmax per position) and the greedy CTC readings:
# seq-chars (1 - CER against FP32's reading) and seq-exact (lines read alike) for rec, mask-iou at 0.3 for
# det's probability map) EQUAL,
# to the last bit of the JSON's doubles, those of ptq's own run of the model `ptq quantize`
# writes with that method (--float-dtype fp16: the float part as compare's default --float fp16
# evaluates it) against ptq's run of the FP32 model, scored here as compare
# scores (image by image, sums of double products in order): compare
# evaluates exactly the model quantize writes, with the executor `ptq run` uses.
# ONNX Runtime (--opt disable, FP32 reference from ORT too) is printed beside, not asserted:
# its kernels round differently in the last bit, a value near a rounding tie then quantizes
# to the other integer, and the flips compound over the quantized layers (cosine 2e-3 apart
# on cls entropy; tests/e2e/quantize_models.sh asserts what ptq and ORT do share: the same
# int8 code for the same float input). Only a sanity bound is kept: ORT runs the model and
# its QDQ output has cosine > 0.5 against its FP32 output.
. "$(dirname "$0")/lib.sh"
export ORACLE_DIR="$ROOT/tests/oracle" # metrics.py's edit distance
export OMP_WAIT_POLICY=passive # 2 cores shared with other jobs: no spinning OpenMP threads
CLS=$MODELS/ch_ppocr_mobile_v2.0_cls_infer.onnx
DET=$MODELS/ch_PP-OCRv4_det_infer.onnx
REC=$MODELS/ch_PP-OCRv4_rec_infer.onnx
# det at 256x256 rather than the preset's 640x640: the same layers, a sixth of the pixels
DETP="paddleocr-det --size 256x256"
ls "$ROOT"/build/photos/* | grep -v truncated | sort > "$TMP/all.list"
awk 'NR % 2 == 1' "$TMP/all.list" | head -n 8 > "$TMP/calib.list"
awk 'NR % 2 == 0' "$TMP/all.list" | head -n 4 > "$TMP/eval.list"
head -n 2 "$TMP/eval.list" > "$TMP/eval2.list"

# compare's figures for METHOD (REPORT.json) against FP32.npy / QDQ.npy (ptq run), scored
# as engine/compare.c scores them: per image (BATCH 1), a sequential double sum of each
# product (float32 products are exact in double), added to the total; cosine ab/sqrt(aa bb),
# SQNR 10 log10(aa/dd). Equal exactly. ORT's pair, if given, is printed beside.
cat > "$TMP/metrics.py" <<'PYEOF'
import json, math, os, sys, numpy as np
sys.path.insert(0, os.environ["ORACLE_DIR"])
from edit_distance import levenshtein
report, method, batch, fp32, qdq = sys.argv[1:6]
ort = sys.argv[6:8]
def figures(fp32, qdq, batch):
    A, B = np.load(fp32), np.load(qdq)
    ab = aa = bb = dd = mx = 0.0
    for i in range(0, A.shape[0], batch):
        a = A[i:i + batch].astype(np.float64).ravel(); b = B[i:i + batch].astype(np.float64).ravel()
        d = a - b
        ab += np.add.accumulate(a * b)[-1]; aa += np.add.accumulate(a * a)[-1]
        bb += np.add.accumulate(b * b)[-1]; dd += np.add.accumulate(d * d)[-1]
        mx = max(mx, math.inf if np.isnan(d).any() else float(np.abs(d).max()))
    cos = 1.0 if aa == 0 and bb == 0 else 0.0 if aa == 0 or bb == 0 else ab / math.sqrt(aa * bb)
    got = {"cosine": cos, "sqnr_db": None if dd == 0 else 10.0 * math.log10(aa / dd), "max_abs": mx}
    if A.ndim == 2 and A.shape[1] > 1:
        got["top1_agree"] = float(np.mean(A.argmax(1) == B.argmax(1)))
    elif A.ndim == 4 and A.shape[1] == 1:
        a, b = A > np.float32(0.3), B > np.float32(0.3)
        union = int(np.count_nonzero(a | b))
        got["mask_iou"] = 1.0 if union == 0 else int(np.count_nonzero(a & b)) / union
    elif A.ndim >= 3:
        got["seq_top1"] = float(np.count_nonzero(A.argmax(-1) == B.argmax(-1))) / A.argmax(-1).size
    if A.ndim == 3:  # greedy CTC reading of every sequence [T, C], blank 0
        def read(x):
            lab = x.argmax(-1)
            return [int(l) for t, l in enumerate(lab) if l != 0 and (t == 0 or l != lab[t - 1])]
        edits = [levenshtein(read(a), read(b)) for a, b in zip(A, B)]
        chars = sum(len(read(a)) for a in A)
        got["seq_chars"] = 1.0 - sum(edits) / (chars or 1)
        got["seq_exact"] = sum(e == 0 for e in edits) / len(edits)
    return got
r = {m["method"]: m for m in json.load(open(report))["methods"]}[method]
got = figures(fp32, qdq, int(batch))
bad = [k for k, v in got.items() if r[k] != v]
for k in bad:
    print(f"{method} {k}: compare {r[k]!r}, ptq run {got[k]!r}")
o = figures(*ort, 1 << 30) if ort else {}
print(method, "equal to ptq run:", ", ".join(f"{k} {r[k]:.9g}" + (f" (ORT {o[k]:.6g})" if o.get(k) is not None else "")
                                        for k in got if r[k] is not None))
if o and not o["cosine"] > 0.5:
    print(f"ONNX Runtime's QDQ output is far from its FP32 output: cosine {o['cosine']}")
    sys.exit(1)
sys.exit(1 if bad else 0)
PYEOF

for spec in "cls:$CLS:paddleocr-cls:softmax_0.tmp_0:eval" "det:$DET:$DETP:sigmoid_0.tmp_0:eval2" \
            "rec:$REC:paddleocr-rec:softmax_11.tmp_0:eval"; do
  IFS=: read -r tag model preset out ev <<<"$spec"
  check "$tag: compare runs every method, names the best, writes JSON and HTML" bash -c "
    '$PTQ' compare '$model' --images '$TMP/calib.list' --eval-images '$TMP/$ev.list' --preset $preset --batch 2 \
       --methods max,percentile:99.99,entropy,mse --json '$TMP/$tag.json' --html '$TMP/$tag.html' > '$TMP/$tag.out' 2>'$TMP/$tag.err' &&
    grep -q '^best: ' '$TMP/$tag.out' && grep -q 'class=\"chart layer-sqnr' '$TMP/$tag.html' && grep -q 'class=\"chart hist' '$TMP/$tag.html' &&
    $PY -c \"
import json; r = json.load(open('$TMP/$tag.json'))
assert len(r['methods']) == 4 and r['best_method'] in [m['method'] for m in r['methods']]
assert len(r['layers']) > 10 and all(l['iso_sqnr_db'] is None or l['iso_sqnr_db'] > 0 for l in r['layers'])
print(r['best_method'], len(r['layers']), 'layers')\" && grep '^best' '$TMP/$tag.out'"
  "$PTQ" preprocess --images "$TMP/$ev.list" --preset $preset --dump "$TMP/$tag.eval.npy" 2>/dev/null
  node "$ROOT/tests/oracle/ort.js" "$model" --input x="$TMP/$tag.eval.npy" --out-dir "$TMP/$tag.fp32" --opt disable >/dev/null
  for m in max entropy; do
    check "$tag $m: compare's figures equal ptq's run of the model quantize writes (ORT's printed)" bash -c "
      '$PTQ' quantize '$model' --images '$TMP/calib.list' --preset $preset --batch 2 --method $m --float-dtype fp16 -o '$TMP/$tag.$m.onnx' 2>/dev/null &&
      node '$ROOT/tests/oracle/ort.js' '$TMP/$tag.$m.onnx' --input x='$TMP/$tag.eval.npy' --out-dir '$TMP/$tag.$m.ort' --opt disable >/dev/null &&
      '$PTQ' run '$TMP/$tag.$m.onnx' --input '$TMP/$tag.eval.npy' --output-dir '$TMP/$tag.$m.ptq' &&
      '$PTQ' run '$model' --input '$TMP/$tag.eval.npy' --output-dir '$TMP/$tag.fp32.ptq' &&
      $PY '$TMP/metrics.py' '$TMP/$tag.json' $m 1 '$TMP/$tag.fp32.ptq/$out.npy' '$TMP/$tag.$m.ptq/$out.npy' \
        '$TMP/$tag.fp32/$out.npy' '$TMP/$tag.$m.ort/$out.npy'"
  done
done

# (cls: the auto-exclusion search runs the model once per candidate, det's would take minutes;
# --float-dtype fp16: the float part as the search evaluated it, --float fp16)
check "cls: --target-cosine returns the fewest harmful layers to float; quantize --auto-exclude writes a model meeting it" bash -c "
  '$PTQ' compare '$CLS' --images '$TMP/calib.list' --eval-images '$TMP/eval.list' --preset paddleocr-cls --batch 2 \
     --methods percentile:99.99 --target-cosine 0.999 --exclusions '$TMP/excl.txt' --json '$TMP/auto.json' --html '$TMP/auto.html' > '$TMP/auto.out' 2>'$TMP/auto.err' &&
  n=\$(wc -l < '$TMP/excl.txt') && [ \$n -ge 1 ] && grep -q -- '--layerPrecisions=' '$TMP/auto.out' &&
  '$PTQ' quantize '$CLS' --images '$TMP/calib.list' --preset paddleocr-cls --batch 2 --method percentile:99.99 \
     --auto-exclude --eval-images '$TMP/eval.list' --target-cosine 0.999 --float-dtype fp16 -o '$TMP/auto.onnx' 2>'$TMP/autoq.err' &&
  grep -q \"auto-exclude: \$n node\" '$TMP/autoq.err' &&
  '$PTQ' run '$TMP/auto.onnx' --input '$TMP/cls.eval.npy' --output-dir '$TMP/auto.ptq' &&
  $PY '$ROOT/tests/oracle/compare.py' '$TMP/auto.ptq/softmax_0.tmp_0.npy' '$TMP/cls.fp32.ptq/softmax_0.tmp_0.npy' --cos 0.999 &&
  node '$ROOT/tests/oracle/ort.js' '$TMP/auto.onnx' --input x='$TMP/cls.eval.npy' --out-dir '$TMP/auto.ort' --opt disable >/dev/null &&
  ort=\$($PY '$ROOT/tests/oracle/compare.py' '$TMP/auto.ort/softmax_0.tmp_0.npy' '$TMP/cls.fp32/softmax_0.tmp_0.npy' --cos 0.5) &&
  echo \$n nodes excluded: \$(tr '\n' ' ' < '$TMP/excl.txt')\; ONNX Runtime vs its FP32: \$ort"

check "--metric picks the best method and shows in the report; one that does not apply is refused" bash -c "
  '$PTQ' compare '$REC' --images '$TMP/calib.list' --eval-images '$TMP/eval.list' --preset paddleocr-rec --batch 2 \
     --methods max,entropy --metric seq-top1 --json '$TMP/rec.seq.json' > '$TMP/rec.seq.out' 2>/dev/null &&
  grep -q '^best: .* (by seq-top1, then cosine)' '$TMP/rec.seq.out' && $PY -c \"
import json; r = json.load(open('$TMP/rec.seq.json'))
m = {x['method']: x for x in r['methods']}
best = max(m.values(), key=lambda x: (x['seq_top1'], x['cosine']))
assert r['best_method'] == best['method'] and all(x['mask_iou'] is None for x in m.values()), r['best_method']
print('best', r['best_method'], {k: v['seq_top1'] for k, v in m.items()})\" &&
  ! '$PTQ' compare '$REC' --images '$TMP/calib.list' --eval-images '$TMP/eval.list' --preset paddleocr-rec \
     --methods max --metric mask-iou:0.5 > /dev/null 2>'$TMP/rec.bad.err' &&
  grep -q 'metric mask-iou:0.5 does not apply to its output 0 (a sequence: seq-top1, seq-chars, seq-exact)' '$TMP/rec.bad.err' &&
  '$PTQ' compare '$REC' --images '$TMP/calib.list' --eval-images '$TMP/eval.list' --preset paddleocr-rec --batch 2 \
     --methods max,entropy --metric seq-chars --json '$TMP/rec.chars.json' > '$TMP/rec.chars.out' 2>/dev/null &&
  grep -q '^best: .* (by seq-chars, then cosine)' '$TMP/rec.chars.out' && grep -q ' seq-chars  seq-exact' '$TMP/rec.chars.out' && $PY -c \"
import json; r = json.load(open('$TMP/rec.chars.json'))
m = {x['method']: x for x in r['methods']}
best = max(m.values(), key=lambda x: (x['seq_chars'], x['cosine']))
assert r['best_method'] == best['method'] and all(x['seq_chars'] <= 1 and 0 <= x['seq_exact'] <= 1 for x in m.values())
print('by seq-chars:', r['best_method'], {k: (v['seq_chars'], v['seq_exact']) for k, v in m.items()})\""
check "rec: --metric seq-top1 --target: the layers returned to float reach the target in ptq's run" bash -c "
  '$PTQ' compare '$REC' --images '$TMP/calib.list' --eval-images '$TMP/eval.list' --preset paddleocr-rec --batch 2 \
     --methods entropy --metric seq-top1 --target 1 --exclusions '$TMP/rec.excl' > '$TMP/rec.t.out' 2>/dev/null &&
  '$PTQ' quantize '$REC' --images '$TMP/calib.list' --preset paddleocr-rec --batch 2 --method entropy \
     --exclude-nodes @'$TMP/rec.excl' -o '$TMP/rec.t.onnx' 2>/dev/null &&
  '$PTQ' run '$TMP/rec.t.onnx' --input '$TMP/rec.eval.npy' --output-dir '$TMP/rec.t.ptq' &&
  $PY -c \"
import numpy as np
a = np.load('$TMP/rec.fp32.ptq/softmax_11.tmp_0.npy').argmax(-1); b = np.load('$TMP/rec.t.ptq/softmax_11.tmp_0.npy').argmax(-1)
n = len(open('$TMP/rec.excl').read().split())
assert (a == b).all(), (a != b).sum()
print(n, 'nodes in float: every position agrees')\""
check "the figures and the layer-wise errors do not depend on the batch: --batch 1 and --batch 3, the same JSON" bash -c "
  for b in 1 3; do '$PTQ' compare '$CLS' --images '$TMP/calib.list' --eval-images '$TMP/eval.list' --preset paddleocr-cls \
     --batch \$b --methods max,entropy --json '$TMP/b'\$b.json >/dev/null 2>&1 || exit 1; done
  $PY -c \"
import json
def strip(x):
    if isinstance(x, dict): return {k: strip(v) for k, v in x.items() if not any(w in k for w in ('second', 'rss', 'batch', 'time'))}
    if isinstance(x, list): return [strip(v) for v in x]
    return x
a, b = (strip(json.load(open('$TMP/b%d.json' % k))) for k in (1, 3))
assert a == b, [k for k in a if a[k] != b.get(k)]
print(len(a['layers']), 'layers and', len(a['methods']), 'methods alike')\""
check "--layers-method none: the same figures without the layer-wise pass; with a target refused" bash -c "
  '$PTQ' compare '$CLS' --images '$TMP/calib.list' --eval-images '$TMP/eval.list' --preset paddleocr-cls \
     --batch 1 --methods max,entropy --layers-method none --json '$TMP/nl.json' > '$TMP/nl.out' 2>'$TMP/nl.err' &&
  ! grep -q 'layer-wise' '$TMP/nl.out' '$TMP/nl.err' &&
  $PY -c \"
import json
def strip(x):
    if isinstance(x, dict): return {k: strip(v) for k, v in x.items() if not any(w in k for w in ('second', 'rss', 'batch', 'time'))}
    if isinstance(x, list): return [strip(v) for v in x]
    return x
a, b = strip(json.load(open('$TMP/nl.json'))), strip(json.load(open('$TMP/b1.json')))
assert a['layers'] == [] and a['methods'] == b['methods'], 'figures differ'
print(len(a['methods']), 'methods as with the layer-wise pass, no layers')\" &&
  '$PTQ' compare '$CLS' --images '$TMP/calib.list' --eval-images '$TMP/eval.list' --preset paddleocr-cls \
     --layers-method none --target-cosine 0.99 >/dev/null 2>'$TMP/nl2.err'; [ \$? = 2 ] && grep -q 'needs the layer-wise errors' '$TMP/nl2.err'"
check "compare: a missing --eval-images is a usage error" bash -c "
  '$PTQ' compare '$CLS' --images '$TMP/calib.list' --preset paddleocr-cls 2>'$TMP/u.err'; [ \$? = 2 ] && grep -q 'eval-images' '$TMP/u.err'"
# On a terminal, the progress line names the phase: calibration, each method with its
# number, the layer-wise pass (script(1) gives compare a terminal).
progress_labels() {
  script -qec "'$PTQ' compare '$CLS' --images '$TMP/calib.list' --eval-images '$TMP/eval.list' --preset paddleocr-cls \
    --methods max,mse --threads 2 >/dev/null" "$TMP/tty.log" >/dev/null || return 1
  local t; t=$(tr '\r' '\n' < "$TMP/tty.log")
  for want in "calibration: 8/8 images" "evaluating max (1/2): 4/4 images" "evaluating mse (2/2): 4/4 images" \
              "layer-wise errors of"; do
    echo "$t" | grep -qF "$want" || { echo "no '$want' in the progress"; return 1; }
  done
  echo "calibration, evaluating max (1/2), evaluating mse (2/2), layer-wise errors"
}
check "progress on a terminal names the phase and the method" progress_labels
finish

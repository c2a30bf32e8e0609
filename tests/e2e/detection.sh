#!/usr/bin/env bash
# A real detector with data-dependent shapes: torchvision's SSDlite (ssdlite320_mobilenet_v3_large,
# random weights from a fixed seed, its classification head drawn wider so that scores differ;
# opset 13, the list-of-images input) exported by torch.onnx: 180 NonZero, TopK and GatherND per
# class, an If and a NonMaxSuppression. ptq's FP32 detections equal ONNX Runtime's (boxes and
# labels exactly, scores to 1e-5) and are bit-identical at 1 and 2 threads. Skipped, naming
# them, while ops the export uses are missing.
. "$(dirname "$0")/lib.sh"

M=$TMP/ssdlite.onnx
if [ ! -f "$M" ]; then
  $PY - "$TMP" <<'PYEOF' >/dev/null 2>&1
import sys, warnings, torch, torchvision, numpy as np
warnings.filterwarnings("ignore")
d = sys.argv[1]
torch.manual_seed(3)
m = torchvision.models.detection.ssdlite320_mobilenet_v3_large(weights=None, weights_backbone=None).eval()
with torch.no_grad():
    for p in m.head.classification_head.parameters():
        p.normal_(0, 0.5)
x = torch.rand(3, 320, 320)
torch.onnx.export(m, ([x],), f"{d}/ssdlite.tmp.onnx", opset_version=13, input_names=["images"],
                  output_names=["boxes", "scores", "labels"])
np.save(f"{d}/images.npy", x.numpy())
PYEOF
  [ -f "$TMP/ssdlite.tmp.onnx" ] && mv "$TMP/ssdlite.tmp.onnx" "$M"
fi
if [ ! -f "$M" ]; then
  skip "SSDlite" "torch.onnx could not export it here"
  finish
fi
if ! "$PTQ" run "$M" --input "$TMP/images.npy" --output-dir "$TMP/ptq2" --threads 2 2>"$TMP/run.err" &&
   grep -q "unsupported ops" "$TMP/run.err"; then
  skip "SSDlite" "$(sed 's/.*unsupported ops: //' "$TMP/run.err")"
  finish
fi
node "$ROOT/tests/oracle/ort.js" "$M" --input images="$TMP/images.npy" --out-dir "$TMP/ort" >/dev/null
check "SSDlite: boxes and labels equal ONNX Runtime's, scores to 1e-5" bash -c "cat '$TMP/run.err' >&2; $PY -c \"
import numpy as np
got = {k: np.load('$TMP/ptq2/%s.npy' % k) for k in ('boxes', 'scores', 'labels')}
want = {k: np.load('$TMP/ort/%s.npy' % k) for k in ('boxes', 'scores', 'labels')}
for k in got:
    assert got[k].shape == want[k].shape and got[k].dtype == want[k].dtype, (k, got[k].shape, want[k].shape)
assert np.array_equal(got['boxes'], want['boxes']) and np.array_equal(got['labels'], want['labels']), 'detections differ'
assert np.allclose(got['scores'], want['scores'], rtol=1e-5, atol=0), 'scores differ'
print('%d detections, %d classes; scores max-abs %.2g' % (len(got['labels']), len(set(got['labels'].tolist())),
      float(np.abs(got['scores'] - want['scores']).max()) if got['scores'].size else 0))\""
check "SSDlite: 1 and 2 threads bit-identical" bash -c "'$PTQ' run '$M' --input '$TMP/images.npy' --output-dir '$TMP/ptq1' --threads 1 &&
    for k in boxes scores labels; do cmp \"$TMP/ptq1/\$k.npy\" \"$TMP/ptq2/\$k.npy\" || exit 1; done"
finish

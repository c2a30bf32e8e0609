#!/usr/bin/env bash
# Real detectors with data-dependent shapes, exported here by torch.onnx (opset 13, the
# list-of-images input, random weights from a fixed seed): torchvision's SSDlite
# (ssdlite320_mobilenet_v3_large, its classification head drawn wider so that scores differ:
# 180 NonZero, TopK and GatherND, an If on the NMS result, NonMaxSuppression) and Faster R-CNN
# (fasterrcnn_mobilenet_v3_large_320_fpn, every box kept: RPN, RoiAlign, 5 If, NMS). ptq's FP32
# detections equal ONNX Runtime's (boxes and labels exactly, scores to 1e-5) and are
# bit-identical at 1 and 2 threads. Skipped, naming them, while ops the export uses are missing.
. "$(dirname "$0")/lib.sh"

# One-node models of the data-dependent ops at detector-like sizes, against ONNX Runtime bit for
# bit: NonMaxSuppression (both box formats, 3 classes x 2 batches x 500 boxes, scores on a coarse
# grid so that ties are common, with and without a score threshold), NonZero, Compress, Unique;
# Scan along axis 1 in reverse, and a Loop stopped by the condition its body computes.
$PY - "$TMP" <<'PYEOF'
import sys, numpy as np, onnx
from onnx import helper, TensorProto as T
d = sys.argv[1]
rng = np.random.default_rng(11)
def save(name, node, inputs, outputs, opset=13):
    g = helper.make_graph([node], name, [helper.make_tensor_value_info(n, dt, list(a.shape)) for n, dt, a in inputs],
                          [helper.make_tensor_value_info(n, dt, None) for n, dt in outputs])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    onnx.save(m, f"{d}/{name}.onnx")
    with open(f"{d}/{name}.inputs", "w") as f:
        for n, dt, a in inputs:
            np.save(f"{d}/{name}.{n}.npy", a)
            f.write(f"{n}\n")
B, C, N = 2, 3, 500
xy = rng.uniform(0, 300, (B, N, 2)).astype(np.float32)
wh = rng.uniform(4, 80, (B, N, 2)).astype(np.float32)
corner = np.concatenate([xy[..., ::-1], (xy + wh)[..., ::-1]], -1)  # [y1, x1, y2, x2]
flip = rng.random((B, N)) < 0.3
corner[flip] = corner[flip][:, [2, 3, 0, 1]]                    # either corner order
center = np.concatenate([xy + wh / 2, wh], -1)
scores = (np.round(rng.random((B, C, N)) * 20) / 20).astype(np.float32)
for name, boxes, cpb, th in (("nms_corner", corner, 0, 0.3), ("nms_center", center, 1, None)):
    ins = [("boxes", T.FLOAT, boxes), ("scores", T.FLOAT, scores), ("max_out", T.INT64, np.array([400], np.int64)),
           ("iou", T.FLOAT, np.array([0.45], np.float32))]
    if th is not None:
        ins.append(("score_th", T.FLOAT, np.array([th], np.float32)))
    save(name, helper.make_node("NonMaxSuppression", [n for n, _, _ in ins], ["sel"], center_point_box=cpb), ins,
         [("sel", T.INT64)])
x = (rng.integers(-3, 4, (6, 40)) * 0.5).astype(np.float32)
save("nonzero", helper.make_node("NonZero", ["x"], ["y"]), [("x", T.FLOAT, x)], [("y", T.INT64)])
save("compress", helper.make_node("Compress", ["x", "c"], ["y"], axis=1), [("x", T.FLOAT, x), ("c", T.BOOL, x[0] > 0)],
     [("y", T.FLOAT)])
for name, kw in (("unique_flat", {}), ("unique_axis0", {"axis": 0}), ("unique_unsorted", {"sorted": 0})):
    xu = (rng.integers(0, 3, (30, 3)) * 0.5).astype(np.float32)
    save(name, helper.make_node("Unique", ["x"], ["y", "idx", "inv", "cnt"], **kw), [("x", T.FLOAT, xu)],
         [("y", T.FLOAT), ("idx", T.INT64), ("inv", T.INT64), ("cnt", T.INT64)], opset=11)
# Scan over axis 1 of one input read backwards, stacking along axis 1 backwards; a Loop that
# stops on a condition its body computes (a running sum passing a bound) and stacks a scan output
vi = lambda n, dt, shape: helper.make_tensor_value_info(n, dt, shape)
body = helper.make_graph([helper.make_node("Add", ["acc", "col"], ["acc_out"]),
                          helper.make_node("Mul", ["acc_out", "col"], ["prod"])], "scan_body",
                         [vi("acc", T.FLOAT, [4]), vi("col", T.FLOAT, [4])], [vi("acc_out", T.FLOAT, [4]), vi("prod", T.FLOAT, [4])])
xs = rng.normal(size=(4, 7)).astype(np.float32)
save("scan_axes", helper.make_node("Scan", ["init", "xs"], ["final", "stacked"], body=body, num_scan_inputs=1,
                                   scan_input_axes=[1], scan_input_directions=[1], scan_output_axes=[1],
                                   scan_output_directions=[1]),
     [("init", T.FLOAT, np.zeros(4, np.float32)), ("xs", T.FLOAT, xs)], [("final", T.FLOAT), ("stacked", T.FLOAT)], opset=16)
lbody = helper.make_graph([helper.make_node("Add", ["s_in", "step"], ["s_out"]),
                           helper.make_node("ReduceSum", ["s_out"], ["tot"], keepdims=0),
                           helper.make_node("Less", ["tot", "bound"], ["go"]),
                           helper.make_node("Identity", ["s_out"], ["trace"])], "loop_body",
                          [vi("i", T.INT64, []), vi("c", T.BOOL, []), vi("s_in", T.FLOAT, [3])],
                          [vi("go", T.BOOL, []), vi("s_out", T.FLOAT, [3]), vi("trace", T.FLOAT, [3])])
save("loop_until", helper.make_node("Loop", ["trip", "", "s0"], ["s_final", "traces"], body=lbody),
     [("trip", T.INT64, np.array(100, np.int64)), ("s0", T.FLOAT, np.zeros(3, np.float32)),
      ("step", T.FLOAT, rng.uniform(0.5, 1.5, 3).astype(np.float32)), ("bound", T.FLOAT, np.array(20, np.float32))],
     [("s_final", T.FLOAT), ("traces", T.FLOAT)])
PYEOF
for c in nms_corner nms_center nonzero compress unique_flat unique_axis0 unique_unsorted scan_axes loop_until; do
  args=(); for n in $(cat "$TMP/$c.inputs"); do args+=(--input "$n=$TMP/$c.$n.npy"); done
  rm -rf "$TMP/$c.ptq" "$TMP/$c.ort"
  node "$ROOT/tests/oracle/ort.js" "$TMP/$c.onnx" "${args[@]}" --out-dir "$TMP/$c.ort" >/dev/null
  check "$c: equals ONNX Runtime bit for bit" bash -c "'$PTQ' run '$TMP/$c.onnx' ${args[*]} --output-dir '$TMP/$c.ptq' &&
      $PY -c \"
import numpy as np, os
d1, d2 = '$TMP/$c.ptq', '$TMP/$c.ort'
names = sorted(os.listdir(d2))
assert names and names == sorted(os.listdir(d1)), (names, os.listdir(d1))
for n in names:
    a, b = np.load(os.path.join(d1, n)), np.load(os.path.join(d2, n))
    assert a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes(), (n, a.shape, b.shape)
print(', '.join('%s %s' % (n[:-4], 'x'.join(map(str, np.load(os.path.join(d1, n)).shape))) for n in names))\""
done

# detector KEY: exports torchvision's KEY model (once; kept in $TMP), runs ptq at 2 and 1 threads
# and ONNX Runtime, and compares the detections; skips naming the ops ptq lacks.
detector() {
  local key=$1 m=$TMP/$1.onnx
  if [ ! -f "$m" ]; then
    $PY - "$TMP" "$key" <<'PYEOF' >/dev/null 2>&1
import sys, warnings, torch, torchvision, numpy as np
warnings.filterwarnings("ignore")
d, key = sys.argv[1], sys.argv[2]
torch.manual_seed(3)
det = torchvision.models.detection
if key == "ssdlite":
    m = det.ssdlite320_mobilenet_v3_large(weights=None, weights_backbone=None).eval()
    with torch.no_grad():
        for p in m.head.classification_head.parameters():
            p.normal_(0, 0.5)
    x = torch.rand(3, 320, 320)
else:  # Faster R-CNN: every box kept whatever its score (random weights score low)
    m = det.fasterrcnn_mobilenet_v3_large_320_fpn(weights=None, weights_backbone=None, box_score_thresh=0.0).eval()
    x = torch.rand(3, 256, 256)
torch.onnx.export(m, ([x],), f"{d}/{key}.tmp.onnx", opset_version=13, input_names=["images"],
                  output_names=["boxes", "scores", "labels"])
np.save(f"{d}/{key}.images.npy", x.numpy())
PYEOF
    [ -f "$TMP/$key.tmp.onnx" ] && mv "$TMP/$key.tmp.onnx" "$m"
  fi
  if [ ! -f "$m" ]; then
    skip "$key" "torch.onnx could not export it here"
    return
  fi
  rm -rf "$TMP/$key.ptq1" "$TMP/$key.ptq2" "$TMP/$key.ort"
  if ! "$PTQ" run "$m" --input "$TMP/$key.images.npy" --output-dir "$TMP/$key.ptq2" --threads 2 2>"$TMP/$key.err" &&
     grep -q "unsupported ops" "$TMP/$key.err"; then
    skip "$key" "$(sed 's/.*unsupported ops: //' "$TMP/$key.err")"
    return
  fi
  node "$ROOT/tests/oracle/ort.js" "$m" --input images="$TMP/$key.images.npy" --out-dir "$TMP/$key.ort" >/dev/null
  check "$key: boxes and labels equal ONNX Runtime's, scores to 1e-5" bash -c "cat '$TMP/$key.err' >&2; $PY -c \"
import numpy as np
got = {k: np.load('$TMP/$key.ptq2/%s.npy' % k) for k in ('boxes', 'scores', 'labels')}
want = {k: np.load('$TMP/$key.ort/%s.npy' % k) for k in ('boxes', 'scores', 'labels')}
for k in got:
    assert got[k].shape == want[k].shape and got[k].dtype == want[k].dtype, (k, got[k].shape, want[k].shape)
assert np.array_equal(got['boxes'], want['boxes']) and np.array_equal(got['labels'], want['labels']), 'detections differ'
assert np.allclose(got['scores'], want['scores'], rtol=1e-5, atol=0), 'scores differ'
print('%d detections, %d classes; scores max-abs %.2g' % (len(got['labels']), len(set(got['labels'].tolist())),
      float(np.abs(got['scores'] - want['scores']).max()) if got['scores'].size else 0))\""
  check "$key: 1 and 2 threads bit-identical" bash -c "'$PTQ' run '$m' --input '$TMP/$key.images.npy' --output-dir '$TMP/$key.ptq1' --threads 1 &&
      for k in boxes scores labels; do cmp \"$TMP/$key.ptq1/\$k.npy\" \"$TMP/$key.ptq2/\$k.npy\" || exit 1; done"
}
detector ssdlite
detector fasterrcnn
finish

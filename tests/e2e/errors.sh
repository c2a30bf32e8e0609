#!/usr/bin/env bash
# Bad input: each case must exit non-zero without crashing (status < 128) and print
# exactly one line on stderr that names the file or option and the problem.
. "$(dirname "$0")/lib.sh"

# expect_error "name" "pattern" command... : one stderr line matching pattern, 0 < status < 128
expect_error() {
  local name=$1 pat=$2; shift 2
  check "$name" bash -c '
    err=$("$@" 2>&1 >/dev/null); rc=$?
    lines=$(printf "%s\n" "$err" | grep -c .)
    echo "status $rc: $err"
    [ $rc -gt 0 ] && [ $rc -lt 128 ] && [ "$lines" = 1 ] && printf "%s" "$err" | grep -qE "$0"' "$pat" "$@"
}

DET=$MODELS/ch_PP-OCRv4_det_infer.onnx
head -c 1000 "$DET" > "$TMP/truncated.onnx"
head -c 4096 /dev/urandom > "$TMP/random.onnx"
: > "$TMP/empty.onnx"
$PY - "$TMP" <<'PYEOF'
import sys, onnx
from onnx import helper, TensorProto as T
d = sys.argv[1]
def save(name, nodes, inputs, outputs, inits=()):
    g = helper.make_graph(nodes, name, inputs, outputs, list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    onnx.save(m, f"{d}/{name}.onnx")
x = helper.make_tensor_value_info("x", T.FLOAT, [1, 3, 4, 4])
y = helper.make_tensor_value_info("y", T.FLOAT, [1, 3, 4, 4])
save("unknown_op", [helper.make_node("FancyOp", ["x"], ["y"], name="fancy")], [x], [y])
save("cycle", [helper.make_node("Add", ["x", "b"], ["a"], name="add"), helper.make_node("Relu", ["a"], ["b"], name="relu"),
               helper.make_node("Relu", ["a"], ["y"], name="out")], [x], [y])
save("missing_init", [helper.make_node("Add", ["x", "w"], ["y"], name="add_w")], [x], [y])
save("relu", [helper.make_node("Relu", ["x"], ["y"], name="relu")], [x], [y])
bad = helper.make_tensor("w", T.FLOAT, [4, 4], [1.0] * 16)
bad.raw_data = b"\0" * 12; del bad.float_data[:]
save("bad_raw", [helper.make_node("Add", ["x", "w"], ["y"])], [x], [y], [bad])
PYEOF
$PY -c "import numpy as np; np.save('$TMP/rank3.npy', np.zeros((3, 4, 4), np.float32))"
printf 'not an image model' > "$TMP/text.onnx"

expect_error "truncated model"        "truncated.onnx.*(truncated|corrupt)"  "$PTQ" inspect "$TMP/truncated.onnx"
expect_error "random bytes"           "random.onnx.*(not an ONNX|corrupt)"   "$PTQ" inspect "$TMP/random.onnx"
expect_error "text file"              "text.onnx.*(not an ONNX|corrupt)"     "$PTQ" inspect "$TMP/text.onnx"
expect_error "empty file"             "empty.onnx.*empty"                    "$PTQ" run "$TMP/empty.onnx"
expect_error "missing file"           "nope.onnx.*No such file"              "$PTQ" run "$TMP/nope.onnx"
mkdir -p "$TMP/folder.onnx" "$TMP/folder.npy"
expect_error "a folder as the model"  "folder.onnx: is a folder"             "$PTQ" inspect "$TMP/folder.onnx"
expect_error "a folder as --input"    "folder.npy: is a folder"              "$PTQ" run "$DET" --input "$TMP/folder.npy"
expect_error "unknown op"             "unknown_op.onnx.*FancyOp.*fancy"      "$PTQ" run "$TMP/unknown_op.onnx"
expect_error "cycle"                  "cycle.onnx.*cycle"                    "$PTQ" run "$TMP/cycle.onnx"
expect_error "missing initializer"    "missing_init.onnx.*'w'"               "$PTQ" run "$TMP/missing_init.onnx"
expect_error "bad raw_data length"    "bad_raw.onnx.*'w'.*12 bytes"          "$PTQ" run "$TMP/bad_raw.onnx"
expect_error "wrong input rank"       "relu.onnx.*'x'.*rank 3.*rank 4"       "$PTQ" run "$TMP/relu.onnx" --input "$TMP/rank3.npy"
expect_error "unbound symbolic dim"   "input 'x'.*DynamicDimension.*--input-shape" "$PTQ" run "$DET"
expect_error "malformed --input-shape" "bad --input-shape 'x:1x3xx4'"        "$PTQ" run "$DET" --input-shape x:1x3xx4
expect_error "unknown option"         "unknown option '--frobnicate'"        "$PTQ" run "$DET" --frobnicate
expect_error "--input-shape for a missing input" "'y'.*not an input"         "$PTQ" run "$TMP/relu.onnx" --input-shape y:1x3x4x4
expect_error "unknown command"        "unknown command 'frob'"               "$PTQ" frob
# a list whose images all fail: an error, and no model written
printf '/nonexistent/a.png\n/nonexistent/b.png\n' > "$TMP/unreadable.list"
check "no image readable: a warning per image, one error, no model" bash -c "
  '$PTQ' quantize '$DET' --preset paddleocr-det --images '$TMP/unreadable.list' -o '$TMP/unreadable.onnx' 2>'$TMP/unreadable.err'
  rc=\$?; cat '$TMP/unreadable.err'; [ \$rc = 1 ] && [ \$(grep -c 'warning: skipped' '$TMP/unreadable.err') = 2 ] &&
  tail -n 1 '$TMP/unreadable.err' | grep -q 'unreadable.list: none of its 2 images could be read' && [ ! -e '$TMP/unreadable.onnx' ]"
# the same for the evaluation images of compare and of quantize --auto-exclude (it used to go
# on with NaN metrics and say the target was not reached "with all 0 quantized tensors")
CLS=$ROOT/build/models/ch_ppocr_mobile_v2.0_cls_infer.onnx
check "no evaluation image readable: one error naming the list, no model" bash -c "
  '$PTQ' quantize '$CLS' --preset paddleocr-cls --images '$ROOT/build/photos' --limit 4 --auto-exclude \
    --eval-images '$TMP/unreadable.list' --metric top1 --target 0.99 -o '$TMP/unreadable.onnx' 2>'$TMP/ev1.err'
  a=\$?; '$PTQ' compare '$CLS' --preset paddleocr-cls --images '$ROOT/build/photos' --limit 4 \
    --eval-images '$TMP/unreadable.list' 2>'$TMP/ev2.err'
  b=\$?; tail -n 1 '$TMP/ev1.err'; [ \$a = 1 ] && [ \$b = 1 ] && [ ! -e '$TMP/unreadable.onnx' ] &&
  for f in ev1 ev2; do tail -n 1 '$TMP/'\$f.err | grep -q 'unreadable.list: none of its 2 evaluation images could be read' || exit 1; done"
# the wrong preset: a fixed dim contradicted is refused before anything runs; a plan that fails
# at the preprocessed shape names that shape, where it came from and the declared dims
expect_error "preset contradicts a fixed dim" \
  "relu.onnx: preset paddleocr-cls with --mean 0,0,0 gives 3x48x192 images but the model declares x as \[1, 3, 4, 4\] \(dim 2 is 4\)" \
  "$PTQ" calibrate "$TMP/relu.onnx" --preset paddleocr-cls --mean 0,0,0 --images "$ROOT/build/photos" --limit 1 --json "$TMP/no.json"
# a preset whose size follows the image needs those dims dynamic in the model
expect_error "dynamic width on a model that fixes it" \
  "relu.onnx: preset paddleocr-rec-dynamic with --size 4x4 gives 3x4xW images \(W follows the image\) but the model fixes x as \[1, 3, 4, 4\] \(dim 3 is 4\); use a fixed-size preset" \
  "$PTQ" calibrate "$TMP/relu.onnx" --preset paddleocr-rec-dynamic --size 4x4 --images "$ROOT/build/photos" --limit 1 --json "$TMP/no.json"
expect_error "dynamic size on a model that fixes it" \
  "relu.onnx: preset paddleocr-det-dynamic gives 3xHxW images \(H and W follow the image\) but the model fixes x as \[1, 3, 4, 4\] \(dim 2 is 4\)" \
  "$PTQ" compare "$TMP/relu.onnx" --preset paddleocr-cls --eval-preset paddleocr-det-dynamic --images "$ROOT/build/photos" --eval-images "$ROOT/build/photos"
expect_error "plan fails at the preset's shape" \
  "det_infer.onnx: Add '.*do not broadcast \(the input x was 1x3x48x192, from preset paddleocr-cls; the model declares it as \[\?, 3, \?, \?\]\)" \
  "$PTQ" quantize "$DET" --preset paddleocr-cls --images "$ROOT/build/photos" --limit 2 -o "$TMP/no"
# one validation for every command: a node ptq run and inspect refuse (here the last one, after
# the last quantized layer, which the calibration pass does not run) is refused by convert,
# calibrate, quantize and compare too, before any work, with the same message; with symbolic
# input dims at the first batch's shape. An opset newer than ptq knows is refused at load.
$PY - "$TMP" <<'PYEOF'
import sys, numpy as np, onnx
from onnx import helper, numpy_helper, TensorProto as T
d = sys.argv[1]
r = np.random.RandomState(0)
w1 = numpy_helper.from_array(r.randn(4, 3, 3, 3).astype(np.float32), "w1")
w2 = numpy_helper.from_array(r.randn(4, 4, 3, 3).astype(np.float32), "w2")
def save(name, last, inits=(), opset=13, dims=(1, 3, 8, 8)):
    x = helper.make_tensor_value_info("x", T.FLOAT, list(dims))
    y = helper.make_tensor_value_info("y", T.FLOAT, None)
    nodes = [helper.make_node("Conv", ["x", "w1"], ["a"], name="c1", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["a"], ["r"], name="relu"), last]
    g = helper.make_graph(nodes, name, [x], [y], [w1, w2] + list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)]); m.ir_version = 8
    onnx.save(m, f"{d}/{name}.onnx")
conv = lambda **a: helper.make_node("Conv", ["r", "w2"], ["y"], name="last", **a)
for sym in ("", "_sym"):
    dims = (1, 3, 8, 8) if not sym else ("N", 3, "H", "W")
    save("stride0" + sym, conv(strides=[0, 0]), dims=dims)
    save("group0" + sym, conv(group=0), dims=dims)
    save("negpads" + sym, conv(pads=[-5, 0, 0, 0]), dims=dims)
    save("pads_huge" + sym, conv(pads=[1 << 22] * 4), dims=dims)  # 1.1 PB of output: past the 1 TiB a plan may hold
    save("expand_huge" + sym, helper.make_node("Expand", ["r", "shp"], ["y"], name="last"),
         [numpy_helper.from_array(np.array([1 << 20, 1 << 20, 1 << 20, 8], np.int64), "shp")], dims=dims)
save("opset1000", conv(), opset=1000)
save("opset15", conv(), opset=15)
np.save(f"{d}/x8.npy", r.rand(1, 3, 8, 8).astype(np.float32))
PYEOF
for m in stride0 group0 negpads pads_huge expand_huge; do
  "$PTQ" run "$TMP/$m.onnx" --input "$TMP/x8.npy" 2>&1 >/dev/null | sed "s|^ptq: [^:]*: ||" > "$TMP/$m.want"
  check "$m: ptq run refuses it" grep "'last'" "$TMP/$m.want"
  want=$(cat "$TMP/$m.want")
  IMGS="--images $ROOT/build/photos --limit 1 --preset imagenet-torchvision --size 8x8 --mode stretch"
  while IFS='|' read -r what args; do
    check "$m: ptq $what refuses it as run does" refused "$want" $PTQ $args
  done <<EOF
convert|convert $TMP/$m.onnx -o $TMP/no.onnx
calibrate|calibrate $TMP/$m.onnx --input $TMP/x8.npy --json $TMP/no.json
quantize|quantize $TMP/$m.onnx --input $TMP/x8.npy -o $TMP/no.onnx
compare|compare $TMP/$m.onnx $IMGS --eval-images $ROOT/build/photos --eval-limit 1 --methods max
quantize (symbolic dims, samples)|quantize $TMP/${m}_sym.onnx --input $TMP/x8.npy -o $TMP/no.onnx
calibrate (symbolic dims, images)|calibrate $TMP/${m}_sym.onnx $IMGS --json $TMP/no.json
EOF
done
rm -f "$TMP/no.onnx"
OPSET_MSG="opset1000.onnx: opset_import declares opset 1000 of the default ONNX domain; ptq knows opsets up to 22"
check "opset 1000: ptq inspect refuses it" refused "$OPSET_MSG" "$PTQ" inspect "$TMP/opset1000.onnx"
check "opset 1000: ptq run refuses it" refused "$OPSET_MSG" "$PTQ" run "$TMP/opset1000.onnx" --input "$TMP/x8.npy"
check "opset 1000: ptq convert refuses it" refused "$OPSET_MSG" "$PTQ" convert "$TMP/opset1000.onnx" -o "$TMP/no.onnx"
check "opset 1000: ptq quantize refuses it" refused "$OPSET_MSG" "$PTQ" quantize "$TMP/opset1000.onnx" --input "$TMP/x8.npy" -o "$TMP/no.onnx"
check "opset 15: quantize says 15 -> 15 and writes opset 15" bash -c "
  '$PTQ' quantize '$TMP/opset15.onnx' --input '$TMP/x8.npy' -o '$TMP/opset15.qdq.onnx' 2>&1 | tee /dev/stderr | grep -q 'opset 15 -> 15' &&
  $PY -c \"import onnx; v = [o.version for o in onnx.load('$TMP/opset15.qdq.onnx').opset_import if o.domain in ('', 'ai.onnx')]; print(v); assert v == [15]\""
finish

#!/usr/bin/env bash
# Refinements that cannot make things worse (`ptq quantize`, engine/quantize.c): each refinement
# asked for is measured on held-out images before and after, and kept only where it helps.
# - with 16 or more calibration images, every fourth one is held out of the refinement and the
#   check runs on them, with the metric that fits the model (top1 for cls);
# - the summary names every refinement with the metric before and after and kept/dropped; a
#   kept one's "after" is the next one's "before", a dropped one leaves the next "before" where
#   it was; the model written measures what the last kept step measured (ptq checks it after
#   undoing the dropped ones);
# - --eval-images: the check runs on them instead, all of the calibration images refine;
# - --no-refine-check, or too few calibration images: no check, and the summary says why;
# - the same bytes at 1 and 2 threads.
. "$(dirname "$0")/lib.sh"
export OMP_WAIT_POLICY=passive
CLS=$MODELS/ch_ppocr_mobile_v2.0_cls_infer.onnx
CROPS=$ROOT/build/textphotos/cls
ls "$CROPS"/*.png | LC_ALL=C sort | head -n 24 > "$TMP/calib.list"
ls "$CROPS"/*.png | LC_ALL=C sort | sed -n 25,36p > "$TMP/eval.list"
ls "$CROPS"/*.png | LC_ALL=C sort | head -n 10 > "$TMP/few.list"

q() { # out images flags...
  local out=$1 images=$2; shift 2
  "$PTQ" quantize "$CLS" --images "$images" --preset paddleocr-cls --method mse --threads 2 "$@" \
    -o "$TMP/$out.onnx" 2>"$TMP/$out.err" || { cat "$TMP/$out.err"; return 1; }
}
check "checked: bias correction and AdaRound 100 on 24 crops" q held "$TMP/calib.list" --bias-correction --adaround 100
check "checked at 1 thread" q held1 "$TMP/calib.list" --bias-correction --adaround 100 --threads 1
check "checked on --eval-images" q evl "$TMP/calib.list" --bias-correction --adaround 100 --eval-images "$TMP/eval.list"
check "unchecked: --no-refine-check" q nochk "$TMP/calib.list" --bias-correction --adaround 100 --no-refine-check
check "unchecked: 10 images" q few "$TMP/few.list" --bias-correction

# the summary: 6 held-out images (positions 3, 7, ... of 24), top1, both steps in order, chained
chain() { # err-file images
  $PY - "$1" "$2" <<'EOF'
import re, sys
line = [l for l in open(sys.argv[1]) if 'refinement check on' in l]
assert len(line) == 1, 'no check line'
line = line[0]
m = re.search(r'check on (\d+) held-out images \(top1, then cosine\):', line)
assert m and int(m.group(1)) == int(sys.argv[2]), line
steps = re.findall(r' (AdaRound|bias correction|output-aware scales) ([0-9.]+) -> ([0-9.]+) (kept|dropped)', line)
assert [s[0] for s in steps] == ['AdaRound', 'bias correction'], steps
cur = float(steps[0][1])
for name, before, after, kept in steps:
    assert float(before) == cur, (name, before, cur)
    if kept == 'kept':
        cur = float(after)
final = float(re.search(r'the model written: ([0-9.]+)', line).group(1))
assert final == cur, (final, cur)
print(' '.join(f'{s[0]}: {s[1]} -> {s[2]} {s[3]}' for s in steps), '; written', final)
EOF
}
check "summary: held-out images, steps in order, chained, the model written measures the last kept" chain "$TMP/held.err" 6
check "summary on --eval-images: 12 images" chain "$TMP/evl.err" 12
check "--no-refine-check: no check line" bash -c "! grep -q 'refinement check' '$TMP/nochk.err'"
check "10 images: the check is skipped and says why" grep -q "refinements kept unchecked: 10 calibration images, fewer than 16" "$TMP/few.err"
check "the same bytes at 1 and 2 threads" cmp "$TMP/held.onnx" "$TMP/held1.onnx"
finish

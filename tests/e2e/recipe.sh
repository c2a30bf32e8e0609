#!/usr/bin/env bash
# `ptq quantize --recipe fast|balanced|best` (engine/quantize.c: eng_quantize_recipe,
# eng_quantize_choose_method) and the default method, on the real cls model and text crops.
# - no recipe and --recipe fast are percentile:99.99, byte for byte;
# - balanced: the four methods are measured on held-out crops, the one taken scores highest, and
#   the model's ranges are that method's (the JSON equals --method M's); bias correction is then
#   checked; the same bytes at 1 and 2 threads;
# - best (AdaRound shortened with --adaround 20): output-aware scales, AdaRound and bias
#   correction each checked, in that order;
# - a --method given with balanced replaces the measured choice;
# - bad input: an unknown recipe, balanced without images.
. "$(dirname "$0")/lib.sh"
export OMP_WAIT_POLICY=passive
CLS=$MODELS/ch_ppocr_mobile_v2.0_cls_infer.onnx
ls "$ROOT"/build/textphotos/cls/*.png | LC_ALL=C sort | head -n 24 > "$TMP/calib.list"

q() { # out flags...
  local out=$1; shift
  "$PTQ" quantize "$CLS" --images "$TMP/calib.list" --preset paddleocr-cls --threads 2 "$@" --json "$TMP/$out.json" \
    -o "$TMP/$out.onnx" 2>"$TMP/$out.err" || { cat "$TMP/$out.err"; return 1; }
}
check "no recipe" q plain
check "--recipe fast" q fast --recipe fast
check "--method percentile:99.99" q p9999 --method percentile:99.99
check "no recipe = fast = percentile:99.99, byte for byte" bash -c "cmp '$TMP/plain.onnx' '$TMP/fast.onnx' && cmp '$TMP/plain.onnx' '$TMP/p9999.onnx'"
check "--recipe balanced" q bal --recipe balanced
check "--recipe balanced, 1 thread" q bal1 --recipe balanced --threads 1
check "balanced: the same bytes at 1 and 2 threads" cmp "$TMP/bal.onnx" "$TMP/bal1.onnx"

taken() { # err-file: prints the method taken after checking it scored highest
  $PY - "$1" <<'EOF'
import re, sys
line = [l for l in open(sys.argv[1]) if 'method chosen on' in l]
assert len(line) == 1, 'no choice line'
m = re.search(r'method chosen on (\d+) held-out images \(top1, then cosine\):(.*)', line[0])
assert m and int(m.group(1)) == 6, line[0]
c = re.findall(r' (max|percentile-99\.99|percentile-99\.999|mse) ([0-9.]+)( \(taken\))?', m.group(2))
assert [x[0] for x in c] == ['max', 'percentile-99.99', 'percentile-99.999', 'mse'], c
t = [x for x in c if x[2]]
assert len(t) == 1 and float(t[0][1]) == max(float(x[1]) for x in c), c
print(t[0][0].replace('percentile-', 'percentile:'))
EOF
}
check "balanced: 4 methods on 6 held-out crops, the taken one scores highest" taken "$TMP/bal.err"
M=$(taken "$TMP/bal.err" 2>/dev/null || echo none)
check "balanced: its ranges are $M's" bash -c "
  '$PTQ' quantize '$CLS' --images '$TMP/calib.list' --preset paddleocr-cls --method '$M' --json '$TMP/m.json' -o '$TMP/m.onnx' 2>/dev/null &&
  $PY -c \"import json,sys; a=json.load(open('$TMP/bal.json'))['tensors']; b=json.load(open('$TMP/m.json'))['tensors']; assert a == b, 'ranges differ'\""
check "balanced: bias correction checked" grep -q "refinement check on 6 held-out images (top1, then cosine): bias correction" "$TMP/bal.err"
check "balanced with --method max: no measured choice, max's ranges" q balmax --recipe balanced --method max
check "  (no choice line; method max)" bash -c "! grep -q 'method chosen' '$TMP/balmax.err' && grep -q 'method max;' '$TMP/balmax.err'"
check "--recipe best --adaround 20" q best --recipe best --adaround 20
check "best: output-aware scales, AdaRound, bias correction, each checked" \
  grep -qE "refinement check on 6 held-out images \(top1, then cosine\): output-aware scales .*; AdaRound .*; bias correction .*; the model written" "$TMP/best.err"
fails() { # code message cmd...: the exit code and the message
  local code=$1 msg=$2; shift 2
  "$@" > "$TMP/f.out" 2>&1
  local rc=$?
  [ "$rc" = "$code" ] && grep -qF -- "$msg" "$TMP/f.out" && head -n 1 "$TMP/f.out" || { echo "exit $rc"; cat "$TMP/f.out"; return 1; }
}
check "an unknown recipe: usage error" fails 2 "bad recipe 'fastest'" "$PTQ" quantize "$CLS" --images "$TMP/calib.list" --preset paddleocr-cls --recipe fastest -o "$TMP/x.onnx"
check "balanced without images: usage error" fails 2 "measures the model on images" "$PTQ" quantize "$CLS" --from-stats "$TMP/none.ptqstats" --recipe balanced -o "$TMP/x.onnx"
finish

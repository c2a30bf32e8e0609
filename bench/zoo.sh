#!/usr/bin/env bash
# bench/zoo.sh: every model of the zoo (scripts/zoo.py: torchvision 0.14 classifiers, segmenters,
# detectors, a YOLOv8-like detector) through ptq's steps, one table row each; the rows are the
# zoo issue's acceptance test.
#
#   bench/zoo.sh [--tier ci|all] [--opset N]... [--models a,b] [--out DIR] [--limit N] [--eval-limit N] [--reuse]
#   (--reuse: a row whose result is newer than its model and its .json is kept, not run again)
#
# Per model and opset (exported first by scripts/zoo.py, which skips what is up to date):
#   ORT==torch  the export: ONNX Runtime on the traced input equals torch's output (cosine >= 0.99999;
#            detectors: torch's detections paired one to one with ORT's, as those of equal
#            score may come in another order (see align); the R-CNNs' untrained heads may find no box: empty)
#   run      ptq run on one preprocessed photo == ONNX Runtime (tests/oracle/ort.js): the lowest
#            cosine over the outputs (tests/oracle/compare.py; a pass needs >= 0.99999; a detector's
#            detections paired with ORT's, see align)
#   calib    ptq calibrate (the default method, --stats and a TensorRT cache) over the calibration half of
#            the photos
#   quant    ptq quantize --from-stats (the QDQ model)
#   checker  onnx.checker.check_model on the QDQ model
#   ort-qdq  ONNX Runtime runs the QDQ model; the cosine of its output 0 against ORT's FP32 output
#   compare  ptq compare (max, percentile:99.99) on the other half, with the task's metric:
#            top1 (agreement with FP32) for classifiers, seq-top1:1 (per-pixel argmax agreement)
#            for segmenters, box-f1 for detectors (their boxes matched to FP32's: the YOLO head
#            decoded, [K, 6] detections, torchvision's boxes and scores)
# A step that fails shows the first words of its error (ptq names the unsupported op and its
# node) and the row goes on where it can: a failed run does not stop calibrate, and so on.
# Each row's logs and a result file (key<TAB>value) are under OUT/NAME.opN/ (tests/e2e/zoo.sh reads them).
set -u
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${BUILD:-build}
PTQ=${PTQ:-$ROOT/$BUILD/ptq}
PY=/usr/bin/python3
export OMP_WAIT_POLICY=passive
TIER=all; OPSETS=(); MODELS=""; OUT=$ROOT/$BUILD/tmp/bench-zoo; LIMIT=16; EVAL_LIMIT=16; REUSE=0
while [ $# -gt 0 ]; do
  case $1 in
    --tier) TIER=$2; shift 2 ;;
    --opset) OPSETS+=("$2"); shift 2 ;;
    --models) MODELS=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --limit) LIMIT=$2; shift 2 ;;
    --eval-limit) EVAL_LIMIT=$2; shift 2 ;;
    --reuse) REUSE=1; shift ;;
    *) echo "bench/zoo.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
[ ${#OPSETS[@]} -gt 0 ] || OPSETS=(13 17)
[ -x "$PTQ" ] || { echo "bench/zoo.sh: $PTQ missing (make ptq)" >&2; exit 2; }
mkdir -p "$OUT"
ls "$ROOT"/build/photos/* | grep -v truncated | sort > "$OUT/all.list"
awk 'NR % 2 == 1' "$OUT/all.list" > "$OUT/calib.list"
awk 'NR % 2 == 0' "$OUT/all.list" > "$OUT/eval.list"

# export (up-to-date models are skipped)
zargs=(--tier "$TIER"); for o in "${OPSETS[@]}"; do zargs+=(--opset "$o"); done
[ -z "$MODELS" ] || zargs+=(--models "$MODELS")
$PY "$ROOT/scripts/zoo.py" "${zargs[@]}" > "$OUT/export.log" 2>&1
grep -E '^(exported|zoo:)' "$OUT/export.log" >&2
NAMES=$(sed -nE 's/^(exported|up to date) +([A-Za-z0-9_]+)\.op[0-9]+:.*/\2/p' "$OUT/export.log" | awk '!seen[$0]++')
[ -n "$NAMES" ] || { echo "bench/zoo.sh: scripts/zoo.py exported nothing:" >&2; tail -n 5 "$OUT/export.log" >&2; exit 1; }

# the first line of a step's error, without ptq's command prefix, shortened
# (ptq's "N nodes with unsupported ops: A (n nodes, first '...'), B (...)" becomes "lacks A,B")
why() {
  local l; l=$(grep -v ': warning: ' "$1" | grep -v '^\s*$' | tail -n 1 | sed -E 's/^(ptq( [a-z]+)?|ort\.js|Traceback.*): //; s|^/[^ :]*: ||')
  case $l in
    *"unsupported ops: "*) echo "lacks $(echo "$l" | grep -oE '[A-Za-z0-9]+ \([0-9]+ nodes?' | sed -E 's/ \(.*//' | paste -sd,)" ;;
    *) echo "$l" ;;
  esac | cut -c1-"${2:-70}"
}
secs() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }

# align REF SRC DST: a detector's outputs SRC (*.npy with scores.npy) in the order of REF's
# detections, paired one to one by a minimum-cost assignment (tests/oracle/align_detections.py):
# detections of near-equal score come out of NMS/TopK in either order, whichever implementation
# computed them.
align() { $PY "$ROOT/tests/oracle/align_detections.py" "$1" "$2" "$3" > /dev/null 2>&1; }

row() { # NAME OPSET: runs the steps, writes $D/result
  local name=$1 op=$2 D=$OUT/$1.op$2 t0 t
  rm -rf "$D"; mkdir -p "$D"
  t0=$(date +%s.%N)
  local meta=$ROOT/build/zoo/$name.op$op.json M=$ROOT/build/zoo/$name.op$op.onnx
  res() { printf '%s\t%s\n' "$1" "$2" >> "$D/result"; }
  local status nodes task metric export_s err preset
  if [ ! -f "$meta" ]; then
    res name "$name"; res opset "$op"; res export "FAIL no $(basename "$meta") (scripts/zoo.py)"; res time "$(secs "$t0")"; return
  fi
  eval "$($PY - "$meta" <<'EOF'
import json, shlex, sys
m = json.load(open(sys.argv[1]))
print("status=%s nodes=%s task=%s metric=%s export_s=%s err=%s" % (m["status"], m.get("nodes", "-"), m["task"],
      m["metric"] or "cosine", m["export_seconds"], shlex.quote(m.get("error", ""))))
print("preset=(%s)" % " ".join(shlex.quote(a) for a in m["preset"]))
EOF
)"
  res name "$name"; res opset "$op"; res nodes "$nodes"; res task "$task"
  if [ "$status" != ok ]; then
    res export "FAIL ${err:0:70}"; res time "$(secs "$t0")"; return
  fi
  res export "ok ${export_s}s"
  # ops ptq lacks: ptq inspect names every unsupported op type (count, first node)
  "$PTQ" inspect "$M" > "$D/inspect.log" 2>&1
  res unsupported "$(sed -nE 's/^unsupported: (.*)/\1/p' "$D/inspect.log" | head -n 1)"
  # the export itself: ONNX Runtime on the traced input equals torch (zoo.py's NAME.opN.ref/)
  local R=${M%.onnx}.ref
  if [ -f "$R/images.npy" ]; then
    if node "$ROOT/tests/oracle/ort.js" "$M" --input images="$R/images.npy" --out-dir "$D/ortref" > "$D/ortref.log" 2>&1; then
      local f okt=1 wt=2 ct A=$D/ortref B=$R
      if [ -f "$R/scores.npy" ]; then # detections: torch's paired with ORT's (equal scores may swap)
        B=$D/ref.aligned
        align "$A" "$R" "$B" || B=$R
      fi
      for f in "$B"/*.npy; do
        [ "$(basename "$f")" = images.npy ] && continue
        line=$($PY "$ROOT/tests/oracle/compare.py" "$A/$(basename "$f")" "$f" --cos 0.99999 2>&1) || okt=0
        echo "$(basename "$f"): $line" >> "$D/torch.log"
        ct=$(echo "$line" | sed -nE 's/^cosine ([0-9.e+-]+|nan),.*/\1/p'); [ -n "$ct" ] || ct=0
        wt=$(awk -v a="$wt" -v b="$ct" 'BEGIN { print (b == "nan" || b + 0 < a + 0) ? b : a }')
      done
      res torch "$([ $okt = 1 ] && echo ok || echo FAIL) $(printf '%.6f' "$wt" 2>/dev/null || echo "$wt")"
    else
      res torch "FAIL ORT: $(why "$D/ortref.log")"
    fi
  else
    res torch "-"
  fi
  local outs; outs=$($PY -c "import onnx; print(' '.join(o.name for o in onnx.load('$M', load_external_data=False).graph.output))")
  # input: the first evaluation photo as the preset makes it
  "$PTQ" preprocess --images "$OUT/eval.list" "${preset[@]}" --limit 1 --dump "$D/in.npy" > "$D/preprocess.log" 2>&1
  # run == ORT
  if "$PTQ" run "$M" --input images="$D/in.npy" --output-dir "$D/ptq" --threads 2 > "$D/run.log" 2>&1; then
    if node "$ROOT/tests/oracle/ort.js" "$M" --input images="$D/in.npy" --out-dir "$D/ort" > "$D/ort.log" 2>&1; then
      local o c worst=2 okrun=1 line P=$D/ptq Q=$D/ort
      if [ -f "$D/ort/scores.npy" ]; then # detections: near-equal scores may sort the other way
        P=$D/ptq.aligned
        align "$Q" "$D/ptq" "$P" || P=$D/ptq
      fi
      for o in $outs; do
        o=$(echo "$o" | sed 's/[^A-Za-z0-9._-]/_/g')
        line=$($PY "$ROOT/tests/oracle/compare.py" "$P/$o.npy" "$Q/$o.npy" --cos 0.99999 2>&1) || okrun=0
        echo "$o: $line" >> "$D/parity.log"
        c=$(echo "$line" | sed -nE 's/^cosine ([0-9.e+-]+|nan),.*/\1/p')
        [ -n "$c" ] || { c=0; okrun=0; }
        worst=$(awk -v a="$worst" -v b="$c" 'BEGIN { print (b == "nan" || b + 0 < a + 0) ? b : a }')
      done
      res run "$([ $okrun = 1 ] && echo ok || echo FAIL) $(printf '%.6f' "$worst" 2>/dev/null || echo "$worst")"
      [ $okrun = 1 ] || res run_why "$(grep -v 'cosine 1.0000' "$D/parity.log" | head -n 1 | cut -c1-70)"
    else
      res run "ORT fails: $(why "$D/ort.log")"
    fi
  else
    res run "FAIL $(why "$D/run.log")"
  fi
  # calibrate (statistics for quantize, a TensorRT cache)
  if "$PTQ" calibrate "$M" --images "$OUT/calib.list" "${preset[@]}" --batch 1 --limit "$LIMIT" --threads 2 \
      --stats "$D/s.stats" --cache "$D/c.cache" > "$D/calibrate.log" 2>&1; then
    res calibrate "ok $(sed -nE 's/.* ([0-9]+) tensors calibrated.*/\1/p' "$D/calibrate.log") tensors"
  else
    res calibrate "FAIL $(why "$D/calibrate.log")"
  fi
  # quantize
  if [ -f "$D/s.stats" ] && "$PTQ" quantize "$M" --from-stats "$D/s.stats" -o "$D/q.onnx" > "$D/quantize.log" 2>&1; then
    res quantize "ok $(sed -nE 's/.* ([0-9]+) nodes excluded.*/\1/p' "$D/quantize.log") excl"
    # a model of a newer IR version than the installed onnx knows (torch 2.x's exports: IR 10)
    # cannot be checked by it: said as such, not a failure
    local chk; chk=$($PY - "$D/q.onnx" 2> "$D/checker.log" <<'EOF'
import sys, onnx
m = onnx.load(sys.argv[1], load_external_data=False)
if m.ir_version > onnx.IR_VERSION:
    print("IR %d: newer than onnx %s checks" % (m.ir_version, ".".join(onnx.__version__.split(".")[:2])))
else:
    onnx.checker.check_model(onnx.load(sys.argv[1]))
    print("ok")
EOF
)
    res checker "${chk:-FAIL $(why "$D/checker.log")}"
    local o0; o0=$(echo "${outs%% *}" | sed 's/[^A-Za-z0-9._-]/_/g')
    if node "$ROOT/tests/oracle/ort.js" "$D/q.onnx" --input images="$D/in.npy" --out-dir "$D/ortq" > "$D/ortq.log" 2>&1; then
      if [ -f "$D/ort/$o0.npy" ]; then
        res ort_qdq "ok cos $($PY "$ROOT/tests/oracle/compare.py" "$D/ortq/$o0.npy" "$D/ort/$o0.npy" 2>&1 | sed -nE 's/^cosine ([0-9.]+).*/\1/p' | cut -c1-6)"
      else
        res ort_qdq ok
      fi
    else
      res ort_qdq "FAIL $(why "$D/ortq.log")"
    fi
  else
    [ -f "$D/s.stats" ] && res quantize "FAIL $(why "$D/quantize.log")" || res quantize "- (no statistics)"
    res checker -; res ort_qdq -
  fi
  # compare with the task's metric
  if "$PTQ" compare "$M" --images "$OUT/calib.list" --eval-images "$OUT/eval.list" "${preset[@]}" --batch 1 \
      --limit "$LIMIT" --eval-limit "$EVAL_LIMIT" --methods max,percentile:99.99 --metric "$metric" --threads 2 \
      --json "$D/compare.json" > "$D/compare.log" 2>&1; then
    res compare "$($PY - "$D/compare.json" "$metric" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1])); best = j["best_method"]
m = next(x for x in j["methods"] if x["method"] == best)
key = {"top1": "top1_agree", "cosine": "cosine", "box-f1": "box_f1"}.get(sys.argv[2].split(":")[0], "seq_top1" if sys.argv[2].startswith("seq-top1") else "mask_iou")
cos = "n/a" if m["cosine"] is None else f"{m['cosine']:.4f}"
print(f"{sys.argv[2]} {m[key]:.4f} ({best}, cos {cos})")
EOF
)"
  else
    res compare "FAIL $(why "$D/compare.log")"
  fi
  res time "$(secs "$t0")"
}

field() { awk -F'\t' -v k="$2" '$1 == k { $1 = ""; sub(/^ /, ""); print; exit }' "$1"; }

printf '%-38s %-2s %5s  %-13s %-11s %-30s %-22s %-10s %-8s %-14s %-44s %6s\n' model op nodes export "ORT==torch" "run==ORT cos" calibrate quantize checker "ORT runs QDQ" "compare metric" time
for op in "${OPSETS[@]}"; do
  for n in $NAMES; do
    R=$OUT/$n.op$op/result J=$ROOT/build/zoo/$n.op$op.json
    if [ $REUSE = 0 ] || [ ! -f "$R" ] || [ "$J" -nt "$R" ]; then row "$n" "$op" 2> "$OUT/$n.op$op.stderr"; fi
    printf '%-38s %-2s %5s  %-13s %-11s %-30s %-22s %-10s %-8s %-14s %-44s %6s\n' "$n" "$op" "$(field "$R" nodes)" \
      "$(field "$R" export | cut -c1-13)" "$(field "$R" torch | cut -c1-11)" "$(field "$R" run | cut -c1-30)" "$(field "$R" calibrate | cut -c1-22)" \
      "$(field "$R" quantize | cut -c1-10)" "$(field "$R" checker | cut -c1-8)" "$(field "$R" ort_qdq | cut -c1-14)" \
      "$(field "$R" compare | cut -c1-44)" "$(field "$R" time)"
  done
done
# the failures in full: which step, and ptq's words (the unsupported ops it names)
echo
echo "failures (model.opset step: error) and the ops ptq lacks (ptq inspect):"
for op in "${OPSETS[@]}"; do
  for n in $NAMES; do
    R=$OUT/$n.op$op/result
    u=$(field "$R" unsupported)
    [ -z "$u" ] || [ "$u" = none ] ||
      echo "  $n.op$op lacks: $(echo "$u" | grep -oE '[A-Za-z0-9]+ \([0-9]+ nodes?' | sed -E 's/ \(([0-9]+) nodes?/ x\1/' | paste -sd, | sed 's/,/, /g')"
    # other failures (a step refused for the ops above is not repeated)
    awk -F'\t' -v m="$n.op$op" '$2 ~ /^(FAIL|ORT fails)/ && $2 !~ /^FAIL lacks / { print "  " m " " $1 ": " $2 }' "$R"
  done
done

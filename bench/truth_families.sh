#!/usr/bin/env bash
# make bench: a truth bench for every family, with peers side by side (against held-out labels).
#
# Families, trained by the repo's own scripts (on the CPU, torch threads = cores):
#   det       scripts/yolo.py's YOLOv8-like detector, scripts/train_det.py, on the set
#             scripts/truthdata.py composes (tuxpaint stamps on the photos; val and calib from
#             photos the training never saw); scored by mAP@0.5:0.95 and mAP@0.5 (--labels yolo:DIR)
#   vit, convnext   scripts/train_fmnist.py on Debian's Fashion-MNIST; top-1 on its test images
#             (--labels list:FILE)
# For each: FP32, ptq quantize --recipe fast|balanced|best, and ONNX Runtime's quantize_static
# (QDQ, int8 symmetric, per-channel; MinMax, Percentile 99.99, Entropy; bench/ort_quantize_static.py,
# calibrated on the same images as ptq). Every model, FP32, ptq's and ORT's alike, is scored by
# `ptq compare MODEL --as-is --labels ...` (the model as given, QDQ models with their own Q/DQ; no
# calibration): its mAP or top-1, and for all but FP32 (--base FP32) the difference to FP32 with its
# paired bootstrap interval. Written to build/bench/truth_families.md with the models' sha256.
#
# Models: TF_MODELS (default build/truth_families/models) holds det.onnx, vit.onnx, convnext.onnx;
# one that is missing is trained there (train_det.py ~ 60 epochs, train_fmnist.py 15 epochs: the
# scripts print their own FP32 accuracy and the weights' sha256 to MODEL.train.log). ORT's models
# are made there when the Python onnxruntime package is importable (TF_ORT_PY, default python3;
# Debian does not ship it), else those of TF_MODELS (NAME.ort_{minmax,percentile,entropy}.onnx) are
# scored when present, else the rows say so.
# Scale knobs: TF_FAMILIES (default "det vit convnext"), TF_DET_VAL (200 val composites),
# TF_DET_CALIB (64), TF_FM_TEST (10000 test images), TF_FM_CALIB (256), TF_RECIPES (fast balanced best).
# TF_PY (default /usr/bin/python3), TF_TRUTHDATA_ARGS (e.g. --stamps DIR --photos DIR) and
# TF_FMNIST_ARGS (e.g. --data DIR) run it where Debian's packages are elsewhere.
set -euo pipefail
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive} # CPU seconds that mean something on a shared machine
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
PTQ=$BUILD/ptq
OUT=$BUILD/bench
W=$BUILD/truth_families
MD=${TF_MODELS:-$W/models}
PY=${TF_PY:-/usr/bin/python3}
ORTPY=${TF_ORT_PY:-python3}
FAMILIES=${TF_FAMILIES:-det vit convnext}
RECIPES=${TF_RECIPES:-fast balanced best}
NV=${TF_DET_VAL:-200}; NC=${TF_DET_CALIB:-64}; NT=${TF_FM_TEST:-10000}; NFC=${TF_FM_CALIB:-256}
mkdir -p "$OUT" "$W" "$MD"
t0=$(date +%s)

# ---- data ----
DET=$W/det.v$NV.c$NC
[ -f "$DET/.done" ] || { rm -rf "$DET"; $PY scripts/truthdata.py "$DET" ${TF_TRUTHDATA_ARGS:-} --val "$NV" --calib "$NC" --splits calib,val >/dev/null && touch "$DET/.done"; }
FM=$W/fmnist.t$NT.c$NFC
[ -f "$FM/.done" ] || { rm -rf "$FM"; $PY scripts/train_fmnist.py "$FM" ${TF_FMNIST_ARGS:-} --data-only --test "$NT" --calib "$NFC" >/dev/null && touch "$FM/.done"; }
ls "$PWD/$FM"/calib/*.png > "$W/fm.calib"
cut -d' ' -f1 "$FM/test.list" > "$W/fm.eval"

# ---- models (trained here when missing) ----
for f in $FAMILIES; do
  [ -f "$MD/$f.onnx" ] && continue
  case $f in
    det) [ -f "$W/dettrain/.done" ] || { rm -rf "$W/dettrain"; $PY scripts/truthdata.py "$W/dettrain" ${TF_TRUTHDATA_ARGS:-} --splits train,val >/dev/null && touch "$W/dettrain/.done"; }
         $PY scripts/train_det.py "$W/dettrain" "$MD/det.onnx" > "$MD/det.train.log" 2>&1 ;;
    vit|convnext) $PY scripts/train_fmnist.py "$W/fmtrain" ${TF_FMNIST_ARGS:-} --models $f --test 0 --calib 0 > "$MD/$f.train.log" 2>&1
         cp "$W/fmtrain/$f.onnx" "$MD/" ;;
  esac
done
t1=$(date +%s)

pre() { case $1 in det) echo "--preset yolo-letterbox-640 --size 320x320" ;; *) echo "--mode stretch --size 28x28 --channel-order GRAY" ;; esac; }
calib() { case $1 in det) echo "$DET/calib.list" ;; *) echo "$W/fm.calib" ;; esac; }

# ---- quantize: ptq's recipes, ORT's three methods ----
for f in $FAMILIES; do
  for r in $RECIPES; do
    [ -f "$W/$f.$r.onnx" ] && [ "$W/$f.$r.onnx" -nt "$MD/$f.onnx" ] && continue
    # shellcheck disable=SC2046
    "$PTQ" quantize "$MD/$f.onnx" --images "$(calib $f)" $(pre $f) --recipe "$r" -o "$W/$f.$r.onnx" > "$W/$f.$r.log" 2>&1
  done
  if "$ORTPY" -c "import onnxruntime.quantization" 2>/dev/null; then
    if [ "$f" = det ]; then
      # shellcheck disable=SC2046
      "$PTQ" preprocess --images "$DET/calib.list" $(pre det) --dump "$W/det.calib.npy" >/dev/null 2>&1
    else
      # shellcheck disable=SC2046
      "$PTQ" preprocess --images "$W/fm.calib" $(pre $f) --dump "$W/fm.calib.npy" >/dev/null 2>&1
    fi
    x=$W/fm.calib.npy; [ "$f" = det ] && x=$W/det.calib.npy
    "$ORTPY" bench/ort_quantize_static.py --model "$MD/$f.onnx" "$x" "$W/$f" > "$W/$f.ort.log" 2>&1
  else
    for m in minmax percentile entropy; do
      [ -f "$MD/$f.ort_$m.onnx" ] && cp "$MD/$f.ort_$m.onnx" "$W/$f.ort_$m.onnx"
    done
  fi
done
t2=$(date +%s)

# ---- score every model against the labels through ptq compare --as-is ----
# each model as given (no calibration, no layer-wise pass); every model but FP32 against FP32
# (--base): its difference to FP32 with the paired bootstrap interval (the same images, the same draws)
score() { # FAMILY MODEL -> "value other delta lo hi" (points: x100; other "-" when none, delta "-" for FP32)
  local f=$1 m=$2 base=() log=$W/score.log
  [ "$m" = "$MD/$f.onnx" ] || base=(--base "$MD/$f.onnx")
  if [ "$f" = det ]; then
    # shellcheck disable=SC2046
    "$PTQ" compare "$m" --as-is "${base[@]}" --eval-images "$DET/val.list" $(pre det) --labels "yolo:$DET/val/labels" \
      --json "$W/score.json" > "$log" 2>&1 || { tail -n 3 "$log" >&2; return 1; }
  else
    # shellcheck disable=SC2046
    "$PTQ" compare "$m" --as-is "${base[@]}" --eval-images "$W/fm.eval" $(pre $f) --labels "list:$FM/test.list" \
      --json "$W/score.json" > "$log" 2>&1 || { tail -n 3 "$log" >&2; return 1; }
  fi
  $PY - "$W/score.json" "$f" "${#base[@]}" <<'PYEOF'
import json, sys
r, f, based = json.load(open(sys.argv[1])), sys.argv[2], sys.argv[3] != '0'
m = r['methods'][0]
key, other = ('map', 'map50') if f == 'det' else ('top1_acc', None)
d = m[key + '_delta_ci' if f == 'det' else 'top1_delta_ci'] if based else None
p = lambda v: '%.2f' % (100 * v)
print(p(m[key]), p(m[other]) if other else '-', '%+.2f' % (100 * (m[key] - r['fp32'][key])) if based else '-',
      ('%+.2f %+.2f' % (100 * d[0], 100 * d[1])) if based else '- -')
PYEOF
}
T=$OUT/truth_families.md
{
  echo "# Truth bench for every family: ptq's recipes and ONNX Runtime's quantize_static against the labels"
  echo
  echo "Detector: $NV val composites (scripts/truthdata.py, photos unseen in training), calibration $NC others."
  echo "Classifiers: the first $NT Fashion-MNIST test images, calibration $NFC training images."
  echo "Scored by \`ptq compare MODEL --as-is --base FP32.onnx --labels\` (each model as given, against FP32 on the same images)."
  echo "Points are percentage points (x100) of the metric; 'vs FP32' the model's metric minus FP32's, with its"
  echo "95 % paired bootstrap interval over the images (the same draws for both models)."
  echo
  echo "| family | model | metric | value | vs FP32 [95 %] | other metric | sha256 (first 16) |"
  echo "|---|---|---|---|---|---|---|"
} > "$T"
for f in $FAMILIES; do
  for m in fp32 $RECIPES ort_minmax ort_percentile ort_entropy; do
    case $m in
      fp32) p=$MD/$f.onnx; label=FP32 ;;
      ort_*) p=$W/$f.$m.onnx; label="ORT ${m#ort_}" ;;
      *) p=$W/$f.$m.onnx; label="ptq --recipe $m" ;;
    esac
    if [ ! -f "$p" ]; then echo "| $f | $label | | not run (no model: ${p##*/}) | | | |" >> "$T"; continue; fi
    r=$(score $f "$p" 2>/dev/null || echo failed)
    if [ "$r" = failed ]; then echo "| $f | $label | | failed: $(tail -n 1 "$W/score.log") | | | |" >> "$T"; continue; fi
    read -r v other d lo hi <<< "$r"
    sha=$(sha256sum "$p" | cut -c1-16)
    if [ "$f" = det ]; then other="mAP50 $other"; metric="mAP50-95"; else other=""; metric="top-1"; fi
    vs="$d [$lo, $hi]"; [ "$d" = - ] && vs=""
    echo "| $f | $label | $metric | $v | $vs | $other | $sha |" >> "$T"
  done
done
t3=$(date +%s)
echo >> "$T"
echo "data $((t1 - t0)) s, quantize $((t2 - t1)) s, scoring $((t3 - t2)) s." >> "$T"
for l in "$MD"/*.train.log; do [ -f "$l" ] && grep -h "weights sha256" "$l" | sed 's/^/    /' >> "$T"; done
cat "$T"

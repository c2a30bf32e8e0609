#!/usr/bin/env bash
# Calibration at the shapes the model sees (configs/paddleocr-{rec,det}-dynamic.yaml: the
# tensor's size follows the image; a dataset batch holds one shape; cli/runner.c keeps a plan
# per input shape):
# - per-shape calibration equals calibrating each shape alone and merging: rec over 48
#   text-line crops of build/textphotos/rec (several widths), split by the tensor width that
#   `ptq preprocess` gives each crop (320 against wider), each part calibrated alone with
#   --stats and `ptq stats merge`d: every tensor's statistics bit for bit the one pass's, and
#   `calibrate --from-stats --method all` writes byte-identical caches and JSON (as stats.sh);
# - nothing depends on the batch size or the thread count: quantize --stats at --batch 1,
#   --threads 1 and at --batch 8, default threads write the same statistics, cache and QDQ
#   model, byte for byte (as determinism.sh);
# - quantize and compare (--metric seq-top1 on rec, mask-iou on det) run with the dynamic
#   presets, compare's greedy CTC readings (seq-chars, seq-exact) equal a numpy port's on the
#   text lines, and compare --eval-preset evaluates a model calibrated at the fixed preset at
#   the real widths; the evaluation cache (the methods after the first) gives the figures
#   that streaming gives.
. "$(dirname "$0")/lib.sh"
REC=$MODELS/ch_PP-OCRv4_rec_infer.onnx
DET=$MODELS/ch_PP-OCRv4_det_infer.onnx
CROPS=$ROOT/build/textphotos/rec
TEXT=$ROOT/build/textphotos # text lines rendered on the photos (made once, as bench/quality.sh does)
[ -f "$TEXT/.done" ] || { $PY "$ROOT/tests/oracle/textimages.py" "$ROOT/build/photos" "$TEXT" >/dev/null && touch "$TEXT/.done"; }
[ -d "$CROPS" ] && [ -f "$REC" ] || { echo "FAIL no $CROPS or $REC (make deps)"; echo "0 passed, 1 failed"; exit 1; }
METHODS="max percentile-99.9 percentile-99.99 percentile-99.999 entropy mse"
export OMP_WAIT_POLICY=passive
ls -d "$CROPS"/*.png | LC_ALL=C sort | head -n 48 > "$TMP/all.txt"
rm -rf "$TMP"/*.ptqstats "$TMP"/*.cache "$TMP"/*.json "$TMP"/*.onnx "$TMP/dump"

# the list split by tensor width (the dump holds the used images in list order)
split_by_shape() {
  "$PTQ" preprocess --images "$TMP/all.txt" --preset paddleocr-rec-dynamic --dump "$TMP/dump" 2>/dev/null &&
  $PY - "$TMP" <<'PYEOF'
import sys, os, numpy as np
t = sys.argv[1]
paths = open(f"{t}/all.txt").read().split()
w = [np.load(f"{t}/dump/{i:06d}.npy").shape[3] for i in range(len(paths))]
a = [p for p, x in zip(paths, w) if x == 320]
b = [p for p, x in zip(paths, w) if x != 320]
assert a and len(set(w)) > 3, w
open(f"{t}/w320.txt", "w").write("\n".join(a) + "\n")
open(f"{t}/wide.txt", "w").write("\n".join(b) + "\n")
print(f"{len(paths)} crops, {len(set(w))} widths: {len(a)} at 320, {len(b)} wider (up to {max(w)})")
PYEOF
}
check "48 crops split by tensor width" split_by_shape

cal() { # name, options...
  local o=$1; shift
  "$PTQ" calibrate "$REC" --method all --cache "$TMP/$o.cache" --json "$TMP/$o.json" "$@" 2>/dev/null
}
same_caches() {
  for m in $METHODS; do
    cmp "$TMP/$1.$m.cache" "$TMP/$2.$m.cache" && cmp "$TMP/$1.$m.json" "$TMP/$2.$m.json" || return 1
  done
  echo "6 caches and 6 JSON files identical"
}
per_shape() {
  cal one --images "$TMP/all.txt" --preset paddleocr-rec-dynamic --stats "$TMP/one.ptqstats" &&
  cal w320 --images "$TMP/w320.txt" --preset paddleocr-rec-dynamic --stats "$TMP/w320.ptqstats" &&
  cal wide --images "$TMP/wide.txt" --preset paddleocr-rec-dynamic --batch 3 --stats "$TMP/wide.ptqstats" &&
  "$PTQ" stats merge "$TMP/w320.ptqstats" "$TMP/wide.ptqstats" -o "$TMP/merged.ptqstats" 2>/dev/null &&
  cal merged --from-stats "$TMP/merged.ptqstats" && same_caches merged one &&
  $PY "$ROOT/tests/oracle/ptqstats.py" same "$TMP/merged.ptqstats" "$TMP/one.ptqstats" max_width=3200
}
check "per-shape calibration equals each shape calibrated alone and merged (statistics bit for bit, caches byte for byte)" per_shape

quant() { # name batch threads
  local T=(); [ "$3" = - ] || T=(--threads "$3")
  "$PTQ" quantize "$REC" --images "$TMP/all.txt" --preset paddleocr-rec-dynamic --method entropy --batch "$2" "${T[@]}" \
    -o "$TMP/$1.onnx" --cache "$TMP/$1.cache" --stats "$TMP/$1.ptqstats" 2>"$TMP/$1.err"
}
batch_threads() {
  quant b8 8 - && quant b1 1 1 || { tail -n 3 "$TMP"/b*.err; return 1; }
  for f in onnx cache ptqstats; do cmp "$TMP/b8.$f" "$TMP/b1.$f" || return 1; done
  echo "QDQ model, cache and statistics identical"
}
check "--batch 1 --threads 1 and --batch 8 at the default threads: the same bytes" batch_threads

compare_rec() {
  awk 'NR % 2 == 1' "$TMP/all.txt" > "$TMP/calib.txt"; awk 'NR % 2 == 0' "$TMP/all.txt" > "$TMP/eval.txt"
  local p
  for p in paddleocr-rec-dynamic paddleocr-rec; do
    "$PTQ" compare "$REC" --images "$TMP/calib.txt" --eval-images "$TMP/eval.txt" --preset $p \
      --eval-preset paddleocr-rec-dynamic --methods max,entropy --metric seq-top1 --float fp32 --json "$TMP/rec.$p.json" 2>/dev/null >&2 || return 1
  done
  # the first method streams the evaluation images, the next ones read the evaluation cache
  # (inputs and FP32 outputs of every shape): the other order gives the same figures
  "$PTQ" compare "$REC" --images "$TMP/calib.txt" --eval-images "$TMP/eval.txt" --preset paddleocr-rec-dynamic \
    --methods entropy,max --metric seq-top1 --float fp32 --json "$TMP/rec.swapped.json" 2>/dev/null >&2 || return 1
  $PY -c "
import json
k = lambda f: {m['method']: (m['cosine'], m['seq_top1'], m['sqnr_db']) for m in json.load(open(f))['methods']}
assert k('$TMP/rec.swapped.json') == k('$TMP/rec.paddleocr-rec-dynamic.json')" || return 1
  $PY - "$TMP/rec.paddleocr-rec-dynamic.json" "$TMP/rec.paddleocr-rec.json" <<'PYEOF'
import json, os, sys
for f in sys.argv[1:]:
    r = json.load(open(f))
    assert r["n_eval"] == 24, r["n_eval"]
    for m in r["methods"]:
        assert 0 < m["seq_top1"] <= 1 and 0 < m["cosine"] <= 1, m  # entropy clips rec's hard-swish tensors (README)
        assert m["method"] != "max" or m["cosine"] > 0.9, m
    print(os.path.basename(f)[4:-5], " ".join(f"{m['method']} seq-top1 {m['seq_top1']:.3f}" for m in r["methods"]), end="; ")
PYEOF
}
check "compare rec: calibrated at paddleocr-rec-dynamic and at paddleocr-rec, evaluated at the real widths" compare_rec

# compare's greedy CTC readings on real text lines at their own widths: the max model compare
# evaluated is the one quantize writes, ptq run reads each line in FP32 and INT8, and a numpy
# port (tests/oracle/edit_distance.py) gives seq-chars and seq-exact to the last bit
ctc_readings() {
  "$PTQ" quantize "$REC" --images "$TMP/calib.txt" --preset paddleocr-rec-dynamic --method max -o "$TMP/rec.max.onnx" 2>/dev/null &&
  rm -rf "$TMP/ctc" && "$PTQ" preprocess --images "$TMP/eval.txt" --preset paddleocr-rec-dynamic --dump "$TMP/ctc" >/dev/null 2>&1 || return 1
  local f
  for f in "$TMP"/ctc/*.npy; do
    "$PTQ" run "$REC" --input "$f" --output "${f%.npy}.fp32.npy" >/dev/null &&
    "$PTQ" run "$TMP/rec.max.onnx" --input "$f" --output "${f%.npy}.int8.npy" >/dev/null || return 1
  done
  $PY - "$TMP/rec.paddleocr-rec-dynamic.json" "$TMP/ctc" "$ROOT/tests/oracle" <<'PYEOF'
import glob, json, sys
import numpy as np
sys.path.insert(0, sys.argv[3])
from edit_distance import levenshtein
m = {x["method"]: x for x in json.load(open(sys.argv[1]))["methods"]}["max"]
def read(y):
    lab = y[0].argmax(-1)
    return [int(v) for t, v in enumerate(lab) if v != 0 and (t == 0 or v != lab[t - 1])]
ref = [read(np.load(f)) for f in sorted(glob.glob(sys.argv[2] + "/*.fp32.npy"))]
hyp = [read(np.load(f)) for f in sorted(glob.glob(sys.argv[2] + "/*.int8.npy"))]
assert len(ref) == len(hyp) == 24, (len(ref), len(hyp))
edits = [levenshtein(a, b) for a, b in zip(ref, hyp)]
chars = sum(map(len, ref))
got = (1.0 - sum(edits) / chars, sum(e == 0 for e in edits) / len(edits))
assert chars > 100 and (m["seq_chars"], m["seq_exact"]) == got, (m["seq_chars"], m["seq_exact"], got)
print(f"max: seq-chars {got[0]:.4f} ({sum(edits)} edits in {chars} characters), seq-exact {got[1]:.3f}", end="")
PYEOF
}
check "compare rec: seq-chars and seq-exact equal a numpy port of the greedy CTC readings of ptq run" ctc_readings

det_dynamic() {
  ls -d "$ROOT"/build/textphotos/det/*.png | LC_ALL=C sort | head -n 4 > "$TMP/det.txt"
  "$PTQ" quantize "$DET" --images "$TMP/det.txt" --preset paddleocr-det-dynamic --method max -o "$TMP/det.onnx" \
    --stats "$TMP/det.ptqstats" 2>/dev/null &&
  grep -aq 'mode=limit-side .* limit_side=960 limit_type=max multiple=32 max_side=4096' "$TMP/det.ptqstats" &&
  "$PTQ" compare "$DET" --images "$TMP/det.txt" --eval-images "$TMP/det.txt" --preset paddleocr-det-dynamic --batch 2 \
    --methods max --metric mask-iou:0.3 --json "$TMP/det.json" 2>/dev/null >&2 &&
  $PY -c "
import json; r = json.load(open('$TMP/det.json')); m = r['methods'][0]
assert r['n_eval'] == 4 and m['cosine'] > 0.9 and m['mask_iou'] > 0.5, m
print(f\"det at its own sizes: cosine {m['cosine']:.4f}, mask-iou {m['mask_iou']:.3f}\")"
}
check "quantize and compare det with paddleocr-det-dynamic (statistics record the preprocessing)" det_dynamic

# Memory follows the largest batch, not the number of shapes or images: the runner's plans
# (one per shape, up to 4 kept) share one activation block (engine/runner.h, eng_memory).
# det at its own sizes, --batch 2: the 40 rendered photos (10 sizes, up to 960x960) peak
# within 1.5x the 4 of them made from a 1024x1024 photo (960x960) alone (2.9x when each
# cached plan kept its own arena), and the 40 listed twice (the same batches, twice as
# many) within 5 % of the 40.
det_memory() {
  ls -d "$ROOT"/build/textphotos/det/*.png | LC_ALL=C sort > "$TMP/all.det"
  grep retina "$TMP/all.det" > "$TMP/big.det"
  cat "$TMP/all.det" "$TMP/all.det" > "$TMP/twice.det"
  local n rss=()
  for n in big all twice; do
    "$PTQ" calibrate "$DET" --images "$TMP/$n.det" --preset paddleocr-det-dynamic --batch 2 --threads 2 --method max \
      --cache "$TMP/mem.cache" 2>"$TMP/mem.$n.err" || { tail -n 2 "$TMP/mem.$n.err"; return 1; }
    rss+=("$(sed -n 's/.*peak RSS \([0-9]*\) MB.*/\1/p' "$TMP/mem.$n.err")")
  done
  $PY -c "
a, b, c = ${rss[0]}, ${rss[1]}, ${rss[2]}
assert b <= 1.5 * a and c <= 1.05 * b, (a, b, c)
print(f'peak RSS: 4 images at 960x960 {a} MB, 40 of 10 sizes {b} MB ({b / a:.2f}x), 80 {c} MB ({c / b:.2f}x)')"
}
check "det-dynamic calibration: peak memory set by the largest batch, flat in shapes and images" det_memory
finish

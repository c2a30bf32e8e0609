#!/usr/bin/env bash
# make bench: accuracy against the TRUTH, with 95 % bootstrap intervals over images.
#
# OCR (PaddleOCR PP-OCRv4 det + rec, ppocr mobile v2.0 cls): tests/oracle/textpages.py renders
# labelled pages (calibration and evaluation splits disjoint: other seeds, words, Chinese
# characters and photos). ptq calibrates each model once on the calibration pages (det at the
# pages' own sizes, paddleocr-det-dynamic; rec on the line crops at their widths,
# paddleocr-rec-dynamic; cls on the crops, half turned), then writes every configuration from the
# statistics (max, percentile:99.99, entropy, mse), mse with --equalize from its own pass, and the
# recipes --recipe balanced and --recipe best (docs/quantizing.md#recipes) from the images.
# tests/oracle/ocr_pipeline.py (PaddleOCR's pipeline on ONNX Runtime) reads the evaluation pages:
# CER of FP32, of det INT8 with rec FP32, of both INT8, and of rec INT8 alone on the truth's line
# crops; cls top-1 against the crops' labels. Every figure comes with its 95 % percentile
# bootstrap interval over pages (tests/oracle/bootstrap.py, 1000 draws, seed 1), every INT8
# figure also with the paired difference to FP32 on the same draws: an interval holding 0 is a
# difference this set cannot tell from noise.
#
# Segmentation (scripts/segnet.py): a small U-Net trained here on composites of shapes pasted on
# the photos, with the masks of what was pasted; mask IoU against those masks, FP32 and INT8.
#
# Written to build/bench/truth.md. TRUTH_PAGES (default 48 evaluation pages), TRUTH_CALIB_PAGES
# (24), SEG_EVAL (200 evaluation composites), SEG_STEPS (500 training steps), TRUTH_CONFIGS (a
# subset of the configurations) scale it down for a quick run; TRUTH_SEG=0 leaves segnet out.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
PTQ=$BUILD/ptq
OUT=$BUILD/bench
W=$OUT/truth
M=build/models
PY=/usr/bin/python3
OCRP="$PY tests/oracle/ocr_pipeline.py"
OCR="$OCRP --keys $M/ppocr_keys_v1.txt"
NP=${TRUTH_PAGES:-48}
NC=${TRUTH_CALIB_PAGES:-24}
DATA=$BUILD/truth
CAL=$DATA/calib$NC
EV=$DATA/eval$NP
CONFIGS=${TRUTH_CONFIGS:-max percentile:99.99 entropy mse mse+equalize balanced best}
mkdir -p "$W"
t0=$(date +%s)
for d in "$CAL:calib:$NC" "$EV:eval:$NP"; do
  IFS=: read -r dir split n <<< "$d"
  [ -f "$dir/.done" ] || { rm -rf "$dir"; $PY tests/oracle/textpages.py "$dir" --pages "$n" --split "$split" >/dev/null && touch "$dir/.done"; }
done
ls "$PWD/$CAL"/rec/*.png > "$W/rec.calib"
ls "$PWD/$CAL"/cls/*.png > "$W/cls.calib"
ls "$PWD/$EV"/rec/*.png > "$W/rec.eval"
ls "$PWD/$EV"/cls/*.png > "$W/cls.eval"

# ---- quantize: one calibration pass per model, every method from its statistics ----
name() { echo "${1%%:*}"; }
for k in det rec cls; do
  case $k in
    det) m=$M/ch_PP-OCRv4_det_infer.onnx; imgs=$PWD/$CAL/pages.list; preset=paddleocr-det-dynamic ;;
    rec) m=$M/ch_PP-OCRv4_rec_infer.onnx; imgs=$W/rec.calib; preset=paddleocr-rec-dynamic ;;
    cls) m=$M/ch_ppocr_mobile_v2.0_cls_infer.onnx; imgs=$W/cls.calib; preset=paddleocr-cls ;;
  esac
  "$PTQ" quantize "$m" --images "$imgs" --preset $preset --method max --stats "$W/$k.ptqstats" \
    --threads 2 -o "$W/$k.max.qdq.onnx" >/dev/null 2>&1
  for c in $CONFIGS; do
    case $c in
      max) ;;
      mse+equalize) "$PTQ" quantize "$m" --images "$imgs" --preset $preset --method mse --equalize --threads 2 \
                      -o "$W/$k.$c.qdq.onnx" >/dev/null 2>&1 ;;
      balanced|best) /usr/bin/time -f "%e s" "$PTQ" quantize "$m" --images "$imgs" --preset $preset --recipe $c --threads 2 \
                      -o "$W/$k.$c.qdq.onnx" > "$W/$k.$c.log" 2>&1 ;;
      *) "$PTQ" quantize "$m" --from-stats "$W/$k.ptqstats" --method "$c" -o "$W/$k.$(name $c).qdq.onnx" >/dev/null 2>&1 ;;
    esac
  done
done
t1=$(date +%s)

# ---- OCR readings ----
DET=$M/ch_PP-OCRv4_det_infer.onnx
REC=$M/ch_PP-OCRv4_rec_infer.onnx
CLS=$M/ch_ppocr_mobile_v2.0_cls_infer.onnx
PAGES=$PWD/$EV/pages.list
$OCR --det "$DET" --rec "$REC" --images "$PAGES" --out "$W/fp32.json" 2>/dev/null
$OCR --crops --rec "$REC" --images "$W/rec.eval" --out "$W/crops.fp32.json" 2>/dev/null
$OCRP classify --cls "$CLS" --images "$W/cls.eval" --out "$W/cls.fp32.json" 2>/dev/null
for c in $CONFIGS; do
  n=$(name "$c")
  $OCR --det "$W/det.$n.qdq.onnx" --rec "$REC" --images "$PAGES" --out "$W/det.$n.json" 2>/dev/null
  $OCR --boxes-from "$W/det.$n.json" --rec "$W/rec.$n.qdq.onnx" --images "$PAGES" --out "$W/both.$n.json" 2>/dev/null
  $OCR --crops --rec "$W/rec.$n.qdq.onnx" --images "$W/rec.eval" --out "$W/crops.$n.json" 2>/dev/null
  $OCRP classify --cls "$W/cls.$n.qdq.onnx" --images "$W/cls.eval" --out "$W/cls.$n.json" 2>/dev/null
done
t2=$(date +%s)

# ---- figures: every one with its interval (JSON), INT8 ones paired with FP32 ----
T=$EV/truth.json
fig() { # fig OUT.json cer|top1 --truth/--labels FILE --hyp H [--base B] [--ignore-space]
  local o=$1; shift; local what=$1; shift
  $OCRP "$what" "$@" --boot 1000 --seed 1 --json "$o" >/dev/null
}
for sp in strict nospace; do
  flag=""; [ $sp = nospace ] && flag=--ignore-space
  fig "$W/f.fp32.$sp.json" cer --truth "$T" --hyp "$W/fp32.json" $flag
  fig "$W/f.crops.fp32.$sp.json" cer --labels "$EV/rec.labels" --hyp "$W/crops.fp32.json" $flag
  for c in $CONFIGS; do
    n=$(name "$c")
    fig "$W/f.det.$n.$sp.json" cer --truth "$T" --hyp "$W/det.$n.json" --base "$W/fp32.json" $flag
    fig "$W/f.both.$n.$sp.json" cer --truth "$T" --hyp "$W/both.$n.json" --base "$W/fp32.json" $flag
    fig "$W/f.crops.$n.$sp.json" cer --labels "$EV/rec.labels" --hyp "$W/crops.$n.json" --base "$W/crops.fp32.json" $flag
  done
done
for c in $CONFIGS; do # what bench/ocr_cer.sh measures: CER against FP32's own reading, no truth
  n=$(name "$c")
  for k in both det; do $OCRP cer --ref "$W/fp32.json" --hyp "$W/$k.$n.json" > "$W/agree.$k.$n.txt"; done
done
fig "$W/f.cls.fp32.json" top1 --labels "$EV/cls.labels" --hyp "$W/cls.fp32.json"
for c in $CONFIGS; do
  n=$(name "$c")
  fig "$W/f.cls.$n.json" top1 --labels "$EV/cls.labels" --hyp "$W/cls.$n.json" --base "$W/cls.fp32.json"
done
t3=$(date +%s)

# ---- segmentation: a U-Net trained here, IoU against the pasted shapes' masks ----
SEG=""
if [ "${TRUTH_SEG:-1}" = 1 ]; then
  S=$W/seg
  mkdir -p "$S"
  $PY scripts/segnet.py all --out "$S" --eval "${SEG_EVAL:-200}" --steps "${SEG_STEPS:-500}" > "$S/train.log" 2>&1
  "$PTQ" quantize "$S/segnet.onnx" --images "$S/calib.list" --preset "$S/preset.yaml" --method max \
    --stats "$S/seg.ptqstats" --threads 2 -o "$S/seg.max.qdq.onnx" >/dev/null 2>&1
  for c in $CONFIGS; do
    case $c in
      max) ;;
      mse+equalize) "$PTQ" quantize "$S/segnet.onnx" --images "$S/calib.list" --preset "$S/preset.yaml" --method mse \
                      --equalize --threads 2 -o "$S/seg.$c.qdq.onnx" >/dev/null 2>&1 ;;
      balanced|best) /usr/bin/time -f "%e s" "$PTQ" quantize "$S/segnet.onnx" --images "$S/calib.list" --preset "$S/preset.yaml" \
                      --recipe $c --threads 2 -o "$S/seg.$c.qdq.onnx" > "$S/seg.$c.log" 2>&1 ;;
      *) "$PTQ" quantize "$S/segnet.onnx" --from-stats "$S/seg.ptqstats" --method "$c" -o "$S/seg.$(name $c).qdq.onnx" >/dev/null 2>&1 ;;
    esac
  done
  models="fp32=$S/segnet.onnx"
  for c in $CONFIGS; do models="$models $c=$S/seg.$(name $c).qdq.onnx"; done
  $PY scripts/segnet.py eval --out "$S" $models > "$S/table.md"
  SEG=$S/table.md
fi
t4=$(date +%s)
times > "$W/times" # in this shell: a $(...) subshell would count only its own children
cpu=$(tail -n 1 "$W/times" | awk '{ for (i = 1; i <= 2; i++) { split($i, a, "m"); s += a[1] * 60 + a[2] } printf "%d", s }')

$PY - "$W" "$CONFIGS" "$T" "$EV" "$SEG" "$((t1 - t0))" "$((t2 - t1))" "$((t3 - t2))" "$((t4 - t3))" "$cpu" "$(nproc)" \
  "$(cut -d' ' -f1 /proc/loadavg)" <<'EOF' | tee "$OUT/truth.md"
import json, sys
w, configs, truth, ev, seg, tq, tr, tf, ts, cpu, ncpu, load = sys.argv[1:13]
configs = configs.split()
def f(name):
    return json.load(open(f"{w}/f.{name}.json"))
def pct(r, delta=True):
    s = f"{100 * r['point']:.2f} % [{100 * r['lo']:.2f}, {100 * r['hi']:.2f}]"
    if delta and "delta" in r:
        d = [100 * r[k] + 0.0 for k in ("delta", "delta_lo", "delta_hi")]  # + 0.0: no "-0.00"
        d = [0.0 if abs(v) < 0.005 else v for v in d]
        s += f"<br>Δ {d[0]:+.2f} [{d[1]:+.2f}, {d[2]:+.2f}]"
    return s
t = json.load(open(truth))["images"]
nl = sum(len(p["lines"]) for p in t)
nc = sum(len(l["text"]) for p in t for l in p["lines"])
print(f"Accuracy against the truth (bench/truth.sh): {len(t)} evaluation pages of tests/oracle/textpages.py,")
print(f"{nl} lines, {nc} characters; 95 % percentile bootstrap intervals over pages (1000 draws, seed 1);")
print("Δ: INT8 minus FP32 on the same draws (paired). ptq calibrated on disjoint pages (other seed, words,")
print("Chinese characters, photos).")
print()
for sp, title in (("nospace", "CER, spaces ignored (PaddleOCR's RecMetric convention)"),
                  ("strict", "CER, spaces counted")):
    fp, cr = f(f"fp32.{sp}"), f(f"crops.fp32.{sp}")
    print(f"### PP-OCRv4 det + rec: {title}")
    print()
    print("| configuration | det + rec INT8 | det INT8, rec FP32 | rec INT8 alone, truth's line crops |")
    print("|---|---:|---:|---:|")
    print(f"| FP32 | {pct(fp)} | {pct(fp)} | {pct(cr)} |")
    for c in configs:
        n = c.split(":")[0]
        print(f"| {c} | {pct(f(f'both.{n}.{sp}'))} | {pct(f(f'det.{n}.{sp}'))} | {pct(f(f'crops.{n}.{sp}'))} |")
    print()
    print(f"Lines read exactly (of {fp['items']} truth lines / crops): FP32 {fp['exact']} / {cr['exact']}; " +
          "; ".join(f"{c} {f('both.' + c.split(':')[0] + '.' + sp)['exact']} / {f('crops.' + c.split(':')[0] + '.' + sp)['exact']}"
                    for c in configs) + " (det + rec / rec alone).")
    print()
print("### The same readings against FP32's own reading instead of the truth (spaces counted; bench/ocr_cer.sh's measure)")
print()
print("| configuration | det + rec INT8 | det INT8, rec FP32 |")
print("|---|---:|---:|")
for c in configs:
    n = c.split(":")[0]
    a = [float(open(f"{w}/agree.{k}.{n}.txt").read().split()[1]) for k in ("both", "det")]
    print(f"| {c} | {100 * a[0]:.2f} % | {100 * a[1]:.2f} % |")
print()
cf = f("cls.fp32")
print(f"### ppocr mobile v2.0 cls: top-1 against the labels ({cf['items']} crops, half turned by 180 degrees)")
print()
print("| configuration | top-1 |")
print("|---|---:|")
print(f"| FP32 | {pct(cf)} |")
for c in configs:
    print(f"| {c} | {pct(f('cls.' + c.split(':')[0]))} |")
print()
if seg:
    print(open(seg).read())
print(f"Times: quantization {tq} s, OCR readings {tr} s, figures {tf} s, segmentation (training, quantization, "
      f"evaluation) {ts} s; CPU time of all its processes {cpu} s ({ncpu} cores, load average {load} at the end).")
print()
print("Reproduce: `make ptq && bench/truth.sh` (TRUTH_PAGES=N, TRUTH_CALIB_PAGES=N, SEG_EVAL=N, SEG_STEPS=N scale it,")
print("TRUTH_CONFIGS='mse max' picks configurations, TRUTH_SEG=0 skips the segmentation); the models and the readings")
print(f"are in {w}/.")
EOF

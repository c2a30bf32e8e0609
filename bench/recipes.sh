#!/usr/bin/env bash
# make bench: what the recipes cost (docs/results.md#what-the-recipes-cost). PaddleOCR det, rec and
# cls quantized from N images (default 256: a list cycling build/textphotos' crops and pages) with
# --recipe fast (the calibration pass: percentile:99.99, nothing else), balanced and best, at
# T threads (default 2). Each run's CPU seconds (user + system, so that the ratio holds on a machine
# shared with other work) and wall seconds; the ratios balanced / fast and best / fast next to
# their targets (2x and 10x). Written to build/bench/recipes.md (RECIPES_OUT=FILE: elsewhere).
# OpenMP threads wait passively (OMP_WAIT_POLICY=passive): the CPU seconds are work done, not
# threads spinning at barriers, which on a machine shared with other work can multiply them.
#   bench/recipes.sh [--threads N] [--images N] [--models "det rec cls"]
set -euo pipefail
cd "$(dirname "$0")/.."
PTQ=${PTQ:-build/ptq}
T=2; N=256; MODELS="cls rec det"
while [ $# -gt 0 ]; do
  case $1 in
    --threads) T=$2; shift 2 ;;
    --images) N=$2; shift 2 ;;
    --models) MODELS=$2; shift 2 ;;
    *) echo "bench/recipes.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
export OMP_WAIT_POLICY=passive
OUT=${RECIPES_OUT:-build/bench/recipes.md}
W=build/tmp/bench-recipes-$(basename "$OUT" .md)
mkdir -p build/bench "$W"
[ -f build/textphotos/.done ] || { /usr/bin/python3 tests/oracle/textimages.py build/photos build/textphotos >/dev/null &&
  touch build/textphotos/.done; }
cpu() { awk '{printf "%.1f", $1 + $2}' "$1"; }
wall() { awk '{printf "%.1f", $3}' "$1"; }
{
  echo "$N images (a list cycling build/textphotos/MODEL), $T threads; CPU seconds (user + system, OMP_WAIT_POLICY=passive) and wall seconds"
  echo
  echo "| model | fast CPU s (wall) | balanced CPU s (wall) | balanced / fast (target <= 2) | best CPU s (wall) | best / fast (target <= 10) |"
  echo "|---|---:|---:|---:|---:|---:|"
  for k in $MODELS; do
    case $k in
      cls) m=ch_ppocr_mobile_v2.0_cls_infer.onnx; p=paddleocr-cls ;;
      rec) m=ch_PP-OCRv4_rec_infer.onnx; p=paddleocr-rec ;;
      det) m=ch_PP-OCRv4_det_infer.onnx; p=paddleocr-det ;;
      *) echo "bench/recipes.sh: no model $k" >&2; exit 2 ;;
    esac
    ls "$PWD"/build/textphotos/$k/*.png | LC_ALL=C sort > "$W/$k.all"
    : > "$W/$k.list"
    while [ "$(wc -l < "$W/$k.list")" -lt "$N" ]; do cat "$W/$k.all" >> "$W/$k.list"; done
    head -n "$N" "$W/$k.list" > "$W/$k.$N.list"
    for r in fast balanced best; do
      /usr/bin/time -f "%U %S %e" -o "$W/$k.$r.time" "$PTQ" quantize build/models/$m --images "$W/$k.$N.list" \
        --preset $p --threads "$T" --recipe $r -o "$W/$k.$r.onnx" 2> "$W/$k.$r.log" ||
        { echo "bench/recipes.sh: $k --recipe $r failed:" >&2; tail -n 3 "$W/$k.$r.log" >&2; exit 1; }
    done
    f=$(cpu "$W/$k.fast.time"); b=$(cpu "$W/$k.balanced.time"); x=$(cpu "$W/$k.best.time")
    echo "| $k | $f ($(wall "$W/$k.fast.time")) | $b ($(wall "$W/$k.balanced.time")) | $(awk -v a="$b" -v c="$f" 'BEGIN {printf "%.1fx", a / c}') |" \
         "$x ($(wall "$W/$k.best.time")) | $(awk -v a="$x" -v c="$f" 'BEGIN {printf "%.1fx", a / c}') |"
  done
} > "$OUT"
cat "$OUT"

#!/usr/bin/env bash
# make bench (issues 4 and 6): on PP-OCRv4 det at 640x640 with the photos,
#  - calibration with --method all against plain FP32 inference over the same images
#    (`ptq run --images`: decode, preprocess and the fused executor), target <= 1.3x;
#  - peak RSS of calibration for 16 and 160 images (the same for both, under 1 GB);
#  - `ptq compare` with 5 methods against one `ptq quantize` on the same images, target <= 3x.
# Wall-clock seconds, 2 threads, best of 2 runs. Written to build/bench/calibrate.md.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
PTQ=$BUILD/ptq
OUT=$BUILD/bench
mkdir -p "$OUT"
DET=build/models/ch_PP-OCRv4_det_infer.onnx
ls "$PWD"/build/photos/* | grep -v truncated | sort > "$OUT/all.list"
head -n 16 "$OUT/all.list" > "$OUT/16.list"
for _ in 1 2 3 4 5 6 7 8 9 10; do cat "$OUT/16.list"; done > "$OUT/160.list"
awk 'NR % 2 == 1' "$OUT/all.list" | head -n 8 > "$OUT/calib8.list"
awk 'NR % 2 == 0' "$OUT/all.list" | head -n 4 > "$OUT/eval4.list"
T="--threads 2"
best() { # command... -> "seconds rss_mb" of the faster of 2 runs
  local b=""
  for _ in 1 2; do
    /usr/bin/time -f "%e %M" -o "$OUT/time.txt" "$@" >/dev/null 2>&1
    read -r s kb < "$OUT/time.txt"
    if [ -z "$b" ] || /usr/bin/python3 -c "import sys; sys.exit(0 if $s < ${b%% *} else 1)"; then b="$s $((kb / 1024))"; fi
  done
  echo "$b"
}
run16=$(best "$PTQ" run $DET --images "$OUT/16.list" --preset paddleocr-det --batch 8 $T)
cal16=$(best "$PTQ" calibrate $DET --images "$OUT/16.list" --preset paddleocr-det --batch 8 --method all --cache "$OUT/c.cache" $T)
cal160=$(best "$PTQ" calibrate $DET --images "$OUT/160.list" --preset paddleocr-det --batch 8 --method all --cache "$OUT/c.cache" $T)
quant=$(best "$PTQ" quantize $DET --images "$OUT/calib8.list" --preset paddleocr-det --batch 4 --method entropy -o "$OUT/q.onnx" $T)
comp=$(best "$PTQ" compare $DET --images "$OUT/calib8.list" --eval-images "$OUT/eval4.list" --preset paddleocr-det --batch 4 $T)
r() { /usr/bin/python3 -c "print(f'{$1 / $2:.2f}')"; }
{
  echo "| PP-OCRv4 det, 640x640, 2 threads | seconds | peak RSS MB | ratio |"
  echo "|---|---:|---:|---:|"
  echo "| ptq run --images, 16 images (plain FP32 inference) | ${run16% *} | ${run16#* } | 1.00 |"
  echo "| ptq calibrate --method all, 16 images | ${cal16% *} | ${cal16#* } | $(r ${cal16% *} ${run16% *}) x inference (target <= 1.3) |"
  echo "| ptq calibrate --method all, 160 images | ${cal160% *} | ${cal160#* } | RSS $(r ${cal160#* } ${cal16#* }) x the 16-image run (target 1 +- 0.05, < 1 GB) |"
  echo "| ptq quantize --method entropy, 8 images | ${quant% *} | ${quant#* } | 1.00 |"
  echo "| ptq compare, 5 methods, 8 + 4 images | ${comp% *} | ${comp#* } | $(r ${comp% *} ${quant% *}) x quantize (target <= 3) |"
} | tee "$OUT/calibrate.md"

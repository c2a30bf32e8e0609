#!/usr/bin/env bash
# Decode + preprocess speed on the real photos (paddleocr-cls preset) at 1 and 2 threads,
# next to the executor's images/s on the cls model: the pipeline must not be the bottleneck.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
PTQ=$BUILD/ptq
OUT=$BUILD/bench
mkdir -p "$OUT"
# one process over a list naming every photo 8 times (the truncated one is skipped)
LIST=$OUT/photos.list
for _ in 1 2 3 4 5 6 7 8; do ls "$PWD"/build/photos/*.png "$PWD"/build/photos/*.jpg; done > "$LIST"
imgs=$(grep -vc truncated "$LIST")
rate() { # threads -> images/s
  local t0b t1
  "$PTQ" preprocess --images "$LIST" --preset paddleocr-cls --threads "$1" --limit 16 --dump "$OUT/pp.npy" 2>/dev/null # warm the file cache
  t0b=$(date +%s.%N)
  "$PTQ" preprocess --images "$LIST" --preset paddleocr-cls --threads "$1" --dump "$OUT/pp.npy" 2>/dev/null
  t1=$(date +%s.%N)
  /usr/bin/python3 -c "print(f'{$imgs / ($t1 - $t0b):.0f}')"
}
r1=$(rate 1); r2=$(rate 2)
ex=$("$PTQ" run build/models/ch_ppocr_mobile_v2.0_cls_infer.onnx --input-shape x:8x3x48x192 --random-seed 1 --repeat 10 --threads 2)
ms=$(echo "$ex" | sed -E 's/.*median ([0-9.]+) ms.*/\1/')
exr=$(/usr/bin/python3 -c "print(f'{8 * 1000 / $ms:.0f}')")
{
  echo "| stage | images/s |"
  echo "|---|---:|"
  echo "| decode + preprocess (paddleocr-cls), 1 thread | $r1 |"
  echo "| decode + preprocess (paddleocr-cls), 2 threads | $r2 |"
  echo "| executor, cls model, batch 8, 2 threads | $exr |"
} | tee "$OUT/preprocess.md"

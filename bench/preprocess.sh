#!/usr/bin/env bash
# Decode + preprocess speed on the real photos (paddleocr-cls preset) at 1 and 2 threads, next to
# the executor's images/s on the cls model (batch 8, 2 threads), and whether the pipeline keeps up
# (pipeline at 2 threads >= executor). Every figure is the median of RUNS runs (default 5); the
# load average is printed with them, since other work on the machine slows both sides.
# A pipeline run is one `ptq preprocess` process over a list naming every photo 8 times, timed
# from start to exit. The 28 MB .npy it must write goes to /dev/shm when there is one, so that
# the disk's fsync stays out of the figure; gathering and writing the dump still count (at 2
# threads, about a sixth of the run), so the figure understates the pipeline alone.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
PTQ=$BUILD/ptq
OUT=$BUILD/bench
RUNS=${RUNS:-5}
mkdir -p "$OUT"
DUMP=$OUT/pp.npy
if [ -d /dev/shm ] && [ -w /dev/shm ]; then DUMP=/dev/shm/ptq-bench-$$.npy; fi
trap 'rm -f "/dev/shm/ptq-bench-$$.npy"' EXIT
LIST=$OUT/photos.list
for _ in 1 2 3 4 5 6 7 8; do ls "$PWD"/build/photos/*.png "$PWD"/build/photos/*.jpg; done > "$LIST"
imgs=$(grep -vc truncated "$LIST") # the truncated JPEG is skipped
median() { sort -g | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }
now() { date +%s.%N; }

pipeline() { # threads -> images/s, median of RUNS
  "$PTQ" preprocess --images "$LIST" --preset paddleocr-cls --threads "$1" --limit 16 --dump "$DUMP" 2>/dev/null # warm the file cache
  for _ in $(seq "$RUNS"); do
    local t0 t1
    t0=$(now)
    "$PTQ" preprocess --images "$LIST" --preset paddleocr-cls --threads "$1" --dump "$DUMP" 2>/dev/null
    t1=$(now)
    awk -v n="$imgs" -v a="$t0" -v b="$t1" 'BEGIN {print n / (b - a)}'
  done | median
}

executor() { # images/s of the cls model at batch 8, 2 threads: median of RUNS medians of 10 runs
  for _ in $(seq "$RUNS"); do
    "$PTQ" run build/models/ch_ppocr_mobile_v2.0_cls_infer.onnx --input-shape x:8x3x48x192 --random-seed 1 --repeat 10 --threads 2 |
      sed -E 's/.*median ([0-9.]+) ms.*/\1/' | awk '{print 8 * 1000 / $1}'
  done | median
}

load0=$(cut -d' ' -f1 /proc/loadavg)
r1=$(pipeline 1)
r2=$(pipeline 2)
ex=$(executor)
load1=$(cut -d' ' -f1 /proc/loadavg)
{
  echo "machine: $(nproc) cores, load average $load0 before, $load1 after; median of $RUNS runs"
  echo
  echo "| stage | images/s |"
  echo "|---|---:|"
  printf '| decode + preprocess (paddleocr-cls), 1 thread | %.0f |\n' "$r1"
  printf '| decode + preprocess (paddleocr-cls), 2 threads | %.0f |\n' "$r2"
  printf '| executor, cls model, batch 8, 2 threads | %.0f |\n' "$ex"
  echo
  awk -v p="$r2" -v e="$ex" 'BEGIN {
    if (p >= e) printf "pipeline keeps up: yes, decode + preprocess at 2 threads is %.2fx the executor\n", p / e
    else printf "pipeline keeps up: no, decode + preprocess at 2 threads is %.2fx the executor (the pipeline is the bottleneck)\n", p / e }'
} | tee "$OUT/preprocess.md"

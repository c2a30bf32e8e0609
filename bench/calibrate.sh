#!/usr/bin/env bash
# make bench (issues 4, 6 and 14), 2 threads, measured in the same run:
#  - calibration with --method all against plain FP32 inference over the same 16 photos
#    (`ptq run --images`: decode, preprocess and the fused executor) for PP-OCRv4 det at
#    640x640, the cls and the rec model; target <= 1.3x;
#  - peak RSS of det's calibration for 8 and 160 images at the default batch, which the default
#    512 MB budget (--memory) picks (target: within 2 %, at most 500 MB);
#  - `ptq compare` with 5 methods against one `ptq quantize` on the same images, target <= 2x (issue 14).
# Wall-clock seconds (ms resolution), the fastest of 5 runs of each command of a pair, run alternately
# (quantize/compare: 3; RSS rows: one run). Written to build/bench/calibrate.md.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
PTQ=$BUILD/ptq
OUT=$BUILD/bench
mkdir -p "$OUT"
M=build/models
DET=$M/ch_PP-OCRv4_det_infer.onnx
ls "$PWD"/build/photos/* | grep -v truncated | sort > "$OUT/all.list"
head -n 16 "$OUT/all.list" > "$OUT/16.list"
head -n 8 "$OUT/all.list" > "$OUT/8.list"
for _ in 1 2 3 4 5 6 7 8 9 10; do cat "$OUT/16.list"; done > "$OUT/160.list"
awk 'NR % 2 == 1' "$OUT/all.list" | head -n 8 > "$OUT/calib8.list"
awk 'NR % 2 == 0' "$OUT/all.list" | head -n 4 > "$OUT/eval4.list"
T="--threads 2"
once() { # runs command... once -> "seconds rss_mb" (ms resolution)
  local t0 t1 kb
  t0=$(date +%s%N)
  /usr/bin/time -f "%M" -o "$OUT/time.txt" "$@" >/dev/null 2>&1
  t1=$(date +%s%N)
  read -r kb < "$OUT/time.txt"
  echo "$(( (t1 - t0) / 1000000 )) $((kb / 1024))"
}
ms() { /usr/bin/python3 -c "print(f'{$1 / 1000:.3f}')"; }
best() { # runs command... $RUNS times (default 3) -> "seconds rss_mb" of the fastest
  local b="" x
  for _ in $(seq "${RUNS:-3}"); do
    x=$(once "$@")
    if [ -z "$b" ] || [ "${x% *}" -lt "${b% *}" ]; then b=$x; fi
  done
  echo "$(ms "${b% *}") ${b#* }"
}
# A and B (two commands separated by ---) run alternately $RUNS times (default 5), so that a
# load change on a shared machine hits both alike -> "A_seconds A_rss B_seconds B_rss" (fastest of each)
pair() {
  local a=() b=() x ba="" bb="" side=a
  for x in "$@"; do
    if [ "$x" = --- ]; then side=b; elif [ $side = a ]; then a+=("$x"); else b+=("$x"); fi
  done
  for _ in $(seq "${RUNS:-5}"); do
    x=$(once "${a[@]}"); if [ -z "$ba" ] || [ "${x% *}" -lt "${ba% *}" ]; then ba=$x; fi
    x=$(once "${b[@]}"); if [ -z "$bb" ] || [ "${x% *}" -lt "${bb% *}" ]; then bb=$x; fi
  done
  echo "$(ms "${ba% *}") ${ba#* } $(ms "${bb% *}") ${bb#* }"
}
r() { /usr/bin/python3 -c "print(f'{$1 / $2:.2f}')"; }
rows=""
for spec in "det 640x640:ch_PP-OCRv4_det_infer.onnx:paddleocr-det" "cls:ch_ppocr_mobile_v2.0_cls_infer.onnx:paddleocr-cls" \
            "rec:ch_PP-OCRv4_rec_infer.onnx:paddleocr-rec"; do
  IFS=: read -r name file preset <<< "$spec"
  read -r rs rm cs cm < <(pair "$PTQ" run "$M/$file" --images "$OUT/16.list" --preset "$preset" --batch 8 $T --- \
    "$PTQ" calibrate "$M/$file" --images "$OUT/16.list" --preset "$preset" --batch 8 --method all --cache "$OUT/c.cache" $T)
  run="$rs $rm" cal="$cs $cm"
  rows+="| PP-OCRv4 $name | ${run% *} | ${cal% *} | $(r ${cal% *} ${run% *}) | ${run#* } / ${cal#* } |"$'\n'
done
cal8=$(RUNS=1 best "$PTQ" calibrate $DET --images "$OUT/8.list" --preset paddleocr-det --method all --cache "$OUT/c.cache" $T)
cal160=$(RUNS=1 best "$PTQ" calibrate $DET --images "$OUT/160.list" --preset paddleocr-det --method all --cache "$OUT/c.cache" $T)
read -r qs qm cs cm < <(RUNS=3 pair "$PTQ" quantize $DET --images "$OUT/calib8.list" --preset paddleocr-det --batch 4 --method entropy -o "$OUT/q.onnx" $T --- \
  "$PTQ" compare $DET --images "$OUT/calib8.list" --eval-images "$OUT/eval4.list" --preset paddleocr-det --batch 4 $T)
quant="$qs $qm" comp="$cs $cm"
# where compare's time goes (its own progress lines): calibration pass, evaluating the 5 QDQ models
# and the FP32 reference on the 4 images, layer-wise errors of the best method (FP32 and QDQ in lockstep)
"$PTQ" compare $DET --images "$OUT/calib8.list" --eval-images "$OUT/eval4.list" --preset paddleocr-det --batch 4 $T \
  2>&1 >/dev/null | tr -d '\r' > "$OUT/compare.log"
phases=$(/usr/bin/python3 - "$OUT/compare.log" <<'PYEOF'
import re, sys
t = open(sys.argv[1]).read()
cal = float(re.search(r"calibration pass ([0-9.]+) s", t).group(1))
ev = float(re.search(r"([0-9.]+) s; evaluating", t).group(1))
lw = float(re.search(r"([0-9.]+) s; layer-wise", t).group(1))
tot = float(re.search(r"; ([0-9.]+) s, peak RSS", t).group(1))
print(f"calibration {cal:.1f} s, evaluation {lw - ev:.1f} s, layer-wise {tot - lw:.1f} s")
PYEOF
)
run4=$(best "$PTQ" run $DET --images "$OUT/eval4.list" --preset paddleocr-det --batch 4 $T)
{
  echo "| 16 photos, batch 8, 2 threads | run --images s | calibrate --method all s | ratio (target <= 1.3) | peak RSS MB run / calibrate |"
  echo "|---|---:|---:|---:|---:|"
  printf "%s" "$rows"
  echo
  echo "| PP-OCRv4 det 640x640, calibrate --method all, default batch (--memory 512) | 8 photos | 160 photos | 160 / 8 (target 1 +- 0.02, <= 500 MB) |"
  echo "|---|---:|---:|---:|"
  echo "| peak RSS MB | ${cal8#* } | ${cal160#* } | $(r ${cal160#* } ${cal8#* }) |"
  echo "| seconds | ${cal8% *} | ${cal160% *} | |"
  echo
  echo "| PP-OCRv4 det 640x640, 2 threads | seconds | peak RSS MB | ratio |"
  echo "|---|---:|---:|---:|"
  echo "| ptq quantize --method entropy, 8 images | ${quant% *} | ${quant#* } | 1.00 |"
  echo "| ptq compare, 5 methods, 8 + 4 images | ${comp% *} | ${comp#* } | $(r ${comp% *} ${quant% *}) x quantize (target <= 2) |"
  echo "| (compare: $phases) | | | |"
  echo "| ptq run --images, the 4 evaluation images | ${run4% *} | ${run4#* } | compare runs them 8 times (FP32, 5 QDQ, layer-wise FP32 + QDQ) |"
} | tee "$OUT/calibrate.md"

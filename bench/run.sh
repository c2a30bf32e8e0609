#!/usr/bin/env bash
# make bench: ptq's FP32 executor against ONNX Runtime, measured in the same run, on
# the PaddleOCR models: 2 threads, one warm-up, median of 10 runs each. Prints a
# markdown table (also written to build/bench/executor.md).
# Then the machine's FMA peak per ISA path (build/bench/gemm --peak: twelve independent FMA
# chains per thread, one core and $THREADS at once, in the thread's CPU seconds) and each model's
# rate on every path this CPU runs (PTQ_ISA=avx512|avx2|generic; ISAS=... picks some): FLOPs
# (2 x the multiply-adds of Conv, ConvTranspose, Gemm and MatMul: ptq_plan_flops, printed by
# `ptq run` as GFLOP/s over the median) per CPU second of a run (OMP_WAIT_POLICY=passive; the
# CPU seconds of --repeat 2R less those of R, over R), as a share of that path's one-core peak
# (build/bench/peak.md). Both count CPU seconds, so the share holds on a machine shared with
# other work, where wall-clock rates do not; the generic path runs GENERIC_REPEAT times (default
# 2: it is some 100x slower). SPECS="model:dims ..." picks the models.
# Last, bench/layers.sh: the slowest layers at 1 thread and at $THREADS, with their speed-up.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
PTQ=$BUILD/ptq
OUT=$BUILD/bench
mkdir -p "$OUT"
PY=/usr/bin/python3
REPEAT=${REPEAT:-10}
THREADS=${THREADS:-2}
GENERIC_REPEAT=${GENERIC_REPEAT:-2}
SPECS=${SPECS:-"ch_PP-OCRv4_det_infer:1,3,640,640 ch_ppocr_mobile_v2.0_cls_infer:8,3,48,192 ch_PP-OCRv4_rec_infer:1,3,48,320"}
{
  echo "machine: $(nproc) cores, $(lscpu | sed -n 's/^Model name: *//p'), threads $THREADS, median of $REPEAT runs"
  echo
  echo "| model | input | ptq ms | ONNX Runtime ms | ptq / ORT | ptq GFLOP/s |"
  echo "|---|---|---:|---:|---:|---:|"
  for spec in $SPECS; do
    m=${spec%%:*}; shape=${spec#*:}
    in=$OUT/$m.in.npy
    $PY -c "import numpy as np; np.save('$in', np.random.default_rng(1).uniform(-1, 1, ($shape)).astype(np.float32))"
    p=$("$PTQ" run "build/models/$m.onnx" --input "$in" --repeat "$REPEAT" --threads "$THREADS")
    o=$(node tests/oracle/ort.js "build/models/$m.onnx" --input x="$in" --repeat "$REPEAT" --threads "$THREADS")
    pm=$(echo "$p" | sed -E 's/.*median ([0-9.]+) ms.*/\1/'); gf=$(echo "$p" | sed -E 's/.*, ([0-9.]+) GFLOP\/s.*/\1/')
    om=$(echo "$o" | sed -E 's/.*median ([0-9.]+) ms.*/\1/')
    ratio=$($PY -c "print(f'{$pm / $om:.2f}')")
    echo "| $m | ${shape//,/x} | $pm | $om | $ratio | $gf |"
  done
} | tee "$OUT/executor.md"

# the FMA peak per ISA path, then each model's share of it on every path
"$BUILD/bench/gemm" --peak "$THREADS" > "$OUT/peak.txt"
ISAS=${ISAS:-$(awk '{print $2}' "$OUT/peak.txt")}
cpu() { # isa repeat model input -> CPU seconds (user + sys) of `ptq run --repeat`; its line in $OUT/run.txt
  OMP_WAIT_POLICY=passive PTQ_ISA=$1 /usr/bin/time -f "%U %S" -o "$OUT/time.txt" \
    "$PTQ" run "$3" --input "$4" --repeat "$2" --threads "$THREADS" > "$OUT/run.txt"
  awk '{print $1 + $2}' "$OUT/time.txt"
}
{
  echo "FMA peak, GFLOP/s per core while it runs (twelve independent FMA chains per thread, best of 5):"
  echo
  echo "| ISA path | one core | $THREADS threads at once |"
  echo "|---|---:|---:|"
  awk '{print "| " $2 " | " $3 " | " $4 " |"}' "$OUT/peak.txt"
  echo
  echo "| model | input | ISA path | median ms | GFLOP/s | GFLOP per CPU second | share of the one-core peak |"
  echo "|---|---|---|---:|---:|---:|---:|"
  for spec in $SPECS; do
    m=${spec%%:*}; shape=${spec#*:}
    in=$OUT/$m.in.npy
    for isa in $ISAS; do
      rep=$REPEAT; [ "$isa" = generic ] && rep=$GENERIC_REPEAT
      c1=$(cpu "$isa" "$rep" "build/models/$m.onnx" "$in"); p=$(cat "$OUT/run.txt")
      c2=$(cpu "$isa" $((2 * rep)) "build/models/$m.onnx" "$in")
      pm=$(echo "$p" | sed -E 's/.*median ([0-9.]+) ms.*/\1/'); gf=$(echo "$p" | sed -E 's/.*, ([0-9.]+) GFLOP\/s.*/\1/')
      peak=$(awk -v i="$isa" '$2 == i {print $3}' "$OUT/peak.txt")
      # a run's CPU seconds: the difference of 2R and R runs (loading and planning cancel out)
      $PY -c "
f = $gf * $pm / 1e3; c = ($c2 - $c1) / $rep
print(f'| $m | ${shape//,/x} | $isa | $pm | $gf | {f / c:.1f} | {100 * f / c / $peak:.0f} % |')"
    done
  done
} | tee "$OUT/peak.md"

# where the second thread idles: the slowest layers at 1 thread and at $THREADS (bench/layers.sh)
REPEAT=$REPEAT THREADS=$THREADS BUILD=$BUILD bench/layers.sh

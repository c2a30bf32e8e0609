#!/usr/bin/env bash
# make bench, last: the executor's figures next to their targets, on this machine, per ISA path.
#
#   share of the FMA peak, one thread   det and rec: FLOPs over the wall-clock median of a
#                                       one-thread run, over the one-core FMA peak of the same ISA
#                                       path (build/bench/gemm --peak)                  target >= 60 %
#   share of the FMA peak, $THREADS threads   FLOPs over the wall-clock median of a $THREADS-thread run,
#                                       over the peak of $THREADS cores at once          target >= 50 %
#   det speed-up                        wall-clock median at 1 thread over at $THREADS  target >= 1.8x
#   ptq / ONNX Runtime                  det, cls, rec: wall-clock medians at $THREADS threads, the two
#                                       measured one after the other                    target <= 0.7x
# then the rows bench/recipes.sh and bench/calibrate.sh wrote (build/bench/recipes.md, calibrate.md)
# when they ran before. Every figure is wall-clock, with OpenMP's default wait policy (as users run
# ptq: OMP_WAIT_POLICY=passive puts the idle thread to sleep between nodes and costs a two-thread
# run of cls half its speed); it needs a quiet machine (pin it: taskset -c 2,3). The load average is printed.
# ISAS (default: every path this CPU runs but generic), REPEAT (10), THREADS (2); ORT_PY=python3 times
# ONNX Runtime through its Python package instead of tests/oracle/ort.js (onnxruntime-node).
# Written to build/bench/targets.md.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
PTQ=$BUILD/ptq
OUT=$BUILD/bench
mkdir -p "$OUT"
PY=${PY:-/usr/bin/python3}
REPEAT=${REPEAT:-10}
THREADS=${THREADS:-2}
M=build/models
DET=ch_PP-OCRv4_det_infer:1,3,640,640
REC=ch_PP-OCRv4_rec_infer:1,3,48,320
CLS=ch_ppocr_mobile_v2.0_cls_infer:8,3,48,192
[ -x "$BUILD/bench/gemm" ] || make --no-print-directory "$BUILD/bench/gemm" >/dev/null
"$BUILD/bench/gemm" --peak "$THREADS" > "$OUT/targets.peak.txt"
ISAS=${ISAS:-$(awk '$2 != "generic" {print $2}' "$OUT/targets.peak.txt")}
input() { # spec -> npy path
  local m=${1%%:*} shape=${1#*:}
  [ -f "$OUT/$m.in.npy" ] || $PY -c "import numpy as np; np.save('$OUT/$m.in.npy', np.random.default_rng(1).uniform(-1, 1, ($shape)).astype(np.float32))"
  echo "$OUT/$m.in.npy"
}
field() { sed -E "s/.*$1 ([0-9.]+).*/\1/"; }
run() { # isa threads repeat spec -> "median_ms gflops" (wall-clock)
  local p
  p=$(PTQ_ISA=$1 "$PTQ" run "$M/${4%%:*}.onnx" --input "$(input "$4")" --repeat "$3" --threads "$2")
  echo "$(echo "$p" | field median) $(echo "$p" | sed -E 's/.*, ([0-9.]+) GFLOP\/s.*/\1/')"
}
row() { # figure measured target met
  echo "| $1 | $2 | $3 | $4 |"
}
judge() { # value op bound -> yes/no
  $PY -c "print('yes' if $1 $2 $3 else 'no')"
}
{
  echo "machine: $(nproc) cores, $(lscpu | sed -n 's/^Model name: *//p'), load average $(cut -d' ' -f1-3 /proc/loadavg) at the start; $THREADS threads, median of $REPEAT runs"
  echo
  echo "| figure | measured | target | met |"
  echo "|---|---:|---:|---|"
  for isa in $ISAS; do
    p1=$(awk -v i="$isa" '$2 == i {print $3}' "$OUT/targets.peak.txt")
    pn=$(awk -v i="$isa" '$2 == i {print $4}' "$OUT/targets.peak.txt")
    for spec in "$DET" "$REC"; do
      m=${spec%%:*}; short=${m#ch_PP-OCRv4_}; short=${short%_infer}
      read -r ms1 gf1 <<<"$(run "$isa" 1 "$REPEAT" "$spec")"
      share1=$($PY -c "print(f'{100 * $gf1 / $p1:.0f}')")
      row "$short, $isa, share of the one-core FMA peak ($p1 GFLOP/s), 1 thread (wall-clock)" "$share1 %" ">= 60 %" "$(judge "$share1" '>=' 60)"
      read -r msn gfn <<<"$(run "$isa" "$THREADS" "$REPEAT" "$spec")"
      sharen=$($PY -c "print(f'{100 * $gfn / $pn:.0f}')")
      row "$short, $isa, share of the $THREADS-core FMA peak ($pn GFLOP/s), $THREADS threads (wall-clock)" "$sharen %" ">= 50 %" "$(judge "$sharen" '>=' 50)"
      if [ "$short" = det ]; then
        sp=$($PY -c "print(f'{$ms1 / $msn:.2f}')")
        row "det, $isa, $THREADS threads against 1 (wall-clock medians $ms1 / $msn ms)" "${sp}x" ">= 1.8x" "$(judge "$sp" '>=' 1.8)"
      fi
    done
  done
  for spec in "$DET" "$CLS" "$REC"; do
    m=${spec%%:*}
    read -r pm _ <<<"$(run "" "$THREADS" "$REPEAT" "$spec")"
    if [ -n "${ORT_PY:-}" ]; then # Python's onnxruntime instead of onnxruntime-node (a machine without node)
      om=$($ORT_PY - "$M/$m.onnx" "$(input "$spec")" "$REPEAT" "$THREADS" <<'PYEOF'
import sys, time, numpy as np, onnxruntime as ort
o = ort.SessionOptions(); o.intra_op_num_threads = int(sys.argv[4]); o.inter_op_num_threads = 1
s = ort.InferenceSession(sys.argv[1], o, providers=["CPUExecutionProvider"])
x = {s.get_inputs()[0].name: np.load(sys.argv[2])}
s.run(None, x)
t = []
for _ in range(int(sys.argv[3])):
    t0 = time.perf_counter(); s.run(None, x); t.append((time.perf_counter() - t0) * 1e3)
print(f"{float(np.median(t)):.3f}")
PYEOF
)
    else
      o=$(node tests/oracle/ort.js "$M/$m.onnx" --input x="$(input "$spec")" --repeat "$REPEAT" --threads "$THREADS")
      om=$(echo "$o" | field median)
    fi
    r=$($PY -c "print(f'{$pm / $om:.2f}')")
    row "$m, ptq / ONNX Runtime, $THREADS threads ($pm / $om ms)" "${r}x" "<= 0.7x" "$(judge "$r" '<=' 0.7)"
  done
  if [ -f "$OUT/recipes.md" ]; then
    awk -F'|' '/^\| (cls|rec|det) \|/ {gsub(/ /, "", $2); gsub(/ /, "", $5); gsub(/ /, "", $7);
      print "| " $2 ", recipe balanced / fast (bench/recipes.sh) | " $5 " | <= 2x | " ($5 + 0 <= 2 ? "yes" : "no") " |";
      print "| " $2 ", recipe best / fast (bench/recipes.sh) | " $7 " | <= 10x | " ($7 + 0 <= 10 ? "yes" : "no") " |"}' "$OUT/recipes.md"
  fi
  if [ -f "$OUT/calibrate.md" ]; then
    # "| PP-OCRv4 det | run s | calibrate s | ratio | RSS |" rows, then det's RSS at the default batch
    awk -F'|' '/^\| PP-OCRv4 (det|cls|rec) \|/ {gsub(/^ +| +$/, "", $2); gsub(/ /, "", $5);
      print "| " $2 ", calibrate --method all / run --images, 16 photos, batch 8 (bench/calibrate.sh) | " $5 "x | <= 1.3x | " ($5 + 0 <= 1.3 ? "yes" : "no") " |"}
      /^\| peak RSS MB \|/ {gsub(/ /, "", $3);
      print "| det, calibrate --method all, default batch, 8 photos, peak RSS (bench/calibrate.sh) | " $3 " MB | <= 500 MB | " ($3 + 0 <= 500 ? "yes" : "no") " |"}' "$OUT/calibrate.md"
  fi
} | tee "$OUT/targets.md"

#!/usr/bin/env bash
# make bench (after bench/run.sh): where the second thread idles. Each model of SPECS runs with
# PTQ_PROFILE=1 PTQ_PROFILE_NODES=1 (runtime/plan.c: wall-clock ms per node, summed over the
# runs: the warm-up run and --repeat REPEAT) at 1 thread and at THREADS; the TOP nodes by their 1-thread time are printed with both
# times and the speed-up, then the rest in one row, and the whole run. A node whose speed-up
# stays far below THREADS is where the other threads wait (a small layer, a serial op, a
# memory-bound pass). Output: a markdown table per model, also in build/bench/layers.md.
# Pin the runs to as many cores for a figure that means something (taskset -c 0,1 bench/layers.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
PTQ=$BUILD/ptq
OUT=$BUILD/bench
mkdir -p "$OUT"
PY=${PY:-/usr/bin/python3}
REPEAT=${REPEAT:-10}
THREADS=${THREADS:-2}
TOP=${TOP:-15}
SPECS=${SPECS:-"ch_PP-OCRv4_det_infer:1,3,640,640 ch_PP-OCRv4_rec_infer:1,3,48,320"}
prof() { # threads model input -> "name op shape ms" per node in $OUT/prof.T.txt
  PTQ_PROFILE=1 PTQ_PROFILE_NODES=1 "$PTQ" run "$2" --input "$3" --repeat "$REPEAT" --threads "$1" 2>&1 >/dev/null |
    awk '$1 == "node" {print $2, $3, $4, $5}' > "$OUT/prof.$1.txt"
}
{
  for spec in $SPECS; do
    m=${spec%%:*}; shape=${spec#*:}
    in=$OUT/$m.in.npy
    [ -f "$in" ] || $PY -c "import numpy as np; np.save('$in', np.random.default_rng(1).uniform(-1, 1, ($shape)).astype(np.float32))"
    prof 1 "build/models/$m.onnx" "$in"
    prof "$THREADS" "build/models/$m.onnx" "$in"
    echo "$m at ${shape//,/x}, ISA path ${PTQ_ISA:-best}: ms per run at 1 and $THREADS threads (the $TOP slowest nodes on one thread)"
    echo
    $PY - "$OUT/prof.1.txt" "$OUT/prof.$THREADS.txt" "$REPEAT" "$TOP" "$THREADS" <<'PY'
import sys
one, many, rep, top, th = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
def rows(f):
    return [(l.split()[0], l.split()[1], l.split()[2], float(l.split()[3]) / (rep + 1)) for l in open(f)]
a, b = rows(one), dict((r[0], r[3]) for r in rows(many))
print(f"| node | op | output | 1 thread ms | {th} threads ms | speed-up | share of the 1-thread run |")
print("|---|---|---|---:|---:|---:|---:|")
t1 = sum(r[3] for r in a); tn = sum(b.values())
for name, op, shape, ms in sorted(a, key=lambda r: -r[3])[:top]:
    print(f"| {name} | {op} | {shape} | {ms:.2f} | {b[name]:.2f} | {ms / max(b[name], 1e-9):.2f}x | {100 * ms / t1:.1f} % |")
rest = sorted(a, key=lambda r: -r[3])[top:]
r1 = sum(r[3] for r in rest); rn = sum(b[r[0]] for r in rest)
print(f"| {len(rest)} others | | | {r1:.2f} | {rn:.2f} | {r1 / max(rn, 1e-9):.2f}x | {100 * r1 / t1:.1f} % |")
print(f"| whole run | | | {t1:.2f} | {tn:.2f} | {t1 / max(tn, 1e-9):.2f}x | 100 % |")
print()
PY
  done
} | tee "$OUT/layers.md"

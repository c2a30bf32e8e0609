#!/usr/bin/env bash
# Allocation failures: inspect, quantize, compare and translate of PaddleOCR's cls model run with
# one allocation of ptq's own code or libyaml's failing (tests/fault/failalloc.c, LD_PRELOAD; the
# N-th counted malloc/calloc/realloc/posix_memalign/aligned_alloc/strdup/strndup returns NULL;
# protobuf-c allocates through io/onnx.c's allocator, so its allocations count as ptq's). One run
# per command sweeps its points through the shim's fork server (PTQ_FAIL_ALLOC=fork): at each
# point a child fails that allocation and runs on in a folder of its own, the parent (the run
# without a failure) is the reference; tests/fault/check_points.py judges every child. Each must
# either exit 1 with its last stderr line (the only one about memory) saying "out of memory" and
# what was being allocated, each file it was to write (pre-created) either as it was or the
# complete file of the run without a failure (a failure after a file was renamed into place), no
# temporary file left; or exit 0 with the same bytes as the run without a failure. Never a
# signal, an abort, a glibc heap message or another exit status. Points met while a decoding
# thread is alive (fork keeps one thread) are tried by runs of their own.
#   FAULTS=all    every failure point (make faults); otherwise every k-th, about FAULT_POINTS
#                 (default 300) per command (make test)
#   FAULT_COMMANDS="quantize compare"   only these (default: all four, and "constants": quantize of a
#                 small model whose weights are Constant nodes, every point even in make test)
. "$(dirname "$0")/lib.sh"

SHIM=$ROOT/$BUILD/fault/failalloc.so
MODEL=$MODELS/ch_ppocr_mobile_v2.0_cls_infer.onnx
[ -f "$SHIM" ] || { echo "missing $SHIM: make tests"; exit 1; }
[ -f "$MODEL" ] || { skip faults "no $MODEL (make deps)"; finish; }
# ASan must be the first library loaded and counts allocations itself: the shim is for plain builds
ldd "$PTQ" | grep -q libasan && { skip faults "$PTQ is built with ASan (make SANITIZE=1): run it on the plain build"; finish; }
export OMP_NUM_THREADS=1
POINTS=${FAULT_POINTS:-300}

rm -rf "$TMP/imgs" "$TMP/eval" && mkdir -p "$TMP/imgs" "$TMP/eval"
for f in astronaut.png camera.png chelsea.png brick.png; do cp "$ROOT/build/photos/$f" "$TMP/imgs/"; done
for f in coffee.png cell.png; do [ -f "$ROOT/build/photos/$f" ] && cp "$ROOT/build/photos/$f" "$TMP/eval/"; done
ls "$TMP/eval" | grep -q . || cp "$TMP/imgs/astronaut.png" "$TMP/eval/"
cp "$MODEL" "$TMP/cls.onnx"
# a small model whose weights are Constant nodes (as paddle2onnx writes them): quantize turns
# them into initializers (ptq_graph_constants_to_initializers), every failure point tried
$PY - "$TMP" <<'PYEOF'
import sys, numpy as np, onnx
from onnx import helper, numpy_helper, TensorProto as T
d = sys.argv[1]
r = np.random.RandomState(0)
x = helper.make_tensor_value_info("x", T.FLOAT, [1, 3, 8, 8])
y = helper.make_tensor_value_info("y", T.FLOAT, None)
nodes = [helper.make_node("Constant", [], ["w1"], name="cw1", value=numpy_helper.from_array(r.randn(4, 3, 3, 3).astype(np.float32))),
         helper.make_node("Constant", [], ["b1"], name="cb1", value_floats=[0.1, 0.2, 0.3, 0.4]),
         helper.make_node("Conv", ["x", "w1", "b1"], ["a"], name="c1", pads=[1, 1, 1, 1]),
         helper.make_node("Relu", ["a"], ["r"], name="relu"),
         helper.make_node("Constant", [], ["w2"], name="cw2", value=numpy_helper.from_array(r.randn(4, 4, 3, 3).astype(np.float32))),
         helper.make_node("Conv", ["r", "w2"], ["y"], name="c2", pads=[1, 1, 1, 1])]
m = helper.make_model(helper.make_graph(nodes, "consts", [x], [y]), opset_imports=[helper.make_opsetid("", 13)])
m.ir_version = 8
onnx.save(m, f"{d}/consts.onnx")
np.save(f"{d}/x.npy", r.rand(2, 3, 8, 8).astype(np.float32))
PYEOF
# translate reads a QDQ model: the no-fault quantize of the same images
"$PTQ" quantize "$TMP/cls.onnx" --images "$TMP/imgs" --preset paddleocr-cls --threads 1 -o "$TMP/cls.qdq.onnx" 2>/dev/null

# per command: its arguments (run in its own folder: outputs relative, inputs absolute) and the
# files it writes there
declare -A ARGS OUTS
ARGS[inspect]="inspect $TMP/cls.onnx"
OUTS[inspect]=""
ARGS[quantize]="quantize $TMP/cls.onnx --images $TMP/imgs --preset paddleocr-cls --threads 1 -o q.onnx --cache q.cache --json q.json"
OUTS[quantize]="q.onnx q.cache q.json"
ARGS[compare]="compare $TMP/cls.onnx --images $TMP/imgs --eval-images $TMP/eval --preset paddleocr-cls --threads 1 --batch 4 --methods max,entropy,mse --json c.json"
OUTS[compare]="c.json"
ARGS[translate]="translate $TMP/cls.qdq.onnx -o t"
OUTS[translate]="t_noqdq.onnx t_precision_config.json t_precision_config_calib.cache t_precision_config_layer_arg.txt"
ARGS[constants]="quantize $TMP/consts.onnx --input $TMP/x.npy --threads 1 -o q.onnx --cache q.cache"
OUTS[constants]="q.onnx q.cache"

# fresh DIR CMD: an empty folder with CMD's outputs pre-created ("old NAME")
fresh() {
  local f
  rm -rf "$1" && mkdir -p "$1"
  for f in ${OUTS[$2]}; do echo "old $f" > "$1/$f"; done
}

# run CMD N: one run failing allocation N (0: none) in a fresh $TMP/run; sets RC, COUNT
# (allocations counted), HIT (1 when the failure happened)
run() {
  local cmd=$1 n=$2
  fresh "$TMP/run" "$cmd"
  (cd "$TMP/run" && timeout 120 env LD_PRELOAD="$SHIM" PTQ_FAIL_ALLOC_LIBS=libyaml PTQ_FAIL_ALLOC="$n" PTQ_FAIL_ALLOC_REPORT="$TMP/run/.count" \
     "$PTQ" ${ARGS[$cmd]} > .stdout 2> .stderr)
  RC=$?
  COUNT=0 HIT=0
  [ -f "$TMP/run/.count" ] && read -r COUNT HIT < "$TMP/run/.count"
}

# verdict CMD: empty when the last run behaved (the reference: $TMP/gold_CMD), else why not
verdict() {
  local cmd=$1 f
  if [ "$RC" = 0 ]; then
    cmp -s "$TMP/run/.stdout" "$TMP/gold_$cmd.stdout" || [ "$cmd" != inspect ] || { echo "exit 0, other stdout"; return; }
    for f in ${OUTS[$cmd]}; do
      cmp -s "$TMP/run/$f" "$TMP/gold_$cmd/$f" || { echo "exit 0 with a different $f"; return; }
    done
    return
  fi
  [ "$RC" = 1 ] || { echo "exit status $RC: $(tail -n 3 "$TMP/run/.stderr" | tr '\n' ' ')"; return; }
  ! grep -qE 'free\(\)|corrupted|double free|AddressSanitizer|runtime error' "$TMP/run/.stderr" ||
    { echo "heap damage: $(head -c 400 "$TMP/run/.stderr")"; return; }
  [ "$(grep -c 'out of memory' "$TMP/run/.stderr")" = 1 ] && tail -n 1 "$TMP/run/.stderr" | grep -q 'out of memory' ||
    { echo "not one line reporting out of memory: $(head -c 400 "$TMP/run/.stderr")"; return; }
  ! tail -n 1 "$TMP/run/.stderr" | grep -qE 'out of memory( at [[:alnum:]_/.]+:[0-9]+)?$' ||
    { echo "out of memory without naming what was allocated: $(tail -n 1 "$TMP/run/.stderr")"; return; }
  for f in ${OUTS[$cmd]}; do
    [ "$(cat "$TMP/run/$f" 2>/dev/null)" = "old $f" ] || cmp -s "$TMP/run/$f" "$TMP/gold_$cmd/$f" ||
      { echo "$f is neither the old file nor the complete new one"; return; }
  done
  [ -z "$(ls -A "$TMP/run" | grep -vxE '\.stdout|\.stderr|\.count|q\.onnx|q\.cache|q\.json|c\.json|t_.*')" ] ||
    { echo "left files: $(ls -A "$TMP/run" | tr '\n' ' ')"; return; }
}

for cmd in ${FAULT_COMMANDS:-inspect quantize compare translate constants}; do
  step=1
  if [ "${FAULTS:-}" != all ] && [ "$cmd" != constants ]; then
    run "$cmd" 0
    [ "$COUNT" -gt 0 ] 2>/dev/null && step=$(( (COUNT + POINTS - 1) / POINTS ))
  fi
  # the sweep: the parent's run is the reference, in $TMP/gold_CMD
  fresh "$TMP/gold_$cmd" "$cmd"
  rm -rf "$TMP/pts_$cmd"
  (cd "$TMP/gold_$cmd" && env LD_PRELOAD="$SHIM" PTQ_FAIL_ALLOC_LIBS=libyaml PTQ_FAIL_ALLOC=fork PTQ_FAIL_ALLOC_DIR="$TMP/pts_$cmd" \
     PTQ_FAIL_ALLOC_STEP=$step PTQ_FAIL_ALLOC_REPORT="$TMP/gold_$cmd.count" "$PTQ" ${ARGS[$cmd]} > "$TMP/gold_$cmd.stdout" 2> "$TMP/gold_$cmd.stderr")
  RC=$?
  COUNT=0
  [ -f "$TMP/gold_$cmd.count" ] && read -r COUNT _ < "$TMP/gold_$cmd.count"
  if [ "$RC" != 0 ] || [ "$COUNT" = 0 ]; then
    check "$cmd without a failure" bash -c "echo 'status $RC, $COUNT allocations: $(head -c 300 "$TMP/gold_$cmd.stderr")'; false"
    continue
  fi
  check "$cmd: every $step-th of $COUNT allocation failures, forked, ends cleanly" \
    $PY "$ROOT/tests/fault/check_points.py" "$TMP/pts_$cmd/points.log" "$TMP/gold_$cmd" "$TMP/gold_$cmd.stdout" \
      --outputs "${OUTS[$cmd]}" --named --label "$cmd" --deferred "$TMP/pts_$cmd/deferred" $([ "$cmd" = inspect ] && echo --stdout)
  # the points met while a decoding thread was alive: a run each
  bad=0 tried=0
  for n in $(cat "$TMP/pts_$cmd/deferred" 2>/dev/null); do
    run "$cmd" "$n"
    tried=$((tried + 1))
    why=$(verdict "$cmd")
    if [ -n "$why" ]; then
      bad=$((bad + 1))
      [ "$bad" -le 5 ] && echo "     $cmd, allocation $n of $COUNT (a run of its own): $why"
    fi
  done
  [ "$tried" = 0 ] || check "$cmd: $tried allocation failures while a decoding thread ran, a run each, end cleanly" \
    bash -c "echo '$bad runs misbehaved'; [ $bad = 0 ]"
done
finish

#!/usr/bin/env bash
# Allocation failures: inspect, quantize, compare and translate of PaddleOCR's cls model run with
# one allocation of ptq's own code or libyaml's failing (tests/fault/failalloc.c, LD_PRELOAD; the
# N-th counted malloc/calloc/realloc/posix_memalign/aligned_alloc/strdup/strndup returns NULL;
# protobuf-c allocates through io/onnx.c's allocator, so its allocations count as ptq's). Each run must
# either exit 1 with its last stderr line (the only one about memory) saying "out of memory", each
# file it was to write (pre-created) either as it was or the complete file of the run without a
# failure (a failure after a file was renamed into place), no temporary file left; or exit 0
# with the same bytes as the run without a failure. Never a signal, an abort, a glibc heap
# message or another exit status.
#   FAULTS=all    every failure point (make faults); otherwise FAULT_POINTS (default 60) per
#                 command, spread over the run with a fixed seed (make test)
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
POINTS=${FAULT_POINTS:-60}

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

# per command: its arguments (run in $TMP/run) and the files it writes there
declare -A ARGS OUTS
ARGS[inspect]="inspect ../cls.onnx"
OUTS[inspect]=""
ARGS[quantize]="quantize ../cls.onnx --images ../imgs --preset paddleocr-cls --threads 1 -o q.onnx --cache q.cache --json q.json"
OUTS[quantize]="q.onnx q.cache q.json"
ARGS[compare]="compare ../cls.onnx --images ../imgs --eval-images ../eval --preset paddleocr-cls --threads 1 --methods max,entropy,mse --json c.json"
OUTS[compare]="c.json"
ARGS[translate]="translate ../cls.qdq.onnx -o t"
OUTS[translate]="t_noqdq.onnx t_precision_config.json t_precision_config_calib.cache t_precision_config_layer_arg.txt"
ARGS[constants]="quantize ../consts.onnx --input ../x.npy --threads 1 -o q.onnx --cache q.cache"
OUTS[constants]="q.onnx q.cache"

# run CMD N: one run failing allocation N (0: none) in a fresh $TMP/run with pre-created outputs;
# sets RC, ERR, COUNT (allocations counted), HIT (1 when the failure happened)
run() {
  local cmd=$1 n=$2 f
  rm -rf "$TMP/run" && mkdir "$TMP/run"
  for f in ${OUTS[$cmd]}; do echo "old $f" > "$TMP/run/$f"; done
  (cd "$TMP/run" && timeout 60 env LD_PRELOAD="$SHIM" PTQ_FAIL_ALLOC_LIBS=libyaml PTQ_FAIL_ALLOC="$n" PTQ_FAIL_ALLOC_REPORT="$TMP/run/.count" \
     "$PTQ" ${ARGS[$cmd]} > .stdout 2> .stderr)
  RC=$?
  ERR=$(grep -v ': warning: ' "$TMP/run/.stderr")
  COUNT=0 HIT=0
  [ -f "$TMP/run/.count" ] && read -r COUNT HIT < "$TMP/run/.count" 
}

# verdict CMD N: empty when run N behaved, else why not
verdict() {
  local cmd=$1 n=$2 f
  if [ "$RC" = 0 ]; then
    cmp -s "$TMP/run/.stdout" "$TMP/gold_$cmd/.stdout" || [ "$cmd" != inspect ] || { echo "exit 0, other stdout"; return; }
    for f in ${OUTS[$cmd]}; do
      cmp -s "$TMP/run/$f" "$TMP/gold_$cmd/$f" || { echo "exit 0 with a different $f"; return; }
    done
    return
  fi
  [ "$RC" = 1 ] || { echo "exit status $RC: $(tail -n 3 "$TMP/run/.stderr" | tr '\n' ' ')"; return; }
  # progress lines ("ptq compare: calibration pass 0.1 s") may come first; the error is the last
  # line and the only one about memory
  ! grep -qE 'free\(\)|corrupted|double free|AddressSanitizer|runtime error' "$TMP/run/.stderr" ||
    { echo "heap damage: $(head -c 400 "$TMP/run/.stderr")"; return; }
  [ "$(grep -c 'out of memory' "$TMP/run/.stderr")" = 1 ] && tail -n 1 "$TMP/run/.stderr" | grep -q 'out of memory' ||
    { echo "not one line reporting out of memory: $(head -c 400 "$TMP/run/.stderr")"; return; }
  # each file is as it was or, when the failure came after it was renamed into place, the
  # complete file of the run without a failure: never a third content
  for f in ${OUTS[$cmd]}; do
    [ "$(head -c 100 "$TMP/run/$f" 2>/dev/null | tr -d '\0')" = "old $f" ] || cmp -s "$TMP/run/$f" "$TMP/gold_$cmd/$f" ||
      { echo "$f is neither the old file nor the complete new one"; return; }
  done
  [ -z "$(ls -A "$TMP/run" | grep -vxE '\.stdout|\.stderr|\.count|q\.onnx|q\.cache|q\.json|c\.json|t_.*')" ] ||
    { echo "left files: $(ls -A "$TMP/run" | tr '\n' ' ')"; return; }
}

for cmd in ${FAULT_COMMANDS:-inspect quantize compare translate constants}; do
  run "$cmd" 0
  if [ "$RC" != 0 ] || [ "$COUNT" = 0 ]; then
    check "$cmd without a failure" bash -c "echo 'status $RC, $COUNT allocations: $(head -c 300 "$TMP/run/.stderr")'; false"
    continue
  fi
  rm -rf "$TMP/gold_$cmd" && mv "$TMP/run" "$TMP/gold_$cmd"
  total=$COUNT
  if [ "${FAULTS:-}" = all ] || [ "$cmd" = constants ]; then points=$(seq 1 "$total")
  else points=$($PY -c "import random; r = random.Random(33); t = $total; k = min($POINTS, t)
print(' '.join(str(p) for p in sorted(set([1, 2, t] + r.sample(range(1, t + 1), k - 3)))))")
  fi
  bad=0 hits=0 clean=0 tried=0 first=""
  for n in $points; do
    run "$cmd" "$n"
    tried=$((tried + 1)); hits=$((hits + HIT))
    why=$(verdict "$cmd" "$n")
    if [ -n "$why" ]; then
      bad=$((bad + 1))
      [ "$bad" -le 5 ] && echo "     $cmd, allocation $n of $total: $why"
    elif [ "$RC" = 1 ]; then clean=$((clean + 1))
    fi
  done
  check "$cmd: $tried of $total allocation failures ($hits hit, $clean refused as out of memory) end cleanly" \
    bash -c "echo '$bad runs misbehaved'; [ $bad = 0 ] && [ $hits -gt 0 ]"
done
finish

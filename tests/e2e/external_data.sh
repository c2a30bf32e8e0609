#!/usr/bin/env bash
# External data stays inside the model's folder and is read from regular files only: a symlink
# to /etc/passwd, a symlink to /etc used as a folder, a ../ escape, a FIFO and a character
# device are each refused by inspect, convert, run and quantize in one line naming the model,
# the location and the reason, within `timeout 5` (a FIFO must not block the open); a symlink
# that stays inside the folder and a plain file are read.
. "$(dirname "$0")/lib.sh"

$PY - "$TMP" <<'PYEOF'
import sys, os, numpy as np, onnx
from onnx import helper, numpy_helper, TensorProto as T
d = sys.argv[1]
w = np.arange(1, 5, dtype=np.float32).reshape(1, 4)
def model(location):
    x = helper.make_tensor_value_info("x", T.FLOAT, [1, 4])
    y = helper.make_tensor_value_info("y", T.FLOAT, [1, 4])
    t = numpy_helper.from_array(w, "w")
    t.ClearField("raw_data")
    t.data_location = T.EXTERNAL
    for k, v in (("location", location), ("offset", "0"), ("length", "16")):
        e = t.external_data.add(); e.key = k; e.value = v
    g = helper.make_graph([helper.make_node("Add", ["x", "w"], ["y"], name="add")], "ext", [x], [y], [t])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]); m.ir_version = 8
    return m
for name, loc in (("plain", "w.bin"), ("inside", "link.bin"), ("passwd", "passwd.bin"), ("dirlink", "etcdir/passwd"),
                  ("escape", "../w.bin"), ("fifo", "fifo.bin"), ("device", "zero.bin")):
    os.makedirs(f"{d}/{name}", exist_ok=True)
    onnx.save(model(loc), f"{d}/{name}/m.onnx")
    open(f"{d}/{name}/w.bin", "wb").write(w.tobytes())
np.save(f"{d}/x.npy", np.zeros((1, 4), np.float32))
PYEOF
ln -sfn w.bin "$TMP/inside/link.bin"
ln -sfn /etc/passwd "$TMP/passwd/passwd.bin"
ln -sfn /etc "$TMP/dirlink/etcdir"
rm -f "$TMP/fifo/fifo.bin" "$TMP/device/zero.bin"
mkfifo "$TMP/fifo/fifo.bin"
DEVICE=1
mknod "$TMP/device/zero.bin" c 1 5 2>/dev/null || DEVICE=0

# every command that loads a model, each given what it needs besides the model
commands() { # model dir
  echo "inspect $1/m.onnx"
  echo "convert $1/m.onnx -o $1/out.onnx"
  echo "run $1/m.onnx --input $TMP/x.npy"
  echo "quantize $1/m.onnx --input $TMP/x.npy -o $1/out.qdq.onnx"
}

# refused_fast case reason: each command fails in one line naming the model, the location and
# the reason, in under 5 s
refused_fast() {
  local c=$1 reason=$2 loc=$3 cmd
  while read -r cmd; do
    check "$c: ptq ${cmd%% *} refuses it ($reason)" bash -c '
      err=$(timeout 5 "$0" $1 2>&1 >/dev/null); rc=$?
      echo "status $rc: $err"
      [ $rc = 1 ] && [ "$(printf "%s\n" "$err" | grep -c .)" = 1 ] && printf "%s" "$err" | grep -qF "$2/m.onnx" &&
        printf "%s" "$err" | grep -qF "$3" && printf "%s" "$err" | grep -qE "$4"' "$PTQ" "$cmd" "$TMP/$c" "'$loc'" "$reason"
  done < <(commands "$TMP/$c")
}

refused_fast passwd "resolves to /etc/passwd, outside the model's folder" passwd.bin
refused_fast dirlink "resolves to /etc/passwd, outside the model's folder" etcdir/passwd
refused_fast escape "leaves the model's folder" ../w.bin
refused_fast fifo "is a FIFO, not a regular file" fifo.bin
if [ $DEVICE = 1 ]; then refused_fast device "is a character device, not a regular file" zero.bin
else skip "device" "mknod not permitted here"; fi

for c in plain inside; do
  check "$c: run reads the external weight (y = x + w)" bash -c '
    timeout 5 "$0" run "$1/m.onnx" --input "$2/x.npy" --output "$1/y.npy" && /usr/bin/python3 -c "
import numpy as np, sys; y = np.load(sys.argv[1]); print(y); assert (y == np.arange(1, 5, dtype=np.float32).reshape(1, 4)).all()" "$1/y.npy"' \
    "$PTQ" "$TMP/$c" "$TMP"
done
finish

#!/usr/bin/env bash
# ops_index.sh: the indexing, geometry, sequence and signal ops against ONNX Runtime at the
# shapes real models give them (tests/oracle/ops_index_models.py: torchvision Faster/Mask
# R-CNN RoiAlign, Swin/MaxViT einsums, every GridSample mode, a CRNN's bidirectional
# LSTM/GRU with sequence_lens, RetinaNet's TopK, gathers/scatters, DFT/STFT, CenterCropPad,
# Col2Im, AffineGrid). Per case:
#   ptq run (--threads 1) and ONNX Runtime (tests/oracle/ort.js) on the same .npy inputs;
#   every output matches: floats within the case's atol + rtol * |ort|, integers exactly;
#   ptq run --threads 2 and 3 give the same bytes as --threads 1.
# Then models exported by torch.onnx (tests/oracle/torch_exports.py: torchvision's roi_align
# aligned False / True, a CRNN with bidirectional LSTM and GRU, a small SwinTransformer,
# grid_sample) against torch's own outputs; a model with an op ptq lacks is skipped, named.
. "$(dirname "$0")/lib.sh"
export OMP_WAIT_POLICY=passive
if [ ! -d "$ROOT/build/oracle/node_modules/onnxruntime-node" ] || ! command -v node > /dev/null; then
  skip "ops against ONNX Runtime" "onnxruntime-node is not installed (make deps)"
  finish
fi
$PY "$ROOT/tests/oracle/ops_index_models.py" "$TMP/models" > /dev/null || { echo "FAIL model generation"; exit 1; }

cat > "$TMP/match.py" <<'PYEOF'
# match PTQ_DIR ORT_DIR ATOL RTOL: every ORT output has a ptq twin that matches.
import os, sys, numpy as np
a_dir, b_dir, atol, rtol = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
worst = 0.0
for name in sorted(os.listdir(b_dir)):
    b = np.load(os.path.join(b_dir, name))
    p = os.path.join(a_dir, name)
    if not os.path.exists(p):
        sys.exit(f"{name}: ptq wrote no such output")
    a = np.load(p)
    if a.shape != b.shape or a.dtype != b.dtype:
        sys.exit(f"{name}: ptq {a.dtype}{a.shape}, ORT {b.dtype}{b.shape}")
    if a.dtype.kind in "iub":
        bad = np.flatnonzero(a.ravel() != b.ravel())
        if bad.size:
            i = bad[0]
            sys.exit(f"{name}: {bad.size} of {a.size} differ, first at {i}: {a.ravel()[i]} vs ORT {b.ravel()[i]}")
        continue
    a64, b64 = a.astype(np.float64).ravel(), b.astype(np.float64).ravel()
    err = np.abs(a64 - b64)
    bad = np.flatnonzero(~(err <= atol + rtol * np.abs(b64)) & ~(np.isnan(a64) & np.isnan(b64)))
    if bad.size:
        i = bad[0]
        sys.exit(f"{name}: {bad.size} of {a.size} outside atol {atol} rtol {rtol}, first at {i}: {a64[i]:.9g} vs ORT {b64[i]:.9g}")
    worst = max(worst, float(err.max()) if err.size else 0.0)
print(f"max-abs {worst:.3g}")
PYEOF

while read -r name atol rtol; do
  [ -n "$name" ] || continue
  model=$TMP/models/$name.onnx
  ins=()
  for f in "$TMP/models/$name"/*.npy; do ins+=(--input "$(basename "$f" .npy)=$f"); done
  rm -rf "$TMP/$name"
  mkdir -p "$TMP/$name/ort" "$TMP/$name/t1" "$TMP/$name/t2" "$TMP/$name/t3"
  check "$name: ptq = ONNX Runtime" bash -c '
    node "$1/tests/oracle/ort.js" "$2" "${@:6}" --out-dir "$3/ort" --threads 1 > /dev/null &&
    "$4" run "$2" "${@:6}" --threads 1 --output-dir "$3/t1" > /dev/null &&
    '"$PY"' "'"$TMP"'/match.py" "$3/t1" "$3/ort" '"$atol $rtol"'' _ "$ROOT" "$model" "$TMP/$name" "$PTQ" x "${ins[@]}"
  check "$name: same bytes at 1, 2, 3 threads" bash -c '
    "$1" run "$2" "${@:4}" --threads 2 --output-dir "$3/t2" > /dev/null &&
    "$1" run "$2" "${@:4}" --threads 3 --output-dir "$3/t3" > /dev/null &&
    for f in "$3"/t1/*.npy; do cmp "$f" "$3/t2/${f##*/}" && cmp "$f" "$3/t3/${f##*/}" || exit 1; done' \
    _ "$PTQ" "$model" "$TMP/$name" "${ins[@]}"
done < "$TMP/models/cases.txt"

if ! $PY -c "import torch, torchvision" 2> /dev/null; then
  skip "torch exports" "torch / torchvision are not installed"
  finish
fi
$PY "$ROOT/tests/oracle/torch_exports.py" "$TMP/tx" > /dev/null 2>&1 || { echo "FAIL torch exports"; exit 1; }
while read -r name atol rtol; do
  [ -n "$name" ] || continue
  ins=()
  for f in "$TMP/tx/$name"/in_*.npy; do ins+=(--input "$(basename "$f" .npy)=$f"); done
  rm -rf "$TMP/tx/$name/ptq" "$TMP/tx/$name/ref"
  mkdir -p "$TMP/tx/$name/ptq" "$TMP/tx/$name/ref"
  cp "$TMP/tx/$name"/ref_*.npy "$TMP/tx/$name/ref/"
  if ! err=$("$PTQ" run "$TMP/tx/$name.onnx" "${ins[@]}" --threads 2 --output-dir "$TMP/tx/$name/ptq" 2>&1 > /dev/null); then
    if echo "$err" | grep -q "unsupported ops"; then skip "$name (torch export): ptq = torch" "${err##*: }"; continue; fi
  fi
  check "$name (torch export): ptq = torch" $PY "$TMP/match.py" "$TMP/tx/$name/ptq" "$TMP/tx/$name/ref" "$atol" "$rtol"
done < "$TMP/tx/exports.txt"
finish

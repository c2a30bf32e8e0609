#!/usr/bin/env bash
# bench/variants.sh: models as users ship them (scripts/variants.py: float16 weights, float16 end
# to end, uint8 NHWC input with the normalisation in the graph, one gray channel, dynamic H and W,
# opset 11, Ultralytics metadata) derived from zoo models, each quantized as a user would type it,
# one table row per model and variant.
#
#   bench/variants.sh [--models a,b] [--variants v1,v2] [--rows m:v,m:v] [--out DIR] [--limit N] [--eval-limit N]
#                     [--with-size] [--no-verify]
#   (default: every variant of resnet18, mobilenet_v3_large, lraspp_mobilenet_v3_large, yolov8n_like;
#    --rows: only these model:variant pairs; --with-size: the preset's --size given to every row, to
#    tell a variant's failures from reading the size off the model)
# Each model also gets a row 'original': the float32 export quantized with its full preset (--size
# included), the baseline of the cosine.
#
# Per model (exported at opset 13 by scripts/zoo.py where missing) and variant:
#   derive     scripts/variants.py --verify (onnx.checker passes, ONNX Runtime computes what the
#              original computes; kept while newer than the model and the script; --no-verify: no
#              ONNX Runtime check)
#   quantize   ptq quantize VARIANT --images DIR --preset P [the preset's overrides] -o OUT: P and the
#              overrides from the model's .json, less what the model says itself: no --size (the
#              input's H and W fix it) except for dynamic-hw, whose H and W are symbolic
#   weights    n/N: of the N Conv/Gemm/MatMul nodes with a constant weight, how many read an int8
#              initializer through a DequantizeLinear (a pass needs n == N)
#   checker    onnx.checker.check_model(full_check=True) on the QDQ model
#   interface  the QDQ model's graph inputs and outputs: the variant's names, types and shapes
#   cosine     ONNX Runtime on the QDQ model against ONNX Runtime on the variant (FP32 or float16),
#              the lowest over the evaluation photos as ptq preprocess --dump makes them for the
#              original (converted for the variant: float16, the channel mean for gray; for
#              uint8-nhwc the same geometry dumped NHWC with scale 1, mean 0, std 1: the pixels);
#              a pass needs >= 0.99 (0.97 for the segmenters), or where ptq's QDQ of the original
#              itself stays below that (the untrained mobilenet_v3 models), >= the original's
#              cosine - 0.01: the variant quantizes as well as the model it came from
# Logs and a result file (key<TAB>value) per row under OUT/MODEL/VARIANT/ (tests/e2e/variants.sh reads them).
set -u
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${BUILD:-build}
PTQ=${PTQ:-$ROOT/$BUILD/ptq}
PY=/usr/bin/python3
export OMP_WAIT_POLICY=passive
MODELS="resnet18,mobilenet_v3_large,lraspp_mobilenet_v3_large,yolov8n_like"
VARIANTS="fp16-weights,fp16,uint8-nhwc,gray,dynamic-hw,opset11,ultralytics-meta"
ROWS=""; OUT=$ROOT/$BUILD/tmp/bench-variants; LIMIT=8; EVAL_LIMIT=4; WITH_SIZE=0; VERIFY=(--verify)
while [ $# -gt 0 ]; do
  case $1 in
    --models) MODELS=$2; shift 2 ;;
    --variants) VARIANTS=$2; shift 2 ;;
    --rows) ROWS=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --limit) LIMIT=$2; shift 2 ;;
    --eval-limit) EVAL_LIMIT=$2; shift 2 ;;
    --with-size) WITH_SIZE=1; shift ;;
    --no-verify) VERIFY=(); shift ;;
    *) echo "bench/variants.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
[ -x "$PTQ" ] || { echo "bench/variants.sh: $PTQ missing (make ptq)" >&2; exit 2; }
if [ -z "$ROWS" ]; then
  for m in ${MODELS//,/ }; do for v in ${VARIANTS//,/ }; do ROWS="$ROWS${ROWS:+,}$m:$v"; done; done
fi
NAMES=$(echo "$ROWS" | tr ',' '\n' | cut -d: -f1 | awk '!seen[$0]++')
mkdir -p "$OUT"
ls "$ROOT"/build/photos/* | grep -v truncated | sort > "$OUT/all.list"
awk 'NR % 2 == 1' "$OUT/all.list" > "$OUT/calib.list"
awk 'NR % 2 == 0' "$OUT/all.list" > "$OUT/eval.list"

# export what is missing (up-to-date models are skipped)
$PY "$ROOT/scripts/zoo.py" --models "$(echo $NAMES | tr ' ' ,)" --opset 13 > "$OUT/export.log" 2>&1 ||
  { echo "bench/variants.sh: scripts/zoo.py failed:" >&2; tail -n 5 "$OUT/export.log" >&2; }

# the last line of a log that is not a warning, without the command's prefix
why() {
  grep -v ': warning: ' "$1" | grep -v '^\s*$' | tail -n 1 | sed -E 's/^(ptq( [a-z]+)?|variants\.py|Traceback.*): //; s|^[^ :]*\.onnx: ||' | cut -c1-"${2:-200}"
}

field() { awk -F'\t' -v k="$2" '$1 == k { $1 = ""; sub(/^ /, ""); print; exit }' "$1" 2>/dev/null; }

prepare() { # NAME: the model's preset (P_ARGS, THRESH) and the evaluation dumps (float, uint8 pixels)
  local name=$1 D=$OUT/$1
  mkdir -p "$D"
  eval "$($PY - "$ROOT/build/zoo/$name.op13.json" <<'EOF'
import json, shlex, sys
m = json.load(open(sys.argv[1]))
p = m["preset"]
print("P_FULL=(%s)" % " ".join(shlex.quote(a) for a in p))
# what the model says itself: the input's H and W (--size)
q = [a for i, a in enumerate(p) if a != "--size" and (i == 0 or p[i - 1] != "--size")]
print("P_ARGS=(%s)" % " ".join(shlex.quote(a) for a in q))
print("THRESH=%s" % ("0.97" if m["task"] == "seg" else "0.99"))
EOF
)"
  "$PTQ" preprocess --images "$OUT/eval.list" "${P_FULL[@]}" --limit "$EVAL_LIMIT" --dump "$D/eval.npy" > "$D/dump.log" 2>&1
  "$PTQ" preprocess --images "$OUT/eval.list" "${P_FULL[@]}" --scale 1 --mean 0,0,0 --std 1,1,1 --layout NHWC \
    --limit "$EVAL_LIMIT" --dump "$D/eval_u8.npy" >> "$D/dump.log" 2>&1
}

row() { # NAME VARIANT: writes $OUT/NAME/VARIANT/result
  local name=$1 v=$2 D=$OUT/$1/$2 M=$ROOT/build/zoo/$1.op13.onnx
  local V=$OUT/$1/$1.$2.onnx
  [ "$v" = original ] && V=$M
  rm -rf "$D"; mkdir -p "$D"
  res() { printf '%s\t%s\n' "$1" "$2" >> "$D/result"; }
  res name "$name"; res variant "$v"
  if [ ! -f "$M" ]; then res derive "FAIL no $(basename "$M") (scripts/zoo.py)"; return; fi
  if [ "$v" != original ] && { [ ! -f "$V" ] || [ "$M" -nt "$V" ] || [ "$ROOT/scripts/variants.py" -nt "$V" ]; }; then
    if ! $PY "$ROOT/scripts/variants.py" "$M" "$V" --variant "$v" "${VERIFY[@]}" > "$D/derive.log" 2>&1; then
      rm -f "$V"; res derive "FAIL $(why "$D/derive.log")"; return
    fi
  fi
  res derive ok
  local extra=()
  case $v in dynamic-hw|original) extra=("${P_FULL[@]}") ;; *) extra=("${P_ARGS[@]}") ;; esac
  [ $WITH_SIZE = 0 ] || extra=("${P_FULL[@]}")
  echo "ptq quantize $V --images $OUT/calib.list ${extra[*]} --limit $LIMIT -o $D/q.onnx" > "$D/command"
  if "$PTQ" quantize "$V" --images "$OUT/calib.list" "${extra[@]}" --limit "$LIMIT" --threads 2 -o "$D/q.onnx" \
      > "$D/quantize.log" 2>&1 && [ -f "$D/q.onnx" ]; then
    res quantize ok
  else
    res quantize "FAIL $(why "$D/quantize.log")"; return
  fi
  local u8=()
  [ "$v" = uint8-nhwc ] && u8=(--u8 "$OUT/$name/eval_u8.npy")
  if ! $PY "$ROOT/tests/oracle/variant_check.py" input "$v" "$OUT/$name/eval.npy" "$D/io" "${u8[@]}" > "$D/input.log" 2>&1; then
    res cosine "FAIL inputs: $(why "$D/input.log")"
  fi
  $PY "$ROOT/tests/oracle/variant_check.py" check "$V" "$D/q.onnx" "$D/io" > "$D/check.out" 2> "$D/check.log" ||
    res error "$(why "$D/check.log")"
  cat "$D/check.out" >> "$D/result"
  local base; base=$(field "$OUT/$name/original/result" cosine)
  if [ "$v" != original ] && [[ $base =~ ^[0-9.]+$ ]]; then
    res threshold "$(awk -v t="$THRESH" -v b="$base" 'BEGIN { print (b < t) ? b - 0.01 : t }')"
  else
    res threshold "$THRESH"
  fi
}

verdict() { # RESULT: the row's checks, pass or not
  local R=$1 w c
  w=$(field "$R" weights); c=$(field "$R" cosine)
  [ "$(field "$R" quantize)" = ok ] && [ -n "$w" ] && [ "${w%/*}" = "${w#*/}" ] && [ "${w#*/}" != 0 ] &&
    [ "$(field "$R" checker)" = ok ] && [ "$(field "$R" interface)" = ok ] &&
    awk -v c="$c" -v t="$(field "$R" threshold)" 'BEGIN { exit !(c ~ /^[0-9.]+$/ && c + 0 >= t + 0) }'
}

printf '%-26s %-16s %-8s %-8s %-8s %-9s %-8s %-6s %s\n' model variant quantize weights checker interface cosine bar ""
for n in $NAMES; do
  prepare "$n" 2> "$OUT/$n.stderr"
  for r in "$n:original" ${ROWS//,/ }; do
    [ "${r%%:*}" = "$n" ] || continue
    v=${r#*:}; R=$OUT/$n/$v/result
    row "$n" "$v" 2>> "$OUT/$n.stderr"
    q=$(field "$R" quantize); [ -n "$q" ] || q=$(field "$R" derive); [ "$q" = ok ] || q=FAIL
    verdict "$R" && ok=pass || ok=FAIL
    [ "$v" = original ] && ok="(baseline)"
    printf '%-26s %-16s %-8s %-8s %-8s %-9s %-8s %-6s %s\n' "$n" "$v" "${q:0:8}" "$(field "$R" weights)" \
      "$([ "$(field "$R" checker)" = ok ] && echo ok || ([ -n "$(field "$R" checker)" ] && echo FAIL || echo -))" \
      "$([ "$(field "$R" interface)" = ok ] && echo ok || ([ -n "$(field "$R" interface)" ] && echo changed || echo -))" \
      "$(field "$R" cosine | cut -c1-8)" "$(field "$R" threshold | cut -c1-6)" "$ok"
  done
done
# the failures in full: ptq's words, the check that differs
echo
echo "failures (model variant: step: what):"
for r in ${ROWS//,/ }; do
  R=$OUT/${r%%:*}/${r#*:}/result
  verdict "$R" && continue
  awk -F'\t' -v m="${r%%:*} ${r#*:}" '
    ($1 == "derive" || $1 == "quantize" || $1 == "checker" || $1 == "interface") && $2 != "ok" { print "  " m ": " $1 ": " $2 }
    $1 == "weights" { split($2, a, "/"); if (a[1] != a[2] || a[2] == 0) print "  " m ": weights quantized " $2 }
    $1 == "cosine" { c = $2 } $1 == "threshold" { if (!(c ~ /^[0-9.]+$/ && c + 0 >= $2 + 0)) print "  " m ": cosine " c " (needs >= " $2 ")" }
  ' "$R"
done

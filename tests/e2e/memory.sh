#!/usr/bin/env bash
# The memory budget (--memory MB, default 512; engine/runner.c eng_fit_batch_memory): where
# neither the user nor the model gives the batch, calibration takes the largest batch up to 8
# whose activations, dataset copies and statistics fit it, measured from the plan.
# - PP-OCRv4 det at 640x640 (about 185 MB of activations per image in the calibration plan):
#   the default budget gives batches of 2 and a peak RSS under 512 MB, which the summary
#   prints against the budget; --memory 64 gives batches of 1 and says what one image needs;
#   --memory 4096 gives batches of 8; the cls model (small activations) batches of 8 by default;
# - the budget changes no byte: the six methods' caches and JSON of --method all at --memory 64,
#   the default and --memory 4096 are identical, and equal --batch 3's;
# - the peak RSS is flat in the number of images: 12 photos within 10 % of 4;
# - a budget under 64 MB is refused.
. "$(dirname "$0")/lib.sh"
DET=$MODELS/ch_PP-OCRv4_det_infer.onnx
CLS=$MODELS/ch_ppocr_mobile_v2.0_cls_infer.onnx
[ -f "$DET" ] && [ -f "$CLS" ] || { echo "FAIL no $DET or $CLS (make deps)"; echo "0 passed, 1 failed"; exit 1; }
ls "$ROOT"/build/photos/* | grep -v truncated | LC_ALL=C sort > "$TMP/all.txt"
head -n 4 "$TMP/all.txt" > "$TMP/4.txt"
head -n 12 "$TMP/all.txt" > "$TMP/12.txt"
rm -f "$TMP"/*.cache "$TMP"/*.json "$TMP"/*.err

cal() { # tag list model preset [options]: calibrate --method all -> $TMP/tag.{cache,json,err}
  local tag=$1 list=$2 model=$3 preset=$4; shift 4
  "$PTQ" calibrate "$model" --images "$list" --preset "$preset" --method all --threads 2 \
    --cache "$TMP/$tag.cache" --json "$TMP/$tag.json" "$@" 2>"$TMP/$tag.err"
}
summary() { grep '^ptq calibrate:' "$TMP/$1.err"; }
rss() { summary "$1" | sed -n 's/.*peak RSS \([0-9]*\) MB.*/\1/p'; }

check "det, default budget: batches of 2, peak RSS under the 512 MB budget, printed against it" bash -c "
  $(declare -f cal summary rss); TMP='$TMP' PTQ='$PTQ'
  cal def '$TMP/4.txt' '$DET' paddleocr-det && summary def | grep -q 'batches of 2,' &&
  summary def | grep -q 'of a 512 MB budget\$' && [ \$(rss def) -lt 512 ] && summary def"
check "det, --memory 64: batches of 1; the summary names what one image needs" bash -c "
  $(declare -f cal summary); TMP='$TMP' PTQ='$PTQ'
  cal m64 '$TMP/4.txt' '$DET' paddleocr-det --memory 64 && summary m64 | grep -q 'batches of 1,' &&
  summary m64 | grep -qE 'of a 64 MB budget \(one image needs up to [0-9]+ MB: raise --memory' && summary m64"
check "det, --memory 4096: batches of 8 (one batch of the 4 images)" bash -c "
  $(declare -f cal summary); TMP='$TMP' PTQ='$PTQ'
  cal m4096 '$TMP/4.txt' '$DET' paddleocr-det --memory 4096 && summary m4096 | grep -q ' 1 batches of 8,' && summary m4096"
check "cls, default budget: batches of 8" bash -c "
  $(declare -f cal summary); TMP='$TMP' PTQ='$PTQ'
  cal cls '$TMP/12.txt' '$CLS' paddleocr-cls && summary cls | grep -q 'batches of 8,' && summary cls"
check "det: the caches and JSON at --memory 64, the default, --memory 4096 and --batch 3 are the same bytes" bash -c "
  $(declare -f cal); TMP='$TMP' PTQ='$PTQ'
  cal b3 '$TMP/4.txt' '$DET' paddleocr-det --batch 3 &&
  n=0; for f in '$TMP'/def.*.cache '$TMP'/def.*.json; do
    for t in m64 m4096 b3; do cmp \"\$f\" \"\${f/def./\$t.}\" || exit 1; done; n=\$((n + 1)); done; [ \$n = 12 ] && echo \"\$n files, each the same bytes at the four batches\""
check "det, default budget: peak RSS of 12 photos within 10 % of 4 photos'" bash -c "
  $(declare -f cal summary rss); TMP='$TMP' PTQ='$PTQ'
  cal n12 '$TMP/12.txt' '$DET' paddleocr-det && a=\$(rss def) b=\$(rss n12) &&
  echo \"4 photos \$a MB, 12 photos \$b MB\" && [ \$((b * 10)) -le \$((a * 11)) ] && [ \$((b * 10)) -ge \$((a * 9)) ]"
check "--memory 10 is refused, naming the option" refused "bad --memory '10'" "$PTQ" calibrate "$DET" --images "$TMP/4.txt" --cache "$TMP/x.cache" --memory 10
finish

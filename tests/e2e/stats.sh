#!/usr/bin/env bash
# Statistics files, `ptq stats merge`, --stats, --from-stats and --from-cache on the PaddleOCR
# cls model (fast) with real photos:
# - two disjoint shards (list files) calibrated with --stats and merged give, through
#   `calibrate --from-stats --method all`, caches and JSON byte-identical to one pass over all
#   the photos, and every tensor's statistics identical bit for bit to the one pass's.
#   Order: the image list is sorted by path (preprocess/dataset.c), so the one pass over
#   all.txt reads a.txt (16 images: two full batches of 8) then b.txt, the same batches.
#   Interleaved shards (odd/even lines: other neighbours and positions in each batch of 8) and
#   merging in the other order are checked too: neither matters (R is the smallest power of
#   two above amax, so bins never depend on the history). Nor does the batch size: shards run
#   with --batch 3 and --batch 5 merge to the one pass at --batch 8 (the executor's MatMul
#   tiles do not depend on the batch; runtime/ops/gemm.c), on cls and on rec, whose
#   attention MatMuls fold the batch into M.
# - corrupt, truncated, other-model, other-preprocessing and repeated-shard files refused
#   with one line naming the files; --from-stats on another model refused;
# - quantize --from-stats and --from-cache write QDQ models byte-identical to quantize from
#   the images (from a cache: scales identical, amax = scale*127 may differ in its last bit,
#   which only shows in the JSON); tensors missing from a cache are named and stay float.
# A small python reader of the format (stats.h) compares the per-tensor records.
. "$(dirname "$0")/lib.sh"
M=$MODELS/ch_ppocr_mobile_v2.0_cls_infer.onnx
REC=$MODELS/ch_PP-OCRv4_rec_infer.onnx
PHOTOS=$ROOT/build/photos
METHODS="max percentile-99.9 percentile-99.99 percentile-99.999 entropy mse"
ls -d "$PHOTOS"/* | LC_ALL=C sort > "$TMP/all.txt"
head -n 16 "$TMP/all.txt" > "$TMP/a.txt"        # 16 images: two full batches of 8
tail -n +17 "$TMP/all.txt" > "$TMP/b.txt"       # the rest (one of them does not decode)
awk 'NR % 2 == 1' "$TMP/all.txt" > "$TMP/odd.txt"
awk 'NR % 2 == 0' "$TMP/all.txt" > "$TMP/even.txt"
rm -f "$TMP"/*.ptqstats "$TMP"/*.cache "$TMP"/*.json "$TMP"/*.onnx

stats_same() { $PY "$ROOT/tests/oracle/ptqstats.py" same "$@"; }
cal() { # out-name, then options
  local o=$1; shift
  "$PTQ" calibrate "$M" --method all --cache "$TMP/$o.cache" --json "$TMP/$o.json" "$@"
}
same_caches() { # a b: every method's cache and JSON identical
  for m in $METHODS; do
    cmp "$TMP/$1.$m.cache" "$TMP/$2.$m.cache" && cmp "$TMP/$1.$m.json" "$TMP/$2.$m.json" || return 1
  done
  echo "6 caches and 6 JSON files identical ($(wc -l < "$TMP/$1.entropy.cache") lines each)"
}

shards() {
  for s in all a b odd even; do
    cal "$s" --images "$TMP/$s.txt" --preset paddleocr-cls --stats "$TMP/$s.ptqstats" 2>/dev/null || return 1
  done
  $PY "$ROOT/tests/oracle/ptqstats.py" header "$TMP/all.ptqstats" | grep -q '"images": 33' && echo "5 passes, 33 images in the one pass"
}
check "calibrate --stats: one pass over all photos, shards a (16) + b (18, one broken), odd/even lines" shards

merged_equals_one_pass() { # name shard shard
  local n=$1; shift
  "$PTQ" stats merge "$@" -o "$TMP/$n.ptqstats" 2>/dev/null &&
  cal "$n" --from-stats "$TMP/$n.ptqstats" 2>/dev/null && same_caches "$n" all && stats_same "$TMP/$n.ptqstats" "$TMP/all.ptqstats"
}
check "merge a+b, calibrate --from-stats --method all: caches and JSON byte-identical to one pass; statistics bit for bit" \
  merged_equals_one_pass ab "$TMP/a.ptqstats" "$TMP/b.ptqstats"
check "merge in the other order (b+a): the same" merged_equals_one_pass ba "$TMP/b.ptqstats" "$TMP/a.ptqstats"
check "order and grouping do not matter: interleaved shards (odd/even lines) merged equal the sorted one pass" \
  merged_equals_one_pass oe "$TMP/odd.ptqstats" "$TMP/even.ptqstats"
other_batch_sizes() { # shards at --batch 3 and 5 against the one pass at 8, cls then rec
  cal a3 --images "$TMP/a.txt" --preset paddleocr-cls --batch 3 --stats "$TMP/a3.ptqstats" 2>/dev/null &&
  cal b5 --images "$TMP/b.txt" --preset paddleocr-cls --batch 5 --stats "$TMP/b5.ptqstats" 2>/dev/null &&
  merged_equals_one_pass ab35 "$TMP/a3.ptqstats" "$TMP/b5.ptqstats" || return 1
  head -n 6 "$TMP/a.txt" > "$TMP/r1.txt"; sed -n 7,12p "$TMP/a.txt" > "$TMP/r2.txt"; head -n 12 "$TMP/a.txt" > "$TMP/r12.txt"
  local b
  for b in 8:r12 3:r1 5:r2; do
    "$PTQ" calibrate "$REC" --images "$TMP/${b#*:}.txt" --preset paddleocr-rec --batch "${b%%:*}" --method max \
      --cache "$TMP/rec.${b#*:}.cache" --stats "$TMP/rec.${b#*:}.ptqstats" 2>/dev/null || return 1
  done
  "$PTQ" stats merge "$TMP/rec.r1.ptqstats" "$TMP/rec.r2.ptqstats" -o "$TMP/rec.m.ptqstats" 2>/dev/null &&
  stats_same "$TMP/rec.m.ptqstats" "$TMP/rec.r12.ptqstats" | sed 's/^/rec: /'
}
check "shards at --batch 3 and 5 merge to the one pass at --batch 8, bit for bit (cls, and rec with its attention MatMuls)" \
  other_batch_sizes
check "--from-stats of the one pass's own file reproduces its caches" bash -c "
  '$PTQ' calibrate '$M' --from-stats '$TMP/all.ptqstats' --method all --cache '$TMP/again.cache' --json '$TMP/again.json' 2>/dev/null &&
  for m in $METHODS; do cmp '$TMP/again.'\$m.cache '$TMP/all.'\$m.cache || exit 1; done && echo identical"

corrupt() {
  local size; size=$(stat -c %s "$TMP/a.ptqstats")
  cp "$TMP/a.ptqstats" "$TMP/flip.ptqstats"
  printf '\x5a' | dd of="$TMP/flip.ptqstats" bs=1 seek=$((size / 2)) conv=notrunc 2>/dev/null
  cmp -s "$TMP/flip.ptqstats" "$TMP/a.ptqstats" && { echo "byte not changed"; return 1; }
  head -c $((size - 100)) "$TMP/a.ptqstats" > "$TMP/trunc.ptqstats"
  refused "flip.ptqstats: checksum mismatch" "$PTQ" stats merge "$TMP/flip.ptqstats" "$TMP/b.ptqstats" -o "$TMP/x.ptqstats" &&
  refused "flip.ptqstats: checksum mismatch" "$PTQ" calibrate "$M" --from-stats "$TMP/flip.ptqstats" --cache "$TMP/x.cache" &&
  refused "trunc.ptqstats" "$PTQ" stats merge "$TMP/b.ptqstats" "$TMP/trunc.ptqstats" -o "$TMP/x.ptqstats" &&
  refused "not a ptq statistics file" "$PTQ" stats merge "$TMP/a.ptqstats" "$TMP/all.max.cache" -o "$TMP/x.ptqstats" &&
  [ ! -e "$TMP/x.ptqstats" ]
}
check "a flipped byte, a truncation, a cache instead of statistics: refused, naming the file, nothing written" corrupt

others() {
  "$PTQ" calibrate "$REC" --images "$TMP/b.txt" --preset paddleocr-rec --limit 2 --method max --cache "$TMP/rec.cache" \
     --stats "$TMP/rec.ptqstats" 2>/dev/null &&
  cal brec --images "$TMP/b.txt" --preset paddleocr-rec --stats "$TMP/brec.ptqstats" 2>/dev/null &&
  cal bexif --images "$TMP/b.txt" --preset paddleocr-cls --exif off --stats "$TMP/bexif.ptqstats" 2>/dev/null &&
  refused "different models" "$PTQ" stats merge "$TMP/a.ptqstats" "$TMP/rec.ptqstats" -o "$TMP/x.ptqstats" &&
  refused "different preprocessing (size=192x48 vs size=320x48)" "$PTQ" stats merge "$TMP/a.ptqstats" "$TMP/brec.ptqstats" -o "$TMP/x.ptqstats" &&
  refused "different preprocessing (exif=on vs exif=off)" "$PTQ" stats merge "$TMP/a.ptqstats" "$TMP/bexif.ptqstats" -o "$TMP/x.ptqstats" &&
  refused "statistics of another model" "$PTQ" calibrate "$REC" --from-stats "$TMP/ab.ptqstats" --cache "$TMP/x.cache" &&
  refused "statistics of another model" "$PTQ" quantize "$REC" --from-stats "$TMP/ab.ptqstats" -o "$TMP/x.onnx" &&
  [ ! -e "$TMP/x.ptqstats" ] && [ ! -e "$TMP/x.cache" ] && [ ! -e "$TMP/x.onnx" ]
}
check "other model (rec), other preset (paddleocr-rec), --exif off: merge refused; --from-stats on another model refused" others
twice() {
  refused "the same shard twice" "$PTQ" stats merge "$TMP/a.ptqstats" "$TMP/b.ptqstats" "$TMP/a.ptqstats" -o "$TMP/x.ptqstats" &&
  refused "a.ptqstats: both contain image" "$PTQ" stats merge "$TMP/ab.ptqstats" "$TMP/a.ptqstats" -o "$TMP/x.ptqstats" &&
  refused "overlapping image lists" "$PTQ" stats merge "$TMP/all.ptqstats" "$TMP/b.ptqstats" -o "$TMP/x.ptqstats"
}
check "the same shard twice refused (a b a; merged ab + a); overlapping lists refused (all + b)" twice

npy() {
  "$PTQ" preprocess --images "$TMP/a.txt" --preset paddleocr-cls --dump "$TMP/a.npy" 2>/dev/null &&
  "$PTQ" calibrate "$M" --input "$TMP/a.npy" --method entropy --cache "$TMP/npy.cache" --stats "$TMP/npy.ptqstats" 2>/dev/null &&
  "$PTQ" calibrate "$M" --from-stats "$TMP/npy.ptqstats" --method entropy --cache "$TMP/npy2.cache" 2>/dev/null &&
  cmp "$TMP/npy.cache" "$TMP/npy2.cache" && "$PTQ" stats show "$TMP/npy.ptqstats" | grep -qE '^preprocessing +npy:[0-9a-f]{16}$' &&
  refused "different preprocessing" "$PTQ" stats merge "$TMP/npy.ptqstats" "$TMP/b.ptqstats" -o "$TMP/x.ptqstats"
}
check "--input .npy: --stats/--from-stats round trip; recorded as npy:<hash>, not mergeable with images" npy

quant_from_stats() {
  for m in entropy percentile:99.99; do
    local t=${m/:/-}
    "$PTQ" quantize "$M" --images "$TMP/all.txt" --preset paddleocr-cls --method $m -o "$TMP/qi.$t.onnx" \
       --cache "$TMP/qi.$t.cache" --json "$TMP/qi.$t.json" --stats "$TMP/qi.ptqstats" 2>/dev/null &&
    stats_same "$TMP/qi.ptqstats" "$TMP/all.ptqstats" >/dev/null &&
    "$PTQ" quantize "$M" --from-stats "$TMP/ab.ptqstats" --method $m -o "$TMP/qs.$t.onnx" \
       --cache "$TMP/qs.$t.cache" --json "$TMP/qs.$t.json" 2>/dev/null &&
    cmp "$TMP/qi.$t.onnx" "$TMP/qs.$t.onnx" && cmp "$TMP/qi.$t.cache" "$TMP/qs.$t.cache" && cmp "$TMP/qi.$t.json" "$TMP/qs.$t.json" || return 1
  done
  echo "entropy and percentile:99.99: QDQ models ($(stat -c %s "$TMP/qi.entropy.onnx") bytes), caches and JSON identical"
}
check "quantize --from-stats (merged shards) == quantize from the photos: QDQ model, cache, JSON byte-identical; quantize --stats == calibrate --stats" quant_from_stats

quant_from_cache() {
  "$PTQ" quantize "$M" --images "$TMP/all.txt" --preset paddleocr-cls --method max -o "$TMP/qi.max.onnx" \
     --cache "$TMP/qi.max.cache" --json "$TMP/qi.max.json" 2>/dev/null &&
  "$PTQ" quantize "$M" --from-cache "$TMP/all.max.cache" -o "$TMP/qc.max.onnx" --cache "$TMP/qc.max.cache" \
     --json "$TMP/qc.max.json" 2>/dev/null &&
  cmp "$TMP/qi.max.onnx" "$TMP/qc.max.onnx" && cmp "$TMP/qi.max.cache" "$TMP/qc.max.cache" && $PY -c "
import json, numpy as np
a = json.load(open('$TMP/qi.max.json'))['tensors']; b = json.load(open('$TMP/qc.max.json'))['tensors']
assert sorted(a) == sorted(b)
assert all(np.float32(a[k]['scale']) == np.float32(b[k]['scale']) for k in a), 'scales differ'
d = [k for k in a if np.float32(a[k]['amax']) != np.float32(b[k]['amax'])]
assert all(abs(np.float32(a[k]['amax']) - np.float32(b[k]['amax'])) <= np.spacing(np.float32(a[k]['amax'])) for k in d)
print('QDQ models and caches identical; %d scales identical; amax = scale*127 differs from the calibrated amax by one ulp in %d tensors (JSON only)' % (len(a), len(d)))"
}
check "quantize --from-cache (calibrate --method max) == quantize --method max from the photos: QDQ model and cache byte-identical" quant_from_cache

missing() {
  # two activation tensors the rules quantize (inputs of QuantizeLinear in the QDQ model), removed from the cache
  local names; names=$($PY -c "
import onnx
m = onnx.load('$TMP/qi.max.onnx'); inits = {i.name for i in m.graph.initializer}
acts = [n.input[0] for n in m.graph.node if n.op_type == 'QuantizeLinear' and n.input[0] not in inits]
drop = [acts[0], acts[len(acts) // 2]]
lines = open('$TMP/all.max.cache').read().splitlines(True)
keep = [l for l in lines if l.rsplit(': ', 1)[0] not in drop]
assert len(keep) == len(lines) - 2
open('$TMP/partial.cache', 'w').writelines(keep)
print(drop[0]); print(drop[1])") || return 1
  local n1 n2 err; n1=$(echo "$names" | sed -n 1p); n2=$(echo "$names" | sed -n 2p)
  err=$("$PTQ" quantize "$M" --from-cache "$TMP/partial.cache" -o "$TMP/qp.onnx" --report "$TMP/qp.tsv" 2>&1) || { echo "$err"; return 1; }
  echo "$err" | grep -qF "tensor '$n1' has no range in $TMP/partial.cache: the nodes reading it stay float" &&
  echo "$err" | grep -qF "tensor '$n2' has no range" && echo "$err" | grep -q "; 3 warnings;" &&
  echo "$err" | grep -q "warning: 2 of 54 Conv/ConvTranspose/Gemm/MatMul layers keep float weights" &&
  grep -qF "no calibrated range for '$n1'" "$TMP/qp.tsv" && grep -qF "no calibrated range for '$n2'" "$TMP/qp.tsv" && $PY -c "
import onnx
m = onnx.load('$TMP/qp.onnx'); q = {n.input[0] for n in m.graph.node if n.op_type == 'QuantizeLinear'}
assert '$n1' not in q and '$n2' not in q, 'still quantized'
onnx.checker.check_model(m)
print('$n1 and $n2 named, left float; 3 warnings; %d Q nodes, checker-valid' % len(q))"
}
check "quantize --from-cache with two needed tensors missing: named, their consumers stay float (the 2 weighted ones counted), 3 warnings in the summary" missing

usage() {
  refused "--method does not apply to --from-cache" "$PTQ" quantize "$M" --from-cache "$TMP/all.max.cache" --method max -o "$TMP/x.onnx" &&
  refused "give one of" "$PTQ" quantize "$M" --from-cache "$TMP/all.max.cache" --images "$PHOTOS" -o "$TMP/x.onnx" &&
  refused "--from-stats replaces" "$PTQ" calibrate "$M" --from-stats "$TMP/ab.ptqstats" --images "$PHOTOS" --cache "$TMP/x.cache" &&
  refused "runs none" "$PTQ" quantize "$M" --from-stats "$TMP/ab.ptqstats" --stats "$TMP/y.ptqstats" -o "$TMP/x.onnx" &&
  refused "-o OUT.ptqstats is required" "$PTQ" stats merge "$TMP/a.ptqstats" "$TMP/b.ptqstats" &&
  { "$PTQ" quantize "$M" --from-cache "$TMP/all.max.cache" --method max -o "$TMP/x.onnx" 2>/dev/null; [ $? = 2 ]; }
}
check "usage errors (exit 2): --method with --from-cache, two sources, --stats with --from-stats, merge without -o" usage
finish

#!/usr/bin/env bash
# Sharded calibration (--shard I/N, docs/cluster.md) on the PaddleOCR det model at 96x96 with
# the skimage photos (34 files, one of them a truncated JPEG that every pass skips):
# - 4 shards run through GNU parallel (2 at a time, as on 2 cores), each writing --stats;
#   `ptq stats merge` of the 4 files is byte-identical to the file one pass over all photos
#   writes (statistics files record the sorted ids of the images seen, io/stats.h);
# - from the merged file, `calibrate --from-stats --method all` writes the same 6 caches and
#   JSON files as the one pass, and `quantize --from-stats` the same QDQ model and cache as
#   `quantize --images` (entropy, and mse);
# - other N (1, 3, 7), shards of a list file in another order, --shuffle --seed, and
#   `quantize --shard --stats`: all merge to the same bytes; a shard merged twice is refused;
# - a format-1 file (ptq before --shard; made here from the one pass's) still gives the same
#   caches and merges with format-1 files only;
# - bad --shard values (3/3, -1/4, 0/0, a/b, an empty shard, --shard without --images) give a
#   one-line error and a non-zero exit.
# Without GNU parallel (Debian package `parallel`) the parallel check is a counted skip and the
# other checks run the shards one after the other.
. "$(dirname "$0")/lib.sh"
M=$MODELS/ch_PP-OCRv4_det_infer.onnx
PHOTOS=$ROOT/build/photos
PP="--preset paddleocr-det --size 96x96"
METHODS="max percentile-99.9 percentile-99.99 percentile-99.999 entropy mse"
rm -f "$TMP"/*.ptqstats "$TMP"/*.cache "$TMP"/*.json "$TMP"/*.onnx
HAVE_PARALLEL=0
command -v parallel >/dev/null 2>&1 && HAVE_PARALLEL=1

cal() { # out-name, then options: calibrate --method all, 1 thread (the shards run side by side)
  local o=$1; shift
  "$PTQ" calibrate "$M" --method all --threads 1 --cache "$TMP/$o.cache" --json "$TMP/$o.json" "$@" 2>/dev/null
}
shards() { # N tag images-source [extra options]: N shards writing --stats only, then their merge
  local n=$1 tag=$2 src=$3; shift 3
  local i files=()
  for ((i = 0; i < n; i++)); do files+=("$TMP/$tag.$i.ptqstats"); done
  if [ "$HAVE_PARALLEL" = 1 ]; then
    parallel --halt now,fail=1 -j2 "$PTQ" calibrate "$M" --images "$src" $PP --threads 1 \
      --stats "$TMP/$tag.{}.ptqstats" --shard {}/"$n" "$@" '2>/dev/null' \
      ::: $(seq 0 $((n - 1))) || return 1
  else
    for ((i = 0; i < n; i++)); do
      "$PTQ" calibrate "$M" --images "$src" $PP --threads 1 --stats "$TMP/$tag.$i.ptqstats" --shard "$i/$n" "$@" \
        2>/dev/null || return 1
    done
  fi
  "$PTQ" stats merge "${files[@]}" -o "$TMP/$tag.ptqstats" 2>/dev/null
}
same_caches() { # a b: every method's cache and JSON identical
  for m in $METHODS; do
    cmp "$TMP/$1.$m.cache" "$TMP/$2.$m.cache" && cmp "$TMP/$1.$m.json" "$TMP/$2.$m.json" || return 1
  done
  echo "6 caches and 6 JSON files identical"
}

one_pass() {
  cal one --images "$PHOTOS" $PP --stats "$TMP/one.ptqstats" &&
  "$PTQ" stats show "$TMP/one.ptqstats" | grep -q '^images  *33$' && echo "33 images (1 skipped), $(wc -c < "$TMP/one.ptqstats") bytes"
}
check "one pass over the photos (det at 96x96, --method all, --stats)" one_pass

four() {
  shards 4 s4 "$PHOTOS" && cmp "$TMP/s4.ptqstats" "$TMP/one.ptqstats" &&
  echo "4 shards of $(for i in 0 1 2 3; do "$PTQ" stats show "$TMP/s4.$i.ptqstats" | awk '/^images/ {print $2}'; done | paste -sd/) images merged: identical to the one pass"
}
if [ "$HAVE_PARALLEL" = 1 ]; then
  check "4 shards through GNU parallel (-j2), merged: byte-identical to the one pass's statistics" four
else
  skip "4 shards through GNU parallel" "parallel not installed (Debian package parallel; scripts/deps.sh)"
  shards 4 s4 "$PHOTOS" >/dev/null 2>&1
fi

from_stats() {
  cal s4 --from-stats "$TMP/s4.ptqstats" && same_caches s4 one
}
check "calibrate --from-stats (4 shards merged) --method all: caches and JSON byte-identical to the one pass" from_stats

quant() {
  local m
  for m in entropy mse; do
    "$PTQ" quantize "$M" --images "$PHOTOS" $PP --threads 1 --method $m -o "$TMP/one.$m.onnx" --cache "$TMP/oneq.$m.cache" 2>/dev/null &&
    "$PTQ" quantize "$M" --from-stats "$TMP/s4.ptqstats" --threads 1 --method $m -o "$TMP/s4.$m.onnx" --cache "$TMP/s4q.$m.cache" 2>/dev/null &&
    cmp "$TMP/one.$m.onnx" "$TMP/s4.$m.onnx" && cmp "$TMP/oneq.$m.cache" "$TMP/s4q.$m.cache" || return 1
  done
  echo "entropy and mse: QDQ models ($(wc -c < "$TMP/s4.mse.onnx") bytes) and caches identical"
}
check "quantize --from-stats (4 shards merged) == quantize --images: QDQ model and cache byte-identical" quant

other_n() {
  local n
  for n in 1 3 7; do
    shards $n s$n "$PHOTOS" && cmp "$TMP/s$n.ptqstats" "$TMP/one.ptqstats" || { echo "N=$n differs"; return 1; }
  done
  echo "N = 1, 3, 7: identical merged files"
}
check "other shard counts (1, 3, 7) merge to the same bytes" other_n

orders() {
  ls -d "$PHOTOS"/* | LC_ALL=C sort -r > "$TMP/reversed.txt"
  shards 3 rev "$TMP/reversed.txt" && cmp "$TMP/rev.ptqstats" "$TMP/one.ptqstats" &&
  shards 2 shuf "$PHOTOS" --shuffle --seed 7 && cmp "$TMP/shuf.ptqstats" "$TMP/one.ptqstats" &&
  echo "a list file (3 shards) and --shuffle --seed 7 (2 shards): identical"
}
check "shards of a list file in reverse order, and of a shuffled folder: the same bytes" orders

quant_shards() {
  local i
  for i in 0 1; do
    "$PTQ" quantize "$M" --images "$PHOTOS" $PP --threads 1 --shard $i/2 --stats "$TMP/q2.$i.ptqstats" -o "$TMP/q2.$i.onnx" 2>/dev/null || return 1
  done
  "$PTQ" stats merge "$TMP/q2.1.ptqstats" "$TMP/q2.0.ptqstats" -o "$TMP/q2.ptqstats" 2>/dev/null &&
  cmp "$TMP/q2.ptqstats" "$TMP/one.ptqstats" && echo "2 quantize shards merged (in reverse order): identical"
}
check "quantize --shard I/2 --stats, merged: the one pass's bytes" quant_shards

v1() { # the one pass's file rewritten in format 1 (image-list hash instead of ids), as ptq before --shard wrote it
  $PY - "$TMP/one.ptqstats" "$TMP/v1.ptqstats" <<'PYEOF' || return 1
import struct, sys
def fnv(b):
    h = 0xcbf29ce484222325
    for c in b: h = ((h ^ c) * 0x100000001b3) & 0xffffffffffffffff
    return h
d = open(sys.argv[1], 'rb').read()
assert struct.unpack_from('<I', d, 8)[0] == 2
plen, = struct.unpack_from('<I', d, 24); p = 28 + plen
n, = struct.unpack_from('<Q', d, p)
body = d[:8] + struct.pack('<I', 1) + d[12:p] + struct.pack('<IQQ', 1, 0x1234, n) + d[p + 8 + 8 * n:-8]
open(sys.argv[2], 'wb').write(body + struct.pack('<Q', fnv(body)))
PYEOF
  "$PTQ" stats show "$TMP/v1.ptqstats" | grep -q '^image lists  *0000000000001234$' &&
  cal v1 --from-stats "$TMP/v1.ptqstats" && same_caches v1 one >/dev/null &&
  "$PTQ" stats merge "$TMP/v1.ptqstats" -o "$TMP/v1m.ptqstats" 2>/dev/null && cmp "$TMP/v1.ptqstats" "$TMP/v1m.ptqstats" &&
  refused "is in statistics format 1" "$PTQ" stats merge "$TMP/s4.0.ptqstats" "$TMP/v1.ptqstats" -o "$TMP/x.ptqstats" >/dev/null &&
  echo "format 1 read (--from-stats: the same 6 caches), written back unchanged, not merged with format 2"
}
check "a format-1 file (ptq before --shard): still read and merged alone; with format 2 refused" v1

bad() {
  local a
  for a in 3/3 -1/4 0/0 a/b 1/ /4 1/2/3 ' 1/2'; do
    refused "bad --shard '$a'" "$PTQ" calibrate "$M" --images "$PHOTOS" $PP --shard "$a" --cache "$TMP/x.cache" >/dev/null || return 1
  done
  refused "bad --shard '4/4'" "$PTQ" quantize "$M" --images "$PHOTOS" $PP --shard 4/4 -o "$TMP/x.onnx" >/dev/null &&
  refused "shard 40/41 holds no image (34 image files listed)" "$PTQ" calibrate "$M" --images "$PHOTOS" $PP --shard 40/41 --cache "$TMP/x.cache" >/dev/null &&
  refused "--shard slices the --images list" "$PTQ" calibrate "$M" --from-stats "$TMP/one.ptqstats" --shard 0/2 --cache "$TMP/x.cache" >/dev/null &&
  refused "--shard slices the --images list" "$PTQ" quantize "$M" --from-stats "$TMP/one.ptqstats" --shard 0/2 -o "$TMP/x.onnx" >/dev/null &&
  refused "the same shard twice" "$PTQ" stats merge "$TMP/s4.0.ptqstats" "$TMP/s4.1.ptqstats" "$TMP/s4.0.ptqstats" -o "$TMP/x.ptqstats" &&
  [ ! -e "$TMP/x.cache" ] && [ ! -e "$TMP/x.onnx" ] && [ ! -e "$TMP/x.ptqstats" ]
}
check "bad --shard values (3/3 -1/4 0/0 a/b ...), an empty shard, --shard without --images, a shard merged twice: one line, non-zero" bad

finish

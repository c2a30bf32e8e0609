#!/usr/bin/env bash
# ptq as a library (include/ptq.h): `make install PREFIX=$tmp`, examples/calibrate.c compiled
# against the installed libptq with `pkg-config --cflags --libs ptq`, run on the cls model and
# the photos; its QDQ model and cache must equal `ptq quantize`'s byte for byte, and a bad input
# must come back as a status with the message. Also: the shared library exports only ptq_*
# symbols, and the static archive links the same example.
. "$(dirname "$0")/lib.sh"
export OMP_WAIT_POLICY=passive
CLS=$MODELS/ch_ppocr_mobile_v2.0_cls_infer.onnx
PHOTOS=$ROOT/build/photos
PREFIX=$TMP/prefix
rm -rf "$PREFIX" "$TMP"/out* "$TMP"/cli*

check "make install PREFIX=... puts bin, lib, include, pkgconfig and presets in place" bash -c '
  make -C "$1" --no-print-directory -s install BUILD="$2" PREFIX="$3" >/dev/null &&
  for f in bin/ptq lib/libptq.a lib/libptq.so.0 lib/libptq.so include/ptq.h lib/pkgconfig/ptq.pc share/ptq/configs/paddleocr-cls.yaml; do
    test -e "$3/$f" || { echo "missing $f"; exit 1; }; done &&
  test "$(readelf -d "$3/lib/libptq.so.0" | sed -n "s/.*(SONAME).*\[\(.*\)\]/\1/p")" = libptq.so.0 && echo "soname libptq.so.0"' \
  _ "$ROOT" "$BUILD" "$PREFIX"

check "libptq.so exports only the ptq_ functions of ptq.h" bash -c '
  bad=$(nm -D --defined-only "$1" | awk "{print \$3}" | grep -v "^ptq_" | grep -v "^_" ); n=$(nm -D --defined-only "$1" | grep -c " T ptq_")
  [ -z "$bad" ] || { echo "also exported: $bad" | head; exit 1; }
  for f in $(grep -o "^PTQ_API [^(]*(" "$2" | sed -E "s/.* \**(ptq_[a-z_0-9]+)\(/\1/"); do
    nm -D --defined-only "$1" | grep -q " T $f\$" || { echo "not exported: $f"; exit 1; }; done; echo "$n functions"' \
  _ "$PREFIX/lib/libptq.so.0" "$ROOT/include/ptq.h"

export PKG_CONFIG_PATH=$PREFIX/lib/pkgconfig
check "examples/calibrate.c builds with pkg-config --cflags --libs ptq (shared and static)" bash -c '
  cc -std=c11 -Wall -Wextra -Werror "$1/examples/calibrate.c" $(pkg-config --cflags --libs ptq) -o "$2/calibrate" &&
  cc -std=c11 -Wall -Wextra -Werror "$1/examples/calibrate.c" $(pkg-config --cflags ptq) "$3/lib/libptq.a" \
     $(pkg-config --static --libs ptq | sed "s/-lptq//") -o "$2/calibrate-static" &&
  pkg-config --cflags --libs ptq' _ "$ROOT" "$TMP" "$PREFIX"

check "the example's QDQ model and cache equal ptq quantize's byte for byte" bash -c '
  LD_LIBRARY_PATH="$4/lib" "$3/calibrate" "$1" "$2" paddleocr-cls "$3/out" > "$3/out.txt" 2>"$3/out.err" || { cat "$3/out.err"; exit 1; }
  "$5" quantize "$1" --images "$2" --preset paddleocr-cls -o "$3/cli.qdq.onnx" --cache "$3/cli.cache" 2>/dev/null &&
  "$5" calibrate "$1" --images "$2" --preset paddleocr-cls --method entropy --cache "$3/cli.calib.cache" 2>/dev/null &&
  cmp "$3/out.qdq.onnx" "$3/cli.qdq.onnx" && cmp "$3/out.cache" "$3/cli.cache" && cmp "$3/out.calib.cache" "$3/cli.calib.cache" &&
  test "$(wc -l < "$3/out.txt")" = 3 && cat "$3/out.txt" | tr "\n" ";"' _ "$CLS" "$PHOTOS" "$TMP" "$PREFIX" "$PTQ"

check "the static build writes the same files" bash -c '
  "$3/calibrate-static" "$1" "$2" paddleocr-cls "$3/outs" >/dev/null 2>&1 &&
  cmp "$3/outs.qdq.onnx" "$3/cli.qdq.onnx" && cmp "$3/outs.cache" "$3/cli.cache"' _ "$CLS" "$PHOTOS" "$TMP"

check "a missing model returns its status and message (exit 1, nothing written)" bash -c '
  LD_LIBRARY_PATH="$3/lib" "$2/calibrate" "$2/no-such.onnx" "$1" paddleocr-cls "$2/bad" 2>"$2/bad.err"; rc=$?
  test $rc = 1 && grep -q "^calibrate: .*no-such.onnx" "$2/bad.err" && ! ls "$2"/bad.* 2>/dev/null | grep -qv bad.err && cat "$2/bad.err"' \
  _ "$PHOTOS" "$TMP" "$PREFIX"

check "an unknown preset returns the preset message" bash -c '
  LD_LIBRARY_PATH="$4/lib" "$3/calibrate" "$1" "$2" no-such-preset "$3/bad2" 2>"$3/bad2.err"; rc=$?
  test $rc = 1 && grep -q "preset .no-such-preset. not found" "$3/bad2.err" && cat "$3/bad2.err"' _ "$CLS" "$PHOTOS" "$TMP" "$PREFIX"
finish

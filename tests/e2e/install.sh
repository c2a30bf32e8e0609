#!/usr/bin/env bash
# Installed like a real tool:
#  - make install puts the binary, library, header, presets, man page and bash completion under PREFIX;
#  - the man page (generated from --help) documents every option of every command, and --help
#    itself names every option the command accepts (ptq CMD --list-options);
#  - bash completion completes commands, options and presets from the binary's own tables;
#  - ptq --version names the source commit;
#  - make wheel gives a wheel that, installed in a fresh venv, finds its library and presets with
#    nothing set (no PTQ_LIBRARY) and quantizes.
. "$(dirname "$0")/lib.sh"
P=$TMP/prefix
rm -rf "$P" "$TMP/venv"
SAN=; [ "$BUILD" = build-san ] && SAN=SANITIZE=1

check "make install: binary, library, header, presets, man page, completion" bash -c "
  make -C '$ROOT' --no-print-directory -s install PREFIX='$P' BUILD='$BUILD' $SAN >/dev/null &&
  for f in bin/ptq lib/libptq.so.0 lib/libptq.a include/ptq.h lib/pkgconfig/ptq.pc share/ptq/configs/paddleocr-det.yaml \
           share/man/man1/ptq.1 share/bash-completion/completions/ptq; do test -s '$P'/\$f || { echo missing \$f; exit 1; }; done"
check "the installed binary finds its presets" bash -c "cd / && '$P/bin/ptq' preprocess --list-presets | grep -x paddleocr-det"

CMDS=$("$PTQ" --help | awk '/^  [a-z]/ {print $1}')
check "--help of every command names every option it accepts" bash -c '
  for c in '"$(echo $CMDS)"'; do
    h=$("$1" $c --help 2>&1)
    for o in $("$1" $c --list-options); do echo "$h" | grep -q -- "$o\b" || { echo "ptq $c --help lacks $o"; exit 1; }; done
  done; echo '"$(echo $CMDS | wc -w)"' commands' _ "$PTQ"
check "the man page renders and documents every option of every command" bash -c '
  page=$(MANWIDTH=200 man -l "$2/share/man/man1/ptq.1" 2>/dev/null)
  echo "$page" | grep -q "^NAME" || { echo "no NAME section"; exit 1; }
  n=0
  for c in '"$(echo $CMDS)"'; do
    echo "$page" | grep -q "ptq $c" || { echo "no section for $c"; exit 1; }
    for o in $("$1" $c --list-options); do echo "$page" | grep -q -- "$o\b" || { echo "man page lacks $c $o"; exit 1; }; n=$((n+1)); done
  done; echo "$n options"' _ "$PTQ" "$P"
check "bash completion: commands, options, presets" bash -c '
  . "$2/share/bash-completion/completions/ptq"
  COMP_WORDS=("$1" qu); COMP_CWORD=1; _ptq; [ "${COMPREPLY[*]}" = quantize ] || { echo "commands: ${COMPREPLY[*]}"; exit 1; }
  COMP_WORDS=("$1" quantize m.onnx --adar); COMP_CWORD=3; _ptq; [ "${COMPREPLY[*]}" = --adaround ] || { echo "options: ${COMPREPLY[*]}"; exit 1; }
  COMP_WORDS=("$1" compare m.onnx --preset paddleocr-r); COMP_CWORD=4; _ptq
  [ "${COMPREPLY[*]}" = "paddleocr-rec paddleocr-rec-dynamic" ] || { echo "presets: ${COMPREPLY[*]}"; exit 1; }
  COMP_WORDS=("$1" stats m); COMP_CWORD=2; _ptq; [ "${COMPREPLY[*]}" = merge ] || { echo "stats: ${COMPREPLY[*]}"; exit 1; }' _ "$PTQ" "$P"
if git -C "$ROOT" rev-parse HEAD >/dev/null 2>&1; then
  check "ptq --version names the source commit" bash -c "
    '$PTQ' --version | grep -F \"source commit \$(git -C '$ROOT' rev-parse --short=12 HEAD)\""
else
  skip "ptq --version names the source commit" "not a git checkout"
fi

if [ -n "$SAN" ]; then
  skip "make wheel: installed in a fresh venv" "a sanitized library does not load into python without LD_PRELOAD"
elif ! $PY -c 'import venv, numpy, setuptools, wheel' 2>/dev/null; then
  skip "make wheel: installed in a fresh venv" "needs python3-venv, python3-numpy, python3-setuptools, python3-wheel (make deps)"
else
  check "make wheel: a wheel carrying libptq.so.0 and the presets" bash -c "
    make -C '$ROOT' --no-print-directory -s wheel BUILD='$BUILD' >/dev/null &&
    $PY -c \"import sys, zipfile; n = zipfile.ZipFile(sys.argv[1]).namelist()
assert 'ptq/libptq.so.0' in n and 'ptq/configs/paddleocr-cls.yaml' in n, n; print(len(n), 'files')\" '$ROOT/$BUILD'/wheel/ptq-*.whl"
  check "the wheel in a fresh venv: import ptq finds its library with nothing set, and quantizes" bash -c "
    $PY -m venv --system-site-packages '$TMP/venv' &&
    PIP_ROOT_USER_ACTION=ignore '$TMP/venv/bin/python' -m pip install -q --no-deps --no-index '$ROOT/$BUILD'/wheel/ptq-*.whl &&
    cd '$TMP' && env -u PTQ_LIBRARY -u PTQ_CONFIGS '$TMP/venv/bin/python' -c \"
import ptq, os
assert ptq.library_path().startswith('$TMP/venv/'), ptq.library_path()
r = ptq.quantize('$MODELS/ch_ppocr_mobile_v2.0_cls_infer.onnx', '$ROOT/build/photos', preset='paddleocr-cls', limit=4,
                 output='$TMP/cls.qdq.onnx')
assert os.path.getsize('$TMP/cls.qdq.onnx') > 0
print('quantized with', ptq.library_path())\""
fi
finish

#!/usr/bin/env bash
# The Python package (python/ptq: ctypes over libptq.so.0): `make lib`, `pip install --target`
# of ./python offline (Debian's pip and setuptools, no build isolation), then
# python/tests/test_ptq.py under pytest against the installed copy: quantize, calibrate,
# compare, translate, Session and Dataset equal the CLI's files, numbers and arrays byte for
# byte, and failures raise ptq.Error with ptq's message. pytest's counts join this script's.
. "$(dirname "$0")/lib.sh"
export OMP_WAIT_POLICY=passive PYTHONDONTWRITEBYTECODE=1 PIP_ROOT_USER_ACTION=ignore
rm -rf "$TMP/site" "$TMP/src" "$TMP/pytest"
mkdir -p "$TMP/pytest"

SAN=; [ "$BUILD" = build-san ] && SAN=SANITIZE=1
check "make lib builds libptq.so.0" make -C "$ROOT" --no-print-directory -s lib BUILD="$BUILD" $SAN
export PTQ_LIBRARY=$ROOT/$BUILD/libptq.so.0 PTQ_BIN=$PTQ
# a sanitized library (make SANITIZE=1 test) loads into python3 after the ASan runtime; python leaks by design
if ldd "$PTQ_LIBRARY" 2>/dev/null | grep -q libasan; then
  export LD_PRELOAD=$(gcc -print-file-name=libasan.so) ASAN_OPTIONS=detect_leaks=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}
fi

if ! $PY -c 'import numpy, pytest' 2>/dev/null; then
  skip "python/tests/test_ptq.py" "needs python3-numpy and python3-pytest (make deps)"
  finish
fi

# a copy of python/: pip builds in its source folder (build/, ptq.egg-info)
cp -r "$ROOT/python" "$TMP/src"
if $PY -m pip --version >/dev/null 2>&1 && $PY -c 'import setuptools, wheel' 2>/dev/null; then
  check "pip install --no-build-isolation --target of ./python works offline" bash -c '
    "$1" -m pip install -q --no-deps --no-build-isolation --no-index --target "$2/site" "$2/src" &&
    test -f "$2/site/ptq/__init__.py" -a -f "$2/site/ptq/_capi.py" && ls -d "$2"/site/ptq-*.dist-info' _ "$PY" "$TMP"
else
  skip "pip install of ./python" "needs python3-pip, python3-setuptools and python3-wheel"
fi
if [ -f "$TMP/site/ptq/__init__.py" ]; then PYPATH=$TMP/site; else PYPATH=$TMP/src; fi

check "import ptq from $(basename "$PYPATH") finds the library" bash -c '
  cd "$2" && PYTHONPATH="$1" "$3" -c "import ptq; assert ptq.__file__.startswith(\"$1\"), ptq.__file__; print(ptq.version(), ptq.library_path())"' \
  _ "$PYPATH" "$TMP" "$PY"

# pytest from $TMP (not python/: the installed copy is the one imported), its counts summed
(cd "$TMP/pytest" && PYTHONPATH=$PYPATH hang_limit 600 "$PY" -m pytest -p no:cacheprovider -q -rfEs \
   --basetemp="$TMP/pytest/tmp" --junitxml="$TMP/pytest/junit.xml" "$ROOT/python/tests/test_ptq.py") > "$TMP/pytest/out.txt" 2>&1
rc=$?
sed 's/^/  /' "$TMP/pytest/out.txt" | grep -v '^  $' | tail -n 40
counts=$("$PY" - "$TMP/pytest/junit.xml" <<'PYEOF'
import sys, xml.etree.ElementTree as ET
try:
    root = ET.parse(sys.argv[1]).getroot()
except Exception:
    print("0 0 0"); sys.exit()
s = root if root.tag == "testsuite" else root.find("testsuite")
n, f, e, k = (int(s.get(a, 0)) for a in ("tests", "failures", "errors", "skipped"))
print(n - f - e - k, f + e, k)
PYEOF
)
read -r p f s <<< "$counts"
PASSED=$((PASSED + p)); FAILED=$((FAILED + f)); SKIPPED=$((SKIPPED + s))
if [ "$rc" != 0 ] && [ "$f" = 0 ]; then FAILED=$((FAILED + 1)); echo "FAIL pytest exited $rc without a failed test"; fi
finish

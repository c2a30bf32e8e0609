#!/usr/bin/env bash
# Runs every test program (build/tests/test_*) and every end-to-end script
# (tests/e2e/*.sh), each of which ends with "N passed, N failed[, N skipped]",
# and prints the sum as the last line. Exit status: non-zero on any failure.
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
export BUILD PTQ="$PWD/$BUILD/ptq"
passed=0; failed=0; skipped=0
log=$(mktemp -d)
run_one() { # name, command...
  local name=$1; shift
  local out="$log/$(basename "$name").log"
  local t0=$(date +%s)
  "$@" >"$out" 2>&1
  local rc=$?
  local line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$out" | tail -n 1)
  local p=0 f=0 s=0
  if [ -n "$line" ]; then
    p=$(echo "$line" | sed -E 's/^([0-9]+) passed.*/\1/')
    f=$(echo "$line" | sed -E 's/^[0-9]+ passed, ([0-9]+) failed.*/\1/')
    s=$(echo "$line" | sed -nE 's/.*, ([0-9]+) skipped.*/\1/p'); s=${s:-0}
  fi
  if [ $rc -ne 0 ] && [ "$f" = 0 ]; then f=1; fi   # crashed or exited non-zero without counting
  if [ -z "$line" ] && [ $rc -eq 0 ]; then f=1; echo "  (no summary line)" >>"$out"; fi
  passed=$((passed + p)); failed=$((failed + f)); skipped=$((skipped + s))
  printf '%-40s %4d passed %3d failed %3d skipped  (%ds)\n' "$name" "$p" "$f" "$s" $(( $(date +%s) - t0 ))
  if [ "$f" != 0 ]; then sed 's/^/    /' "$out" | grep -v '^    ok ' | tail -n 40; fi
}
for t in "$BUILD"/tests/test_*; do
  [ -x "$t" ] && [ -f "tests/unit/$(basename "$t").c" ] || continue   # skip stale binaries
  run_one "$(basename "$t")" "$t"
done
for s in tests/e2e/*.sh; do
  [ -f "$s" ] && [ "$(basename "$s")" != lib.sh ] || continue
  run_one "$(basename "$s")" bash "$s"
done
rm -rf "$log"
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" = 0 ]

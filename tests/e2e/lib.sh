# lib.sh: shared helpers for the end-to-end scripts (sourced).
#   check "name" command...   runs the command; counts a pass or a failure (output shown on failure)
#   skip "name" "why"         counts a check that does not apply here (tests/run.sh sums them)
#   finish                    prints "N passed, N failed[, N skipped]" and exits non-zero on failure
#   refused "part" command... the command fails with one line on stderr (warnings aside) containing part
#   hang_limit SECONDS command... runs the command under `timeout`; past the limit it fails saying
#                             "timed out after N s: a hang, not slowness" (limits catch hangs: keep them generous)
set -u
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=${BUILD:-build}
PTQ=${PTQ:-$ROOT/$BUILD/ptq}
PY=/usr/bin/python3
MODELS=$ROOT/build/models
TMP=$ROOT/$BUILD/tmp/$(basename "$0" .sh)
mkdir -p "$TMP"
PASSED=0; FAILED=0; SKIPPED=0

check() {
  local name=$1; shift
  local out
  if out=$("$@" 2>&1); then
    PASSED=$((PASSED + 1)); echo "ok   $name${out:+: $(echo "$out" | tail -n 1)}"
  else
    FAILED=$((FAILED + 1)); echo "FAIL $name"; echo "$out" | tail -n 15 | sed 's/^/     /'
  fi
}

skip() {
  SKIPPED=$((SKIPPED + 1)); echo "skip $1: $2"
}

finish() {
  echo "$PASSED passed, $FAILED failed$([ "$SKIPPED" = 0 ] || echo ", $SKIPPED skipped")"
  [ "$FAILED" = 0 ]
  exit $?
}

# ptq's name sanitising for output files
sanitise() { echo "$1" | sed 's/[^A-Za-z0-9._-]/_/g'; }

hang_limit() {
  local s=$1; shift
  timeout "$s" "$@"
  local rc=$?
  [ "$rc" = 124 ] && echo "timed out after $s s: a hang, not slowness"
  return "$rc"
}

refused() { # expected-message-part, command...: non-zero exit, one line on stderr containing the part
  local want=$1; shift
  local err
  if err=$("$@" 2>&1 >/dev/null); then echo "accepted: $*"; return 1; fi
  [ "$(echo "$err" | grep -v ': warning: ' | wc -l)" = 1 ] || { echo "not one line: $err"; return 1; }
  echo "$err" | grep -qF -- "$want" || { echo "message lacks '$want': $err"; return 1; }
  echo "$err" | grep -v ': warning: '
}

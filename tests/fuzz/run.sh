#!/usr/bin/env bash
# Runs every libFuzzer harness of build-fuzz/ for FUZZ_SECONDS (default 60) each, one after
# the other, on a corpus that starts from the seeds (tests/fuzz/seeds.sh) and the regression
# inputs (tests/fuzz/regress/NAME) and grows in build-fuzz/corpus/NAME. A crash is saved
# under build-fuzz/crashes/NAME/ (copy it into tests/fuzz/regress/NAME/ once fixed). Prints
# one line per harness (executions, crashes, seconds) and a last line "N passed, N failed".
#   FUZZ_RUNS=N    stop each harness after N executions instead (tests/fuzz/campaign.sh)
#   FUZZ_JOBS=N    parallel workers per harness (default 1)
set -u
cd "$(dirname "$0")/../.."
FB=${FUZZ_BUILD:-build-fuzz}
SECONDS_EACH=${FUZZ_SECONDS:-60}
SEEDS=${FUZZ_SEEDS:-build/fuzz-seeds}
[ -d "$SEEDS" ] || tests/fuzz/seeds.sh "$SEEDS" >/dev/null
passed=0; failed=0
for bin in "$FB"/fuzz_*; do
  [ -x "$bin" ] || continue
  name=${bin##*/fuzz_}
  corpus=$FB/corpus/$name crashes=$FB/crashes/$name
  mkdir -p "$corpus" "$crashes"
  [ -d "$SEEDS/$name" ] && cp -n "$SEEDS/$name"/* "$corpus"/ 2>/dev/null
  [ -d "tests/fuzz/regress/$name" ] && cp -n "tests/fuzz/regress/$name"/* "$corpus"/ 2>/dev/null
  limit=(-max_total_time="$SECONDS_EACH")
  [ -n "${FUZZ_RUNS:-}" ] && limit=(-runs="$FUZZ_RUNS")
  # parallel workers only when asked: libFuzzer's -jobs writes fuzz-N.log into the current folder
  [ "${FUZZ_JOBS:-1}" -gt 1 ] && limit+=(-jobs="$FUZZ_JOBS" -workers="$FUZZ_JOBS")
  log=$FB/$name.log
  t0=$(date +%s)
  ASAN_OPTIONS=abort_on_error=0:detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
    "$bin" "${limit[@]}" -rss_limit_mb=2048 -timeout=20 \
    -max_len=1048576 -print_final_stats=1 -artifact_prefix="$crashes/" "$corpus" >"$log" 2>&1
  rc=$?
  execs=$(grep -h 'stat::number_of_executed_units' "$log" fuzz-*.log 2>/dev/null | awk '{s += $2} END {print s + 0}')
  rm -f fuzz-*.log
  n_crash=$(ls "$crashes" | wc -l)
  printf '%-8s %12s executions %3d crashes %5d s%s\n' "$name" "$execs" "$n_crash" $(( $(date +%s) - t0 )) \
    "$([ $rc -ne 0 ] && echo "  (exit $rc, see $log)")"
  if [ $rc -eq 0 ] && [ "$n_crash" = 0 ]; then passed=$((passed + 1)); else failed=$((failed + 1)); tail -n 30 "$log"; fi
done
echo "$passed passed, $failed failed"
[ $failed = 0 ]

#!/usr/bin/env bash
# The long fuzzing campaign, for a machine with many cores: every harness at once, each in W
# independent libFuzzer processes sharing one corpus, for SECONDS. Runs from a bundle made by
# `tests/fuzz/campaign.sh --bundle OUT.tar.xz` (the harnesses of build-fuzz/, the shared
# libraries they load with glibc's loader, the seeds of build/fuzz-seeds), so the machine
# needs nothing installed:
#   tests/fuzz/campaign.sh --bundle build/fuzz-bundle.tar.xz
#   (elsewhere) tar xJf fuzz-bundle.tar.xz && fuzz-bundle/campaign.sh 540 onnx:4 image:4 stats:3 npy:1 cache:2 yaml:2
# Prints one line per harness: executions (all its processes together), crashes, and the
# crashing inputs are left in fuzz-bundle/crashes/NAME/.
set -u
here=$(cd "$(dirname "$0")" && pwd)
if [ "${1:-}" = --bundle ]; then
  out=${2:?--bundle OUT.tar.xz}
  cd "$here/../.."
  tmp=$(mktemp -d); b=$tmp/fuzz-bundle
  mkdir -p "$b/bin" "$b/lib"
  cp build-fuzz/fuzz_* "$b/bin/"
  cp -r build/fuzz-seeds "$b/seeds"
  cp tests/fuzz/campaign.sh "$b/"
  for l in $(ldd build-fuzz/fuzz_onnx | awk '/=>/ {print $3} /ld-linux/ {print $1}'); do cp -L "$l" "$b/lib/"; done
  tar cJf "$out" -C "$tmp" fuzz-bundle && rm -rf "$tmp" && ls -la "$out"
  exit 0
fi
SECONDS_EACH=${1:?usage: campaign.sh SECONDS NAME:WORKERS...}; shift
cd "$here"
LD=$(ls lib/ld-linux-x86-64.so.2)
for spec in "$@"; do
  name=${spec%%:*} w=${spec##*:}
  mkdir -p "corpus/$name" "crashes/$name" "logs/$name"
  cp -n "seeds/$name"/* "corpus/$name"/ 2>/dev/null
  for i in $(seq 1 "$w"); do
    ASAN_OPTIONS=abort_on_error=0:detect_leaks=1 "$LD" --library-path lib "bin/fuzz_$name" -max_total_time="$SECONDS_EACH" \
      -rss_limit_mb=2048 -timeout=20 -max_len=1048576 -print_final_stats=1 -seed="$i" \
      -artifact_prefix="crashes/$name/" "corpus/$name" >"logs/$name/$i.log" 2>&1 &
  done
done
wait
printf '| harness | processes | executions | crashes | corpus |\n|---|---:|---:|---:|---:|\n'
for spec in "$@"; do
  name=${spec%%:*} w=${spec##*:}
  execs=$(grep -h 'stat::number_of_executed_units' logs/"$name"/*.log | awk '{s += $2} END {print s + 0}')
  printf '| %s | %d | %d | %d | %d |\n' "$name" "$w" "$execs" "$(ls "crashes/$name" | wc -l)" "$(ls "corpus/$name" | wc -l)"
done

#!/usr/bin/env bash
# Fuzzed parsers (issue 11): the ONNX loader + plan creation, JPEG/PNG decode, .npy, .ptqstats,
# the TensorRT cache reader and the YAML presets/configs (tests/fuzz/fuzz_*.c).
#  1. Every regression input (tests/fuzz/regress/NAME: inputs that once crashed a harness) and
#     every seed replays through its harness built with gcc (build/fuzz-replay), no crash.
#  2. Each libFuzzer harness (clang, ASan + UBSan, build-fuzz/) runs FUZZ_SECONDS (default 10)
#     from the seeds without a crash, a leak or a timeout.
# The long campaign (10^7 executions per harness) is tests/fuzz/campaign.sh; its figures are
# in the README.
. "$(dirname "$0")/lib.sh"
cd "$ROOT"
SEEDS=$ROOT/$BUILD/fuzz-seeds
PTQ="$PTQ" tests/fuzz/seeds.sh "$SEEDS" >/dev/null 2>&1
for bin in "$ROOT/$BUILD"/fuzz-replay/fuzz_*; do
  name=${bin##*/fuzz_}
  args=("$SEEDS/$name")
  [ -d "tests/fuzz/regress/$name" ] && args+=("tests/fuzz/regress/$name")
  check "$name: regression inputs and seeds replay without a crash" "$bin" "${args[@]}"
done
if ! command -v clang >/dev/null || [ ! -f "$(clang -print-resource-dir)/lib/linux/libclang_rt.fuzzer-x86_64.a" ]; then
  skip "libFuzzer runs" "no clang with libFuzzer (Debian clang and libclang-rt-14-dev; make deps installs them)"
  finish
fi
check "the libFuzzer harnesses build (clang, ASan + UBSan)" make --no-print-directory -s fuzzers
while read -r line; do
  case "$line" in
    *" passed, "*" failed") ;;
    *) name=${line%% *}; case "$line" in *"(exit"*) ok=false ;; *" 0 crashes"*) ok=true ;; *) ok=false ;; esac
       check "libFuzzer $name: ${FUZZ_SECONDS:-10} s without a crash" bash -c "echo '$line'; $ok" ;;
  esac
done < <(FUZZ_SECONDS=${FUZZ_SECONDS:-10} FUZZ_SEEDS="$SEEDS" tests/fuzz/run.sh 2>&1 | grep -E ' executions |passed, ')
finish

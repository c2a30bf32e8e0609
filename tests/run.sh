#!/usr/bin/env bash
# Runs every test program (build/tests/test_*) and every end-to-end script
# (tests/e2e/*.sh), each of which ends with "N passed, N failed[, N skipped]",
# and prints the sum as the last line. Exit status: non-zero on any failure.
#
# TEST_JOBS programs run at once (default: the number of cores, at most 4): the longest scripts
# start first, each line is printed as its program ends. With more than one at a time, OpenMP
# threads wait passively (OMP_WAIT_POLICY=passive) so that programs sharing a core do not spin
# against each other. Every script works in its own build/tmp/NAME. What several scripts read is
# made once, before any of them starts: the zoo models (scripts/zoo.py, where torch is) and the
# text lines on the photos (build/textphotos).
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
export BUILD PTQ="$PWD/$BUILD/ptq"
JOBS=${TEST_JOBS:-$(nproc 2>/dev/null || echo 2)}
[ "$JOBS" -gt 4 ] && JOBS=4
[ "$JOBS" -lt 1 ] && JOBS=1
[ "$JOBS" -gt 1 ] && export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
log=$(mktemp -d)
trap 'rm -rf "$log"' EXIT

# The longest first (seconds on 2 cores), so that the last to end is a short one.
HEAVY="fuzz.sh compare.sh dynamic.sh determinism.sh quantize_models.sh variants.sh detection.sh
       fp16_models.sh ops_math.sh zoo.sh calibrate.sh faults.sh docs.sh preprocess.sh outputs.sh
       ops_index.sh shipped_inputs.sh seg_labels.sh truth_labels.sh det_labels.sh"

run_one() { # name, command...: writes $log/NAME.log and $log/NAME.res ("passed failed skipped seconds")
  local name=$1; shift
  local out="$log/$name.log" t0=$(date +%s)
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
  echo "$p $f $s $(( $(date +%s) - t0 ))" > "$log/$name.res"
}

report() { # name: its line, and the log's non-ok lines when something failed
  local name=$1 p f s t
  read -r p f s t < "$log/$name.res"
  printf '%-40s %4d passed %3d failed %3d skipped  (%ds)\n' "$name" "$p" "$f" "$s" "$t"
  if [ "$f" != 0 ]; then sed 's/^/    /' "$log/$name.log" | grep -v '^    ok ' | tail -n 40; fi
}

# what to run: name and command, the heavy scripts first
jobs_list=()
for h in $HEAVY; do [ -f "tests/e2e/$h" ] && jobs_list+=("$h"); done
for s in tests/e2e/*.sh; do
  n=$(basename "$s")
  [ "$n" != lib.sh ] || continue
  case " $(echo $HEAVY) " in *" $n "*) ;; *) jobs_list+=("$n") ;; esac
done
for t in "$BUILD"/tests/test_*; do
  [ -x "$t" ] && [ -f "tests/unit/$(basename "$t").c" ] && jobs_list+=("$(basename "$t")")   # skip stale binaries
done

# the zoo models several scripts read, exported once (zoo.py skips what is up to date)
if /usr/bin/python3 -c "import torch, torchvision" 2>/dev/null; then
  /usr/bin/python3 scripts/zoo.py --opset 13 --models \
    mobilenet_v3_small,resnet18,vit_tiny,lraspp_mobilenet_v3_large,yolov8n_like,yolov8n_like_nms,mobilenet_v3_large \
    > "$log/zoo.txt" 2>&1 || { echo "scripts/zoo.py could not export the zoo models:"; tail -n 5 "$log/zoo.txt"; }
fi

# the text lines on the photos that several scripts read (tests/oracle/textimages.py), made once
if [ ! -f build/textphotos/.done ] && [ -d build/photos ]; then
  /usr/bin/python3 tests/oracle/textimages.py build/photos build/textphotos > "$log/text.txt" 2>&1 &&
    touch build/textphotos/.done || { echo "tests/oracle/textimages.py failed:"; tail -n 5 "$log/text.txt"; }
fi

declare -A pid_of=()
start() {
  local n=$1
  case $n in
    test_*) run_one "$n" "$BUILD/tests/$n" & ;;
    *) run_one "$n" bash "tests/e2e/$n" & ;;
  esac
  pid_of[$!]=$n
}
reap() { # waits for one program to end and reports it
  local p
  wait -n
  for p in "${!pid_of[@]}"; do
    if ! kill -0 "$p" 2>/dev/null; then
      wait "$p" 2>/dev/null
      report "${pid_of[$p]}"
      unset "pid_of[$p]"
    fi
  done
}
for n in "${jobs_list[@]}"; do
  while [ "${#pid_of[@]}" -ge "$JOBS" ]; do reap; done
  start "$n"
done
while [ "${#pid_of[@]}" -gt 0 ]; do reap; done

passed=0; failed=0; skipped=0
for n in "${jobs_list[@]}"; do
  if [ -f "$log/$n.res" ]; then read -r p f s t < "$log/$n.res"
  else p=0; f=1; s=0; echo "$n: no result"; fi
  passed=$((passed + p)); failed=$((failed + f)); skipped=$((skipped + s))
done
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" = 0 ]

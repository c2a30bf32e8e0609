#!/usr/bin/env bash
# A command's outputs are one set (io/file.h, docs/reference.md "Outputs"): written to temporary
# files, renamed into place only when every one was written, the model last. Checked here on
# PP-OCR's small classifier (under a second a run):
#  - a full disk (a tmpfs filled up) for each output option of each command: the message names
#    the OS reason ("No space left on device") and the previous files stay byte for byte;
#  - a failing later output (a folder in the way, a read-only file system) leaves the previous set;
#  - SIGINT, SIGTERM, SIGHUP and SIGKILL at random points of a quantize leave the previous set or
#    the whole new one and no temporary file, and the message says which; a signal sent while the
#    set is being renamed (PTQ_COMMIT_PAUSE_MS, a test hook, pauses between renames; the model is
#    still the previous one when the first file is new: it is renamed last) waits until
#    the set is complete; named temporary files (PTQ_TMPFILE=named, a test hook: the path of file
#    systems without O_TMPFILE) are removed by the signal handler;
#  - two runs on the same outputs at once end with one run's whole set; a run waits (and says so)
#    while another holds the folder's lock; temporary files of a killed run are removed by the next;
#  - a SIGKILL between two renames (PTQ_TEST_KILL_AFTER_RENAME=1, a test hook) leaves a mixed set
#    and the commit journal: the next run writing into that folder completes the set and says so.
# The tmpfs checks need root (mount); they are skipped with the reason otherwise.
. "$(dirname "$0")/lib.sh"
CLS=$MODELS/ch_ppocr_mobile_v2.0_cls_infer.onnx
PHOTOS=$ROOT/build/photos
Q="$PTQ quantize $CLS --images $PHOTOS --preset paddleocr-cls"
OUTS="m.onnx m.cache m.json m.ptqstats m.report"
# set A and set B differ in every file (B: other images, method and an excluded node)
qA() { $Q --limit 4 --method max -o "$1/m.onnx" --cache "$1/m.cache" --json "$1/m.json" --stats "$1/m.ptqstats" --report "$1/m.report"; }
qB() { $Q --limit 3 --method percentile:99.99 --exclude-nodes p2o.Conv.0 -o "$1/m.onnx" --cache "$1/m.cache" --json "$1/m.json" \
         --stats "$1/m.ptqstats" --report "$1/m.report"; }
qBx() { exec $Q --limit 3 --method percentile:99.99 --exclude-nodes p2o.Conv.0 -o "$1/m.onnx" --cache "$1/m.cache" --json "$1/m.json" \
          --stats "$1/m.ptqstats" --report "$1/m.report" "${@:2}"; } # in the background: $! is ptq itself
rm -rf "$TMP/A" "$TMP/B"; mkdir -p "$TMP/A" "$TMP/B"
ref_sets() {
  qA "$TMP/A" 2>/dev/null && qB "$TMP/B" 2>/dev/null || return 1
  for f in $OUTS; do ! cmp -s "$TMP/A/$f" "$TMP/B/$f" || { echo "$f: the same in A and B"; return 1; }; done
}
check "two reference sets, A and B, that differ in every file" ref_sets

# which_set DIR: prints A or B when all five files equal that set's, else what is mixed
which_set() {
  local d=$1 a=0 b=0 s=
  for f in $OUTS; do
    if cmp -s "$d/$f" "$TMP/A/$f"; then a=$((a + 1)); s="$s $f:A"
    elif cmp -s "$d/$f" "$TMP/B/$f"; then b=$((b + 1)); s="$s $f:B"
    else s="$s $f:other"; fi
  done
  if [ $a = 5 ]; then echo A; elif [ $b = 5 ]; then echo B; else echo "mixed:$s"; fi
}
temps() { ls -a "$@" 2>/dev/null | grep -F '.ptq.tmp.'; } # temporary files left (prints them)
fresh() { rm -rf "$1"; mkdir -p "$1"; cp "$TMP/A"/* "$1/"; }  # DIR holding set A

# --- a full disk, each output in turn ---------------------------------------------------------
FULL=$TMP/full
can_mount() {
  mkdir -p "$FULL"; umount "$FULL" 2>/dev/null
  mount -t tmpfs -o size=1m tmpfs "$FULL" 2>/dev/null && umount "$FULL"
}
# full_disk NAME OLD CMD...: NAME is the output put on a full tmpfs ($FULL/NAME, holding a copy of
# OLD); the others are in $TMP/D holding set A. The command must fail naming ENOSPC, and leave
# $FULL/NAME and every file of $TMP/D as they were, and no temporary file.
full_disk() {
  local name=$1 old=$2; shift 2
  fresh "$TMP/D"
  mount -t tmpfs -o size=1m tmpfs "$FULL" || return 1
  cp "$old" "$FULL/$name"
  head -c 4M /dev/zero > "$FULL/filler" 2>/dev/null # fills what is left
  local out rc
  out=$("$@" 2>&1 >/dev/null); rc=$?
  local bad=
  [ $rc = 1 ] || bad="exit $rc"
  echo "$out" | grep -q 'No space left on device' || bad="$bad; message lacks ENOSPC's text"
  echo "$out" | grep -q 'no output written (the previous files are unchanged)' || bad="$bad; message does not say what stands"
  cmp -s "$old" "$FULL/$name" || bad="$bad; $name changed"
  [ "$(which_set "$TMP/D")" = A ] || bad="$bad; the other outputs: $(which_set "$TMP/D")"
  [ -z "$(temps "$FULL" "$TMP/D")" ] || bad="$bad; temporary files left: $(temps "$FULL" "$TMP/D")"
  umount "$FULL"
  [ -z "$bad" ] || { echo "$bad: $out"; return 1; }
  echo "$out" | tail -n 1
}
if [ "$(id -u)" != 0 ] || ! can_mount; then
  skip "a full disk for each output option" "mounting a tmpfs needs root"
else
  D=$TMP/D
  for o in o:m.onnx cache:m.cache json:m.json stats:m.ptqstats report:m.report; do
    opt=${o%%:*} f=${o#*:}
    args=(-o "$D/m.onnx" --cache "$D/m.cache" --json "$D/m.json" --stats "$D/m.ptqstats" --report "$D/m.report")
    for i in "${!args[@]}"; do [ "${args[$i]}" = "$D/$f" ] && args[$i]=$FULL/$f; done
    lbl=--$opt; [ "$opt" = o ] && lbl=-o
    check "quantize, $lbl on a full disk: ENOSPC named, the previous set unchanged" \
      full_disk "$f" "$TMP/A/$f" $Q --limit 3 --method percentile:99.99 "${args[@]}"
  done
  for o in cache:c.cache json:c.json stats:c.ptqstats; do
    opt=${o%%:*} f=${o#*:}
    check "calibrate, --$opt on a full disk: ENOSPC named, the previous file unchanged" \
      full_disk "$f" "$TMP/A/m.json" "$PTQ" calibrate "$CLS" --images "$PHOTOS" --preset paddleocr-cls --limit 3 --cache "$D/m.cache" \
      --json "$D/m.json" "--$opt" "$FULL/$f"
  done
  check "convert -o on a full disk" full_disk c.onnx "$TMP/A/m.onnx" "$PTQ" convert "$CLS" -o "$FULL/c.onnx"
  check "stats merge -o on a full disk" full_disk s.ptqstats "$TMP/A/m.ptqstats" "$PTQ" stats merge "$TMP/A/m.ptqstats" -o "$FULL/s.ptqstats"
  check "preprocess --dump on a full disk" full_disk p.npy "$TMP/A/m.json" "$PTQ" preprocess --images "$PHOTOS" --preset paddleocr-cls --limit 3 --dump "$FULL/p.npy"
  check "translate on a full disk (its four files)" full_disk t_noqdq.onnx "$TMP/A/m.onnx" "$PTQ" translate "$TMP/A/m.onnx" -o "$FULL/t"
  mkdir -p "$TMP/eval"; cp "$PHOTOS/text.png" "$PHOTOS/page.png" "$TMP/eval/" 2>/dev/null
  for o in json:r.json html:r.html; do
    opt=${o%%:*} f=${o#*:}
    check "compare --$opt on a full disk" full_disk "$f" "$TMP/A/m.report" "$PTQ" compare "$CLS" --images "$PHOTOS" --eval-images "$TMP/eval" \
      --preset paddleocr-cls --limit 3 --methods max --json "$D/r.json" --html "$D/r.html" "--$opt" "$FULL/$f"
  done
fi

# --- a later output that cannot be written --------------------------------------------------
folder_in_the_way() {
  fresh "$TMP/D"; rm "$TMP/D/m.report"; mkdir "$TMP/D/m.report"
  local out rc
  out=$(qB "$TMP/D" 2>&1 >/dev/null); rc=$?
  rmdir "$TMP/D/m.report"; cp "$TMP/A/m.report" "$TMP/D/m.report"
  [ $rc = 1 ] && [ "$(which_set "$TMP/D")" = A ] && [ -z "$(temps "$TMP/D")" ] || { echo "rc $rc, $(which_set "$TMP/D"): $out"; return 1; }
  echo "$out" | grep -q "m.report: is a folder; no output written" || { echo "message: $out"; return 1; }
  echo "$out"
}
check "a folder where --report goes: exit 1, the model, cache, JSON and stats stay the previous set" folder_in_the_way
read_only() {
  fresh "$TMP/D"; mkdir -p "$TMP/ro"; umount "$TMP/ro" 2>/dev/null
  mount -t tmpfs -o ro,size=64k tmpfs "$TMP/ro" || return 1
  local out rc
  out=$($Q --limit 3 -o "$TMP/D/m.onnx" --cache "$TMP/D/m.cache" --json "$TMP/ro/m.json" 2>&1 >/dev/null); rc=$?
  umount "$TMP/ro"
  [ $rc = 1 ] && [ "$(which_set "$TMP/D")" = A ] && [ -z "$(temps "$TMP/D")" ] || { echo "rc $rc, $(which_set "$TMP/D"): $out"; return 1; }
  echo "$out" | grep -q "Read-only file system; no output written" || { echo "message: $out"; return 1; }
  echo "$out"
}
if [ "$(id -u)" != 0 ] || ! can_mount; then skip "--json on a read-only file system" "mounting a tmpfs needs root"
else check "--json on a read-only file system: exit 1, the model and cache stay the previous set" read_only; fi

# --- signals --------------------------------------------------------------------------------
# signals N: N runs of B over set A, each sent SIG at a random time in [0, 1.5 s) (a run takes
# about 0.8 s here); after each the folder holds A or B whole, no temporary file, and the exit
# status and message agree with what is there.
signals() {
  local n=$1 sig out rc got bad=0 seen=
  RANDOM=7
  for i in $(seq "$n"); do
    sig=$(echo INT TERM HUP KILL | cut -d' ' -f$((i % 4 + 1)))
    fresh "$TMP/S"
    qBx "$TMP/S" 2>"$TMP/sig.err" & local pid=$!
    sleep "0.$(printf %03d $((RANDOM % 1000)))"; [ $((RANDOM % 2)) = 0 ] && sleep 0.5
    kill -s "$sig" $pid 2>/dev/null; wait $pid; rc=$?
    got=$(which_set "$TMP/S"); out=$(cat "$TMP/sig.err")
    case "$rc:$got" in
      0:B) ;;                                                         # finished before the signal
      130:A|143:A|129:A) echo "$out" | grep -q 'interrupted; no output written' || { echo "run $i SIG$sig: set A but: $out"; bad=1; } ;;
      130:B|143:B|129:B) echo "$out" | grep -q 'interrupted after every output was written' || { echo "run $i SIG$sig: set B but: $out"; bad=1; } ;;
      137:A|137:B) ;;
      *) echo "run $i SIG$sig: exit $rc, $got: $out"; bad=1 ;;
    esac
    [ -z "$(temps "$TMP/S")" ] || { echo "run $i SIG$sig: temporary files left: $(temps "$TMP/S")"; bad=1; }
    seen="$seen $sig:$rc:${got:0:5}"
  done
  [ $bad = 0 ] && echo "$n runs:$seen" | cut -c1-300
}
check "SIGINT/TERM/HUP/KILL at random points of 32 quantize runs: the previous set or the new one, no temporary file" signals 32
# where the file system has no O_TMPFILE: the signal comes once the named temporary file of
# --stats exists (written after the calibration pass; bias correction then runs before the set
# is renamed); a run that ends before the poll sees the file is tried again, up to 5 times
named_signal() {
  local sig=$1 rc out pid seen=
  for _ in 1 2 3 4 5; do
    fresh "$TMP/S"
    PTQ_TMPFILE=named qBx "$TMP/S" --bias-correction 2>"$TMP/sig.err" & pid=$!
    while kill -0 $pid 2>/dev/null && [ -z "$(temps "$TMP/S")" ]; do sleep 0.01; done
    seen=$(temps "$TMP/S")
    [ -n "$seen" ] && break
    wait $pid
  done
  kill -s "$sig" $pid; wait $pid; rc=$?; out=$(cat "$TMP/sig.err")
  [ -n "$seen" ] && [ "$(which_set "$TMP/S")" = A ] && [ -z "$(temps "$TMP/S")" ] && echo "$out" | grep -q 'interrupted; no output written' ||
    { echo "rc $rc, seen '$seen', $(which_set "$TMP/S"), left '$(temps "$TMP/S")': $out"; return 1; }
  echo "exit $rc, $(echo $seen) removed"
}
for s in INT TERM HUP; do
  check "PTQ_TMPFILE=named: SIG$s while a named temporary file exists: the previous set, the file removed" named_signal $s
done
in_commit() { # SIG sent while the set is being renamed (1 s between renames): the set completes
  local sig=$1 rc out
  fresh "$TMP/S"
  PTQ_COMMIT_PAUSE_MS=1000 qBx "$TMP/S" 2>"$TMP/sig.err" & local pid=$!
  while kill -0 $pid 2>/dev/null && ! cmp -s "$TMP/S/m.cache" "$TMP/B/m.cache"; do sleep 0.02; done # the first rename done
  local model_then=A; cmp -s "$TMP/S/m.onnx" "$TMP/A/m.onnx" || model_then=new # the model is renamed last
  kill -s "$sig" $pid; wait $pid; rc=$?; out=$(cat "$TMP/sig.err")
  [ $model_then = A ] && [ "$(which_set "$TMP/S")" = B ] && [ -z "$(temps "$TMP/S")" ] &&
    echo "$out" | grep -q 'interrupted after every output was written' ||
    { echo "rc $rc, the model $model_then when the cache was new, $(which_set "$TMP/S"): $out"; return 1; }
  echo "exit $rc: $(echo "$out" | tail -n 1)"
}
for s in INT TERM HUP; do
  check "SIG$s between two renames waits: the whole new set, and the message says so" in_commit $s
done

# --- concurrent runs and the lock -----------------------------------------------------------
concurrent() {
  local bad=0 got
  for i in 1 2 3 4; do
    fresh "$TMP/C"
    qA "$TMP/C" 2>/dev/null & local p1=$!
    qB "$TMP/C" 2>/dev/null & local p2=$!
    wait $p1 && wait $p2 || { echo "a run failed"; bad=1; }
    got=$(which_set "$TMP/C")
    case $got in A|B) ;; *) echo "pair $i: $got"; bad=1 ;; esac
    [ -z "$(temps "$TMP/C")" ] || { echo "pair $i: temporary files left"; bad=1; }
    echo -n "$got "
  done
  [ $bad = 0 ]
}
check "two runs on the same outputs at once, 4 times: each time one run's whole set" concurrent
lock_wait() { # another process holds the folder's lock until ptq says it waits: then ptq writes
  fresh "$TMP/L"; rm -f "$TMP/release" "$TMP/lock.err" # (a previous run's lock.err would end the wait below at once)
  flock "$TMP/L" sh -c "while [ ! -e '$TMP/release' ]; do sleep 0.05; done" & local holder=$!
  while flock -n "$TMP/L" true; do sleep 0.05; done # until the holder has it
  qBx "$TMP/L" 2>"$TMP/lock.err" >/dev/null & local pid=$!
  while kill -0 $pid 2>/dev/null && ! grep -q waiting "$TMP/lock.err"; do sleep 0.05; done
  local held=0; kill -0 $pid 2>/dev/null && held=1 # still running: waiting for the lock
  touch "$TMP/release"; wait $holder
  wait $pid; local rc=$? out; out=$(cat "$TMP/lock.err")
  [ $held = 1 ] || { echo "ptq did not wait: $out"; return 1; }
  [ $rc = 0 ] && [ "$(which_set "$TMP/L")" = B ] && echo "$out" | grep -q "ptq: waiting for another ptq writing into $TMP/L" ||
    { echo "rc $rc, $(which_set "$TMP/L"): $out"; return 1; }
  echo "$out" | grep waiting
}
check "a folder locked by another process: ptq says it waits, then writes its set" lock_wait
stale() { # a temporary file of a process that is gone is removed by the next run; a live one's stays
  fresh "$TMP/T"
  sh -c 'exit 0' & local dead=$!; wait $dead
  touch "$TMP/T/m.onnx.ptq.tmp.$dead" "$TMP/T/m.cache.ptq.tmp.$$"
  qB "$TMP/T" 2>/dev/null || return 1
  [ ! -e "$TMP/T/m.onnx.ptq.tmp.$dead" ] && [ -e "$TMP/T/m.cache.ptq.tmp.$$" ] || { ls "$TMP/T"; return 1; }
  rm "$TMP/T/m.cache.ptq.tmp.$$"; echo "removed m.onnx.ptq.tmp.$dead (pid gone), kept m.cache.ptq.tmp.$$ (pid alive)"
}
check "a killed run's temporary file is removed by the next run into that folder" stale
journal() { # SIGKILL after the first rename (PTQ_TEST_KILL_AFTER_RENAME=1, a test hook) leaves a mixed
  # set and the commit journal; the next ptq writing into that folder completes the set, says so in one
  # line, and leaves no journal nor .ptq-new file
  fresh "$TMP/J"
  PTQ_TEST_KILL_AFTER_RENAME=1 qB "$TMP/J" 2>"$TMP/j.err"; local rc=$? now
  now=$(which_set "$TMP/J")
  [ $rc = 137 ] && [ "${now#mixed}" != "$now" ] && ls -a "$TMP/J" | grep -q '^\.m\.onnx\.ptq-journal\.' &&
    ls -a "$TMP/J" | grep -q '^\.m\.onnx\.ptq-new\.' || { echo "after the kill: rc $rc, $now, $(ls -a "$TMP/J" | tr '\n' ' ')"; return 1; }
  echo "after the kill: $now"
  $Q --limit 2 -o "$TMP/J/other.onnx" 2>"$TMP/j.err" || { cat "$TMP/j.err"; return 1; }
  [ "$(which_set "$TMP/J")" = B ] && [ -z "$(ls -a "$TMP/J" | grep -E '\.ptq-|\.ptq\.tmp')" ] &&
    [ "$(grep -c 'completed the output set of an interrupted ptq' "$TMP/j.err")" = 1 ] ||
    { echo "after the next run: $(which_set "$TMP/J"), $(ls -a "$TMP/J" | tr '\n' ' '): $(cat "$TMP/j.err")"; return 1; }
  grep 'completed the output set' "$TMP/j.err"
}
check "SIGKILL between two renames: the next run into the folder completes the set (commit journal)" journal
journal_gone() { # the same, but the model's new file was removed meanwhile: the rest is removed and
  # the message names the outputs that are new (the only one: the first renamed)
  fresh "$TMP/J"
  PTQ_TEST_KILL_AFTER_RENAME=1 qB "$TMP/J" 2>/dev/null
  local first; first=$(which_set "$TMP/J" | grep -o '[a-z.]*:B' | cut -d: -f1)
  rm -f "$TMP/J"/.m.onnx.ptq-new.*
  $Q --limit 2 -o "$TMP/J/other.onnx" 2>"$TMP/j.err" || { cat "$TMP/j.err"; return 1; }
  [ -n "$first" ] && [ "$(which_set "$TMP/J")" = "mixed: m.onnx:A $(for f in m.cache m.json m.ptqstats m.report; do
      [ $f = "$first" ] && echo -n "$f:B " || echo -n "$f:A "; done | sed 's/ $//')" ] &&
    [ -z "$(ls -a "$TMP/J" | grep -E '\.ptq-|\.ptq\.tmp')" ] &&
    grep -q "removed the leftovers of an interrupted ptq (pid [0-9]*); new: $TMP/J/$first; the others are the previous files" "$TMP/j.err" ||
    { echo "first renamed: $first; now $(which_set "$TMP/J"), $(ls -a "$TMP/J" | tr '\n' ' '): $(cat "$TMP/j.err")"; return 1; }
  grep 'removed the leftovers' "$TMP/j.err"
}
check "SIGKILL between two renames, a file of the set gone: the rest removed, the new outputs named" journal_gone
finish

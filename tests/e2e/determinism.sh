#!/usr/bin/env bash
# Same bytes on every machine (issue 11): for det, cls and rec, everything ptq writes is
# byte-identical whatever the kernel path, the thread count, the batch size or OpenBLAS's
# environment. Each check changes ONE thing from the baseline and compares, with cmp, every
# file of that run to the baseline's:
#   quantize --method entropy: the QDQ model, the TensorRT cache, the ranges JSON and the
#     statistics file (--stats);
#   calibrate --from-stats --method all on that statistics file: a cache and a JSON per
#     method (max, percentile 99.9/99.99/99.999, entropy, mse): every calibrator's result;
#   ptq run of the FP32 model and of the BASELINE's QDQ model (the same file in every run,
#     so only the executor varies) on the same 4 images: every output, bit for bit.
# Baseline: PTQ_ISA, OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE unset (ptq picks the best ISA
# the CPU has), default --threads (all cores), --batch 2 (two batches of 2 images). Axes:
#   PTQ_ISA=avx512|avx2|generic: each path the CPU can run (avx512f; avx2 and fma; always
#     generic); a path it lacks must be refused with a one-line error instead;
#   --threads 1, 2, 3;
#   --batch 1, 3, 8 (4 images: 1+1+1+1, 3+1, 4 against the baseline's 2+2); ptq run takes
#     the batch from its input, so it runs each image alone and the 4 images tiled into a
#     batch of 8: each image's outputs must equal the baseline's, at every position;
#   OPENBLAS_CORETYPE=Haswell, SkylakeX, Zen (Zen with OPENBLAS_L2_SIZE=512).
# With OpenBLAS (before ptq's own GEMM) the OPENBLAS_CORETYPE checks failed on an AVX-512
# CPU and det's convolutions rounded differently with the batch size. `ptq --version` names
# the GEMM path in use, so each PTQ_ISA check first asserts that the variable took effect.
# Small inputs keep the scalar generic path fast: 4 photos, det at 320x320 (its preset with
# the size changed; DB's det network is fully convolutional, any multiple of 32 works).
. "$(dirname "$0")/lib.sh"
export OMP_WAIT_POLICY=passive # 2 cores shared with other jobs: no spinning OpenMP threads
PHOTOS=$ROOT/build/photos
printf "$PHOTOS/%s\n" chelsea.png coins.png page.png text.png > "$TMP/images.list"
sed -e 's/^width: .*/width: 320/' -e 's/^height: .*/height: 320/' "$ROOT/configs/paddleocr-det.yaml" > "$TMP/det320.yaml"
declare -A MODEL=([det]=ch_PP-OCRv4_det_infer [cls]=ch_ppocr_mobile_v2.0_cls_infer [rec]=ch_PP-OCRv4_rec_infer)
declare -A PRESET=([det]=$TMP/det320.yaml [cls]=paddleocr-cls [rec]=paddleocr-rec)
FLAGS=" $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2) "
has() { for f; do [[ $FLAGS == *" $f "* ]] || return 1; done; }

cat > "$TMP/npy.py" <<'PYEOF'
# pick IN OUT I,J,...: the listed images of IN (axis 0) as a new batch.
# fold OUTDIR I,J,...:DIR ...: each DIR holds one run's outputs (*.npy) over the listed
#   images; writes OUTDIR/NAME.npy with images 0..n-1 in order, after checking that every
#   copy of an image is bit for bit the same wherever it sat in its batch.
# diff A B: how many values differ (bitwise) and by how much at most.
import os, sys, numpy as np
cmd, a = sys.argv[1], sys.argv[2:]
bits = lambda x: np.ascontiguousarray(x).view(np.uint8).reshape(x.shape[0], -1)
if cmd == "pick":
    np.save(a[1], np.load(a[0])[[int(i) for i in a[2].split(",")]])
elif cmd == "fold":
    runs = [(list(map(int, s.split(":", 1)[0].split(","))), s.split(":", 1)[1]) for s in a[1:]]
    for name in sorted(os.listdir(runs[0][1])):
        seen = {}
        for idx, d in runs:
            x = np.load(os.path.join(d, name))
            for pos, i in enumerate(idx):
                if i in seen and not np.array_equal(bits(seen[i][None]), bits(x[pos:pos + 1])):
                    sys.exit(f"{name}: image {i} differs between two positions or batches")
                seen.setdefault(i, x[pos])
        np.save(os.path.join(a[0], name), np.stack([seen[i] for i in range(len(seen))]))
elif cmd == "diff":
    x, y = np.load(a[0]), np.load(a[1])
    if x.shape != y.shape or x.dtype != y.dtype:
        sys.exit(print(f"{x.dtype}{x.shape} vs {y.dtype}{y.shape}"))
    u = f"u{x.dtype.itemsize}"
    n = int((np.ascontiguousarray(x).view(u) != np.ascontiguousarray(y).view(u)).sum())
    print(f"{n} of {x.size} values differ, max |d| {np.abs(x.astype(np.float64) - y.astype(np.float64)).max():.3g}")
PYEOF
npy() { $PY "$TMP/npy.py" "$@"; }

# produce KEY NAME THREADS BATCH [VAR=VALUE...]: one run of everything into $TMP/KEY.NAME
# (THREADS - for ptq's default); the environment is the baseline's plus the VARs.
produce() {
  local key=$1 name=$2 threads=$3 batch=$4; shift 4
  local d=$TMP/$key.$name m=$MODELS/${MODEL[$key]}.onnx e=$TMP/$key.eval
  local E=(env -u PTQ_ISA -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "$@") T=()
  [ "$threads" = - ] || T=(--threads "$threads")
  rm -rf "$d"; mkdir -p "$d"
  "${E[@]}" "$PTQ" quantize "$m" --images "$TMP/images.list" --preset "${PRESET[$key]}" --method entropy \
    --batch "$batch" "${T[@]}" -o "$d/q.onnx" --cache "$d/q.cache" --json "$d/q.json" --stats "$d/q.ptqstats" 2>"$d.err" &&
  "${E[@]}" "$PTQ" calibrate "$m" --from-stats "$d/q.ptqstats" --method all "${T[@]}" \
    --cache "$d/all.cache" --json "$d/all.json" 2>>"$d.err" || { tail -n 3 "$d.err"; return 1; }
  local src=$TMP/$key.base/q.onnx what runs i
  [ "$name" = base ] && src=$d/q.onnx
  case $batch in # ptq run: the batch is the input's; the outputs are folded back to images 0..3
    1) runs="0 1 2 3" ;;
    8) runs="0,1,2,3,0,1,2,3" ;;
    *) runs="0,1,2,3" ;;
  esac
  for what in fp32:$m qdq:$src; do
    local folds=()
    for i in $runs; do
      local in=$e.$i.npy
      [ "$i" = 0,1,2,3 ] && in=$e.npy
      [ -f "$in" ] || npy pick "$e.npy" "$in" "$i" || return 1
      "${E[@]}" "$PTQ" run "${what#*:}" --input "$in" "${T[@]}" --output-dir "$d/${what%%:*}.$i" >/dev/null 2>>"$d.err" ||
        { tail -n 3 "$d.err"; return 1; }
      folds+=("$i:$d/${what%%:*}.$i")
    done
    mkdir -p "$d/${what%%:*}" && npy fold "$d/${what%%:*}" "${folds[@]}" && rm -rf "$d/${what%%:*}".*/ || return 1
  done
}

# same KEY NAME: every file of the baseline's run identical in run NAME; otherwise says how
# many bytes, lines or values differ in each file that does
same() {
  local b=$TMP/$1.base x=$TMP/$1.$2 f n=0 bad=0
  while read -r f; do
    n=$((n + 1))
    [ -f "$x/$f" ] || { echo "$f: missing"; bad=$((bad + 1)); continue; }
    cmp -s "$b/$f" "$x/$f" && continue
    bad=$((bad + 1))
    case $f in
      *.npy) echo "$f: $(npy diff "$b/$f" "$x/$f")" ;;
      *.cache|*.json) echo "$f: $(diff "$b/$f" "$x/$f" | grep -c '^>') of $(wc -l < "$b/$f") lines differ" ;;
      *) echo "$f: $(cmp -l "$b/$f" "$x/$f" 2>/dev/null | wc -l) bytes differ (sizes $(stat -c %s "$b/$f") and $(stat -c %s "$x/$f"))" ;;
    esac
  done < <(cd "$b" && find . -type f | sed 's|^\./||' | LC_ALL=C sort)
  [ $bad = 0 ] && echo "$n files identical"
}

# a run with one thing changed: KEY NAME THREADS BATCH [VAR=VALUE...]
vary() { produce "$@" && same "$1" "$2"; }

refused_isa() { # KEY ISA: forcing a path the CPU lacks exits non-zero with one line
  local err
  if err=$(PTQ_ISA=$2 "$PTQ" quantize "$MODELS/${MODEL[$1]}.onnx" --images "$TMP/images.list" \
             --preset "${PRESET[$1]}" -o "$TMP/$1.noisa.onnx" 2>&1 >/dev/null); then
    echo "PTQ_ISA=$2 accepted on a CPU without it"; return 1
  fi
  [ "$(echo "$err" | wc -l)" = 1 ] && [ ! -e "$TMP/$1.noisa.onnx" ] && echo "$err"
}

t0=$(date +%s)
for key in det cls rec; do
  [ -f "$MODELS/${MODEL[$key]}.onnx" ] || { check "$key: model present (make deps)" false; continue; }
  "$PTQ" preprocess --images "$TMP/images.list" --preset "${PRESET[$key]}" --dump "$TMP/$key.eval.npy" 2>/dev/null
  rm -f "$TMP/$key".eval.?*.npy
  check "$key: baseline (default ISA and threads, --batch 2): quantize, calibrate --method all, run FP32 and QDQ" \
    produce $key base - 2
  for isa in avx512 avx2 generic; do
    case $isa in avx512) need=avx512f ;; avx2) need="avx2 fma" ;; *) need= ;; esac
    if has $need; then
      check "$key: PTQ_ISA=$isa is the path in use" bash -c "PTQ_ISA=$isa '$PTQ' --version | grep -q 'GEMM path $isa)'"
      check "$key: PTQ_ISA=$isa: byte-identical to the baseline" vary $key isa-$isa - 2 PTQ_ISA=$isa
    elif [ "$key" = det ]; then
      check "$key: PTQ_ISA=$isa on a CPU without $need: refused with one line, nothing written" refused_isa $key $isa
    fi
  done
  for n in 1 2 3; do
    check "$key: --threads $n: byte-identical to the baseline" vary $key threads-$n $n 2
  done
  for n in 1 3 8; do
    case $n in 1) r="each image alone" ;; 3) r="the 4 images" ;; 8) r="the 4 images twice" ;; esac
    check "$key: --batch $n, ptq run on $r: byte-identical to the baseline" vary $key batch-$n - $n
  done
  for ct in Haswell SkylakeX Zen; do
    l2=(); [ $ct = Zen ] && l2=(OPENBLAS_L2_SIZE=512)
    check "$key: OPENBLAS_CORETYPE=$ct${l2:+ ${l2[*]}}: byte-identical to the baseline" \
      vary $key coretype-$ct - 2 OPENBLAS_CORETYPE=$ct "${l2[@]}"
  done
done
has avx512f && has avx2 fma && skip "PTQ_ISA refused on a CPU that lacks it" "this CPU has every path"
check "PTQ_ISA with an unknown path: refused with one line" bash -c "
  err=\$(PTQ_ISA=sse9 '$PTQ' --version 2>&1 >/dev/null); rc=\$?; echo \"\$err\"
  [ \$rc = 2 ] && [ \$(printf '%s\\n' \"\$err\" | grep -c .) = 1 ] && printf '%s' \"\$err\" | grep -q 'PTQ_ISA=sse9: unknown path'"
echo "$(( $(date +%s) - t0 )) s"
finish

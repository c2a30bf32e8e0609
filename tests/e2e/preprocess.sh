#!/usr/bin/env bash
# Image folders to tensors, on the real photos Debian's python3-skimage ships:
#  - every preset equals what OpenCV / PIL / numpy compute (tests/oracle/preprocess_ref.py)
#    within 1 unit of the 0-255 scale; nearest exactly;
#  - the same tensors at 1 and 2 threads, and --limit / --shuffle --seed reproducible;
#  - a corpus of broken files: each named, counted and skipped (fatal with --strict),
#    never a crash; an empty folder and a folder of only broken files are errors.
. "$(dirname "$0")/lib.sh"
PHOTOS=$ROOT/build/photos
[ -d "$PHOTOS" ] || { echo "FAIL no $PHOTOS (make deps)"; echo "0 passed, 1 failed"; exit 1; }

# within "units" of the 0-255 scale: |a-b| * std / scale
within() { # ptq.npy ref.npy preset max_units
  $PY - "$@" <<'PYEOF'
import sys, numpy as np
sys.path.insert(0, sys.argv[0])
a, b = np.load(sys.argv[1]), np.load(sys.argv[2])
scale, std = {"imagenet-torchvision": (1/255, [0.229, 0.224, 0.225]), "imagenet-caffe": (1, [1, 1, 1]),
              "yolo-letterbox-640": (1/255, [1, 1, 1]), "paddleocr-det": (1/255, [0.485*0 + 0.229, 0.224, 0.225]),
              "paddleocr-rec": (1/255, [0.5] * 3), "paddleocr-cls": (1/255, [0.5] * 3),
              "paddleocr-det-nearest": (1/255, [0.229, 0.224, 0.225])}[sys.argv[3]]
assert a.shape == b.shape, f"shape {a.shape} != reference {b.shape}"
units = np.abs(a - b) * np.array(std, np.float64).reshape(1, 3, 1, 1) / scale
worst = units.max()
print(f"{a.shape[0]} images, worst {worst:.4f} units of 0-255")
sys.exit(0 if worst <= float(sys.argv[4]) + 1e-3 else 1)
PYEOF
}

for p in imagenet-torchvision imagenet-caffe yolo-letterbox-640 paddleocr-det paddleocr-cls paddleocr-rec; do
  check "preset $p equals the OpenCV/PIL reference within 1 unit" bash -c "
    $PY '$ROOT/tests/oracle/preprocess_ref.py' '$PHOTOS' $p '$TMP/ref_$p.npy' 2>/dev/null &&
    '$PTQ' preprocess --images '$PHOTOS' --preset $p --dump '$TMP/ptq_$p.npy' --threads 2 2>/dev/null &&
    $(declare -f within); PY=$PY; within '$TMP/ptq_$p.npy' '$TMP/ref_$p.npy' $p 1"
done
check "nearest resize equals OpenCV INTER_NEAREST exactly" bash -c "
  $PY '$ROOT/tests/oracle/preprocess_ref.py' '$PHOTOS' paddleocr-det-nearest '$TMP/ref_nearest.npy' 2>/dev/null &&
  '$PTQ' preprocess --images '$PHOTOS' --preset paddleocr-det --resize nearest --dump '$TMP/ptq_nearest.npy' 2>/dev/null &&
  $(declare -f within); PY=$PY; within '$TMP/ptq_nearest.npy' '$TMP/ref_nearest.npy' paddleocr-det-nearest 0"
check "1 and 2 threads give byte-identical tensors" bash -c "
  '$PTQ' preprocess --images '$PHOTOS' --preset paddleocr-det --threads 1 --dump '$TMP/t1.npy' 2>/dev/null &&
  cmp '$TMP/t1.npy' '$TMP/ptq_paddleocr-det.npy'"
check "--shuffle --seed is reproducible and --limit keeps N images" bash -c "
  '$PTQ' preprocess --images '$PHOTOS' --preset paddleocr-cls --shuffle --seed 3 --limit 5 --dump '$TMP/s1.npy' 2>/dev/null &&
  '$PTQ' preprocess --images '$PHOTOS' --preset paddleocr-cls --shuffle --seed 3 --limit 5 --dump '$TMP/s2.npy' 2>/dev/null &&
  '$PTQ' preprocess --images '$PHOTOS' --preset paddleocr-cls --shuffle --seed 4 --limit 5 --dump '$TMP/s3.npy' 2>/dev/null &&
  cmp '$TMP/s1.npy' '$TMP/s2.npy' && ! cmp -s '$TMP/s1.npy' '$TMP/s3.npy' &&
  $PY -c \"import numpy as np; assert np.load('$TMP/s1.npy').shape[0] == 5\""

# broken files, made here
B=$TMP/broken; rm -rf "$B"; mkdir -p "$B/sub"
$PY - "$B" "$PHOTOS" <<'PYEOF'
import sys, numpy as np
from PIL import Image
b, photos = sys.argv[1], sys.argv[2]
jpg = open(f"{photos}/rocket.jpg", "rb").read()
png = open(f"{photos}/chelsea.png", "rb").read()
open(f"{b}/truncated.jpg", "wb").write(jpg[: len(jpg) // 3])
open(f"{b}/truncated.png", "wb").write(png[: len(png) // 3])
open(f"{b}/zero.jpg", "wb").close()
open(f"{b}/text.jpg", "w").write("this is not an image\n")
Image.new("RGB", (1, 1), (10, 20, 30)).save(f"{b}/one_pixel.png")
# a PNG header promising 100000 x 100000 pixels, and nothing else
import struct, zlib
ihdr = struct.pack(">IIBBBBB", 100000, 100000, 8, 2, 0, 0, 0)
chunk = lambda t, d: struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xffffffff)
open(f"{b}/bomb.png", "wb").write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"\0" * 64)) + chunk(b"IEND", b""))
Image.open(f"{photos}/astronaut.png").convert("CMYK").save(f"{b}/sub/cmyk.jpg", "JPEG")
Image.fromarray((np.arange(48 * 64).reshape(48, 64) * 37 % 65536).astype(np.uint16)).save(f"{b}/sub/gray16.png")
PYEOF
check "broken files are named and skipped; good ones used" bash -c "
  '$PTQ' preprocess --images '$B' --preset paddleocr-cls --dump '$TMP/broken.npy' 2>'$TMP/broken.err'; rc=\$?
  cat '$TMP/broken.err'
  [ \$rc = 0 ] && grep -q 'skipped.*truncated.jpg.*corrupt JPEG' '$TMP/broken.err' &&
  grep -q 'skipped.*truncated.png.*corrupt PNG' '$TMP/broken.err' && grep -q 'skipped.*zero.jpg.*empty file' '$TMP/broken.err' &&
  grep -q 'skipped.*text.jpg.*not a JPEG or PNG' '$TMP/broken.err' && grep -q 'skipped.*bomb.png.*100000x100000.*refused' '$TMP/broken.err' &&
  grep -q '3 images used, 5 skipped' '$TMP/broken.err'"
check "--strict stops at the first broken file, no output written" bash -c "
  rm -f '$TMP/strict.npy'; ! '$PTQ' preprocess --images '$B' --preset paddleocr-cls --strict --dump '$TMP/strict.npy' 2>'$TMP/strict.err' &&
  [ \$(grep -c . '$TMP/strict.err') = 1 ] && grep -q 'bomb.png' '$TMP/strict.err' && [ ! -e '$TMP/strict.npy' ] && cat '$TMP/strict.err'"
mkdir -p "$TMP/empty" "$TMP/allbad"; cp "$B/text.jpg" "$B/zero.jpg" "$TMP/allbad/"
check "an empty folder is an error" bash -c "! '$PTQ' preprocess --images '$TMP/empty' --dump '$TMP/e.npy' 2>'$TMP/e.err' && grep -q 'no JPEG or PNG' '$TMP/e.err' && cat '$TMP/e.err'"
check "a folder with no usable image is an error" bash -c "! '$PTQ' preprocess --images '$TMP/allbad' --dump '$TMP/a.npy' 2>'$TMP/a.err' && grep -q 'no usable image' '$TMP/a.err' && tail -1 '$TMP/a.err'"
check "unknown preset and bad override are one-line errors" bash -c "
  ! '$PTQ' preprocess --images '$PHOTOS' --preset nope --dump x.npy 2>'$TMP/p.err' && grep -q \"preset 'nope' not found\" '$TMP/p.err' &&
  ! '$PTQ' preprocess --images '$PHOTOS' --preset paddleocr-det --mean 1,2 --dump x.npy 2>'$TMP/m.err' && grep -q \"bad value '1,2' for 'mean'\" '$TMP/m.err'"

# decoding, pixel for pixel: every format at its own size through an identity "resize"
F=$TMP/formats; X=$TMP/exif; rm -rf "$F" "$X"; mkdir -p "$F" "$X/on" "$X/off"
$PY - "$F" "$PHOTOS" "$X" <<'PYEOF'
import sys, io, numpy as np
from PIL import Image
f, photos, x = sys.argv[1], sys.argv[2], sys.argv[3]
src = Image.open(f"{photos}/astronaut.png").convert("RGB").resize((40, 30))
src.save(f"{f}/a_baseline.jpg", quality=90)
src.save(f"{f}/b_progressive.jpg", quality=90, progressive=True)
src.save(f"{f}/c_rgb.png")
rgba = src.convert("RGBA"); rgba.putalpha(128); rgba.save(f"{f}/d_rgba.png")
src.convert("L").save(f"{f}/e_gray.png")
src.convert("1").save(f"{f}/f_1bit.png")
src.convert("P", palette=Image.ADAPTIVE, colors=16).save(f"{f}/g_palette4.png", bits=4)
a16 = (np.asarray(src).astype(np.uint16) * 257 + 100).astype(">u2")
import zlib, struct
raw = b"".join(b"\0" + row.tobytes() for row in a16)
chunk = lambda t, d: struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xffffffff)
open(f"{f}/h_rgb16.png", "wb").write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 40, 30, 16, 2, 0, 0, 0)) +
                                     chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))
# EXIF orientation 6 (rotate 90 clockwise to display)
exif = Image.Exif(); exif[0x0112] = 6
src.save(f"{x}/on/exif6.jpg", quality=90, exif=exif.tobytes())
src.save(f"{x}/off/exif6.jpg", quality=90, exif=exif.tobytes())
PYEOF
pixels() { # folder WxH exif -> npy of 0-255 RGB values
  "$PTQ" preprocess --images "$1" --mode stretch --size "$2" --scale 1 --mean 0,0,0 --std 1,1,1 --channel-order RGB \
    --exif "$3" --dump "$4" 2>/dev/null
}
check "decoded pixels equal OpenCV imread (baseline and progressive JPEG, RGB, RGBA, gray, 1-bit, 4-bit palette, 16-bit PNG)" bash -c "
  $(declare -f pixels); PTQ='$PTQ'; pixels '$F' 40x30 on '$TMP/formats.npy' && $PY -c \"
import cv2, numpy as np, glob
got = np.load('$TMP/formats.npy')
names = sorted(glob.glob('$F/*.*'))
assert got.shape[0] == len(names), (got.shape, names)
for g, n in zip(got, names):
    want = cv2.cvtColor(cv2.imread(n, cv2.IMREAD_COLOR), cv2.COLOR_BGR2RGB).transpose(2, 0, 1).astype(np.float32)
    tol = 1 if n.endswith('rgb16.png') else 0  # OpenCV rounds 16 -> 8 bits, ptq keeps the high byte
    assert np.abs(g - want).max() <= tol, (n, np.abs(g - want).max())
print(len(names), 'formats equal')\""
check "--exif on rotates like OpenCV imread, --exif off keeps the stored pixels like PIL" bash -c "
  $(declare -f pixels); PTQ='$PTQ'; pixels '$X/on' 30x40 on '$TMP/exif_on.npy' && pixels '$X/off' 40x30 off '$TMP/exif_off.npy' && $PY -c \"
import cv2, numpy as np
from PIL import Image
on, off = np.load('$TMP/exif_on.npy')[0], np.load('$TMP/exif_off.npy')[0]
cv = cv2.cvtColor(cv2.imread('$X/on/exif6.jpg'), cv2.COLOR_BGR2RGB).transpose(2, 0, 1)
pil = np.asarray(Image.open('$X/off/exif6.jpg').convert('RGB')).transpose(2, 0, 1)
assert cv.shape == on.shape and np.abs(on - cv).max() == 0, 'on vs OpenCV'
assert pil.shape == off.shape and np.abs(off - pil).max() == 0, 'off vs PIL'
print('exif on = OpenCV, off = PIL')\""
check "--dump-png writes what the model sees (normalisation undone)" bash -c "
  rm -rf '$TMP/png'; '$PTQ' preprocess --images '$F' --preset yolo-letterbox-640 --dump-png '$TMP/png' 2>/dev/null &&
  [ \$(ls '$TMP/png' | grep -c png) = 8 ] && $PY -c \"
from PIL import Image; im = Image.open('$TMP/png/000000.png'); assert im.size == (640, 640), im.size
assert im.getpixel((0, 0)) == (114, 114, 114), im.getpixel((0, 0)); print('8 PNGs, letterbox padding 114')\""
# sizes that follow the image (configs/*-dynamic.yaml): every tensor's shape equal to the
# numpy/OpenCV reimplementation of PaddleOCR (tests/oracle/preprocess_ref.py: rec's
# resize_norm_img with max_wh_ratio, det's DetResizeForTest), values within 1 unit like the
# fixed presets. Besides the photos, synthetic images hit the edges: a line wider than
# max_width (4000x40: squeezed to 3200), a narrow crop (20x60: width 320), sides whose
# rounding to 32 is a tie (80x48: 2.5 rounds to 2, 1.5 to 2: 64x64; Python's round), a
# large image scaled down (2000x700: 960x336, then 336 -> 320), and lines bigger than a
# limit_type min's max_side (33x2000 at 736: 736x44608; refused and skipped, named).
D=$TMP/dyn; rm -rf "$D"; mkdir -p "$D"; cp "$PHOTOS"/*.png "$D/"
$PY - "$D" <<'PYEOF'
import sys, numpy as np, cv2
rng = np.random.default_rng(7)
for w, h in [(4000, 40), (20, 60), (80, 48), (2000, 700), (1000, 1000), (33, 2000), (700, 50), (300, 20)]:
    cv2.imwrite(f"{sys.argv[1]}/syn_{w}x{h}.png", rng.integers(0, 256, (h, w, 3), np.uint8))
PYEOF
dyn_same() { # PRESET [overrides...]: ptq's folder of tensors against the oracle's
  local p=$1 ref=$1; shift
  [ "$*" = "--limit-side 736 --limit-type min" ] && ref=paddleocr-det-dynamic-min
  rm -rf "$TMP/dref_$ref" "$TMP/dptq_$ref"
  $PY "$ROOT/tests/oracle/preprocess_ref.py" "$D" $ref "$TMP/dref_$ref" 2>/dev/null &&
  "$PTQ" preprocess --images "$D" --preset $p "$@" --threads 3 --dump "$TMP/dptq_$ref" 2>/dev/null &&
  $PY - "$TMP/dptq_$ref" "$TMP/dref_$ref" $p <<'PYEOF'
import sys, os, numpy as np
a, b = sorted(os.listdir(sys.argv[1])), sorted(os.listdir(sys.argv[2]))
assert a == b, f"{len(a)} tensors, reference {len(b)}"
worst, shapes = 0.0, set()
for f in a:
    x, y = np.load(os.path.join(sys.argv[1], f)), np.load(os.path.join(sys.argv[2], f))
    assert x.shape == y.shape, f"{f}: shape {x.shape} != reference {y.shape}"
    shapes.add(x.shape[2:])
    std = [0.5] * 3 if "rec" in sys.argv[3] else [0.229, 0.224, 0.225]
    worst = max(worst, float((np.abs(x - y) * np.array(std).reshape(1, 3, 1, 1) * 255).max()))
print(f"{len(a)} tensors, {len(shapes)} shapes, worst {worst:.4f} units of 0-255")
sys.exit(0 if worst <= 1 + 1e-3 else 1)
PYEOF
}
check "paddleocr-rec-dynamic equals PaddleOCR resize_norm_img (max_wh_ratio) in shape, values within 1 unit" dyn_same paddleocr-rec-dynamic
[ -f "$ROOT/build/textphotos/.done" ] || { $PY "$ROOT/tests/oracle/textimages.py" "$ROOT/build/photos" "$ROOT/build/textphotos" >/dev/null &&
  touch "$ROOT/build/textphotos/.done"; }
check "paddleocr-rec-dynamic on the text-line crops of build/textphotos/rec, the same" bash -c "
  $(declare -f dyn_same); PY=$PY; PTQ='$PTQ'; ROOT='$ROOT'; TMP='$TMP'; D='$ROOT/build/textphotos/rec'
  dyn_same paddleocr-rec-dynamic"
check "paddleocr-det-dynamic equals PaddleOCR DetResizeForTest (960, max) in shape, values within 1 unit" dyn_same paddleocr-det-dynamic
check "limit_type min (736) equals DetResizeForTest(736, 'min'); an image past max_side is skipped and named" bash -c "
  $(declare -f dyn_same); PY=$PY; PTQ='$PTQ'; ROOT='$ROOT'; TMP='$TMP'; D='$D'
  rm -rf '$D.min' && mkdir -p '$D.min' && cp '$PHOTOS'/*.png '$D'/syn_{80x48,20x60,2000x700,1000x1000}.png '$D.min/' && D='$D.min' &&
  dyn_same paddleocr-det-dynamic --limit-side 736 --limit-type min &&
  '$PTQ' preprocess --images '$TMP/dyn' --preset paddleocr-det-dynamic --limit-side 736 --limit-type min \
    --dump '$TMP/dmin' 2>&1 | grep 'skipped.*syn_33x2000.png.*larger than max_side 4096'"
check "dynamic sizes: the same tensors at 1 and 3 threads" bash -c "
  rm -rf '$TMP'/db[13] && for t in 1 3; do
    '$PTQ' preprocess --images '$D' --preset paddleocr-rec-dynamic --threads \$t --dump '$TMP'/db\$t 2>/dev/null || exit 1
  done && diff -r '$TMP/db1' '$TMP/db3' && echo identical"
# A list may come from a pipe: relative paths then resolve against the current directory.
piped_list() {
  ( cd "$PHOTOS" && ls *.png | LC_ALL=C sort > "$TMP/rel.txt" &&
    "$PTQ" preprocess --images <(cat "$TMP/rel.txt") --preset paddleocr-cls --dump "$TMP/pipe.npy" 2>"$TMP/pipe.err" ) || return 1
  ls "$PHOTOS"/*.png | LC_ALL=C sort | "$PTQ" preprocess --images /dev/stdin --preset paddleocr-cls --dump "$TMP/stdin.npy" 2>/dev/null &&
    cmp "$TMP/pipe.npy" "$TMP/stdin.npy" && grep -q "$(wc -l < "$TMP/rel.txt") images used, 0 skipped" "$TMP/pipe.err" &&
    echo "$(wc -l < "$TMP/rel.txt") images from <(...) with relative paths and from /dev/stdin: the same tensors"
}
check "an image list from a pipe (process substitution, /dev/stdin)" piped_list
# One image file given as --images is that image, not a list to read.
one_image() {
  local f; f=$(ls "$PHOTOS"/*.png | LC_ALL=C sort | head -n 1)
  echo "$f" > "$TMP/one.txt"
  "$PTQ" preprocess --images "$f" --preset paddleocr-cls --dump "$TMP/one_file.npy" 2>"$TMP/one.err" &&
    "$PTQ" preprocess --images "$TMP/one.txt" --preset paddleocr-cls --dump "$TMP/one_list.npy" 2>/dev/null &&
    cmp "$TMP/one_file.npy" "$TMP/one_list.npy" && grep -q "1 images used, 0 skipped" "$TMP/one.err" &&
    echo "$(basename "$f") as --images: the tensor of a one-line list"
}
check "one image file as --images" one_image
check "bad dynamic keys are one-line errors" bash -c "
  ! '$PTQ' preprocess --images '$D' --preset paddleocr-rec-dynamic --max-width 100 --dump '$TMP/x' 2>'$TMP/mw.err' &&
  grep -q 'max_width 100: only for mode height-pad, from width 320' '$TMP/mw.err' &&
  ! '$PTQ' preprocess --images '$D' --preset paddleocr-det-dynamic --limit-type mid --dump '$TMP/x' 2>'$TMP/lt.err' &&
  grep -q \"bad value 'mid' for 'limit_type'\" '$TMP/lt.err' && cat '$TMP/mw.err' '$TMP/lt.err'"
finish

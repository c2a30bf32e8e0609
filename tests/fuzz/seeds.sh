#!/usr/bin/env bash
# Builds the fuzzers' seed corpus from the test data, one folder per harness:
#   tests/fuzz/seeds.sh OUT        (OUT: e.g. build/fuzz-seeds; recreated)
# onnx:  the PaddleOCR cls model (build/models) and the ONNX node-test models of
#        libonnx-testdata;  image: the photos of build/photos up to 64 KiB (small inputs keep the executions fast) and small
#        JPEG/PNG variants made with PIL (gray, progressive, CMYK, EXIF-rotated, palette,
#        1/16-bit, interlaced, alpha);  npy: every dtype ptq reads, ranks 0..4, formats
#        1.0 and 2.0;  stats, cache: written by `ptq calibrate --method all --stats` on the
#        cls model and two photos, plus hand-written caches;  yaml: configs/ and configs
#        of the calibrate and quantize commands;  mask: class-index PNGs (8-bit gray, palette at 1, 4
#        and 8 bits, and the refused 16-bit and RGB);  paddledet: PaddleOCR det label lists (quads,
#        longer polygons, "###" and "*" regions, CRLF, an empty list, UTF-8 text, bad lines). Needs Debian's python3 ($PY) with numpy and PIL, and
#        $PTQ (default build/ptq) for stats and caches; what is missing is skipped.
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:?usage: seeds.sh OUT}
PTQ=${PTQ:-$PWD/build/ptq}
PY=${PY:-/usr/bin/python3}
MODELS=build/models
rm -rf "$OUT"
mkdir -p "$OUT"/{onnx,image,npy,stats,cache,yaml,mask,paddledet}

# onnx
cls=$MODELS/ch_ppocr_mobile_v2.0_cls_infer.onnx
[ -f "$cls" ] && cp "$cls" "$OUT/onnx/cls.onnx"
for m in /usr/share/libonnx-testdata/data/node/*/model.onnx; do
  [ -f "$m" ] && cp "$m" "$OUT/onnx/$(basename "$(dirname "$m")").onnx"
done

# image
for f in build/photos/*.png build/photos/*.jpg; do
  [ -f "$f" ] && [ "$(stat -c %s "$f")" -le 65536 ] && cp "$f" "$OUT/image/"
done
"$PY" - "$OUT/image" <<'PYEOF' || echo "seeds: no PIL, generated images skipped" >&2
import sys, io
from PIL import Image
out = sys.argv[1]
w, h = 23, 17
rgb = Image.new('RGB', (w, h))
rgb.putdata([((x * 11) % 256, (y * 15) % 256, (x * y) % 256) for y in range(h) for x in range(w)])
rgb.save(out + '/small.jpg', quality=80)
rgb.save(out + '/progressive.jpg', progressive=True, quality=70)
rgb.convert('L').save(out + '/gray.jpg')
rgb.convert('CMYK').save(out + '/cmyk.jpg')
exif = Image.Exif(); exif[0x0112] = 6                 # Orientation: rotate 90
rgb.save(out + '/exif6.jpg', exif=exif.tobytes())
rgb.save(out + '/rgb.png')
rgb.save(out + '/interlaced.png', interlace=1)
rgb.convert('RGBA').save(out + '/rgba.png')
rgb.convert('LA').save(out + '/gray_alpha.png')
rgb.convert('L').save(out + '/gray.png')
rgb.convert('1').save(out + '/bilevel.png')
rgb.convert('P', palette=Image.ADAPTIVE, colors=16).save(out + '/palette16.png', bits=4)
g16 = Image.new('I;16', (w, h)); g16.putdata([(x * 2851 + y * 977) % 65536 for y in range(h) for x in range(w)]); g16.save(out + '/gray16.png')
PYEOF

# npy
"$PY" - "$OUT/npy" <<'PYEOF' || echo "seeds: no numpy, .npy seeds skipped" >&2
import sys
import numpy as np
out = sys.argv[1]
for dt in ['<f4', '<f8', '<f2', '|i1', '|u1', '<i2', '<u2', '<i4', '<u4', '<i8', '<u8', '|b1']:
    np.save('%s/%s.npy' % (out, dt.strip('<|')), (np.arange(6) % 3).astype(dt).reshape(2, 3))
for r, shape in enumerate([(), (5,), (2, 3), (1, 2, 3), (1, 3, 4, 2), (0, 3)]):
    np.save('%s/rank%d_%d.npy' % (out, len(shape), r), np.linspace(-1, 1, int(np.prod(shape))).astype('<f4').reshape(shape))
with open(out + '/v2.npy', 'wb') as f:
    np.lib.format.write_array(f, np.ones((2, 2), '<f4'), version=(2, 0))
PYEOF

# stats and cache
if [ -x "$PTQ" ] && [ -f "$cls" ]; then
  tmp=$(mktemp -d)
  ls "$PWD"/build/photos/*.png | head -n 2 > "$tmp/list.txt"
  "$PTQ" calibrate "$cls" --images "$tmp/list.txt" --preset paddleocr-cls --method all \
    --cache "$tmp/cls.cache" --stats "$OUT/stats/cls.ptqstats" >/dev/null 2>&1 &&
  "$PTQ" calibrate "$cls" --images "$tmp/list.txt" --preset paddleocr-cls --method max --tensors x \
    --tensors 'p2o.Conv.0*' --json "$tmp/small.json" --stats "$OUT/stats/cls_small.ptqstats" >/dev/null 2>&1 &&
    cp "$tmp"/cls.*.cache "$OUT/cache/" || echo "seeds: ptq calibrate failed, stats and caches skipped" >&2
  rm -rf "$tmp"
fi
printf 'TRT-8601-EntropyCalibration2\nx: 3c010a14\nconv 1/out:0: 0x3c010a14\r\nz: 0\n' > "$OUT/cache/handwritten.cache"
printf 'TRT-8400-MinMaxCalibration\ninput: 3c8080a0' > "$OUT/cache/no_newline.cache"

# yaml
cp configs/*.yaml "$OUT/yaml/"
cat > "$OUT/yaml/quantize.yaml" <<'YEOF'
method: percentile:99.99
exclude-nodes: [p2o.Conv.0, "p2o.Conv.4*"]
exclude-op-types:
  - GlobalAveragePool
  - Softmax
dedicated-qdq: true
YEOF
printf 'mode: letterbox\nsize: 320x320\nmean: [0.5, 0.5, 0.5]\nstd: 0.25\nlayout: NHWC\nscaleup: no\n' > "$OUT/yaml/preset_flow.yaml"

# mask
"$PY" - "$OUT/mask" <<'PYEOF' || echo "seeds: no PIL, mask seeds skipped" >&2
import sys
from PIL import Image
out = sys.argv[1]
w, h = 19, 13
idx = [(x // 4 + y // 5) % 3 for y in range(h) for x in range(w)]
m = Image.new('L', (w, h)); m.putdata([255 if i == 2 and x % 7 == 0 else i for x, i in enumerate(idx)]); m.save(out + '/gray.png')
for bits in (1, 4, 8):
    p = Image.new('P', (w, h)); p.putpalette([0, 0, 0, 128, 0, 0, 0, 128, 0] + [0] * (768 - 9)); p.putdata([i % (1 << bits) for i in idx])
    p.save(out + '/palette%d.png' % bits, bits=bits)
Image.new('I;16', (w, h)).save(out + '/gray16.png')
Image.new('RGB', (w, h), (1, 2, 3)).save(out + '/rgb.png')
PYEOF

# paddledet
printf 'imgs/p0000.png\t[{"transcription": "WARNING 388", "points": [[379.4, 31.0], [572.1, 41.1], [570.7, 68.0], [378.0, 58.0]]}, {"transcription": "###", "points": [[550, 92], [692, 92], [692, 114], [550, 114]]}]\n' > "$OUT/paddledet/quads.txt"
printf 'a.jpg\t[{"transcription": "\xe5\x87\xba\xe5\x8f\xa3", "points": [[0, 0], [9, 0], [12, 5], [9, 10], [0, 10], [-3, 5]]}]\r\nb.jpg\t[]\r\n\r\nc.jpg\t[{"transcription": "*", "points": [[1e3, 2e3], [3e3, 2e3], [3e3, 4e3], [1e3, 4e3]]}]\n' > "$OUT/paddledet/polygons.txt"
printf 'a.png\t[{"points": [[0, 0], [1, 0], [1, 1]]}]\nb.png [{}]\na.png\t[]\n' > "$OUT/paddledet/bad.txt"

for d in "$OUT"/*; do printf '%-6s %5d seeds\n' "$(basename "$d")" "$(ls "$d" | wc -l)"; done

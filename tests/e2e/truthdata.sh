#!/usr/bin/env bash
# scripts/truthdata.py (the truth bench's detection set): its labels are where the stamps are.
# Each composite is made again on a black and on a white background with the same draws (--flat):
# a pixel that differs by 255 in every channel is background, any other is a stamp's. Asserted, per
# image of every split: each labelled box's stamp pixels touch all four sides of the box (tight), no
# stamp pixel lies outside the labelled boxes, classes are 0..5, and the photo composites have the
# same labels as the flat ones; the splits draw from disjoint photos; the same seed writes the same
# bytes.
. "$(dirname "$0")/lib.sh"
[ -d /usr/share/tuxpaint/stamps/animals ] || { skip "truthdata" "tuxpaint-stamps-default not installed (scripts/deps.sh)"; finish; }
TD="$PY $ROOT/scripts/truthdata.py --train 6 --calib 4 --val 6"
$TD "$TMP/photo" > "$TMP/photo.log"
$TD "$TMP/black" --flat 0,0,0 > /dev/null
$TD "$TMP/white" --flat 255,255,255 > /dev/null
$TD "$TMP/again" > /dev/null
check "labels on the stamps" $PY - "$TMP" <<'PYEOF'
import glob, os, sys
import numpy as np
from PIL import Image
t = sys.argv[1]
n = 0
for split in ("train", "calib", "val"):
    for p in sorted(glob.glob(f"{t}/black/{split}/images/*.png")):
        stem = os.path.basename(p)[:-4]
        b = np.asarray(Image.open(p).convert("RGB"), np.int32)
        w_ = np.asarray(Image.open(p.replace("/black/", "/white/")).convert("RGB"), np.int32)
        fg = ~np.all(w_ - b == 255, axis=2)
        H, W = fg.shape
        lab = open(f"{t}/black/{split}/labels/{stem}.txt").read()
        assert lab == open(f"{t}/white/{split}/labels/{stem}.txt").read() == open(f"{t}/photo/{split}/labels/{stem}.txt").read(), stem
        covered = np.zeros_like(fg)
        for line in lab.split("\n"):
            if not line:
                continue
            c, cx, cy, bw, bh = line.split()
            assert 0 <= int(c) <= 5, line
            x1, x2 = round((float(cx) - float(bw) / 2) * W), round((float(cx) + float(bw) / 2) * W)
            y1, y2 = round((float(cy) - float(bh) / 2) * H), round((float(cy) + float(bh) / 2) * H)
            m = fg[y1:y2, x1:x2]
            assert m[0].any() and m[-1].any() and m[:, 0].any() and m[:, -1].any(), (split, stem, line)
            covered[y1:y2, x1:x2] = True
            n += 1
        assert not (fg & ~covered).any(), (split, stem, "stamp pixels outside the boxes")
print(n, "boxes tight on their stamps")
PYEOF
check "splits from disjoint photos" bash -c "[ \$(awk '{print \$2}' '$TMP/photo/photos.txt' | sort | uniq -d | wc -l) = 0 ] && [ \$(awk '{print \$1}' '$TMP/photo/photos.txt' | sort -u | wc -l) = 3 ]"
check "same seed, same bytes" diff -r -x "*.list" "$TMP/photo" "$TMP/again"
finish

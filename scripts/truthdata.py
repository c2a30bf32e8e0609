#!/usr/bin/python3
"""truthdata.py OUT: a labelled detection set composed from Debian packages, for the truth bench
(bench/truth_families.sh) and scripts/train_det.py.

Objects: the stamps of tuxpaint-stamps-default (PNG with alpha, /usr/share/tuxpaint/stamps/), one
class per top-level folder (CLASSES below), 12 stamps of each (--per-class, evenly from the sorted
names: a small detector learns them in minutes on a CPU). Backgrounds: the photos in build/photos (Debian's
python3-skimage data, scripts/deps.sh), a random crop of one per composite, resized to a random size
of 256..480 pixels a side. One to four stamps per composite, each scaled to a random longest side
(log-uniform, 20 px .. 60 % of the composite's shorter side), maybe mirrored, pasted through its
alpha at a random place, at most slightly overlapping the others (IoU <= 0.1). The label is the
bounding box of the pasted stamp's non-transparent pixels, in Ultralytics' YOLO txt format.

Splits: OUT/{train,calib,val}/images/NNNNN.png with OUT/{split}/labels/NNNNN.txt
(`class cx cy w h`, normalised to the image) and OUT/{split}.list (the images' paths); OUT/classes.txt; OUT/photos.txt (`split photo` lines).
The three splits draw their backgrounds from disjoint photos (sorted names: every 6th from the
first is val, every 6th from the fourth is calib, the rest train); the stamps are shared (a class is
its stamps' look, not one picture). Deterministic for a seed (--seed), independent of the machine.

--flat R,G,B paints the background one colour with the same random draws (same boxes, same
stamps): tests/e2e/truthdata.sh composes each image on black and on white to find where the
stamps are without this script's help.
"""
import argparse
import glob
import math
import os
import random
import sys

from PIL import Image

STAMPS = "/usr/share/tuxpaint/stamps"
CLASSES = ["animals", "food", "vehicles", "plants", "household", "town"]
HERE = os.path.dirname(os.path.abspath(__file__))
PHOTOS = os.path.join(HERE, "..", "build", "photos")


def load_stamps(root, per_class):
    stamps = []
    for c, name in enumerate(CLASSES):
        files = sorted(glob.glob(os.path.join(root, name, "**", "*.png"), recursive=True))
        if not files:
            sys.exit(f"truthdata: no stamps in {root}/{name} (install tuxpaint-stamps-default)")
        files = files[::max(1, len(files) // per_class)][:per_class]
        for f in files:
            im = Image.open(f).convert("RGBA")
            box = im.getchannel("A").point(lambda a: 255 if a > 0 else 0).getbbox()
            if box is None or min(box[2] - box[0], box[3] - box[1]) < 8:
                continue
            stamps.append((c, im.crop(box)))
    return stamps


def split_photos(root):
    names = sorted(p for p in glob.glob(os.path.join(root, "*")) if p.endswith((".png", ".jpg")))
    usable = []
    for p in names:
        try:
            im = Image.open(p)
            im.load()
        except Exception:
            continue  # the truncated JPEG among the test photos
        if min(im.size) >= 64:
            usable.append(p)
    if len(usable) < 6:
        sys.exit(f"truthdata: {len(usable)} usable photos in {root} (scripts/deps.sh fetches them)")
    return {"val": usable[0::6], "calib": usable[3::6],
            "train": [p for i, p in enumerate(usable) if i % 6 not in (0, 3)]}


def iou(a, b):
    ix = max(0, min(a[2], b[2]) - max(a[0], b[0]))
    iy = max(0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = ix * iy
    return inter / float((a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter)


def compose(rng, photo, stamps, flat=None):
    """One composite: (RGB image, [(class, x1, y1, x2, y2)] in pixels, x2/y2 exclusive)."""
    W, H = rng.randint(256, 480), rng.randint(256, 480)
    src = Image.open(photo).convert("RGB")
    sw, sh = src.size
    f = rng.uniform(0.4, 1.0)  # side of the crop, as a share of the photo's
    cw, ch = max(16, int(sw * f)), max(16, int(sh * f))
    cx, cy = rng.randint(0, sw - cw), rng.randint(0, sh - ch)
    if flat is None:
        img = src.crop((cx, cy, cx + cw, cy + ch)).resize((W, H), Image.BILINEAR)
    else:
        img = Image.new("RGB", (W, H), flat)
    boxes = []
    for _ in range(rng.randint(1, 4)):
        c, st = stamps[rng.randrange(len(stamps))]
        side = int(round(math.exp(rng.uniform(math.log(20), math.log(0.6 * min(W, H))))))
        flip = rng.random() < 0.5
        tries = [(rng.random(), rng.random()) for _ in range(20)]
        k = side / max(st.size)
        tw, th = max(4, round(st.size[0] * k)), max(4, round(st.size[1] * k))
        s = st.resize((tw, th), Image.BILINEAR)
        if flip:
            s = s.transpose(Image.FLIP_LEFT_RIGHT)
        bb = s.getchannel("A").point(lambda a: 255 if a > 0 else 0).getbbox()
        if bb is None:
            continue
        for u, v in tries:
            x, y = int(u * (W - tw + 1)), int(v * (H - th + 1))
            box = (x + bb[0], y + bb[1], x + bb[2], y + bb[3])
            if all(iou(box, b[1:]) <= 0.1 for b in boxes):
                img.paste(s, (x, y), s)
                boxes.append((c,) + box)
                break
    return img, boxes


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out")
    ap.add_argument("--train", type=int, default=1500)
    ap.add_argument("--calib", type=int, default=64)
    ap.add_argument("--val", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--stamps", default=STAMPS)
    ap.add_argument("--per-class", type=int, default=12, help="stamps per class (evenly from the sorted names)")
    ap.add_argument("--photos", default=PHOTOS)
    ap.add_argument("--splits", default="train,calib,val")
    ap.add_argument("--flat", help="R,G,B: a flat background instead of the photo (same draws)")
    a = ap.parse_args()
    flat = tuple(int(v) for v in a.flat.split(",")) if a.flat else None
    stamps = load_stamps(a.stamps, a.per_class)
    photos = split_photos(a.photos)
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "classes.txt"), "w") as f:
        f.write("\n".join(CLASSES) + "\n")
    with open(os.path.join(a.out, "photos.txt"), "w") as f:
        f.write("".join(f"{s} {os.path.basename(p)}\n" for s in ("train", "calib", "val") for p in photos[s]))
    for k, split in enumerate(("train", "calib", "val")):
        if split not in a.splits.split(","):
            continue
        n = getattr(a, split)
        rng = random.Random(a.seed * 1000 + k)
        idir, ldir = os.path.join(a.out, split, "images"), os.path.join(a.out, split, "labels")
        os.makedirs(idir, exist_ok=True)
        os.makedirs(ldir, exist_ok=True)
        paths, count = [], 0
        for i in range(n):
            img, boxes = compose(rng, photos[split][i % len(photos[split])], stamps, flat)
            W, H = img.size
            p = os.path.abspath(os.path.join(idir, f"{i:05d}.png"))
            img.save(p)
            with open(os.path.join(ldir, f"{i:05d}.txt"), "w") as f:
                for c, x1, y1, x2, y2 in boxes:
                    f.write(f"{c} {(x1 + x2) / 2 / W:.6f} {(y1 + y2) / 2 / H:.6f} {(x2 - x1) / W:.6f} {(y2 - y1) / H:.6f}\n")
            paths.append(p)
            count += len(boxes)
        with open(os.path.join(a.out, split + ".list"), "w") as f:
            f.write("\n".join(paths) + "\n")
        print(f"truthdata: {split}: {n} images, {count} boxes, {len(photos[split])} photos")


if __name__ == "__main__":
    main()

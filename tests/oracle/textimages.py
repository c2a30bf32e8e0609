#!/usr/bin/python3
"""textimages.py: OCR evaluation images made from the real photos (test/bench data only).

An OCR model's calibration and evaluation data are images with text in them. The skimage
photos have only three (text.png, page.png, bw_text.png), so this script renders text lines
onto the natural photos, SynthText-style, with a fixed seed:

  OUT/det/NAME_K.png    a photo with 3 to 7 text lines drawn on it (DejaVu fonts, 14 to 56 px,
                        colour contrasting with the local background, some on a plate like a sign)
  OUT/rec/NAME_K_L.png  each line cropped with a small margin (what a recogniser sees)
  OUT/cls/NAME_K_L.png  the same crops, every second one turned by 180 degrees (the classifier's job)

Photos: the skimage images of at least 300 x 300 pixels that are photographs (synthetic test
patterns, tiny and palette images are left out). Same inputs, same seed: byte-identical files.

usage: textimages.py PHOTO_DIR OUT_DIR [--variants N] [--seed S]
"""
import argparse
import os
import random
import sys

from PIL import Image, ImageDraw, ImageFont

FONTS = "/usr/share/fonts/truetype/dejavu"
FONT_FILES = ["DejaVuSans.ttf", "DejaVuSans-Bold.ttf", "DejaVuSansCondensed.ttf", "DejaVuSerif.ttf",
              "DejaVuSans-Oblique.ttf", "DejaVuSansMono.ttf", "DejaVuSerif-Bold.ttf"]
# Photographs among the skimage images (the rest are test patterns or tiny).
PHOTOS = ["astronaut.png", "brick.png", "camera.png", "cell.png", "chelsea.png", "clock_motion.png",
          "coffee.png", "coins.png", "color.png", "grass.png", "gravel.png", "hubble_deep_field.jpg",
          "ihc.png", "moon.png", "motorcycle_left.png", "motorcycle_right.png", "retina.jpg",
          "rocket.jpg", "logo.png", "horse.png"]
WORDS = ("open street market exit station coffee bakery hotel pharmacy station parking north south "
         "east west entrance private road closed sale today fresh bread milk total price receipt "
         "invoice number date time room floor gate platform train bus stop airport terminal "
         "welcome library museum garden park city center police taxi bank office school music "
         "delivery express limited edition warning danger caution keep out no smoking push pull "
         "monday tuesday friday sunday january march june october december water fire emergency "
         "phone email address street avenue square bridge river lake mountain valley hospital").split()


def phrase(rng):
    kind = rng.random()
    if kind < 0.15:
        return f"{rng.randint(1, 9999)}"
    if kind < 0.3:
        return f"{rng.choice(WORDS).upper()} {rng.randint(10, 999)}"
    if kind < 0.4:
        return f"{rng.randint(1, 28):02d}.{rng.randint(1, 12):02d}.{rng.randint(1990, 2030)} {rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}"
    words = [rng.choice(WORDS) for _ in range(rng.randint(1, 4))]
    text = " ".join(words)
    return text.title() if rng.random() < 0.4 else (text.upper() if rng.random() < 0.3 else text)


def luminance(rgb):
    return 0.299 * rgb[0] + 0.587 * rgb[1] + 0.114 * rgb[2]


def render(photo, rng, lines_out):
    img = photo.copy()
    w, h = img.size
    draw = ImageDraw.Draw(img)
    boxes = []
    for _ in range(rng.randint(3, 7)):
        size = rng.randint(14, max(15, min(56, h // 6)))
        font = ImageFont.truetype(os.path.join(FONTS, rng.choice(FONT_FILES)), size)
        text = phrase(rng)
        l, t, r, b = draw.textbbox((0, 0), text, font=font)
        tw, th = r - l, b - t
        if tw + 8 >= w or th + 8 >= h:
            continue
        for _try in range(20):
            x, y = rng.randint(4, w - tw - 4), rng.randint(4, h - th - 4)
            box = (x - 4, y - 4, x + tw + 4, y + th + 4)
            if all(box[2] < o[0] or box[0] > o[2] or box[3] < o[1] or box[1] > o[3] for o in boxes):
                break
        else:
            continue
        region = img.crop(box).resize((1, 1), Image.BILINEAR).getpixel((0, 0))
        bg = luminance(region)
        if rng.random() < 0.3:  # a plate, like a sign or a label
            plate = tuple(rng.randint(0, 255) for _ in range(3))
            draw.rectangle(box, fill=plate)
            bg = luminance(plate)
        light = bg < 128
        base = rng.randint(200, 255) if light else rng.randint(0, 60)
        colour = tuple(max(0, min(255, base + rng.randint(-30, 30))) for _ in range(3))
        draw.text((x - l, y - t), text, font=font, fill=colour)
        boxes.append(box)
        lines_out.append(box)
    return img


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("photos")
    ap.add_argument("out")
    ap.add_argument("--variants", type=int, default=2)
    ap.add_argument("--seed", type=int, default=2026)
    a = ap.parse_args()
    for sub in ("det", "rec", "cls"):
        os.makedirs(os.path.join(a.out, sub), exist_ok=True)
    n_det = n_line = 0
    for name in PHOTOS:
        path = os.path.join(a.photos, name)
        if not os.path.exists(path):
            print(f"textimages: missing {path}", file=sys.stderr)
            return 1
        photo = Image.open(path)
        if photo.mode in ("RGBA", "LA", "P"):
            bg = Image.new("RGB", photo.size, (255, 255, 255))
            photo = photo.convert("RGBA")
            bg.paste(photo, mask=photo.split()[3])
            photo = bg
        photo = photo.convert("RGB")
        if max(photo.size) > 1024:  # the 1411 px retina and 1000 px hubble: keep files small
            s = 1024 / max(photo.size)
            photo = photo.resize((round(photo.size[0] * s), round(photo.size[1] * s)), Image.BILINEAR)
        stem = os.path.splitext(name)[0]
        for k in range(a.variants):
            rng = random.Random(f"{a.seed}:{name}:{k}")
            boxes = []
            img = render(photo, rng, boxes)
            img.save(os.path.join(a.out, "det", f"{stem}_{k}.png"), compress_level=1)
            n_det += 1
            for j, box in enumerate(boxes):
                crop = img.crop(box)
                crop.save(os.path.join(a.out, "rec", f"{stem}_{k}_{j}.png"), compress_level=1)
                if j % 2 == 1:
                    crop = crop.rotate(180)
                crop.save(os.path.join(a.out, "cls", f"{stem}_{k}_{j}.png"), compress_level=1)
                n_line += 1
    print(f"textimages: {n_det} det images, {n_line} text lines in {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/python3
"""textpages.py: rendered pages whose text is known, the ground truth of the OCR benches.

Pages 640-1024 pixels wide and 480-800 high carry 4 to 12 lines each, top to bottom, in one of
16 font faces (Debian's fonts-dejavu, fonts-liberation2, fonts-freefont-ttf, and
fonts-wqy-microhei for Chinese), 16 to 48 pixels, a quarter of the lines turned by up to 3 degrees, on a plain colour,
on paper (grain, a gradient, a fold shadow) or on a photo of build/photos (a random crop; busy
regions get a plate behind the line, like a sign). Every text colour has a WCAG contrast ratio
of at least 4.5 with the mean colour under its line. Texts are Latin words, numbers, dates and
prices, and Chinese strings of common characters, all of them in the recogniser's dictionary
(ppocr_keys_v1.txt) and drawn only in a font that has their glyphs.

The calibration split and the evaluation split share nothing but the generator: different
seeds, different halves of the word list, of the Chinese characters' rows and of the photos.

  OUT/pages/pNNNN.png      the pages
  OUT/truth.json           {"split", "seed", "images": [{"image": "pages/pNNNN.png", "size": [W, H],
                            "background": plain, paper or the photo's file name,
                            "lines": [{"text": T, "polygon": [[x, y] x4]}, ...]}]}: lines in reading
                            order, polygons clockwise from the top-left corner of the text, with a
                            margin of 15 % of the font size (what DB's unclipped boxes hold)
  OUT/rec/pNNNN_LL.png     each line, warped out of its polygon as PaddleOCR crops a detected box
  OUT/rec.labels           "pNNNN_LL.png,TEXT" lines (split at the first comma; TEXT may hold commas)
  OUT/cls/pNNNN_LL.png     the same crops, every second line (over the whole set) turned by 180 degrees
  OUT/cls.labels           "pNNNN_LL.png,CLASS": 0 upright, 1 turned (PaddleOCR's cls label_list is
                            ['0', '180']: output index 0 is upright)
  OUT/pages.list           the pages' absolute paths, one a line

Same arguments, same Debian fonts and photos: byte-identical files.

usage: textpages.py OUT_DIR [--pages N] [--seed S] [--split calib|eval] [--photos DIR] [--keys FILE]
"""
import argparse
import json
import math
import os
import random
import sys

import cv2
import numpy as np
from PIL import Image, ImageDraw, ImageFilter, ImageFont

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FONT_DIR = "/usr/share/fonts/truetype"
LATIN_FONTS = ["dejavu/DejaVuSans.ttf", "dejavu/DejaVuSans-Bold.ttf", "dejavu/DejaVuSerif.ttf",
               "dejavu/DejaVuSansCondensed.ttf", "dejavu/DejaVuSansMono.ttf",
               "liberation2/LiberationSans-Regular.ttf", "liberation2/LiberationSans-Bold.ttf",
               "liberation2/LiberationSerif-Regular.ttf", "liberation2/LiberationSerif-Italic.ttf",
               "liberation2/LiberationMono-Regular.ttf", "freefont/FreeSans.ttf",
               "freefont/FreeSerif.ttf", "freefont/FreeSerifBold.ttf", "freefont/FreeMono.ttf",
               "freefont/FreeSansOblique.ttf"]
CJK_FONT = "wqy/wqy-microhei.ttc"
# The skimage photographs of tests/oracle/textimages.py's list without text of their own (the
# motorcycles' tank reads YAMAHA once enlarged, logo.png is a logotype): text the truth does not
# hold would count against a reader that reads it. Even positions calibrate, odd ones evaluate.
PHOTOS = ["astronaut.png", "brick.png", "camera.png", "cell.png", "chelsea.png", "clock_motion.png",
          "coffee.png", "coins.png", "color.png", "grass.png", "gravel.png", "hubble_deep_field.jpg",
          "ihc.png", "moon.png", "retina.jpg", "rocket.jpg", "horse.png"]
WORDS = ("open street market exit station coffee bakery hotel pharmacy parking north south east west "
         "entrance private road closed sale today fresh bread milk total price receipt invoice number "
         "date time room floor gate platform train bus stop airport terminal welcome library museum "
         "garden park city center police taxi bank office school music delivery express limited "
         "edition warning danger caution keep out smoking push pull monday tuesday friday sunday "
         "january march june october december water fire emergency phone email address street "
         "avenue square bridge river lake mountain valley hospital account balance customer order "
         "quantity service report summary chapter section figure table page index contents notice "
         "meeting project release version update system network server window door kitchen menu "
         "breakfast dinner lunch ticket seat class adult child family student teacher manager "
         "signature approved pending shipped return refund discount member card cash credit").split()
# Frequent Chinese characters (rows of ten-odd); those missing from the dictionary or the font
# are dropped at start.
HANZI = ("的一是不了人我在有他这为之大来以个中上们到说国和地也子时道出而要于就下得可你年生自会那后能对着"
         "事其里所去行过家十用发天如然作方成者多日都三小军二无同么经法当起与好看学进种将还分此心前面又定"
         "见只主没公从已向动头想样意开问力理长把机美电高现实点业本全新工作物间加车体路市场品价格服务信息"
         "公司产品出口北京上海广州中心银行医院学校超市餐厅酒店火车站机场地铁出租汽停欢迎光临营业时间周一"
         "至周日电话地址号楼层室门票售罚款注意安全禁止吸烟小心地滑请勿入内紧急通道消防水饮料茶咖啡面包牛"
         "奶蛋糕水果蔬菜肉鱼米饭面条饺子包子早中晚餐优惠折扣会员特价元角分总计数量单金额日期发票收据合计"
         "东西南北左右前后上下里外进出开关大小多少长短高低新旧好坏快慢冷热春夏秋冬年月日星期今明昨天气温"
         "度风雨雪晴阴云城区县镇村街道路桥河湖山海岛花园公园广场图书馆博物展览剧院电影音乐体育运动健身游"
         "泳馆网球篮足羽毛乒乓书店药房诊所牙科眼科儿童妇女老人男女厕所洗手间电梯楼梯入口出口方向指南")
PLAIN_COLOURS = [(255, 255, 255), (250, 248, 240), (235, 240, 250), (255, 250, 225), (230, 230, 230),
                 (40, 44, 52), (20, 30, 60), (250, 230, 230), (225, 245, 230), (60, 20, 20)]


def rel_lum(rgb):
    def lin(c):
        c = c / 255.0
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4
    r, g, b = (lin(c) for c in rgb[:3])
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast(a, b):
    la, lb = rel_lum(a), rel_lum(b)
    return (max(la, lb) + 0.05) / (min(la, lb) + 0.05)


def load_charset(keys_path):
    with open(keys_path, encoding="utf-8") as f:
        keys = {l.rstrip("\n").rstrip("\r") for l in f}
    font = ImageFont.truetype(os.path.join(FONT_DIR, CJK_FONT), 32)
    missing = bytes(font.getmask("\U0010fffd"))  # .notdef
    seen, hanzi = set(), []
    for ch in HANZI:
        if ch in seen or ch not in keys:
            continue
        seen.add(ch)
        if bytes(font.getmask(ch)) != missing:
            hanzi.append(ch)
    latin = set(keys)
    return hanzi, latin


def latin_text(rng, words):
    kind = rng.random()
    if kind < 0.12:
        return f"{rng.choice(words).upper()} {rng.randint(10, 999)}"
    if kind < 0.22:
        return f"{rng.randint(1, 28):02d}.{rng.randint(1, 12):02d}.{rng.randint(1990, 2030)} {rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}"
    if kind < 0.32:
        return f"{rng.choice(words).title()}: ${rng.randint(1, 999)}.{rng.randint(0, 99):02d}"
    if kind < 0.38:
        return f"{rng.randint(1, 9999)}/{rng.randint(1, 99)} {rng.choice(words)}"
    text = " ".join(rng.choice(words) for _ in range(rng.randint(1, 5)))
    r = rng.random()
    return text.title() if r < 0.35 else (text.upper() if r < 0.55 else text)


def chinese_text(rng, hanzi):
    n = rng.randint(2, 12)
    s = "".join(rng.choice(hanzi) for _ in range(n))
    r = rng.random()
    if r < 0.15:
        s += f"{rng.randint(1, 999)}"
    elif r < 0.25:
        s += f"{rng.randint(1, 999)}元"
    return s


def background(rng, w, h, photos):
    kind = rng.choice(["plain", "paper", "photo", "photo"])
    if kind == "plain":
        return Image.new("RGB", (w, h), rng.choice(PLAIN_COLOURS)), kind
    if kind == "paper":
        base = np.array([rng.randint(225, 250), rng.randint(220, 245), rng.randint(200, 235)], np.float32)
        nrng = np.random.RandomState(rng.randint(0, 2**31 - 1))
        grain = nrng.normal(0, rng.uniform(2, 7), (h, w, 1)).astype(np.float32)
        ramp = np.linspace(0, rng.uniform(-25, 10), w, dtype=np.float32)[None, :, None]
        arr = base[None, None, :] + grain + ramp
        fold = rng.randint(w // 4, 3 * w // 4)  # a soft shadow along a vertical fold
        xs = np.arange(w, dtype=np.float32)
        arr -= (18 * np.exp(-((xs - fold) / (w * 0.03)) ** 2))[None, :, None]
        return Image.fromarray(np.clip(arr, 0, 255).astype(np.uint8)), kind
    name, photo = photos[rng.randrange(len(photos))]
    pw, ph = photo.size
    s = max(w / pw, h / ph) * rng.uniform(1.0, 1.6)
    big = photo.resize((max(w, round(pw * s)), max(h, round(ph * s))), Image.BILINEAR)
    x, y = rng.randint(0, big.size[0] - w), rng.randint(0, big.size[1] - h)
    return big.crop((x, y, x + w, y + h)), name


def pick_colour(rng, under):
    for _ in range(40):
        dark = rel_lum(under) > 0.18
        if dark:
            c = (rng.randint(0, 90), rng.randint(0, 90), rng.randint(0, 90))
        else:
            c = (rng.randint(190, 255), rng.randint(190, 255), rng.randint(190, 255))
        if rng.random() < 0.3:  # a coloured ink
            k = rng.randrange(3)
            c = tuple(min(255, v + 120) if i == k and dark else v for i, v in enumerate(c))
        if contrast(c, under) >= 4.5:
            return c
    return (0, 0, 0) if contrast((0, 0, 0), under) >= contrast((255, 255, 255), under) else (255, 255, 255)


def render_page(rng, photos, words, hanzi, latin_ok):
    w = rng.randrange(640, 1025, 16)
    h = rng.randrange(480, 801, 16)
    img, kind = background(rng, w, h, photos)
    lines = []
    y = rng.randint(12, 48)
    n_max = rng.randint(4, 12)
    while len(lines) < n_max:
        size = rng.randint(16, 48)
        cjk = rng.random() < 0.4
        font_path = CJK_FONT if cjk else rng.choice(LATIN_FONTS)
        font = ImageFont.truetype(os.path.join(FONT_DIR, font_path), size)
        text = chinese_text(rng, hanzi) if cjk else latin_text(rng, words)
        assert all(c in latin_ok or c == " " for c in text), text
        pad = max(3, round(0.15 * size))
        left, top, right, bottom = font.getbbox(text)
        while right - left + 2 * pad > w - 24 and len(text) > 1:  # too long for the page: shorten
            text = text[:-1].rstrip()
            left, top, right, bottom = font.getbbox(text)
        tw, th = right - left + 2 * pad, bottom - top + 2 * pad
        angle = rng.uniform(-3, 3) if rng.random() < 0.25 else 0.0
        rad = math.radians(angle)
        # the padded rectangle around its centre, turned by angle (counter-clockwise on screen)
        corners = [(-tw / 2, -th / 2), (tw / 2, -th / 2), (tw / 2, th / 2), (-tw / 2, th / 2)]
        rot = [(cx * math.cos(rad) + cy * math.sin(rad), -cx * math.sin(rad) + cy * math.cos(rad))
               for cx, cy in corners]
        bw = max(p[0] for p in rot) - min(p[0] for p in rot)
        bh = max(p[1] for p in rot) - min(p[1] for p in rot)
        if y + bh + 8 > h:
            break
        x0 = rng.randint(12, max(12, int(w - bw - 12)))
        cx, cy = x0 + bw / 2, y + bh / 2
        poly = [[round(cx + px, 1), round(cy + py, 1)] for px, py in rot]
        box = (int(cx - bw / 2), int(cy - bh / 2), int(math.ceil(cx + bw / 2)), int(math.ceil(cy + bh / 2)))
        region = np.asarray(img.crop(box), dtype=np.float32).reshape(-1, 3)
        under = tuple(region.mean(axis=0))
        busy = float((region @ np.array([0.299, 0.587, 0.114], np.float32)).std()) > 38
        layer = Image.new("RGBA", (tw, th), (0, 0, 0, 0))
        d = ImageDraw.Draw(layer)
        if busy or (kind not in ("plain", "paper") and rng.random() < 0.25):  # a plate, like a sign or a label
            plate = tuple(rng.randint(0, 255) for _ in range(3))
            d.rectangle((0, 0, tw - 1, th - 1), fill=plate + (255,))
            under = plate
        colour = pick_colour(rng, under)
        d.text((pad - left, pad - top), text, font=font, fill=colour + (255,))
        if angle:
            layer = layer.rotate(angle, resample=Image.BICUBIC, expand=True)
        lx, ly = round(cx - layer.size[0] / 2), round(cy - layer.size[1] / 2)
        img.paste(layer, (lx, ly), layer)
        lines.append({"text": text, "polygon": poly})
        y = int(math.ceil(y + bh)) + rng.randint(max(8, size // 2), size + 16)
    if rng.random() < 0.2:
        img = img.filter(ImageFilter.GaussianBlur(rng.uniform(0.4, 0.8)))
    img.info = {}
    return img, lines, kind


def warp_crop(page_bgr, poly):
    """The crop of a polygon, as PaddleOCR's get_rotate_crop_image cuts a detected box."""
    pts = np.asarray(poly, dtype=np.float32)
    cw = int(max(np.linalg.norm(pts[0] - pts[1]), np.linalg.norm(pts[2] - pts[3])))
    ch = int(max(np.linalg.norm(pts[0] - pts[3]), np.linalg.norm(pts[1] - pts[2])))
    dst = np.float32([[0, 0], [cw, 0], [cw, ch], [0, ch]])
    m = cv2.getPerspectiveTransform(pts, dst)
    return cv2.warpPerspective(page_bgr, m, (cw, ch), borderMode=cv2.BORDER_REPLICATE, flags=cv2.INTER_CUBIC)


def load_photos(photo_dir, names):
    out = []
    for name in names:
        p = os.path.join(photo_dir, name)
        if not os.path.exists(p):
            sys.exit(f"textpages.py: missing photo {p} (make deps)")
        im = Image.open(p)
        if im.mode in ("RGBA", "LA", "P"):
            im = im.convert("RGBA")
            bg = Image.new("RGB", im.size, (255, 255, 255))
            bg.paste(im, mask=im.split()[3])
            im = bg
        im = im.convert("RGB")
        im.info = {}  # no ICC profile copied into the pages
        out.append((name, im))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--pages", type=int, default=40)
    ap.add_argument("--seed", type=int, default=None, help="default: 11 for calib, 22 for eval")
    ap.add_argument("--split", choices=["calib", "eval"], default="eval")
    ap.add_argument("--photos", default=os.path.join(ROOT, "build", "photos"))
    ap.add_argument("--keys", default=os.path.join(ROOT, "build", "models", "ppocr_keys_v1.txt"))
    a = ap.parse_args()
    seed = a.seed if a.seed is not None else (11 if a.split == "calib" else 22)
    half = 0 if a.split == "calib" else 1
    words = [wd for i, wd in enumerate(sorted(set(WORDS))) if i % 2 == half]
    hanzi_all, latin_ok = load_charset(a.keys)
    # Chinese characters: alternate runs of 8 go to each split
    hanzi = [c for i, c in enumerate(hanzi_all) if (i // 8) % 2 == half]
    photos = load_photos(a.photos, [p for i, p in enumerate(PHOTOS) if i % 2 == half])
    for sub in ("pages", "rec", "cls"):
        os.makedirs(os.path.join(a.out, sub), exist_ok=True)
    truth, rec_labels, cls_labels, page_list = [], [], [], []
    n_line = 0
    for k in range(a.pages):
        rng = random.Random(f"textpages:{a.split}:{seed}:{k}")
        img, lines, kind = render_page(rng, photos, words, hanzi, latin_ok)
        name = f"p{k:04d}"
        path = os.path.join(a.out, "pages", name + ".png")
        img.save(path, compress_level=1)
        page_list.append(os.path.abspath(path))
        bgr = np.ascontiguousarray(np.asarray(img)[:, :, ::-1])
        for j, line in enumerate(lines):
            crop = warp_crop(bgr, line["polygon"])
            cname = f"{name}_{j:02d}.png"
            cv2.imwrite(os.path.join(a.out, "rec", cname), crop, [cv2.IMWRITE_PNG_COMPRESSION, 1])
            turned = n_line % 2
            cv2.imwrite(os.path.join(a.out, "cls", cname), cv2.rotate(crop, cv2.ROTATE_180) if turned else crop,
                        [cv2.IMWRITE_PNG_COMPRESSION, 1])
            rec_labels.append(f"{cname},{line['text']}")
            cls_labels.append(f"{cname},{turned}")
            n_line += 1
        truth.append({"image": f"pages/{name}.png", "size": [img.size[0], img.size[1]], "background": kind,
                      "lines": lines})
    with open(os.path.join(a.out, "truth.json"), "w", encoding="utf-8") as f:
        f.write(f'{{"split": "{a.split}", "seed": {seed}, "images": [\n')  # one page a line
        f.write(",\n".join(json.dumps(t, ensure_ascii=False) for t in truth))
        f.write("\n]}\n")
    for fname, rows in (("rec.labels", rec_labels), ("cls.labels", cls_labels), ("pages.list", page_list)):
        with open(os.path.join(a.out, fname), "w", encoding="utf-8") as f:
            f.write("".join(r + "\n" for r in rows))
    n_chars = sum(len(l["text"]) for p in truth for l in p["lines"])
    print(f"textpages: {a.split} seed {seed}: {len(truth)} pages, {n_line} lines, {n_chars} characters in {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

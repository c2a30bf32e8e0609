#!/usr/bin/python3
"""ocr_pipeline.py: PaddleOCR's detection + recognition pipeline, a test oracle (issue 13 item 3).

What PaddleOCR's tools/infer/predict_system.py does with predict_det.py and predict_rec.py
(PP-OCRv4, the direction classifier left out), in numpy and OpenCV, with ONNX Runtime as the
engine (tests/oracle/ort_batch.js: one node process per model runs every image or crop), so
that an FP32 model and a QDQ model written by ptq can be compared by what they read:

  det   DetResizeForTest(limit_side_len=960, limit_type='max'): the longer side down to 960 at
        most, each side rounded to a multiple of 32 (at least 32), cv2.resize bilinear; the
        BGR image (cv2.imread) /255, ImageNet mean/std, CHW.
        DBPostProcess(thresh=0.3, box_thresh=0.6, max_candidates=1000, unclip_ratio=1.5,
        score_mode='fast'): cv2.findContours on the binarised map, get_mini_boxes,
        box_score_fast, unclip, min size 3, boxes scaled back to the source image; then
        filter_tag_det_res (clockwise order, clip, drop boxes of side <= 3) and sorted_boxes.
        unclip: pyclipper's round-join offset by area*unclip_ratio/perimeter, as PaddleOCR;
        without pyclipper (Debian's python3-pyclipper) the offset of the min-area rectangle
        is replaced by that rectangle grown by the same distance on every side (same centre
        and angle): the min-area box of pyclipper's rounded polygon, up to pyclipper's
        rounding of the corners to integers (within 1.5 pixels of the probability map,
        tests/e2e/ocr_pipeline.sh).
  crop  get_rotate_crop_image: perspective warp (cubic, replicated border), turned by 90
        degrees when height/width >= 1.5.
  rec   resize_norm_img at height 48, width 48*max(320/48, w/h) (batch of one crop), bilinear
        cv2.resize to (ceil(48*w/h) capped, 48), /255 -0.5 /0.5, zero padding on the right;
        CTCLabelDecode: argmax per step, repeats collapsed, blank 0 dropped, index i -> line i
        of the dictionary (ppocr_keys_v1.txt) with ' ' as the last class (use_space_char);
        score = mean of the kept steps' probabilities; lines with score < drop_score (0.5,
        predict_system's default) are dropped.

usage:
  ocr_pipeline.py --det DET.onnx --rec REC.onnx --keys KEYS --images LIST_OR_DIR_OR_IMAGE --out R.json
                  [--boxes-from R0.json] [--drop-score 0.5] [--threads 2] [--print]
      --boxes-from: take the boxes of an earlier result instead of running det (DET not run);
      a truth.json of tests/oracle/textpages.py works too (its "polygon"s; images matched by
      path, else by base name).
  ocr_pipeline.py jitter --ref A.json --out J.json [--px 1] [--seed 1]
      A's boxes with each corner moved by up to px pixels (seeded): the CER of FP32 rec on them
      (--boxes-from J.json) is what a one-pixel box difference costs, the CER's noise floor.
  ocr_pipeline.py cer --ref A.json --hyp B.json
      character error rate of B against A: summed Levenshtein distance between the texts of
      each image (lines joined by '\\n' in reading order) over the reference's character
      count; and the share of reference lines that B reads identically (per image, lines
      matched as multisets).
  ocr_pipeline.py cer --truth truth.json --hyp B.json [--base A.json] [--boot 1000] [--seed 1] [--json F]
      CER of B against the truth (tests/oracle/textpages.py's truth.json; images matched by base
      name): per page, the Levenshtein distance between the truth's lines and B's, each joined by
      '\\n' in reading order, summed over the pages, over the truth's characters (the '\\n' between
      lines counted, as above); with the 95 % percentile bootstrap interval resampling pages with
      replacement (tests/oracle/bootstrap.py; seeded, deterministic). --base: also the paired
      difference B - A and its interval (same draws). --ignore-space: spaces dropped from both
      sides first, as PaddleOCR's RecMetric does by default (PP-OCRv4 rec often drops the space
      between Latin words).
  ocr_pipeline.py cer --labels rec.labels --hyp B.json [--base A.json] [...]
      the same for line crops read alone (B from --crops): each crop's text against its label
      ('image,text' lines), the crops of one page (NAME_L.png -> NAME) resampled together.
  ocr_pipeline.py --crops --rec REC.onnx --keys KEYS --images LIST --out R.json
      rec alone on images that are line crops (one line each, every reading kept, no drop score).
  ocr_pipeline.py classify --cls CLS.onnx --images LIST --out R.json
      PaddleOCR's direction classifier (predict_cls.py: resize to height 48 keeping the aspect,
      width capped at 192, /255 -0.5 /0.5, zero padding to 192): per image its class (argmax of
      label_list ['0', '180']: 0 upright, 1 turned) and the class's probability.
  ocr_pipeline.py top1 --labels cls.labels --hyp R.json [--base A.json] [...]
      top-1 accuracy of a classify result against 'image,class' labels, with its interval
      (crops of one page resampled together).
R.json: {"images": [{"image": PATH, "size": [W, H], "lines": [{"box": [[x, y] x4], "text": T,
         "score": S}, ...]}, ...]}
"""
import argparse
import json
import math
import os
import random
import subprocess
import sys
import tempfile
from collections import Counter

import cv2
import numpy as np

from edit_distance import levenshtein

try:
    import pyclipper
except ImportError:  # see unclip()
    pyclipper = None

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ORT_BATCH = os.path.join(ROOT, "tests", "oracle", "ort_batch.js")
IMAGE_EXT = (".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff", ".webp")


def run_model(model, arrays, workdir, tag, threads):
    """Runs MODEL on each array (its first input) in one node process; returns the first outputs."""
    if not arrays:
        return []
    d = os.path.join(workdir, tag)
    os.makedirs(d, exist_ok=True)
    lines = []
    for i, a in enumerate(arrays):
        np.save(os.path.join(d, f"in{i}.npy"), np.ascontiguousarray(a, dtype=np.float32))
        lines.append(f"{d}/in{i}.npy {d}/out{i}.npy")
    lst = os.path.join(d, "list.txt")
    with open(lst, "w") as f:
        f.write("\n".join(lines) + "\n")
    subprocess.run(["node", ORT_BATCH, model, lst, "--threads", str(threads)], check=True)
    return [np.load(os.path.join(d, f"out{i}.npy")) for i in range(len(arrays))]


# ---- det: preprocessing (DetResizeForTest, NormalizeImage, ToCHWImage) ----

def det_preprocess(img, limit_side_len=960):
    h, w = img.shape[:2]
    ratio = float(limit_side_len) / max(h, w) if max(h, w) > limit_side_len else 1.0
    resize_h, resize_w = int(h * ratio), int(w * ratio)
    resize_h = max(int(round(resize_h / 32) * 32), 32)
    resize_w = max(int(round(resize_w / 32) * 32), 32)
    x = cv2.resize(img, (resize_w, resize_h))
    mean = np.array([0.485, 0.456, 0.406], np.float32).reshape(1, 1, 3)
    std = np.array([0.229, 0.224, 0.225], np.float32).reshape(1, 1, 3)
    x = (x.astype(np.float32) * np.float32(1.0 / 255.0) - mean) / std
    return x.transpose(2, 0, 1)[None]


# ---- det: DBPostProcess ----

def get_mini_boxes(contour):
    bounding_box = cv2.minAreaRect(contour)
    points = sorted(list(cv2.boxPoints(bounding_box)), key=lambda x: x[0])
    if points[1][1] > points[0][1]:
        i1, i4 = 0, 1
    else:
        i1, i4 = 1, 0
    if points[3][1] > points[2][1]:
        i2, i3 = 2, 3
    else:
        i2, i3 = 3, 2
    return [points[i1], points[i2], points[i3], points[i4]], min(bounding_box[1])


def box_score_fast(bitmap, _box):
    h, w = bitmap.shape[:2]
    box = _box.copy()
    xmin = np.clip(np.floor(box[:, 0].min()).astype("int32"), 0, w - 1)
    xmax = np.clip(np.ceil(box[:, 0].max()).astype("int32"), 0, w - 1)
    ymin = np.clip(np.floor(box[:, 1].min()).astype("int32"), 0, h - 1)
    ymax = np.clip(np.ceil(box[:, 1].max()).astype("int32"), 0, h - 1)
    mask = np.zeros((ymax - ymin + 1, xmax - xmin + 1), dtype=np.uint8)
    box[:, 0] = box[:, 0] - xmin
    box[:, 1] = box[:, 1] - ymin
    cv2.fillPoly(mask, box.reshape(1, -1, 2).astype("int32"), 1)
    return cv2.mean(bitmap[ymin:ymax + 1, xmin:xmax + 1], mask)[0]


def unclip(box, unclip_ratio):
    """PaddleOCR: distance = area * unclip_ratio / perimeter (shapely Polygon), pyclipper offset."""
    b = np.asarray(box, dtype=np.float64)
    x, y = b[:, 0], b[:, 1]
    area = 0.5 * abs(np.dot(x, np.roll(y, -1)) - np.dot(y, np.roll(x, -1)))
    length = float(np.sum(np.linalg.norm(b - np.roll(b, -1, axis=0), axis=1)))
    distance = area * unclip_ratio / length
    if pyclipper is not None:
        offset = pyclipper.PyclipperOffset()
        offset.AddPath(box, pyclipper.JT_ROUND, pyclipper.ET_CLOSEDPOLYGON)
        return np.array(offset.Execute(distance))
    # Fallback: the rectangle grown by `distance` on each side (see the module comment).
    (cx, cy), (rw, rh), angle = cv2.minAreaRect(b.astype(np.float32))
    return cv2.boxPoints(((cx, cy), (rw + 2 * distance, rh + 2 * distance), angle))[None]


def boxes_from_bitmap(pred, bitmap, dest_width, dest_height, box_thresh=0.6, unclip_ratio=1.5,
                      max_candidates=1000, min_size=3):
    height, width = bitmap.shape
    outs = cv2.findContours((bitmap * 255).astype(np.uint8), cv2.RETR_LIST, cv2.CHAIN_APPROX_SIMPLE)
    contours = outs[1] if len(outs) == 3 else outs[0]
    boxes = []
    for contour in contours[:max_candidates]:
        points, sside = get_mini_boxes(contour)
        if sside < min_size:
            continue
        points = np.array(points)
        score = box_score_fast(pred, points.reshape(-1, 2))
        if box_thresh > score:
            continue
        box = unclip(points, unclip_ratio)
        if len(box) > 1:  # PaddleOCR >= 2.7 skips a box the offset splits in several
            continue
        box, sside = get_mini_boxes(box.reshape(-1, 1, 2))
        if sside < min_size + 2:
            continue
        box = np.array(box)
        box[:, 0] = np.clip(np.round(box[:, 0] / width * dest_width), 0, dest_width)
        box[:, 1] = np.clip(np.round(box[:, 1] / height * dest_height), 0, dest_height)
        boxes.append(box.astype("int32"))
    return boxes


def order_points_clockwise(pts):
    rect = np.zeros((4, 2), dtype="float32")
    s = pts.sum(axis=1)
    rect[0] = pts[np.argmin(s)]
    rect[2] = pts[np.argmax(s)]
    tmp = np.delete(pts, (np.argmin(s), np.argmax(s)), axis=0)
    diff = np.diff(np.array(tmp), axis=1)
    rect[1] = tmp[np.argmin(diff)]
    rect[3] = tmp[np.argmax(diff)]
    return rect


def filter_tag_det_res(dt_boxes, img_height, img_width):
    out = []
    for box in dt_boxes:
        box = order_points_clockwise(np.array(box))
        for p in range(box.shape[0]):
            box[p, 0] = int(min(max(box[p, 0], 0), img_width - 1))
            box[p, 1] = int(min(max(box[p, 1], 0), img_height - 1))
        if int(np.linalg.norm(box[0] - box[1])) <= 3 or int(np.linalg.norm(box[0] - box[3])) <= 3:
            continue
        out.append(box)
    return out


def sorted_boxes(dt_boxes):
    """PaddleOCR's sorted_boxes: top to bottom, then left to right within 10 pixels of height."""
    _boxes = sorted(dt_boxes, key=lambda x: (x[0][1], x[0][0]))
    for i in range(len(_boxes) - 1):
        for j in range(i, -1, -1):
            if abs(_boxes[j + 1][0][1] - _boxes[j][0][1]) < 10 and _boxes[j + 1][0][0] < _boxes[j][0][0]:
                _boxes[j], _boxes[j + 1] = _boxes[j + 1], _boxes[j]
            else:
                break
    return _boxes


def det_postprocess(prob, img_h, img_w):
    pred = prob[0, 0]
    boxes = boxes_from_bitmap(pred, pred > 0.3, img_w, img_h)
    return sorted_boxes(filter_tag_det_res(boxes, img_h, img_w))


# ---- crops and rec ----

def get_rotate_crop_image(img, points):
    points = np.asarray(points, dtype=np.float32)
    w = int(max(np.linalg.norm(points[0] - points[1]), np.linalg.norm(points[2] - points[3])))
    h = int(max(np.linalg.norm(points[0] - points[3]), np.linalg.norm(points[1] - points[2])))
    pts_std = np.float32([[0, 0], [w, 0], [w, h], [0, h]])
    m = cv2.getPerspectiveTransform(points, pts_std)
    dst = cv2.warpPerspective(img, m, (w, h), borderMode=cv2.BORDER_REPLICATE, flags=cv2.INTER_CUBIC)
    if dst.shape[0] * 1.0 / dst.shape[1] >= 1.5:
        dst = np.rot90(dst)
    return dst


def rec_preprocess(img, img_h=48, img_w=320, fixed_width=False):
    """fixed_width: predict_cls.py's resize_norm_img (the width stays img_w, longer lines squeezed)."""
    h, w = img.shape[:2]
    if not fixed_width:
        max_wh_ratio = max(img_w / img_h, w * 1.0 / h)
        img_w = int(img_h * max_wh_ratio)
    ratio = w / float(h)
    resized_w = img_w if math.ceil(img_h * ratio) > img_w else int(math.ceil(img_h * ratio))
    x = cv2.resize(img, (resized_w, img_h)).astype("float32")
    x = x.transpose((2, 0, 1)) / 255
    x -= 0.5
    x /= 0.5
    pad = np.zeros((3, img_h, img_w), dtype=np.float32)
    pad[:, :, 0:resized_w] = x
    return pad[None]


def load_keys(path):
    with open(path, "rb") as f:
        chars = [line.decode("utf-8").strip("\n").strip("\r\n") for line in f]
    return ["blank"] + chars + [" "]


def ctc_decode(prob, chars):
    """CTCLabelDecode for one sequence: prob [T, C] (the model ends in Softmax)."""
    idx = prob.argmax(axis=1)
    p = prob.max(axis=1)
    keep = np.ones(len(idx), dtype=bool)
    keep[1:] = idx[1:] != idx[:-1]
    keep &= idx != 0
    text = "".join(chars[i] for i in idx[keep])
    conf = p[keep]
    return text, float(np.mean(conf)) if len(conf) else 0.0


# ---- the pipeline ----

def list_images(spec):
    if os.path.isdir(spec):
        return sorted(os.path.join(spec, f) for f in os.listdir(spec) if f.lower().endswith(IMAGE_EXT))
    if spec.lower().endswith(IMAGE_EXT):
        return [spec]
    with open(spec) as f:
        return [l.strip() for l in f if l.strip()]


def ocr(args):
    paths = list_images(args.images)
    chars = load_keys(args.keys)
    imgs = []
    for p in paths:
        im = cv2.imread(p, cv2.IMREAD_COLOR)
        if im is None:
            sys.exit(f"ocr_pipeline.py: cannot read {p}")
        imgs.append(im)
    with tempfile.TemporaryDirectory(prefix="ocr_pipeline.") as tmp:
        if args.crops:
            all_boxes = None
        elif args.boxes_from:
            prev = {}
            for r in json.load(open(args.boxes_from))["images"]:
                prev[r["image"]] = prev[os.path.basename(r["image"])] = r
            all_boxes = [[np.array(l["box"] if "box" in l else l["polygon"], np.float32)
                          for l in (prev[p] if p in prev else prev[os.path.basename(p)])["lines"]]
                         for p in paths]
        else:
            probs = run_model(args.det, [det_preprocess(im) for im in imgs], tmp, "det", args.threads)
            all_boxes = [det_postprocess(pr, im.shape[0], im.shape[1]) for pr, im in zip(probs, imgs)]
        crops, owner = [], []
        if all_boxes is None:  # --crops: every image is one line
            crops = [rec_preprocess(im) for im in imgs]
            all_boxes = [[None] for _ in imgs]
        for k, (im, boxes) in enumerate(zip(imgs, all_boxes) if not args.crops else []):
            for b in boxes:
                crops.append(rec_preprocess(get_rotate_crop_image(im, b)))
                owner.append(k)
        outs = run_model(args.rec, crops, tmp, "rec", args.threads)
    results = [{"image": p, "size": [im.shape[1], im.shape[0]], "lines": []} for p, im in zip(paths, imgs)]
    it = iter(outs)
    for k, boxes in enumerate(all_boxes):
        for b in boxes:
            text, score = ctc_decode(next(it)[0], chars)
            if args.crops:
                results[k]["lines"].append({"text": text, "score": round(score, 6)})
            elif score >= args.drop_score:
                results[k]["lines"].append({"box": np.asarray(b).astype(int).tolist(), "text": text,
                                            "score": round(score, 6)})
    with open(args.out, "w") as f:
        json.dump({"images": results}, f, ensure_ascii=False, indent=1)
    if args.print:
        for r in results:
            print(f"== {r['image']}")
            for l in r["lines"]:
                print(f"  {l['score']:.3f}  {l['text']}")


# ---- CER ----

def cer(ref_path, hyp_path):
    ref = {r["image"]: r for r in json.load(open(ref_path))["images"]}
    hyp = {r["image"]: r for r in json.load(open(hyp_path))["images"]}
    edits = chars = lines = same = 0
    for img, r in ref.items():
        rl = [l["text"] for l in r["lines"]]
        hl = [l["text"] for l in hyp[img]["lines"]] if img in hyp else []
        edits += levenshtein("\n".join(rl), "\n".join(hl))
        chars += len("\n".join(rl))
        lines += len(rl)
        same += sum((Counter(rl) & Counter(hl)).values())
    missing = [i for i in ref if i not in hyp]
    return edits / max(chars, 1), same / max(lines, 1), edits, chars, lines, missing


def _by_name(path):
    out = {}
    for r in json.load(open(path, encoding="utf-8"))["images"]:
        name = os.path.basename(r["image"])
        if name in out:
            sys.exit(f"ocr_pipeline.py: {path}: image {name} listed twice")
        out[name] = r
    return out


def read_labels(path):
    """'image,value' lines (split at the first comma) -> [(base name, value)], refusing a line
    without a comma, an empty name or a name given twice."""
    out, seen = [], set()
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.rstrip("\n").rstrip("\r")
            if not line:
                continue
            name, sep, value = line.partition(",")
            if not sep or not name or name in seen:
                sys.exit(f"ocr_pipeline.py: {path}:{n}: expected 'image,value' with a new image name: {line!r}")
            seen.add(name)
            out.append((os.path.basename(name), value))
    return out


def page_of(name):
    """A crop's page: NAME_L.png -> NAME (textpages.py's names); other names are their own unit."""
    stem = os.path.splitext(name)[0]
    head, sep, tail = stem.rpartition("_")
    return head if sep and tail.isdigit() else stem


def truth_units(truth_path, hyp_path, ignore_space=False):
    """Per truth page: (edits, characters, lines, identical lines) of hyp against the truth."""
    truth, hyp = _by_name(truth_path), _by_name(hyp_path)
    missing = [n for n in truth if n not in hyp]
    if missing:
        sys.exit(f"ocr_pipeline.py: {hyp_path} lacks {len(missing)} of the truth's pages, e.g. {missing[0]}")
    units = []
    for name, t in truth.items():
        tl = [despace(l["text"], ignore_space) for l in t["lines"]]
        hl = [despace(l["text"], ignore_space) for l in hyp[name]["lines"]]
        ref = "\n".join(tl)
        units.append((levenshtein(ref, "\n".join(hl)), len(ref), len(tl), sum((Counter(tl) & Counter(hl)).values())))
    return units


def label_units(labels_path, hyp_path, score):
    """Per page of crops: (score numerator, denominator, crops, exact crops); score(label, hyp
    reading) gives a crop's (numerator, denominator, exact)."""
    hyp = _by_name(hyp_path)
    pages = {}
    for name, label in read_labels(labels_path):
        if name not in hyp:
            sys.exit(f"ocr_pipeline.py: {hyp_path} has no reading of {name} ({labels_path})")
        num, den, exact = score(label, hyp[name])
        u = pages.setdefault(page_of(name), [0, 0, 0, 0])
        u[0] += num
        u[1] += den
        u[2] += 1
        u[3] += exact
    return [tuple(u) for u in pages.values()]


def despace(text, ignore_space):
    return text.replace(" ", "") if ignore_space else text


def rec_score(label, r, ignore_space=False):
    label = despace(label, ignore_space)
    text = despace("".join(l["text"] for l in r["lines"]), ignore_space)
    return levenshtein(label, text), len(label), int(label == text)


def cls_score(label, r):
    ok = int(int(label) == r["class"])
    return 1 - ok, 1, ok


def report(units, base_units, a, what):
    from bootstrap import paired_delta, ratio
    num = [u[0] for u in units]
    den = [u[1] for u in units]
    p, lo, hi = ratio(num, den, a.boot, a.seed)
    rep = {"metric": what, "point": p, "lo": lo, "hi": hi, "num": int(sum(num)), "den": int(sum(den)),
           "units": len(units), "items": int(sum(u[2] for u in units)), "exact": int(sum(u[3] for u in units)),
           "boot": a.boot, "seed": a.seed}
    if what == "top1":  # accuracy: 1 - error rate
        rep.update(point=1 - p, lo=1 - hi, hi=1 - lo)
    line = (f"{what} {rep['point']:.4f} [{rep['lo']:.4f}, {rep['hi']:.4f}] 95 % bootstrap over {len(units)} pages "
            f"({rep['num']} {'errors' if what == 'top1' else 'edits'} / {rep['den']}); "
            f"exact {rep['exact']} of {rep['items']}")
    if base_units is not None:
        if len(base_units) != len(units):
            sys.exit("ocr_pipeline.py: --base covers other pages")
        if [u[1] for u in base_units] != den:
            sys.exit("ocr_pipeline.py: --base covers other pages")
        d, dlo, dhi = paired_delta([u[0] for u in base_units], num, den, a.boot, a.seed)
        if what == "top1":
            d, dlo, dhi = -d, -dhi, -dlo
        rep.update(delta=d, delta_lo=dlo, delta_hi=dhi)
        line += f"; minus base {d:+.4f} [{dlo:+.4f}, {dhi:+.4f}]"
    print(line)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rep, f)


def classify(args):
    paths = list_images(args.images)
    xs = []
    for p in paths:
        im = cv2.imread(p, cv2.IMREAD_COLOR)
        if im is None:
            sys.exit(f"ocr_pipeline.py: cannot read {p}")
        xs.append(rec_preprocess(im, 48, 192, fixed_width=True))
    with tempfile.TemporaryDirectory(prefix="ocr_pipeline.") as tmp:
        outs = run_model(args.cls, xs, tmp, "cls", args.threads)
    res = [{"image": p, "class": int(o[0].argmax()), "score": round(float(o[0].max()), 6)} for p, o in zip(paths, outs)]
    with open(args.out, "w") as f:
        json.dump({"images": res}, f, indent=0)


def jitter(ref, out, px, seed):
    """ref's boxes with every corner moved by a whole number of pixels in [-px, px] on each axis
    (Python's random with this seed): run rec on them (--boxes-from) to see what a box that
    differs by a pixel or two costs the FP32 pipeline itself, the noise floor of a CER."""
    r = json.load(open(ref))
    rng = random.Random(seed)
    for img in r["images"]:
        for line in img["lines"]:
            line["box"] = [[x + rng.randint(-px, px), y + rng.randint(-px, px)] for x, y in line["box"]]
    json.dump(r, open(out, "w"))


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "jitter":
        ap = argparse.ArgumentParser(prog="ocr_pipeline.py jitter")
        ap.add_argument("--ref", required=True)
        ap.add_argument("--out", required=True)
        ap.add_argument("--px", type=int, default=1)
        ap.add_argument("--seed", type=int, default=1)
        a = ap.parse_args(sys.argv[2:])
        jitter(a.ref, a.out, a.px, a.seed)
        return
    if len(sys.argv) > 1 and sys.argv[1] == "classify":
        ap = argparse.ArgumentParser(prog="ocr_pipeline.py classify")
        ap.add_argument("--cls", required=True)
        ap.add_argument("--images", required=True)
        ap.add_argument("--out", required=True)
        ap.add_argument("--threads", type=int, default=2)
        classify(ap.parse_args(sys.argv[2:]))
        return
    if len(sys.argv) > 1 and sys.argv[1] in ("cer", "top1"):
        ap = argparse.ArgumentParser(prog="ocr_pipeline.py " + sys.argv[1])
        g = ap.add_mutually_exclusive_group(required=True)
        g.add_argument("--ref")
        g.add_argument("--truth")
        g.add_argument("--labels")
        ap.add_argument("--hyp", required=True)
        ap.add_argument("--base", help="paired difference: hyp minus base, same draws")
        ap.add_argument("--boot", type=int, default=1000)
        ap.add_argument("--seed", type=int, default=1)
        ap.add_argument("--json", help="write the figures as JSON too")
        ap.add_argument("--ignore-space", action="store_true",
                        help="drop spaces from both texts first (PaddleOCR's RecMetric default)")
        a = ap.parse_args(sys.argv[2:])
        if sys.argv[1] == "top1":
            if not a.labels:
                ap.error("top1 needs --labels")
            units = lambda h: label_units(a.labels, h, cls_score)
            report(units(a.hyp), units(a.base) if a.base else None, a, "top1")
            return
        if a.truth or a.labels:
            if a.truth:
                units = lambda h: truth_units(a.truth, h, a.ignore_space)
            else:
                units = lambda h: label_units(a.labels, h, lambda l, r: rec_score(l, r, a.ignore_space))
            report(units(a.hyp), units(a.base) if a.base else None, a, "CER")
            return
        c, share, edits, chars, lines, missing = cer(a.ref, a.hyp)
        print(f"CER {c:.4f} ({edits} edits / {chars} reference characters); "
              f"identical lines {share:.4f} of {lines}")
        if missing:
            print(f"warning: {len(missing)} reference images missing from {a.hyp}", file=sys.stderr)
        return
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--det")
    ap.add_argument("--rec", required=True)
    ap.add_argument("--keys", required=True)
    ap.add_argument("--images", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--boxes-from")
    ap.add_argument("--drop-score", type=float, default=0.5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--print", action="store_true")
    ap.add_argument("--crops", action="store_true", help="the images are line crops: rec alone")
    a = ap.parse_args()
    if not a.det and not a.boxes_from and not a.crops:
        ap.error("--det, --boxes-from or --crops is required")
    ocr(a)


if __name__ == "__main__":
    main()

"""preprocess_ref.py PHOTOS PRESET OUT.npy [--resize nearest]: the tensors a preset means,
computed with the libraries each step is named after (OpenCV, PIL, numpy; test oracle
only). Images PIL cannot fully decode (truncated files) are skipped, as ptq skips them.
Paths are taken in byte-wise sorted order, recursively, like ptq. The presets whose size
follows the image (*-dynamic) write OUT as a folder of 000000.npy ... (one image each), as
`ptq preprocess --dump` does for them."""
import os
import sys

import cv2
import numpy as np
from PIL import Image

IMAGENET_MEAN, IMAGENET_STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]


def files(root):
    out = []
    for d, _, fs in os.walk(root):
        for f in fs:
            if f.startswith("."):
                continue
            p = os.path.join(d, f)
            with open(p, "rb") as fh:
                head = fh.read(8)
            if head[:3] == b"\xff\xd8\xff" or head == b"\x89PNG\r\n\x1a\n":
                out.append(p)
    return sorted(out, key=lambda s: s.encode())


def decodes(p):
    try:
        with Image.open(p) as im:
            im.load()
        return True
    except Exception:
        return False


def cv_read(p):
    a = cv2.imread(p, cv2.IMREAD_COLOR)  # BGR, EXIF applied, 16-bit reduced to 8
    return a


def normalize(img, scale, mean, std):
    x = img.astype(np.float32) * np.float32(scale)
    x = (x - np.array(mean, np.float32)) / np.array(std, np.float32)
    return x.transpose(2, 0, 1)


def torchvision(p, shorter=256, size=224):
    im = Image.open(p).convert("RGB")
    w, h = im.size
    if w <= h:
        nw, nh = shorter, int(shorter * h / w)
    else:
        nw, nh = int(shorter * w / h), shorter
    im = im.resize((nw, nh), Image.BILINEAR)
    top, left = int(round((nh - size) / 2.0)), int(round((nw - size) / 2.0))
    a = np.zeros((size, size, 3), np.uint8)
    crop = np.asarray(im)[max(top, 0):top + size, max(left, 0):left + size]
    a[max(-top, 0):max(-top, 0) + crop.shape[0], max(-left, 0):max(-left, 0) + crop.shape[1]] = crop
    return normalize(a, 1 / 255, IMAGENET_MEAN, IMAGENET_STD)


def caffe(p, shorter=256, size=224):
    a = cv_read(p)
    h, w = a.shape[:2]
    if w <= h:
        nw, nh = shorter, int(shorter * h / w)
    else:
        nw, nh = int(shorter * w / h), shorter
    a = cv2.resize(a, (nw, nh), interpolation=cv2.INTER_LINEAR)
    top, left = int(round((nh - size) / 2.0)), int(round((nw - size) / 2.0))
    a = a[top:top + size, left:left + size]
    return normalize(a, 1.0, [103.939, 116.779, 123.68], [1, 1, 1])


def letterbox(p, new=640):  # Ultralytics LetterBox(auto=False, scaleup=True, center=True)
    a = cv2.cvtColor(cv_read(p), cv2.COLOR_BGR2RGB)
    h, w = a.shape[:2]
    r = min(new / h, new / w)
    nw, nh = int(round(w * r)), int(round(h * r))
    dw, dh = (new - nw) / 2, (new - nh) / 2
    if (w, h) != (nw, nh):
        a = cv2.resize(a, (nw, nh), interpolation=cv2.INTER_LINEAR)
    top, bottom = int(round(dh - 0.1)), int(round(dh + 0.1))
    left, right = int(round(dw - 0.1)), int(round(dw + 0.1))
    a = cv2.copyMakeBorder(a, top, bottom, left, right, cv2.BORDER_CONSTANT, value=(114, 114, 114))
    return normalize(a, 1 / 255, [0, 0, 0], [1, 1, 1])


def det(p, size=640, interp=cv2.INTER_LINEAR):
    a = cv2.resize(cv_read(p), (size, size), interpolation=interp)
    return normalize(a, 1 / 255, IMAGENET_MEAN, IMAGENET_STD)


def rec(p, H=48, W=320):  # PaddleOCR resize_norm_img
    a = cv_read(p)
    h, w = a.shape[:2]
    rw = min(W, int(np.ceil(H * w / float(h))))
    a = cv2.resize(a, (rw, H)).astype("float32")
    a = a.transpose((2, 0, 1)) / 255
    a -= 0.5
    a /= 0.5
    out = np.zeros((3, H, W), np.float32)
    out[:, :, :rw] = a
    return out


def rec_dynamic(p, H=48, W=320, max_width=3200):
    """PaddleOCR predict_rec.py with a batch of one: max_wh_ratio = max(imgW / imgH, w / h),
    imgW = int(imgH * max_wh_ratio) (ptq caps it at max_width), then resize_norm_img."""
    h, w = cv_read(p).shape[:2]
    max_wh_ratio = max(W / H, w * 1.0 / h)
    return rec(p, H, min(int(H * max_wh_ratio), max_width))


def det_dynamic(p, limit_side_len=960, limit_type="max"):
    """PaddleOCR DetResizeForTest.resize_image_type0, then NormalizeImage and ToCHWImage."""
    img = cv_read(p)
    h, w, c = img.shape
    if limit_type == "max":
        if max(h, w) > limit_side_len:
            ratio = float(limit_side_len) / h if h > w else float(limit_side_len) / w
        else:
            ratio = 1.
    else:
        if min(h, w) < limit_side_len:
            ratio = float(limit_side_len) / h if h < w else float(limit_side_len) / w
        else:
            ratio = 1.
    resize_h = int(h * ratio)
    resize_w = int(w * ratio)
    resize_h = max(int(round(resize_h / 32) * 32), 32)
    resize_w = max(int(round(resize_w / 32) * 32), 32)
    img = cv2.resize(img, (int(resize_w), int(resize_h)))
    return normalize(img, 1 / 255, IMAGENET_MEAN, IMAGENET_STD)


PRESETS = {
    "imagenet-torchvision": torchvision, "imagenet-caffe": caffe, "yolo-letterbox-640": letterbox,
    "paddleocr-det": det, "paddleocr-rec": rec, "paddleocr-cls": lambda p: rec(p, 48, 192),
    "paddleocr-det-nearest": lambda p: det(p, interp=cv2.INTER_NEAREST),
    "paddleocr-rec-dynamic": rec_dynamic, "paddleocr-det-dynamic": det_dynamic,
    "paddleocr-det-dynamic-min": lambda p: det_dynamic(p, 736, "min"),
}

if __name__ == "__main__":
    photos, preset, out = sys.argv[1:4]
    xs = [PRESETS[preset](p) for p in files(photos) if decodes(p)]
    if preset.startswith(("paddleocr-rec-dynamic", "paddleocr-det-dynamic")):
        os.makedirs(out, exist_ok=True)
        for i, x in enumerate(xs):
            np.save(os.path.join(out, "%06d.npy" % i), x[None].astype(np.float32))
    else:
        np.save(out, np.stack(xs).astype(np.float32))

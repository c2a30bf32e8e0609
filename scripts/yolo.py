"""yolo.py: a YOLOv8-like detector in PyTorch for ptq's model zoo (scripts/zoo.py builds it).

Written here from the architecture's published description (no Ultralytics code or weights):
Conv-BN-SiLU blocks, C2f (cross-stage partial with two convolutions and n bottlenecks, every
bottleneck's output concatenated), SPPF (three chained 5x5 max-pools), an FPN/PAN neck (nearest
upsampling + concat top-down, strided conv + concat bottom-up), and a decoupled anchor-free head:
per level one branch of 4 x reg_max distance logits (box) and one of nc class logits. The box
distances are decoded with DFL (softmax over reg_max bins, expectation by a fixed 1x1 conv of
weights 0..reg_max-1), then (left, top, right, bottom) around each grid cell's centre become
(cx, cy, w, h) in input pixels. Output [1, 4 + nc, N] (N = sum of the levels' H x W), classes
through a sigmoid: the layout of a YOLOv8 ONNX export.

YoloNMS appends the post-processing a deployed detector runs: the best class per box, a score
threshold, torchvision.ops.batched_nms (exported as ONNX NonMaxSuppression) and up to max_det
rows [x1, y1, x2, y2, score, class] in a [1, K, 6] output.
"""
import torch
import torch.nn as nn
import torchvision


class Conv(nn.Module):
    """Conv2d (no bias) + BatchNorm2d + SiLU."""

    def __init__(self, c1, c2, k=1, s=1):
        super().__init__()
        self.conv = nn.Conv2d(c1, c2, k, s, k // 2, bias=False)
        self.bn = nn.BatchNorm2d(c2, eps=1e-3, momentum=0.03)
        self.act = nn.SiLU()

    def forward(self, x):
        return self.act(self.bn(self.conv(x)))


class Bottleneck(nn.Module):
    def __init__(self, c1, c2, shortcut=True):
        super().__init__()
        self.cv1 = Conv(c1, c2, 3)
        self.cv2 = Conv(c2, c2, 3)
        self.add = shortcut and c1 == c2

    def forward(self, x):
        y = self.cv2(self.cv1(x))
        return x + y if self.add else y


class C2f(nn.Module):
    """1x1 conv to 2c channels, split in two halves; n bottlenecks chained on the second half;
    all pieces concatenated and fused by a 1x1 conv."""

    def __init__(self, c1, c2, n=1, shortcut=False):
        super().__init__()
        self.c = c2 // 2
        self.cv1 = Conv(c1, 2 * self.c, 1)
        self.cv2 = Conv((2 + n) * self.c, c2, 1)
        self.m = nn.ModuleList(Bottleneck(self.c, self.c, shortcut) for _ in range(n))

    def forward(self, x):
        y = list(self.cv1(x).chunk(2, 1))
        for m in self.m:
            y.append(m(y[-1]))
        return self.cv2(torch.cat(y, 1))


class SPPF(nn.Module):
    def __init__(self, c1, c2, k=5):
        super().__init__()
        c_ = c1 // 2
        self.cv1 = Conv(c1, c_, 1)
        self.cv2 = Conv(c_ * 4, c2, 1)
        self.m = nn.MaxPool2d(k, 1, k // 2)

    def forward(self, x):
        x = self.cv1(x)
        y1 = self.m(x)
        y2 = self.m(y1)
        return self.cv2(torch.cat((x, y1, y2, self.m(y2)), 1))


class DFL(nn.Module):
    """Distribution focal loss decoding: softmax over reg_max bins, then their expectation."""

    def __init__(self, reg_max=16):
        super().__init__()
        self.reg_max = reg_max
        self.conv = nn.Conv2d(reg_max, 1, 1, bias=False).requires_grad_(False)
        self.conv.weight.data[:] = torch.arange(reg_max, dtype=torch.float32).view(1, reg_max, 1, 1)

    def forward(self, x):
        b, _, a = x.shape
        return self.conv(x.view(b, 4, self.reg_max, a).transpose(2, 1).softmax(1)).view(b, 4, a)


class Detect(nn.Module):
    def __init__(self, nc, ch, strides, reg_max=16):
        super().__init__()
        self.nc, self.reg_max, self.strides = nc, reg_max, strides
        self.no = nc + 4 * reg_max
        c2 = max(16, ch[0] // 4, 4 * reg_max)
        c3 = max(ch[0], min(nc, 100))
        self.cv2 = nn.ModuleList(nn.Sequential(Conv(c, c2, 3), Conv(c2, c2, 3), nn.Conv2d(c2, 4 * reg_max, 1)) for c in ch)
        self.cv3 = nn.ModuleList(nn.Sequential(Conv(c, c3, 3), Conv(c3, c3, 3), nn.Conv2d(c3, nc, 1)) for c in ch)
        self.dfl = DFL(reg_max)

    def forward(self, xs):
        b = xs[0].shape[0]
        outs, anchors, strides = [], [], []
        for i, x in enumerate(xs):
            h, w = x.shape[2], x.shape[3]
            outs.append(torch.cat((self.cv2[i](x), self.cv3[i](x)), 1).view(b, self.no, -1))
            # grid cell centres (constants at export: the input size is fixed)
            sy, sx = torch.meshgrid(torch.arange(h, dtype=torch.float32) + 0.5,
                                    torch.arange(w, dtype=torch.float32) + 0.5, indexing="ij")
            anchors.append(torch.stack((sx, sy), 0).view(2, -1))
            strides.append(torch.full((1, h * w), float(self.strides[i])))
        y = torch.cat(outs, 2)
        box, cls = y.split((4 * self.reg_max, self.nc), 1)
        anchors = torch.cat(anchors, 1).unsqueeze(0)
        stride = torch.cat(strides, 1).unsqueeze(0)
        lt, rb = self.dfl(box).chunk(2, 1)
        x1y1, x2y2 = anchors - lt, anchors + rb
        xywh = torch.cat(((x1y1 + x2y2) / 2, x2y2 - x1y1), 1) * stride
        return torch.cat((xywh, cls.sigmoid()), 1)


class YoloV8Like(nn.Module):
    """YOLOv8's layer plan at scale n by default (depth 0.33, width 0.25)."""

    def __init__(self, nc=80, depth=0.33, width=0.25, max_channels=1024):
        super().__init__()

        def ch(c):
            return int(min(c, max_channels) * width)

        def n(k):
            return max(round(k * depth), 1)

        self.b0 = Conv(3, ch(64), 3, 2)
        self.b1 = Conv(ch(64), ch(128), 3, 2)
        self.b2 = C2f(ch(128), ch(128), n(3), True)
        self.b3 = Conv(ch(128), ch(256), 3, 2)
        self.b4 = C2f(ch(256), ch(256), n(6), True)       # P3/8
        self.b5 = Conv(ch(256), ch(512), 3, 2)
        self.b6 = C2f(ch(512), ch(512), n(6), True)       # P4/16
        self.b7 = Conv(ch(512), ch(1024), 3, 2)
        self.b8 = C2f(ch(1024), ch(1024), n(3), True)
        self.b9 = SPPF(ch(1024), ch(1024), 5)              # P5/32
        self.up = nn.Upsample(scale_factor=2, mode="nearest")
        self.h12 = C2f(ch(1024) + ch(512), ch(512), n(3))
        self.h15 = C2f(ch(512) + ch(256), ch(256), n(3))   # P3 out
        self.h16 = Conv(ch(256), ch(256), 3, 2)
        self.h18 = C2f(ch(256) + ch(512), ch(512), n(3))   # P4 out
        self.h19 = Conv(ch(512), ch(512), 3, 2)
        self.h21 = C2f(ch(512) + ch(1024), ch(1024), n(3))  # P5 out
        self.detect = Detect(nc, (ch(256), ch(512), ch(1024)), (8, 16, 32))

    def features(self, x):
        """The neck's three levels (P3, P4, P5 outputs) that the head reads."""
        x = self.b2(self.b1(self.b0(x)))
        p3 = self.b4(self.b3(x))
        p4 = self.b6(self.b5(p3))
        p5 = self.b9(self.b8(self.b7(p4)))
        h12 = self.h12(torch.cat((self.up(p5), p4), 1))
        h15 = self.h15(torch.cat((self.up(h12), p3), 1))
        h18 = self.h18(torch.cat((self.h16(h15), h12), 1))
        h21 = self.h21(torch.cat((self.h19(h18), p5), 1))
        return [h15, h18, h21]

    def forward(self, x):
        return self.detect(self.features(x))


class YoloNMS(nn.Module):
    """YoloV8Like + post-processing: [1, K, 6] rows x1, y1, x2, y2, score, class (K <= max_det)."""

    def __init__(self, model, conf=0.25, iou=0.45, max_det=300):
        super().__init__()
        self.model, self.conf, self.iou, self.max_det = model, conf, iou, max_det

    def forward(self, x):
        y = self.model(x)[0].transpose(0, 1)             # [N, 4 + nc]
        xy, wh = y[:, 0:2], y[:, 2:4]
        boxes = torch.cat((xy - wh / 2, xy + wh / 2), 1)
        scores, cls = y[:, 4:].max(1)
        keep = scores > self.conf                         # NonZero + Gather
        boxes, scores, cls = boxes[keep], scores[keep], cls[keep]
        idx = torchvision.ops.batched_nms(boxes, scores, cls, self.iou)[: self.max_det]
        return torch.cat((boxes[idx], scores[idx, None], cls[idx, None].float()), 1).unsqueeze(0)

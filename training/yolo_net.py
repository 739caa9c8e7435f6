"""A small YOLOv8-layout detector in plain torch (training only; never imported at run time).

Backbone and neck are small (strided Conv-BN-SiLU blocks, a top-down FPN); the ``Detect`` head
is ultralytics' (``nn/modules/head.py``, 8.1-8.3) module for module: per level ``cv2[i]`` (box
branch: Conv 3x3, Conv 3x3, Conv2d 1x1 -> 4 * reg_max) and ``cv3[i]`` (class branch -> nc),
``DFL`` (softmax over 16 bins, a frozen 1x1 conv with weights 0..15), ``make_anchors`` (cell
centres, offset 0.5), ``dist2bbox`` (xywh) times the stride, sigmoid scores. In eval mode the
forward returns ultralytics' export output [B, 4 + nc, A] (cx, cy, w, h in input pixels, then
class probabilities), so ``torch.onnx.export`` writes the Detect export pattern.
"""

from __future__ import annotations

import math

import torch
from torch import nn

REG_MAX = 16
STRIDES = (8, 16, 32)


class Conv(nn.Module):
    """ultralytics Conv: Conv2d (no bias) + BatchNorm2d + SiLU."""

    def __init__(self, c1: int, c2: int, k: int = 1, s: int = 1):
        super().__init__()
        self.conv = nn.Conv2d(c1, c2, k, s, k // 2, bias=False)
        self.bn = nn.BatchNorm2d(c2, eps=1e-3, momentum=0.03)
        self.act = nn.SiLU()

    def forward(self, x):
        return self.act(self.bn(self.conv(x)))


class DFL(nn.Module):
    """Distribution focal loss integral: expectation of a softmax over reg_max bins."""

    def __init__(self, c1: int = REG_MAX):
        super().__init__()
        self.conv = nn.Conv2d(c1, 1, 1, bias=False).requires_grad_(False)
        self.conv.weight.data[:] = torch.arange(c1, dtype=torch.float).view(1, c1, 1, 1)
        self.c1 = c1

    def forward(self, x):
        b, _, a = x.shape
        return self.conv(x.view(b, 4, self.c1, a).transpose(2, 1).softmax(1)).view(b, 4, a)


def make_anchors(feats, strides, offset: float = 0.5):
    """Anchor points [A, 2] (x, y in cells + offset) and strides [A, 1], levels concatenated."""
    points, stride_list = [], []
    for feat, stride in zip(feats, strides):
        _, _, h, w = feat.shape
        sx = torch.arange(w, dtype=feat.dtype) + offset
        sy = torch.arange(h, dtype=feat.dtype) + offset
        sy, sx = torch.meshgrid(sy, sx, indexing="ij")
        points.append(torch.stack((sx, sy), -1).view(-1, 2))
        stride_list.append(torch.full((h * w, 1), float(stride), dtype=feat.dtype))
    return torch.cat(points), torch.cat(stride_list)


def dist2bbox(distance, anchor_points, xywh: bool = True, dim: int = -1):
    """(l, t, r, b) distances -> (cx, cy, w, h) or (x1, y1, x2, y2)."""
    lt, rb = distance.chunk(2, dim)
    x1y1 = anchor_points - lt
    x2y2 = anchor_points + rb
    if xywh:
        return torch.cat(((x1y1 + x2y2) / 2, x2y2 - x1y1), dim)
    return torch.cat((x1y1, x2y2), dim)


class Detect(nn.Module):
    """ultralytics YOLOv8 Detect head (see the module docstring)."""

    def __init__(self, nc: int, ch: tuple[int, ...]):
        super().__init__()
        self.nc, self.nl, self.reg_max = nc, len(ch), REG_MAX
        self.no = nc + REG_MAX * 4
        self.stride = torch.tensor(STRIDES, dtype=torch.float)
        c2, c3 = max(16, ch[0] // 4, REG_MAX * 4), max(ch[0], min(nc, 100))
        self.cv2 = nn.ModuleList(nn.Sequential(Conv(x, c2, 3), Conv(c2, c2, 3),
                                               nn.Conv2d(c2, 4 * REG_MAX, 1)) for x in ch)
        self.cv3 = nn.ModuleList(nn.Sequential(Conv(x, c3, 3), Conv(c3, c3, 3),
                                               nn.Conv2d(c3, nc, 1)) for x in ch)
        self.dfl = DFL(REG_MAX)

    def bias_init(self, imgsz: int = 640) -> None:
        """ultralytics' initial biases: box 1.0, class log(5 / nc / (imgsz / stride)^2)."""
        for a, b, s in zip(self.cv2, self.cv3, STRIDES):
            a[-1].bias.data[:] = 1.0
            b[-1].bias.data[:self.nc] = math.log(5 / self.nc / (imgsz / s) ** 2)

    def forward(self, x: list):
        for i in range(self.nl):
            x[i] = torch.cat((self.cv2[i](x[i]), self.cv3[i](x[i])), 1)
        if self.training:
            return x
        shape = x[0].shape
        x_cat = torch.cat([xi.view(shape[0], self.no, -1) for xi in x], 2)
        anchors, strides = (t.transpose(0, 1) for t in make_anchors(x, STRIDES, 0.5))
        box, cls = x_cat.split((self.reg_max * 4, self.nc), 1)
        dbox = dist2bbox(self.dfl(box), anchors.unsqueeze(0), xywh=True, dim=1) * strides
        return torch.cat((dbox, cls.sigmoid()), 1)


class TinyYolo(nn.Module):
    """Backbone (stride 2, 4, 8, 16, 32) + top-down FPN + Detect on P3, P4, P5."""

    def __init__(self, nc: int = 3, width: int = 16):
        super().__init__()
        w = width
        self.stem = nn.Sequential(Conv(3, w, 3, 2), Conv(w, 2 * w, 3, 2), Conv(2 * w, 2 * w, 3))
        self.p3 = nn.Sequential(Conv(2 * w, 4 * w, 3, 2), Conv(4 * w, 4 * w, 3))
        self.p4 = nn.Sequential(Conv(4 * w, 6 * w, 3, 2), Conv(6 * w, 6 * w, 3))
        self.p5 = nn.Sequential(Conv(6 * w, 8 * w, 3, 2), Conv(8 * w, 8 * w, 3))
        self.up = nn.Upsample(scale_factor=2, mode="nearest")
        self.n4 = Conv(8 * w + 6 * w, 6 * w, 3)
        self.n3 = Conv(6 * w + 4 * w, 4 * w, 3)
        self.detect = Detect(nc, (4 * w, 6 * w, 8 * w))

    def forward(self, x):
        p3 = self.p3(self.stem(x))
        p4 = self.p4(p3)
        p5 = self.p5(p4)
        n4 = self.n4(torch.cat((self.up(p5), p4), 1))
        n3 = self.n3(torch.cat((self.up(n4), p3), 1))
        return self.detect([n3, n4, p5])

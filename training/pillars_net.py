"""A small PointPillars in plain torch with OpenPCDet semantics (training only).

- PillarVFE: the 10 features of ``ops.pillars.reference.pillar_features`` (padded rows zero),
  one PFN layer Linear(10 -> 64, no bias) -> BatchNorm1d(eps 1e-3, momentum 0.01) -> ReLU ->
  max over the 32 rows (padded rows included, as OpenPCDet).
- PointPillarScatter into [64, ny, nx].
- BEV backbone (a smaller BaseBEVBackbone): block 1 at stride 2, block 2 at stride 4, each
  upsampled to stride 2 (ConvTranspose) and concatenated.
- AnchorHeadSingle: 1x1 convs to cls [A*K], box [A*7], dir [A*2] per cell, A = 6 anchors per
  cell in the order Car r0, Car r1, Ped r0, Ped r1, Cyc r0, Cyc r1; outputs permuted to NHWC
  like CUDA-PointPillars' export (cls_preds, box_preds, dir_cls_preds).
"""

from __future__ import annotations

import torch
from torch import nn

NUM_FEATURES = 64


class PFN(nn.Module):
    """PillarVFE with one PFN layer: [P, 32, 10] -> [P, 64].

    Same function as Linear -> BatchNorm1d over all P * 32 rows -> ReLU -> max over the rows,
    computed without materialising the padded rows: they are exact zeros, so Linear gives 0
    there and BatchNorm gives the per-channel constant (0 - mean) * scale + beta; the batch
    statistics count them analytically. About 10x less work (3-4 real points per pillar)."""

    def __init__(self, channels: int = NUM_FEATURES):
        super().__init__()
        self.linear = nn.Linear(10, channels, bias=False)
        self.norm = nn.BatchNorm1d(channels, eps=1e-3, momentum=0.01)

    def forward(self, features: torch.Tensor, num_points: torch.Tensor) -> torch.Tensor:
        P, K, _ = features.shape
        real = torch.arange(K)[None, :] < num_points[:, None]
        owner = torch.arange(P)[:, None].expand(P, K)[real]
        x = self.linear(features[real])  # [R, C], real rows only
        norm, rows = self.norm, P * K
        if self.training:
            mean = x.sum(0) / rows
            var = (x * x).sum(0) / rows - mean * mean
            with torch.no_grad():
                norm.num_batches_tracked += 1  # momentum None: cumulative average, as torch
                m = norm.momentum if norm.momentum is not None else \
                    1.0 / float(norm.num_batches_tracked)
                norm.running_mean.mul_(1 - m).add_(m * mean)
                norm.running_var.mul_(1 - m).add_(m * var * rows / max(rows - 1, 1))
        else:
            mean, var = norm.running_mean, norm.running_var
        scale = norm.weight / torch.sqrt(var + norm.eps)
        y = torch.relu((x - mean) * scale + norm.bias)
        padded = torch.relu(-mean * scale + norm.bias)  # every padded row's value
        out = padded[None, :] * (num_points < K).to(y.dtype)[:, None]  # relu >= 0: 0 is neutral
        index = owner[:, None].expand(-1, y.shape[1])
        return out.scatter_reduce(0, index, y, reduce="amax", include_self=True)


def _block(c_in: int, c_out: int, stride: int, layers: int) -> nn.Sequential:
    mods = [nn.Conv2d(c_in, c_out, 3, stride, 1, bias=False),
            nn.BatchNorm2d(c_out, eps=1e-3, momentum=0.01), nn.ReLU()]
    for _ in range(layers):
        mods += [nn.Conv2d(c_out, c_out, 3, 1, 1, bias=False),
                 nn.BatchNorm2d(c_out, eps=1e-3, momentum=0.01), nn.ReLU()]
    return nn.Sequential(*mods)


class BevHead(nn.Module):
    """[B, 64, ny, nx] -> (cls [B, H, W, A*K], box [B, H, W, A*7], dir [B, H, W, A*2]), H = ny/2."""

    def __init__(self, channels=(32, 64), up: int = 64, anchors: int = 6, classes: int = 3):
        super().__init__()
        c1, c2 = channels
        self.block1 = _block(NUM_FEATURES, c1, 2, 2)
        self.block2 = _block(c1, c2, 2, 2)
        self.up1 = nn.Sequential(nn.ConvTranspose2d(c1, up, 1, 1, bias=False),
                                 nn.BatchNorm2d(up, eps=1e-3, momentum=0.01), nn.ReLU())
        self.up2 = nn.Sequential(nn.ConvTranspose2d(c2, up, 2, 2, bias=False),
                                 nn.BatchNorm2d(up, eps=1e-3, momentum=0.01), nn.ReLU())
        self.conv_cls = nn.Conv2d(2 * up, anchors * classes, 1)
        self.conv_box = nn.Conv2d(2 * up, anchors * 7, 1)
        self.conv_dir = nn.Conv2d(2 * up, anchors * 2, 1)
        nn.init.constant_(self.conv_cls.bias, -4.595)  # OpenPCDet: -log((1 - 0.01) / 0.01)
        nn.init.normal_(self.conv_box.weight, std=0.001)

    def forward(self, bev: torch.Tensor):
        x1 = self.block1(bev)
        x2 = self.block2(x1)
        x = torch.cat([self.up1(x1), self.up2(x2)], dim=1)
        return (self.conv_cls(x).permute(0, 2, 3, 1), self.conv_box(x).permute(0, 2, 3, 1),
                self.conv_dir(x).permute(0, 2, 3, 1))


class PointPillarsNet(nn.Module):
    """PFN + scatter + BevHead, for training (batches of pillar sets)."""

    def __init__(self, ny: int, nx: int, channels=(32, 64), up: int = 64):
        super().__init__()
        self.ny, self.nx = ny, nx
        self.pfn = PFN()
        self.bev = BevHead(channels, up)

    def scatter(self, features: torch.Tensor, coords: torch.Tensor) -> torch.Tensor:
        """[P, 64] features at (y, x) = coords[:, 1:] of a [64, ny, nx] map of zeros."""
        canvas = features.new_zeros(NUM_FEATURES, self.ny * self.nx)
        canvas[:, coords[:, 1] * self.nx + coords[:, 2]] = features.T
        return canvas.view(NUM_FEATURES, self.ny, self.nx)

    def forward(self, pillar_sets: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]):
        """pillar_sets: per sample (features [P, 32, 10], coords [P, 3] (z, y, x), points [P])."""
        maps = [self.scatter(self.pfn(feats, num), coords) for feats, coords, num in pillar_sets]
        return self.bev(torch.stack(maps))

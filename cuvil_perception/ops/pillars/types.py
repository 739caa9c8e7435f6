"""The data the PointPillars stages hand each other: static-shape buffers plus counts."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# Indices into ``Pillars.counts`` (int64 [5]).
COUNT, DROPPED_POINTS, DROPPED_PILLARS, INVALID_POINTS, OUT_OF_RANGE = range(5)
COUNT_NAMES = ("count", "dropped_points", "dropped_pillars", "invalid_points", "out_of_range")


@dataclass
class Pillars:
    """Output of ``pillarize``; static shapes, only the first ``count`` pillars are meaningful.

    voxels:     float32 [max_pillars, 32, 4]  (x, y, z, r) per point, input order; rows past a
                pillar's ``num_points`` and pillars past ``count`` are zero
    coords:     int32 [max_pillars, 3]        (z, y, x) cell of each pillar; zero past ``count``
    num_points: int32 [max_pillars]           real points per pillar (1..32); zero past ``count``
    counts:     int64 [5]                     count, dropped_points (inside the range but not in
                ``voxels``: 33rd+ points and points of dropped pillars), dropped_pillars (cells past
                ``max_pillars``), invalid_points (a NaN/inf in any of the 4 values),
                out_of_range (finite points outside the range)
    """

    voxels: np.ndarray
    coords: np.ndarray
    num_points: np.ndarray
    counts: np.ndarray

    @property
    def count(self) -> int:
        return int(self.counts[COUNT])

    def stats(self) -> dict[str, int]:
        """The counters by name."""
        return {name: int(v) for name, v in zip(COUNT_NAMES, self.counts)}


@dataclass(frozen=True)
class PfnWeights:
    """PillarVFE's single PFN layer: Linear(10 -> C, no bias) -> BatchNorm1d(C) -> ReLU.

    linear: float32 [10, C] (features @ linear, the ONNX MatMul layout; torch's weight transposed).
    Feature order: x, y, z, r, xyz - pillar mean, xyz - cell centre.
    """

    linear: np.ndarray
    gamma: np.ndarray
    beta: np.ndarray
    mean: np.ndarray
    var: np.ndarray
    eps: float = 1e-3

    @property
    def channels(self) -> int:
        return int(self.linear.shape[1])

    def folded(self) -> tuple[np.ndarray, np.ndarray]:
        """BN folded into the linear layer: (weight float32 [10, C], bias float32 [C]) with
        BN(f @ linear) == f @ weight + bias up to rounding."""
        scale = self.gamma.astype(np.float64) / np.sqrt(self.var.astype(np.float64) + self.eps)
        weight = self.linear.astype(np.float64) * scale[None, :]
        bias = self.beta.astype(np.float64) - self.mean.astype(np.float64) * scale
        return weight.astype(np.float32), bias.astype(np.float32)


@dataclass
class Candidates:
    """Anchors whose score passed the threshold, in anchor-index order (static buffers).

    boxes:   float32 [cap, 7] (x, y, z, dx, dy, dz, heading), LiDAR frame, metres / radians
    scores:  float32 [cap]    sigmoid of the best class logit
    labels:  int32 [cap]      0-based class index (OpenPCDet reports label + 1)
    anchor:  int32 [cap]      anchor index ((row * W + col) * anchors_per_cell + k)
    count:   valid rows; ``overflow``: anchors that passed but did not fit in ``cap``
    """

    boxes: np.ndarray
    scores: np.ndarray
    labels: np.ndarray
    anchor: np.ndarray
    count: int
    overflow: int


@dataclass(frozen=True)
class ConvLayer:
    """The first BEV layer when it is Conv (+ BatchNormalization, folded) + ReLU, fused with the
    scatter: out = relu(conv2d(canvas, weight, stride, pads) + bias).

    weight: float32 [C_out, C_in, kh, kw] (BN folded in); bias: float32 [C_out];
    stride: (sy, sx); pads: (top, left, bottom, right) zero padding, cells.
    """

    weight: np.ndarray
    bias: np.ndarray
    stride: tuple
    pads: tuple

    @property
    def channels(self) -> tuple[int, int]:
        """(C_in, C_out)."""
        return int(self.weight.shape[1]), int(self.weight.shape[0])

    @property
    def kernel(self) -> tuple[int, int]:
        return int(self.weight.shape[2]), int(self.weight.shape[3])

    def out_size(self, ny: int, nx: int) -> tuple[int, int]:
        """(H_out, W_out) of the layer on an [ny, nx] canvas (ONNX Conv, no dilation)."""
        (kh, kw), (sy, sx), (top, left, bottom, right) = self.kernel, self.stride, self.pads
        return (ny + top + bottom - kh) // sy + 1, (nx + left + right - kw) // sx + 1


@dataclass(frozen=True)
class CellHeadWeights:
    """The box and direction heads when they are 1x1 convolutions on the class head's feature
    map F [C_f, H, W]: box = box_weight @ F[:, cell] + box_bias (A*7 values per cell, NHWC
    order: anchor-major), dir likewise (A*2).

    box_weight float32 [A*7, C_f], box_bias [A*7], dir_weight [A*2, C_f], dir_bias [A*2].
    """

    box_weight: np.ndarray
    box_bias: np.ndarray
    dir_weight: np.ndarray
    dir_bias: np.ndarray

    @property
    def features(self) -> int:
        return int(self.box_weight.shape[1])


@dataclass
class CellHeads:
    """Box and direction values computed at candidate cells only (static buffers).

    box: float32 [H*W, A*7], dir: float32 [H*W, A*2] (the NHWC head maps; rows of cells not in
    ``cells[:count]`` are not meaningful); cells: int32 [H*W] ascending candidate cells (a cell
    whose best class logit reaches the decode gate); count: how many.
    """

    box: np.ndarray
    dir: np.ndarray
    cells: np.ndarray
    count: int

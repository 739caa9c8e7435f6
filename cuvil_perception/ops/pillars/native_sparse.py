"""The sparse kernels bound to their static buffers (fused scatter + first conv, heads at
candidate cells), plus twins of ``reference.conv_scatter`` and ``reference.head_cells``.

As in ``native``: each ``*Kernel`` owns its persistent buffers for one static configuration
(allocated as the kernel's signature states them: `compile.buffers.allocate`); results are views of them, valid until the next call on the same object.
"""

from __future__ import annotations

import numpy as np

from ...compile.buffers import allocate
from ...compile.lang.types import MAX_LANES
from ...errors import ConfigError
from .config import HeadConfig, PillarConfig
from .kernel_conv_scatter import conv_scatter_spec
from .kernel_head_cells import head_cells_spec
from .native import _Bound, _check_rows
from .types import CellHeads, CellHeadWeights, ConvLayer


class ConvScatterKernel(_Bound):
    """Scatter fused into the first conv: features [P, C_in] -> persistent NHWC map
    float32 [H_out, W_out, C_out] (see kernel_conv_scatter); ``reached``: output cells that some
    pillar reached in the last call."""

    def __init__(self, config: PillarConfig, conv: ConvLayer):
        super().__init__()
        cin, cout = conv.channels
        if cin != config.num_features:
            raise ValueError(f"the first conv reads {cin} channels, the PFN gives "
                             f"{config.num_features}")
        self.config, self.conv = config, conv
        self.spec = conv_scatter_spec(config, conv)
        kh, kw = conv.kernel
        self.weights = np.ascontiguousarray(
            conv.weight.transpose(2, 3, 1, 0).reshape(kh * kw, cin, cout), np.float32)
        self.bias = np.ascontiguousarray(conv.bias, np.float32)
        # Every cell starts as relu(bias), the value of a cell no pillar reaches; written once
        # here so the pages are committed before frame 0.
        self.out = allocate(self.spec, "out")
        self.out[...] = np.maximum(self.bias, 0)
        self.mark, self.touched, self.prev, self.prev_count = (
            allocate(self.spec, n) for n in ("mark", "touched", "prev", "prev_count"))
        self.reached = 0
        self._addr = tuple(a.ctypes.data for a in (
            self.weights, self.bias, self.out, self.mark, self.touched, self.prev,
            self.prev_count))

    def __call__(self, features: np.ndarray, coords: np.ndarray, count: int) -> np.ndarray:
        """features float32 [P, C_in], coords int32 [P, 3] (z, y, x) -> [H_out, W_out, C_out]."""
        _check_rows(features, coords, count, self.config)
        if self.kernel is None:
            self.open()
        self.reached = int(self.kernel(features.ctypes.data, coords.ctypes.data, int(count),
                                       *self._addr))
        return self.out


class HeadCellsKernel(_Bound):
    """Box and direction heads at candidate cells into persistent NHWC maps (see
    kernel_head_cells): (class map, F in channel parts) -> CellHeads. ``parts``: the channel
    count of each part (default: F in one piece); ``nhwc``: the parts are [H, W, C_k]."""

    def __init__(self, map_size: tuple, head: HeadConfig, weights: CellHeadWeights,
                 parts: tuple | None = None, nhwc: bool = False):
        super().__init__()
        self.parts = tuple(parts) if parts else (weights.features,)
        if sum(self.parts) != weights.features:
            raise ValueError(f"feature parts {self.parts} do not add up to the heads' "
                             f"{weights.features} channels")
        groups = head.anchors_per_cell * head.num_classes
        if groups > MAX_LANES:  # the kernel's gate loads a cell's logits as one vector
            raise ConfigError(f"{groups} class logits per cell ({head.anchors_per_cell} anchors "
                              f"x {head.num_classes} classes), more than the sparse heads' "
                              f"{MAX_LANES} lanes; set `sparse: false`", "sparse")
        self.spec = head_cells_spec(map_size, head, self.parts, nhwc)
        jb, jd = len(weights.box_bias), len(weights.dir_bias)
        self.weights = allocate(self.spec, "weights")  # rows J rounded up to 16-lane vectors
        self.weights[:, :jb] = weights.box_weight.T
        self.weights[:, jb:jb + jd] = weights.dir_weight.T
        self.bias = allocate(self.spec, "bias")
        self.bias[:jb], self.bias[jb:jb + jd] = weights.box_bias, weights.dir_bias
        self.sizes = (self.spec.static["cells"], self.spec.static["groups"])
        self.out = CellHeads(*(allocate(self.spec, n) for n in ("box", "dir", "found")), 0)
        self._addr = tuple(a.ctypes.data for a in (self.weights, self.bias, self.out.box,
                                                   self.out.dir, self.out.cells))

    def __call__(self, cls_map: np.ndarray, feats) -> CellHeads:
        """cls_map float32 (NHWC, G logits per cell); feats: F float32 [1, C_f, H, W], or its
        channel parts [1, C_k, H, W] in order."""
        cells, groups = self.sizes
        cls_map = np.ascontiguousarray(cls_map, np.float32)
        feats = [np.ascontiguousarray(f, np.float32) for f in _as_parts(feats)]
        sizes = tuple(f.size for f in feats)
        if cls_map.size != cells * groups or sizes != tuple(c * cells for c in self.parts):
            raise ValueError(f"head maps have {cls_map.size} logits and {sizes} features, "
                             f"expected {cells} cells x {groups} and x {self.parts}")
        table = np.array([f.ctypes.data for f in feats], np.uint64)
        if self.kernel is None:
            self.open()
        self.out.count = int(self.kernel(cls_map.ctypes.data, table.ctypes.data, *self._addr))
        return self.out


def _as_parts(feats) -> list:
    return list(feats) if isinstance(feats, (list, tuple)) else [feats]


def conv_scatter(features: np.ndarray, coords: np.ndarray, count: int, conv: ConvLayer,
                 config: PillarConfig) -> np.ndarray:
    """Native ``reference.conv_scatter`` (a fresh kernel object: its own map)."""
    return ConvScatterKernel(config, conv).open()(features, coords, count)


def head_cells(cls_map: np.ndarray, feat, weights: CellHeadWeights,
               head: HeadConfig) -> CellHeads:
    """Native ``reference.head_cells`` (rows of non-candidate cells are zero: fresh buffers)."""
    parts = _as_parts(feat)
    height, width = parts[0].shape[-2:]
    kernel = HeadCellsKernel((height, width), head, weights, tuple(p.shape[1] for p in parts))
    return kernel.open()(cls_map, parts)
